//! The CPU reference against Hugging Face transformers (fp32) on the tiny fixtures: every
//! position's logits within 1e-4 relative error with the same argmax, for one prefill of the whole
//! sequence and for prefill-then-decode from several boundaries.
//!
//! Relative error of a row = max|solo − hf| / max|hf|.

mod common;

use common::*;
use solo_model::{Backend, Logits};

fn prefill_all(name: &str) {
    let (m, r) = (model(name), reference(name));
    let vocab = m.config.vocab_size;
    let mut state = m.new_state().unwrap();
    let logits = m.prefill(&mut state, &r.tokens, Logits::All).unwrap();
    let worst = compare(&format!("{name} prefill"), &logits, &r.logits, vocab);
    eprintln!("{name}: one prefill of {} tokens, worst relative error {worst:.2e}", r.tokens.len());
}

/// Prefill of the first `n` tokens, then one decode step per remaining token.
fn prefill_then_decode(name: &str, boundaries: &[usize]) {
    let (m, r) = (model(name), reference(name));
    let vocab = m.config.vocab_size;
    for &n in boundaries {
        let mut state = m.new_state().unwrap();
        let mut logits = m.prefill(&mut state, &r.tokens[..n], Logits::All).unwrap();
        for &t in &r.tokens[n..] {
            logits.extend(m.decode(&mut state, t).unwrap());
        }
        assert_eq!(state.position, r.tokens.len());
        let worst = compare(&format!("{name} prefill {n} + decode"), &logits, &r.logits, vocab);
        eprintln!("{name}: prefill {n} then decode, worst relative error {worst:.2e}");
    }
}

#[test]
fn tiny_a_prefill_matches_hf() {
    prefill_all("tiny-a");
}

#[test]
fn tiny_b_prefill_matches_hf() {
    prefill_all("tiny-b");
}

// Boundaries: a single token, exactly one GDN chunk (64), one past it, and the middle.
#[test]
fn tiny_a_prefill_then_decode_matches_hf() {
    prefill_then_decode("tiny-a", &[1, 64, 65, 75]);
}

#[test]
fn tiny_b_prefill_then_decode_matches_hf() {
    prefill_then_decode("tiny-b", &[1, 64, 65, 75]);
}

/// The FP8 checkpoint (e4m3 weights, 128×128 block scales, dims not multiples of 128) against HF
/// in fp32 on its dequantised weights.
#[test]
fn tiny_fp8_prefill_matches_hf() {
    prefill_all("tiny-fp8");
}

#[test]
fn tiny_fp8_prefill_then_decode_matches_hf() {
    prefill_then_decode("tiny-fp8", &[1, 64, 65, 75]);
}

/// Prefill in uneven pieces (state carried across prefill calls: conv windows, chunk offsets,
/// KV positions) equals one prefill.
#[test]
fn chunked_prefill_calls_match_hf() {
    let (m, r) = (model("tiny-b"), reference("tiny-b"));
    let mut state = m.new_state().unwrap();
    let mut logits = Vec::new();
    for piece in [&r.tokens[..10], &r.tokens[10..100], &r.tokens[100..]] {
        logits.extend(m.prefill(&mut state, piece, Logits::All).unwrap());
    }
    compare("tiny-b prefill in 3 calls", &logits, &r.logits, m.config.vocab_size);
}

/// Logits::Last returns the last row of Logits::All.
#[test]
fn last_logits_is_last_row() {
    let (m, r) = (model("tiny-a"), reference("tiny-a"));
    let vocab = m.config.vocab_size;
    let mut state = m.new_state().unwrap();
    let last = m.prefill(&mut state, &r.tokens[..20], Logits::Last).unwrap();
    assert_eq!(last.len(), vocab);
    compare("tiny-a last row", &last, &r.logits[19 * vocab..20 * vocab], vocab);
}

#[test]
fn out_of_range_token_is_an_error() {
    let m = model("tiny-a");
    let mut state = m.new_state().unwrap();
    let err = m.prefill(&mut state, &[1, 512], Logits::All).unwrap_err();
    assert!(format!("{err:#}").contains("512"), "{err:#}");
    assert_eq!(state.position, 0, "a refused prefill must not advance the state");
}
