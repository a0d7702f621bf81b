//! The vision tower on the GPU (the formulas: crates/cpu/src/vision.rs), one image at a time:
//! its matrix products on cuBLAS (`linear::gemm`, bf16 in, f32 out), attention by the fused
//! kernel `vision_attention` (FlashAttention-2 on mma.sync; the default) or, for heads it cannot
//! take, as two batched cuBLAS products per head around a row softmax — scores for a block of
//! query rows at a time, so the scores of a 16K-patch image fit — and the small steps in
//! `vision.cu`:
//!
//! ```text
//! x = gemm(patches, W_patch) → vision_embed_finish (+ bias + resampled position grid)
//! per block: vision_layer_norm → gemm qkv → vision_qkv_rope (bias, 2-D rotary, [heads, N, dh])
//!            → vision_attention, or per query block: S = Q·Kᵀ/√dh (batched) → vision_softmax
//!              → O = P·V (batched)
//!            → gemm proj → vision_add_bias (x += · + b)
//!            → vision_layer_norm → gemm fc1 → vision_bias_gelu → gemm fc2 → vision_add_bias
//! merger: vision_layer_norm → [N/m², m²·D] → gemm fc1 → vision_bias_gelu (erf) → gemm fc2 → + b
//! ```
//!
//! Images of one frame (still images; `temporal_patch_size` frames make one patch) only.

use crate::kernels::{kernel_file, Launch};
use crate::ops::linear::gemm;
use crate::runtime::{DevBuf, DevPtr, Gpu};
use crate::weights::{Matrix, Uploader, Vector};
use anyhow::{anyhow, ensure, Result};
use cudarc::cublas::sys as blas;
use rayon::prelude::*;
use solo_model::image::ImagePatches;
use solo_model::vision::{LayerNormWeights, Linear, VisionConfig, VisionWeights};

kernel_file! {
    /// `vision.cu`'s kernels.
    pub mod vision_cu = "vision.cu" {
        fn vision_embed_finish(x: DevPtr, bias: DevPtr, pos: DevPtr, d: i32, h: i32, w: i32, m: i32, s: i32);
        fn vision_layer_norm(x: DevPtr, weight: DevPtr, bias: DevPtr, out: DevPtr, d: i32);
        fn vision_qkv_rope(qkv: DevPtr, bias: DevPtr, q: DevPtr, k: DevPtr, v: DevPtr, n: i32, heads: i32, dh: i32, w: i32, m: i32, theta: f32);
        fn vision_softmax(scores: DevPtr, probs: DevPtr, n: i32);
        fn vision_bias_gelu(y: DevPtr, bias: DevPtr, out: DevPtr, d: i32, tanh_form: i32);
        fn vision_add_bias(x: Option<DevPtr>, y: DevPtr, bias: DevPtr, d: i32);
        fn vision_attention(q: DevPtr, k: DevPtr, v: DevPtr, o: DevPtr, n: i32, heads: i32, dh: i32, scale: f32);
    }
}

/// How the tower's attention runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AttentionForm {
    /// `vision_attention`: the scores in registers (FlashAttention-2 on mma.sync), never in memory.
    Fused,
    /// Two per-head cuBLAS products around `vision_softmax`, the f32 scores and bf16
    /// probabilities of a block of query rows at a time in at most this many bytes.
    Cublas { scores_bytes: usize },
}

impl AttentionForm {
    /// The fused kernel, unless `SOLO_VISION_SCORES_MB` asks for the cuBLAS form with query blocks
    /// of that many MiB (for measuring one against the other).
    pub fn from_env() -> Self {
        match std::env::var("SOLO_VISION_SCORES_MB").ok().and_then(|v| v.parse::<usize>().ok()) {
            Some(mb) => AttentionForm::Cublas { scores_bytes: mb.max(1) << 20 },
            None => AttentionForm::Fused,
        }
    }
}

/// The fused kernel's warps a block (`VA_WARPS` in vision.cu), 16 query rows each.
const ATTENTION_WARPS: usize = 8;

/// The fused kernel's limit on the head dim (`VA_DHMAX` in vision.cu; a multiple of 8).
const FUSED_MAX_HEAD_DIM: usize = 80;

/// A linear layer on the device: bf16 weight `[out, in]`, f32 bias.
pub struct LinearGpu {
    pub weight: Matrix,
    pub bias: Vector,
}

pub struct NormGpu {
    pub weight: Vector,
    pub bias: Vector,
}

pub struct VisionBlockGpu {
    pub norm1: NormGpu,
    pub qkv: LinearGpu,
    pub proj: LinearGpu,
    pub norm2: NormGpu,
    pub fc1: LinearGpu,
    pub fc2: LinearGpu,
}

/// The tower's weights on the device.
pub struct VisionGpu {
    pub cfg: VisionConfig,
    /// [hidden, patch_len] bf16 and its bias.
    pub patch_embed: LinearGpu,
    /// bf16 [side², hidden]: the learned position grid.
    pub pos_embed: Matrix,
    pub blocks: Vec<VisionBlockGpu>,
    pub merger_norm: NormGpu,
    pub merger_fc1: LinearGpu,
    pub merger_fc2: LinearGpu,
    /// The buffers the pointers above point into.
    pub buffers: Vec<DevBuf>,
}

impl VisionGpu {
    /// Uploads a checkpoint's tower (bf16 matrices, f32 norms and biases).
    pub fn upload(gpu: &Gpu, cfg: &VisionConfig, w: &VisionWeights) -> Result<Self> {
        ensure!(cfg.unsupported().is_none(), "{}", cfg.unsupported().unwrap_or_default());
        let mut up = Uploader::new(gpu)?;
        let linear = |up: &mut Uploader, l: &Linear| -> Result<LinearGpu> {
            Ok(LinearGpu { weight: up.matrix(&l.weight)?, bias: up.vector(&l.bias, false)? })
        };
        let norm = |up: &mut Uploader, n: &LayerNormWeights| -> Result<NormGpu> {
            Ok(NormGpu { weight: up.vector(&n.weight, false)?, bias: up.vector(&n.bias, false)? })
        };
        // The Conv3d's weight [hidden, c, t, p, p] is read as the matrix [hidden, patch_len].
        let patch_embed =
            LinearGpu { weight: up.matrix(&w.patch_embed)?, bias: up.vector(&w.patch_embed_bias, false)? };
        let pos_embed = up.matrix(&w.pos_embed)?;
        let mut blocks = Vec::with_capacity(w.blocks.len());
        for b in &w.blocks {
            blocks.push(VisionBlockGpu {
                norm1: norm(&mut up, &b.norm1)?,
                qkv: linear(&mut up, &b.qkv)?,
                proj: linear(&mut up, &b.proj)?,
                norm2: norm(&mut up, &b.norm2)?,
                fc1: linear(&mut up, &b.fc1)?,
                fc2: linear(&mut up, &b.fc2)?,
            });
        }
        let merger_norm = norm(&mut up, &w.merger_norm)?;
        let merger_fc1 = linear(&mut up, &w.merger_fc1)?;
        let merger_fc2 = linear(&mut up, &w.merger_fc2)?;
        let buffers = up.finish()?;
        Ok(VisionGpu { cfg: cfg.clone(), patch_embed, pos_embed, blocks, merger_norm, merger_fc1, merger_fc2, buffers })
    }

    /// Merged image tokens [N/m², out_hidden_size] (f32, on the host) for one image's patches.
    pub fn encode(&self, gpu: &Gpu, img: &ImagePatches) -> Result<Vec<f32>> {
        self.encode_with(gpu, img, AttentionForm::from_env())
    }

    /// `encode` with the attention in `form`.
    pub fn encode_with(&self, gpu: &Gpu, img: &ImagePatches, form: AttentionForm) -> Result<Vec<f32>> {
        let cfg = &self.cfg;
        let [t, h, w] = img.grid;
        let (d, m) = (cfg.hidden_size, cfg.spatial_merge_size);
        let n = t * h * w;
        ensure!(t == 1, "the CUDA vision tower takes still images (one frame), not {t} frames");
        ensure!(h % m == 0 && w % m == 0 && n > 0, "a grid of {h}×{w} patches does not merge by {m}");
        ensure!(img.values.len() == n * cfg.patch_len(), "the image's patches do not match its grid {:?}", img.grid);
        let (heads, dh) = (cfg.num_heads, cfg.head_dim());
        ensure!(dh <= 256, "the CUDA vision tower takes heads of at most 256 dims, not {dh}");
        let inter = cfg.intermediate_size;
        let merged = n / (m * m);

        // (bf16 on the host, in parallel: 6.3M values at 1024×1024 took ~7 ms on one core)
        let mut patches_bf16 = vec![0u8; img.values.len() * 2];
        patches_bf16.par_chunks_mut(1 << 16).zip(img.values.par_chunks(1 << 15)).for_each(|(out, values)| {
            for (o, v) in out.chunks_exact_mut(2).zip(values) {
                o.copy_from_slice(&half::bf16::from_f32(*v).to_bits().to_le_bytes());
            }
        });
        let patches = gpu.upload(&patches_bf16)?;
        let x = gpu.alloc(n * d * 4)?; // f32 residual stream
        let a = gpu.alloc(n * d * 2)?; // bf16 normed rows / attention output
        let wide = gpu.alloc(n * (3 * d).max(inter) * 4)?; // f32 products
        let hidden = gpu.alloc(n * inter.max(d) * 2)?; // bf16 MLP activations
        let qkv: Vec<DevBuf> = (0..3).map(|_| gpu.alloc(n * d * 2)).collect::<Result<_>>()?;
        // The cuBLAS form's query block (rows) and its scores and probabilities.
        let cublas_bytes = match form {
            AttentionForm::Cublas { scores_bytes } => Some(scores_bytes),
            AttentionForm::Fused if dh % 8 == 0 && dh <= FUSED_MAX_HEAD_DIM => None,
            AttentionForm::Fused => Some(1 << 30),
        };
        let blocks = match cublas_bytes {
            Some(bytes) => {
                let rows = (bytes / (heads * n * 6)).clamp(1, n);
                Some((rows, gpu.alloc(heads * rows * n * 4)?, gpu.alloc(heads * rows * n * 2)?))
            }
            None => None,
        };

        let per_row = |r: usize| Launch::new((r as u32, 1, 1), 256, 0);
        gemm(gpu, patches.ptr(), &self.patch_embed.weight, n, x.ptr())?;
        let s = cfg.position_grid_side() as i32;
        let pos = self.pos_embed.ptr;
        let bias = self.patch_embed.bias.ptr;
        vision_cu::vision_embed_finish(gpu, per_row(n), x.ptr(), bias, pos, d as i32, h as i32, w as i32, m as i32, s)?;

        let (q, k, v) = (qkv[0].ptr(), qkv[1].ptr(), qkv[2].ptr());
        for b in &self.blocks {
            self.norm(gpu, &b.norm1, x.ptr(), n, a.ptr())?;
            gemm(gpu, a.ptr(), &b.qkv.weight, n, wide.ptr())?;
            let theta = cfg.rope_theta as f32;
            let (ni, hi, di) = (n as i32, heads as i32, dh as i32);
            let rope = per_row(n);
            vision_cu::vision_qkv_rope(
                gpu,
                rope,
                wide.ptr(),
                b.qkv.bias.ptr,
                q,
                k,
                v,
                ni,
                hi,
                di,
                w as i32,
                m as i32,
                theta,
            )?;
            let scale = 1.0 / (dh as f32).sqrt();
            match &blocks {
                None => {
                    let launch = Launch::new(
                        (n.div_ceil(16 * ATTENTION_WARPS) as u32, heads as u32, 1),
                        32 * ATTENTION_WARPS as u32,
                        0,
                    );
                    vision_cu::vision_attention(gpu, launch, q, k, v, a.ptr(), ni, hi, di, scale)?;
                }
                Some((rows, scores, probs)) => {
                    for first in (0..n).step_by(*rows) {
                        let c = (*rows).min(n - first);
                        // S[h] (f32 [c, n]) = Q[h][first..first + c] · K[h]ᵀ · scale
                        let q_rows = (q + (first * dh * 2) as DevPtr, dh, n * dh);
                        let s_out = (scores.ptr(), n, c * n);
                        per_head(gpu, heads, true, (n, c, dh), (k, dh, n * dh), q_rows, s_out, false, scale)?;
                        vision_cu::vision_softmax(gpu, per_row(heads * c), scores.ptr(), probs.ptr(), n as i32)?;
                        // O[first..first + c, h·dh..] (bf16, rows of d) = P[h] · V[h]
                        let o = (a.ptr() + (first * d * 2) as DevPtr, d, dh);
                        let p_in = (probs.ptr(), n, c * n);
                        per_head(gpu, heads, false, (dh, c, n), (v, dh, n * dh), p_in, o, true, 1.0)?;
                    }
                }
            }
            gemm(gpu, a.ptr(), &b.proj.weight, n, wide.ptr())?;
            vision_cu::vision_add_bias(gpu, per_row(n), Some(x.ptr()), wide.ptr(), b.proj.bias.ptr, d as i32)?;
            self.norm(gpu, &b.norm2, x.ptr(), n, a.ptr())?;
            mlp(gpu, (&b.fc1, &b.fc2), a.ptr(), n, cfg.gelu_tanh, (wide.ptr(), hidden.ptr()))?;
            vision_cu::vision_add_bias(gpu, per_row(n), Some(x.ptr()), wide.ptr(), b.fc2.bias.ptr, d as i32)?;
        }

        // The merger: m² consecutive normed patches are one row of m²·d.
        self.norm(gpu, &self.merger_norm, x.ptr(), n, a.ptr())?;
        let fcs = (&self.merger_fc1, &self.merger_fc2);
        mlp(gpu, fcs, a.ptr(), merged, false, (wide.ptr(), hidden.ptr()))?;
        let out_d = cfg.out_hidden_size;
        vision_cu::vision_add_bias(gpu, per_row(merged), None, wide.ptr(), self.merger_fc2.bias.ptr, out_d as i32)?;
        gpu.download_f32(wide.ptr(), merged * out_d)
    }

    /// out (bf16 [rows, hidden]) = LayerNorm(x (f32 [rows, hidden])).
    fn norm(&self, gpu: &Gpu, norm: &NormGpu, x: DevPtr, rows: usize, out: DevPtr) -> Result<()> {
        let (wt, b, d) = (norm.weight.ptr, norm.bias.ptr, self.cfg.hidden_size as i32);
        vision_cu::vision_layer_norm(gpu, Launch::new((rows as u32, 1, 1), 256, 0), x, wt, b, out, d)
    }
}

/// y (f32 [rows, fc2 out], no bias yet) = fc2(GELU(fc1(x) + b1)); x bf16 [rows, fc1 in].
fn mlp(
    gpu: &Gpu,
    (fc1, fc2): (&LinearGpu, &LinearGpu),
    x: DevPtr,
    rows: usize,
    tanh_form: bool,
    (y, act): (DevPtr, DevPtr),
) -> Result<()> {
    gemm(gpu, x, &fc1.weight, rows, y)?;
    let launch = Launch::new((rows as u32, 1, 1), 256, 0);
    vision_cu::vision_bias_gelu(gpu, launch, y, fc1.bias.ptr, act, fc1.weight.rows as i32, tanh_form as i32)?;
    gemm(gpu, act, &fc2.weight, rows, y)
}

/// One cuBLAS product per head, as cuBLAS sees the row-major buffers (column-major): C = alpha ·
/// op(A) · B with op(A) = Aᵀ when `transpose_a`; each operand is (pointer, leading dimension,
/// head stride in elements); A and B bf16, C bf16 or f32, f32 accumulation.
#[allow(clippy::too_many_arguments)]
fn per_head(
    gpu: &Gpu,
    heads: usize,
    transpose_a: bool,
    (m, n, k): (usize, usize, usize),
    (a, lda, sa): (DevPtr, usize, usize),
    (b, ldb, sb): (DevPtr, usize, usize),
    (c, ldc, sc): (DevPtr, usize, usize),
    c_bf16: bool,
    alpha: f32,
) -> Result<()> {
    let op_a = if transpose_a { blas::cublasOperation_t::CUBLAS_OP_T } else { blas::cublasOperation_t::CUBLAS_OP_N };
    let c_type = if c_bf16 { blas::cudaDataType::CUDA_R_16BF } else { blas::cudaDataType::CUDA_R_32F };
    let beta = 0.0f32;
    // SAFETY: cuBLAS on the model's stream reads `heads` matrices of A and B and writes those of C
    // inside the buffers `encode` allocated for them; alpha and beta are host scalars read before
    // the call returns.
    unsafe {
        cudarc::cublas::result::gemm_strided_batched_ex(
            *gpu.blas.handle(),
            op_a,
            blas::cublasOperation_t::CUBLAS_OP_N,
            m as i32,
            n as i32,
            k as i32,
            &alpha as *const f32 as *const _,
            a as *const _,
            blas::cudaDataType::CUDA_R_16BF,
            lda as i32,
            sa as i64,
            b as *const _,
            blas::cudaDataType::CUDA_R_16BF,
            ldb as i32,
            sb as i64,
            &beta as *const f32 as *const _,
            c as *mut _,
            c_type,
            ldc as i32,
            sc as i64,
            heads as i32,
            blas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            blas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
        )
    }
    .map_err(|e| anyhow!("cuBLAS per-head gemm (m {m}, n {n}, k {k}, {heads} heads): {e:?}"))?;
    gpu.record_point(|| format!("cuBLAS gemm_strided_batched_ex (m {m}, n {n}, k {k}, {heads} heads)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testutil::*;
    use solo_model::image;
    use solo_model::vision::PreprocessorConfig;

    /// tiny-a's tower (the fixture checkpoint's) on the fixture images against the CPU reference:
    /// the fused attention, and the cuBLAS form in one query block and in blocks of 3 rows.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn the_tower_matches_the_cpu_reference() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tiny-a");
        let model = solo_cpu::load(&dir).unwrap();
        let cfg = model.config.vision.as_ref().unwrap();
        let w = model.weights.visual.as_ref().unwrap();
        let gpu = gpu();
        let tower = VisionGpu::upload(gpu, cfg, w).unwrap();
        let pre = PreprocessorConfig::from_dir(&dir, cfg).unwrap();
        for file in ["wide.png", "large.png", "small.png"] {
            let bytes = std::fs::read(dir.join("../images").join(file)).unwrap();
            let rgb = image::decode(&bytes, image::DecodeLimits { max_pixels: 1 << 24 }).unwrap();
            let img = image::preprocess(&rgb, &pre).unwrap();
            let want = solo_cpu::vision::encode_image(cfg, w, &img);
            let n = img.grid.iter().product::<usize>();
            // bf16 weights and activations against the f32 reference
            let fused = tower.encode_with(gpu, &img, AttentionForm::Fused).unwrap();
            assert_close(&format!("{file}: merged tokens, fused attention"), &fused, &want, 3e-2);
            for rows in [n, 3] {
                let form = AttentionForm::Cublas { scores_bytes: cfg.num_heads * n * 6 * rows };
                let got = tower.encode_with(gpu, &img, form).unwrap();
                assert_close(&format!("{file}: merged tokens, cuBLAS attention, {rows}-row blocks"), &got, &want, 3e-2);
            }
        }
    }
}
