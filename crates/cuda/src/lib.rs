//! The CUDA backend for the H200 (sm_90a): our kernels, compiled by NVRTC at start-up.
//!
//! `runtime` owns the device, stream and kernels; `weights` puts a checkpoint in GPU memory;
//! `ops` holds each operation with its `.cu` file(s) and its test against the CPU reference;
//! `model` is the forward pass and the `Backend` implementation; `multi_token` the decode step for
//! several tokens at once and `mtp` speculative decoding on it; `synthetic` builds the full-size
//! model with random weights directly in GPU memory for `solo bench`; `profile` times kernels
//! within a decode step, `costs` times ops alone (`solo bench --kernels`).

pub mod costs;
pub mod kernels;
pub mod model;
pub mod mtp;
pub mod multi_token;
pub mod ops;
pub mod profile;
pub mod runtime;
pub mod synthetic;
pub mod weights;

pub use model::{CudaModel, CudaState};
pub use runtime::Gpu;

use anyhow::Result;
use std::path::Path;

/// Loads a checkpoint directory onto the GPU.
pub fn load(dir: &Path, max_seq: usize) -> Result<CudaModel> {
    let (config, weights) = solo_model::load(dir)?;
    weights::check_real_widths(&config)?;
    let gpu = Gpu::new()?;
    CudaModel::new(gpu, config, &weights, max_seq)
}

/// Whether an NVIDIA GPU is usable here (driver library present and at least one device).
pub fn gpu_present() -> bool {
    // SAFETY: only probes whether the driver library can be opened before calling into it.
    let driver = unsafe { cudarc::driver::sys::is_culib_present() };
    driver && cudarc::driver::CudaContext::device_count().is_ok_and(|n| n > 0)
}
