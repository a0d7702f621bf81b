//! LoRA on the CPU reference: an adapted weight W computes
//!
//! ```text
//! y = W x + s · B (A x)          A: [r, in], B: [out, r], s = α / r (rsLoRA: α / √r)
//! ```
//!
//! the low-rank term computed beside the product, never merged into W (so one set of weights
//! serves every adapter). The routed experts' fused gate_up adapter shares A between the gate
//! and the up projection: B's first I rows adapt the gate, the rest the up projection.

use crate::ops::matmul;
use solo_model::lora::{LayerLora, LoraPair, Target};
use solo_model::Tensor;

/// `y[T, out] = x[T, in] · Wᵀ`, plus the adapter's term when there is one.
pub fn linear(x: &[f32], w: &Tensor, lora: Option<&LoraPair>) -> Vec<f32> {
    let mut y = matmul(x, w);
    if let Some(p) = lora {
        let low = matmul(&matmul(x, &p.a), &p.b); // [T, out]
        for (yi, d) in y.iter_mut().zip(low) {
            *yi += p.scale * d;
        }
    }
    y
}

/// The layer's pair for `target`, when the layer is adapted there.
pub fn of(lora: Option<&LayerLora>, target: Target) -> Option<&LoraPair> {
    lora.and_then(|l| l.get(target))
}

/// The adapters of one SwiGLU MLP (a routed expert or the shared one).
#[derive(Default)]
pub struct MlpLora {
    pub gate: Option<LoraPair>,
    pub up: Option<LoraPair>,
    pub down: Option<LoraPair>,
}

impl MlpLora {
    /// The shared expert's adapters of `lora`.
    pub fn shared(lora: Option<&LayerLora>) -> MlpLora {
        let get = |t| of(lora, t).cloned();
        MlpLora { gate: get(Target::SharedGate), up: get(Target::SharedUp), down: get(Target::SharedDown) }
    }

    /// Routed expert `e`'s adapters of `lora` (width `inter`): the fused gate_up pair split by B's rows.
    pub fn expert(lora: Option<&LayerLora>, e: usize, inter: usize) -> MlpLora {
        let Some(expert) = lora.and_then(|l| l.expert(e)) else { return MlpLora::default() };
        let half = |p: &LoraPair, first: usize| LoraPair { a: p.a.clone(), b: p.b.rows(first, inter), scale: p.scale };
        MlpLora {
            gate: expert.gate_up.as_ref().map(|p| half(p, 0)),
            up: expert.gate_up.as_ref().map(|p| half(p, inter)),
            down: expert.down.clone(),
        }
    }
}
