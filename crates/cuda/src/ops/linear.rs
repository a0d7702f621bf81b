//! Projections: `y[T, out] = x[T, in] · Wᵀ` with bf16 inputs and f32 outputs.
//! One token (decode) runs our GEMV kernels (`gemv.cu`; the decode step also folds the input
//! RMSNorm or the residual add into them); more tokens (prefill) run cuBLAS with f32
//! accumulation on the tensor cores.

use crate::kernels::Source;
use crate::runtime::{Arg, DevPtr, Gpu};
use crate::weights::{Matrix, Vector};
use anyhow::{anyhow, ensure, Result};
use cudarc::cublas::sys as blas;

pub const SOURCE: Source = Source {
    file: "gemv.cu",
    text: include_str!("gemv.cu"),
    functions: &["gemv_bf16", "gemv_norm_bf16", "gemv_norm_conv_bf16"],
};
pub const SOURCE_CAST: Source =
    Source { file: "cast.cu", text: include_str!("cast.cu"), functions: &["cast_f32_to_bf16"] };

/// y (f32 [t, w.rows]) = x (bf16 [t, w.cols]) · wᵀ.
pub fn linear(gpu: &Gpu, x: DevPtr, w: &Matrix, t: usize, y: DevPtr) -> Result<()> {
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

/// Blocks of the streaming GEMVs: two per SM.
fn gemv_blocks(gpu: &Gpu) -> (u32, u32, u32) {
    (2 * gpu.sms, 1, 1)
}

/// One token: y (f32 [w.rows]) = w · x (bf16 [w.cols], 2048 or 4096 wide), or with
/// `accumulate`, y += w · x (a residual add folded in).
pub fn gemv(gpu: &Gpu, x: DevPtr, w: &Matrix, y: DevPtr, accumulate: bool) -> Result<()> {
    ensure!(w.cols == 2048 || w.cols == 4096, "gemv: input width {} (the kernel takes 2048 or 4096)", w.cols);
    // in 4096: plain tiles of 8 rows (see gemv.cu); in 2048: the streaming grid
    let (grid, shared) = if w.cols == 4096 {
        ((w.rows.div_ceil(8) as u32, 1, 1), 4096 * 4)
    } else {
        (gemv_blocks(gpu), gemv_shared_bytes(w.cols))
    };
    gpu.launch(
        "gemv_bf16",
        grid,
        256,
        shared,
        &[
            Arg::Ptr(w.ptr),
            Arg::Ptr(x),
            Arg::Ptr(y),
            Arg::I32(w.rows as i32),
            Arg::I32(w.cols as i32),
            Arg::I32(accumulate as i32),
        ],
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
    gpu.launch(
        "gemv_norm_bf16",
        gemv_blocks(gpu),
        256,
        gemv_shared_bytes(w.cols),
        &[Arg::Ptr(w.ptr), Arg::Ptr(h), Arg::Ptr(norm.ptr), Arg::Ptr(y), Arg::I32(w.rows as i32), Arg::F32(eps)],
    )
}

/// `gemv_norm` for the GDN decode step's in-projection w (12352 rows: qkv | z | b | a) with the
/// causal conv + SiLU folded in: mixed (f32 [8192]) = silu(conv(qkv)) and the window conv_state
/// (f32 [3, 8192]) shifted by the new qkv row (taps f32 [8192, 4]); y (f32 [12352]) gets z, b, a
/// at rows 8192.. (its first 8192 entries are not written).
#[allow(clippy::too_many_arguments)]
pub fn gemv_norm_conv(
    gpu: &Gpu,
    h: DevPtr,
    norm: &Vector,
    eps: f32,
    w: &Matrix,
    y: DevPtr,
    conv_state: DevPtr,
    taps: DevPtr,
    mixed: DevPtr,
) -> Result<()> {
    ensure!(
        w.cols == 2048 && norm.len == 2048 && w.rows > 8192,
        "gemv_norm_conv: {}x{} / norm {}",
        w.rows,
        w.cols,
        norm.len
    );
    gpu.launch(
        "gemv_norm_conv_bf16",
        gemv_blocks(gpu),
        256,
        gemv_shared_bytes(w.cols),
        &[
            Arg::Ptr(w.ptr),
            Arg::Ptr(h),
            Arg::Ptr(norm.ptr),
            Arg::Ptr(y),
            Arg::I32(w.rows as i32),
            Arg::F32(eps),
            Arg::Ptr(conv_state),
            Arg::Ptr(taps),
            Arg::Ptr(mixed),
        ],
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
    .map_err(|e| anyhow!("cuBLAS gemm [{t}x{}]·[{}x{}]ᵀ: {e:?}", w.cols, w.rows, w.cols))
}

/// dst (bf16 [n]) = src (f32 [n]).
pub fn cast_bf16(gpu: &Gpu, src: DevPtr, dst: DevPtr, n: usize) -> Result<()> {
    let blocks = n.div_ceil(256).min(4096) as u32;
    gpu.launch("cast_f32_to_bf16", (blocks, 1, 1), 256, 0, &[Arg::Ptr(src), Arg::Ptr(dst), Arg::I32(n as i32)])
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
            let w = Matrix { ptr: wbuf.ptr(), rows, cols };
            linear(gpu, xbuf.ptr(), &w, t, ybuf.ptr()).unwrap();
            let got = gpu.download_f32(ybuf.ptr(), t * rows).unwrap();
            assert_close(&format!("linear {t}x{cols} -> {rows}"), &got, &want, 1e-5);
        }
    }

    /// The decode GEMVs with the residual add or the input RMSNorm folded in, against the CPU;
    /// and the folded norm gives the very bits of the unfused pair (norm kernel, then GEMV).
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn gemv_folds_match_cpu() {
        let gpu = gpu();
        let upload_matrix = |seed: u64, rows: usize, cols: usize| {
            let wv = round_bf16(&random(seed, rows * cols, (3.0 / cols as f32).sqrt()));
            let buf = gpu.upload(&bf16_bytes(&wv)).unwrap();
            let m = Matrix { ptr: buf.ptr(), rows, cols };
            (Tensor::from_f32_as_bf16(vec![rows, cols], &wv), m, buf)
        };
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

    /// What a decode GEMV costs inside a graph, its weights hot in L2 (the same matrix every
    /// call) against cold (16 matrices in turn, far more than L2 holds), next to an empty
    /// kernel's cost. Prints only; run with --nocapture.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn decode_gemv_costs() {
        let gpu = gpu();
        let (none, blocks) = (&[Arg::Ptr(0), Arg::Ptr(0), Arg::I32(0)], gemv_blocks(gpu));
        let empty = graph_time_us(256, &mut |_| gpu.launch("cast_f32_to_bf16", (1, 1, 1), 32, 0, none).unwrap());
        let empty_wide = graph_time_us(256, &mut |_| gpu.launch("cast_f32_to_bf16", blocks, 256, 0, none).unwrap());
        eprintln!("empty kernel in a graph: {empty:.2} µs (1 block), {empty_wide:.2} µs ({} blocks of 256)", blocks.0);
        let h = gpu.upload_f32(&random(4, 2048, 3.0)).unwrap();
        let nb = gpu.upload_f32(&vec![1.0; 2048]).unwrap();
        let norm = Vector { ptr: nb.ptr(), len: 2048 };
        let x = gpu.upload(&bf16_bytes(&round_bf16(&random(2, 4096, 1.0)))).unwrap();
        let y = gpu.alloc(12352 * 4).unwrap();
        for &(rows, cols) in &[(2048usize, 4096usize), (4096, 2048), (12352, 2048)] {
            let bufs: Vec<_> = (0..16).map(|_| gpu.alloc(rows * cols * 2).unwrap()).collect();
            let m = |i: usize| Matrix { ptr: bufs[i % 16].ptr(), rows, cols };
            let call = |i: usize| {
                if cols == 4096 {
                    gemv(gpu, x.ptr(), &m(i), y.ptr(), true).unwrap()
                } else {
                    gemv_norm(gpu, h.ptr(), &norm, 1e-6, &m(i), y.ptr()).unwrap()
                }
            };
            let hot = graph_time_us(64, &mut |_| call(0));
            let cold = graph_time_us(64, &mut |i| call(i));
            let mb = (rows * cols * 2) as f32 / 1e6;
            eprintln!(
                "{rows}x{cols} ({mb:.1} MB): hot {hot:.2} µs ({:.2} TB/s), cold {cold:.2} µs ({:.2} TB/s)",
                mb / hot,
                mb / cold
            );
        }
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
