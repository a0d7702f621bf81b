//! The model's weights by role, taken from a checkpoint and shape-checked against its config.
//!
//! Tensor names are the release's: `model.language_model.` prefix (or `model.` for
//! a text-only save), `lm_head.weight` without prefix. Experts may be fused
//! (`experts.gate_up_proj [E, 2I, H]`, `experts.down_proj [E, H, I]`) or stored per expert; both
//! become per-expert views here. The multi-token-prediction head (`mtp.*`, no model prefix) is
//! loaded when present, and so is the vision tower (`model.visual.*`, `crate::vision`) when
//! config.json has a `vision_config` (else its tensors are skipped); any other tensor the model does not use
//! is an error, so name drift fails loudly.
//!
//! In an FP8 checkpoint a matrix `X.weight` may be F8_E4M3; its sibling `X.weight_scale_inv`
//! (`[ceil(out/128), ceil(in/128)]`, bf16/f16/f32, a multiplier: w = q · s) is taken with it and
//! travels inside the `Tensor`, so every reader sees the dequantised values. In a 4-bit checkpoint
//! (GPTQ, AWQ, compressed-tensors) a module `X` may instead hold its format's packed tensors; they
//! are repacked into solo's int4 layout (`crate::int4_formats`) and travel the same way.

use crate::checkpoint::{Checkpoint, StoredTensor};
use crate::config::{LayerKind, ModelConfig, Precision};
use crate::int4_formats::{self, Int4Scheme};
use crate::tensor::{DType, Tensor, FP8_BLOCK};
use crate::vision::VisionWeights;
use anyhow::{bail, Result};
use std::collections::BTreeMap;

pub struct ModelWeights {
    /// [vocab, hidden]
    pub embed_tokens: Tensor,
    /// [hidden], zero-centred (used as 1 + w)
    pub final_norm: Tensor,
    /// [vocab, hidden]; the embedding itself when `tie_word_embeddings`
    pub lm_head: Tensor,
    pub layers: Vec<LayerWeights>,
    /// The multi-token-prediction head, when the checkpoint has `mtp.*`.
    pub mtp: Option<MtpWeights>,
    /// The vision tower, when config.json has a `vision_config` and the checkpoint its tensors.
    pub visual: Option<VisionWeights>,
    /// `Fp8Block128` when any matrix is stored F8_E4M3, `Int4` when any is 4-bit, else `Bf16`.
    pub precision: Precision,
}

/// The MTP head: from the main model's final-normed hidden state h_t and the token t+1 it
/// predicts token t+2 (see `solo_cpu::mtp` for the formula). It shares the embedding and lm_head.
pub struct MtpWeights {
    /// [hidden], zero-centred: normalises embed(token t+1)
    pub pre_fc_norm_embedding: Tensor,
    /// [hidden], zero-centred: normalises h_t
    pub pre_fc_norm_hidden: Tensor,
    /// [hidden, 2·hidden]: columns [embedding | hidden]
    pub fc: Tensor,
    /// One full-attention decoder layer (its own KV cache).
    pub layer: LayerWeights,
    /// [hidden], zero-centred: the head's final norm, before lm_head
    pub norm: Tensor,
}

pub struct LayerWeights {
    /// [hidden], zero-centred
    pub input_norm: Tensor,
    /// [hidden], zero-centred
    pub post_attention_norm: Tensor,
    pub mixer: Mixer,
    pub moe: MoeWeights,
}

// One per layer, built once: the size difference of the variants costs nothing worth a Box.
#[allow(clippy::large_enum_variant)]
pub enum Mixer {
    GatedDeltaNet(GdnWeights),
    FullAttention(AttentionWeights),
}

/// Shapes use Hk/Hv = linear key/value heads, dk/dv their head dims, K the conv kernel.
pub struct GdnWeights {
    /// [2·Hk·dk + Hv·dv, hidden]: rows are [q | k | v], each head-major
    pub in_proj_qkv: Tensor,
    /// [Hv·dv, hidden]
    pub in_proj_z: Tensor,
    /// [Hv, hidden]
    pub in_proj_b: Tensor,
    /// [Hv, hidden]
    pub in_proj_a: Tensor,
    /// [2·Hk·dk + Hv·dv, 1, K]: depthwise, tap K-1 multiplies the current token
    pub conv1d: Tensor,
    /// [Hv]
    pub a_log: Tensor,
    /// [Hv]
    pub dt_bias: Tensor,
    /// [dv], plain weight (not 1 + w), shared by all heads
    pub norm: Tensor,
    /// [hidden, Hv·dv]
    pub out_proj: Tensor,
}

/// Shapes use Hq/Hkv = attention query/kv heads, d = head_dim.
pub struct AttentionWeights {
    /// [Hq·2d, hidden]: per head, d query rows then d gate rows
    pub q_proj: Tensor,
    /// [Hkv·d, hidden]
    pub k_proj: Tensor,
    /// [Hkv·d, hidden]
    pub v_proj: Tensor,
    /// [hidden, Hq·d]
    pub o_proj: Tensor,
    /// [d], zero-centred
    pub q_norm: Tensor,
    /// [d], zero-centred
    pub k_norm: Tensor,
}

pub struct MoeWeights {
    /// [E, hidden]
    pub router: Tensor,
    /// E experts of width I = moe_intermediate_size
    pub experts: Vec<ExpertWeights>,
    /// width shared_expert_intermediate_size
    pub shared_expert: ExpertWeights,
    /// [1, hidden]
    pub shared_expert_gate: Tensor,
}

/// One SwiGLU MLP: down(silu(gate·x) ∘ up·x).
pub struct ExpertWeights {
    /// [I, hidden]
    pub gate: Tensor,
    /// [I, hidden]
    pub up: Tensor,
    /// [hidden, I]
    pub down: Tensor,
}

impl ModelWeights {
    /// Bytes of every tensor the model reads (block scales included): what a backend uploads.
    pub fn bytes(&self) -> usize {
        let sum = |tensors: Vec<&Tensor>| tensors.iter().map(|t| t.stored_bytes()).sum::<usize>();
        let layers: usize = self.layers.iter().map(|l| sum(l.tensors())).sum();
        let mtp = self.mtp.as_ref().map_or(0, |m| sum(m.tensors()));
        self.embed_tokens.stored_bytes() + self.final_norm.stored_bytes() + self.lm_head.stored_bytes() + layers + mtp
    }

    /// The ggml block types of a GGUF file's weights with their stored bytes, largest first
    /// (`[("Q4_K", …), ("Q6_K", …)]`); empty for a safetensors checkpoint. A tied lm_head counts once.
    pub fn ggml_types(&self) -> Vec<(&'static str, usize)> {
        let mut all = vec![&self.embed_tokens, &self.final_norm];
        if !std::ptr::eq(self.lm_head.bytes().as_ptr(), self.embed_tokens.bytes().as_ptr()) {
            all.push(&self.lm_head);
        }
        all.extend(self.layers.iter().flat_map(|l| l.tensors()));
        all.extend(self.mtp.iter().flat_map(|m| m.tensors()));
        let mut by_type: BTreeMap<&'static str, usize> = BTreeMap::new();
        for t in all {
            if let DType::Ggml(g) = t.dtype {
                *by_type.entry(g.name()).or_default() += t.stored_bytes();
            }
        }
        let mut rows: Vec<_> = by_type.into_iter().collect();
        rows.sort_by_key(|(name, bytes)| (std::cmp::Reverse(*bytes), *name));
        rows
    }

    pub fn load(ckpt: &Checkpoint, cfg: &ModelConfig) -> Result<Self> {
        let mut t = Taker::new(ckpt, cfg);
        let h = cfg.hidden_size;
        let embed_tokens = t.take("embed_tokens.weight", &[cfg.vocab_size, h])?;
        let final_norm = t.take("norm.weight", &[h])?;
        let lm_head = if cfg.tie_word_embeddings {
            embed_tokens.clone()
        } else {
            t.take_global("lm_head.weight", &[cfg.vocab_size, h])?
        };
        let prefix = t.prefix;
        let layers = (0..cfg.num_hidden_layers)
            .map(|i| load_layer(&mut t, cfg, &format!("{prefix}layers.{i}."), cfg.layer_types[i]))
            .collect::<Result<Vec<_>>>()?;
        let mtp = if t.left.contains_key("mtp.fc.weight") { Some(load_mtp(&mut t, cfg)?) } else { None };
        let visual_prefix = ["model.visual.", "visual."].into_iter().find(|p| t.left.keys().any(|k| k.starts_with(p)));
        let visual = match (&cfg.vision, visual_prefix) {
            (Some(v), Some(prefix)) => {
                Some(VisionWeights::load(v, prefix, &mut |name: &str, shape: &[usize]| t.take_global(name, shape))?)
            }
            _ => None,
        };
        let precision = match (t.fp8_matrices, t.int4_matrices) {
            (0, 0) if cfg.int4.is_some() => {
                bail!("config.json declares a 4-bit quantization_config but no module of the checkpoint is stored 4-bit ({})", t.files)
            }
            (0, 0) => Precision::Bf16,
            (_, 0) => Precision::Fp8Block128,
            _ => cfg.precision,
        };
        t.finish()?;
        Ok(ModelWeights { embed_tokens, final_norm, lm_head, layers, mtp, visual, precision })
    }
}

impl MtpWeights {
    /// Every tensor of the head (the shared embedding and lm_head are the main model's).
    pub fn tensors(&self) -> Vec<&Tensor> {
        let mut out = vec![&self.pre_fc_norm_embedding, &self.pre_fc_norm_hidden, &self.fc, &self.norm];
        out.extend(self.layer.tensors());
        out
    }
}

/// The MTP head: `mtp.{pre_fc_norm_embedding, pre_fc_norm_hidden, fc, norm}` and one full-attention
/// decoder layer `mtp.layers.0.*` (experts fused or per expert, bf16 or FP8, as the main layers).
fn load_mtp(t: &mut Taker, cfg: &ModelConfig) -> Result<MtpWeights> {
    let h = cfg.hidden_size;
    Ok(MtpWeights {
        pre_fc_norm_embedding: t.take_global("mtp.pre_fc_norm_embedding.weight", &[h])?,
        pre_fc_norm_hidden: t.take_global("mtp.pre_fc_norm_hidden.weight", &[h])?,
        fc: t.take_global("mtp.fc.weight", &[h, 2 * h])?,
        layer: load_layer(t, cfg, "mtp.layers.0.", LayerKind::FullAttention)?,
        norm: t.take_global("mtp.norm.weight", &[h])?,
    })
}

impl LayerWeights {
    /// Every tensor of the layer.
    pub fn tensors(&self) -> Vec<&Tensor> {
        let mut out = vec![&self.input_norm, &self.post_attention_norm];
        match &self.mixer {
            Mixer::GatedDeltaNet(g) => out.extend([
                &g.in_proj_qkv,
                &g.in_proj_z,
                &g.in_proj_b,
                &g.in_proj_a,
                &g.conv1d,
                &g.a_log,
                &g.dt_bias,
                &g.norm,
                &g.out_proj,
            ]),
            Mixer::FullAttention(a) => out.extend([&a.q_proj, &a.k_proj, &a.v_proj, &a.o_proj, &a.q_norm, &a.k_norm]),
        }
        let m = &self.moe;
        out.extend([&m.router, &m.shared_expert_gate]);
        for e in m.experts.iter().chain(std::iter::once(&m.shared_expert)) {
            out.extend([&e.gate, &e.up, &e.down]);
        }
        out
    }
}

/// One decoder layer whose tensors are named `{p}…` in full (`p` = `model.language_model.layers.3.`).
fn load_layer(t: &mut Taker, cfg: &ModelConfig, p: &str, kind: LayerKind) -> Result<LayerWeights> {
    let h = cfg.hidden_size;
    let mixer = match kind {
        LayerKind::GatedDeltaNet => {
            let p = format!("{p}linear_attn.");
            let (hv, conv) = (cfg.linear_num_value_heads, cfg.gdn_conv_dim());
            let vdim = cfg.gdn_value_dim();
            Mixer::GatedDeltaNet(GdnWeights {
                in_proj_qkv: t.take_global(&format!("{p}in_proj_qkv.weight"), &[conv, h])?,
                in_proj_z: t.take_global(&format!("{p}in_proj_z.weight"), &[vdim, h])?,
                in_proj_b: t.take_global(&format!("{p}in_proj_b.weight"), &[hv, h])?,
                in_proj_a: t.take_global(&format!("{p}in_proj_a.weight"), &[hv, h])?,
                conv1d: t.take_global(&format!("{p}conv1d.weight"), &[conv, 1, cfg.linear_conv_kernel_dim])?,
                a_log: t.take_global(&format!("{p}A_log"), &[hv])?,
                dt_bias: t.take_global(&format!("{p}dt_bias"), &[hv])?,
                norm: t.take_global(&format!("{p}norm.weight"), &[cfg.linear_value_head_dim])?,
                out_proj: t.take_global(&format!("{p}out_proj.weight"), &[h, vdim])?,
            })
        }
        LayerKind::FullAttention => {
            let p = format!("{p}self_attn.");
            let (hq, hkv, d) = (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim);
            Mixer::FullAttention(AttentionWeights {
                q_proj: t.take_global(&format!("{p}q_proj.weight"), &[hq * 2 * d, h])?,
                k_proj: t.take_global(&format!("{p}k_proj.weight"), &[hkv * d, h])?,
                v_proj: t.take_global(&format!("{p}v_proj.weight"), &[hkv * d, h])?,
                o_proj: t.take_global(&format!("{p}o_proj.weight"), &[h, hq * d])?,
                q_norm: t.take_global(&format!("{p}q_norm.weight"), &[d])?,
                k_norm: t.take_global(&format!("{p}k_norm.weight"), &[d])?,
            })
        }
    };
    let m = format!("{p}mlp.");
    let (e, inter, shared) = (cfg.num_experts, cfg.moe_intermediate_size, cfg.shared_expert_intermediate_size);
    // Either fused tensor marks the fused layout, so a checkpoint missing one of them names it.
    let experts = if t.left.contains_key(&format!("{m}experts.gate_up_proj"))
        || t.left.contains_key(&format!("{m}experts.down_proj"))
    {
        let gate_up = t.take_global(&format!("{m}experts.gate_up_proj"), &[e, 2 * inter, h])?;
        let down = t.take_global(&format!("{m}experts.down_proj"), &[e, h, inter])?;
        (0..e)
            .map(|x| {
                let gu = gate_up.index(x); // [2I, H]: gate rows first, then up
                ExpertWeights { gate: gu.rows(0, inter), up: gu.rows(inter, inter), down: down.index(x) }
            })
            .collect()
    } else {
        (0..e).map(|x| load_mlp(t, &format!("{m}experts.{x}."), inter, h)).collect::<Result<Vec<_>>>()?
    };
    Ok(LayerWeights {
        input_norm: t.take_global(&format!("{p}input_layernorm.weight"), &[h])?,
        post_attention_norm: t.take_global(&format!("{p}post_attention_layernorm.weight"), &[h])?,
        mixer,
        moe: MoeWeights {
            router: t.take_global(&format!("{m}gate.weight"), &[e, h])?,
            experts,
            shared_expert: load_mlp(t, &format!("{m}shared_expert."), shared, h)?,
            shared_expert_gate: t.take_global(&format!("{m}shared_expert_gate.weight"), &[1, h])?,
        },
    })
}

fn load_mlp(t: &mut Taker, prefix: &str, inter: usize, h: usize) -> Result<ExpertWeights> {
    Ok(ExpertWeights {
        gate: t.take_global(&format!("{prefix}gate_proj.weight"), &[inter, h])?,
        up: t.take_global(&format!("{prefix}up_proj.weight"), &[inter, h])?,
        down: t.take_global(&format!("{prefix}down_proj.weight"), &[h, inter])?,
    })
}

/// Hands out tensors by name once each, so that whatever is left at the end is unknown.
struct Taker {
    left: BTreeMap<String, StoredTensor>,
    /// `model.language_model.` for the release, `model.` for a text-only save.
    prefix: &'static str,
    /// The checkpoint's weight files, for naming where a missing tensor was looked for.
    files: String,
    /// What config.json declares: F8 tensors are refused unless it is `Fp8Block128`.
    precision: Precision,
    /// How 4-bit modules are packed, when config.json declares a 4-bit format.
    int4: Option<Int4Scheme>,
    /// F8_E4M3 and 4-bit matrices taken so far.
    fp8_matrices: usize,
    int4_matrices: usize,
}

impl Taker {
    fn new(ckpt: &Checkpoint, cfg: &ModelConfig) -> Self {
        let prefix = if ckpt.tensors.keys().any(|k| k.starts_with("model.language_model.")) {
            "model.language_model."
        } else {
            "model."
        };
        let files: std::collections::BTreeSet<&str> = ckpt.tensors.values().map(|t| t.file.as_str()).collect();
        let files = files.into_iter().collect::<Vec<_>>().join(", ");
        let (precision, int4) = (cfg.precision, cfg.int4);
        Taker { left: ckpt.tensors.clone(), prefix, files, precision, int4, fp8_matrices: 0, int4_matrices: 0 }
    }

    /// A tensor under the text model's prefix.
    fn take(&mut self, name: &str, shape: &[usize]) -> Result<Tensor> {
        self.take_global(&format!("{}{name}", self.prefix), shape)
    }

    /// A tensor by its full name.
    fn take_global(&mut self, name: &str, shape: &[usize]) -> Result<Tensor> {
        let Some(stored) = self.left.remove(name) else {
            return self.take_int4(name, shape);
        };
        let tensor = stored.tensor.map_err(anyhow::Error::msg)?;
        if matches!(tensor.dtype, DType::I32 | DType::I64) {
            bail!(
                "{}: tensor `{name}` has dtype {}; solo reads weights as BF16, F16, F32 or F8_E4M3",
                stored.file,
                tensor.dtype.name()
            );
        }
        if tensor.shape != shape {
            bail!("{}: tensor `{name}` has shape {:?} but config.json implies {:?}", stored.file, tensor.shape, shape);
        }
        if tensor.dtype == DType::F8E4M3 {
            return self.with_scales(name, &stored.file, tensor);
        }
        Ok(tensor)
    }

    /// The matrix `{module}.weight` when the checkpoint stores `module` 4-bit, repacked into solo's
    /// int4 layout; otherwise the missing tensor is named.
    fn take_int4(&mut self, name: &str, shape: &[usize]) -> Result<Tensor> {
        let module = name.strip_suffix(".weight");
        let packed = module.and_then(|m| {
            int4_formats::PACKED_SUFFIXES.iter().map(|s| format!("{m}.{s}")).find(|n| self.left.contains_key(n))
        });
        let (Some(module), Some(packed)) = (module, packed) else {
            bail!("tensor `{name}` is missing from the checkpoint ({})", self.files);
        };
        let file = self.left[&packed].file.clone();
        let Some(scheme) = self.int4 else {
            bail!("{file}: `{packed}` is a packed 4-bit weight but config.json declares no GPTQ, AWQ or compressed-tensors quantization_config");
        };
        if !INT4_MODULES.iter().any(|m| module.ends_with(m)) {
            bail!(
                "{file}: `{module}` is stored 4-bit; solo reads 4-bit weights only in the experts, the shared expert and the attention and linear-attention projections"
            );
        }
        match int4_formats::take(&mut self.left, module, shape, &scheme)? {
            Some(t) => {
                self.int4_matrices += 1;
                Ok(t)
            }
            // the packed tensor is another format's (`weight_packed` in a GPTQ checkpoint, say)
            None => bail!(
                "{file}: `{packed}` is not how config.json's {} format packs 4-bit weights (`{name}` is missing)",
                scheme.format.name()
            ),
        }
    }

    /// An F8_E4M3 matrix with its block scales `{name}_scale_inv`, every fact checked.
    fn with_scales(&mut self, name: &str, file: &str, tensor: Tensor) -> Result<Tensor> {
        if self.precision != Precision::Fp8Block128 {
            bail!("{file}: tensor `{name}` is F8_E4M3 but config.json declares no FP8 quantization_config");
        }
        if tensor.shape.len() != 2 {
            bail!(
                "{file}: tensor `{name}` is F8_E4M3 with shape {:?}; solo reads FP8 only as 2-D block-scaled matrices",
                tensor.shape
            );
        }
        let scale_name = format!("{name}_scale_inv");
        let Some(stored) = self.left.remove(&scale_name) else {
            bail!(
                "{file}: tensor `{name}` is F8_E4M3 but its block scales `{scale_name}` are missing ({})",
                self.files
            );
        };
        let scales = stored.tensor.map_err(anyhow::Error::msg)?;
        let (rows, cols) = (tensor.shape[0], tensor.shape[1]);
        let want = [rows.div_ceil(FP8_BLOCK), cols.div_ceil(FP8_BLOCK)];
        if scales.shape != want {
            bail!(
                "{}: tensor `{scale_name}` has shape {:?} but its weight [{rows}, {cols}] in 128×128 blocks needs {want:?}",
                stored.file,
                scales.shape
            );
        }
        if scales.dtype == DType::F8E4M3 {
            bail!("{}: tensor `{scale_name}` is F8_E4M3; block scales are BF16, F16 or F32", stored.file);
        }
        let values = scales.to_f32();
        if let Some(bad) = values.iter().find(|v| !v.is_finite()) {
            bail!("{}: tensor `{scale_name}` holds a scale of {bad}", stored.file);
        }
        self.fp8_matrices += 1;
        Ok(tensor.with_block_scales(values))
    }

    /// Fails on any tensor that is neither used nor known to be skippable.
    fn finish(self) -> Result<()> {
        let unknown: Vec<_> = self
            .left
            .iter()
            .filter(|(name, _)| !is_skipped(name))
            .map(|(name, t)| format!("`{name}` ({})", t.file))
            .collect();
        if !unknown.is_empty() {
            let more = if unknown.len() > 5 { format!(" and {} more", unknown.len() - 5) } else { String::new() };
            bail!("unknown tensor(s) in the checkpoint: {}{more}", unknown[..unknown.len().min(5)].join(", "));
        }
        Ok(())
    }
}

/// The modules a 4-bit checkpoint may store 4-bit (by name ending): the routed and shared experts'
/// projections and the mixers' projections, in the main layers and the MTP head's. Embeddings,
/// lm_head, routers, gates, conv1d and norms are 16-bit in every recipe solo reads.
#[rustfmt::skip]
const INT4_MODULES: [&str; 12] = [
    "gate_proj", "up_proj", "down_proj",
    "linear_attn.in_proj_qkv", "linear_attn.in_proj_z", "linear_attn.in_proj_a", "linear_attn.in_proj_b",
    "linear_attn.out_proj", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
];

/// Tensors of the release that solo does not use: the vision tower of a config without `vision_config`.
fn is_skipped(name: &str) -> bool {
    ["model.visual.", "visual."].iter().any(|p| name.starts_with(p))
}
