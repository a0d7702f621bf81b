//! The text model's configuration, read from a checkpoint's `config.json`.
//!
//! The release nests the text model under `text_config` (model_type `qwen3_5_moe`); a plain text
//! config (model_type `qwen3_5_moe_text`) is accepted too. Values come from the file, never from
//! class defaults (transformers' defaults differ from the release in places): only keys the release
//! itself omits get defaults, and those follow Hugging Face's rules.

use crate::int4_formats::{self, Int4Scheme};
use crate::vision::VisionConfig;
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::path::Path;

/// What mixes tokens in a decoder layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerKind {
    /// Gated DeltaNet (`linear_attention`): causal conv + delta-rule recurrence, constant state.
    GatedDeltaNet,
    /// Gated softmax attention (`full_attention`) over a growing KV cache.
    FullAttention,
}

/// How the checkpoint stores its matrices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    /// bf16 (or f16/f32) everywhere.
    Bf16,
    /// The official FP8 release: the large matrices F8_E4M3 with a scale per 128×128 block
    /// (`quantization_config = {quant_method: "fp8", fmt: "e4m3", weight_block_size: [128, 128]}`);
    /// embeddings, lm_head, router, gates, conv, norms and the GDN a/b rows stay bf16/f32.
    Fp8Block128,
    /// 4-bit weights (GPTQ, AWQ or compressed-tensors, repacked into solo's layout, `crate::int4`)
    /// with a scale per `group` input columns (0: one group per row); the modules the checkpoint
    /// keeps 16-bit stay bf16.
    Int4 { group: usize },
}

impl Precision {
    /// As solo prints it (`solo run`, `bench`, `/v1/models`).
    pub fn name(self) -> &'static str {
        match self {
            Precision::Bf16 => "bf16",
            Precision::Fp8Block128 => "fp8-block128",
            Precision::Int4 { group: 8 } => "int4-g8",
            Precision::Int4 { group: 16 } => "int4-g16",
            Precision::Int4 { group: 32 } => "int4-g32",
            Precision::Int4 { group: 64 } => "int4-g64",
            Precision::Int4 { group: 128 } => "int4-g128",
            Precision::Int4 { group: 0 } => "int4-per-row",
            Precision::Int4 { .. } => "int4",
        }
    }
}

/// The formats solo reads, for the message that refuses another.
const SUPPORTED_FORMATS: &str = "solo reads bf16 checkpoints, the official FP8 one \
     (quant_method fp8, fmt e4m3, weight_block_size [128, 128]) and 4-bit ones: GPTQ (bits 4, \
     checkpoint_format gptq or gptq_v2), AWQ (bits 4, version gemm) and compressed-tensors \
     pack-quantized (int 4-bit weights, strategy group or channel, W4A16)";

/// The precision `config.json` declares: none, the official FP8 block format, or 4-bit GPTQ, AWQ
/// or compressed-tensors (`int4_formats`). Every other quantisation (bitsandbytes, HQQ, EXL2/EXL3,
/// 3- or 8-bit GPTQ, MLX's `quantization`, FP8 e5m2, another block size) is refused in one line
/// naming what was found.
fn declared_precision(top: &serde_json::Value, text: &serde_json::Value) -> Result<(Precision, Option<Int4Scheme>)> {
    if let Some(q) = top.get("quantization").or_else(|| text.get("quantization")) {
        let bits = q.get("bits").map(|b| b.to_string()).unwrap_or_else(|| "?".into());
        let group = q.get("group_size").map(|b| b.to_string()).unwrap_or_else(|| "?".into());
        bail!("config.json has an MLX `quantization` ({bits}-bit, group {group}); {SUPPORTED_FORMATS}");
    }
    let q = top.get("quantization_config").or_else(|| text.get("quantization_config"));
    let Some(q) = q.filter(|q| !q.is_null()) else {
        return Ok((Precision::Bf16, None));
    };
    let method = q.get("quant_method").and_then(|v| v.as_str()).unwrap_or("(none)");
    if method != "fp8" {
        let scheme = int4_formats::parse_config(method, q, SUPPORTED_FORMATS)?;
        return Ok((Precision::Int4 { group: scheme.group.unwrap_or(0) }, Some(scheme)));
    }
    let fmt = q.get("fmt").and_then(|v| v.as_str()).unwrap_or("e4m3");
    if fmt != "e4m3" {
        bail!("config.json's quantization_config has fmt `{fmt}` (FP8 {fmt}); {SUPPORTED_FORMATS}");
    }
    match q.get("weight_block_size") {
        Some(b) if b.as_array().is_some_and(|a| a.len() == 2 && a.iter().all(|v| v.as_u64() == Some(128))) => {}
        Some(b) => bail!("config.json's quantization_config has weight_block_size {b}; {SUPPORTED_FORMATS}"),
        None => bail!(
            "config.json's quantization_config (fp8) has no weight_block_size (per-tensor FP8); {SUPPORTED_FORMATS}"
        ),
    }
    if let Some(scheme) = q.get("activation_scheme").and_then(|v| v.as_str()) {
        if scheme != "dynamic" {
            bail!("config.json's quantization_config has activation_scheme `{scheme}`; {SUPPORTED_FORMATS}");
        }
    }
    Ok((Precision::Fp8Block128, None))
}

/// Every width and constant of the text model. Field names follow `config.json`.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub layer_types: Vec<LayerKind>,
    pub vocab_size: usize,
    pub rms_norm_eps: f32,
    pub tie_word_embeddings: bool,
    pub max_position_embeddings: usize,

    // Full attention.
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub rope_theta: f64,
    pub partial_rotary_factor: f64,

    // Gated DeltaNet.
    pub linear_num_key_heads: usize,
    pub linear_num_value_heads: usize,
    pub linear_key_head_dim: usize,
    pub linear_value_head_dim: usize,
    pub linear_conv_kernel_dim: usize,

    // Mixture of experts.
    pub num_experts: usize,
    pub num_experts_per_tok: usize,
    pub moe_intermediate_size: usize,
    pub shared_expert_intermediate_size: usize,

    /// End-of-sequence ids named in config.json (top level and `text_config`).
    pub eos_token_ids: Vec<u32>,

    /// The precision `quantization_config` declares (the loader checks every tensor against it).
    pub precision: Precision,
    /// How a 4-bit checkpoint packs its matrices (`Precision::Int4`), from `quantization_config`.
    pub int4: Option<Int4Scheme>,

    /// Rotary frequencies per axis (temporal, height, width) of the multimodal RoPE
    /// (`rope_parameters.mrope_section`, [11, 11, 10] in the release): frequency i of the R/2
    /// takes the height position when i % 3 == 1 and i < 3·section[1], the width position when
    /// i % 3 == 2 and i < 3·section[2], else the temporal one (transformers' interleaved layout).
    /// Text tokens have the same position on all three axes, where this is plain RoPE.
    pub mrope_section: [usize; 3],
    /// The vision tower, when config.json has a `vision_config`.
    pub vision: Option<VisionConfig>,
}

impl ModelConfig {
    /// Which axis (0 temporal, 1 height, 2 width) rotary frequency `i` reads (`mrope_section`).
    pub fn mrope_axis(&self, i: usize) -> usize {
        let s = self.mrope_section;
        if i % 3 == 1 && i < 3 * s[1] {
            1
        } else if i % 3 == 2 && i < 3 * s[2] {
            2
        } else {
            0
        }
    }

    /// Rotated dims per attention head (64 in the real model: 256 × 0.25).
    pub fn rotary_dim(&self) -> usize {
        (self.head_dim as f64 * self.partial_rotary_factor).round() as usize
    }
    /// GDN query/key width: key heads × key head dim.
    pub fn gdn_key_dim(&self) -> usize {
        self.linear_num_key_heads * self.linear_key_head_dim
    }
    /// GDN value width: value heads × value head dim.
    pub fn gdn_value_dim(&self) -> usize {
        self.linear_num_value_heads * self.linear_value_head_dim
    }
    /// Channels that go through the causal conv: [q | k | v].
    pub fn gdn_conv_dim(&self) -> usize {
        2 * self.gdn_key_dim() + self.gdn_value_dim()
    }

    /// Reads `DIR/config.json`.
    pub fn from_dir(dir: &Path) -> Result<Self> {
        let path = dir.join("config.json");
        let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
        Self::from_json(&text).with_context(|| format!("{}", path.display()))
    }

    /// Parses the contents of a `config.json`.
    pub fn from_json(text: &str) -> Result<Self> {
        let top: serde_json::Value = serde_json::from_str(text).context("not valid JSON")?;
        let model_type = top.get("model_type").and_then(|v| v.as_str()).unwrap_or("");
        let text_json = match model_type {
            "qwen3_5_moe" => top.get("text_config").context("model_type qwen3_5_moe but no `text_config`")?.clone(),
            "qwen3_5_moe_text" => top.clone(),
            "" => bail!("no `model_type`: not a Qwen3.5/3.6-MoE config"),
            other => bail!("model_type `{other}` is not Qwen3.5/3.6-MoE (`qwen3_5_moe`); solo runs only that model"),
        };
        let (precision, int4) = declared_precision(&top, &text_json)?;
        let raw: RawTextConfig =
            serde_json::from_value(text_json).context("text config has missing or mistyped keys")?;
        let mut eos = Vec::new();
        for v in [top.get("eos_token_id"), raw.eos_token_id.as_ref()].into_iter().flatten() {
            push_ids(v, &mut eos);
        }
        let vision = VisionConfig::from_top(&top)?;
        let mut cfg = raw.into_config(eos, precision, int4)?;
        if let Some(v) = &vision {
            if v.out_hidden_size != cfg.hidden_size {
                bail!(
                    "vision_config.out_hidden_size {} is not the text model's hidden_size {}",
                    v.out_hidden_size,
                    cfg.hidden_size
                );
            }
        }
        cfg.vision = vision;
        Ok(cfg)
    }
}

/// Appends an id or list of ids (the two forms HF writes) without duplicates.
pub fn push_ids(v: &serde_json::Value, out: &mut Vec<u32>) {
    let mut add = |id: u64| {
        let id = id as u32;
        if !out.contains(&id) {
            out.push(id);
        }
    };
    match v {
        serde_json::Value::Number(n) => n.as_u64().into_iter().for_each(&mut add),
        serde_json::Value::Array(a) => a.iter().filter_map(|x| x.as_u64()).for_each(&mut add),
        _ => {}
    }
}

#[derive(Deserialize)]
struct RawTextConfig {
    hidden_size: usize,
    num_hidden_layers: usize,
    #[serde(default)]
    layer_types: Option<Vec<String>>,
    #[serde(default)]
    full_attention_interval: Option<usize>,
    vocab_size: usize,
    #[serde(default = "default_eps")]
    rms_norm_eps: f32,
    #[serde(default)]
    tie_word_embeddings: bool,
    #[serde(default)]
    max_position_embeddings: Option<usize>,
    #[serde(default)]
    attn_output_gate: Option<bool>,

    num_attention_heads: usize,
    num_key_value_heads: usize,
    head_dim: usize,
    #[serde(default)]
    rope_parameters: Option<RopeParameters>,
    #[serde(default)]
    rope_theta: Option<f64>,
    #[serde(default)]
    partial_rotary_factor: Option<f64>,

    linear_num_key_heads: usize,
    linear_num_value_heads: usize,
    linear_key_head_dim: usize,
    linear_value_head_dim: usize,
    linear_conv_kernel_dim: usize,

    num_experts: usize,
    num_experts_per_tok: usize,
    moe_intermediate_size: usize,
    shared_expert_intermediate_size: usize,
    #[serde(default)]
    norm_topk_prob: Option<bool>,
    #[serde(default)]
    mlp_only_layers: Vec<usize>,

    #[serde(default)]
    eos_token_id: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct RopeParameters {
    #[serde(default)]
    rope_type: Option<String>,
    #[serde(default)]
    rope_theta: Option<f64>,
    #[serde(default)]
    partial_rotary_factor: Option<f64>,
    #[serde(default)]
    mrope_section: Option<[usize; 3]>,
}

fn default_eps() -> f32 {
    1e-6
}

impl RawTextConfig {
    fn into_config(
        self,
        eos_token_ids: Vec<u32>,
        precision: Precision,
        int4: Option<Int4Scheme>,
    ) -> Result<ModelConfig> {
        let n = self.num_hidden_layers;
        let layer_types = match (&self.layer_types, self.full_attention_interval) {
            (Some(list), _) => list
                .iter()
                .enumerate()
                .map(|(i, t)| match t.as_str() {
                    "linear_attention" => Ok(LayerKind::GatedDeltaNet),
                    "full_attention" => Ok(LayerKind::FullAttention),
                    other => bail!("layer_types[{i}] is `{other}`, expected linear_attention or full_attention"),
                })
                .collect::<Result<Vec<_>>>()?,
            // HF's rule when the list is absent: layer i is full attention if (i+1) % interval == 0.
            (None, interval) => {
                let interval = interval.unwrap_or(4);
                (0..n)
                    .map(|i| if (i + 1) % interval == 0 { LayerKind::FullAttention } else { LayerKind::GatedDeltaNet })
                    .collect()
            }
        };
        if layer_types.len() != n {
            bail!("layer_types has {} entries but num_hidden_layers is {n}", layer_types.len());
        }
        if self.attn_output_gate == Some(false) {
            bail!("attn_output_gate is false; this architecture always gates attention output");
        }
        if self.norm_topk_prob == Some(false) {
            bail!("norm_topk_prob is false; this architecture always renormalises the top-k");
        }
        if !self.mlp_only_layers.is_empty() {
            bail!("mlp_only_layers is not empty; every layer of this architecture is MoE");
        }
        let rope = self.rope_parameters.as_ref();
        if let Some(kind) = rope.and_then(|r| r.rope_type.as_deref()) {
            if kind != "default" {
                bail!("rope_type `{kind}` is not supported (only `default`)");
            }
        }
        let rope_theta = rope
            .and_then(|r| r.rope_theta)
            .or(self.rope_theta)
            .context("no rope_theta (in rope_parameters or top level)")?;
        let partial_rotary_factor =
            rope.and_then(|r| r.partial_rotary_factor).or(self.partial_rotary_factor).unwrap_or(1.0);
        let cfg = ModelConfig {
            hidden_size: self.hidden_size,
            num_hidden_layers: n,
            layer_types,
            vocab_size: self.vocab_size,
            rms_norm_eps: self.rms_norm_eps,
            tie_word_embeddings: self.tie_word_embeddings,
            max_position_embeddings: self.max_position_embeddings.unwrap_or(262_144),
            num_attention_heads: self.num_attention_heads,
            num_key_value_heads: self.num_key_value_heads,
            head_dim: self.head_dim,
            rope_theta,
            partial_rotary_factor,
            linear_num_key_heads: self.linear_num_key_heads,
            linear_num_value_heads: self.linear_num_value_heads,
            linear_key_head_dim: self.linear_key_head_dim,
            linear_value_head_dim: self.linear_value_head_dim,
            linear_conv_kernel_dim: self.linear_conv_kernel_dim,
            num_experts: self.num_experts,
            num_experts_per_tok: self.num_experts_per_tok,
            moe_intermediate_size: self.moe_intermediate_size,
            shared_expert_intermediate_size: self.shared_expert_intermediate_size,
            eos_token_ids,
            precision,
            int4,
            mrope_section: rope.and_then(|r| r.mrope_section).unwrap_or([11, 11, 10]),
            vision: None,
        };
        cfg.check()?;
        Ok(cfg)
    }
}

impl ModelConfig {
    /// Relations between widths that the formulas rely on.
    fn check(&self) -> Result<()> {
        let nonzero = [
            ("hidden_size", self.hidden_size),
            ("num_hidden_layers", self.num_hidden_layers),
            ("vocab_size", self.vocab_size),
            ("num_attention_heads", self.num_attention_heads),
            ("num_key_value_heads", self.num_key_value_heads),
            ("head_dim", self.head_dim),
            ("linear_num_key_heads", self.linear_num_key_heads),
            ("linear_num_value_heads", self.linear_num_value_heads),
            ("linear_key_head_dim", self.linear_key_head_dim),
            ("linear_value_head_dim", self.linear_value_head_dim),
            ("linear_conv_kernel_dim", self.linear_conv_kernel_dim),
            ("num_experts", self.num_experts),
            ("num_experts_per_tok", self.num_experts_per_tok),
            ("moe_intermediate_size", self.moe_intermediate_size),
            ("shared_expert_intermediate_size", self.shared_expert_intermediate_size),
        ];
        for (key, v) in nonzero {
            if v == 0 {
                bail!("{key} is 0");
            }
        }
        if !self.num_attention_heads.is_multiple_of(self.num_key_value_heads) {
            bail!(
                "num_attention_heads {} is not a multiple of num_key_value_heads {}",
                self.num_attention_heads,
                self.num_key_value_heads
            );
        }
        if !self.linear_num_value_heads.is_multiple_of(self.linear_num_key_heads) {
            bail!(
                "linear_num_value_heads {} is not a multiple of linear_num_key_heads {}",
                self.linear_num_value_heads,
                self.linear_num_key_heads
            );
        }
        if self.num_experts_per_tok > self.num_experts {
            bail!("num_experts_per_tok {} exceeds num_experts {}", self.num_experts_per_tok, self.num_experts);
        }
        let rot = self.rotary_dim();
        if rot == 0 || !rot.is_multiple_of(2) || rot > self.head_dim {
            bail!(
                "rotary dim {rot} (head_dim {} × partial_rotary_factor {}) must be even and within the head",
                self.head_dim,
                self.partial_rotary_factor
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release_like() -> serde_json::Value {
        serde_json::json!({
            "model_type": "qwen3_5_moe",
            "eos_token_id": 248044,
            "text_config": {
                "model_type": "qwen3_5_moe_text",
                "hidden_size": 2048, "num_hidden_layers": 8, "vocab_size": 248320,
                "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
                "linear_num_key_heads": 16, "linear_num_value_heads": 32,
                "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
                "num_experts": 256, "num_experts_per_tok": 8,
                "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
                "full_attention_interval": 4,
                "rope_parameters": {"rope_type": "default", "rope_theta": 1.0e7, "partial_rotary_factor": 0.25},
                "eos_token_id": 248044
            }
        })
    }

    #[test]
    fn release_shape_parses_and_derives_widths() {
        let cfg = ModelConfig::from_json(&release_like().to_string()).unwrap();
        assert_eq!(cfg.rotary_dim(), 64);
        assert_eq!(cfg.gdn_conv_dim(), 8192);
        assert_eq!(cfg.layer_types[3], LayerKind::FullAttention);
        assert_eq!(cfg.layer_types[4], LayerKind::GatedDeltaNet);
        assert_eq!(cfg.eos_token_ids, vec![248044]);
    }

    #[test]
    fn foreign_model_type_is_refused() {
        let mut j = release_like();
        j["model_type"] = "llama".into();
        let err = ModelConfig::from_json(&j.to_string()).unwrap_err();
        assert!(format!("{err:#}").contains("llama"), "{err:#}");
    }

    #[test]
    fn missing_key_is_named() {
        let mut j = release_like();
        j["text_config"].as_object_mut().unwrap().remove("head_dim");
        let err = ModelConfig::from_json(&j.to_string()).unwrap_err();
        assert!(format!("{err:#}").contains("head_dim"), "{err:#}");
    }

    #[test]
    fn fp8_block_config_is_read() {
        let mut j = release_like();
        j["quantization_config"] = serde_json::json!({"quant_method": "fp8", "fmt": "e4m3",
            "activation_scheme": "dynamic", "weight_block_size": [128, 128], "modules_to_not_convert": ["lm_head"]});
        assert_eq!(ModelConfig::from_json(&j.to_string()).unwrap().precision, Precision::Fp8Block128);
        assert_eq!(ModelConfig::from_json(&release_like().to_string()).unwrap().precision, Precision::Bf16);
    }

    #[test]
    fn unsupported_quantisations_name_what_was_found() {
        let fp8 = |fmt: &str, block: serde_json::Value| {
            let mut q = serde_json::json!({"quant_method": "fp8", "fmt": fmt});
            if !block.is_null() {
                q["weight_block_size"] = block;
            }
            q
        };
        let cases = [
            ("quantization_config", serde_json::json!({"quant_method": "gptq", "bits": 8}), "bits 8"),
            (
                "quantization_config",
                serde_json::json!({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemv"}),
                "`gemv`",
            ),
            (
                "quantization_config",
                serde_json::json!({"quant_method": "bitsandbytes", "load_in_4bit": true}),
                "`bitsandbytes`",
            ),
            ("quantization_config", fp8("e5m2", serde_json::json!([128, 128])), "e5m2"),
            ("quantization_config", fp8("e4m3", serde_json::json!([64, 64])), "[64,64]"),
            ("quantization_config", fp8("e4m3", serde_json::Value::Null), "per-tensor"),
            ("quantization", serde_json::json!({"group_size": 64, "bits": 4}), "MLX"),
        ];
        for (key, value, found) in cases {
            let mut j = release_like();
            j[key] = value;
            let err = format!("{:#}", ModelConfig::from_json(&j.to_string()).unwrap_err());
            assert!(err.contains(found) && err.contains("solo reads"), "{err}");
            assert!(!err.contains('\n'), "{err}");
        }
    }

    #[test]
    fn plain_text_config_is_accepted() {
        let j = release_like()["text_config"].clone();
        let cfg = ModelConfig::from_json(&j.to_string()).unwrap();
        assert_eq!(cfg.hidden_size, 2048);
    }
}
