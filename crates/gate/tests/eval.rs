//! The held-out corpus (crates/gate/tests/corpus/heldout.jsonl, made by
//! scripts/gate/make_corpus.py with seed 2; the detectors were tuned on other seeds) meets the
//! targets: structured types recall ≥ 0.99 and precision ≥ 0.97, benign documents flagged
//! ≤ 1 %, every repeat of a found value caught. Names and addresses are reported, not gated.
//!
//! The topic corpus (topics_heldout.jsonl, made by scripts/gate/make_topic_corpus.py from the
//! held-out half of its templates and words; the lexicon was tuned on topics_dev.jsonl, the other
//! half) meets the topic targets: sensitive requests kept local ≥ 0.95, general-knowledge
//! requests flagged ≤ 5 %, everyday requests flagged ≤ 1 %, in each of the four languages.

use solo_gate::eval::{evaluate, Doc};
use solo_gate::{Category, Detector, EntityType};

fn corpus(name: &str) -> Vec<Doc> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus").join(name);
    std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn held_out_targets() {
    let docs = corpus("heldout.jsonl");
    assert!(docs.len() >= 2000);
    let r = evaluate(&Detector::new(), &docs);
    let table = r.table();
    println!("{table}");
    for (t, c) in &r.per_type {
        if t.structured() {
            assert!(c.recall() >= 0.99, "{t} recall {:.3}\n{table}", c.recall());
            assert!(c.precision() >= 0.97, "{t} precision {:.3}\n{table}", c.precision());
        }
    }
    let s = r.structured();
    assert!(s.recall() >= 0.99 && s.precision() >= 0.97, "{table}");
    assert!(r.benign_documents >= 1000);
    assert!(r.benign_flagged * 100 <= r.benign_documents, "{table}");
    assert_eq!(r.repeats_caught, r.repeats, "{table}");
    // Best-effort types: present and useful, not gated on a target.
    for t in [EntityType::Person, EntityType::Address] {
        let c = &r.per_type[&t];
        assert!(c.precision() >= 0.8 && c.recall() >= 0.5, "{t}\n{table}");
    }
    // Latency is measured by `solo gate eval` in release builds; here only a sanity bound
    // (debug-ish test profile, shared CI machine).
    assert!(r.latency_us_per_kb_mean < 2000.0, "{table}");
}

#[test]
fn every_type_is_in_the_corpus() {
    let docs = corpus("heldout.jsonl");
    for t in EntityType::ALL {
        let n = docs.iter().flat_map(|d| &d.spans).filter(|g| g.kind == t).count();
        assert!(n >= 50, "{t}: only {n} labelled spans");
    }
}

#[test]
fn topic_targets_on_held_out() {
    let docs = corpus("topics_heldout.jsonl");
    assert!(docs.len() >= 1000);
    let r = evaluate(&Detector::new(), &docs);
    let table = r.table();
    println!("{table}");
    let t = &r.topics;
    assert!(t.kept_local.of >= 500 && t.general_flagged.of >= 300 && t.everyday_flagged.of >= 200, "{table}");
    assert!(t.kept_local.rate() >= 0.95, "{table}");
    assert!(t.general_flagged.rate() <= 0.05, "{table}");
    assert!(t.everyday_flagged.rate() <= 0.01, "{table}");
    for lang in ["en", "es", "de", "fr"] {
        let (k, g, e) = &t.per_lang[lang];
        assert!(k.rate() >= 0.90 && g.rate() <= 0.08 && e.rate() <= 0.02, "{lang}\n{table}");
    }
    for c in Category::ALL {
        let x = &t.per_category[&c];
        assert!(x.tp + x.fn_ >= 30, "{c}: only {} labelled documents", x.tp + x.fn_);
        assert!(x.recall() >= 0.85 && x.precision() >= 0.85, "{c}\n{table}");
    }
    // The identifier forms of the topic corpus (bearer tokens, KEY=value, labelled ids, phones
    // after a verb, names after a cue, addresses without a street word).
    for (kind, c) in &r.per_type {
        if kind.structured() {
            assert!(c.recall() >= 0.97 && c.precision() >= 0.97, "{kind}\n{table}");
        }
    }
    let person = &r.per_type[&EntityType::Person];
    assert!(person.recall() >= 0.90 && person.precision() >= 0.95, "PERSON\n{table}");
}

#[test]
fn everyday_text_of_the_span_corpus_is_not_flagged() {
    let r = evaluate(&Detector::new(), &corpus("heldout.jsonl"));
    let e = &r.topics.everyday_flagged;
    assert!(e.of >= 1000 && e.rate() <= 0.01, "{}", r.topics.table());
}
