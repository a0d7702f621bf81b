//! The decode step's screened lm_head (`lm_head.cu`): the exact argmax of W · RMSNorm(h) from an
//! int8 copy of W (508 MB instead of 1,017 MB a step) and the few bf16 rows whose bound reaches
//! the maximum (greedy steps); or, for the GPU sampler, the exact top-k logits (k ≤ 64) with
//! every other row at −∞. Either is the full lm_head's, bit for bit (the proof is at the top of
//! `lm_head.cu`); the host's `decode`, which returns all the logits, keeps the full `gemv_norm`.

use crate::kernels::{kernel_file, Launch};
use crate::runtime::{DevBuf, DevPtr, Gpu};
use crate::weights::{Matrix, Vector};
use anyhow::{ensure, Result};

kernel_file! {
    /// `lm_head.cu`'s kernels.
    pub mod lm_head_cu = "lm_head.cu" {
        fn lm_head_screen_prepare(w: DevPtr, rows: i32, q: DevPtr, coef: DevPtr, words: DevPtr);
        fn lm_head_screen(q: DevPtr, coef: DevPtr, h: DevPtr, w1p: DevPtr, eps: f32, rows: i32, upper: DevPtr, words: DevPtr, block_keys: DevPtr);
        fn lm_head_rescore(w: DevPtr, h: DevPtr, w1p: DevPtr, eps: f32, rows: i32, upper: DevPtr, words: DevPtr, out: DevPtr);
        fn lm_head_rescore_topk(w: DevPtr, h: DevPtr, w1p: DevPtr, eps: f32, rows: i32, upper: DevPtr, block_keys: DevPtr, nkeys: i32, params: DevPtr, words: DevPtr, logits: DevPtr);
    }
}

/// The screen's int8 rings (8 warps × 2 requests × 2 rows × 2048 bytes), x as f32, and the
/// rows' (scale, bound) beside the rings (8 warps × 2 × 2 × 8 bytes) (`lm_head_screen`).
const SCREEN_SHARED_BYTES: u32 = 8 * 4 * 2048 + 2048 * 4 + 8 * 4 * 8;

/// The int8 copy of one lm_head and the buffers of its greedy step.
pub struct LmHeadScreen {
    /// bf16 [rows, 2048]: the lm_head itself (the rescore's rows)
    w: Matrix,
    /// i8 [rows, 2048]: each row rounded to int8 with its own scale
    q: DevBuf,
    /// f32 [rows rounded up to even, 2]: (the row's scale s_j, its error bound c_j, see lm_head.cu)
    coef: DevBuf,
    /// f32 [rows]: each row's upper bound on its logit, this step
    upper: DevBuf,
    /// u32 [8]: the kernels' counters and keys (`words` in lm_head.cu)
    words: DevBuf,
    /// u32 [screen blocks]: each screen block's largest lower bound, as an ordered key
    block_keys: DevBuf,
}

/// Blocks of the screen and the rescores: two per SM (at most 512: `lm_head_rescore_topk`).
fn blocks(gpu: &Gpu) -> u32 {
    2 * gpu.sms
}

impl LmHeadScreen {
    /// Makes the int8 copy of `w` (bf16 [rows, 2048]) on the device.
    /// Device bytes of the screen of `w` (its int8 copy, bounds and scales).
    pub fn bytes(w: &Matrix) -> usize {
        w.rows * 2048 + w.rows.div_ceil(2) * 16 + w.rows * 4 + 32 + 512 * 4
    }

    pub fn new(gpu: &Gpu, w: &Matrix) -> Result<Self> {
        ensure!(
            w.cols == 2048 && w.is_bf16(),
            "lm_head screen: {}-wide, bf16: {} (the kernels take bf16, 2048)",
            w.cols,
            w.is_bf16()
        );
        let rows = w.rows;
        let screen = LmHeadScreen {
            w: *w,
            q: gpu.alloc(rows * 2048)?,
            coef: gpu.alloc(rows.div_ceil(2) * 16)?,
            upper: gpu.alloc(rows * 4)?,
            words: gpu.alloc(32)?,
            block_keys: gpu.alloc(blocks(gpu) as usize * 4)?,
        };
        ensure!(blocks(gpu) <= 512, "lm_head screen: {} blocks (the top-k rescore takes 512)", blocks(gpu));
        lm_head_cu::lm_head_screen_prepare(
            gpu,
            Launch::new((rows.div_ceil(8) as u32, 1, 1), 256, 0),
            w.ptr,
            rows as i32,
            screen.q.ptr(),
            screen.coef.ptr(),
            screen.words.ptr(),
        )?;
        Ok(screen)
    }

    /// out (i32 on the device) = argmax of w · RMSNorm(h; norm) (lowest index on ties), w the
    /// lm_head this screen was made from. Two kernels; graph-capturable.
    pub fn argmax(&self, gpu: &Gpu, h: DevPtr, norm: &Vector, eps: f32, out: DevPtr) -> Result<()> {
        self.screen(gpu, h, norm, eps)?;
        self.rescore(gpu, h, norm, eps, out)
    }

    /// logits (f32 [rows]) = w · RMSNorm(h; norm) for the rows that could be among the top k,
    /// −∞ for the rest, k the sampler's top_k in `params` (1 when greedy, as the sampler takes
    /// it): the GPU sampler then picks from them what it picks from the full logits (the rule:
    /// `solo_model::sampling`). Two kernels; graph-capturable.
    pub fn top_logits(
        &self,
        gpu: &Gpu,
        h: DevPtr,
        norm: &Vector,
        eps: f32,
        params: DevPtr,
        logits: DevPtr,
    ) -> Result<()> {
        self.screen(gpu, h, norm, eps)?;
        let (w, rows, upper, keys) = (self.w.ptr, self.w.rows as i32, self.upper.ptr(), self.block_keys.ptr());
        let launch = Launch::new((blocks(gpu), 1, 1), 256, 0);
        let nkeys = blocks(gpu) as i32;
        lm_head_cu::lm_head_rescore_topk(
            gpu,
            launch,
            w,
            h,
            norm.ptr,
            eps,
            rows,
            upper,
            keys,
            nkeys,
            params,
            self.words.ptr(),
            logits,
        )
    }

    /// First half of `argmax` and `top_logits`: every row's upper bound, and the thresholds.
    fn screen(&self, gpu: &Gpu, h: DevPtr, norm: &Vector, eps: f32) -> Result<()> {
        lm_head_cu::lm_head_screen(
            gpu,
            Launch::new((blocks(gpu), 1, 1), 256, SCREEN_SHARED_BYTES),
            self.q.ptr(),
            self.coef.ptr(),
            h,
            norm.ptr,
            eps,
            self.w.rows as i32,
            self.upper.ptr(),
            self.words.ptr(),
            self.block_keys.ptr(),
        )
    }

    /// Second half: the candidates' exact logits and their argmax; leaves the words zeroed.
    fn rescore(&self, gpu: &Gpu, h: DevPtr, norm: &Vector, eps: f32, out: DevPtr) -> Result<()> {
        let (w, rows, upper, words) = (self.w.ptr, self.w.rows as i32, self.upper.ptr(), self.words.ptr());
        let launch = Launch::new((blocks(gpu), 1, 1), 256, 0);
        lm_head_cu::lm_head_rescore(gpu, launch, w, h, norm.ptr, eps, rows, upper, words, out)
    }

    /// How many rows the last `argmax` or `top_logits` multiplied exactly (synchronises).
    pub fn last_candidates(&self, gpu: &Gpu) -> Result<u32> {
        Ok(gpu.download_i32(self.words.ptr() + 12, 1)?[0] as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::linear::gemv_norm;
    use crate::ops::sample;
    use crate::ops::testutil::*;

    /// Rows that make the screen work hard: a spread of scales, outlier weights
    /// (absmax far above the rest), exact duplicates of one row (ties), rows one bf16 step
    /// away from it, and an all-zero row.
    fn hard_matrix(rows: usize, seed: u64) -> Vec<f32> {
        let mut w = random(seed, rows * 2048, 0.03);
        for r in 0..rows {
            let scale = 0.25 + (r % 7) as f32 * 0.5;
            for c in 0..2048 {
                w[r * 2048 + c] *= scale;
            }
            if r % 5 == 0 {
                w[r * 2048 + (r * 31) % 2048] = 0.2; // an outlier: the row's int8 step is coarser
            }
        }
        let src = 1234 % rows;
        for &d in &[rows - 1, rows / 2, 7] {
            let (a, b) = (src * 2048, d * 2048);
            w.copy_within(a..a + 2048, b);
        }
        let near = rows / 3;
        w.copy_within(src * 2048..src * 2048 + 2048, near * 2048);
        w[near * 2048 + 5] = half::bf16::from_f32(w[near * 2048 + 5]).to_f32() * (1.0 + 1.0 / 128.0);
        w[(rows / 4) * 2048..(rows / 4 + 1) * 2048].fill(0.0);
        round_bf16(&w)
    }

    /// `hard_matrix` (60,000 rows) on the device, a final norm's weights and the screen.
    struct HardLmHead {
        rows: usize,
        wv: Vec<f32>,
        w: Matrix,
        norm: Vector,
        screen: LmHeadScreen,
        _buffers: [DevBuf; 2],
    }

    fn hard_lm_head(gpu: &Gpu) -> HardLmHead {
        let rows = 60_000;
        let wv = hard_matrix(rows, 11);
        let wbuf = gpu.upload(&bf16_bytes(&wv)).unwrap();
        let w = Matrix::bf16(wbuf.ptr(), rows, 2048);
        let screen = LmHeadScreen::new(gpu, &w).unwrap();
        let norm_w: Vec<f32> = random(5, 2048, 0.3).iter().map(|v| 1.0 + v).collect();
        let nb = gpu.upload_f32(&norm_w).unwrap();
        let norm = Vector { ptr: nb.ptr(), len: 2048 };
        HardLmHead { rows, wv, w, norm, screen, _buffers: [wbuf, nb] }
    }

    /// The screened argmax equals the full lm_head's (gemv_norm_bf16 + argmax kernels), for
    /// hidden states that make row `src` (and its duplicates: ties) the maximum, random ones,
    /// random ones with a few huge columns, and h = 0 (every logit 0: every row a candidate, row 0 wins). Also checks the bound
    /// itself: every exact logit at or below its row's upper bound, and T at or below the max.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn screened_argmax_equals_full_argmax() {
        let gpu = gpu();
        let HardLmHead { rows, wv, w, norm, screen, _buffers } = hard_lm_head(gpu); // _buffers: w and norm live as long
        let (logits, out, parts) =
            (gpu.alloc(rows * 4).unwrap(), gpu.alloc(8).unwrap(), gpu.alloc(sample::ARGMAX_PARTS * 8).unwrap());
        let src = 1234 % rows;
        let mut cases: Vec<(String, Vec<f32>)> = Vec::new();
        for k in 0..4u64 {
            // h along row src (plus noise): src and its copies lead, the near copy (one bf16 step off) beside them
            let noise = random(100 + k, 2048, 0.2 * k as f32);
            cases.push((format!("aligned {k}"), (0..2048).map(|c| wv[src * 2048 + c] * 40.0 + noise[c]).collect()));
        }
        for k in 0..4u64 {
            cases.push((format!("random {k}"), random(200 + k, 2048, 1.0 + k as f32)));
        }
        for k in 0..2u64 {
            // a few huge columns, as real hidden states have: the bound splits them off
            let mut h = random(300 + k, 2048, 1.0);
            for c in [3, 700, 1500, 2047] {
                h[c] = 150.0 * (1.0 + k as f32);
            }
            cases.push((format!("outliers {k}"), h));
        }
        cases.push(("zero".into(), vec![0.0; 2048]));
        for (name, h) in &cases {
            let hb = gpu.upload_f32(h).unwrap();
            gemv_norm(gpu, hb.ptr(), &norm, 1e-6, &w, logits.ptr()).unwrap();
            sample::argmax(gpu, logits.ptr(), rows, parts.ptr(), out.ptr()).unwrap();
            let full = gpu.download_i32(out.ptr(), 1).unwrap()[0];
            let exact = gpu.download_f32(logits.ptr(), rows).unwrap();

            screen.screen(gpu, hb.ptr(), &norm, 1e-6).unwrap();
            let upper = gpu.download_f32(screen.upper.ptr(), rows).unwrap();
            let t_key = gpu.download_i32(screen.words.ptr(), 1).unwrap()[0] as u32;
            let t = if t_key & 0x8000_0000 != 0 { f32::from_bits(t_key & 0x7fff_ffff) } else { f32::from_bits(!t_key) };
            let max = exact.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
            assert!(t <= max, "{name}: threshold {t} above the largest logit {max}");
            let loose = exact.iter().zip(&upper).position(|(e, u)| e > u);
            assert!(
                loose.is_none(),
                "{name}: row {:?}: logit above its upper bound",
                loose.map(|r| (r, exact[r], upper[r]))
            );

            screen.rescore(gpu, hb.ptr(), &norm, 1e-6, out.ptr()).unwrap();
            let got = gpu.download_i32(out.ptr(), 1).unwrap()[0];
            let candidates = screen.last_candidates(gpu).unwrap();
            eprintln!("{name}: argmax {full}, screened {got}, {candidates} candidates of {rows}");
            assert_eq!(got, full, "{name}: screened argmax differs from the full one");
            if name.starts_with("aligned") {
                // row src's exact copies tie: the lowest (7) beats them; the near copy may be above
                assert!(
                    got as usize == 7 || got as usize == rows / 3,
                    "{name}: argmax {got}, not the lowest tied copy"
                );
            }
            if name != "zero" {
                assert!(
                    (candidates as usize) < rows / 100,
                    "{name}: the bound is too loose to screen ({candidates} candidates)"
                );
            }
        }
    }

    /// The screened top-k logits hold the full lm_head's top k, bit for bit, for k = 1, 20, 64
    /// and greedy parameters (k = 1), over the argmax test's matrix and hidden states: every
    /// row not at −∞ has its exact logit, and the k best of the masked row are the k best of
    /// the full one (ids in the sampler's order). The screen keeps few rows.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn screened_top_logits_hold_the_full_top_k() {
        use solo_model::sampler::{top_ids, SamplerConfig};
        let gpu = gpu();
        let HardLmHead { rows, wv, w, norm, screen, _buffers } = hard_lm_head(gpu); // _buffers: w and norm live as long
        let (full, masked) = (gpu.alloc(rows * 4).unwrap(), gpu.alloc(rows * 4).unwrap());
        let params = sample::SamplingParamsGpu::new(gpu).unwrap();
        let src = 1234 % rows;
        let mut outliers = random(301, 2048, 1.0);
        outliers[700] = 300.0;
        let cases = [
            ("aligned", (0..2048).map(|c| wv[src * 2048 + c] * 40.0).collect::<Vec<f32>>()),
            ("random", random(201, 2048, 2.0)),
            ("outliers", outliers),
            ("zero", vec![0.0; 2048]),
        ];
        for (name, h) in &cases {
            let hb = gpu.upload_f32(h).unwrap();
            gemv_norm(gpu, hb.ptr(), &norm, 1e-6, &w, full.ptr()).unwrap();
            let exact = gpu.download_f32(full.ptr(), rows).unwrap();
            for (temperature, k) in [(1.0, 1), (0.7, 20), (1.0, 64), (0.0, 20)] {
                params.write(gpu, &SamplerConfig { temperature, top_k: k, top_p: 0.9, seed: 1 }).unwrap();
                gpu.zero(masked.ptr(), rows * 4).unwrap();
                screen.top_logits(gpu, hb.ptr(), &norm, 1e-6, params.ptr(), masked.ptr()).unwrap();
                let got = gpu.download_f32(masked.ptr(), rows).unwrap();
                let candidates = screen.last_candidates(gpu).unwrap() as usize;
                let kept: Vec<usize> = (0..rows).filter(|&r| got[r] != f32::NEG_INFINITY).collect();
                eprintln!("{name}, T {temperature}, top_k {k}: {candidates} candidates of {rows}");
                assert_eq!(kept.len(), candidates, "{name}: rows kept and candidates counted");
                assert!(
                    kept.iter().all(|&r| got[r].to_bits() == exact[r].to_bits()),
                    "{name}: a kept row's logit differs"
                );
                let k = if temperature > 0.0 { k } else { 1 };
                assert_eq!(top_ids(&got, k), top_ids(&exact, k), "{name}, top_k {k}");
                if *name != "zero" {
                    assert!(candidates < rows / 100, "{name}: the bound is too loose ({candidates} candidates)");
                }
            }
        }
    }
}
