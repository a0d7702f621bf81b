//! Which checkpoint a command runs: the `--model` directory, else Qwen3.6-35B-A3B from the local
//! Hugging Face cache, else the built-in demo checkpoint.

use crate::demo;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// The repositories `solo pull` fetches, in order of preference: bf16, then the official FP8.
const HF_REPO_DIRS: [&str; 2] = ["models--Qwen--Qwen3.6-35B-A3B", "models--Qwen--Qwen3.6-35B-A3B-FP8"];

pub struct ModelDir {
    pub path: PathBuf,
    /// True for the built-in demo checkpoint.
    pub is_demo: bool,
}

pub fn resolve(explicit: Option<&Path>) -> Result<ModelDir> {
    if let Some(path) = explicit {
        check_model_path(path)?;
        return Ok(ModelDir { path: path.to_path_buf(), is_demo: false });
    }
    if let Some(path) = hf_cache_snapshot() {
        // an `--include` pull, or shards deleted by hand: say what is missing
        check_model_path(&path)?;
        return Ok(ModelDir { path, is_demo: false });
    }
    Ok(ModelDir { path: demo::ensure(&solo_cache_dir())?, is_demo: true })
}

/// What a newcomer's `--model` most often gets wrong, each as one line that says what to do: a
/// file where the checkpoint's directory belongs, the vision projector instead of the model, a
/// directory that is not a checkpoint, an interrupted download (a shard the index names is
/// missing), no tokenizer.
pub fn check_model_path(path: &Path) -> Result<()> {
    let shown = path.display();
    let name = path.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
    if !path.exists() {
        bail!("--model {shown}: no such file or directory");
    }
    if path.is_file() {
        if name.contains("mmproj") {
            bail!(
                "--model {shown}: this is the vision projector (mmproj), not the language model; point --model at \
                 the model's own .gguf file (the one without mmproj in its name)"
            );
        }
        if solo_model::gguf::is_gguf(path) {
            return Ok(());
        }
        let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        bail!(
            "--model {shown}: is a file; --model takes the checkpoint's directory (config.json, *.safetensors, \
             tokenizer.json) or a .gguf file: try --model {}",
            parent.display()
        );
    }
    if !path.join("config.json").is_file() {
        let gguf = std::fs::read_dir(path)
            .ok()
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| solo_model::gguf::is_gguf(p) && !p.to_string_lossy().to_lowercase().contains("mmproj"))
            .min();
        if let Some(file) = gguf {
            bail!(
                "--model {shown}: no config.json, but it holds a GGUF model: point --model at the file, --model {}",
                file.display()
            );
        }
        bail!(
            "--model {shown}: no config.json, so not a Hugging Face checkpoint directory (config.json, *.safetensors, \
             tokenizer.json); `solo pull` downloads Qwen3.6-35B-A3B into the Hugging Face cache"
        );
    }
    let index = path.join("model.safetensors.index.json");
    if index.is_file() {
        let text = std::fs::read_to_string(&index).with_context(|| format!("cannot read {}", index.display()))?;
        let json: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("{}: not valid JSON", index.display()))?;
        let mut shards: Vec<&str> =
            json["weight_map"].as_object().into_iter().flatten().filter_map(|(_, v)| v.as_str()).collect();
        shards.sort_unstable();
        shards.dedup();
        let missing: Vec<&&str> = shards.iter().filter(|s| !path.join(s).is_file()).collect();
        if let Some(first) = missing.first() {
            bail!(
                "--model {shown}: {first} is missing ({} of the {} shards that model.safetensors.index.json names): \
                 an interrupted download? `solo pull` resumes it",
                missing.len(),
                shards.len()
            );
        }
    } else if !path.join("model.safetensors").is_file() {
        bail!("--model {shown}: no weights (model.safetensors, or shards with model.safetensors.index.json)");
    }
    if !path.join("tokenizer.json").is_file() {
        bail!(
            "--model {shown}: no tokenizer.json: copy tokenizer.json and tokenizer_config.json from the model's \
             repository into it (`solo pull` fetches them with the weights)"
        );
    }
    Ok(())
}

/// `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub` — as huggingface_hub does.
pub fn hf_hub_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("HF_HUB_CACHE") {
        return Some(dir.into());
    }
    if let Some(home) = std::env::var_os("HF_HOME") {
        return Some(Path::new(&home).join("hub"));
    }
    let home = std::env::var_os("HOME")?;
    Some(Path::new(&home).join(".cache/huggingface/hub"))
}

/// The first repository of `HF_REPO_DIRS` with a complete snapshot.
fn hf_cache_snapshot() -> Option<PathBuf> {
    let hub = hf_hub_dir()?;
    HF_REPO_DIRS.iter().find_map(|name| repo_snapshot(&hub.join(name)))
}

/// The snapshot `refs/main` points at, else any complete snapshot.
fn repo_snapshot(repo: &Path) -> Option<PathBuf> {
    let snapshots = repo.join("snapshots");
    let complete = |p: &Path| {
        p.join("config.json").exists()
            && (p.join("model.safetensors.index.json").exists() || p.join("model.safetensors").exists())
    };
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
