//! Which checkpoint a command runs: the `--model` directory, else Qwen3.6-35B-A3B from the local
//! Hugging Face cache, else the built-in demo checkpoint.

use crate::demo;
use anyhow::Result;
use std::path::{Path, PathBuf};

const HF_REPO_DIR: &str = "models--Qwen--Qwen3.6-35B-A3B";

pub struct ModelDir {
    pub path: PathBuf,
    /// True for the built-in demo checkpoint.
    pub is_demo: bool,
}

pub fn resolve(explicit: Option<&Path>) -> Result<ModelDir> {
    if let Some(path) = explicit {
        return Ok(ModelDir { path: path.to_path_buf(), is_demo: false });
    }
    if let Some(path) = hf_cache_snapshot() {
        return Ok(ModelDir { path, is_demo: false });
    }
    Ok(ModelDir { path: demo::ensure(&solo_cache_dir())?, is_demo: true })
}

/// `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub` — as huggingface_hub does.
fn hf_hub_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("HF_HUB_CACHE") {
        return Some(dir.into());
    }
    if let Some(home) = std::env::var_os("HF_HOME") {
        return Some(Path::new(&home).join("hub"));
    }
    let home = std::env::var_os("HOME")?;
    Some(Path::new(&home).join(".cache/huggingface/hub"))
}

/// The snapshot `refs/main` points at, else any complete snapshot.
fn hf_cache_snapshot() -> Option<PathBuf> {
    let repo = hf_hub_dir()?.join(HF_REPO_DIR);
    let snapshots = repo.join("snapshots");
    let complete = |p: &Path| p.join("config.json").exists() && p.join("model.safetensors.index.json").exists();
    if let Ok(rev) = std::fs::read_to_string(repo.join("refs/main")) {
        let p = snapshots.join(rev.trim());
        if complete(&p) {
            return Some(p);
        }
    }
    std::fs::read_dir(&snapshots).ok()?.flatten().map(|e| e.path()).find(|p| complete(p))
}

/// `$SOLO_CACHE`, else `$XDG_CACHE_HOME/solo`, else `~/.cache/solo` (else a temp dir).
pub fn solo_cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SOLO_CACHE") {
        return dir.into();
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return Path::new(&dir).join("solo");
    }
    match std::env::var_os("HOME") {
        Some(home) => Path::new(&home).join(".cache/solo"),
        None => std::env::temp_dir().join("solo"),
    }
}
