//! Where a stretch of GPU work spends its time, kernel by kernel (`solo bench --profile`).
//!
//! The stream is first held busy (`hold_stream`) while the host queues the work with a CUDA
//! event after every launch; the events then time each kernel on the GPU back to back, without
//! the host's launch pace in between. Events between kernels also stop programmatic dependent
//! launch from overlapping them, so the sum is a little above a graph replay's time.

use crate::kernels::{kernel_file, Launch};
use crate::runtime::Gpu;
use anyhow::{anyhow, Result};
use cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT;

kernel_file! {
    /// `profile.cu`'s kernels.
    pub mod profile_cu = "profile.cu" {
        fn hold_stream(ns: i64);
    }
}

/// One kernel (name and launch shape) and its time summed over its launches.
#[derive(Clone, Debug)]
pub struct KernelTime {
    pub kernel: String,
    pub micros: f32,
    pub launches: usize,
}

/// Runs `work` (which launches kernels on `gpu`'s stream) and returns the time of each distinct
/// kernel launch shape, in first-launch order.
pub fn profile_launches(gpu: &Gpu, work: impl FnOnce() -> Result<()>) -> Result<Vec<KernelTime>> {
    gpu.sync()?;
    profile_cu::hold_stream(gpu, Launch::new((1, 1, 1), 1, 0), 50_000_000)?; // 50 ms
    let start = gpu.stream.record_event(Some(CU_EVENT_DEFAULT)).map_err(|e| anyhow!("CUDA event: {e:?}"))?;
    gpu.record_launches(true);
    let done = work();
    let events = gpu.record_launches(false);
    done?;
    gpu.sync()?;
    let mut times: Vec<KernelTime> = Vec::new();
    let mut before = &start;
    for (kernel, event) in &events {
        let micros = before.elapsed_ms(event).map_err(|e| anyhow!("CUDA event: {e:?}"))? * 1e3;
        before = event;
        match times.iter_mut().find(|t| &t.kernel == kernel) {
            Some(t) => {
                t.micros += micros;
                t.launches += 1;
            }
            None => times.push(KernelTime { kernel: kernel.clone(), micros, launches: 1 }),
        }
    }
    Ok(times)
}
