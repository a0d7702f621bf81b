//! MTP speculative decoding on the CPU reference: the head against its Python reference
//! (scripts/make_mtp_reference.py), verify and roll-back against plain decode steps, and the
//! generated tokens against plain decoding (greedy: the same tokens; sampling: the same
//! distribution).

mod common;

use common::*;
use solo_cpu::CpuModel;
use solo_model::sampler::{Sampler, SamplerConfig};
use solo_model::speculative::{self, Acceptance};
use solo_model::{Backend, Logits};

const FIXTURES: [&str; 3] = ["tiny-a", "tiny-b", "tiny-fp8"];

fn greedy() -> Sampler {
    Sampler::new(SamplerConfig { temperature: 0.0, top_k: 0, top_p: 1.0, seed: 0 })
}

/// The head over the whole prompt at once (catching up on 148 pairs), then one chained step.
#[test]
fn mtp_head_matches_reference_in_one_pass() {
    for name in FIXTURES {
        let (m, r, mtp) = (model(name), reference(name), mtp_reference(name));
        let vocab = m.config.vocab_size;
        let t = r.tokens.len();
        let mut state = m.new_state().unwrap();
        m.prefill(&mut state, &r.tokens[..t - 1], Logits::Last).unwrap();
        let draft = m.draft(&mut state, r.tokens[t - 1], 2, &mut greedy()).unwrap();
        compare(&format!("{name} head, last pair"), &draft.logits[..vocab], &mtp.logits[(t - 2) * vocab..], vocab);
        assert_eq!(draft.tokens[0], mtp.chain_token, "{name}: first draft");
        compare(&format!("{name} head, chained"), &draft.logits[vocab..], &mtp.chain_logits, vocab);
    }
}

/// One pair at a time, interleaved with decode steps: row p−1 of the reference at every position.
#[test]
fn mtp_head_matches_reference_step_by_step() {
    for name in FIXTURES {
        let (m, r, mtp) = (model(name), reference(name), mtp_reference(name));
        let vocab = m.config.vocab_size;
        let mut state = m.new_state().unwrap();
        m.prefill(&mut state, &r.tokens[..100], Logits::Last).unwrap();
        for p in 100..r.tokens.len() {
            let draft = m.draft(&mut state, r.tokens[p], 1, &mut greedy()).unwrap();
            compare(&format!("{name} head at {p}"), &draft.logits, &mtp.logits[(p - 1) * vocab..p * vocab], vocab);
            m.decode(&mut state, r.tokens[p]).unwrap();
        }
    }
}

/// verify = the same decode steps (bit for bit), and after keep_verified(n) the state continues
/// exactly as one that decoded only the first n tokens.
#[test]
fn verify_then_keep_equals_decoding_the_kept_tokens() {
    for name in FIXTURES {
        let (m, r) = (model(name), reference(name));
        let mut base = m.new_state().unwrap();
        m.prefill(&mut base, &r.tokens[..70], Logits::Last).unwrap();
        let tokens = &r.tokens[70..75];
        for keep in 1..=tokens.len() {
            let mut plain = base.clone();
            let mut rows = Vec::new();
            for &t in tokens {
                rows.extend(m.decode(&mut plain, t).unwrap());
            }
            let mut spec = base.clone();
            let verified = m.verify(&mut spec, tokens).unwrap();
            assert_eq!(verified, rows, "{name}: verify differs from decode steps");
            m.keep_verified(&mut spec, keep).unwrap();

            let mut kept = base.clone();
            for &t in &tokens[..keep] {
                m.decode(&mut kept, t).unwrap();
            }
            assert_eq!(spec.position, kept.position);
            let next = r.tokens[75];
            assert_eq!(m.decode(&mut spec, next).unwrap(), m.decode(&mut kept, next).unwrap(), "{name} keep {keep}");
            // The head saw the same positions too: its drafts agree.
            let (a, b) =
                (m.draft(&mut spec, 1, 2, &mut greedy()).unwrap(), m.draft(&mut kept, 1, 2, &mut greedy()).unwrap());
            assert_eq!(a.logits, b.logits, "{name} keep {keep}: drafts after the roll-back");
        }
        assert!(m.keep_verified(&mut base.clone(), 1).is_err(), "keep without a verify");
    }
}

/// Greedy generation of `n` tokens after `prompt`, plainly and with k drafts per round.
fn greedy_tokens(m: &CpuModel, prompt: &[u32], n: usize, k: usize) -> (Vec<u32>, Acceptance) {
    let mut state = m.new_state().unwrap();
    let logits = m.prefill(&mut state, prompt, Logits::Last).unwrap();
    let mut sampler = greedy();
    let mut out = vec![sampler.sample(&logits)];
    let mut acceptance = Acceptance::default();
    while out.len() < n {
        let next = *out.last().unwrap();
        if k == 0 {
            out.push(sampler.sample(&m.decode(&mut state, next).unwrap()));
        } else {
            let round = speculative::round(m, &mut state, next, k, &mut sampler).unwrap();
            acceptance.add(&round);
            out.extend(round.tokens);
        }
    }
    out.truncate(n);
    (out, acceptance)
}

#[test]
fn greedy_speculation_gives_the_plain_greedy_tokens() {
    for name in FIXTURES {
        let (m, r) = (model(name), reference(name));
        let plain = greedy_tokens(&m, &r.tokens[..40], 48, 0).0;
        for k in 1..=4 {
            let (spec, acceptance) = greedy_tokens(&m, &r.tokens[..40], 48, k);
            assert_eq!(spec, plain, "{name}, {k} drafts");
            assert!(acceptance.rounds > 0);
        }
    }
}

/// The trained demo model's head predicts its own model well: on a prompt of its corpus most
/// drafts are accepted (random heads accept almost none).
#[test]
fn trained_head_drafts_are_accepted() {
    let m = model("demo");
    // The demo was trained over tiny-a's tokenizer and chat template (they ship with it).
    let tok = solo_text::Tokenizer::from_dir(fixture_dir("tiny-a")).unwrap();
    let template = solo_text::ChatTemplate::from_dir(fixture_dir("tiny-a")).unwrap();
    let messages = serde_json::json!([{ "role": "user", "content": "Name the two colors of a chessboard." }]);
    let opts = solo_text::TemplateOptions {
        add_generation_prompt: true,
        enable_thinking: Some(false),
        preserve_thinking: None,
    };
    let prompt = tok.encode(&template.render(&messages, None, &opts).unwrap()).unwrap();
    let plain = greedy_tokens(&m, &prompt, 24, 0).0;
    let (spec, acceptance) = greedy_tokens(&m, &prompt, 24, 3);
    assert_eq!(spec, plain);
    eprintln!(
        "demo: {} of {} drafts accepted ({:.0} %), {:.2} tokens per verify",
        acceptance.accepted,
        acceptance.drafted,
        100.0 * acceptance.rate(),
        acceptance.mean_accepted_length()
    );
    assert!(acceptance.rate() > 0.4, "acceptance {:.2}", acceptance.rate());
}

/// Seeded sampling with speculation: the first two generated tokens over many seeds follow the
/// model's own distribution p(t1) · p(t2 | t1) (temperature 1, top-k 3: 9 outcomes); the bound is
/// χ²'s 99.9 % point for 8 degrees of freedom.
#[test]
fn sampled_speculation_follows_the_models_distribution() {
    let (m, r) = (model("tiny-a"), reference("tiny-a"));
    let cfg = |seed| SamplerConfig { temperature: 1.0, top_k: 3, top_p: 1.0, seed };
    let mut base = m.new_state().unwrap();
    let first = m.prefill(&mut base, &r.tokens[..30], Logits::Last).unwrap();
    // Exact probabilities of each (t1, t2).
    let mut exact = Vec::new();
    for (t1, p1) in Sampler::new(cfg(0)).distribution(&first) {
        let mut s = base.clone();
        let second = m.decode(&mut s, t1).unwrap();
        for (t2, p2) in Sampler::new(cfg(0)).distribution(&second) {
            exact.push(((t1, t2), p1 * p2));
        }
    }
    assert_eq!(exact.len(), 9);
    let runs = 1000;
    let mut counts = vec![0usize; exact.len()];
    for seed in 0..runs {
        let mut sampler = Sampler::new(cfg(seed));
        let mut state = base.clone();
        let t1 = sampler.sample(&first);
        let round = speculative::round(&m, &mut state, t1, 2, &mut sampler).unwrap();
        let pair = (t1, round.tokens[0]);
        let i = exact.iter().position(|(p, _)| *p == pair).unwrap_or_else(|| panic!("{pair:?} cannot be drawn"));
        counts[i] += 1;
    }
    let chi: f64 = exact
        .iter()
        .zip(&counts)
        .map(|((_, p), &c)| {
            let e = runs as f64 * *p as f64;
            (c as f64 - e).powi(2) / e
        })
        .sum();
    assert!(
        chi < 26.1,
        "χ² {chi:.1}: counts {counts:?}, expected {:?}",
        exact.iter().map(|(_, p)| p * runs as f32).collect::<Vec<_>>()
    );
}
