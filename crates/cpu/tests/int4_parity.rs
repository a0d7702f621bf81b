//! The CPU reference on 4-bit checkpoints (scripts/make_int4_fixtures.py): GPTQ (symmetric; act-order
//! asymmetric v1), AWQ and compressed-tensors, repacked at load into solo's int4 layout, against
//! HF transformers in fp32 on the dequantised weights: every position's logits within 1e-4
//! relative error with the same argmax, for one prefill and for prefill-then-decode.

mod common;

use common::*;
use solo_model::{Backend, Logits, Precision};

const FIXTURES: [(&str, Precision); 4] = [
    ("tiny-a-gptq", Precision::Int4 { group: 16 }),
    ("tiny-b-gptq-actorder", Precision::Int4 { group: 8 }),
    ("tiny-a-awq", Precision::Int4 { group: 16 }),
    ("tiny-b-ct", Precision::Int4 { group: 8 }),
];

/// One prefill of all tokens, then prefill of `n` and one decode step per remaining token.
fn check(name: &str, precision: Precision, n: usize) {
    let (m, r) = (model(name), reference(name));
    assert_eq!(m.config.precision, precision, "{name}");
    let vocab = m.config.vocab_size;
    let mut state = m.new_state().unwrap();
    let logits = m.prefill(&mut state, &r.tokens, Logits::All).unwrap();
    let worst = compare(&format!("{name} prefill"), &logits, &r.logits, vocab);
    eprintln!("{name}: one prefill of {} tokens, worst relative error {worst:.2e}", r.tokens.len());

    let mut state = m.new_state().unwrap();
    let mut logits = m.prefill(&mut state, &r.tokens[..n], Logits::All).unwrap();
    for &t in &r.tokens[n..] {
        logits.extend(m.decode(&mut state, t).unwrap());
    }
    let worst = compare(&format!("{name} prefill {n} + decode"), &logits, &r.logits, vocab);
    eprintln!("{name}: prefill {n} then decode, worst relative error {worst:.2e}");
}

#[test]
fn gptq_symmetric_experts_only_matches_hf() {
    check(FIXTURES[0].0, FIXTURES[0].1, 65);
}

#[test]
fn gptq_act_order_asymmetric_all_linear_matches_hf() {
    check(FIXTURES[1].0, FIXTURES[1].1, 64);
}

#[test]
fn awq_asymmetric_all_linear_matches_hf() {
    check(FIXTURES[2].0, FIXTURES[2].1, 1);
}

#[test]
fn compressed_tensors_symmetric_experts_only_matches_hf() {
    check(FIXTURES[3].0, FIXTURES[3].1, 75);
}
