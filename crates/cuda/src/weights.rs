//! The weights in GPU memory, in the layouts the kernels read.
//!
//! Matrices stay bf16 row-major `[out, in]`. Small vectors (norm weights, gates' constants,
//! conv taps) become f32; zero-centred norm weights are stored as `1 + w`. The shared expert is
//! appended to the routed experts as expert `EXPERTS` (index 256), so one kernel serves both.

use crate::runtime::{DevBuf, DevPtr, Gpu};
use anyhow::{bail, Result};
use solo_model::weights::{AttentionWeights, ExpertWeights, GdnWeights, Mixer, MoeWeights};
use solo_model::{ModelConfig, ModelWeights, Tensor};

/// A bf16 matrix `[rows, cols]` on the GPU.
#[derive(Clone, Copy, Debug)]
pub struct Matrix {
    pub ptr: DevPtr,
    pub rows: usize,
    pub cols: usize,
}

impl Matrix {
    /// Rows `first..first + n` as a matrix of their own (a view: same memory).
    pub fn rows(&self, first: usize, n: usize) -> Matrix {
        assert!(first + n <= self.rows, "rows {first}..{} of a {}-row matrix", first + n, self.rows);
        Matrix { ptr: self.ptr + (first * self.cols * 2) as DevPtr, rows: n, cols: self.cols }
    }
}

/// An f32 vector on the GPU.
#[derive(Clone, Copy, Debug)]
pub struct Vector {
    pub ptr: DevPtr,
    pub len: usize,
}

pub struct GdnGpu {
    /// [12352, 2048]: the four input projections stacked (one decode GEMV reads them all); the
    /// next four fields are views of it
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

pub struct AttentionGpu {
    /// [9216, 2048]: q_proj, k_proj, v_proj stacked (one decode GEMV); the next three are views
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

pub enum MixerGpu {
    GatedDeltaNet(GdnGpu),
    FullAttention(AttentionGpu),
}

pub struct MoeGpu {
    /// [257, 2048]: the 256 router rows, then shared_expert_gate as row 256 (one product gives
    /// the routing logits and the shared expert's gate logit)
    pub router: Matrix,
    /// bf16 [257, 1024, 2048]: per expert 512 gate rows then 512 up rows; expert 256 is the shared expert
    pub gate_up: DevPtr,
    /// bf16 [257, 2048, 512]; expert 256 is the shared expert
    pub down: DevPtr,
}

pub struct LayerGpu {
    /// f32 [2048], 1 + w
    pub input_norm: Vector,
    /// f32 [2048], 1 + w
    pub post_attention_norm: Vector,
    pub mixer: MixerGpu,
    pub moe: MoeGpu,
}

pub struct ModelGpu {
    /// [248320, 2048]
    pub embed_tokens: Matrix,
    /// f32 [2048], 1 + w
    pub final_norm: Vector,
    /// [248320, 2048]
    pub lm_head: Matrix,
    pub layers: Vec<LayerGpu>,
    /// Owns every allocation the pointers above point into (freed with the model).
    #[allow(dead_code)]
    pub(crate) buffers: Vec<DevBuf>,
}

/// The real model's widths: the kernels are specialised to them (any layer count is fine).
pub fn check_real_widths(cfg: &ModelConfig) -> Result<()> {
    let want = [
        ("hidden_size", cfg.hidden_size, 2048),
        ("vocab_size", cfg.vocab_size, 248_320),
        ("num_attention_heads", cfg.num_attention_heads, 16),
        ("num_key_value_heads", cfg.num_key_value_heads, 2),
        ("head_dim", cfg.head_dim, 256),
        ("rotary dim", cfg.rotary_dim(), 64),
        ("linear_num_key_heads", cfg.linear_num_key_heads, 16),
        ("linear_num_value_heads", cfg.linear_num_value_heads, 32),
        ("linear_key_head_dim", cfg.linear_key_head_dim, 128),
        ("linear_value_head_dim", cfg.linear_value_head_dim, 128),
        ("linear_conv_kernel_dim", cfg.linear_conv_kernel_dim, 4),
        ("num_experts", cfg.num_experts, 256),
        ("num_experts_per_tok", cfg.num_experts_per_tok, 8),
        ("moe_intermediate_size", cfg.moe_intermediate_size, 512),
        ("shared_expert_intermediate_size", cfg.shared_expert_intermediate_size, 512),
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

/// Builds GPU weights, one upload per tensor.
pub struct Uploader<'g> {
    gpu: &'g Gpu,
    buffers: Vec<DevBuf>,
}

impl<'g> Uploader<'g> {
    pub fn new(gpu: &'g Gpu) -> Self {
        Uploader { gpu, buffers: Vec::new() }
    }

    fn keep(&mut self, buf: DevBuf) -> DevPtr {
        let ptr = buf.ptr();
        self.buffers.push(buf);
        ptr
    }

    /// A 2-D tensor as a bf16 matrix (converted if stored otherwise).
    pub fn matrix(&mut self, t: &Tensor) -> Result<Matrix> {
        let (rows, cols) = (t.shape[0], t.row_len());
        let ptr = self.keep(self.gpu.upload(&bf16_bytes(t))?);
        Ok(Matrix { ptr, rows, cols })
    }

    /// 2-D tensors of one width stacked row-wise in one bf16 matrix, and a view of each part.
    pub fn stacked(&mut self, parts: &[&Tensor]) -> Result<(Matrix, Vec<Matrix>)> {
        let cols = parts[0].row_len();
        if let Some(p) = parts.iter().find(|p| p.row_len() != cols) {
            bail!("cannot stack a {}-wide matrix under {cols}-wide ones", p.row_len());
        }
        let bytes: Vec<u8> = parts.iter().flat_map(|p| bf16_bytes(p)).collect();
        let rows = bytes.len() / (2 * cols);
        let whole = Matrix { ptr: self.keep(self.gpu.upload(&bytes)?), rows, cols };
        let mut first = 0;
        let views = parts
            .iter()
            .map(|p| {
                let view = whole.rows(first, p.shape[0]);
                first += p.shape[0];
                view
            })
            .collect();
        Ok((whole, views))
    }

    /// A tensor as f32, optionally with 1 added (zero-centred norms).
    pub fn vector(&mut self, t: &Tensor, add_one: bool) -> Result<Vector> {
        let mut v = t.to_f32();
        if add_one {
            v.iter_mut().for_each(|x| *x += 1.0);
        }
        let ptr = self.keep(self.gpu.upload_f32(&v)?);
        Ok(Vector { ptr, len: v.len() })
    }

    /// Routed experts plus the shared one as expert `experts.len()`: (gate_up, down) buffers.
    pub fn experts(&mut self, experts: &[ExpertWeights], shared: &ExpertWeights) -> Result<(DevPtr, DevPtr)> {
        let all: Vec<&ExpertWeights> = experts.iter().chain(std::iter::once(shared)).collect();
        let mut gate_up = Vec::new();
        let mut down = Vec::new();
        for e in &all {
            gate_up.extend(bf16_bytes(&e.gate));
            gate_up.extend(bf16_bytes(&e.up));
            down.extend(bf16_bytes(&e.down));
        }
        let gu = self.keep(self.gpu.upload(&gate_up)?);
        let d = self.keep(self.gpu.upload(&down)?);
        Ok((gu, d))
    }

    pub fn finish(self) -> Vec<DevBuf> {
        self.buffers
    }
}

/// The tensor's bytes as bf16 (a copy; converted from f16/f32 if needed).
fn bf16_bytes(t: &Tensor) -> Vec<u8> {
    match t.dtype {
        solo_model::DType::BF16 => t.bytes().to_vec(),
        _ => t.to_f32().iter().flat_map(|v| half::bf16::from_f32(*v).to_le_bytes()).collect(),
    }
}

impl GdnGpu {
    pub fn upload(up: &mut Uploader, g: &GdnWeights) -> Result<Self> {
        let (in_proj, v) = up.stacked(&[&g.in_proj_qkv, &g.in_proj_z, &g.in_proj_b, &g.in_proj_a])?;
        Ok(GdnGpu {
            in_proj,
            in_proj_qkv: v[0],
            in_proj_z: v[1],
            in_proj_b: v[2],
            in_proj_a: v[3],
            conv1d: up.vector(&g.conv1d, false)?,
            a_log: up.vector(&g.a_log, false)?,
            dt_bias: up.vector(&g.dt_bias, false)?,
            norm: up.vector(&g.norm, false)?,
            out_proj: up.matrix(&g.out_proj)?,
        })
    }
}

impl AttentionGpu {
    pub fn upload(up: &mut Uploader, a: &AttentionWeights) -> Result<Self> {
        let (qkv_proj, v) = up.stacked(&[&a.q_proj, &a.k_proj, &a.v_proj])?;
        Ok(AttentionGpu {
            qkv_proj,
            q_proj: v[0],
            k_proj: v[1],
            v_proj: v[2],
            o_proj: up.matrix(&a.o_proj)?,
            q_norm: up.vector(&a.q_norm, true)?,
            k_norm: up.vector(&a.k_norm, true)?,
        })
    }
}

impl MoeGpu {
    pub fn upload(up: &mut Uploader, m: &MoeWeights) -> Result<Self> {
        let (gate_up, down) = up.experts(&m.experts, &m.shared_expert)?;
        Ok(MoeGpu { router: up.stacked(&[&m.router, &m.shared_expert_gate])?.0, gate_up, down })
    }
}

impl ModelGpu {
    /// Uploads a checkpoint's weights (the real widths only).
    pub fn upload(gpu: &Gpu, cfg: &ModelConfig, w: &ModelWeights) -> Result<Self> {
        check_real_widths(cfg)?;
        let mut up = Uploader::new(gpu);
        let embed_tokens = up.matrix(&w.embed_tokens)?;
        let final_norm = up.vector(&w.final_norm, true)?;
        let lm_head = up.matrix(&w.lm_head)?;
        let mut layers = Vec::new();
        for layer in &w.layers {
            let mixer = match &layer.mixer {
                Mixer::GatedDeltaNet(g) => MixerGpu::GatedDeltaNet(GdnGpu::upload(&mut up, g)?),
                Mixer::FullAttention(a) => MixerGpu::FullAttention(AttentionGpu::upload(&mut up, a)?),
            };
            layers.push(LayerGpu {
                input_norm: up.vector(&layer.input_norm, true)?,
                post_attention_norm: up.vector(&layer.post_attention_norm, true)?,
                mixer,
                moe: MoeGpu::upload(&mut up, &layer.moe)?,
            });
        }
        Ok(ModelGpu { embed_tokens, final_norm, lm_head, layers, buffers: up.finish() })
    }
}
