//! Mixture-of-experts block, for a normalised token x:
//!
//! ```text
//! p = softmax(W_router x)                       over the E routed experts
//! S = the k experts with the largest p;  w_e = p_e / Σ_{e' ∈ S} p_e'     (renormalised)
//! expert_e(x) = W_down,e (silu(W_gate,e x) ∘ W_up,e x)                    (SwiGLU)
//! MoE(x) = Σ_{e ∈ S} w_e expert_e(x) + σ(w_shared_gate · x) shared(x)    shared: a SwiGLU too
//! ```
//! Each product may carry a LoRA adapter's term (`crate::lora`).

use crate::lora::{linear, of, MlpLora};
use crate::ops::{sigmoid, silu, softmax};
use solo_model::lora::{LayerLora, Target};
use solo_model::weights::{ExpertWeights, MoeWeights};
use solo_model::ModelConfig;

/// x: [T, hidden] (already normalised) → [T, hidden]; `lora`: the layer's adapters, if any.
pub fn moe_forward(cfg: &ModelConfig, w: &MoeWeights, lora: Option<&LayerLora>, x: &[f32]) -> Vec<f32> {
    let hidden = cfg.hidden_size;
    let t_len = x.len() / hidden;
    let routes = route(cfg, &linear(x, &w.router, of(lora, Target::Router)));

    // Run each expert once over the tokens routed to it.
    let mut out = vec![0.0f32; x.len()];
    for (e, expert) in w.experts.iter().enumerate() {
        let picked: Vec<(usize, f32)> =
            (0..t_len).flat_map(|t| routes[t].iter().filter(|r| r.0 == e).map(move |r| (t, r.1))).collect();
        if picked.is_empty() {
            continue;
        }
        let xs: Vec<f32> = picked.iter().flat_map(|&(t, _)| x[t * hidden..(t + 1) * hidden].iter().copied()).collect();
        let ys = swiglu(expert, &MlpLora::expert(lora, e, cfg.moe_intermediate_size), &xs);
        for (row, &(t, weight)) in picked.iter().enumerate() {
            for c in 0..hidden {
                out[t * hidden + c] += weight * ys[row * hidden + c];
            }
        }
    }

    let shared = swiglu(&w.shared_expert, &MlpLora::shared(lora), x);
    let gate = linear(x, &w.shared_expert_gate, of(lora, Target::SharedExpertGate)); // [T, 1]
    for t in 0..t_len {
        let g = sigmoid(gate[t]);
        for c in 0..hidden {
            out[t * hidden + c] += g * shared[t * hidden + c];
        }
    }
    out
}

/// Per token: the top-k experts of softmax(logits) with their probabilities renormalised to sum 1.
/// logits: [T, E]. Ties go to the lower expert index.
pub fn route(cfg: &ModelConfig, logits: &[f32]) -> Vec<Vec<(usize, f32)>> {
    logits
        .chunks(cfg.num_experts)
        .map(|row| {
            let mut p = row.to_vec();
            softmax(&mut p);
            let mut order: Vec<usize> = (0..p.len()).collect();
            order.sort_by(|&a, &b| p[b].total_cmp(&p[a]).then(a.cmp(&b)));
            order.truncate(cfg.num_experts_per_tok);
            let sum: f32 = order.iter().map(|&e| p[e]).sum();
            order.into_iter().map(|e| (e, p[e] / sum)).collect()
        })
        .collect()
}

/// down(silu(gate·x) ∘ up·x) for x: [N, hidden] → [N, hidden].
pub fn swiglu(w: &ExpertWeights, lora: &MlpLora, x: &[f32]) -> Vec<f32> {
    let gate = linear(x, &w.gate, lora.gate.as_ref());
    let up = linear(x, &w.up, lora.up.as_ref());
    let act: Vec<f32> = gate.iter().zip(&up).map(|(&g, &u)| silu(g) * u).collect();
    linear(&act, &w.down, lora.down.as_ref())
}
