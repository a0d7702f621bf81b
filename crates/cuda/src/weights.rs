//! The weights in GPU memory, in the layouts the kernels read.
//!
//! Matrices stay as the checkpoint stores them, row-major `[out, in]`: bf16, or for the FP8
//! checkpoint e4m3 with f32 block scales `[out/128, in/128]` beside them (the kernels take both;
//! prefill dequantises a layer at a time into bf16, see `model.rs`). Small vectors (norm weights,
//! gates' constants, conv taps) become f32; zero-centred norm weights are stored as `1 + w`. The
//! shared expert is appended to the routed experts as expert `EXPERTS` (index 256), so one
//! kernel serves both.
//!
//! A GGUF file's Q4_K, Q5_K, Q6_K and Q8_0 matrices go up as stored (`kquant.rs` repacks their
//! blocks with no change of value or size) where a kernel reads them: the routed experts, the
//! mixers' stacked in-projections (a Q4_K part beside Q5_K ones goes up as Q5_K, exactly), the
//! embedding and the lm_head. Every other tensor, and other ggml types, is dequantised as ggml
//! does and rounded to bf16 just before its upload (`solo_model::bf16`, one tensor or one
//! layer's experts at a time, never the whole model in host memory).

use crate::as_stored::{
    as_stored_format, check_repacked_fits, packed_formats, repacked_from, shared_rows_as_stored, v_apart_formats,
};
pub use crate::as_stored::{kquant_formats, repacked_bytes};
use crate::kquant::KQuant;
use crate::ops::vision::VisionGpu;
use crate::runtime::{DevBuf, DevPtr, Gpu};
use crate::staged_upload::StagedUpload;
use anyhow::{bail, Context, Result};
use solo_model::bf16::bf16_bytes;
use solo_model::tensor::{TiledHeads, FP8_BLOCK};
use solo_model::weights::{AttentionWeights, ExpertWeights, GdnWeights, LayerWeights, Mixer, MoeWeights, MtpWeights};
use solo_model::{DType, ModelConfig, ModelWeights, Precision, Tensor};
use std::borrow::Cow;

/// A matrix `[rows, cols]` on the GPU: bf16, e4m3 with its block scales, or rows in one of the
/// 4- to 8-bit formats the kernels read (`RowFormat`: int4, or a GGUF file's Q4_K / Q5_K / Q6_K /
/// Q8_0 as stored).
#[derive(Clone, Copy, Debug)]
pub struct Matrix {
    pub ptr: DevPtr,
    pub rows: usize,
    pub cols: usize,
    /// For an FP8 matrix: f32 `[ceil(rows/128), ceil(cols/128)]`, w = q · s of its block.
    pub fp8_scales: Option<DevPtr>,
    /// For a 4- to 8-bit matrix kept as stored: its rows' format.
    pub format: Option<RowFormat>,
    /// For a GDN out_proj kept as stored from a GGUF file whose blocks span value heads: its
    /// columns' tiled order (the kernels take y in that order; prefill's copy undoes it).
    pub tiled_heads: Option<TiledHeads>,
}

impl Matrix {
    /// A bf16 matrix.
    pub fn bf16(ptr: DevPtr, rows: usize, cols: usize) -> Matrix {
        Matrix { ptr, rows, cols, fp8_scales: None, format: None, tiled_heads: None }
    }

    /// A matrix kept as stored, its rows in `format` (columns in order).
    pub fn stored(ptr: DevPtr, rows: usize, cols: usize, format: RowFormat) -> Matrix {
        Matrix { format: Some(format), ..Matrix::bf16(ptr, rows, cols) }
    }

    /// Whether the matrix is bf16 (neither FP8 nor a row format).
    pub fn is_bf16(&self) -> bool {
        self.fp8_scales.is_none() && self.format.is_none()
    }

    /// Bytes of one row.
    pub fn row_bytes(&self) -> usize {
        match (self.format, self.fp8_scales) {
            (Some(f), _) => f.row_bytes(self.cols),
            (None, Some(_)) => self.cols,
            (None, None) => 2 * self.cols,
        }
    }

    /// Rows `first..first + n` as a matrix of their own (a view: same memory). An FP8 view
    /// starts at a block row (`first` a multiple of 128).
    pub fn rows(&self, first: usize, n: usize) -> Matrix {
        assert!(first + n <= self.rows, "rows {first}..{} of a {}-row matrix", first + n, self.rows);
        let fp8_scales = self.fp8_scales.map(|s| {
            assert!(first.is_multiple_of(FP8_BLOCK), "an FP8 view must start at a block row, not {first}");
            s + (first / FP8_BLOCK * self.cols.div_ceil(FP8_BLOCK) * 4) as DevPtr
        });
        Matrix {
            ptr: self.ptr + (first * self.row_bytes()) as DevPtr,
            rows: n,
            cols: self.cols,
            fp8_scales,
            format: self.format,
            tiled_heads: self.tiled_heads,
        }
    }
}

/// An f32 vector on the GPU.
#[derive(Clone, Copy, Debug)]
pub struct Vector {
    pub ptr: DevPtr,
    pub len: usize,
}

#[derive(Clone)]
pub struct GdnGpu {
    /// [12352, 2048]: the four input projections stacked (one decode GEMV reads them all); the
    /// next four fields are views of it. FP8: [12288, 2048], qkv and z only; b and a (bf16 in
    /// the format) are a second matrix [64, 2048] that `in_proj_b` and `in_proj_a` view
    pub in_proj: Matrix,
    /// [8192, 2048]: rows [q 16×128 | k 16×128 | v 32×128]
    pub in_proj_qkv: Matrix,
    /// [4096, 2048]
    pub in_proj_z: Matrix,
    /// [32, 2048]
    pub in_proj_b: Matrix,
    /// [32, 2048]
    pub in_proj_a: Matrix,
    /// f32 [8192 × 4]: channel-major taps, tap 3 multiplies the current token
    pub conv1d: Vector,
    /// f32 [32]
    pub a_log: Vector,
    /// f32 [32]
    pub dt_bias: Vector,
    /// f32 [128], plain weight
    pub norm: Vector,
    /// [2048, 4096]
    pub out_proj: Matrix,
}

#[derive(Clone)]
pub struct AttentionGpu {
    /// [9216, 2048]: q_proj, k_proj, v_proj stacked (one decode GEMV); the next three are views.
    /// Or, with v apart (`v_apart`: a GGUF file's Q6_K v beside Q4_K or Q5_K q and k, kept as
    /// stored), [8704, 2048]: q_proj and k_proj, v_proj a matrix of its own that the decode GEMV
    /// reads as its tail.
    pub qkv_proj: Matrix,
    /// [16·512, 2048]: per head 256 query rows then 256 gate rows
    pub q_proj: Matrix,
    /// [512, 2048]
    pub k_proj: Matrix,
    /// [512, 2048]
    pub v_proj: Matrix,
    /// [2048, 4096]
    pub o_proj: Matrix,
    /// f32 [256], stored as 1 + w
    pub q_norm: Vector,
    /// f32 [256], stored as 1 + w
    pub k_norm: Vector,
}

#[derive(Clone)]
pub enum MixerGpu {
    GatedDeltaNet(GdnGpu),
    FullAttention(AttentionGpu),
}

#[derive(Clone)]
pub struct MoeGpu {
    /// [257, 2048]: the 256 router rows, then shared_expert_gate as row 256 (one product gives
    /// the routing logits and the shared expert's gate logit)
    pub router: Matrix,
    /// bf16 (or e4m3) [257, 1024, 2048]: per expert 512 gate rows then 512 up rows; expert 256 is
    /// the shared expert
    pub gate_up: DevPtr,
    /// bf16 (or e4m3) [257, 2048, 512]; expert 256 is the shared expert
    pub down: DevPtr,
    /// For FP8 experts, their block scales.
    pub fp8_scales: Option<ExpertScales>,
    /// For 4/6-bit experts (an int4 checkpoint's, a GGUF file's Q4_K, Q5_K, Q6_K): `gate_up` and
    /// `down` hold the 256 routed experts' rows in their formats (`int4.rs`: [256 × 1024] rows of
    /// 1088 bytes, [256 × 2048] rows of 272; `kquant.rs`) and the shared expert is apart, in bf16.
    pub packed: Option<Packed>,
}

/// The row formats the expert kernels read besides bf16 and FP8 (common.cuh's "4- and 6-bit
/// expert rows").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowFormat {
    /// GPTQ, AWQ, compressed-tensors (`int4.rs`).
    Int4,
    /// A GGUF file's own blocks (`kquant.rs`).
    K(KQuant),
}

impl RowFormat {
    /// Bytes of a row of `cols` columns.
    pub fn row_bytes(self, cols: usize) -> usize {
        match self {
            RowFormat::Int4 => crate::int4::row_bytes(cols),
            RowFormat::K(k) => k.row_bytes(cols),
        }
    }
}

/// A layer's 4/6-bit routed experts: their formats (gate and up rows share one) and the shared
/// expert, bf16.
#[derive(Clone, Copy, Debug)]
pub struct Packed {
    pub gate_up: RowFormat,
    pub down: RowFormat,
    pub shared: SharedExpert,
}

/// The shared expert of a layer of packed experts, bf16: gate_up [1024, 2048] (gate rows, then
/// up rows), down [2048, 512] (prefill's grouped GEMMs read these); with `rows`, also as stored
/// in the routed experts' formats, appended to their buffers as expert `EXPERTS` (the decode
/// kernels read those).
#[derive(Clone, Copy, Debug)]
pub struct SharedExpert {
    pub gate_up: DevPtr,
    pub down: DevPtr,
    pub rows: bool,
}

impl MoeGpu {
    /// Whether the experts are bf16 (the expert GEMVs' format; FP8 and int4 take the grouped GEMMs).
    pub fn is_bf16(&self) -> bool {
        self.fp8_scales.is_none() && self.packed.is_none()
    }

    /// The shared expert in bf16, (gate_up [1024, 2048], down [2048, 512]): expert 256 of bf16
    /// experts, the copy beside packed ones; FP8 experts have none.
    pub fn shared_bf16(&self) -> Option<(DevPtr, DevPtr)> {
        use crate::kernels::widths::{EXPERTS, EXPERT_DIM, HIDDEN};
        match (&self.packed, &self.fp8_scales) {
            (Some(p), _) => Some((p.shared.gate_up, p.shared.down)),
            (None, Some(_)) => None,
            (None, None) => {
                let expert = (2 * EXPERT_DIM * HIDDEN * 2) as DevPtr; // bytes of one expert's gate_up, and of its down
                Some((self.gate_up + EXPERTS as DevPtr * expert, self.down + EXPERTS as DevPtr * expert / 2))
            }
        }
    }
}

/// The block scales of FP8 experts, f32: gate_up [257, 8, 16] (per expert 4 block rows of gate,
/// then 4 of up), down [257, 16, 4].
#[derive(Clone, Copy, Debug)]
pub struct ExpertScales {
    pub gate_up: DevPtr,
    pub down: DevPtr,
}

#[derive(Clone)]
pub struct LayerGpu {
    /// f32 [2048], 1 + w
    pub input_norm: Vector,
    /// f32 [2048], 1 + w
    pub post_attention_norm: Vector,
    pub mixer: MixerGpu,
    pub moe: MoeGpu,
}

/// The MTP head (`solo_model::weights::MtpWeights`; its formula: `solo_cpu::mtp`).
pub struct MtpGpu {
    /// f32 [2048], 1 + w
    pub pre_fc_norm_embedding: Vector,
    /// f32 [2048], 1 + w
    pub pre_fc_norm_hidden: Vector,
    /// bf16 [2048, 2048] each: fc's columns that multiply the embedding, and the hidden state
    pub fc_embedding: Matrix,
    pub fc_hidden: Matrix,
    /// One full-attention decoder layer.
    pub layer: LayerGpu,
    /// f32 [2048], 1 + w
    pub norm: Vector,
}

pub struct ModelGpu {
    /// [248320, 2048]
    pub embed_tokens: Matrix,
    /// f32 [2048], 1 + w
    pub final_norm: Vector,
    /// [248320, 2048]
    pub lm_head: Matrix,
    pub layers: Vec<LayerGpu>,
    pub mtp: Option<MtpGpu>,
    /// The vision tower, when the checkpoint has one (`model.visual.*`) of a form it runs.
    pub vision: Option<VisionGpu>,
    pub precision: Precision,
    /// For a GGUF file, its ggml types (largest first, `Q4_K, Q6_K`): the weights were repacked
    /// from them to bf16 at load.
    pub repacked_from: Option<String>,
    /// Owns every allocation the pointers above point into (freed with the model).
    #[allow(dead_code)]
    pub(crate) buffers: Vec<DevBuf>,
}

/// The real model's widths: the kernels are specialised to them (any layer count is fine).
pub fn check_real_widths(cfg: &ModelConfig) -> Result<()> {
    use crate::kernels::widths as w;
    let want = [
        ("hidden_size", cfg.hidden_size, w::HIDDEN),
        ("vocab_size", cfg.vocab_size, w::VOCAB),
        ("num_attention_heads", cfg.num_attention_heads, w::ATTN_HEADS),
        ("num_key_value_heads", cfg.num_key_value_heads, w::KV_HEADS),
        ("head_dim", cfg.head_dim, w::HEAD_DIM),
        ("rotary dim", cfg.rotary_dim(), w::ROTARY_DIM),
        ("linear_num_key_heads", cfg.linear_num_key_heads, w::GDN_K_HEADS),
        ("linear_num_value_heads", cfg.linear_num_value_heads, w::GDN_V_HEADS),
        ("linear_key_head_dim", cfg.linear_key_head_dim, w::GDN_HEAD_DIM),
        ("linear_value_head_dim", cfg.linear_value_head_dim, w::GDN_HEAD_DIM),
        ("linear_conv_kernel_dim", cfg.linear_conv_kernel_dim, w::GDN_KERNEL),
        ("num_experts", cfg.num_experts, w::EXPERTS),
        ("num_experts_per_tok", cfg.num_experts_per_tok, w::TOP_K),
        ("moe_intermediate_size", cfg.moe_intermediate_size, w::EXPERT_DIM),
        ("shared_expert_intermediate_size", cfg.shared_expert_intermediate_size, w::EXPERT_DIM),
    ];
    for (key, have, real) in want {
        if have != real {
            bail!("the CUDA backend runs only Qwen3.6-35B-A3B's widths: config {key} is {have}, the real model has {real} (use --backend cpu for other configs)");
        }
    }
    // The kernels also hard-code these constants (RoPE base, the GDN gated-norm epsilon).
    if cfg.rope_theta != 1e7 || cfg.rms_norm_eps != 1e-6 {
        bail!(
            "the CUDA backend runs only Qwen3.6-35B-A3B's constants: config rope_theta is {} and rms_norm_eps {}, the real model has 1e7 and 1e-6",
            cfg.rope_theta,
            cfg.rms_norm_eps
        );
    }
    Ok(())
}

/// Builds GPU weights, one buffer per matrix or vector, through pinned staging
/// (`staged_upload.rs`): the checkpoint's bytes are read from its memory map straight into the
/// staging slots.
pub struct Uploader<'g> {
    staged: StagedUpload<'g>,
    buffers: Vec<DevBuf>,
}

impl<'g> Uploader<'g> {
    pub fn new(gpu: &'g Gpu) -> Result<Self> {
        Ok(Uploader { staged: StagedUpload::new(gpu)?, buffers: Vec::new() })
    }

    /// A new buffer of the concatenated `parts`, kept until `finish`.
    fn upload(&mut self, parts: &[&[u8]]) -> Result<DevPtr> {
        let buf = self.staged.upload(parts)?;
        let ptr = buf.ptr();
        self.buffers.push(buf);
        Ok(ptr)
    }

    fn upload_f32(&mut self, values: &[f32]) -> Result<DevPtr> {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.upload(&[&bytes])
    }

    /// A 2-D tensor as a matrix: FP8 as it is with its scales, anything else as bf16.
    pub fn matrix(&mut self, t: &Tensor) -> Result<Matrix> {
        Ok(self.stacked(&[t])?.0)
    }

    /// 2-D tensors of one width stacked row-wise in one bf16 matrix, whatever their format (an
    /// FP8 part is dequantised): for what the kernels read only as bf16 (embeddings, lm_head,
    /// router; bf16 in the FP8 release).
    pub fn stacked_bf16(&mut self, parts: &[&Tensor]) -> Result<Matrix> {
        let cols = parts[0].row_len();
        if let Some(p) = parts.iter().find(|p| p.row_len() != cols) {
            bail!("cannot stack a {}-wide matrix under {cols}-wide ones", p.row_len());
        }
        let bytes = bf16_bytes(parts);
        let rows = parts.iter().map(|p| p.shape[0]).sum();
        Ok(Matrix::bf16(self.upload(&slices(&bytes))?, rows, cols))
    }

    /// 2-D tensors of one width and format stacked row-wise in one matrix, and a view of each
    /// part (FP8 parts must fill whole block rows, as the real model's all do).
    pub fn stacked(&mut self, parts: &[&Tensor]) -> Result<(Matrix, Vec<Matrix>)> {
        let cols = parts[0].row_len();
        if let Some(p) = parts.iter().find(|p| p.row_len() != cols) {
            bail!("cannot stack a {}-wide matrix under {cols}-wide ones", p.row_len());
        }
        let fp8 = parts[0].dtype == DType::F8E4M3;
        if parts.iter().any(|p| (p.dtype == DType::F8E4M3) != fp8) {
            bail!("cannot stack FP8 and bf16 matrices in one");
        }
        let (bytes, fp8_scales): (Vec<Cow<[u8]>>, _) = if fp8 {
            let mut bytes = Vec::new();
            let mut scales = Vec::new();
            for p in parts {
                let (q, s) = fp8_parts(p)?;
                bytes.push(Cow::Borrowed(q));
                scales.extend(s);
            }
            (bytes, Some(self.upload_f32(&scales)?))
        } else {
            (bf16_bytes(parts), None)
        };
        let rows = parts.iter().map(|p| p.shape[0]).sum();
        let ptr = self.upload(&slices(&bytes))?;
        let whole = Matrix { ptr, rows, cols, fp8_scales, format: None, tiled_heads: None };
        Ok((whole, part_views(&whole, parts)))
    }

    /// 2-D tensors stacked row-wise in a row format the kernels read (`as_stored_format`: int4,
    /// or a GGUF file's types), and a view of each part; `None` when they have no such format
    /// (then they go up as `stacked` puts them).
    pub fn stacked_as_stored(&mut self, parts: &[&Tensor]) -> Result<Option<(Matrix, Vec<Matrix>)>> {
        let Some(format) = as_stored_format(parts) else { return Ok(None) };
        let cols = parts[0].row_len();
        let mut bytes = Vec::new();
        for p in parts {
            match (format, p.dtype) {
                (RowFormat::K(to), DType::Ggml(t)) => {
                    KQuant::of(t).unwrap().repack_as(to, p.bytes(), p.shape[0], cols, &mut bytes)?
                }
                _ => packed_rows(p, format, &mut bytes)?,
            }
        }
        let rows = parts.iter().map(|p| p.shape[0]).sum();
        let ptr = self.upload(&[&bytes])?;
        let tiled_heads = parts[0].tiled_heads;
        let whole = Matrix { tiled_heads, ..Matrix::stored(ptr, rows, cols, format) };
        Ok(Some((whole, part_views(&whole, parts))))
    }

    /// A mixer's output projection (out_proj / o_proj, `[2048, 4096]`): as stored when its format
    /// is `experts`, the layer's routed experts' gate/up format (phase 0 of the fused MoE decode
    /// kernel reads W_o in that format), else as `matrix` puts it.
    pub fn mixer_out(&mut self, t: &Tensor, experts: Option<RowFormat>) -> Result<Matrix> {
        if experts.is_some() && as_stored_format(&[t]) == experts {
            if let Some((m, _)) = self.stacked_as_stored(&[t])? {
                return Ok(m);
            }
        }
        self.matrix(t) // (a tiled matrix reads its columns in the release's order)
    }

    /// A tensor as f32, optionally with 1 added (zero-centred norms).
    pub fn vector(&mut self, t: &Tensor, add_one: bool) -> Result<Vector> {
        let mut v = t.to_f32();
        if add_one {
            v.iter_mut().for_each(|x| *x += 1.0);
        }
        let ptr = self.upload_f32(&v)?;
        Ok(Vector { ptr, len: v.len() })
    }

    /// Routed experts plus the shared one as expert `experts.len()`: (gate_up, down) buffers,
    /// and their block scales when they are FP8 (all or none of them). int4 routed experts go up
    /// in the kernels' int4 rows (`int4.rs`) with the shared expert apart in bf16.
    pub fn experts(&mut self, experts: &[ExpertWeights], shared: &ExpertWeights) -> Result<Experts> {
        let routed = |e: &ExpertWeights| [&e.gate, &e.up, &e.down].map(|t| t.dtype);
        if let Some((gate_up, down)) = packed_formats(experts) {
            return self.experts_packed(experts, shared, gate_up, down);
        }
        let all: Vec<&ExpertWeights> = experts.iter().chain(std::iter::once(shared)).collect();
        if all.iter().any(|e| routed(e).contains(&DType::I4)) {
            bail!("the experts of a layer mix int4 and other matrices; the CUDA backend reads int4 routed experts (all of them) with a 16-bit shared expert");
        }
        let fp8 = shared.gate.dtype == DType::F8E4M3;
        if all.iter().any(|e| [&e.gate, &e.up, &e.down].iter().any(|t| (t.dtype == DType::F8E4M3) != fp8)) {
            bail!("the experts of a layer mix FP8 and bf16 matrices; solo reads all of one precision");
        }
        if !fp8 {
            // (a GGUF layer's experts are converted here, a layer's worth of bf16 at a time)
            let gate_up: Vec<&Tensor> = all.iter().flat_map(|e| [&e.gate, &e.up]).collect();
            let gate_up = self.upload(&slices(&bf16_bytes(&gate_up)))?;
            let down: Vec<&Tensor> = all.iter().map(|e| &e.down).collect();
            let down = self.upload(&slices(&bf16_bytes(&down)))?;
            return Ok(Experts { gate_up, down, fp8_scales: None, packed: None });
        }
        let mut gate_up: Vec<Cow<[u8]>> = Vec::new();
        let mut down: Vec<Cow<[u8]>> = Vec::new();
        let (mut gate_up_s, mut down_s) = (Vec::new(), Vec::new());
        for e in &all {
            for t in [&e.gate, &e.up] {
                let (q, s) = fp8_parts(t)?;
                gate_up.push(Cow::Borrowed(q));
                gate_up_s.extend(s);
            }
            let (q, s) = fp8_parts(&e.down)?;
            down.push(Cow::Borrowed(q));
            down_s.extend(s);
        }
        let scales = ExpertScales { gate_up: self.upload_f32(&gate_up_s)?, down: self.upload_f32(&down_s)? };
        let (gate_up, down) = (self.upload(&slices(&gate_up))?, self.upload(&slices(&down))?);
        Ok(Experts { gate_up, down, fp8_scales: Some(scales), packed: None })
    }

    /// `experts` for 4/6-bit routed experts: each matrix repacked into the kernels' rows of its
    /// format; the shared expert bf16 (dequantised if the checkpoint quantised it too).
    fn experts_packed(
        &mut self,
        experts: &[ExpertWeights],
        shared: &ExpertWeights,
        gate_up_format: RowFormat,
        down_format: RowFormat,
    ) -> Result<Experts> {
        // an expert's rows a task (a layer's are ~0.5 GB at full size)
        use rayon::prelude::*;
        let shared_rows = shared_rows_as_stored(shared, gate_up_format, down_format);
        let with_shared: Vec<&ExpertWeights> = experts.iter().chain(shared_rows.then_some(shared)).collect();
        let parts = with_shared
            .par_iter()
            .enumerate()
            .map(|(i, e)| {
                let (mut gate_up, mut down) = (Vec::new(), Vec::new());
                let context = || format!("expert {i}");
                packed_rows(&e.gate, gate_up_format, &mut gate_up).with_context(context)?;
                packed_rows(&e.up, gate_up_format, &mut gate_up).with_context(context)?;
                packed_rows(&e.down, down_format, &mut down).with_context(context)?;
                Ok((gate_up, down))
            })
            .collect::<Result<Vec<(Vec<u8>, Vec<u8>)>>>()?;
        let gate_up = self.upload(&parts.iter().map(|p| &p.0[..]).collect::<Vec<_>>())?;
        let down = self.upload(&parts.iter().map(|p| &p.1[..]).collect::<Vec<_>>())?;
        let shared_gate_up = self.stacked_bf16(&[&shared.gate, &shared.up])?.ptr;
        let shared_down = self.stacked_bf16(&[&shared.down])?.ptr;
        let shared = SharedExpert { gate_up: shared_gate_up, down: shared_down, rows: shared_rows };
        Ok(Experts {
            gate_up,
            down,
            fp8_scales: None,
            packed: Some(Packed { gate_up: gate_up_format, down: down_format, shared }),
        })
    }

    /// The buffers, once every copy has landed.
    pub fn finish(self) -> Result<Vec<DevBuf>> {
        self.staged.finish()?;
        Ok(self.buffers)
    }
}

/// A layer's experts on the GPU, as `MoeGpu` holds them.
pub struct Experts {
    pub gate_up: DevPtr,
    pub down: DevPtr,
    pub fp8_scales: Option<ExpertScales>,
    pub packed: Option<Packed>,
}

/// A 4/6-bit matrix's rows in the kernels' layout of `format`, appended to `out`. Act-order (an
/// int4 column permutation) is refused: the kernels read columns in order.
fn packed_rows(t: &Tensor, format: RowFormat, out: &mut Vec<u8>) -> Result<()> {
    if let RowFormat::K(k) = format {
        return k.repack_into(t.bytes(), t.shape[0], t.row_len(), out);
    }
    let Some((q, gq)) = t.int4() else { bail!("not an int4 matrix: {t:?}") };
    if gq.perm.is_some() {
        bail!("int4 weights with act-order (desc_act, a g_idx that reorders columns): the CUDA backend reads them in order; the CPU backend (--backend cpu) runs them");
    }
    let m = crate::int4::Int4Matrix {
        rows: t.shape[0],
        cols: t.row_len(),
        group: gq.group,
        q,
        scales: &gq.scales,
        zeros: gq.zeros.as_deref(),
    };
    crate::int4::repack_into(&m, out)
}

/// A view of each part of a matrix stacked from `parts`.
fn part_views(whole: &Matrix, parts: &[&Tensor]) -> Vec<Matrix> {
    let mut first = 0;
    parts
        .iter()
        .map(|p| {
            let view = whole.rows(first, p.shape[0]);
            first += p.shape[0];
            view
        })
        .collect()
}

/// Borrowed slices of each part, for one upload of their concatenation.
fn slices<'a>(parts: &'a [Cow<'a, [u8]>]) -> Vec<&'a [u8]> {
    parts.iter().map(|b| &b[..]).collect()
}

/// An FP8 matrix's e4m3 bytes and its block scales `[ceil(rows/128), ceil(cols/128)]`, whole
/// block rows (a view that starts inside a block row cannot be laid out for the kernels).
fn fp8_parts(t: &Tensor) -> Result<(&[u8], Vec<f32>)> {
    let Some(s) = t.scales.as_ref() else { bail!("an F8_E4M3 tensor without block scales: {t:?}") };
    let (rows, cols) = (t.shape[0], t.row_len());
    if !s.first_row.is_multiple_of(FP8_BLOCK) || !rows.is_multiple_of(FP8_BLOCK) || !cols.is_multiple_of(16) {
        bail!("the CUDA backend takes FP8 matrices in whole 128-row blocks and 16-column pieces, not {t:?}");
    }
    let block_rows = s.first_row / FP8_BLOCK..(s.first_row + rows) / FP8_BLOCK;
    let scales = s.values[block_rows.start * s.block_cols..block_rows.end * s.block_cols].to_vec();
    Ok((t.bytes(), scales))
}

impl GdnGpu {
    /// `experts`: the layer's routed experts' gate/up format, which out_proj may share
    /// (`Uploader::mixer_out`).
    pub fn upload(up: &mut Uploader, g: &GdnWeights, experts: Option<RowFormat>) -> Result<Self> {
        // qkv | z as stored (GGUF) or e4m3 (FP8), b | a then a bf16 matrix of their own (F32 in
        // a GGUF file, bf16 in the FP8 release); otherwise all four stacked in bf16
        let qkv_z = [&g.in_proj_qkv, &g.in_proj_z];
        let apart = match up.stacked_as_stored(&qkv_z)? {
            Some(stacked) => Some(stacked),
            None if g.in_proj_qkv.dtype == DType::F8E4M3 => Some(up.stacked(&qkv_z)?),
            None => None,
        };
        let (in_proj, in_proj_qkv, in_proj_z, in_proj_b, in_proj_a) = match apart {
            Some((in_proj, v)) => {
                let (_, ba) = up.stacked(&[&g.in_proj_b, &g.in_proj_a])?;
                (in_proj, v[0], v[1], ba[0], ba[1])
            }
            None => {
                let (in_proj, v) = up.stacked(&[&g.in_proj_qkv, &g.in_proj_z, &g.in_proj_b, &g.in_proj_a])?;
                (in_proj, v[0], v[1], v[2], v[3])
            }
        };
        Ok(GdnGpu {
            in_proj,
            in_proj_qkv,
            in_proj_z,
            in_proj_b,
            in_proj_a,
            conv1d: up.vector(&g.conv1d, false)?,
            a_log: up.vector(&g.a_log, false)?,
            dt_bias: up.vector(&g.dt_bias, false)?,
            norm: up.vector(&g.norm, false)?,
            out_proj: up.mixer_out(&g.out_proj, experts)?,
        })
    }
}

impl AttentionGpu {
    /// `experts`: as `GdnGpu::upload`'s.
    pub fn upload(up: &mut Uploader, a: &AttentionWeights, experts: Option<RowFormat>) -> Result<Self> {
        let parts = [&a.q_proj, &a.k_proj, &a.v_proj];
        let (qkv_proj, v) = if v_apart_formats(a).is_some() {
            let (qk, views) = up.stacked_as_stored(&parts[..2])?.expect("q and k share a format");
            let (v, _) = up.stacked_as_stored(&parts[2..])?.expect("v has a format");
            (qk, vec![views[0], views[1], v])
        } else {
            match up.stacked_as_stored(&parts)? {
                Some(stacked) => stacked,
                None => up.stacked(&parts)?,
            }
        };
        Ok(AttentionGpu {
            qkv_proj,
            q_proj: v[0],
            k_proj: v[1],
            v_proj: v[2],
            o_proj: up.mixer_out(&a.o_proj, experts)?,
            q_norm: up.vector(&a.q_norm, true)?,
            k_norm: up.vector(&a.k_norm, true)?,
        })
    }

    /// Whether v_proj is a matrix of its own after the q|k stack (see `qkv_proj`).
    pub fn v_apart(&self) -> bool {
        self.qkv_proj.rows == self.q_proj.rows + self.k_proj.rows
    }
}

impl MoeGpu {
    pub fn upload(up: &mut Uploader, m: &MoeWeights) -> Result<Self> {
        let Experts { gate_up, down, fp8_scales, packed } = up.experts(&m.experts, &m.shared_expert)?;
        Ok(MoeGpu { router: up.stacked_bf16(&[&m.router, &m.shared_expert_gate])?, gate_up, down, fp8_scales, packed })
    }
}

impl ModelGpu {
    /// Uploads a checkpoint's weights (the real widths only).
    pub fn upload(gpu: &Gpu, cfg: &ModelConfig, w: &ModelWeights) -> Result<Self> {
        check_real_widths(cfg)?;
        if w.precision == Precision::Fp8Block128 {
            gpu.target.check_fp8(&gpu.name)?;
        }
        let repacked_from = repacked_from(w);
        if let Some(types) = &repacked_from {
            check_repacked_fits(gpu, w, types)?;
        }
        let mut up = Uploader::new(gpu)?;
        let mut as_stored_or_bf16 = |t: &Tensor| -> Result<Matrix> {
            match up.stacked_as_stored(&[t])? {
                Some((m, _)) => Ok(m),
                None => up.stacked_bf16(&[t]),
            }
        };
        let embed_tokens = as_stored_or_bf16(&w.embed_tokens)?;
        let lm_head = as_stored_or_bf16(&w.lm_head)?;
        let final_norm = up.vector(&w.final_norm, true)?;
        let mut layers = Vec::new();
        let mut progress = LoadProgress::new(w.bytes());
        progress.add(w.embed_tokens.stored_bytes() + w.final_norm.stored_bytes() + w.lm_head.stored_bytes());
        for layer in &w.layers {
            layers.push(LayerGpu::upload(&mut up, layer)?);
            progress.add(layer.tensors().iter().map(|t| t.stored_bytes()).sum());
        }
        let mtp = match &w.mtp {
            Some(m) => {
                let head = MtpGpu::upload(&mut up, m)?;
                progress.add(m.tensors().iter().map(|t| t.stored_bytes()).sum());
                Some(head)
            }
            None => None,
        };
        let uploaded = up.staged.bytes;
        let buffers = up.finish()?;
        progress.done(uploaded);
        let vision = match (&cfg.vision, &w.visual) {
            (Some(c), Some(v)) if c.unsupported().is_none() => Some(VisionGpu::upload(gpu, c, v)?),
            _ => None,
        };
        Ok(ModelGpu {
            embed_tokens,
            final_norm,
            lm_head,
            layers,
            mtp,
            vision,
            precision: w.precision,
            repacked_from,
            buffers,
        })
    }
}

impl LayerGpu {
    pub fn upload(up: &mut Uploader, layer: &LayerWeights) -> Result<Self> {
        let experts = packed_formats(&layer.moe.experts).map(|(gate_up, _)| gate_up);
        let mixer = match &layer.mixer {
            Mixer::GatedDeltaNet(g) => MixerGpu::GatedDeltaNet(GdnGpu::upload(up, g, experts)?),
            Mixer::FullAttention(a) => MixerGpu::FullAttention(AttentionGpu::upload(up, a, experts)?),
        };
        Ok(LayerGpu {
            input_norm: up.vector(&layer.input_norm, true)?,
            post_attention_norm: up.vector(&layer.post_attention_norm, true)?,
            mixer,
            moe: MoeGpu::upload(up, &layer.moe)?,
        })
    }
}

impl MtpGpu {
    /// fc [2048, 4096] goes up as its two [2048, 2048] halves, in bf16 (an FP8 fc dequantised
    /// and rounded to bf16: the head only proposes tokens, the main model decides).
    pub fn upload(up: &mut Uploader, m: &MtpWeights) -> Result<Self> {
        let h = m.fc.shape[0];
        let fc = m.fc.to_f32();
        let half = |first: usize| -> Tensor {
            let cols: Vec<f32> = fc.chunks(2 * h).flat_map(|row| row[first..first + h].iter().copied()).collect();
            Tensor::from_f32_as_bf16(vec![h, h], &cols)
        };
        Ok(MtpGpu {
            pre_fc_norm_embedding: up.vector(&m.pre_fc_norm_embedding, true)?,
            pre_fc_norm_hidden: up.vector(&m.pre_fc_norm_hidden, true)?,
            fc_embedding: up.matrix(&half(0))?,
            fc_hidden: up.matrix(&half(h))?,
            layer: LayerGpu::upload(up, &m.layer)?,
            norm: up.vector(&m.norm, true)?,
        })
    }
}

/// What `ModelGpu::upload` prints while the weights go to the GPU: bytes, rate, ETA — a line
/// rewritten in place on a terminal, a line every ~10 % in a log — and the time it took.
struct LoadProgress {
    total: usize,
    done: usize,
    start: std::time::Instant,
    last_tenth: usize,
    terminal: bool,
}

impl LoadProgress {
    fn new(total: usize) -> Self {
        use std::io::IsTerminal;
        let terminal = std::io::stderr().is_terminal();
        LoadProgress { total: total.max(1), done: 0, start: std::time::Instant::now(), last_tenth: 0, terminal }
    }

    fn add(&mut self, bytes: usize) {
        self.done += bytes;
        let line = progress_line(self.done, self.total, self.start.elapsed().as_secs_f64());
        let tenth = 10 * self.done / self.total;
        if self.terminal {
            eprint!("\r{line}   ");
        } else if tenth > self.last_tenth {
            eprintln!("{line}");
        }
        self.last_tenth = tenth;
    }

    /// `uploaded`: the bytes that went to the GPU (more than the checkpoint's for a GGUF file,
    /// repacked to bf16).
    fn done(&self, uploaded: usize) {
        let secs = self.start.elapsed().as_secs_f64();
        if self.terminal {
            eprintln!();
        }
        eprintln!(
            "weights on the GPU: {:.1} GB in {secs:.1} s ({:.2} GB/s)",
            uploaded as f64 / 1e9,
            uploaded as f64 / 1e9 / secs.max(1e-3)
        );
    }
}

/// One progress line: bytes so far of the total, and from `RATE_AFTER_SECS` on the rate and the
/// time left (before that the first pieces, handed to the staging ring at once, would show a rate
/// of hundreds of GB/s).
fn progress_line(done: usize, total: usize, secs: f64) -> String {
    const RATE_AFTER_SECS: f64 = 0.5;
    let gb = |b: usize| b as f64 / 1e9;
    let mut line = format!("loading weights: {:.1} of {:.1} GB", gb(done), gb(total));
    if secs >= RATE_AFTER_SECS {
        let rate = done as f64 / secs;
        let eta = total.saturating_sub(done) as f64 / rate.max(1.0);
        line += &format!(", {:.2} GB/s, {eta:.0} s left", rate / 1e9);
    }
    line
}

impl ModelGpu {
    /// GPU memory the weights take.
    pub fn bytes(&self) -> usize {
        let vision = self.vision.as_ref().map_or(0, |v| v.buffers.iter().map(|b| b.bytes).sum());
        self.buffers.iter().map(|b| b.bytes).sum::<usize>() + vision
    }

    /// The weights' form as `solo bench` prints it: the precision, or the GGUF types.
    pub fn form(&self) -> String {
        match &self.repacked_from {
            Some(types) => format!("GGUF {types}"),
            None => self.precision.name().to_string(),
        }
    }
}

impl LayerGpu {
    /// Bytes of the bf16 copy `dequantized` makes of this layer's FP8 or GGUF-format matrices
    /// (0 for bf16).
    pub fn dequantized_bytes(&self) -> usize {
        self.quantized_matrices().iter().map(|m| m.rows * m.cols * 2).sum()
    }

    /// The FP8 or GGUF-format matrices prefill multiplies as a bf16 copy (each stacked matrix
    /// once): the mixer's. The experts are not among them: the grouped GEMMs read them as they
    /// are stored.
    fn quantized_matrices(&self) -> Vec<Matrix> {
        let mut out = match &self.mixer {
            MixerGpu::GatedDeltaNet(g) => vec![g.in_proj, g.out_proj],
            MixerGpu::FullAttention(a) if a.v_apart() => vec![a.qkv_proj, a.v_proj, a.o_proj],
            MixerGpu::FullAttention(a) => vec![a.qkv_proj, a.o_proj],
        };
        out.retain(|m| !m.is_bf16());
        out
    }

    /// This layer with its mixer's FP8 or GGUF-format matrices dequantised (w = q · s, rounded
    /// to bf16) into `buf`: what prefill's cuBLAS GEMMs multiply. Vectors, bf16 matrices and the
    /// experts are shared with `self`; the copy is valid until `buf` is written again.
    pub fn dequantized(&self, gpu: &Gpu, buf: &DevBuf) -> Result<LayerGpu> {
        if self.quantized_matrices().is_empty() {
            return Ok(self.clone());
        }
        if self.dequantized_bytes() > buf.bytes {
            bail!(
                "the prefill buffer holds {} bytes, a dequantised layer needs {}",
                buf.bytes,
                self.dequantized_bytes()
            );
        }
        let mut at = buf.ptr();
        let mut deq = |m: &Matrix| -> Result<Matrix> {
            if m.is_bf16() {
                return Ok(*m);
            }
            let out = Matrix::bf16(at, m.rows, m.cols);
            at += (m.rows * m.cols * 2) as DevPtr;
            crate::ops::linear::dequantize(gpu, m, out.ptr)?;
            Ok(out)
        };
        let mut layer = self.clone();
        match &mut layer.mixer {
            MixerGpu::GatedDeltaNet(g) => {
                g.in_proj = deq(&g.in_proj)?;
                g.in_proj_qkv = g.in_proj.rows(0, g.in_proj_qkv.rows);
                g.in_proj_z = g.in_proj.rows(g.in_proj_qkv.rows, g.in_proj_z.rows);
                g.out_proj = deq(&g.out_proj)?;
            }
            MixerGpu::FullAttention(a) => {
                let (q, k) = (a.q_proj.rows, a.k_proj.rows);
                if a.v_apart() {
                    // q|k then v, dequantised into adjacent rows: one stacked bf16 matrix
                    let qk = deq(&a.qkv_proj)?;
                    let v = deq(&a.v_proj)?;
                    debug_assert_eq!(v.ptr, qk.ptr + (qk.rows * qk.cols * 2) as DevPtr);
                    a.qkv_proj = Matrix::bf16(qk.ptr, q + k + v.rows, qk.cols);
                }
                a.qkv_proj = deq(&a.qkv_proj)?;
                a.q_proj = a.qkv_proj.rows(0, q);
                a.k_proj = a.qkv_proj.rows(q, k);
                a.v_proj = a.qkv_proj.rows(q + k, a.v_proj.rows);
                a.o_proj = deq(&a.o_proj)?;
            }
        }
        Ok(layer)
    }
}

#[cfg(test)]
#[path = "weights_tests.rs"]
mod tests;
