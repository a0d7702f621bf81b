//! The built-in demo checkpoint: the real architecture at toy widths (4 layers, hidden 128,
//! 16 experts, an MTP head), trained by `scripts/train_demo.py` on a small generated chat corpus
//! (colours, animals, numbers, days, capitals, a few stories), so that `solo run` on a fresh
//! machine answers in words with no download. Written on first use from the bytes embedded here.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

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

/// The cache directory's name: `demo-` and a hash of every file written, so a changed demo is
/// never read from an old cache.
pub fn dir_name() -> String {
    // FNV-1a, 64-bit: a name, not a security check.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (name, bytes) in files() {
        for &b in name.as_bytes().iter().chain(bytes) {
            h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("demo-{h:016x}")
}

/// The demo checkpoint's directory, written first if needed (under `cache_root`).
pub fn ensure(cache_root: &Path) -> Result<PathBuf> {
    let name = dir_name();
    let dir = cache_root.join(&name);
    if dir.join("model.safetensors").exists() {
        return Ok(dir);
    }
    // Write into a fresh sibling and rename, so an interrupted first run never leaves half a
    // checkpoint: one per call (process and call number), so that threads of one process that
    // write it at once never share one.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = cache_root.join(format!("{name}.tmp-{}-{call}", std::process::id()));
    std::fs::create_dir_all(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    write(&tmp)?;
    match std::fs::rename(&tmp, &dir) {
        Ok(()) => {}
        // Another process or thread won the race: use its copy.
        Err(_) if dir.join("model.safetensors").exists() => {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        Err(e) => return Err(e).with_context(|| format!("cannot move {} to {}", tmp.display(), dir.display())),
    }
    Ok(dir)
}

/// Writes the whole demo checkpoint into `dir`.
pub fn write(dir: &Path) -> Result<()> {
    for (name, bytes) in files() {
        std::fs::write(dir.join(name), bytes).with_context(|| format!("cannot write {}", dir.join(name).display()))?;
    }
    Ok(())
}

/// The checkpoint's files: name and bytes.
fn files() -> [(&'static str, &'static [u8]); 6] {
    [
        ("config.json", CONFIG_JSON.as_bytes()),
        ("generation_config.json", GENERATION_CONFIG_JSON.as_bytes()),
        ("tokenizer.json", TOKENIZER_JSON.as_bytes()),
        ("tokenizer_config.json", TOKENIZER_CONFIG_JSON.as_bytes()),
        ("chat_template.jinja", CHAT_TEMPLATE.as_bytes()),
        ("model.safetensors", MODEL_SAFETENSORS),
    ]
}
