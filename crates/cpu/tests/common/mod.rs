//! Fixtures and comparisons shared by the CPU reference's tests.
#![allow(dead_code)] // each test file uses its part

use safetensors::{Dtype, SafeTensors};
use solo_cpu::CpuModel;
use std::path::PathBuf;

pub const MAX_REL_ERR: f32 = 1e-4;

pub fn fixture_dir(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures")).join(name)
}

/// HF's reference: the token sequence and its fp32 logits [T, vocab].
pub struct Reference {
    pub tokens: Vec<u32>,
    pub logits: Vec<f32>,
}

pub fn reference(name: &str) -> Reference {
    reference_at(&fixture_dir(name).join("hf_reference.safetensors"))
}

/// A reference file of that layout (`tokens`, `logits`) at `path`.
pub fn reference_at(path: &std::path::Path) -> Reference {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("missing fixture {}: {e}", path.display()));
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let tokens = st.tensor("tokens").unwrap();
    let tokens: Vec<u32> = match tokens.dtype() {
        Dtype::I64 => tokens.data().chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap()) as u32).collect(),
        Dtype::I32 => tokens.data().chunks_exact(4).map(|b| i32::from_le_bytes(b.try_into().unwrap()) as u32).collect(),
        other => panic!("tokens have dtype {other:?}"),
    };
    let logits = st.tensor("logits").unwrap();
    assert_eq!(logits.dtype(), Dtype::F32);
    let logits = logits.data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
    Reference { tokens, logits }
}

pub fn model(name: &str) -> CpuModel {
    solo_cpu::load(&fixture_dir(name)).unwrap_or_else(|e| panic!("loading {name}: {e:#}"))
}

pub fn argmax(v: &[f32]) -> usize {
    (0..v.len()).fold(0, |best, i| if v[i] > v[best] { i } else { best })
}

/// Checks every row; returns the worst relative error.
pub fn compare(what: &str, ours: &[f32], hf: &[f32], vocab: usize) -> f32 {
    assert_eq!(ours.len(), hf.len(), "{what}: row count");
    let mut worst = 0.0f32;
    for (pos, (a, b)) in ours.chunks(vocab).zip(hf.chunks(vocab)).enumerate() {
        let scale = b.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let err = a.iter().zip(b).fold(0.0f32, |m, (x, y)| m.max((x - y).abs())) / scale;
        assert!(err <= MAX_REL_ERR, "{what}: position {pos} relative error {err:.3e}");
        assert_eq!(argmax(a), argmax(b), "{what}: position {pos} argmax differs");
        worst = worst.max(err);
    }
    worst
}

/// The MTP head's reference (scripts/make_mtp_reference.py) for the fixture's token sequence.
pub struct MtpReference {
    /// [T-1, vocab]: row t is the head's logits for the pair (h_t, token t+1).
    pub logits: Vec<f32>,
    /// The argmax of the last row, and the chained draft's logits [vocab] after it.
    pub chain_token: u32,
    pub chain_logits: Vec<f32>,
}

pub fn mtp_reference(name: &str) -> MtpReference {
    let path = fixture_dir(name).join("mtp_reference.safetensors");
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("missing fixture {}: {e}", path.display()));
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let f32s = |key: &str| -> Vec<f32> {
        let t = st.tensor(key).unwrap();
        assert_eq!(t.dtype(), Dtype::F32, "{key}");
        t.data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
    };
    let token = st.tensor("chain_token").unwrap();
    assert_eq!(token.dtype(), Dtype::I64);
    let chain_token = i64::from_le_bytes(token.data()[..8].try_into().unwrap()) as u32;
    MtpReference { logits: f32s("logits"), chain_token, chain_logits: f32s("chain_logits") }
}
