//! Picks the next token from a row of logits: greedy at temperature 0, otherwise temperature,
//! top-k and top-p (nucleus) sampling with a seeded generator; plus the logit adjustments and
//! log-probabilities the server offers (penalties, min-p, logprobs). Which side picks, and the
//! order of the draw both sides follow: `crate::sampling`.

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
    /// Uniforms drawn from `rng` so far (one per non-greedy `sample`).
    draws: u64,
}

impl Sampler {
    pub fn new(cfg: SamplerConfig) -> Self {
        let rng = SplitMix(cfg.seed);
        Sampler { cfg, rng, draws: 0 }
    }

    pub fn config(&self) -> &SamplerConfig {
        &self.cfg
    }

    /// Uniforms drawn so far: the next `sample` that draws uses number `draws()` (0-based) of
    /// the seed's SplitMix stream.
    pub fn draws(&self) -> u64 {
        self.draws
    }

    /// Moves the stream past one draw made elsewhere (a backend that picked the token itself
    /// with this sampler's settings and draw number, `Backend::decode_and_pick`).
    pub fn skip_draw(&mut self) {
        self.rng.next_u64();
        self.draws += 1;
    }

    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        if self.cfg.temperature <= 0.0 {
            return argmax(logits);
        }
        let (ids, probs) = self.nucleus(logits);
        let total: f32 = probs.iter().sum();
        let r = self.uniform() * total;
        let mut acc = 0.0;
        for (i, p) in probs.iter().enumerate() {
            acc += p;
            if r < acc {
                return ids[i] as u32;
            }
        }
        ids[ids.len() - 1] as u32
    }

    /// The distribution `sample` draws from, as (token, probability) pairs summing to 1, most
    /// likely first: the argmax alone when greedy.
    pub fn distribution(&self, logits: &[f32]) -> Vec<(u32, f32)> {
        if self.cfg.temperature <= 0.0 {
            return vec![(argmax(logits), 1.0)];
        }
        let (ids, probs) = self.nucleus(logits);
        let total: f32 = probs.iter().sum();
        ids.into_iter().zip(probs).map(|(i, p)| (i as u32, p / total)).collect()
    }

    /// The next uniform in [0, 1) of the seeded stream.
    pub fn uniform(&mut self) -> f32 {
        self.draws += 1;
        self.rng.next_f32()
    }

    /// Candidates sorted by logit (ties to the lower id), cut to top-k, then to the smallest prefix
    /// whose mass reaches top_p (at least one token); with their softmax probabilities at the
    /// temperature over the top-k (not renormalised after the top-p cut).
    fn nucleus(&self, logits: &[f32]) -> (Vec<usize>, Vec<f32>) {
        let mut order = top_ids(logits, if self.cfg.top_k > 0 { self.cfg.top_k } else { logits.len() });
        let max = logits[order[0]];
        let mut probs: Vec<f32> = order.iter().map(|&i| ((logits[i] - max) / self.cfg.temperature).exp()).collect();
        let total: f32 = probs.iter().sum();
        probs.iter_mut().for_each(|p| *p /= total);
        let mut mass = 0.0;
        let keep = probs
            .iter()
            .position(|p| {
                mass += p;
                mass >= self.cfg.top_p
            })
            .map_or(probs.len(), |i| i + 1);
        order.truncate(keep);
        probs.truncate(keep);
        (order, probs)
    }
}

/// OpenAI's penalties on tokens already generated: `frequency` × (times seen) + `presence` (once
/// seen at all) is subtracted from each such token's logit. `counts` holds (token, times seen).
pub fn apply_penalties(
    logits: &mut [f32],
    counts: &std::collections::HashMap<u32, u32>,
    presence: f32,
    frequency: f32,
) {
    if presence == 0.0 && frequency == 0.0 {
        return;
    }
    for (&token, &n) in counts {
        if let Some(l) = logits.get_mut(token as usize) {
            *l -= frequency * n as f32 + if n > 0 { presence } else { 0.0 };
        }
    }
}

/// Min-p: drops every token whose probability at `temperature` is below `min_p` × the most
/// likely token's, by setting its logit to −∞. p_i / p_max = exp((l_i − l_max) / T), so the cut
/// is a logit threshold. No-op for `min_p` ≤ 0 or greedy decoding.
pub fn apply_min_p(logits: &mut [f32], min_p: f32, temperature: f32) {
    if min_p <= 0.0 || temperature <= 0.0 || logits.is_empty() {
        return;
    }
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let threshold = max + temperature * min_p.min(1.0).ln();
    for l in logits.iter_mut() {
        if *l < threshold {
            *l = f32::NEG_INFINITY;
        }
    }
}

/// Log-probability of `token` under softmax(`logits`), and the `top` most likely tokens with
/// theirs (most likely first, ties by lower id). Computed in f64 over the whole row.
pub fn logprobs(logits: &[f32], token: u32, top: usize) -> (f32, Vec<(u32, f32)>) {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let log_total = logits.iter().map(|&l| (l as f64 - max).exp()).sum::<f64>().ln() + max;
    let lp = |i: usize| (logits[i] as f64 - log_total) as f32;
    let best = top_ids(logits, top);
    let chosen = logits.get(token as usize).map_or(f32::NEG_INFINITY, |_| lp(token as usize));
    (chosen, best.into_iter().map(|i| (i as u32, lp(i))).collect())
}

/// The ids of the `k` largest logits, largest first, ties to the lower id (`f32::total_cmp`'s
/// order). For small `k` one pass keeps a sorted list, so a top-20 of 248K logits costs about
/// what an argmax does, not a sort of the vocabulary (12 ms).
pub fn top_ids(logits: &[f32], k: usize) -> Vec<usize> {
    let better = |a: usize, b: usize| logits[a].total_cmp(&logits[b]).then(b.cmp(&a)).is_gt();
    let by_rank =
        |a: &usize, b: &usize| if better(*a, *b) { std::cmp::Ordering::Less } else { std::cmp::Ordering::Greater };
    let n = logits.len();
    if k == 0 {
        return Vec::new();
    }
    if k > 256 {
        let mut order: Vec<usize> = (0..n).collect();
        if k < n {
            order.select_nth_unstable_by(k - 1, by_rank);
            order.truncate(k);
        }
        order.sort_unstable_by(by_rank);
        return order;
    }
    let mut best: Vec<usize> = Vec::with_capacity(k + 1);
    // The k-th best logit once there are k: anything below it (a plain float compare, true only
    // where total_cmp agrees) is out at once.
    let mut floor = f32::NEG_INFINITY;
    for (i, &l) in logits.iter().enumerate() {
        if best.len() == k && (l < floor || !better(i, best[k - 1])) {
            continue;
        }
        let at = best.partition_point(|&j| better(j, i));
        best.insert(at, i);
        best.truncate(k);
        if best.len() == k {
            floor = logits[best[k - 1]];
        }
    }
    best
}

/// A small deterministic generator (SplitMix64): the same seed gives the same stream everywhere.
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1), from the top 24 bits.
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
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
    fn penalties_follow_openai() {
        let mut logits = [1.0, 1.0, 1.0];
        let counts = std::collections::HashMap::from([(0u32, 3u32), (2, 1)]);
        apply_penalties(&mut logits, &counts, 0.5, 0.25);
        assert_eq!(logits, [1.0 - 0.75 - 0.5, 1.0, 1.0 - 0.25 - 0.5]);
    }

    #[test]
    fn min_p_cuts_relative_to_the_top_token() {
        // At T = 1, p_i / p_max = exp(l_i − l_max): 1, e^-1 ≈ 0.37, e^-3 ≈ 0.05.
        let mut logits = [0.0, -1.0, -3.0];
        apply_min_p(&mut logits, 0.1, 1.0);
        assert_eq!(logits, [0.0, -1.0, f32::NEG_INFINITY]);
        // A higher temperature flattens the distribution, so the same min_p keeps more.
        let mut logits = [0.0, -1.0, -3.0];
        apply_min_p(&mut logits, 0.1, 2.0);
        assert!(logits.iter().all(|l| l.is_finite()));
    }

    #[test]
    fn logprobs_are_log_softmax_with_sorted_top() {
        let logits = [1.0, 3.0, 2.0, 3.0];
        let (lp, top) = logprobs(&logits, 2, 3);
        let z: f64 = logits.iter().map(|&l| (l as f64).exp()).sum();
        assert!((lp as f64 - (2.0 - z.ln())).abs() < 1e-6);
        assert_eq!(top.iter().map(|t| t.0).collect::<Vec<_>>(), [1, 3, 2]);
        let mass: f64 = logits.iter().map(|&l| (l as f64 - z.ln()).exp()).sum();
        assert!((mass - 1.0).abs() < 1e-9);
        assert!(logprobs(&logits, 0, 0).1.is_empty());
    }

    #[test]
    fn top_ids_is_the_head_of_a_full_sort() {
        let mut r = SplitMix(5);
        // Coarse values (many ties), ±0 and -inf, so the order's tie rules are exercised.
        let mut v: Vec<f32> = (0..3_000).map(|_| ((r.next_f32() * 40.0).floor() - 20.0) / 4.0).collect();
        v[17] = -0.0;
        v[18] = 0.0;
        v[19] = f32::NEG_INFINITY;
        let mut sorted: Vec<usize> = (0..v.len()).collect();
        sorted.sort_by(|&a, &b| v[b].total_cmp(&v[a]).then(a.cmp(&b)));
        for k in [0, 1, 7, 64, 256, 257, 2_999, 3_000, 3_500] {
            assert_eq!(top_ids(&v, k), sorted[..k.min(v.len())], "k = {k}");
        }
    }

    #[test]
    fn skipping_a_draw_is_drawing_it() {
        let logits: Vec<f32> = (0..500).map(|i| ((i * 37) % 101) as f32 / 20.0).collect();
        let c = SamplerConfig { temperature: 1.0, top_k: 50, top_p: 0.9, seed: 11 };
        let mut a = Sampler::new(c.clone());
        let mut b = Sampler::new(c);
        let picked: Vec<u32> = (0..6).map(|_| a.sample(&logits)).collect();
        assert_eq!(a.draws(), 6);
        for _ in 0..3 {
            b.skip_draw();
        }
        assert_eq!(b.draws(), 3);
        assert_eq!((0..3).map(|_| b.sample(&logits)).collect::<Vec<_>>(), picked[3..]);
        // Greedy draws nothing.
        let mut g = sampler(0.0, 20, 0.9, 11);
        g.sample(&logits);
        assert_eq!(g.draws(), 0);
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
