//! GGUF files (llama.cpp's format) of this architecture, `qwen35moe`, read into the same
//! `ModelConfig` + `ModelWeights` a safetensors checkpoint gives, so no backend branches on format.
//!
//! The seam: the file's metadata becomes a Hugging Face text config (parsed and checked by
//! `ModelConfig::from_json`), and its tensors become a `Checkpoint` under the release's tensor
//! names and layouts (assembled and shape-checked by `ModelWeights::load`). llama.cpp's converter
//! (convert_hf_to_gguf.py, `Qwen3_5MoeTextModel`) changes some tensors on the way to GGUF; each
//! change is undone here (`names.rs`): norms stored as 1 + w, `A_log` stored as ssm_a = -exp(A_log),
//! the GDN's value heads reordered from grouped-by-key-head to tiled, conv1d squeezed, experts
//! stacked, the MTP block renamed. Quantized matrices keep their ggml blocks (`DType::Ggml`) and
//! are dequantized on read, exactly as ggml does (`types.rs`).
//!
//! A multi-file split (`…-00001-of-00003.gguf`) loads as one; a vision projector
//! (`mmproj-*.gguf`, architecture `clip`) and any other architecture are refused in one line.

mod names;
pub mod random;
pub mod reader;
pub mod types;

pub use reader::{GgufFile, Value};
pub use types::GgmlType;

use crate::checkpoint::{Checkpoint, StoredTensor};
use crate::config::ModelConfig;
use crate::weights::ModelWeights;
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The architecture name llama.cpp gives Qwen3.5/3.6-MoE (35B-A3B and its larger siblings).
pub const ARCH: &str = "qwen35moe";

/// Whether `path` names a GGUF file (rather than a checkpoint directory).
pub fn is_gguf(path: &Path) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case("gguf")) && !path.is_dir()
}

/// A GGUF model: its files (one, or every part of a split), parsed.
pub struct GgufModel {
    /// The first (or only) file: where the metadata lives.
    pub files: Vec<GgufFile>,
    pub path: PathBuf,
}

impl GgufModel {
    /// Opens `path` and, for a split, every part of it; checks the architecture.
    pub fn open(path: &Path) -> Result<GgufModel> {
        if !path.is_file() {
            bail!("model file {} does not exist", path.display());
        }
        let parts = split_parts(path)?;
        let mut files = Vec::new();
        for part in &parts {
            files.push(GgufFile::open(part)?);
        }
        let first = &files[0];
        let name = &first.name;
        let arch = first.architecture().with_context(|| format!("{name}: no general.architecture"))?;
        if arch == "clip" || name.starts_with("mmproj") {
            bail!(
                "{name} is a vision projector (mmproj); solo does not read images yet: \
                 pass the model's own GGUF file"
            );
        }
        if arch != ARCH {
            bail!("{name} holds architecture `{arch}`; solo runs only `{ARCH}` (Qwen3.5/3.6-35B-A3B)");
        }
        if let Some(count) = first.get("split.count").and_then(Value::as_u64) {
            if count as usize != files.len() {
                bail!("{name}: split.count is {count} but {} part(s) were found", files.len());
            }
        }
        Ok(GgufModel { files, path: path.to_path_buf() })
    }

    fn meta(&self, key: &str) -> Option<&Value> {
        self.files[0].get(key)
    }

    fn meta_u64(&self, key: &str) -> Result<u64> {
        let name = &self.files[0].name;
        let v = self.meta(key).with_context(|| format!("{name}: metadata `{key}` is missing"))?;
        v.as_u64().with_context(|| format!("{name}: metadata `{key}` is {v:?}, not an integer"))
    }

    fn meta_f64(&self, key: &str) -> Result<f64> {
        let name = &self.files[0].name;
        let v = self.meta(key).with_context(|| format!("{name}: metadata `{key}` is missing"))?;
        v.as_f64().with_context(|| format!("{name}: metadata `{key}` is {v:?}, not a number"))
    }

    /// Layers of the main model: `block_count` counts the MTP block(s) too.
    fn main_layers(&self) -> Result<usize> {
        let blocks = self.meta_u64(&format!("{ARCH}.block_count"))?;
        let mtp = self.meta(&format!("{ARCH}.nextn_predict_layers")).and_then(Value::as_u64).unwrap_or(0);
        if mtp > 1 || mtp >= blocks {
            bail!("{}: {mtp} MTP layers of {blocks} blocks; solo reads one MTP block at most", self.files[0].name);
        }
        Ok((blocks - mtp) as usize)
    }

    fn tensor_shape(&self, name: &str) -> Option<&[usize]> {
        self.files.iter().flat_map(|f| &f.tensors).find(|t| t.name == name).map(|t| t.shape.as_slice())
    }

    /// The model's config, as the Hugging Face text config the metadata stands for.
    pub fn config(&self) -> Result<ModelConfig> {
        let a = |k: &str| format!("{ARCH}.{k}");
        let n_layers = self.main_layers()?;
        let heads = self.meta_u64(&a("attention.head_count"))?;
        let head_dim = match self.meta(&a("attention.key_length")) {
            Some(_) => self.meta_u64(&a("attention.key_length"))?,
            None => self.meta_u64(&a("embedding_length"))? / heads.max(1),
        };
        let rot = self.meta_u64(&a("rope.dimension_count")).unwrap_or(head_dim);
        let v_heads = self.meta_u64(&a("ssm.time_step_rank"))?;
        let interval = self.meta(&a("full_attention_interval")).and_then(Value::as_u64).unwrap_or(4);
        let vocab = self
            .tensor_shape("token_embd.weight")
            .map(|s| s[0])
            .with_context(|| format!("{}: no tensor `token_embd.weight`", self.files[0].name))?;
        let mut eos = Vec::new();
        for key in ["tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"] {
            if let Some(id) = self.meta(key).and_then(Value::as_u64) {
                eos.push(id);
            }
        }
        let json = serde_json::json!({
            "model_type": "qwen3_5_moe_text",
            "hidden_size": self.meta_u64(&a("embedding_length"))?,
            "num_hidden_layers": n_layers,
            "full_attention_interval": interval,
            "vocab_size": vocab,
            "rms_norm_eps": self.meta_f64(&a("attention.layer_norm_rms_epsilon"))?,
            "tie_word_embeddings": self.tensor_shape("output.weight").is_none(),
            "max_position_embeddings": self.meta_u64(&a("context_length"))?,
            "num_attention_heads": heads,
            "num_key_value_heads": self.meta_u64(&a("attention.head_count_kv"))?,
            "head_dim": head_dim,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": self.meta_f64(&a("rope.freq_base"))?,
                "partial_rotary_factor": rot as f64 / head_dim.max(1) as f64,
            },
            "linear_num_key_heads": self.meta_u64(&a("ssm.group_count"))?,
            "linear_num_value_heads": v_heads,
            "linear_key_head_dim": self.meta_u64(&a("ssm.state_size"))?,
            "linear_value_head_dim": self.meta_u64(&a("ssm.inner_size"))? / v_heads.max(1),
            "linear_conv_kernel_dim": self.meta_u64(&a("ssm.conv_kernel"))?,
            "num_experts": self.meta_u64(&a("expert_count"))?,
            "num_experts_per_tok": self.meta_u64(&a("expert_used_count"))?,
            "moe_intermediate_size": self.meta_u64(&a("expert_feed_forward_length"))?,
            "shared_expert_intermediate_size": self.meta_u64(&a("expert_shared_feed_forward_length"))?,
            "eos_token_id": eos,
        });
        ModelConfig::from_json(&json.to_string()).with_context(|| format!("{}: metadata", self.files[0].name))
    }

    /// Every tensor, under the release's name and layout (`names.rs`), as a checkpoint.
    pub fn checkpoint(&self, cfg: &ModelConfig) -> Result<Checkpoint> {
        let mut tensors = BTreeMap::new();
        for file in &self.files {
            for info in &file.tensors {
                let stored = |tensor| StoredTensor { file: file.name.clone(), tensor };
                for (name, tensor) in names::to_release(&info.name, info.tensor.clone(), cfg, &file.name)? {
                    if tensors.insert(name.clone(), stored(tensor)).is_some() {
                        bail!("{}: tensor `{}` appears twice (as `{name}`)", file.name, info.name);
                    }
                }
            }
        }
        Ok(Checkpoint { dir: self.path.clone(), tensors })
    }

    /// Bytes and tensor counts per ggml type, largest first: `Q4_K 15.20 GiB (120), …`.
    pub fn describe(&self) -> String {
        let mut by_type: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        for t in self.files.iter().flat_map(|f| &f.tensors) {
            if let Ok(t) = &t.tensor {
                let e = by_type.entry(t.dtype.name()).or_default();
                e.0 += t.stored_bytes();
                e.1 += 1;
            }
        }
        let total: usize = by_type.values().map(|v| v.0).sum();
        let mut rows: Vec<_> = by_type.into_iter().collect();
        rows.sort_by_key(|(_, (bytes, _))| std::cmp::Reverse(*bytes));
        let parts: Vec<String> = rows.iter().map(|(t, (b, n))| format!("{t} {} ({n})", gib(*b))).collect();
        let split = if self.files.len() > 1 { format!(" in {} parts", self.files.len()) } else { String::new() };
        format!("{}{split}: {} of tensors: {}", self.files[0].name, gib(total), parts.join(", "))
    }

    /// The vocabulary and chat template of `tokenizer.ggml.*` / `tokenizer.chat_template`.
    pub fn vocab(&self) -> Result<Vocab> {
        let name = &self.files[0].name;
        let strings = |key: &str| -> Result<Vec<String>> {
            let v = self.meta(key).with_context(|| format!("{name}: metadata `{key}` is missing"))?;
            let items = v.as_array().with_context(|| format!("{name}: metadata `{key}` is not an array"))?;
            items
                .iter()
                .map(|s| s.as_str().map(str::to_string).with_context(|| format!("{name}: `{key}` holds a non-string")))
                .collect()
        };
        let model = self.meta("tokenizer.ggml.model").and_then(Value::as_str).unwrap_or("(none)");
        if model != "gpt2" {
            bail!("{name}: tokenizer.ggml.model is `{model}`; this model's tokenizer is byte-level BPE (`gpt2`)");
        }
        let token_types = match self.meta("tokenizer.ggml.token_type").and_then(Value::as_array) {
            Some(a) => a.iter().map(|v| v.as_u64().unwrap_or(1) as u32).collect(),
            None => Vec::new(),
        };
        Ok(Vocab {
            tokens: strings("tokenizer.ggml.tokens")?,
            token_types,
            merges: strings("tokenizer.ggml.merges")?,
            pre: self.meta("tokenizer.ggml.pre").and_then(Value::as_str).unwrap_or("default").to_string(),
            chat_template: self.meta("tokenizer.chat_template").and_then(Value::as_str).map(str::to_string),
            eos_token_id: self.meta("tokenizer.ggml.eos_token_id").and_then(Value::as_u64).map(|v| v as u32),
            source: name.clone(),
        })
    }
}

/// What `tokenizer.ggml.*` holds, for `solo_text` to build the tokenizer from.
pub struct Vocab {
    /// Token strings by id (byte-level BPE's alphabet, as in tokenizer.json).
    pub tokens: Vec<String>,
    /// llama.cpp's token types by id: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte.
    pub token_types: Vec<u32>,
    /// `"a b"` merges in rank order.
    pub merges: Vec<String>,
    /// The pre-tokenizer's name (`qwen35`, `qwen2`, …).
    pub pre: String,
    pub chat_template: Option<String>,
    pub eos_token_id: Option<u32>,
    /// The file, for messages.
    pub source: String,
}

/// Reads a GGUF model file into the config and weights every backend takes.
pub fn load(path: &Path) -> Result<(ModelConfig, ModelWeights)> {
    let model = GgufModel::open(path)?;
    let config = model.config()?;
    let ckpt = model.checkpoint(&config)?;
    let weights = ModelWeights::load(&ckpt, &config)?;
    Ok((config, weights))
}

fn gib(bytes: usize) -> String {
    if bytes >= 1 << 30 {
        format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.2} MiB", bytes as f64 / (1u64 << 20) as f64)
    }
}

/// The parts of a split (`NAME-00001-of-00003.gguf` … `-00003-of-00003.gguf`, whichever part was
/// named), or the file alone.
fn split_parts(path: &Path) -> Result<Vec<PathBuf>> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let Some(stem) = name.strip_suffix(".gguf") else { return Ok(vec![path.to_path_buf()]) };
    let tail: Vec<&str> = stem.rsplitn(4, '-').collect(); // [count, "of", index, base]
    let (Some(count), Some(&"of"), Some(index), Some(base)) = (tail.first(), tail.get(1), tail.get(2), tail.get(3))
    else {
        return Ok(vec![path.to_path_buf()]);
    };
    let (Ok(n), Ok(_)) = (count.parse::<usize>(), index.parse::<usize>()) else { return Ok(vec![path.to_path_buf()]) };
    let width = count.len();
    let parts: Vec<PathBuf> =
        (1..=n).map(|i| path.with_file_name(format!("{base}-{i:0width$}-of-{count}.gguf"))).collect();
    if let Some(missing) = parts.iter().find(|p| !p.is_file()) {
        bail!("{name} is part of a {n}-part split but {} is missing", missing.display());
    }
    Ok(parts)
}
