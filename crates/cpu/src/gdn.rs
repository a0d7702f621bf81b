//! Gated DeltaNet mixer, per token x (normalised):
//!
//! ```text
//! [q | k | v] = silu(causal depthwise conv over time (kernel K) of W_qkv x)
//! z = W_z x,  β = σ(W_b x),  g = −exp(A_log) · softplus(W_a x + dt_bias)      per value head
//! q ← q / ‖q‖ / √dk,  k ← k / ‖k‖                                             per key head
//! S ← e^g S;  S ← S + k ⊗ β (v − Sᵀk);  o = Sᵀ q                              the delta rule
//! out = W_out (RMSNorm(o) · w ∘ silu(z))          gated norm, per value head, plain w
//! ```
//!
//! Notation: Hk/Hv key/value heads, dk/dv their head dims, K the conv kernel, T tokens.
//! Value head j reads key head j / (Hv/Hk): consecutive value heads share a key head
//! (interleaved, not tiled).

use crate::lora::{linear, of};
use crate::ops::{inv_rms, sigmoid, silu, softplus};
use rayon::prelude::*;
use solo_model::lora::{LayerLora, Target};
use solo_model::weights::GdnWeights;
use solo_model::ModelConfig;

/// Chunk length of the chunked prefill (HF and FLA use 64).
pub const CHUNK: usize = 64;

/// A GDN layer's memory of the sequence.
#[derive(Clone, Debug)]
pub struct GdnState {
    /// [K-1, conv_dim]: the last K-1 pre-conv qkv rows, oldest first (zeros for a fresh sequence).
    pub conv: Vec<f32>,
    /// [Hv, dk, dv] in f32: S per value head, S[r][c] maps key dim r to value dim c.
    pub recurrent: Vec<f32>,
}

impl GdnState {
    pub fn new(cfg: &ModelConfig) -> Self {
        GdnState {
            conv: vec![0.0; (cfg.linear_conv_kernel_dim - 1) * cfg.gdn_conv_dim()],
            recurrent: vec![0.0; cfg.linear_num_value_heads * cfg.linear_key_head_dim * cfg.linear_value_head_dim],
        }
    }
}

/// How the delta rule runs over the tokens: both give the same function (tested).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeltaRule {
    /// Token by token (decode).
    Recurrent,
    /// In chunks of `CHUNK` tokens, parallel within a chunk (prefill).
    Chunked,
}

/// x: [T, hidden] (already normalised) → [T, hidden]. Advances `state` by T tokens. `lora`: the
/// layer's adapters, if any (`crate::lora`).
pub fn gdn_forward(
    cfg: &ModelConfig,
    w: &GdnWeights,
    lora: Option<&LayerLora>,
    x: &[f32],
    state: &mut GdnState,
    rule: DeltaRule,
) -> Vec<f32> {
    let (hk, hv) = (cfg.linear_num_key_heads, cfg.linear_num_value_heads);
    let (dk, dv) = (cfg.linear_key_head_dim, cfg.linear_value_head_dim);
    let conv_dim = cfg.gdn_conv_dim();

    let qkv = linear(x, &w.in_proj_qkv, of(lora, Target::InProjQkv)); // [T, conv_dim] = [q Hk·dk | k Hk·dk | v Hv·dv]
    let z = linear(x, &w.in_proj_z, of(lora, Target::InProjZ)); // [T, Hv·dv]
    let b = linear(x, &w.in_proj_b, of(lora, Target::InProjB)); // [T, Hv]
    let a = linear(x, &w.in_proj_a, of(lora, Target::InProjA)); // [T, Hv]
    let t_len = qkv.len() / conv_dim;

    let mixed = causal_conv_silu(&qkv, &mut state.conv, &w.conv1d.to_f32(), conv_dim);

    // Per-token gates, f32: beta = σ(b), g = −exp(A_log) · softplus(a + dt_bias) ≤ 0.
    let (a_log, dt_bias) = (w.a_log.to_f32(), w.dt_bias.to_f32());
    let beta: Vec<f32> = b.iter().map(|&v| sigmoid(v)).collect();
    let g: Vec<f32> =
        a.iter().enumerate().map(|(i, &v)| -a_log[i % hv].exp() * softplus(v + dt_bias[i % hv])).collect();

    // Split the conv output into per-head rows; q, k are l2-normalised and q is scaled by 1/√dk.
    let key_dim = hk * dk;
    let head_rows = |offset: usize, d: usize, h: usize| -> Vec<f32> {
        (0..t_len)
            .flat_map(|t| {
                let s = t * conv_dim + offset + h * d;
                mixed[s..s + d].iter().copied()
            })
            .collect()
    };
    let q_scale = 1.0 / (dk as f32).sqrt();
    let q_heads: Vec<Vec<f32>> = (0..hk).map(|h| l2_normalize(head_rows(0, dk, h), dk, q_scale)).collect();
    let k_heads: Vec<Vec<f32>> = (0..hk).map(|h| l2_normalize(head_rows(key_dim, dk, h), dk, 1.0)).collect();

    // The delta rule per value head, heads in parallel. o: [Hv][T, dv].
    let group = hv / hk;
    let per_head: Vec<Vec<f32>> = state
        .recurrent
        .par_chunks_mut(dk * dv)
        .enumerate()
        .map(|(h, s)| {
            let v = head_rows(2 * key_dim, dv, h);
            let g_h: Vec<f32> = (0..t_len).map(|t| g[t * hv + h]).collect();
            let beta_h: Vec<f32> = (0..t_len).map(|t| beta[t * hv + h]).collect();
            let heads =
                HeadInputs { q: &q_heads[h / group], k: &k_heads[h / group], v: &v, g: &g_h, beta: &beta_h, dk, dv };
            match rule {
                DeltaRule::Recurrent => delta_rule_recurrent(&heads, s),
                DeltaRule::Chunked => delta_rule_chunked(&heads, s),
            }
        })
        .collect();

    // Gated RMSNorm per head (plain weight), then out_proj. o: [T, Hv·dv].
    let norm_w = w.norm.to_f32();
    let mut o = vec![0.0f32; t_len * hv * dv];
    for t in 0..t_len {
        for (h, head_out) in per_head.iter().enumerate() {
            let src = &head_out[t * dv..(t + 1) * dv];
            let at = (t * hv + h) * dv;
            let inv = inv_rms(src, cfg.rms_norm_eps);
            for c in 0..dv {
                o[at + c] = norm_w[c] * (src[c] * inv) * silu(z[at + c]);
            }
        }
    }
    linear(&o, &w.out_proj, of(lora, Target::OutProj))
}

/// Depthwise causal conv over time then SiLU. `qkv`: [T, C]; `window`: [K-1, C] pre-conv rows
/// before this chunk, replaced by the last K-1 rows of [window; qkv]; `weight`: [C, K].
pub fn causal_conv_silu(qkv: &[f32], window: &mut Vec<f32>, weight: &[f32], channels: usize) -> Vec<f32> {
    let kernel = weight.len() / channels;
    let history = kernel - 1;
    // rows: [K-1 + T, C]
    let mut rows = std::mem::take(window);
    rows.extend_from_slice(qkv);
    let t_len = qkv.len() / channels;
    let mut out = vec![0.0f32; qkv.len()];
    for t in 0..t_len {
        for c in 0..channels {
            let acc: f32 = (0..kernel).map(|j| weight[c * kernel + j] * rows[(t + j) * channels + c]).sum();
            out[t * channels + c] = silu(acc);
        }
    }
    *window = rows[t_len * channels..].to_vec();
    debug_assert_eq!(window.len(), history * channels);
    out
}

/// `x · rsqrt(Σx² + 1e-6) · scale` per row of width `d` (eps inside the sum, as FLA).
pub fn l2_normalize(mut x: Vec<f32>, d: usize, scale: f32) -> Vec<f32> {
    for row in x.chunks_mut(d) {
        let inv = 1.0 / (row.iter().map(|v| v * v).sum::<f32>() + 1e-6).sqrt();
        row.iter_mut().for_each(|v| *v *= inv * scale);
    }
    x
}

/// One value head's inputs over T tokens.
pub struct HeadInputs<'a> {
    /// [T, dk], normalised and scaled
    pub q: &'a [f32],
    /// [T, dk], normalised
    pub k: &'a [f32],
    /// [T, dv]
    pub v: &'a [f32],
    /// [T] log decay (≤ 0)
    pub g: &'a [f32],
    /// [T]
    pub beta: &'a [f32],
    pub dk: usize,
    pub dv: usize,
}

/// The delta rule token by token: S ← e^g S, then S += k ⊗ β (v − Sᵀk), o = Sᵀq. `s`: [dk, dv],
/// updated. Returns o: [T, dv].
pub fn delta_rule_recurrent(x: &HeadInputs, s: &mut [f32]) -> Vec<f32> {
    let (dk, dv) = (x.dk, x.dv);
    let t_len = x.g.len();
    let mut out = vec![0.0f32; t_len * dv];
    let mut u = vec![0.0f32; dv];
    for t in 0..t_len {
        let (q, k, v) = (&x.q[t * dk..][..dk], &x.k[t * dk..][..dk], &x.v[t * dv..][..dv]);
        let decay = x.g[t].exp();
        s.iter_mut().for_each(|e| *e *= decay);
        // u = β (v − Sᵀk)
        for c in 0..dv {
            let sk: f32 = (0..dk).map(|r| s[r * dv + c] * k[r]).sum();
            u[c] = x.beta[t] * (v[c] - sk);
        }
        // S += k ⊗ u
        for r in 0..dk {
            for c in 0..dv {
                s[r * dv + c] += k[r] * u[c];
            }
        }
        // o = Sᵀq
        for c in 0..dv {
            out[t * dv + c] = (0..dk).map(|r| s[r * dv + c] * q[r]).sum();
        }
    }
    out
}

/// The delta rule in chunks (the WY/UT form: the same S and o, summed in another order). Same
/// contract as the recurrent one.
///
/// Within a chunk, γ is the cumulative log decay and D_ij = exp(γ_i − γ_j) for j ≤ i:
///   A = strict_lower(diag(β) K Kᵀ ∘ D),  U = (I + A)⁻¹ (β ∘ V),  W = (I + A)⁻¹ (β e^γ ∘ K)
///   Vn = U − W S,   O = (Q ∘ e^γ) S + ((Q Kᵀ) ∘ D) Vn,   S ← e^{γ_L} S + (K ∘ e^{γ_L − γ})ᵀ Vn
pub fn delta_rule_chunked(x: &HeadInputs, s: &mut [f32]) -> Vec<f32> {
    let (dk, dv) = (x.dk, x.dv);
    let t_len = x.g.len();
    let mut out = vec![0.0f32; t_len * dv];
    for start in (0..t_len).step_by(CHUNK) {
        let len = CHUNK.min(t_len - start);
        let k = |i: usize| &x.k[(start + i) * dk..][..dk];
        let q = |i: usize| &x.q[(start + i) * dk..][..dk];
        let beta = |i: usize| x.beta[start + i];

        let gamma: Vec<f32> = x.g[start..start + len]
            .iter()
            .scan(0.0f32, |acc, g| {
                *acc += g;
                Some(*acc)
            })
            .collect();
        let decay = |i: usize, j: usize| (gamma[i] - gamma[j]).exp();

        // Forward substitution for U [len, dv] and W [len, dk]: row i subtracts Σ_{j<i} A_ij row j.
        let mut u = vec![0.0f32; len * dv];
        let mut wk = vec![0.0f32; len * dk];
        for i in 0..len {
            for c in 0..dv {
                u[i * dv + c] = beta(i) * x.v[(start + i) * dv + c];
            }
            let scale = beta(i) * gamma[i].exp();
            for r in 0..dk {
                wk[i * dk + r] = scale * k(i)[r];
            }
            for j in 0..i {
                let a_ij = beta(i) * crate::ops::dot(k(i), k(j)) * decay(i, j);
                for c in 0..dv {
                    u[i * dv + c] -= a_ij * u[j * dv + c];
                }
                for r in 0..dk {
                    wk[i * dk + r] -= a_ij * wk[j * dk + r];
                }
            }
        }

        // Vn = U − W S  [len, dv]
        let mut vn = u;
        for i in 0..len {
            for r in 0..dk {
                let w_ir = wk[i * dk + r];
                for c in 0..dv {
                    vn[i * dv + c] -= w_ir * s[r * dv + c];
                }
            }
        }

        // O_i = e^{γ_i} q_i S + Σ_{j≤i} (q_i·k_j) D_ij Vn_j
        for i in 0..len {
            let o = &mut out[(start + i) * dv..][..dv];
            let gi = gamma[i].exp();
            for r in 0..dk {
                let qr = q(i)[r] * gi;
                for c in 0..dv {
                    o[c] += qr * s[r * dv + c];
                }
            }
            for j in 0..=i {
                let coef = crate::ops::dot(q(i), k(j)) * decay(i, j);
                for c in 0..dv {
                    o[c] += coef * vn[j * dv + c];
                }
            }
        }

        // S ← e^{γ_L} S + Σ_j e^{γ_L − γ_j} k_j ⊗ Vn_j
        let last = len - 1;
        let total = gamma[last].exp();
        s.iter_mut().for_each(|e| *e *= total);
        for j in 0..len {
            let dj = decay(last, j);
            for r in 0..dk {
                let kr = k(j)[r] * dj;
                for c in 0..dv {
                    s[r * dv + c] += kr * vn[j * dv + c];
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic pseudo-random numbers in [-1, 1) (xorshift), so tests need no extra crate.
    fn noise(seed: u64, n: usize) -> Vec<f32> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 40) as f32 / (1u64 << 23) as f32 - 1.0
            })
            .collect()
    }

    fn unit_rows(mut x: Vec<f32>, d: usize) -> Vec<f32> {
        for r in x.chunks_mut(d) {
            let n = r.iter().map(|v| v * v).sum::<f32>().sqrt();
            r.iter_mut().for_each(|v| *v /= n);
        }
        x
    }

    /// Chunked = recurrent over several chunk boundaries, a ragged tail, a non-zero start state,
    /// fast and slow decays, and dk ≠ dv.
    #[test]
    fn chunked_delta_rule_equals_recurrence() {
        for &(t_len, dk, dv) in &[(1, 8, 8), (64, 16, 12), (150, 16, 24), (129, 12, 8)] {
            let q = unit_rows(noise(1, t_len * dk), dk);
            let k = unit_rows(noise(2, t_len * dk), dk);
            let v = noise(3, t_len * dv);
            let g: Vec<f32> = noise(4, t_len).iter().map(|r| -2.0 * (r + 1.0) - 0.01).collect();
            let beta: Vec<f32> = noise(5, t_len).iter().map(|r| 0.5 + 0.5 * r).collect();
            let start = noise(6, dk * dv);
            let x = HeadInputs { q: &q, k: &k, v: &v, g: &g, beta: &beta, dk, dv };
            let (mut s_rec, mut s_chunk) = (start.clone(), start.clone());
            let o_rec = delta_rule_recurrent(&x, &mut s_rec);
            let o_chunk = delta_rule_chunked(&x, &mut s_chunk);
            let max_err = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max);
            assert!(max_err(&o_rec, &o_chunk) < 1e-4, "T={t_len}: outputs differ by {}", max_err(&o_rec, &o_chunk));
            assert!(max_err(&s_rec, &s_chunk) < 1e-4, "T={t_len}: states differ by {}", max_err(&s_rec, &s_chunk));
        }
    }

    #[test]
    fn conv_window_carries_across_calls() {
        // Two channels, kernel 3: conv of a split sequence equals conv of the whole.
        let weight = noise(7, 2 * 3);
        let seq = noise(8, 2 * 7);
        let mut whole_state = vec![0.0; 2 * 2];
        let whole = causal_conv_silu(&seq, &mut whole_state, &weight, 2);
        let mut split_state = vec![0.0; 2 * 2];
        let mut split = causal_conv_silu(&seq[..2 * 4], &mut split_state, &weight, 2);
        split.extend(causal_conv_silu(&seq[2 * 4..], &mut split_state, &weight, 2));
        assert_eq!(whole, split);
        assert_eq!(whole_state, seq[2 * 5..].to_vec());
    }
}
