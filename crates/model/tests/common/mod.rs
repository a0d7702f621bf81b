//! What the loader tests share: fixture copies, loading that must fail in one line, and
//! rewriting a safetensors file in place.
#![allow(dead_code)]

use safetensors::{tensor::TensorView, Dtype, SafeTensors};
use solo_model::{ModelConfig, ModelWeights};
use std::path::{Path, PathBuf};
use tempfile::TempDir;

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures")).join(name)
}

/// A copy of a fixture's checkpoint files (not its HF reference outputs) in a fresh temp dir.
pub fn copy_fixture(name: &str) -> TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(fixture(name)).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap();
        if file != "hf_reference.safetensors" {
            std::fs::copy(&path, tmp.path().join(file)).unwrap();
        }
    }
    tmp
}

pub fn load_ok(dir: &Path) -> (ModelConfig, ModelWeights) {
    solo_model::load(dir).unwrap_or_else(|e| panic!("loading {}: {e:#}", dir.display()))
}

/// The error `load` gives, as the CLI prints it; it must be a single line.
pub fn load_err(dir: &Path) -> String {
    match solo_model::load(dir) {
        Ok(_) => panic!("{} loaded but should not have", dir.display()),
        Err(e) => {
            let text = format!("{e:#}");
            assert!(!text.contains('\n'), "error is not one line:\n{text}");
            text
        }
    }
}

pub fn assert_names(err: &str, parts: &[&str]) {
    for part in parts {
        assert!(err.contains(part), "error does not name `{part}`: {err}");
    }
}

/// Replaces config.json's `quantization_config` with `value`.
pub fn set_quantization(dir: &Path, value: serde_json::Value) {
    edit_quantization(dir, |q| *q = value);
}

/// Lets `edit` change config.json's `quantization_config` (null when absent).
pub fn edit_quantization(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = dir.join("config.json");
    let mut cfg: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut cfg["quantization_config"]);
    std::fs::write(&path, cfg.to_string()).unwrap();
}

/// One tensor of a safetensors file, owned.
pub struct Owned {
    pub name: String,
    pub dtype: Dtype,
    pub shape: Vec<usize>,
    pub data: Vec<u8>,
}

pub fn read_tensors(path: &Path) -> Vec<Owned> {
    let bytes = std::fs::read(path).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    st.tensors()
        .into_iter()
        .map(|(name, v)| Owned { name, dtype: v.dtype(), shape: v.shape().to_vec(), data: v.data().to_vec() })
        .collect()
}

pub fn write_tensors(path: &Path, tensors: &[Owned]) {
    let views: Vec<(String, TensorView)> =
        tensors.iter().map(|t| (t.name.clone(), TensorView::new(t.dtype, t.shape.clone(), &t.data).unwrap())).collect();
    safetensors::serialize_to_file(views, None, path).unwrap();
}

/// Reads a safetensors file, lets `edit` change its tensors, and writes it back.
pub fn rewrite(path: &Path, edit: impl FnOnce(&mut Vec<Owned>)) {
    let mut tensors = read_tensors(path);
    edit(&mut tensors);
    write_tensors(path, &tensors);
}
