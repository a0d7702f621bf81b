//! The held-out corpus (crates/gate/tests/corpus/heldout.jsonl, made by
//! scripts/gate/make_corpus.py with seed 2; the detectors were tuned on other seeds) meets the
//! targets: structured types recall ≥ 0.99 and precision ≥ 0.97, benign documents flagged
//! ≤ 1 %, every repeat of a found value caught. Names and addresses are reported, not gated.

use solo_gate::eval::{evaluate, Doc};
use solo_gate::{Detector, EntityType};

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
