//! Projections: `y[T, out] = x[T, in] · Wᵀ` with bf16 inputs and f32 outputs.
//! One token (decode) runs our GEMV kernel (`gemv.cu`); more tokens (prefill) run cuBLAS with
//! f32 accumulation on the tensor cores.

use crate::kernels::Source;
use crate::runtime::{Arg, DevPtr, Gpu};
use crate::weights::Matrix;
use anyhow::{anyhow, ensure, Result};
use cudarc::cublas::sys as blas;

pub const SOURCE: Source = Source { file: "gemv.cu", text: include_str!("gemv.cu"), functions: &["gemv_bf16"] };
pub const SOURCE_CAST: Source = Source { file: "cast.cu", text: include_str!("cast.cu"), functions: &["cast_f32_to_bf16"] };

const ROWS_PER_BLOCK: usize = 8;

/// y (f32 [t, w.rows]) = x (bf16 [t, w.cols]) · wᵀ.
pub fn linear(gpu: &Gpu, x: DevPtr, w: &Matrix, t: usize, y: DevPtr) -> Result<()> {
    if t == 1 {
        gemv(gpu, x, w, y)
    } else {
        gemm(gpu, x, w, t, y)
    }
}

pub fn gemv(gpu: &Gpu, x: DevPtr, w: &Matrix, y: DevPtr) -> Result<()> {
    ensure!(w.cols.is_multiple_of(256), "gemv: input width {} is not a multiple of 256", w.cols);
    let blocks = w.rows.div_ceil(ROWS_PER_BLOCK) as u32;
    gpu.launch(
        "gemv_bf16",
        (blocks, 1, 1),
        (ROWS_PER_BLOCK * 32) as u32,
        (w.cols * 4) as u32,
        &[Arg::Ptr(w.ptr), Arg::Ptr(x), Arg::Ptr(y), Arg::I32(w.rows as i32), Arg::I32(w.cols as i32)],
    )
}

/// cuBLAS: row-major Y[t, out] = X[t, in] · W[out, in]ᵀ is column-major Yᵀ = op(W)·X with W
/// transposed (W row-major is Wᵀ column-major).
pub fn gemm(gpu: &Gpu, x: DevPtr, w: &Matrix, t: usize, y: DevPtr) -> Result<()> {
    let (alpha, beta) = (1.0f32, 0.0f32);
    let (m, n, k) = (w.rows as i32, t as i32, w.cols as i32);
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
        for &(rows, cols, t) in &[(8192, 2048, 1), (2048, 4096, 1), (32, 2048, 1), (8192, 2048, 37), (2048, 4096, 300)] {
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
