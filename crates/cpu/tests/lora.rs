//! LoRA adapters on the CPU reference against PEFT's own forward (transformers + PEFT, fp32) on
//! the tiny fixtures (`scripts/make_lora_fixtures.py`: random adapters on attention, the GDN
//! projections, the shared expert and its gate, and the fused routed experts): every position's
//! logits within 1e-4 relative error with the same argmax, through one prefill and through
//! prefill-then-decode; and against the same model with each adapter merged into its weights.

mod common;

use common::*;
use solo_cpu::CpuModel;
use solo_model::lora::{LoraAdapter, LoraPair, Target};
use solo_model::weights::{LayerWeights, Mixer};
use solo_model::{Backend, DType, Logits, Tensor};
use std::sync::Arc;

fn adapter(m: &CpuModel, name: &str) -> Arc<LoraAdapter> {
    let dir = fixture_dir("lora").join(name);
    Arc::new(LoraAdapter::load(&dir, &m.config).unwrap_or_else(|e| panic!("loading {}: {e:#}", dir.display())))
}

fn peft_reference(name: &str) -> Reference {
    reference_at(&fixture_dir("lora").join(name).join("peft_reference.safetensors"))
}

/// Prefill of the first `n` tokens (all of them when `n` is the length), then decode steps.
fn adapted_logits(m: &CpuModel, a: &Arc<LoraAdapter>, tokens: &[u32], n: usize) -> Vec<f32> {
    let mut state = m.new_state().unwrap();
    m.set_adapter(&mut state, Some(a.clone())).unwrap();
    let mut logits = m.prefill(&mut state, &tokens[..n], Logits::All).unwrap();
    for &t in &tokens[n..] {
        logits.extend(m.decode(&mut state, t).unwrap());
    }
    logits
}

fn matches_peft(name: &str) {
    let (m, r) = (model(name), peft_reference(name));
    let a = adapter(&m, name);
    let vocab = m.config.vocab_size;
    for n in [r.tokens.len(), 1, 75] {
        let logits = adapted_logits(&m, &a, &r.tokens, n);
        let worst = compare(&format!("{name} + LoRA, prefill {n} then decode"), &logits, &r.logits, vocab);
        eprintln!("{name} + LoRA: prefill {n} then decode, worst relative error {worst:.2e}");
    }
    // The adapter matters: without it the logits are HF's base model's, far from PEFT's.
    let mut state = m.new_state().unwrap();
    let base = m.prefill(&mut state, &r.tokens, Logits::All).unwrap();
    let moved = base.iter().zip(&r.logits).fold(0.0f32, |d, (x, y)| d.max((x - y).abs()));
    assert!(moved > 1.0, "{name}: the adapter moves the logits by only {moved}");
}

#[test]
fn tiny_a_adapter_matches_peft() {
    matches_peft("tiny-a");
}

#[test]
fn tiny_b_adapter_matches_peft() {
    matches_peft("tiny-b");
}

/// W + s · B A as an f32 tensor of W's shape.
fn merged(w: &Tensor, p: &LoraPair) -> Tensor {
    let (out, inner, r) = (w.shape[0], w.row_len(), p.rank());
    let (mut values, a, b) = (w.to_f32(), p.a.to_f32(), p.b.to_f32());
    for o in 0..out {
        for i in 0..inner {
            values[o * inner + i] += p.scale * (0..r).map(|k| b[o * r + k] * a[k * inner + i]).sum::<f32>();
        }
    }
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    Tensor::from_bytes(DType::F32, w.shape.clone(), &bytes)
}

/// The weight of `layer` that `target` adapts.
fn weight(layer: &mut LayerWeights, target: Target) -> &mut Tensor {
    let moe = &mut layer.moe;
    match (&mut layer.mixer, target) {
        (Mixer::FullAttention(w), Target::QProj) => &mut w.q_proj,
        (Mixer::FullAttention(w), Target::KProj) => &mut w.k_proj,
        (Mixer::FullAttention(w), Target::VProj) => &mut w.v_proj,
        (Mixer::FullAttention(w), Target::OProj) => &mut w.o_proj,
        (Mixer::GatedDeltaNet(w), Target::InProjQkv) => &mut w.in_proj_qkv,
        (Mixer::GatedDeltaNet(w), Target::InProjZ) => &mut w.in_proj_z,
        (Mixer::GatedDeltaNet(w), Target::InProjB) => &mut w.in_proj_b,
        (Mixer::GatedDeltaNet(w), Target::InProjA) => &mut w.in_proj_a,
        (Mixer::GatedDeltaNet(w), Target::OutProj) => &mut w.out_proj,
        (_, Target::Router) => &mut moe.router,
        (_, Target::SharedGate) => &mut moe.shared_expert.gate,
        (_, Target::SharedUp) => &mut moe.shared_expert.up,
        (_, Target::SharedDown) => &mut moe.shared_expert.down,
        (_, Target::SharedExpertGate) => &mut moe.shared_expert_gate,
        (_, t) => panic!("{t:?} on the wrong layer kind"),
    }
}

/// The adapter merged into the checkpoint's weights gives the adapted logits.
fn matches_merged(name: &str) {
    let (m, r) = (model(name), peft_reference(name));
    let a = adapter(&m, name);
    let mut merged_model = model(name);
    let inter = m.config.moe_intermediate_size;
    for (layer, lora) in merged_model.weights.layers.iter_mut().zip(&a.layers) {
        for (&target, p) in &lora.linears {
            let w = weight(layer, target);
            *w = merged(w, p);
        }
        for (expert, e) in layer.moe.experts.iter_mut().zip(&lora.experts) {
            if let Some(p) = &e.gate_up {
                let half = |first| LoraPair { a: p.a.clone(), b: p.b.rows(first, inter), scale: p.scale };
                expert.gate = merged(&expert.gate, &half(0));
                expert.up = merged(&expert.up, &half(inter));
            }
            if let Some(p) = &e.down {
                expert.down = merged(&expert.down, p);
            }
        }
    }
    let n = 40;
    let adapted = adapted_logits(&m, &a, &r.tokens[..n], n);
    let mut state = merged_model.new_state().unwrap();
    let plain = merged_model.prefill(&mut state, &r.tokens[..n], Logits::All).unwrap();
    let worst = compare(&format!("{name}: adapter against merged"), &adapted, &plain, m.config.vocab_size);
    eprintln!("{name}: adapter against merged weights, worst relative error {worst:.2e}");
}

#[test]
fn tiny_a_adapter_matches_merged_weights() {
    matches_merged("tiny-a");
}

#[test]
fn tiny_b_adapter_matches_merged_weights() {
    matches_merged("tiny-b");
}

/// Sequences with and without the adapter decode together: each row is its own sequence's.
#[test]
fn batched_rows_keep_their_own_adapter() {
    let (m, r) = (model("tiny-a"), peft_reference("tiny-a"));
    let a = adapter(&m, "tiny-a");
    let n = 20;
    let mut states: Vec<_> = [Some(a.clone()), None, Some(a)]
        .into_iter()
        .map(|adapter| {
            let mut s = m.new_state().unwrap();
            m.set_adapter(&mut s, adapter).unwrap();
            m.prefill(&mut s, &r.tokens[..n], Logits::None).unwrap();
            s
        })
        .collect();
    let alone: Vec<f32> = states.iter().flat_map(|s| m.decode(&mut s.clone(), r.tokens[n]).unwrap()).collect();
    let mut refs: Vec<_> = states.iter_mut().collect();
    let together = m.decode_batch(&mut refs, &[r.tokens[n]; 3]).unwrap();
    assert_eq!(alone, together);
    let vocab = m.config.vocab_size;
    compare("row 0, adapted", &together[..vocab], &r.logits[n * vocab..(n + 1) * vocab], vocab);
    assert_ne!(together[..vocab], together[vocab..2 * vocab], "the row without the adapter");
}
