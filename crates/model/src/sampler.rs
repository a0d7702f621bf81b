//! Picks the next token from a row of logits: greedy at temperature 0, otherwise temperature,
//! top-k and top-p (nucleus) sampling with a seeded generator.

#[derive(Clone, Debug)]
pub struct SamplerConfig {
    /// 0 means greedy (argmax).
    pub temperature: f32,
    /// 0 means no top-k cut.
    pub top_k: usize,
    /// 1 means no nucleus cut.
    pub top_p: f32,
    pub seed: u64,
}

pub struct Sampler {
    cfg: SamplerConfig,
    rng: SplitMix,
}

impl Sampler {
    pub fn new(cfg: SamplerConfig) -> Self {
        let rng = SplitMix(cfg.seed);
        Sampler { cfg, rng }
    }

    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        if self.cfg.temperature <= 0.0 {
            return argmax(logits);
        }
        // Candidates sorted by logit, cut to top-k.
        let mut order: Vec<usize> = (0..logits.len()).collect();
        order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
        if self.cfg.top_k > 0 {
            order.truncate(self.cfg.top_k);
        }
        let max = logits[order[0]];
        let mut probs: Vec<f32> = order.iter().map(|&i| ((logits[i] - max) / self.cfg.temperature).exp()).collect();
        let total: f32 = probs.iter().sum();
        probs.iter_mut().for_each(|p| *p /= total);
        // Smallest prefix whose mass reaches top_p (always at least one token).
        let mut mass = 0.0;
        let keep = probs
            .iter()
            .position(|p| {
                mass += p;
                mass >= self.cfg.top_p
            })
            .map_or(probs.len(), |i| i + 1);
        let kept = &probs[..keep];
        let total: f32 = kept.iter().sum();
        let r = (self.rng.next() >> 40) as f32 / (1u64 << 24) as f32 * total;
        let mut acc = 0.0;
        for (i, p) in kept.iter().enumerate() {
            acc += p;
            if r < acc {
                return order[i] as u32;
            }
        }
        order[keep - 1] as u32
    }
}

/// A small deterministic generator (SplitMix64): the same seed gives the same stream everywhere.
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Index of the largest value (the first one on ties).
pub fn argmax(v: &[f32]) -> u32 {
    let mut best = 0;
    for (i, x) in v.iter().enumerate() {
        if *x > v[best] {
            best = i;
        }
    }
    best as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampler(temperature: f32, top_k: usize, top_p: f32, seed: u64) -> Sampler {
        Sampler::new(SamplerConfig { temperature, top_k, top_p, seed })
    }

    #[test]
    fn temperature_zero_is_argmax() {
        assert_eq!(sampler(0.0, 0, 1.0, 1).sample(&[0.1, 2.0, -1.0, 2.0]), 1);
    }

    #[test]
    fn top_k_one_is_argmax() {
        let mut s = sampler(1.0, 1, 1.0, 7);
        for _ in 0..20 {
            assert_eq!(s.sample(&[0.5, 0.4, 3.0, 2.9]), 2);
        }
    }

    #[test]
    fn top_p_excludes_the_tail_and_seed_repeats() {
        let logits = [5.0, 4.9, -10.0, -10.0];
        let draw = |seed| {
            let mut s = sampler(1.0, 0, 0.9, seed);
            (0..50).map(|_| s.sample(&logits)).collect::<Vec<_>>()
        };
        let a = draw(3);
        assert!(a.iter().all(|&t| t < 2), "{a:?}");
        assert!(a.contains(&0) && a.contains(&1), "{a:?}");
        assert_eq!(a, draw(3));
    }
}
