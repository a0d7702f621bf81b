//! The CUDA backend for the H200 (sm_90a): our kernels, compiled by NVRTC at start-up.
//!
//! `runtime` owns the device, stream and kernels; `weights` puts a checkpoint in GPU memory;
//! `ops` holds each operation with its `.cu` file(s) and its test against the CPU reference;
//! `model` is the forward pass and the `Backend` implementation; `multi_token` the decode step for
//! several tokens at once and `mtp` speculative decoding on it; `synthetic` builds the full-size
//! model with random weights directly in GPU memory for `solo bench`; `profile` times kernels
//! within a decode step, `costs` times ops alone (`solo bench --kernels`).

pub mod costs;
pub mod int4;
pub mod kernels;
pub mod model;
pub mod mtp;
pub mod multi_token;
pub mod ops;
pub mod profile;
pub mod runtime;
pub mod staged_upload;
pub mod synthetic;
pub mod weights;

pub use model::{CudaModel, CudaState};
pub use runtime::Gpu;

use anyhow::Result;
use std::path::Path;

/// Loads a checkpoint directory onto the GPU for sequences of up to `max_seq` tokens (`None`:
/// the checkpoint's `max_position_embeddings`), and says on stderr what one sequence's state
/// costs; fails with one line when not even one fits in the memory the weights leave.
pub fn load(dir: &Path, max_seq: Option<usize>) -> Result<CudaModel> {
    let start = std::time::Instant::now();
    // The GPU opens and the kernels compile (or come from the cache) while the checkpoint's
    // headers and scales are read.
    let gpu = std::thread::spawn(Gpu::new);
    let (config, weights) = solo_model::load(dir)?;
    weights::check_real_widths(&config)?;
    let max_seq = max_seq.unwrap_or(config.max_position_embeddings);
    let gpu = gpu.join().map_err(|_| anyhow::anyhow!("opening the GPU panicked"))??;
    eprintln!("solo: checkpoint opened and kernels ready in {:.1} s", start.elapsed().as_secs_f64());
    let model = CudaModel::new(gpu, config, &weights, max_seq)?;
    let gib = |b: usize| b as f64 / (1u64 << 30) as f64;
    let (used, total) = model.memory_used()?;
    let (per_sequence, free) = (model.sequence_bytes(), total - used);
    eprintln!(
        "solo: context {max_seq} tokens: {:.2} GiB of KV cache and state a sequence; {:.1} GiB of GPU memory free: room for {} at once",
        gib(per_sequence),
        gib(free),
        free / per_sequence.max(1)
    );
    anyhow::ensure!(
        per_sequence < free,
        "one sequence of {max_seq} tokens needs {:.1} GiB of GPU memory and {:.1} GiB are free after the weights: pass a smaller --max-seq",
        gib(per_sequence),
        gib(free)
    );
    Ok(model)
}

/// Whether an NVIDIA GPU is usable here (driver library present and at least one device).
pub fn gpu_present() -> bool {
    // SAFETY: only probes whether the driver library can be opened before calling into it.
    let driver = unsafe { cudarc::driver::sys::is_culib_present() };
    driver && cudarc::driver::CudaContext::device_count().is_ok_and(|n| n > 0)
}
