//! What every backend shares: the config, the checkpoint's tensors by role, and the backend seam.

pub mod backend;
pub mod bf16;
pub mod checkpoint;
pub mod config;
pub mod gguf;
pub mod image;
pub mod int4;
pub mod int4_formats;
pub mod lora;
pub mod sampler;
pub mod sampling;
pub mod speculative;
pub mod tensor;
pub mod vision;
pub mod weights;

pub use backend::{place_images, Backend, Draft, Logits, Placement, PromptImage};
pub use checkpoint::Checkpoint;
pub use config::Precision;
pub use config::{LayerKind, ModelConfig};
pub use tensor::{DType, Tensor};
pub use weights::ModelWeights;

use anyhow::{bail, Result};
use std::path::Path;

/// The config of a checkpoint directory (`config.json`) or a GGUF file (its metadata), without
/// reading the weights: for choosing a backend before loading.
pub fn config_of(path: &Path) -> Result<ModelConfig> {
    if gguf::is_gguf(path) {
        return gguf::GgufModel::open(path)?.config();
    }
    ModelConfig::from_dir(path)
}

/// Reads `config.json` and maps the weights of a checkpoint directory, checking every tensor;
/// or reads a GGUF file (`gguf::load`).
pub fn load(dir: &Path) -> Result<(ModelConfig, ModelWeights)> {
    if gguf::is_gguf(dir) {
        return gguf::load(dir);
    }
    if !dir.is_dir() {
        bail!("model directory {} does not exist", dir.display());
    }
    let config = ModelConfig::from_dir(dir)?;
    let ckpt = Checkpoint::open(dir)?;
    let weights = ModelWeights::load(&ckpt, &config)?;
    Ok((config, weights))
}
