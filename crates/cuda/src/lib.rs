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
/// the checkpoint's `max_position_embeddings`, or under `--gpu-memory` the longest context one
/// sequence fits in what the weights leave), and says on stderr what one sequence's state costs;
/// fails with one line when not even one fits. Under a budget the lm_head's int8 screen is
/// dropped first when it would leave no room for a sequence.
pub fn load(dir: &Path, max_seq: Option<usize>) -> Result<CudaModel> {
    let start = std::time::Instant::now();
    // The GPU opens and the kernels compile (or come from the cache) while the checkpoint's
    // headers and scales are read.
    let gpu = std::thread::spawn(Gpu::new);
    let (config, weights) = solo_model::load(dir)?;
    weights::check_real_widths(&config)?;
    let gpu = gpu.join().map_err(|_| anyhow::anyhow!("opening the GPU panicked"))??;
    eprintln!(
        "solo: checkpoint opened and kernels ready in {:.1} s ({}, {} SMs)",
        start.elapsed().as_secs_f64(),
        gpu.target.describe(),
        gpu.sms
    );
    let longest = config.max_position_embeddings;
    let mut model = CudaModel::new(gpu, config, &weights, max_seq.unwrap_or(longest))?;
    plan_memory(&mut model, max_seq)?;
    Ok(model)
}

/// Room kept under a budget for what solo does not allocate itself: cuBLAS's workspace, CUDA
/// graphs, the decode step's launches.
const BUDGET_RESERVE: usize = 512 << 20;

/// Fits the sequences into the memory the weights leave (the card's free memory, or what is left
/// of `--gpu-memory`): picks the context when none was asked for, drops the lm_head screen when a
/// budget is too short for it and a sequence, and prints the plan.
fn plan_memory(model: &mut CudaModel, asked: Option<usize>) -> Result<()> {
    let gib = |b: usize| b as f64 / (1u64 << 30) as f64;
    let (used, total) = model.memory_used()?;
    let budgeted = model.gpu.budget_left();
    let mut free = budgeted.map_or(total - used, |left| left.saturating_sub(BUDGET_RESERVE));
    let fits = |free: usize, max_seq: usize| model.sequence_bytes_at(max_seq) < free;
    // the longest context (a multiple of 1024, at most the model's) one sequence fits in `free`
    let longest_in = |free: usize| {
        let mut n = model.max_seq;
        while n > 1024 && !fits(free, n) {
            n = (n - 1) / 1024 * 1024;
        }
        n
    };
    let mut note = String::new();
    let mut plan = None;
    if budgeted.is_some() {
        // the screen stays if a sequence fits beside it: the asked context, or (none asked) 32K
        let screen = ops::lm_head::LmHeadScreen::bytes(&model.weights.lm_head);
        let with_screen = free.saturating_sub(screen);
        let keep = match asked {
            Some(n) => fits(with_screen, n),
            None => longest_in(with_screen) >= 32 * 1024,
        };
        if keep {
            free = with_screen;
            note = format!(", the lm_head screen {:.2} GiB", gib(screen));
        } else {
            note = ", no lm_head screen (the budget is short)".into();
        }
        plan = Some((keep, asked.unwrap_or_else(|| longest_in(free))));
    }
    if let Some((screened, max_seq)) = plan {
        model.screened_lm_head = screened;
        model.max_seq = max_seq;
    }
    let max_seq = model.max_seq;
    let per_sequence = model.sequence_bytes_at(max_seq);
    eprintln!(
        "solo: GPU memory{}: weights {:.1} GiB{note}; context {max_seq} tokens: {:.2} GiB of KV cache and state a sequence; {:.1} GiB free: room for {} at once",
        model.gpu.budget.map_or(String::new(), |b| format!(" (budget {:.1} GiB)", gib(b))),
        gib(model.weights.bytes()),
        gib(per_sequence),
        gib(free),
        free / per_sequence.max(1)
    );
    anyhow::ensure!(
        per_sequence < free,
        "one sequence of {max_seq} tokens needs {:.1} GiB of GPU memory and {:.1} GiB are free after the weights: pass a smaller --max-seq{}",
        gib(per_sequence),
        gib(free),
        if budgeted.is_some() { " or a larger --gpu-memory" } else { "" }
    );
    Ok(())
}
/// Whether an NVIDIA GPU is usable here (driver library present and at least one device).
pub fn gpu_present() -> bool {
    // SAFETY: only probes whether the driver library can be opened before calling into it.
    let driver = unsafe { cudarc::driver::sys::is_culib_present() };
    driver && cudarc::driver::CudaContext::device_count().is_ok_and(|n| n > 0)
}
