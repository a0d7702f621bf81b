//! Picking the next token on the device: greedy (`argmax.cu`), or temperature / top-k / top-p
//! sampling with the CPU sampler's semantics (`sample_topk.cu`); and advancing the device-side
//! position. Which requests the device picks for, and the draw both sides follow:
//! `solo_model::sampling`.

use crate::kernels::{kernel_file, Launch};
use crate::runtime::{DevBuf, DevPtr, Gpu};
use anyhow::{anyhow, ensure, Result};
use solo_model::sampler::SamplerConfig;

kernel_file! {
    /// `argmax.cu`'s kernels.
    pub mod argmax_cu = "argmax.cu" {
        fn argmax_partial(logits: DevPtr, n: i32, part_val: DevPtr, part_idx: DevPtr);
        fn argmax_final(part_val: DevPtr, part_idx: DevPtr, parts: i32, out: DevPtr);
        fn advance_position(pos: DevPtr, n: i32);
    }
}

kernel_file! {
    /// `sample_topk.cu`'s kernels.
    pub mod sample_topk_cu = "sample_topk.cu" {
        fn sample_topk_partial(logits: DevPtr, n: i32, parts: DevPtr);
        fn sample_topk_final(parts: DevPtr, n: i32, params: DevPtr, out: DevPtr, history: Option<DevPtr>, history_cap: i32, candidates: Option<DevPtr>);
    }
}

/// Blocks of the first argmax pass (matches ARGMAX_PARTS in argmax.cu).
pub const ARGMAX_PARTS: usize = 256;

/// out (i32 on the device) = argmax(logits f32 [n]). `partials` holds ARGMAX_PARTS × 8 bytes.
pub fn argmax(gpu: &Gpu, logits: DevPtr, n: usize, partials: DevPtr, out: DevPtr) -> Result<()> {
    let idx = partials + (ARGMAX_PARTS * 4) as u64;
    argmax_cu::argmax_partial(gpu, Launch::new((ARGMAX_PARTS as u32, 1, 1), 256, 0), logits, n as i32, partials, idx)?;
    argmax_cu::argmax_final(gpu, Launch::new((1, 1, 1), 256, 0), partials, idx, ARGMAX_PARTS as i32, out)
}

/// *pos += n on the device.
pub fn advance_position(gpu: &Gpu, pos: DevPtr, n: usize) -> Result<()> {
    argmax_cu::advance_position(gpu, Launch::new((1, 1, 1), 1, 0), pos, n as i32)
}

/// Blocks of the first sampling pass (SAMPLE_PARTS in sample_topk.cu).
pub const SAMPLE_PARTS: usize = 128;
/// The most candidates the GPU sampler keeps: `top_k` must be in 1..=SAMPLE_MAX_TOP_K.
pub const SAMPLE_MAX_TOP_K: usize = solo_model::sampling::DEVICE_MAX_TOP_K;
/// Bytes of device scratch `sample` needs: SAMPLE_PARTS sorted lists of 64 candidate keys (u64).
pub const SAMPLE_SCRATCH_BYTES: usize = SAMPLE_PARTS * SAMPLE_MAX_TOP_K * 8;
/// Threads per block of both sampling kernels (SAMPLE_THREADS in sample_topk.cu).
const SAMPLE_THREADS: u32 = 1024;

/// The sampling parameters on the device (`struct SamplingParams` in sample_topk.cu, 32 bytes):
/// temperature f32, top_k i32, top_p f32, padding, seed u64, and `step` u64, the number of
/// draws made so far, which the sampler increments after each draw. The kernels read it at
/// every launch, so a captured graph follows the values last written. Zeroed (as `new` leaves
/// it) it means greedy.
pub struct SamplingParamsGpu {
    buf: DevBuf,
}

impl SamplingParamsGpu {
    pub const BYTES: usize = 32;

    /// Zeroed parameters: greedy.
    pub fn new(gpu: &Gpu) -> Result<Self> {
        Ok(SamplingParamsGpu { buf: gpu.alloc(Self::BYTES)? })
    }

    pub fn ptr(&self) -> DevPtr {
        self.buf.ptr()
    }

    /// Writes `cfg` and restarts the random stream (step 0), so the draws that follow are the
    /// CPU `Sampler::new(cfg)`'s. Synchronous; not allowed during graph capture.
    pub fn write(&self, gpu: &Gpu, cfg: &SamplerConfig) -> Result<()> {
        self.write_at(gpu, cfg, 0)
    }

    /// `write`, with the stream at draw number `draws` instead of 0: where a CPU sampler with
    /// `cfg` stands after `draws` draws, so the next draw is the one it would make.
    pub fn write_at(&self, gpu: &Gpu, cfg: &SamplerConfig, draws: u64) -> Result<()> {
        let mut b = Self::encode(cfg)?;
        b[24..32].copy_from_slice(&draws.to_le_bytes());
        gpu.write(self.ptr(), &b)
    }

    /// The device bytes for `cfg`, or an error for what the GPU sampler cannot do
    /// (`solo_model::sampling::device_can_pick`: greedy, or top_k in 1..=64).
    pub fn encode(cfg: &SamplerConfig) -> Result<[u8; Self::BYTES]> {
        solo_model::sampling::device_can_pick(cfg).map_err(|why| anyhow!("{why}"))?;
        let top_k = cfg.top_k.clamp(1, SAMPLE_MAX_TOP_K) as i32;
        let mut b = [0u8; Self::BYTES];
        b[0..4].copy_from_slice(&cfg.temperature.to_le_bytes());
        b[4..8].copy_from_slice(&top_k.to_le_bytes());
        b[8..12].copy_from_slice(&cfg.top_p.to_le_bytes());
        b[16..24].copy_from_slice(&cfg.seed.to_le_bytes());
        // b[24..32]: step 0
        Ok(b)
    }

    /// Draws made since the last `write` (reads the device; synchronises).
    pub fn draws(&self, gpu: &Gpu) -> Result<u64> {
        let b = gpu.download(self.ptr() + 24, 8)?;
        Ok(u64::from_le_bytes(b.try_into().unwrap()))
    }
}

/// The uniform in [0, 1) the GPU sampler uses for draw number `step` (0-based) under `seed`:
/// SplitMix64 at counter step + 1, which is the CPU `SplitMix(seed)`'s (step + 1)-th `next_f32`.
/// (Mirrors sample_topk.cu; the GPU computes it itself.)
pub fn counter_uniform(seed: u64, step: u64) -> f32 {
    let mut z = seed.wrapping_add(step.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 40) as f32 / (1u64 << 24) as f32
}

/// out (i32 on the device) = a token id drawn from logits (f32 [n]) with the parameters in
/// `params`, exactly as `solo_model::sampler::Sampler::sample` does (temperature ≤ 0: the argmax,
/// ties to the lower index); the device-side step advances by one per draw. `scratch` holds
/// SAMPLE_SCRATCH_BYTES. Two kernels, fixed shapes, no allocation or host sync: graph-capturable.
pub fn sample(
    gpu: &Gpu,
    logits: DevPtr,
    n: usize,
    params: &SamplingParamsGpu,
    scratch: DevPtr,
    out: DevPtr,
) -> Result<()> {
    launch_sample(gpu, logits, n, params, scratch, out, None, None)
}

/// `sample`, also appending the id to `history`, i32 [1 + capacity]: history[0] counts the ids
/// written after it (the host zeroes it; ids past `capacity` are dropped, not counted).
#[allow(clippy::too_many_arguments)]
pub fn sample_recording(
    gpu: &Gpu,
    logits: DevPtr,
    n: usize,
    params: &SamplingParamsGpu,
    scratch: DevPtr,
    out: DevPtr,
    history: DevPtr,
    capacity: usize,
) -> Result<()> {
    ensure!(capacity <= i32::MAX as usize, "sampling history of {capacity} ids is too long");
    launch_sample(gpu, logits, n, params, scratch, out, Some((history, capacity)), None)
}

/// `sample`, also writing the 64 best candidates to `candidates`: i32 ids [64], then their f32
/// logits [64], best first, ties to the lower id (the CPU's order). For tests and debugging;
/// entries past n are padding.
pub fn sample_with_candidates(
    gpu: &Gpu,
    logits: DevPtr,
    n: usize,
    params: &SamplingParamsGpu,
    scratch: DevPtr,
    out: DevPtr,
    candidates: DevPtr,
) -> Result<()> {
    launch_sample(gpu, logits, n, params, scratch, out, None, Some(candidates))
}

/// The two sampling kernels; `history` (ids, capacity) and `candidates` where asked for.
#[allow(clippy::too_many_arguments)]
fn launch_sample(
    gpu: &Gpu,
    logits: DevPtr,
    n: usize,
    params: &SamplingParamsGpu,
    scratch: DevPtr,
    out: DevPtr,
    history: Option<(DevPtr, usize)>,
    candidates: Option<DevPtr>,
) -> Result<()> {
    ensure!(n >= 1 && n <= i32::MAX as usize, "sampling over {n} logits");
    sample_topk_cu::sample_topk_partial(
        gpu,
        Launch::new((SAMPLE_PARTS as u32, 1, 1), SAMPLE_THREADS, 0),
        logits,
        n as i32,
        scratch,
    )?;
    sample_topk_cu::sample_topk_final(
        gpu,
        Launch::new((1, 1, 1), SAMPLE_THREADS, 0),
        scratch,
        n as i32,
        params.ptr(),
        out,
        history.map(|h| h.0),
        history.map_or(0, |h| h.1 as i32),
        candidates,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testutil::*;

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn argmax_matches_cpu_including_ties() {
        let gpu = gpu();
        let n = 248_320;
        let mut v = random(9, n, 10.0);
        v[200_001] = 50.0;
        v[100_000] = 50.0; // tie: the lower index wins
        let lb = gpu.upload_f32(&v).unwrap();
        let parts = gpu.alloc(ARGMAX_PARTS * 8).unwrap();
        let out = gpu.upload_i32(&[-1]).unwrap();
        argmax(gpu, lb.ptr(), n, parts.ptr(), out.ptr()).unwrap();
        assert_eq!(gpu.download_i32(out.ptr(), 1).unwrap()[0], 100_000);
        assert_eq!(solo_model::sampler::argmax(&v), 100_000);
    }

    // ---- GPU sampling (sample_topk.cu) ----

    use crate::runtime::DevBuf;
    use solo_model::sampler::{Sampler, SamplerConfig};

    const V: usize = 248_320;

    fn cfg(temperature: f32, top_k: usize, top_p: f32, seed: u64) -> SamplerConfig {
        SamplerConfig { temperature, top_k, top_p, seed }
    }

    /// The CPU sampler's candidate order: logit descending (total order), ties to the lower id.
    fn cpu_order(v: &[f32]) -> Vec<usize> {
        let mut order: Vec<usize> = (0..v.len()).collect();
        order.sort_by(|&a, &b| v[b].total_cmp(&v[a]).then(a.cmp(&b)));
        order
    }

    /// The CPU sampler's nucleus for `c`: each kept id with its probability of being drawn (f64).
    /// Asserts the top-p cut is not within rounding of top_p (so f32 on the GPU cuts the same).
    fn nucleus(v: &[f32], c: &SamplerConfig) -> Vec<(usize, f64)> {
        let mut order = cpu_order(v);
        order.truncate(c.top_k);
        let max = v[order[0]] as f64;
        let w: Vec<f64> = order.iter().map(|&i| ((v[i] as f64 - max) / c.temperature as f64).exp()).collect();
        let total: f64 = w.iter().sum();
        let (mut mass, mut keep) = (0.0, w.len());
        for (i, x) in w.iter().enumerate() {
            let before = mass;
            mass += x / total;
            if mass >= c.top_p as f64 {
                assert!(c.top_p as f64 - before > 1e-4 && mass - c.top_p as f64 > 1e-4, "top-p cut on a rounding edge");
                keep = i + 1;
                break;
            }
        }
        let kept: f64 = w[..keep].iter().sum();
        order[..keep].iter().zip(&w).map(|(&i, &x)| (i, x / kept)).collect()
    }

    /// Logits, parameters, scratch, output and a history of up to 4096 ids on the device.
    struct Fixture {
        logits: DevBuf,
        n: usize,
        params: SamplingParamsGpu,
        scratch: DevBuf,
        out: DevBuf,
        history: DevBuf,
    }

    const HISTORY: usize = 4096;

    impl Fixture {
        fn new(v: &[f32]) -> Self {
            let gpu = gpu();
            Fixture {
                logits: gpu.upload_f32(v).unwrap(),
                n: v.len(),
                params: SamplingParamsGpu::new(gpu).unwrap(),
                scratch: gpu.alloc(SAMPLE_SCRATCH_BYTES).unwrap(),
                out: gpu.upload_i32(&[-1]).unwrap(),
                history: gpu.alloc((1 + HISTORY) * 4).unwrap(),
            }
        }

        /// `count` draws by repeated launches (the device step advancing), after writing `c`
        /// (which restarts the stream) unless None; the ids from the device history.
        fn draw(&self, c: Option<&SamplerConfig>, count: usize) -> Vec<u32> {
            assert!(count <= HISTORY);
            let gpu = gpu();
            if let Some(c) = c {
                self.params.write(gpu, c).unwrap();
            }
            gpu.write(self.history.ptr(), &0i32.to_le_bytes()).unwrap();
            for _ in 0..count {
                let (l, s, o, h) = (self.logits.ptr(), self.scratch.ptr(), self.out.ptr(), self.history.ptr());
                sample_recording(gpu, l, self.n, &self.params, s, o, h, HISTORY).unwrap();
            }
            let got = gpu.download_i32(self.history.ptr(), 1 + count).unwrap();
            assert_eq!(got[0] as usize, count, "history count");
            let last = gpu.download_i32(self.out.ptr(), 1).unwrap()[0];
            if count > 0 {
                assert_eq!(last, got[count], "out holds the last draw");
            }
            got[1..].iter().map(|&t| t as u32).collect()
        }

        /// The 64 best candidates (ids, logits) as the GPU ranks them; also checks `out` (greedy).
        fn candidates(&self) -> (Vec<i32>, Vec<f32>) {
            let gpu = gpu();
            self.params.write(gpu, &cfg(0.0, 0, 1.0, 0)).unwrap();
            let cand = gpu.alloc(2 * SAMPLE_MAX_TOP_K * 4).unwrap();
            sample_with_candidates(
                gpu,
                self.logits.ptr(),
                self.n,
                &self.params,
                self.scratch.ptr(),
                self.out.ptr(),
                cand.ptr(),
            )
            .unwrap();
            let raw = gpu.download_i32(cand.ptr(), 2 * SAMPLE_MAX_TOP_K).unwrap();
            let ids = raw[..SAMPLE_MAX_TOP_K].to_vec();
            let logits = raw[SAMPLE_MAX_TOP_K..].iter().map(|&b| f32::from_bits(b as u32)).collect();
            assert_eq!(gpu.download_i32(self.out.ptr(), 1).unwrap()[0], ids[0], "greedy pick is the first candidate");
            (ids, logits)
        }
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn gpu_sampler_greedy_and_top_k_one_are_the_argmax_including_ties() {
        let gpu = gpu();
        let parts = gpu.alloc(ARGMAX_PARTS * 8).unwrap();
        let argmax_out = gpu.upload_i32(&[-1]).unwrap();
        // A tie across pass-1 blocks, a tie inside one block, and a unique maximum.
        let mut across = random(9, V, 10.0);
        across[200_001] = 50.0;
        across[100_000] = 50.0;
        let mut within = random(10, V, 10.0);
        within[1_003] = 50.0;
        within[1_000] = 50.0;
        let mut unique = random(11, V, 10.0);
        unique[77_777] = 12.0;
        for (v, want) in [(&across, 100_000u32), (&within, 1_000), (&unique, 77_777)] {
            assert_eq!(solo_model::sampler::argmax(v), want);
            let f = Fixture::new(v);
            argmax(gpu, f.logits.ptr(), V, parts.ptr(), argmax_out.ptr()).unwrap();
            assert_eq!(gpu.download_i32(argmax_out.ptr(), 1).unwrap()[0] as u32, want, "argmax kernel");
            for c in [
                cfg(0.0, 0, 1.0, 1),
                cfg(-1.0, 0, 0.5, 2),
                cfg(1.0, 1, 1.0, 3),
                cfg(1.0, 1, 0.0, 4),
                cfg(5.0, 1, 0.95, 5),
            ] {
                let got = f.draw(Some(&c), 20);
                assert!(got.iter().all(|&t| t == want), "{c:?}: {got:?}, want {want}");
                let mut cpu = Sampler::new(c.clone());
                assert!((0..3).all(|_| cpu.sample(v) == want), "CPU sampler {c:?}");
                // Greedy makes no draw; top_k 1 does (and ignores it), like the CPU.
                let draws = if c.temperature > 0.0 { 20 } else { 0 };
                assert_eq!(f.params.draws(gpu).unwrap(), draws, "{c:?}");
            }
        }
        // A tiny temperature is the argmax when the maximum is unique.
        let f = Fixture::new(&unique);
        let got = f.draw(Some(&cfg(1e-6, 64, 1.0, 6)), 20);
        assert!(got.iter().all(|&t| t == 77_777), "{got:?}");
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn gpu_top_candidates_match_cpu_order() {
        let coarse: Vec<f32> = random(13, V, 10.0).iter().map(|x| (x * 2.0).round() / 2.0).collect(); // thousands tie at the top
        let mut special = random(14, 3_000, 10.0).iter().map(|x| -x.abs()).collect::<Vec<f32>>();
        special[5] = -0.0;
        special[7] = 0.0;
        for i in (0..3_000).step_by(3) {
            special[i + 1] = f32::NEG_INFINITY;
        }
        let cases: Vec<(&str, Vec<f32>)> = vec![
            ("random", random(11, V, 10.0)),
            ("bf16-rounded (ties)", round_bf16(&random(12, V, 3.0))),
            ("coarse (many ties)", coarse),
            ("all equal", vec![0.25; V]),
            ("1M logits (several rounds per block)", random(15, 1_000_000, 10.0)),
            ("negative, ±0, -inf", special),
            ("64 logits", random(16, 64, 10.0)),
            ("50 logits", round_bf16(&random(17, 50, 1.0))),
            ("1 logit", vec![-3.5]),
        ];
        for (name, v) in &cases {
            let f = Fixture::new(v);
            let (ids, logits) = f.candidates();
            let m = v.len().min(SAMPLE_MAX_TOP_K);
            let want: Vec<i32> = cpu_order(v)[..m].iter().map(|&i| i as i32).collect();
            assert_eq!(&ids[..m], &want[..], "{name}: candidate ids");
            for (g, &i) in logits[..m].iter().zip(&want) {
                assert_eq!(g.to_bits(), v[i as usize].to_bits(), "{name}: candidate {i}'s logit");
            }
            eprintln!("{name}: top {m} candidates match");
        }
    }

    /// 5 clear candidates over a random background; top_k 20, top_p 0.95, temperature 0.7: the
    /// nucleus is the 5 and 7 background tokens. 4,000 draws: every kept token within 5 standard
    /// deviations of its CPU probability, nothing outside the nucleus, the step counts the draws.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn gpu_sampler_frequencies_match_cpu_probabilities() {
        let gpu = gpu();
        let mut v = random(21, V, 1.0);
        for (i, l) in [(1_234, 4.0), (50_000, 3.6), (120_000, 3.2), (199_999, 2.6), (248_000, 2.0)] {
            v[i] = l;
        }
        let c = cfg(0.7, 20, 0.95, 0xfeed);
        let kept = nucleus(&v, &c);
        assert_eq!(kept.len(), 12, "the test's nucleus");
        let f = Fixture::new(&v);
        let draws = 4_000;
        let got = f.draw(Some(&c), draws);
        assert_eq!(f.params.draws(gpu).unwrap(), draws as u64);
        let mut counts = std::collections::HashMap::<u32, usize>::new();
        for &t in &got {
            *counts.entry(t).or_default() += 1;
        }
        for &(id, p) in &kept {
            let n = counts.remove(&(id as u32)).unwrap_or(0) as f64;
            let (mean, sd) = (draws as f64 * p, (draws as f64 * p * (1.0 - p)).sqrt());
            eprintln!("token {id}: {n} draws, expected {mean:.1} ± {sd:.1}");
            assert!((n - mean).abs() <= 5.0 * sd + 1.0, "token {id}: {n} draws, expected {mean:.1} ± {sd:.1}");
        }
        assert!(counts.is_empty(), "tokens outside the nucleus drawn: {counts:?}");
    }

    /// The device's counter-based draws are the CPU SplitMix stream, so the GPU picks what the
    /// CPU sampler picks, draw for draw (up to expf rounding at a boundary: allow 2 in 600).
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn gpu_sampler_follows_the_cpu_sampler_draw_for_draw() {
        for (v, c, draws) in [
            (random(31, 5_000, 3.0), cfg(0.8, 40, 0.9, 42), 500),
            (random(32, V, 4.0), cfg(1.3, 64, 0.97, 7), 100),
            (round_bf16(&random(33, V, 2.0)), cfg(1.0, 20, 1.0, 9), 100),
        ] {
            let f = Fixture::new(&v);
            let got = f.draw(Some(&c), draws);
            let mut cpu = Sampler::new(c.clone());
            let want: Vec<u32> = (0..draws).map(|_| cpu.sample(&v)).collect();
            let differ = got.iter().zip(&want).filter(|(a, b)| a != b).count();
            let distinct = got.iter().collect::<std::collections::HashSet<_>>().len();
            eprintln!("{c:?}: {differ} of {draws} draws differ from the CPU sampler; {distinct} distinct tokens");
            assert!(differ <= 2, "{c:?}: {differ} of {draws} draws differ from the CPU sampler");
            assert!(distinct > 5, "{c:?}: only {distinct} distinct tokens");
        }
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn gpu_sampler_same_seed_same_stream_other_seed_other_stream() {
        let f = Fixture::new(&random(41, V, 3.0));
        let a = f.draw(Some(&cfg(1.0, 64, 0.95, 1)), 300);
        let b = f.draw(Some(&cfg(1.0, 64, 0.95, 1)), 300);
        assert_eq!(a, b, "writing the same config restarts the same stream");
        let c = f.draw(Some(&cfg(1.0, 64, 0.95, 2)), 300);
        let same = a.iter().zip(&c).filter(|(x, y)| x == y).count();
        assert!(same < 60, "seed 2 repeats seed 1 at {same} of 300 draws");
        // Not rewriting continues the stream: 150 + 150 draws are the 300.
        let first = f.draw(Some(&cfg(1.0, 64, 0.95, 1)), 150);
        let rest = f.draw(None, 150);
        assert_eq!([first, rest].concat(), a, "continuing the stream");
    }

    /// decode_sampled (the sampled decode graph) on a 4-layer random model picks what a host loop
    /// of Backend::decode + the CPU sampler picks, including a stream continued over two calls;
    /// so does a loop of Backend::decode_and_pick (the server's), which also leaves the logits
    /// `decode` gives.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn decode_sampled_matches_host_sampling() {
        use solo_model::{Backend, Logits};
        let model = crate::synthetic::random_model(4, 64, solo_model::Precision::Bf16).unwrap();
        let prompt = [11u32, 4_096, 77_000, 248_000, 5];
        // One prefill, copied for every run: the grouped MoE prefill adds with f32 atomics, so two
        // prefills of the same prompt differ in the last bits, and on a random model such a
        // difference can flip a later draw. The decode kernels are deterministic.
        let mut prefilled = model.try_new_state().unwrap();
        let first = solo_model::sampler::argmax(&model.prefill(&mut prefilled, &prompt, Logits::Last).unwrap());
        let run_device = |c: &SamplerConfig| {
            let mut s = model.copy_state(&prefilled).unwrap();
            let mut ids = model.decode_sampled(&mut s, Some(first), 6, Some(c)).unwrap();
            ids.extend(model.decode_sampled(&mut s, None, 6, None).unwrap());
            assert_eq!(s.position, prompt.len() + 12);
            ids
        };
        let run_host = |c: &SamplerConfig| {
            let mut s = model.copy_state(&prefilled).unwrap();
            let mut token = first;
            let mut sampler = Sampler::new(c.clone());
            (0..12)
                .map(|_| {
                    token = sampler.sample(&model.decode(&mut s, token).unwrap());
                    token
                })
                .collect::<Vec<u32>>()
        };
        // The server's loop: one `decode_and_pick` a token, the draws counted by the host sampler;
        // also the logits of the last pick.
        let run_picks = |c: &SamplerConfig| {
            let mut s = model.copy_state(&prefilled).unwrap();
            let mut token = first;
            let mut sampler = Sampler::new(c.clone());
            let ids: Vec<u32> = (0..12)
                .map(|_| {
                    token = model.decode_and_pick(&mut s, token, &mut sampler).unwrap().unwrap();
                    token
                })
                .collect();
            assert_eq!(sampler.draws(), if c.temperature > 0.0 { 12 } else { 0 });
            (ids, model.picked_logits().unwrap())
        };
        let last_logits = |ids: &[u32]| {
            let mut s = model.copy_state(&prefilled).unwrap();
            let fed = [&[first][..], &ids[..11]].concat();
            fed.iter().map(|&t| model.decode(&mut s, t).unwrap()).last().unwrap()
        };
        for c in [cfg(0.0, 0, 1.0, 0), cfg(1.0, 20, 0.95, 3), cfg(2.0, 64, 1.0, 4)] {
            let (device, host) = (run_device(&c), run_host(&c));
            eprintln!("{c:?}: device {device:?}");
            assert_eq!(device, host, "{c:?}");
            let (picked, logits) = run_picks(&c);
            assert_eq!(picked, host, "{c:?}: decode_and_pick");
            let want = last_logits(&host);
            assert!(logits.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "{c:?}: picked_logits");
        }
        // What the GPU sampler lacks is declined, the state untouched.
        let mut s = model.copy_state(&prefilled).unwrap();
        assert!(model.decode_and_pick(&mut s, first, &mut Sampler::new(cfg(1.0, 0, 0.9, 1))).is_none());
        assert!(model.decode_and_pick(&mut s, first, &mut Sampler::new(cfg(1.0, 65, 0.9, 1))).is_none());
        assert_eq!(s.position, prompt.len());
    }

    // ---- CPU-only ----

    #[test]
    fn sampling_params_validate_and_lay_out() {
        let b = SamplingParamsGpu::encode(&cfg(0.7, 20, 0.95, 0x0123_4567_89ab_cdef)).unwrap();
        assert_eq!(f32::from_le_bytes(b[0..4].try_into().unwrap()), 0.7);
        assert_eq!(i32::from_le_bytes(b[4..8].try_into().unwrap()), 20);
        assert_eq!(f32::from_le_bytes(b[8..12].try_into().unwrap()), 0.95);
        assert_eq!(u64::from_le_bytes(b[16..24].try_into().unwrap()), 0x0123_4567_89ab_cdef);
        assert_eq!(u64::from_le_bytes(b[24..32].try_into().unwrap()), 0, "writing restarts the stream");
        let err = |c: SamplerConfig| format!("{:#}", SamplingParamsGpu::encode(&c).unwrap_err());
        assert!(err(cfg(1.0, 0, 1.0, 0)).contains("top_k 0"));
        assert!(err(cfg(1.0, 65, 1.0, 0)).contains("64"));
        assert!(err(cfg(f32::NAN, 20, 1.0, 0)).contains("NaN"));
        assert!(err(cfg(1.0, 20, f32::NAN, 0)).contains("NaN"));
        // Greedy ignores top_k and top_p, as on the CPU.
        assert!(SamplingParamsGpu::encode(&cfg(0.0, 0, 1.0, 0)).is_ok());
        assert!(SamplingParamsGpu::encode(&cfg(-1.0, 1000, f32::NAN, 0)).is_ok());
        assert!(SamplingParamsGpu::encode(&cfg(1.0, 64, 1.0, 0)).is_ok());
        assert!(SamplingParamsGpu::encode(&cfg(1.0, 1, 0.0, 0)).is_ok());
    }

    #[test]
    fn counter_draws_are_the_cpu_splitmix_stream() {
        for seed in [0u64, 1, 42, u64::MAX] {
            let mut rng = solo_model::sampler::SplitMix(seed);
            for step in 0..100 {
                assert_eq!(counter_uniform(seed, step), rng.next_f32(), "seed {seed} step {step}");
            }
        }
    }
}
