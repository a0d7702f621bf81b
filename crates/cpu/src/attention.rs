//! Gated full attention, per token x (normalised):
//!
//! ```text
//! [q_h | gate_h] = (W_q x)_h          each query head's 2d rows: its query, then its gate
//! k_j = W_k x, v_j = W_v x            kv head j serves query heads j·Hq/Hkv .. (j+1)·Hq/Hkv − 1
//! q_h, k_j ← RMSN(·; q_norm / k_norm) over the head's d dims, then RoPE on their first R dims
//! o_h = Σ_{p ≤ t} softmax_p(q_h · k_p / √d) v_p        causal, over the cache and the new tokens
//! out = W_o (o ∘ σ(gate))
//! ```
//! RoPE is NeoX-style: dims i and i + R/2 rotate together by position · θ^(−2i/R).
//!
//! Notation: Hq/Hkv query/kv heads, d = head_dim, R = rotary dims, T new tokens, P cached tokens.

use crate::lora::{linear, of};
use crate::ops::{dot, rms_norm_one_plus, sigmoid, softmax};
use rayon::prelude::*;
use solo_model::lora::{LayerLora, Target};
use solo_model::weights::AttentionWeights;
use solo_model::ModelConfig;

/// An attention layer's memory: keys (after norm and RoPE) and values of every position so far.
#[derive(Clone, Debug, Default)]
pub struct KvCache {
    /// [P, Hkv, d]
    pub keys: Vec<f32>,
    /// [P, Hkv, d]
    pub values: Vec<f32>,
}

impl KvCache {
    /// Keeps the first `positions` positions.
    pub fn truncate(&mut self, positions: usize, cfg: &ModelConfig) {
        let n = positions * cfg.num_key_value_heads * cfg.head_dim;
        self.keys.truncate(n);
        self.values.truncate(n);
    }
}

/// x: [T, hidden] (already normalised) of text tokens at positions `start..start+T` → [T, hidden];
/// `lora`: the layer's adapters, if any (`crate::lora`).
pub fn attention_forward(
    cfg: &ModelConfig,
    w: &AttentionWeights,
    lora: Option<&LayerLora>,
    x: &[f32],
    start: usize,
    cache: &mut KvCache,
) -> Vec<f32> {
    let t_len = x.len() / cfg.hidden_size;
    let positions: Vec<[usize; 3]> = (start..start + t_len).map(|p| [p; 3]).collect();
    attention_forward_at(cfg, w, lora, x, &positions, cache)
}

/// `attention_forward` with each token's rotary position (temporal, height, width): a text
/// token's three are equal, an image token's are its place in the image (`crate::model`).
/// Causality is by order in the cache, not by position.
pub fn attention_forward_at(
    cfg: &ModelConfig,
    w: &AttentionWeights,
    lora: Option<&LayerLora>,
    x: &[f32],
    positions: &[[usize; 3]],
    cache: &mut KvCache,
) -> Vec<f32> {
    let (hq, hkv, d) = (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim);
    let eps = cfg.rms_norm_eps;

    // q_proj rows are per head [d query | d gate] (not all queries then all gates), so split each 2d-wide head.
    let qg = linear(x, &w.q_proj, of(lora, Target::QProj)); // [T, Hq, 2d]
    let t_len = qg.len() / (hq * 2 * d);
    let mut q = Vec::with_capacity(t_len * hq * d); // [T, Hq, d]
    let mut gate = Vec::with_capacity(t_len * hq * d); // [T, Hq, d]
    for head in qg.chunks(2 * d) {
        q.extend_from_slice(&head[..d]);
        gate.extend_from_slice(&head[d..]);
    }
    let mut q = rms_norm_one_plus(&q, &w.q_norm.to_f32(), eps);
    let mut k = rms_norm_one_plus(&linear(x, &w.k_proj, of(lora, Target::KProj)), &w.k_norm.to_f32(), eps); // [T, Hkv, d]
    let v = linear(x, &w.v_proj, of(lora, Target::VProj)); // [T, Hkv, d]

    assert_eq!(positions.len(), t_len, "one position per token");
    let rope = Rope::new(cfg);
    for t in 0..t_len {
        for head in q[t * hq * d..(t + 1) * hq * d].chunks_mut(d) {
            rope.apply(head, positions[t]);
        }
        for head in k[t * hkv * d..(t + 1) * hkv * d].chunks_mut(d) {
            rope.apply(head, positions[t]);
        }
    }
    // Tokens already in the cache come first.
    let start = cache.keys.len() / (hkv * d);
    cache.keys.extend_from_slice(&k);
    cache.values.extend_from_slice(&v);

    // Causal attention: token t sees cached positions 0..=start+t. Query head h reads kv head h / (Hq/Hkv).
    let group = hq / hkv;
    let scale = 1.0 / (d as f32).sqrt();
    let mut o = vec![0.0f32; t_len * hq * d]; // [T, Hq, d]
    o.par_chunks_mut(d).enumerate().for_each(|(i, out)| {
        let (t, h) = (i / hq, i % hq);
        let kv = h / group;
        let qh = &q[i * d..(i + 1) * d];
        let visible = start + t + 1;
        let mut p: Vec<f32> = (0..visible).map(|s| dot(qh, &cache.keys[(s * hkv + kv) * d..][..d]) * scale).collect();
        softmax(&mut p);
        for (s, ps) in p.iter().enumerate() {
            let vs = &cache.values[(s * hkv + kv) * d..][..d];
            for c in 0..d {
                out[c] += ps * vs[c];
            }
        }
    });
    for (oi, gi) in o.iter_mut().zip(&gate) {
        *oi *= sigmoid(*gi);
    }
    linear(&o, &w.o_proj, of(lora, Target::OProj))
}

/// Rotates one head (`head_dim` values) for `position`, exactly as `attention_forward` does to
/// q and k after their norms. Exposed for the GPU kernels' tests.
pub fn apply_rope(cfg: &ModelConfig, head: &mut [f32], position: usize) {
    apply_mrope(cfg, head, [position; 3]);
}

/// `apply_rope` at multimodal positions (temporal, height, width).
pub fn apply_mrope(cfg: &ModelConfig, head: &mut [f32], position: [usize; 3]) {
    Rope::new(cfg).apply(head, position);
}

/// NeoX-style rotary embedding on the first R dims of a head: pairs (i, i + R/2), the multimodal
/// form: frequency i turns by the position on its axis (`ModelConfig::mrope_axis`, interleaved
/// T/H/W). A text token's three positions are equal, where this is plain 1-D RoPE.
struct Rope {
    /// [R/2] inverse frequencies θ^(−2i/R), computed in f32 like HF.
    inv_freq: Vec<f32>,
    /// [R/2] the axis each frequency reads.
    axis: Vec<usize>,
}

impl Rope {
    fn new(cfg: &ModelConfig) -> Self {
        let r = cfg.rotary_dim();
        let inv_freq = (0..r / 2).map(|i| (1.0 / cfg.rope_theta.powf((2 * i) as f64 / r as f64)) as f32).collect();
        let axis = (0..r / 2).map(|i| cfg.mrope_axis(i)).collect();
        Rope { inv_freq, axis }
    }

    fn apply(&self, head: &mut [f32], position: [usize; 3]) {
        let half = self.inv_freq.len();
        for (i, f) in self.inv_freq.iter().enumerate() {
            let angle = position[self.axis[i]] as f32 * f;
            let (sin, cos) = angle.sin_cos();
            let (a, b) = (head[i], head[i + half]);
            head[i] = a * cos - b * sin;
            head[i + half] = b * cos + a * sin;
        }
    }
}
