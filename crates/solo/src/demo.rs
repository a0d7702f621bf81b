//! The built-in demo checkpoint: the real architecture at toy widths with random weights, written
//! deterministically on first use so that `solo run` works on a fresh machine with no download.
//! Its output is noise; it exists to exercise the whole path (loader, template, tokenizer, model).

use anyhow::{Context, Result};
use half::bf16;
use safetensors::{tensor::TensorView, Dtype};
use solo_model::sampler::SplitMix;
use solo_model::weights::release_tensor_shapes;
use solo_model::ModelConfig;
use std::path::{Path, PathBuf};

/// Bump when anything written here changes, so old caches are not reused.
const VERSION: &str = "demo-v1";

/// The tokenizer and chat template of the tiny test fixtures (a byte-level BPE with Qwen's special
/// tokens, and the real Qwen3.6 template).
const TOKENIZER_JSON: &str = include_str!("../../../fixtures/tiny-a/tokenizer.json");
const TOKENIZER_CONFIG_JSON: &str = include_str!("../../../fixtures/tiny-a/tokenizer_config.json");
const CHAT_TEMPLATE: &str = include_str!("../../../fixtures/tiny-a/chat_template.jinja");
const GENERATION_CONFIG_JSON: &str = include_str!("../../../fixtures/tiny-a/generation_config.json");

/// The demo's config.json: every width differs from the real model's, the layout is the same.
fn config_json() -> serde_json::Value {
    serde_json::json!({
        "architectures": ["Qwen3_5MoeForConditionalGeneration"],
        "model_type": "qwen3_5_moe",
        "text_config": {
            "model_type": "qwen3_5_moe_text",
            "hidden_size": 128,
            "num_hidden_layers": 8,
            "full_attention_interval": 4,
            "vocab_size": 512,
            "rms_norm_eps": 1e-6,
            "tie_word_embeddings": false,
            "max_position_embeddings": 32768,
            "attn_output_gate": true,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 64,
            "rope_parameters": {"rope_type": "default", "rope_theta": 1.0e7, "partial_rotary_factor": 0.25},
            "linear_num_key_heads": 4,
            "linear_num_value_heads": 8,
            "linear_key_head_dim": 32,
            "linear_value_head_dim": 32,
            "linear_conv_kernel_dim": 4,
            "num_experts": 16,
            "num_experts_per_tok": 4,
            "moe_intermediate_size": 64,
            "shared_expert_intermediate_size": 64
        }
    })
}

/// The demo checkpoint's directory, written first if needed (under `cache_root`).
pub fn ensure(cache_root: &Path) -> Result<PathBuf> {
    let dir = cache_root.join(VERSION);
    if dir.join("model.safetensors").exists() {
        return Ok(dir);
    }
    // Write into a fresh sibling and rename, so an interrupted first run never leaves half a checkpoint.
    let tmp = cache_root.join(format!("{VERSION}.tmp-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    write(&tmp)?;
    match std::fs::rename(&tmp, &dir) {
        Ok(()) => {}
        // Another process won the race: use its copy.
        Err(_) if dir.join("model.safetensors").exists() => {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        Err(e) => return Err(e).with_context(|| format!("cannot move {} to {}", tmp.display(), dir.display())),
    }
    Ok(dir)
}

/// Writes the whole demo checkpoint into `dir`.
pub fn write(dir: &Path) -> Result<()> {
    let config = config_json();
    let files = [
        ("config.json", serde_json::to_string_pretty(&config)?),
        ("generation_config.json", GENERATION_CONFIG_JSON.to_string()),
        ("tokenizer.json", TOKENIZER_JSON.to_string()),
        ("tokenizer_config.json", TOKENIZER_CONFIG_JSON.to_string()),
        ("chat_template.jinja", CHAT_TEMPLATE.to_string()),
    ];
    for (name, text) in files {
        std::fs::write(dir.join(name), text).with_context(|| format!("cannot write {}", dir.join(name).display()))?;
    }
    let cfg = ModelConfig::from_json(&config.to_string())?;
    let tensors: Vec<(String, Vec<usize>, Vec<u8>)> = release_tensor_shapes(&cfg)
        .into_iter()
        .enumerate()
        .map(|(i, (name, shape))| {
            let values = init_values(&name, &shape, i as u64);
            (name, shape, values.iter().flat_map(|v| bf16::from_f32(*v).to_le_bytes()).collect())
        })
        .collect();
    let views = tensors
        .iter()
        .map(|(name, shape, bytes)| Ok((name.clone(), TensorView::new(Dtype::BF16, shape.clone(), bytes)?)))
        .collect::<Result<Vec<_>, safetensors::SafeTensorError>>()?;
    let path = dir.join("model.safetensors");
    safetensors::serialize_to_file(views, None, &path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// Values with the role's usual scale: zero-centred norms near 0, the gated norm near 1, decays
/// spread out, matrices ~ U(±√(3/fan_in)) so activations stay O(1).
fn init_values(name: &str, shape: &[usize], seed: u64) -> Vec<f32> {
    let n: usize = shape.iter().product();
    let mut rng = SplitMix(seed.wrapping_add(0x5017_0000));
    let mut uniform = move || rng.next_f32();
    if name.ends_with("A_log") {
        return (0..n).map(|_| (1.0 + 15.0 * uniform()).ln()).collect();
    }
    if name.ends_with("linear_attn.norm.weight") {
        return (0..n).map(|_| 1.0 + 0.2 * (uniform() - 0.5)).collect();
    }
    if shape.len() == 1 {
        return (0..n).map(|_| 0.2 * (uniform() - 0.5)).collect();
    }
    let fan_in = *shape.last().unwrap() as f32;
    let bound = (3.0 / fan_in).sqrt();
    (0..n).map(|_| bound * (2.0 * uniform() - 1.0)).collect()
}
