//! The CPU backend: the readable f32 reference of the whole model, the one every faster path is
//! checked against. Clarity over speed; rayon spreads the matrix products over the cores.

pub mod attention;
pub mod gdn;
pub mod lora;
pub mod model;
pub mod moe;
pub mod mtp;
pub mod ops;
pub mod vision;

pub use model::{CpuModel, CpuState};

use anyhow::Result;
use std::path::Path;

/// Loads a checkpoint directory into the CPU backend.
pub fn load(dir: &Path) -> Result<CpuModel> {
    let (config, weights) = solo_model::load(dir)?;
    Ok(CpuModel::new(config, weights))
}
