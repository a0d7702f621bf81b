//! Mixer projections, lm_head and embedding read as stored in a row format (`gemv_q.cu`: int4
//! rows, a GGUF file's Q4_K/Q5_K/Q6_K/Q8_0): the one-token GEMV with the input RMSNorm (and for
//! the GDN in-projection the causal conv) folded in, the output projection for a few tokens
//! (the fused MoE decode kernel reads it itself), the dequantised bf16 copy prefill
//! multiplies, and the embedding lookup. `linear.rs` and `embed.rs` send a matrix whose `format`
//! is set here.

use crate::kernels::{kernel_file, Launch};
use crate::kquant::KQuant;
use crate::ops::linear::gemv_blocks;
use crate::runtime::{DevPtr, Gpu};
use crate::weights::{Matrix, RowFormat, Vector};
use anyhow::{ensure, Result};

kernel_file! {
    /// `gemv_q.cu`'s kernels.
    pub mod gemv_q_cu = "gemv_q.cu" {
        fn gemv_norm_q_int4(w: DevPtr, rows: i32, tail: DevPtr, tail_rows: i32, h: DevPtr, w1p: DevPtr, eps: f32, y: DevPtr, conv_state: DevPtr, taps: DevPtr, mixed: DevPtr);
        fn gemv_norm_q_q4k(w: DevPtr, rows: i32, tail: DevPtr, tail_rows: i32, h: DevPtr, w1p: DevPtr, eps: f32, y: DevPtr, conv_state: DevPtr, taps: DevPtr, mixed: DevPtr);
        fn gemv_norm_q_q5k(w: DevPtr, rows: i32, tail: DevPtr, tail_rows: i32, h: DevPtr, w1p: DevPtr, eps: f32, y: DevPtr, conv_state: DevPtr, taps: DevPtr, mixed: DevPtr);
        fn gemv_norm_q_q6k(w: DevPtr, rows: i32, tail: DevPtr, tail_rows: i32, h: DevPtr, w1p: DevPtr, eps: f32, y: DevPtr, conv_state: DevPtr, taps: DevPtr, mixed: DevPtr);
        fn gemv_norm_q_q8_0(w: DevPtr, rows: i32, tail: DevPtr, tail_rows: i32, h: DevPtr, w1p: DevPtr, eps: f32, y: DevPtr, conv_state: DevPtr, taps: DevPtr, mixed: DevPtr);
        fn gemv_norm_q_q4k_tail_q6k(w: DevPtr, rows: i32, tail: DevPtr, tail_rows: i32, h: DevPtr, w1p: DevPtr, eps: f32, y: DevPtr, conv_state: DevPtr, taps: DevPtr, mixed: DevPtr);
        fn gemv_norm_q_q5k_tail_q6k(w: DevPtr, rows: i32, tail: DevPtr, tail_rows: i32, h: DevPtr, w1p: DevPtr, eps: f32, y: DevPtr, conv_state: DevPtr, taps: DevPtr, mixed: DevPtr);
        fn out_proj_tokens_q_int4(w: DevPtr, y: DevPtr, t: i32, y_tile_r: i32, h: DevPtr);
        fn out_proj_tokens_q_q4k(w: DevPtr, y: DevPtr, t: i32, y_tile_r: i32, h: DevPtr);
        fn out_proj_tokens_q_q5k(w: DevPtr, y: DevPtr, t: i32, y_tile_r: i32, h: DevPtr);
        fn out_proj_tokens_q_q6k(w: DevPtr, y: DevPtr, t: i32, y_tile_r: i32, h: DevPtr);
        fn out_proj_tokens_q_q8_0(w: DevPtr, y: DevPtr, t: i32, y_tile_r: i32, h: DevPtr);
        fn dequantize_q(w: DevPtr, rows: i64, cols: i32, format: i32, tile_r: i32, out: DevPtr);
        fn embed_q(w: DevPtr, ids: DevPtr, cols: i32, format: i32, h: DevPtr);
    }
}

/// The kernels' number of a format (`kquant_value`'s switch).
fn format_id(f: RowFormat) -> i32 {
    match f {
        RowFormat::K(KQuant::Q4K) => 0,
        RowFormat::K(KQuant::Q5K) => 1,
        RowFormat::K(KQuant::Q6K) => 2,
        RowFormat::K(KQuant::Q8_0) => 3,
        RowFormat::Int4 => 4,
    }
}

/// The conv folded into the GDN in-projection: its window (f32 [3, 8192]), taps (f32 [8192, 4])
/// and output (f32 [8192]).
pub struct Conv {
    pub state: DevPtr,
    pub taps: DevPtr,
    pub mixed: DevPtr,
}

/// One token: y (f32 [w.rows + tail rows]) = [w; tail] · RMSNorm(h) (x rounded to bf16, as the
/// bf16 GEMVs take it), w [rows, 2048] as stored, `tail` rows after it: bf16, or Q6_K after Q4_K
/// or Q5_K rows (`tail_format`); with `conv`, the first 8192 rows go through the causal conv +
/// SiLU into `conv.mixed` instead of y.
#[allow(clippy::too_many_arguments)]
pub fn gemv_norm_q(
    gpu: &Gpu,
    h: DevPtr,
    norm: &Vector,
    eps: f32,
    w: &Matrix,
    tail: Option<&Matrix>,
    y: DevPtr,
    conv: Option<Conv>,
) -> Result<()> {
    let Some(k) = w.format else { anyhow::bail!("gemv_norm_q: not a row-format matrix") };
    ensure!(w.cols == 2048 && norm.len == 2048, "gemv_norm_q: {}x{} / norm {} (2048 wide)", w.rows, w.cols, norm.len);
    if let Some(t) = tail {
        ensure!(t.cols == 2048, "gemv_norm_q: the tail must be 2048 wide");
        if let Some(f) = t.format {
            let Some(kernel) = tail_format(k, f).filter(|_| conv.is_none()) else {
                anyhow::bail!("gemv_norm_q: a {f:?} tail after {k:?} rows (the kernels take Q6_K after Q4_K or Q5_K)")
            };
            let launch = Launch::new(gemv_blocks(gpu), 256, 0);
            return kernel(gpu, launch, w.ptr, w.rows as i32, t.ptr, t.rows as i32, h, norm.ptr, eps, y, 0, 0, 0);
        }
        ensure!(t.is_bf16(), "gemv_norm_q: the tail must be bf16 or in a row format");
    }
    if conv.is_some() {
        ensure!(w.rows > crate::kernels::widths::GDN_CONV_DIM, "gemv_norm_q: a conv over a {}-row matrix", w.rows);
    }
    let (tail_ptr, tail_rows) = tail.map_or((0, 0), |t| (t.ptr, t.rows as i32));
    let conv = conv.unwrap_or(Conv { state: 0, taps: 0, mixed: 0 });
    launch_gemv(gpu, k, w, tail_ptr, tail_rows, h, norm.ptr, eps, y, conv)
}

type GemvQ =
    fn(&Gpu, Launch, DevPtr, i32, DevPtr, i32, DevPtr, DevPtr, f32, DevPtr, DevPtr, DevPtr, DevPtr) -> Result<()>;

/// The kernel of rows in format `rows` followed by a tail in format `tail`, where there is one
/// (an attention layer's q and k beside a Q6_K v, as llama.cpp's Q4_K_M and Q5_K_M make half the
/// layers).
pub(crate) fn tail_format(rows: RowFormat, tail: RowFormat) -> Option<GemvQ> {
    use KQuant::{Q4K, Q5K, Q6K};
    match (rows, tail) {
        (RowFormat::K(Q4K), RowFormat::K(Q6K)) => Some(gemv_q_cu::gemv_norm_q_q4k_tail_q6k),
        (RowFormat::K(Q5K), RowFormat::K(Q6K)) => Some(gemv_q_cu::gemv_norm_q_q5k_tail_q6k),
        _ => None,
    }
}

/// `gemv_norm_q_*` for format k (w1p 0: `h` is bf16 x).
#[allow(clippy::too_many_arguments)]
fn launch_gemv(
    gpu: &Gpu,
    k: RowFormat,
    w: &Matrix,
    tail: DevPtr,
    tail_rows: i32,
    h: DevPtr,
    w1p: DevPtr,
    eps: f32,
    y: DevPtr,
    conv: Conv,
) -> Result<()> {
    let Conv { state, taps, mixed } = conv;
    let kernel = match k {
        RowFormat::Int4 => gemv_q_cu::gemv_norm_q_int4,
        RowFormat::K(KQuant::Q4K) => gemv_q_cu::gemv_norm_q_q4k,
        RowFormat::K(KQuant::Q5K) => gemv_q_cu::gemv_norm_q_q5k,
        RowFormat::K(KQuant::Q6K) => gemv_q_cu::gemv_norm_q_q6k,
        RowFormat::K(KQuant::Q8_0) => gemv_q_cu::gemv_norm_q_q8_0,
    };
    let launch = Launch::new(gemv_blocks(gpu), 256, 0);
    kernel(gpu, launch, w.ptr, w.rows as i32, tail, tail_rows, h, w1p, eps, y, state, taps, mixed)
}

/// y (f32 [t, w.rows]) = x (bf16 [t, 2048]) · wᵀ for w as stored, a token at a time (prefill's
/// logits through a stored lm_head; the mixers' matrices have their bf16 copy for prefill).
pub fn linear_q(gpu: &Gpu, x: DevPtr, w: &Matrix, t: usize, y: DevPtr) -> Result<()> {
    let Some(k) = w.format else { anyhow::bail!("linear_q: not a row-format matrix") };
    ensure!(w.cols == 2048, "linear_q: {}x{} (2048 wide)", w.rows, w.cols);
    for i in 0..t {
        let (x, y) = (x + (i * 2048 * 2) as DevPtr, y + (i * w.rows * 4) as DevPtr);
        launch_gemv(gpu, k, w, 0, 0, x, 0, 0.0, y, Conv { state: 0, taps: 0, mixed: 0 })?;
    }
    Ok(())
}

/// r of an output projection whose columns are in tiled value-head order, as the kernels take
/// it (`tiled_piece`: 32 groups of 128 columns, r value heads a key head; 1: in order).
pub(crate) fn y_tile_r(w: &Matrix) -> Result<i32> {
    let Some(t) = w.tiled_heads else { return Ok(1) };
    ensure!(
        t.width == 128 && t.key_heads * t.r == 32 && w.cols == 4096,
        "an output projection of {} columns in tiled order {t:?} (the kernels take 32 value heads of 128)",
        w.cols
    );
    Ok(t.r as i32)
}

/// h (f32 [t, 2048]) += y (bf16 [t, 4096]) · wᵀ, w a mixer's output projection [2048, 4096] as
/// stored (its columns maybe in tiled order): each token the bits of the fused MoE decode
/// kernel's phase 0 (the four-kernel form, the several-token steps).
pub fn out_proj_tokens_q(gpu: &Gpu, y: DevPtr, w: &Matrix, t: usize, h: DevPtr) -> Result<()> {
    let Some(k) = w.format else { anyhow::bail!("out_proj_tokens_q: not a row-format matrix") };
    ensure!(w.rows == 2048 && w.cols == 4096, "out_proj_tokens_q: {}x{} (2048 x 4096)", w.rows, w.cols);
    let kernel = match k {
        RowFormat::Int4 => gemv_q_cu::out_proj_tokens_q_int4,
        RowFormat::K(KQuant::Q4K) => gemv_q_cu::out_proj_tokens_q_q4k,
        RowFormat::K(KQuant::Q5K) => gemv_q_cu::out_proj_tokens_q_q5k,
        RowFormat::K(KQuant::Q6K) => gemv_q_cu::out_proj_tokens_q_q6k,
        RowFormat::K(KQuant::Q8_0) => gemv_q_cu::out_proj_tokens_q_q8_0,
    };
    kernel(gpu, Launch::new((2048 / 8, 1, 1), 256, 0), w.ptr, y, t as i32, y_tile_r(w)?, h)
}

/// out (bf16 [w.rows, w.cols]) = w dequantised (ggml's values, rounded to bf16), its columns in
/// the release's order (a tiled output projection's put back).
pub fn dequantize_q(gpu: &Gpu, w: &Matrix, out: DevPtr) -> Result<()> {
    let Some(k) = w.format else { anyhow::bail!("dequantize_q: not a row-format matrix") };
    let launch = Launch::new((4 * gpu.sms, 1, 1), 256, 0);
    gemv_q_cu::dequantize_q(gpu, launch, w.ptr, w.rows as i64, w.cols as i32, format_id(k), y_tile_r(w)?, out)
}

/// h (f32 [t, table.cols]) = table[ids] dequantised, ids i32 [t] on the device.
pub fn embed_q(gpu: &Gpu, table: &Matrix, ids: DevPtr, t: usize, h: DevPtr) -> Result<()> {
    let Some(k) = table.format else { anyhow::bail!("embed_q: not a row-format matrix") };
    let launch = Launch::new((t as u32, 1, 1), 256, 0);
    gemv_q_cu::embed_q(gpu, launch, table.ptr, ids, table.cols as i32, format_id(k), h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testutil::*;
    use solo_model::{DType, Tensor};

    /// A random [rows, cols] matrix as a checkpoint stores it in format `f` (a GGUF file's blocks;
    /// int4 in groups of 128 with f16 scales, every fifth group asymmetric), and on the GPU as stored.
    fn stored(f: RowFormat, seed: u64, rows: usize, cols: usize) -> (Tensor, Matrix, Vec<crate::runtime::DevBuf>) {
        let v = random(seed, rows * cols, (3.0 / cols as f32).sqrt());
        let t = match f {
            RowFormat::K(k) => {
                Tensor::from_bytes(DType::Ggml(k.ggml()), vec![rows, cols], &k.ggml().quantize(&v).unwrap())
            }
            RowFormat::Int4 => {
                use crate::int4::{quantize_symmetric, GROUP};
                let (packed, scales, _) = quantize_symmetric(&v, rows, cols);
                let zeros = Some((0..scales.len()).map(|i| if i % 5 == 0 { 6 + (i % 4) as u8 } else { 8 }).collect());
                let gq = solo_model::int4::GroupQuant { group: GROUP, scales, zeros, perm: None };
                Tensor::from_int4(rows, cols, &packed, gq)
            }
        };
        let mut up = crate::weights::Uploader::new(gpu()).unwrap();
        let (m, _) = up.stacked_as_stored(&[&t]).unwrap().expect("the matrix goes up as stored");
        assert_eq!(m.format, Some(f));
        (t, m, up.finish().unwrap())
    }

    fn norm_of(seed: u64) -> (Vec<f32>, Vector, crate::runtime::DevBuf) {
        let w = random(seed, 2048, 0.3);
        let b = gpu().upload_f32(&w.iter().map(|v| 1.0 + v).collect::<Vec<_>>()).unwrap();
        let v = Vector { ptr: b.ptr(), len: 2048 };
        (w, v, b)
    }

    const FORMATS: [RowFormat; 5] = [
        RowFormat::K(KQuant::Q4K),
        RowFormat::K(KQuant::Q5K),
        RowFormat::K(KQuant::Q6K),
        RowFormat::K(KQuant::Q8_0),
        RowFormat::Int4,
    ];

    /// The bound of these GEMVs: x is held as scaled f16 pairs (2^-11 relative rounding each,
    /// the expert kernels' arithmetic), which leaves 3e-4 to 1.2e-3 on a row's dot (H100).
    const KQ_TOL: f32 = 2e-3;

    /// The dequantised copy is the CPU reference's values (ggml's, int4's (q − z)·s) rounded to
    /// bf16, bit for bit; the embedding rows are those values, bit for bit.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn dequantize_and_embed_give_ggmls_values() {
        let gpu = gpu();
        for k in FORMATS {
            let (rows, cols) = (37, 2048);
            let (t, m, _bufs) = stored(k, 3, rows, cols);
            let want = t.to_f32();
            let out = gpu.alloc(rows * cols * 2).unwrap();
            dequantize_q(gpu, &m, out.ptr()).unwrap();
            let got = bf16_from_bytes(&gpu.download(out.ptr(), rows * cols * 2).unwrap());
            assert_eq!(got, round_bf16(&want), "{k:?}: dequantised copy");
            let ids = [5i32, 0, 36, 5];
            let ib = gpu.upload_i32(&ids).unwrap();
            let hb = gpu.upload_f32(&vec![f32::NAN; ids.len() * cols]).unwrap();
            crate::ops::embed::embed(gpu, &m, ib.ptr(), ids.len(), hb.ptr()).unwrap();
            let got = gpu.download_f32(hb.ptr(), ids.len() * cols).unwrap();
            let rows_want: Vec<f32> = ids.iter().flat_map(|&i| want[i as usize * cols..][..cols].to_vec()).collect();
            assert_eq!(got, rows_want, "{k:?}: embedding rows");
        }
    }

    /// W · RMSNorm(h) for each format (lm_head-like and odd row counts) against the CPU on
    /// ggml's values; x given (prefill's logits) gives the same bits.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn gemv_norm_q_matches_cpu() {
        let gpu = gpu();
        let h = random(4, 2048, 3.0);
        let hb = gpu.upload_f32(&h).unwrap();
        let (norm_w, norm, _nb) = norm_of(5);
        let x = round_bf16(&solo_cpu::ops::rms_norm_one_plus(&h, &norm_w, 1e-6));
        for k in FORMATS {
            for rows in [9216, 1001, 3] {
                let (t, m, _bufs) = stored(k, 6 + rows as u64, rows, 2048);
                let y = gpu.upload_f32(&vec![f32::NAN; rows + 1]).unwrap();
                crate::ops::linear::gemv_norm(gpu, hb.ptr(), &norm, 1e-6, &m, y.ptr()).unwrap();
                let got = gpu.download_f32(y.ptr(), rows + 1).unwrap();
                assert!(got[rows].is_nan(), "{k:?}, {rows} rows: wrote past its rows");
                assert_close(
                    &format!("{k:?} W·RMSNorm(h), {rows} rows"),
                    &got[..rows],
                    &solo_cpu::ops::matmul(&x, &t),
                    KQ_TOL,
                );
            }
        }
    }

    /// An attention layer's q|k in Q4_K or Q5_K with its v rows in Q6_K as the tail (one launch),
    /// against the CPU on ggml's values.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn gemv_norm_q_with_a_q6k_tail_matches_cpu() {
        let gpu = gpu();
        let h = random(7, 2048, 3.0);
        let hb = gpu.upload_f32(&h).unwrap();
        let (norm_w, norm, _nb) = norm_of(8);
        let x = round_bf16(&solo_cpu::ops::rms_norm_one_plus(&h, &norm_w, 1e-6));
        let q6k = RowFormat::K(KQuant::Q6K);
        for k in [KQuant::Q4K, KQuant::Q5K] {
            let (qk, m, _b1) = stored(RowFormat::K(k), 9, 8704, 2048);
            let (v, tail, _b2) = stored(q6k, 10, 512, 2048);
            let y = gpu.upload_f32(&vec![f32::NAN; 9216 + 1]).unwrap();
            gemv_norm_q(gpu, hb.ptr(), &norm, 1e-6, &m, Some(&tail), y.ptr(), None).unwrap();
            let got = gpu.download_f32(y.ptr(), 9216 + 1).unwrap();
            assert!(got[9216].is_nan(), "{k:?}: wrote past its rows");
            let mut want = solo_cpu::ops::matmul(&x, &qk);
            want.extend(solo_cpu::ops::matmul(&x, &v));
            assert_close(&format!("{k:?} q|k with a Q6_K tail"), &got[..9216], &want, KQ_TOL);
        }
    }

    /// The GDN in-projection as stored (qkv Q5_K and z Q4_K going up as one Q5_K matrix, b | a
    /// bf16 apart) with the conv folded in, against the CPU: y's z/b/a rows, the conv's output
    /// and the shifted window.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn gemv_norm_q_conv_matches_cpu() {
        let gpu = gpu();
        let conv = 8192;
        let h = random(14, 2048, 3.0);
        let hb = gpu.upload_f32(&h).unwrap();
        let (norm_w, norm, _nb) = norm_of(15);
        let x = round_bf16(&solo_cpu::ops::rms_norm_one_plus(&h, &norm_w, 1e-6));
        let quantized = |k: KQuant, seed: u64, rows: usize| {
            let v = random(seed, rows * 2048, 0.04);
            Tensor::from_bytes(DType::Ggml(k.ggml()), vec![rows, 2048], &k.ggml().quantize(&v).unwrap())
        };
        let (qkv, z) = (quantized(KQuant::Q5K, 16, conv), quantized(KQuant::Q4K, 20, 4096));
        let ba = Tensor::from_f32_as_bf16(vec![64, 2048], &random(17, 64 * 2048, 0.04));
        let mut up = crate::weights::Uploader::new(gpu).unwrap();
        let (w, views) = up.stacked_as_stored(&[&qkv, &z]).unwrap().unwrap();
        assert_eq!((w.format, w.rows, views[1].rows), (Some(RowFormat::K(KQuant::Q5K)), conv + 4096, 4096));
        let tail = up.matrix(&ba).unwrap();
        let _bufs = up.finish().unwrap();
        let state: Vec<f32> = random(18, 3 * conv, 1.0);
        let taps: Vec<f32> = random(19, 4 * conv, 0.6);
        let (sb, tb) = (gpu.upload_f32(&state).unwrap(), gpu.upload_f32(&taps).unwrap());
        let rows = w.rows + 64;
        let y = gpu.upload_f32(&vec![f32::NAN; rows]).unwrap();
        let mixed = gpu.upload_f32(&vec![f32::NAN; conv]).unwrap();
        crate::ops::linear::gemv_norm_conv(
            gpu,
            hb.ptr(),
            &norm,
            1e-6,
            &w,
            &tail,
            y.ptr(),
            sb.ptr(),
            tb.ptr(),
            mixed.ptr(),
            crate::ops::lora::InputSites::NONE,
        )
        .unwrap();

        let mut full = solo_cpu::ops::matmul(&x, &qkv);
        full.extend(solo_cpu::ops::matmul(&x, &z));
        full.extend(solo_cpu::ops::matmul(&x, &ba));
        let got_y = gpu.download_f32(y.ptr(), rows).unwrap();
        assert_close("as stored in-projection: z, b, a rows", &got_y[conv..], &full[conv..], KQ_TOL);
        let (want_mixed, want_state) = conv_step_reference(&state, &taps, &full);
        let got_mixed = gpu.download_f32(mixed.ptr(), conv).unwrap();
        assert_close("as stored in-projection: conv output", &got_mixed, &want_mixed, KQ_TOL);
        let got_state = gpu.download_f32(sb.ptr(), 3 * conv).unwrap();
        assert_close("as stored in-projection: conv window", &got_state, &want_state, KQ_TOL);
    }
}
