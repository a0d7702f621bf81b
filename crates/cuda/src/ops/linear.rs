//! Projections: `y[T, out] = x[T, in] · Wᵀ` with bf16 inputs and f32 outputs.
//! One token (decode) runs our GEMV kernels (`gemv.cu`; the decode step also folds the input
//! RMSNorm or the residual add into them); more tokens (prefill) run cuBLAS with f32
//! accumulation on the tensor cores.

use crate::kernels::{kernel_file, Launch};
use crate::ops::gemv_q;
use crate::ops::lora::InputSites;
use crate::runtime::{DevPtr, Gpu};
use crate::weights::{Matrix, Vector};
use anyhow::{anyhow, ensure, Result};
use cudarc::cublas::sys as blas;

kernel_file! {
    /// `gemv.cu`'s kernels.
    pub mod gemv_cu = "gemv.cu" {
        fn gemv_bf16(w: DevPtr, x: DevPtr, y: DevPtr, out_dim: i32, in_dim: i32, accumulate: i32);
        fn gemv_tokens_4096_bf16(w: DevPtr, x: DevPtr, y: DevPtr, out_dim: i32, tokens: i32);
        fn gemv_norm_bf16(w: DevPtr, h: DevPtr, w1p: DevPtr, y: DevPtr, out_dim: i32, eps: f32);
        fn gemv_norm_tokens_bf16(w: DevPtr, h: DevPtr, w1p: DevPtr, y: DevPtr, out_dim: i32, y_stride: i32, tokens: i32, eps: f32);
    }
}
kernel_file! {
    /// `gemv_mma.cu`'s kernels.
    pub mod gemv_mma_cu = "gemv_mma.cu" with "lora.cuh" {
        fn gemv_norm_mma_bf16(w: DevPtr, h: DevPtr, w1p: DevPtr, y: DevPtr, out_dim: i32, y_stride: i32, tokens: i32, eps: f32, lora: DevPtr, once: DevPtr);
        fn gemv_mma_bf16(w: DevPtr, x: DevPtr, y: DevPtr, out_dim: i32, y_stride: i32, tokens: i32);
        fn gemv_norm_conv_mma_bf16(w: DevPtr, h: DevPtr, w1p: DevPtr, y: DevPtr, out_dim: i32, eps: f32, conv_state: DevPtr, taps: DevPtr, mixed: DevPtr, lora: DevPtr, once: DevPtr);
    }
}
kernel_file! {
    /// `gemv_fp8.cu`'s kernels.
    pub mod gemv_fp8_cu = "gemv_fp8.cu" {
        fn gemv_norm_fp8(w: DevPtr, scales: DevPtr, h: DevPtr, w1p: DevPtr, y: DevPtr, out_dim: i32, eps: f32);
        fn gemv_norm_conv_fp8(w: DevPtr, scales: DevPtr, tail: DevPtr, h: DevPtr, w1p: DevPtr, y: DevPtr, out_dim: i32, eps: f32, conv_state: DevPtr, taps: DevPtr, mixed: DevPtr);
        fn dequantize_fp8(q: DevPtr, scales: DevPtr, out: DevPtr, rows: i64, cols: i32);
    }
}
kernel_file! {
    /// `cast.cu`'s kernels.
    pub mod cast_cu = "cast.cu" {
        fn cast_f32_to_bf16(src: DevPtr, dst: DevPtr, n: i32);
    }
}

/// y (f32 [t, w.rows]) = x (bf16 [t, w.cols]) · wᵀ.
pub fn linear(gpu: &Gpu, x: DevPtr, w: &Matrix, t: usize, y: DevPtr) -> Result<()> {
    if w.format.is_some() {
        return gemv_q::linear_q(gpu, x, w, t, y);
    }
    ensure!(w.fp8_scales.is_none(), "linear: an FP8 matrix (prefill dequantises it first: `dequantize`)");
    if t == 1 {
        gemv(gpu, x, w, y, false)
    } else {
        gemm(gpu, x, w, t, y)
    }
}

/// Dynamic shared memory of the streaming GEMVs (in 2048): 8 warps' rings of 4096 / cols rows,
/// and x as f32 (`GemvStream` in gemv.cu).
fn gemv_shared_bytes(cols: usize) -> u32 {
    (8 * (4096 / cols) * cols * 2 + cols * 4) as u32
}

/// Dynamic shared memory of the FP8 GEMVs (`Fp8Smem` in gemv_fp8.cu): 8 warps' 2-tile rings
/// (16 rows × 256 bytes), x as f32 and as two e4m3 parts, 16 group scales, 8 × 16 partial sums.
const FP8_GEMV_SHARED: u32 = (8 * 2 * 16 * 256 + 2048 * 4 + 2 * 2048 + 16 * 4 + 8 * 16 * 4) as u32;

/// Dynamic shared memory of the tensor-core GEMVs (`gemv_mma.cu`): 8 warps' rings of 2 tiles (1
/// in the forms for 99 KB, `MMA_DEPTH`) of 16 rows × 512 bytes, then x bf16 [tokens, 2048].
fn mma_gemv_shared(gpu: &Gpu, tokens: usize) -> u32 {
    let depth = if gpu.target.big_shared() { 2 } else { 1 };
    (8 * depth * 16 * 512 + tokens * 2048 * 2) as u32
}

/// Tokens one tensor-core GEMV launch takes: all 8 with 227 KB of shared memory, 6 in the forms
/// for 99 KB (a token's sums are its own column of the MMA, so a split gives the same bits).
fn mma_tokens_per_launch(gpu: &Gpu) -> usize {
    if gpu.target.big_shared() {
        GEMV_MAX_TOKENS
    } else {
        6
    }
}

/// Blocks of the streaming GEMVs: two per SM.
pub(crate) fn gemv_blocks(gpu: &Gpu) -> (u32, u32, u32) {
    (2 * gpu.sms, 1, 1)
}

/// One token: y (f32 [w.rows]) = w · x (bf16 [w.cols], 2048 or 4096 wide), or with
/// `accumulate`, y += w · x (a residual add folded in).
pub fn gemv(gpu: &Gpu, x: DevPtr, w: &Matrix, y: DevPtr, accumulate: bool) -> Result<()> {
    if w.format.is_some() && accumulate {
        return gemv_q::out_proj_tokens_q(gpu, x, w, 1, y);
    }
    ensure!(w.is_bf16(), "gemv: {}x{} is not bf16", w.rows, w.cols);
    ensure!(w.cols == 2048 || w.cols == 4096, "gemv: input width {} (the kernel takes 2048 or 4096)", w.cols);
    // in 4096: plain tiles of 8 rows (see gemv.cu); in 2048: the streaming grid
    let (grid, shared) = if w.cols == 4096 {
        ((w.rows.div_ceil(8) as u32, 1, 1), 4096 * 4)
    } else {
        (gemv_blocks(gpu), gemv_shared_bytes(w.cols))
    };
    gemv_cu::gemv_bf16(
        gpu,
        Launch::new(grid, 256, shared),
        w.ptr,
        x,
        y,
        w.rows as i32,
        w.cols as i32,
        accumulate as i32,
    )
}

/// One token: y (f32 [w.rows]) = w · RMSNorm(h) for the residual stream h (f32 [2048]) and the
/// norm weight `norm` (1 + w): a sub-layer's input norm folded into its first projection.
pub fn gemv_norm(gpu: &Gpu, h: DevPtr, norm: &Vector, eps: f32, w: &Matrix, y: DevPtr) -> Result<()> {
    ensure!(
        w.cols == 2048 && norm.len == 2048,
        "gemv_norm: width {} / norm {} (the kernel's is 2048)",
        w.cols,
        norm.len
    );
    if w.format.is_some() {
        return gemv_q::gemv_norm_q(gpu, h, norm, eps, w, None, y, None);
    }
    if let Some(scales) = w.fp8_scales {
        let launch = Launch::new(gemv_blocks(gpu), 256, FP8_GEMV_SHARED);
        return gemv_fp8_cu::gemv_norm_fp8(gpu, launch, w.ptr, scales, h, norm.ptr, y, w.rows as i32, eps);
    }
    let launch = Launch::new(gemv_blocks(gpu), 256, gemv_shared_bytes(w.cols));
    gemv_cu::gemv_norm_bf16(gpu, launch, w.ptr, h, norm.ptr, y, w.rows as i32, eps)
}

/// Most tokens `gemv_norm_tokens` and `gemv_norm_mma` take (the multi-token decode step's limit).
pub const GEMV_MAX_TOKENS: usize = 8;

/// The several-token GEMVs' shared checks: 1 ..= GEMV_MAX_TOKENS tokens, outputs `y_stride` ≥
/// `w.rows` apart.
fn check_tokens(kernel: &str, w: &Matrix, t: usize, y_stride: usize) -> Result<()> {
    ensure!((1..=GEMV_MAX_TOKENS).contains(&t), "{kernel}: {t} tokens (1..={GEMV_MAX_TOKENS})");
    ensure!(y_stride >= w.rows, "{kernel}: output rows of {y_stride} for {} rows", w.rows);
    Ok(())
}

/// y[i·y_stride + r] = w[r] · RMSNorm(h[i]) for i < t ≤ GEMV_MAX_TOKENS, h f32 [t, 2048], on the
/// tensor cores (`gemv_mma.cu`): each row of w is read once for all t tokens, and a token gets the
/// same bits whatever the others are (one token alone included). The decode steps' projections
/// of the residual stream (q/k/v, the GDN in-projection) for one token or several. An FP8 w takes
/// one token (`gemv_norm_fp8`, y_stride = w.rows). `lora`: a device array of the tokens' LoRA
/// sites (`InputSites`: `LoraSite` addresses, 0 for a token without: `ops::lora`; bf16 w), or none.
#[allow(clippy::too_many_arguments)]
pub fn gemv_norm_mma(
    gpu: &Gpu,
    h: DevPtr,
    norm: &Vector,
    eps: f32,
    w: &Matrix,
    t: usize,
    y: DevPtr,
    y_stride: usize,
    lora: InputSites,
) -> Result<()> {
    ensure!(w.cols == 2048 && norm.len == 2048, "gemv_norm_mma: {}x{} / norm {} (2048 wide)", w.rows, w.cols, norm.len);
    check_tokens("gemv_norm_mma", w, t, y_stride)?;
    ensure!(lora.sites == 0 || w.is_bf16(), "gemv_norm_mma: LoRA sites on a quantised matrix");
    if w.format.is_some() {
        // as stored: a token at a time (each its own decode step's bits)
        for i in 0..t {
            let (h, y) = (h + (i * 2048 * 4) as u64, y + (i * y_stride * 4) as u64);
            gemv_q::gemv_norm_q(gpu, h, norm, eps, w, None, y, None)?;
        }
        return Ok(());
    }
    if w.fp8_scales.is_some() {
        ensure!(t == 1 && y_stride == w.rows, "gemv_norm_mma: an FP8 matrix takes one token");
        return gemv_norm(gpu, h, norm, eps, w, y);
    }
    let per_launch = mma_tokens_per_launch(gpu);
    for first in (0..t).step_by(per_launch) {
        let n = per_launch.min(t - first);
        let launch = Launch::new((gpu.sms, 1, 1), 256, mma_gemv_shared(gpu, n) + lora_u_bytes(lora.sites, n));
        let (h, y) = (h + (first * 2048 * 4) as u64, y + (first * y_stride * 4) as u64);
        let sites = if lora.sites == 0 { 0 } else { lora.sites + (first * 8) as u64 }; // this launch's tokens' sites
        gemv_mma_cu::gemv_norm_mma_bf16(
            gpu,
            launch,
            w.ptr,
            h,
            norm.ptr,
            y,
            w.rows as i32,
            y_stride as i32,
            n as i32,
            eps,
            sites,
            lora.once,
        )?;
    }
    Ok(())
}

/// y[i·y_stride + r] = w[r] · x[i] for i < t ≤ GEMV_MAX_TOKENS, x bf16 [t, 2048], bf16 w: the
/// tensor-core GEMV of `gemv_norm_mma` with x given.
pub fn gemv_mma(gpu: &Gpu, x: DevPtr, w: &Matrix, t: usize, y: DevPtr, y_stride: usize) -> Result<()> {
    ensure!(w.cols == 2048 && w.is_bf16(), "gemv_mma: {}x{} (bf16, 2048 wide)", w.rows, w.cols);
    check_tokens("gemv_mma", w, t, y_stride)?;
    let per_launch = mma_tokens_per_launch(gpu);
    for first in (0..t).step_by(per_launch) {
        let n = per_launch.min(t - first);
        let launch = Launch::new((gpu.sms, 1, 1), 256, mma_gemv_shared(gpu, n));
        let (x, y) = (x + (first * 2048 * 2) as u64, y + (first * y_stride * 4) as u64);
        gemv_mma_cu::gemv_mma_bf16(gpu, launch, w.ptr, x, y, w.rows as i32, y_stride as i32, n as i32)?;
    }
    Ok(())
}

/// A projection of the residual stream in the forward pass (the GDN in-projections, q/k/v):
/// `linear`, but one token goes through the decode steps' tensor-core GEMV, so that a one-token
/// forward gives the decode step's bits.
pub fn project(gpu: &Gpu, x: DevPtr, w: &Matrix, t: usize, y: DevPtr) -> Result<()> {
    if t == 1 && w.cols == 2048 && w.is_bf16() {
        gemv_mma(gpu, x, w, 1, y, w.rows)
    } else {
        linear(gpu, x, w, t, y)
    }
}

/// `gemv_norm` for t ≤ GEMV_MAX_TOKENS tokens at once (the several-token steps' lm_head), bf16
/// weights: y[i·y_stride + r] = w[r] · RMSNorm(h[i]) for i < t, h f32 [t, 2048]. Each row of w is
/// read once for all t tokens, and each token gets the bits of its own `gemv_norm` (which the
/// screened lm_head's rescore reproduces).
#[allow(clippy::too_many_arguments)]
pub fn gemv_norm_tokens(
    gpu: &Gpu,
    h: DevPtr,
    norm: &Vector,
    eps: f32,
    w: &Matrix,
    t: usize,
    y: DevPtr,
    y_stride: usize,
) -> Result<()> {
    if w.format.is_some() {
        // a token at a time
        return gemv_norm_mma(gpu, h, norm, eps, w, t, y, y_stride, InputSites::NONE);
    }
    ensure!(
        w.cols == 2048 && norm.len == 2048 && w.fp8_scales.is_none(),
        "gemv_norm_tokens: {}x{} {} / norm {} (the kernel takes bf16, 2048 wide)",
        w.rows,
        w.cols,
        if w.is_bf16() { "bf16" } else { "FP8" },
        norm.len
    );
    check_tokens("gemv_norm_tokens", w, t, y_stride)?;
    // the rings (64 KB) and 4 KB of x (bf16) a token: at most 96 KB, two blocks an SM
    let shared = gemv_shared_bytes(w.cols) - (w.cols * 4) as u32 + (t * w.cols * 2) as u32;
    let launch = Launch::new(gemv_blocks(gpu), 256, shared);
    gemv_cu::gemv_norm_tokens_bf16(gpu, launch, w.ptr, h, norm.ptr, y, w.rows as i32, y_stride as i32, t as i32, eps)
}

/// `gemv` with accumulate for t ≤ GEMV_MAX_TOKENS tokens of a 4096-wide bf16 matrix at once (the
/// multi-token step's out_proj / o_proj): y[i] += w · x[i], x bf16 [t, 4096], y f32 [t, w.rows].
/// Each row is read once; each token gets the bits of its own `gemv`. A matrix kept as stored in
/// a row format goes to `gemv_q::out_proj_tokens_q`.
pub fn gemv_tokens_accumulate(gpu: &Gpu, x: DevPtr, w: &Matrix, t: usize, y: DevPtr) -> Result<()> {
    if w.format.is_some() {
        return gemv_q::out_proj_tokens_q(gpu, x, w, t, y);
    }
    ensure!(
        w.cols == 4096 && w.is_bf16(),
        "gemv_tokens_accumulate: {}x{} (the kernel takes bf16, 4096 wide)",
        w.rows,
        w.cols
    );
    ensure!((1..=GEMV_MAX_TOKENS).contains(&t), "gemv_tokens_accumulate: {t} tokens (1..={GEMV_MAX_TOKENS})");
    // gemv_bf16's in-4096 tiles, each dotted with every token's x (gemv.cu)
    let launch = Launch::new((w.rows.div_ceil(8) as u32, 1, 1), 256, (t * 4096 * 2) as u32);
    gemv_cu::gemv_tokens_4096_bf16(gpu, launch, w.ptr, x, y, w.rows as i32, t as i32)
}

/// `gemv_norm` for the GDN decode step's in-projection w (12352 rows: qkv | z | b | a) with the
/// causal conv + SiLU folded in: mixed (f32 [8192]) = silu(conv(qkv)) and the window conv_state
/// (f32 [3, 8192]) shifted by the new qkv row (taps f32 [8192, 4]); y (f32 [12352]) gets z, b, a
/// at rows 8192.. (its first 8192 entries are not written). FP8 (`w` 12288 rows qkv | z):
/// `tail` holds the bf16 b | a rows [64, 2048], which the bf16 form finds inside `w`.
#[allow(clippy::too_many_arguments)]
pub fn gemv_norm_conv(
    gpu: &Gpu,
    h: DevPtr,
    norm: &Vector,
    eps: f32,
    w: &Matrix,
    tail: &Matrix,
    y: DevPtr,
    conv_state: DevPtr,
    taps: DevPtr,
    mixed: DevPtr,
    lora: InputSites,
) -> Result<()> {
    ensure!(lora.sites == 0 || w.is_bf16(), "gemv_norm_conv: a LoRA site on a quantised in-projection");
    if w.format.is_some() {
        let conv = gemv_q::Conv { state: conv_state, taps, mixed };
        return gemv_q::gemv_norm_q(gpu, h, norm, eps, w, Some(tail), y, Some(conv));
    }
    if let Some(scales) = w.fp8_scales {
        ensure!(
            w.cols == 2048 && w.rows == 12288 && tail.rows == 64 && tail.fp8_scales.is_none(),
            "gemv_norm_conv_fp8: {}x{} with a {}-row tail",
            w.rows,
            w.cols,
            tail.rows
        );
        return gemv_fp8_cu::gemv_norm_conv_fp8(
            gpu,
            Launch::new(gemv_blocks(gpu), 256, FP8_GEMV_SHARED),
            w.ptr,
            scales,
            tail.ptr,
            h,
            norm.ptr,
            y,
            w.rows as i32,
            eps,
            conv_state,
            taps,
            mixed,
        );
    }
    ensure!(
        w.cols == 2048 && norm.len == 2048 && w.rows > 8192,
        "gemv_norm_conv: {}x{} / norm {}",
        w.rows,
        w.cols,
        norm.len
    );
    // (bf16: the tail's rows are read inside w, so they must follow its others)
    ensure!(
        tail.ptr + (tail.rows * tail.cols * 2) as DevPtr == w.ptr + (w.rows * w.cols * 2) as DevPtr,
        "gemv_norm_conv: a bf16 in-projection ({} rows) without its {}-row tail inside it",
        w.rows,
        tail.rows
    );
    let launch = Launch::new((gpu.sms, 1, 1), 256, mma_gemv_shared(gpu, 1) + lora_u_bytes(lora.sites, 1));
    let rows = w.rows as i32;
    gemv_mma_cu::gemv_norm_conv_mma_bf16(
        gpu, launch, w.ptr, h, norm.ptr, y, rows, eps, conv_state, taps, mixed, lora.sites, lora.once,
    )
}

/// The tensor-core GEMVs' room for a LoRA site's u (f32 [tokens][LORA_FUSED_RANKS]) after x.
fn lora_u_bytes(lora: DevPtr, tokens: usize) -> u32 {
    if lora == 0 {
        0
    } else {
        (tokens * crate::ops::lora::FUSED_RANKS * 4) as u32
    }
}

/// out (bf16, `w.rows × w.cols`) = the FP8 matrix w dequantised (w = q · s, rounded to bf16):
/// what prefill multiplies.
pub fn dequantize(gpu: &Gpu, w: &Matrix, out: DevPtr) -> Result<()> {
    if w.format.is_some() {
        return gemv_q::dequantize_q(gpu, w, out);
    }
    let Some(scales) = w.fp8_scales else { anyhow::bail!("dequantize: not an FP8 or GGUF-format matrix") };
    ensure!(w.cols.is_multiple_of(16), "dequantize: {} columns (a multiple of 16)", w.cols);
    gemv_fp8_cu::dequantize_fp8(
        gpu,
        Launch::new((4 * gpu.sms, 1, 1), 256, 0),
        w.ptr,
        scales,
        out,
        w.rows as i64,
        w.cols as i32,
    )
}

/// cuBLAS: row-major Y[t, out] = X[t, in] · W[out, in]ᵀ is column-major Yᵀ = op(W)·X with W
/// transposed (W row-major is Wᵀ column-major).
pub fn gemm(gpu: &Gpu, x: DevPtr, w: &Matrix, t: usize, y: DevPtr) -> Result<()> {
    let (alpha, beta) = (1.0f32, 0.0f32);
    let (m, n, k) = (w.rows as i32, t as i32, w.cols as i32);
    // SAFETY: cuBLAS on the model's stream reads W [out, in] and X [t, in] (bf16) and writes
    // Y [t, out] (f32): the caller's allocations of those sizes; alpha and beta live across the
    // call (cuBLAS reads host scalars before it returns).
    unsafe {
        cudarc::cublas::result::gemm_ex(
            *gpu.blas.handle(),
            blas::cublasOperation_t::CUBLAS_OP_T,
            blas::cublasOperation_t::CUBLAS_OP_N,
            m,
            n,
            k,
            &alpha as *const f32 as *const _,
            w.ptr as *const _,
            blas::cudaDataType::CUDA_R_16BF,
            k,
            x as *const _,
            blas::cudaDataType::CUDA_R_16BF,
            k,
            &beta as *const f32 as *const _,
            y as *mut _,
            blas::cudaDataType::CUDA_R_32F,
            m,
            blas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            blas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
        )
    }
    .map_err(|e| anyhow!("cuBLAS gemm [{t}x{}]·[{}x{}]ᵀ: {e:?}", w.cols, w.rows, w.cols))?;
    gpu.record_point(|| format!("cuBLAS gemm_ex (m {m}, n {n}, k {k})"))
}

/// dst (bf16 [n]) = src (f32 [n]).
pub fn cast_bf16(gpu: &Gpu, src: DevPtr, dst: DevPtr, n: usize) -> Result<()> {
    let blocks = n.div_ceil(256).min(4096) as u32;
    cast_cu::cast_f32_to_bf16(gpu, Launch::new((blocks, 1, 1), 256, 0), src, dst, n as i32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testutil::*;
    use solo_model::Tensor;

    /// GEMV (t = 1) and cuBLAS (t > 1) against the CPU matmul, real shapes.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn linear_matches_cpu() {
        let gpu = gpu();
        for &(rows, cols, t) in &[(8192, 2048, 1), (2048, 4096, 1), (32, 2048, 1), (8192, 2048, 37), (2048, 4096, 300)]
        {
            let wv = round_bf16(&random(1, rows * cols, (3.0 / cols as f32).sqrt()));
            let xv = round_bf16(&random(2, t * cols, 1.0));
            let w_cpu = Tensor::from_f32_as_bf16(vec![rows, cols], &wv);
            let want = solo_cpu::ops::matmul(&xv, &w_cpu);
            let wbuf = gpu.upload(&bf16_bytes(&wv)).unwrap();
            let xbuf = gpu.upload(&bf16_bytes(&xv)).unwrap();
            let ybuf = gpu.upload_f32(&vec![f32::NAN; t * rows]).unwrap();
            let w = Matrix::bf16(wbuf.ptr(), rows, cols);
            linear(gpu, xbuf.ptr(), &w, t, ybuf.ptr()).unwrap();
            let got = gpu.download_f32(ybuf.ptr(), t * rows).unwrap();
            assert_close(&format!("linear {t}x{cols} -> {rows}"), &got, &want, 1e-5);
        }
    }

    /// A random bf16 matrix [rows, cols] on the CPU and on the GPU.
    fn upload_matrix(seed: u64, rows: usize, cols: usize) -> (Tensor, Matrix, crate::runtime::DevBuf) {
        let wv = round_bf16(&random(seed, rows * cols, (3.0 / cols as f32).sqrt()));
        let buf = gpu().upload(&bf16_bytes(&wv)).unwrap();
        let m = Matrix::bf16(buf.ptr(), rows, cols);
        (Tensor::from_f32_as_bf16(vec![rows, cols], &wv), m, buf)
    }

    /// The decode GEMVs with the residual add or the input RMSNorm folded in, against the CPU;
    /// and the folded norm gives the very bits of the unfused pair (norm kernel, then GEMV).
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn gemv_folds_match_cpu() {
        let gpu = gpu();
        for &(rows, cols) in &[(2048, 4096), (300, 2048)] {
            let (w_cpu, w, _wbuf) = upload_matrix(1, rows, cols);
            let x = round_bf16(&random(2, cols, 1.0));
            let y0 = random(3, rows, 2.0);
            let mut want = y0.clone();
            solo_cpu::ops::add_in_place(&mut want, &solo_cpu::ops::matmul(&x, &w_cpu));
            let (xb, yb) = (gpu.upload(&bf16_bytes(&x)).unwrap(), gpu.upload_f32(&y0).unwrap());
            gemv(gpu, xb.ptr(), &w, yb.ptr(), true).unwrap();
            assert_close(&format!("y += W·x, {rows}x{cols}"), &gpu.download_f32(yb.ptr(), rows).unwrap(), &want, 1e-5);
        }
        let h = random(4, 2048, 3.0);
        let norm_w = random(5, 2048, 0.3);
        let x = round_bf16(&solo_cpu::ops::rms_norm_one_plus(&h, &norm_w, 1e-6));
        let hb = gpu.upload_f32(&h).unwrap();
        let nb = gpu.upload_f32(&norm_w.iter().map(|v| 1.0 + v).collect::<Vec<_>>()).unwrap();
        let norm = Vector { ptr: nb.ptr(), len: 2048 };
        for rows in [12352, 257, 9] {
            let (w_cpu, w, _wbuf) = upload_matrix(6, rows, 2048);
            let y = gpu.upload_f32(&vec![f32::NAN; rows]).unwrap();
            gemv_norm(gpu, hb.ptr(), &norm, 1e-6, &w, y.ptr()).unwrap();
            let got = gpu.download_f32(y.ptr(), rows).unwrap();
            assert_close(&format!("W·RMSNorm(h), {rows} rows"), &got, &solo_cpu::ops::matmul(&x, &w_cpu), 1e-5);
            let xb = gpu.alloc(2048 * 2).unwrap();
            crate::ops::norm::rms_norm(gpu, hb.ptr(), &norm, 1, 1e-6, xb.ptr()).unwrap();
            gemv(gpu, xb.ptr(), &w, y.ptr(), false).unwrap();
            let unfused = gpu.download_f32(y.ptr(), rows).unwrap();
            assert!(
                got.iter().zip(&unfused).all(|(a, b)| a.to_bits() == b.to_bits()),
                "{rows} rows: folded norm ≠ unfused bits"
            );
        }
    }

    /// The multi-token GEMV: t tokens' W·RMSNorm(h_i) in one launch, each row of the output the
    /// bits `gemv_norm` gives that token alone, and close to the CPU's matmul; rows past the
    /// matrix's in a wider output stride stay untouched.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn gemv_norm_tokens_matches_one_token_gemvs_and_cpu() {
        let gpu = gpu();
        let norm_w = random(5, 2048, 0.3);
        let nb = gpu.upload_f32(&norm_w.iter().map(|v| 1.0 + v).collect::<Vec<_>>()).unwrap();
        let norm = Vector { ptr: nb.ptr(), len: 2048 };
        for (rows, t) in [(12352, 4), (9216, 8), (300, 1), (257, 6)] {
            let (w_cpu, w, _wbuf) = upload_matrix(6 + t as u64, rows, 2048);
            let h = random(40 + t as u64, t * 2048, 3.0);
            let hb = gpu.upload_f32(&h).unwrap();
            let stride = rows + 3;
            let y = gpu.upload_f32(&vec![f32::NAN; t * stride]).unwrap();
            gemv_norm_tokens(gpu, hb.ptr(), &norm, 1e-6, &w, t, y.ptr(), stride).unwrap();
            let got = gpu.download_f32(y.ptr(), t * stride).unwrap();
            let one = gpu.alloc(rows * 4).unwrap();
            for i in 0..t {
                let row = &got[i * stride..][..stride];
                assert!(row[rows..].iter().all(|v| v.is_nan()), "{rows} rows, token {i}: wrote past its rows");
                let x = round_bf16(&solo_cpu::ops::rms_norm_one_plus(&h[i * 2048..][..2048], &norm_w, 1e-6));
                let want = solo_cpu::ops::matmul(&x, &w_cpu);
                assert_close(&format!("{t} tokens, token {i}, {rows} rows"), &row[..rows], &want, 1e-5);
                gemv_norm(gpu, hb.ptr() + (i * 2048 * 4) as u64, &norm, 1e-6, &w, one.ptr()).unwrap();
                let alone = gpu.download_f32(one.ptr(), rows).unwrap();
                assert!(
                    row[..rows].iter().zip(&alone).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{t} tokens, token {i}, {rows} rows: not the one-token GEMV's bits"
                );
            }
        }
        let (_, w, _wbuf) = upload_matrix(1, 64, 2048);
        let y = gpu.alloc(9 * 64 * 4).unwrap();
        assert!(gemv_norm_tokens(gpu, y.ptr(), &norm, 1e-6, &w, 9, y.ptr(), 64).is_err(), "9 tokens");
    }

    /// The tensor-core GEMVs: t tokens' W·x_i in one launch, each token's row the bits it gets
    /// alone (t = 1) and close to the CPU's matmul, rows past the matrix's in a wider output
    /// stride untouched; the folded input norm gives the bits of the unfused pair (norm kernel,
    /// then GEMV); the one-token GDN in-projection with the conv folded in gives the same z/b/a
    /// bits and the CPU's conv of the same qkv rows.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn gemv_mma_matches_one_token_and_cpu() {
        let gpu = gpu();
        let norm_w = random(5, 2048, 0.3);
        let nb = gpu.upload_f32(&norm_w.iter().map(|v| 1.0 + v).collect::<Vec<_>>()).unwrap();
        let norm = Vector { ptr: nb.ptr(), len: 2048 };
        for (rows, t) in [(12352, 8), (9216, 3), (300, 1), (257, 6), (16 * 133 * 2 + 5, 2)] {
            let (w_cpu, w, _wbuf) = upload_matrix(60 + t as u64, rows, 2048);
            let x = round_bf16(&random(70 + t as u64, t * 2048, 1.5));
            let xb = gpu.upload(&bf16_bytes(&x)).unwrap();
            let stride = rows + 3;
            let y = gpu.upload_f32(&vec![f32::NAN; t * stride]).unwrap();
            gemv_mma(gpu, xb.ptr(), &w, t, y.ptr(), stride).unwrap();
            let got = gpu.download_f32(y.ptr(), t * stride).unwrap();
            let one = gpu.alloc(rows * 4).unwrap();
            for i in 0..t {
                let row = &got[i * stride..][..stride];
                assert!(row[rows..].iter().all(|v| v.is_nan()), "{rows} rows, token {i}: wrote past its rows");
                let want = solo_cpu::ops::matmul(&x[i * 2048..][..2048], &w_cpu);
                assert_close(&format!("{t} tokens, token {i}, {rows} rows"), &row[..rows], &want, 1e-5);
                gemv_mma(gpu, xb.ptr() + (i * 2048 * 2) as u64, &w, 1, one.ptr(), rows).unwrap();
                let alone = gpu.download_f32(one.ptr(), rows).unwrap();
                assert!(
                    row[..rows].iter().zip(&alone).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{t} tokens, token {i}, {rows} rows: not the bits of the token alone"
                );
            }
            let h = random(90 + t as u64, t * 2048, 3.0);
            let hb = gpu.upload_f32(&h).unwrap();
            gemv_norm_mma(gpu, hb.ptr(), &norm, 1e-6, &w, t, y.ptr(), stride, InputSites::NONE).unwrap();
            let folded = gpu.download_f32(y.ptr(), t * stride).unwrap();
            let normed = gpu.alloc(t * 2048 * 2).unwrap();
            crate::ops::norm::rms_norm(gpu, hb.ptr(), &norm, t, 1e-6, normed.ptr()).unwrap();
            gemv_mma(gpu, normed.ptr(), &w, t, y.ptr(), stride).unwrap();
            let unfused = gpu.download_f32(y.ptr(), t * stride).unwrap();
            assert!(
                folded.iter().zip(&unfused).all(|(a, b)| a.to_bits() == b.to_bits()),
                "{t} tokens, {rows} rows: folded norm ≠ unfused bits"
            );
        }
        let (_, w, _wbuf) = upload_matrix(1, 64, 2048);
        let y = gpu.alloc(9 * 64 * 4).unwrap();
        assert!(gemv_norm_mma(gpu, y.ptr(), &norm, 1e-6, &w, 9, y.ptr(), 64, InputSites::NONE).is_err(), "9 tokens");

        let (conv, rows) = (8192, 12352);
        let (_, w, _wbuf) = upload_matrix(80, rows, 2048);
        let h = random(81, 2048, 3.0);
        let state: Vec<f32> = random(82, 3 * conv, 1.0);
        let taps: Vec<f32> = random(83, 4 * conv, 0.6);
        let (hb, sb, tb) =
            (gpu.upload_f32(&h).unwrap(), gpu.upload_f32(&state).unwrap(), gpu.upload_f32(&taps).unwrap());
        let plain = gpu.alloc(rows * 4).unwrap();
        gemv_norm_mma(gpu, hb.ptr(), &norm, 1e-6, &w, 1, plain.ptr(), rows, InputSites::NONE).unwrap();
        let plain = gpu.download_f32(plain.ptr(), rows).unwrap();
        let y = gpu.upload_f32(&vec![f32::NAN; rows]).unwrap();
        let mixed = gpu.upload_f32(&vec![f32::NAN; conv]).unwrap();
        gemv_norm_conv(gpu, hb.ptr(), &norm, 1e-6, &w, &w, y.ptr(), sb.ptr(), tb.ptr(), mixed.ptr(), InputSites::NONE)
            .unwrap();
        let got_y = gpu.download_f32(y.ptr(), rows).unwrap();
        assert!(
            got_y[conv..].iter().zip(&plain[conv..]).all(|(a, b)| a.to_bits() == b.to_bits()),
            "in-projection with the conv: z/b/a rows are not gemv_norm_mma's bits"
        );
        let (want_mixed, want_state) = conv_step_reference(&state, &taps, &plain);
        assert_close("in-projection: conv output", &gpu.download_f32(mixed.ptr(), conv).unwrap(), &want_mixed, 1e-5);
        assert_eq!(gpu.download_f32(sb.ptr(), 3 * conv).unwrap(), want_state, "in-projection: conv window");
    }

    /// A random FP8 matrix (the official block recipe) on the CPU and on the GPU.
    fn fp8_matrix(seed: u64, rows: usize, cols: usize) -> (Tensor, Matrix, Vec<crate::runtime::DevBuf>) {
        let t = Tensor::quantize_fp8(rows, cols, &random(seed, rows * cols, (3.0 / cols as f32).sqrt()));
        let mut up = crate::weights::Uploader::new(gpu()).unwrap();
        let m = up.matrix(&t).unwrap();
        assert!(m.fp8_scales.is_some());
        (t, m, up.finish().unwrap())
    }

    /// The FP8 decode GEMV (input norm folded in) against the CPU's matmul over the dequantised
    /// weights, and the prefill's dequantisation bit for bit against the CPU's (q·s, to bf16).
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn fp8_gemv_and_dequantize_match_cpu() {
        if !fp8_runs_here() {
            return;
        }
        let gpu = gpu();
        let h = random(4, 2048, 3.0);
        let norm_w = random(5, 2048, 0.3);
        let x = round_bf16(&solo_cpu::ops::rms_norm_one_plus(&h, &norm_w, 1e-6));
        let hb = gpu.upload_f32(&h).unwrap();
        let nb = gpu.upload_f32(&norm_w.iter().map(|v| 1.0 + v).collect::<Vec<_>>()).unwrap();
        let norm = Vector { ptr: nb.ptr(), len: 2048 };
        for rows in [9216, 384] {
            let (w_cpu, w, _bufs) = fp8_matrix(6 + rows as u64, rows, 2048);
            let y = gpu.upload_f32(&vec![f32::NAN; rows]).unwrap();
            gemv_norm(gpu, hb.ptr(), &norm, 1e-6, &w, y.ptr()).unwrap();
            let got = gpu.download_f32(y.ptr(), rows).unwrap();
            assert_close(&format!("FP8 W·RMSNorm(h), {rows} rows"), &got, &solo_cpu::ops::matmul(&x, &w_cpu), FP8_TOL);

            let out = gpu.upload(&vec![0xFFu8; rows * 2048 * 2]).unwrap();
            dequantize(gpu, &w, out.ptr()).unwrap();
            let got = bf16_from_bytes(&gpu.download(out.ptr(), rows * 2048 * 2).unwrap());
            assert_eq!(got, round_bf16(&w_cpu.to_f32()), "dequantize, {rows} rows");
        }
    }

    /// The GDN in-projection in FP8 (qkv | z e4m3, b | a bf16 in their own matrix) with the conv
    /// folded in, against the CPU: y's z/b/a rows, the conv's output and the shifted window.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn fp8_gemv_norm_conv_matches_cpu() {
        if !fp8_runs_here() {
            return;
        }
        let gpu = gpu();
        let (conv, rows8) = (8192, 12288);
        let h = random(14, 2048, 3.0);
        let norm_w = random(15, 2048, 0.3);
        let x = round_bf16(&solo_cpu::ops::rms_norm_one_plus(&h, &norm_w, 1e-6));
        let qz = Tensor::quantize_fp8(rows8, 2048, &random(16, rows8 * 2048, 0.04));
        let ba = Tensor::from_f32_as_bf16(vec![64, 2048], &random(17, 64 * 2048, 0.04));
        let mut up = crate::weights::Uploader::new(gpu).unwrap();
        let (w, _) = up.stacked(&[&qz]).unwrap();
        let tail = up.matrix(&ba).unwrap();
        let _bufs = up.finish().unwrap();
        let state: Vec<f32> = random(18, 3 * conv, 1.0);
        let taps: Vec<f32> = random(19, 4 * conv, 0.6);
        let (hb, sb, tb) =
            (gpu.upload_f32(&h).unwrap(), gpu.upload_f32(&state).unwrap(), gpu.upload_f32(&taps).unwrap());
        let nb = gpu.upload_f32(&norm_w.iter().map(|v| 1.0 + v).collect::<Vec<_>>()).unwrap();
        let norm = Vector { ptr: nb.ptr(), len: 2048 };
        let y = gpu.upload_f32(&vec![f32::NAN; rows8 + 64]).unwrap();
        let mixed = gpu.upload_f32(&vec![f32::NAN; conv]).unwrap();
        gemv_norm_conv(
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
            InputSites::NONE,
        )
        .unwrap();

        let mut full = solo_cpu::ops::matmul(&x, &qz);
        full.extend(solo_cpu::ops::matmul(&x, &ba));
        let got_y = gpu.download_f32(y.ptr(), rows8 + 64).unwrap();
        assert_close("FP8 in-projection: z, b, a rows", &got_y[conv..], &full[conv..], FP8_TOL);
        let (want_mixed, want_state) = conv_step_reference(&state, &taps, &full);
        assert_close(
            "FP8 in-projection: conv output",
            &gpu.download_f32(mixed.ptr(), conv).unwrap(),
            &want_mixed,
            FP8_TOL,
        );
        assert_close(
            "FP8 in-projection: conv window",
            &gpu.download_f32(sb.ptr(), 3 * conv).unwrap(),
            &want_state,
            FP8_TOL,
        );
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn cast_rounds_like_half() {
        let gpu = gpu();
        let v = random(3, 10_000, 5.0);
        let src = gpu.upload_f32(&v).unwrap();
        let dst = gpu.alloc(v.len() * 2).unwrap();
        cast_bf16(gpu, src.ptr(), dst.ptr(), v.len()).unwrap();
        let got = bf16_from_bytes(&gpu.download(dst.ptr(), v.len() * 2).unwrap());
        assert_eq!(got, round_bf16(&v));
    }
}
