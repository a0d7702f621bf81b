//! The CUDA backend for the H200 (sm_90a): our kernels, compiled by NVRTC at start-up.
//!
//! `runtime` owns the device, stream and kernels; `weights` puts a checkpoint in GPU memory;
//! `ops` holds each operation with its `.cu` file(s) and its test against the CPU reference;
//! `model` is the forward pass and the `Backend` implementation; `multi_token` the decode step for
//! several tokens at once and `mtp` speculative decoding on it; `synthetic` builds the full-size
//! model with random weights directly in GPU memory for `solo bench`; `profile` times kernels
//! within a decode step, `costs` times ops alone (`solo bench --kernels`).

pub mod as_stored;
pub mod costs;
pub mod int4;
pub mod kernels;
pub mod kquant;
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

/// Loads a checkpoint directory (or a GGUF file, its weights repacked to bf16) onto the GPU for sequences of up to `max_seq` tokens (`None`:
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
pub(crate) const BUDGET_RESERVE: usize = 512 << 20;

/// Fits the sequences into the memory the weights leave (the card's free memory, or what is left
/// of `--gpu-memory`): picks the context when none was asked for, drops the lm_head screen when a
/// budget is too short for it and a sequence, and prints the plan.
fn plan_memory(model: &mut CudaModel, asked: Option<usize>) -> Result<()> {
    let gib = |b: usize| b as f64 / (1u64 << 30) as f64;
    let (used, total) = model.memory_used()?;
    let budget_left = model.gpu.budget_left();
    // a GGUF lm_head read as stored has no screen: its GEMV reads fewer bytes than the screen's
    let screenable = model.weights.lm_head.is_bf16();
    let screen = if screenable { ops::lm_head::LmHeadScreen::bytes(&model.weights.lm_head) } else { 0 };
    let plan = MemoryPlan::new(total - used, budget_left, screen, asked, model.max_seq, |n| model.sequence_bytes_at(n));
    model.screened_lm_head = plan.screened && screenable;
    model.max_seq = plan.max_seq;
    // the context this model serves (the server's default length)
    model.config.max_position_embeddings = model.config.max_position_embeddings.min(plan.max_seq);
    if budget_left.is_some() && model.screened_lm_head {
        // the screen's memory is taken now, as planned, not by a request's first step
        model.make_screen()?;
    }
    let (max_seq, free) = (plan.max_seq, plan.free);
    let per_sequence = model.sequence_bytes_at(max_seq);
    let note = match (budget_left, plan.screened) {
        (None, _) => String::new(),
        (Some(_), true) if screenable => format!(", the lm_head screen {:.2} GiB", gib(screen)),
        (Some(_), true) => String::new(),
        (Some(_), false) => ", no lm_head screen (the budget is short)".into(),
    };
    eprintln!(
        "solo: GPU memory{}: weights {:.1} GiB{}{note}; context {max_seq} tokens: {:.2} GiB of KV cache and state a sequence; {:.1} GiB free: room for {} at once",
        model.gpu.budget.map_or(String::new(), |b| format!(" (budget {:.1} GiB)", gib(b))),
        gib(model.weights.bytes()),
        model.weights.repacked_from.as_ref().map_or(String::new(), |t| format!(" (GGUF {t}: the experts, mixer projections, embedding and lm_head as stored where the kernels read their types, the rest bf16)")),
        gib(per_sequence),
        gib(free),
        free / per_sequence.max(1)
    );
    anyhow::ensure!(
        per_sequence < free,
        "one sequence of {max_seq} tokens needs {:.1} GiB of GPU memory and {:.1} GiB are free after the weights: pass a smaller --max-seq{}",
        gib(per_sequence),
        gib(free),
        if budget_left.is_some() { " or a larger --gpu-memory" } else { "" }
    );
    Ok(())
}

/// What `plan_memory` decides: whether the lm_head screen stays, the context, and the bytes left
/// for sequences.
#[derive(Debug, PartialEq)]
struct MemoryPlan {
    screened: bool,
    max_seq: usize,
    free: usize,
}

impl MemoryPlan {
    /// `card_free`: the card's free memory after the weights; `budget_left`: what `--gpu-memory`
    /// leaves, if given (then `BUDGET_RESERVE` of it is kept back, the screen of `screen` bytes
    /// stays only if a sequence of the asked context, or of 32K when none was asked, still fits,
    /// and without `asked` the context is the longest one sequence fits, a multiple of 1024 up to
    /// `longest`); `sequence(n)`: the bytes one sequence of n tokens holds.
    fn new(
        card_free: usize,
        budget_left: Option<usize>,
        screen: usize,
        asked: Option<usize>,
        longest: usize,
        sequence: impl Fn(usize) -> usize,
    ) -> MemoryPlan {
        let Some(left) = budget_left else {
            return MemoryPlan { screened: true, max_seq: asked.unwrap_or(longest), free: card_free };
        };
        let free = left.saturating_sub(BUDGET_RESERVE);
        let fits = |free: usize, n: usize| sequence(n) < free;
        let longest_in = |free: usize| {
            let mut n = longest;
            while n > 1024 && !fits(free, n) {
                n = (n - 1) / 1024 * 1024;
            }
            n
        };
        let with_screen = free.saturating_sub(screen);
        let screened = match asked {
            Some(n) => fits(with_screen, n),
            None => longest_in(with_screen) >= 32 * 1024,
        };
        let free = if screened { with_screen } else { free };
        MemoryPlan { screened, max_seq: asked.unwrap_or_else(|| longest_in(free)), free }
    }
}

/// `--backend auto`'s choice for a checkpoint directory or GGUF file: this backend when an NVIDIA
/// GPU is here and the config (`config.json`, or the GGUF metadata) has the real model's widths,
/// and for a GGUF file (its Q4_K, Q5_K and Q6_K routed experts kept as stored, the rest repacked to
/// bf16: `weights::repacked_bytes`) when the card (and `--gpu-memory`) can hold its weights;
/// otherwise the CPU reference.
pub fn auto_picks_cuda(path: &Path) -> bool {
    if !gpu_present() {
        return false;
    }
    if !solo_model::gguf::is_gguf(path) {
        return solo_model::ModelConfig::from_dir(path).is_ok_and(|c| weights::check_real_widths(&c).is_ok());
    }
    // the weights are views of the mapped file: nothing is read to size them
    let Ok((config, w)) = solo_model::gguf::load(path) else { return false };
    if weights::check_real_widths(&config).is_err() {
        return false;
    }
    let card = gpu_total_memory().unwrap_or(0);
    let room = runtime::configured_gpu_memory().map_or(card, |budget| budget.min(card));
    weights::repacked_bytes(&w) < room
}

/// GPU 0's memory in bytes, without opening a context.
fn gpu_total_memory() -> Option<usize> {
    use cudarc::driver::result;
    result::init().ok()?;
    let dev = result::device::get(0).ok()?;
    // SAFETY: `dev` is a device handle the initialised driver just returned.
    unsafe { result::device::total_mem(dev) }.ok()
}

/// Whether an NVIDIA GPU is usable here (driver library present and at least one device).
pub fn gpu_present() -> bool {
    // SAFETY: only probes whether the driver library can be opened before calling into it.
    let driver = unsafe { cudarc::driver::sys::is_culib_present() };
    driver && cudarc::driver::CudaContext::device_count().is_ok_and(|n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 24 GiB budget over the int4 release: the plan keeps the screen while a 32K sequence fits
    /// beside it, takes the longest context that fits, drops the screen first when the budget is
    /// short, and leaves an asked context alone (the load then fails in one line if it cannot fit).
    #[test]
    fn memory_plans_fit_the_budget() {
        const GIB: usize = 1 << 30;
        let sequence = |n: usize| 22 * 1024 * n + 63 * (1 << 20);
        let screen = GIB / 2;
        // no budget: the card's memory, the screen, the model's context
        let plan = MemoryPlan::new(50 * GIB, None, screen, None, 262_144, sequence);
        assert_eq!(plan, MemoryPlan { screened: true, max_seq: 262_144, free: 50 * GIB });
        // 2.5 GiB left: the screen stays, the context is the longest that fits in what remains
        let plan = MemoryPlan::new(50 * GIB, Some(5 * GIB / 2), screen, None, 262_144, sequence);
        assert!(plan.screened && plan.max_seq >= 32 * 1024 && plan.max_seq.is_multiple_of(1024), "{plan:?}");
        assert!(sequence(plan.max_seq) < plan.free && sequence(plan.max_seq + 1024) >= plan.free, "{plan:?}");
        assert_eq!(plan.free, 5 * GIB / 2 - BUDGET_RESERVE - screen);
        // 1.2 GiB left: a 32K sequence does not fit beside the screen, so the screen goes
        let plan = MemoryPlan::new(50 * GIB, Some(GIB * 6 / 5), screen, None, 262_144, sequence);
        assert!(!plan.screened && sequence(plan.max_seq) < plan.free, "{plan:?}");
        // an asked context that fits only without the screen
        let plan = MemoryPlan::new(50 * GIB, Some(GIB * 6 / 5), screen, Some(16 * 1024), 262_144, sequence);
        assert_eq!((plan.screened, plan.max_seq), (false, 16 * 1024));
        // nothing left: the smallest context, which the load then refuses in one line
        let plan = MemoryPlan::new(50 * GIB, Some(GIB / 4), screen, None, 262_144, sequence);
        assert!(!plan.screened && plan.max_seq == 1024 && sequence(1024) >= plan.free, "{plan:?}");
    }
}
