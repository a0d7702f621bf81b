//! Helpers for the GPU tests: one shared `Gpu`, seeded random data, error measures.
//! GPU tests are `#[ignore]` (CI has no GPU); on the GPU machine run the test binary with
//! `--include-ignored --test-threads=1` (README, "Tests").

use crate::runtime::Gpu;
use std::sync::OnceLock;

/// The process-wide GPU (kernels compiled once).
pub fn gpu() -> &'static Gpu {
    static GPU: OnceLock<Gpu> = OnceLock::new();
    GPU.get_or_init(|| Gpu::new().unwrap_or_else(|e| panic!("GPU tests need a GPU: {e:#}")))
}

/// Whether this target runs the FP8 kernels (sm_89 and later, not the portable forms). Where it
/// does not, an FP8 test asserts the one-line refusal instead and stops: its kernels would trap.
pub fn fp8_runs_here() -> bool {
    let gpu = gpu();
    match gpu.target.check_fp8(&gpu.name) {
        Ok(()) => true,
        Err(e) => {
            assert!(e.to_string().contains("FP8 weights need an sm_89"), "{e}");
            eprintln!("FP8 is refused on this target ({}), as it must be", gpu.target.describe());
            false
        }
    }
}

/// Seeded values uniform in [-scale, scale).
pub fn random(seed: u64, n: usize, scale: f32) -> Vec<f32> {
    let mut rng = solo_model::sampler::SplitMix(seed);
    (0..n).map(|_| scale * (2.0 * rng.next_f32() - 1.0)).collect()
}

/// Values rounded to bf16 (what the GPU sees when given bf16 inputs).
pub fn round_bf16(v: &[f32]) -> Vec<f32> {
    v.iter().map(|x| half::bf16::from_f32(*x).to_f32()).collect()
}

pub fn bf16_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| half::bf16::from_f32(*x).to_le_bytes()).collect()
}

pub fn bf16_from_bytes(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(2).map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32()).collect()
}

/// ‖a − b‖ / ‖b‖; NaN anywhere gives infinity.
pub fn rel_err(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "length mismatch");
    if a.iter().any(|x| !x.is_finite()) {
        return f32::INFINITY;
    }
    let num: f64 = a.iter().zip(b).map(|(x, y)| ((x - y) as f64).powi(2)).sum();
    let den: f64 = b.iter().map(|y| (*y as f64).powi(2)).sum();
    (num / den.max(1e-30)).sqrt() as f32
}

/// The bound of the FP8 kernels' tests: their dots round to f16 or run in the tensor cores'
/// FP8 accumulators (~5e-4 a 16-weight piece), not to f32.
pub const FP8_TOL: f32 = 1e-3;

/// Asserts a relative error bound, printing the measured error either way.
pub fn assert_close(what: &str, got: &[f32], want: &[f32], tol: f32) {
    let e = rel_err(got, want);
    eprintln!("{what}: relative error {e:.3e} (tolerance {tol:.0e})");
    assert!(e <= tol, "{what}: relative error {e:.3e} > {tol:.0e}");
}

/// The GDN decode step's causal conv + SiLU on the CPU, as the in-projection GEMVs fold it: for
/// the window `state` (f32 [3, channels], oldest first), the taps (f32 [channels, 4]) and the new
/// qkv row `v` (its first `channels` entries): (the conv's output, the window shifted by v).
pub fn conv_step_reference(state: &[f32], taps: &[f32], v: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let conv = state.len() / 3;
    let (mut mixed, mut shifted) = (vec![0.0; conv], state.to_vec());
    for r in 0..conv {
        let (s0, s1, s2) = (state[r], state[conv + r], state[2 * conv + r]);
        let c = taps[4 * r] * s0 + taps[4 * r + 1] * s1 + taps[4 * r + 2] * s2 + taps[4 * r + 3] * v[r];
        mixed[r] = solo_cpu::ops::silu(c);
        (shifted[r], shifted[conv + r], shifted[2 * conv + r]) = (s1, s2, v[r]);
    }
    (mixed, shifted)
}
