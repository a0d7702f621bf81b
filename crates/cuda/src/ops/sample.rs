//! Picking the next token on the device (`argmax.cu`), and advancing the device-side position.

use crate::kernels::Source;
use crate::runtime::{Arg, DevPtr, Gpu};
use anyhow::Result;

pub const SOURCE: Source = Source {
    file: "argmax.cu",
    text: include_str!("argmax.cu"),
    functions: &["argmax_partial", "argmax_final", "advance_position"],
};

/// Blocks of the first argmax pass (matches ARGMAX_PARTS in argmax.cu).
pub const ARGMAX_PARTS: usize = 256;

/// out (i32 on the device) = argmax(logits f32 [n]). `partials` holds ARGMAX_PARTS × 8 bytes.
pub fn argmax(gpu: &Gpu, logits: DevPtr, n: usize, partials: DevPtr, out: DevPtr) -> Result<()> {
    let idx = partials + (ARGMAX_PARTS * 4) as u64;
    gpu.launch("argmax_partial", (ARGMAX_PARTS as u32, 1, 1), 256, 0, &[Arg::Ptr(logits), Arg::I32(n as i32), Arg::Ptr(partials), Arg::Ptr(idx)])?;
    gpu.launch("argmax_final", (1, 1, 1), 256, 0, &[Arg::Ptr(partials), Arg::Ptr(idx), Arg::I32(ARGMAX_PARTS as i32), Arg::Ptr(out)])
}

/// *pos += n on the device.
pub fn advance_position(gpu: &Gpu, pos: DevPtr, n: usize) -> Result<()> {
    gpu.launch("advance_position", (1, 1, 1), 1, 0, &[Arg::Ptr(pos), Arg::I32(n as i32)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testutil::*;

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn argmax_matches_cpu_including_ties() {
        let gpu = gpu();
        let n = 248_320;
        let mut v = random(9, n, 10.0);
        v[200_001] = 50.0;
        v[100_000] = 50.0; // tie: the lower index wins
        let lb = gpu.upload_f32(&v).unwrap();
        let parts = gpu.alloc(ARGMAX_PARTS * 8).unwrap();
        let out = gpu.upload_i32(&[-1]).unwrap();
        argmax(gpu, lb.ptr(), n, parts.ptr(), out.ptr()).unwrap();
        assert_eq!(gpu.download_i32(out.ptr(), 1).unwrap()[0], 100_000);
        assert_eq!(solo_model::sampler::argmax(&v), 100_000);
    }
}
