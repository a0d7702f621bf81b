//! The built-in demo checkpoint: the real architecture at toy widths (4 layers, hidden 128,
//! 16 experts, an MTP head), trained by `scripts/train_demo.py` on a small generated chat corpus
//! (colours, animals, numbers, days, capitals, a few stories), so that `solo run` on a fresh
//! machine answers in words with no download. Written on first use from the bytes embedded here.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// Bump when anything written here changes, so old caches are not reused.
const VERSION: &str = "demo-v3";

/// The trained weights (bf16, `mtp.*` included), their config, and the sampling defaults
/// (fixtures/demo/: tiny-a's, at temperature 0.3, where this small a model stays on its facts).
const MODEL_SAFETENSORS: &[u8] = include_bytes!("../../../fixtures/demo/model.safetensors");
const CONFIG_JSON: &str = include_str!("../../../fixtures/demo/config.json");
const GENERATION_CONFIG_JSON: &str = include_str!("../../../fixtures/demo/generation_config.json");

/// The tokenizer and chat template of the tiny test fixtures (a byte-level BPE with Qwen's special
/// tokens, and the real Qwen3.6 template): the demo was trained over them.
const TOKENIZER_JSON: &str = include_str!("../../../fixtures/tiny-a/tokenizer.json");
const TOKENIZER_CONFIG_JSON: &str = include_str!("../../../fixtures/tiny-a/tokenizer_config.json");
const CHAT_TEMPLATE: &str = include_str!("../../../fixtures/tiny-a/chat_template.jinja");

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
    let files: [(&str, &[u8]); 6] = [
        ("config.json", CONFIG_JSON.as_bytes()),
        ("generation_config.json", GENERATION_CONFIG_JSON.as_bytes()),
        ("tokenizer.json", TOKENIZER_JSON.as_bytes()),
        ("tokenizer_config.json", TOKENIZER_CONFIG_JSON.as_bytes()),
        ("chat_template.jinja", CHAT_TEMPLATE.as_bytes()),
        ("model.safetensors", MODEL_SAFETENSORS),
    ];
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes).with_context(|| format!("cannot write {}", dir.join(name).display()))?;
    }
    Ok(())
}
