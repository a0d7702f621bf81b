//! The judge's band over corpora: for band edges (lexicon score, model private head), how many
//! sensitive requests the first stage lets go would be asked about, and how many general and
//! everyday requests (the judge's cost, and its chance to be wrong).
//!
//! `cargo run --release -p solo-gate --example band -- FILE.jsonl…` (`GRID=1`: a grid of edges
//! instead of the shipped ones; `SHOW=1`: the sensitive requests sent, in the band or not, with
//! their scores).

use solo_gate::eval::read_corpus;
use solo_gate::topics::{UNSURE_LEXICON, UNSURE_MODEL};
use solo_gate::{Destination, Gate, Outcome, Policy};

fn main() {
    let gate = Gate::new(Policy::default());
    let grid = std::env::var_os("GRID").is_some();
    let show = std::env::var_os("SHOW").is_some();
    let edges: Vec<(f32, f32)> = if grid {
        let mut e = Vec::new();
        for l in [0.15, 0.2, 0.25, 0.3, 0.4, 0.5] {
            for m in [0.15, 0.2, 0.3, 0.4, 0.5, 1.1] {
                e.push((l, m));
            }
        }
        e
    } else {
        vec![(UNSURE_LEXICON, UNSURE_MODEL)]
    };
    for path in std::env::args().skip(1) {
        let docs = read_corpus(std::path::Path::new(&path)).expect("a corpus");
        // (kind, sent, lexicon, model)
        let mut rows = Vec::new();
        for d in &docs {
            let kind = match (&d.kind, &d.categories) {
                (Some(k), Some(_)) => k.clone(),
                (None, None) if d.spans.is_empty() => "everyday".into(),
                _ => continue,
            };
            let spans = gate.detector.detect(&d.text);
            let a = gate.topics.assess(&d.text, &spans);
            let outcome = gate
                .policy
                .decide_all(spans.iter().map(|s| s.kind), a.topics.iter().map(|t| t.kind), Destination::Cloud)
                .outcome;
            let sent = outcome < Outcome::KeepLocal;
            if kind == "sensitive" && sent && show {
                let text: String = d.text.chars().take(100).collect();
                let place = if a.unsure() { "in band" } else { "outside" };
                println!("  {place}: lex {:.2} model {:.2}: {text}", a.lexicon, a.model.unwrap_or(0.0));
            }
            rows.push((kind, sent, a.topics.is_empty(), a.lexicon, a.model.unwrap_or(0.0)));
        }
        println!("== {path}");
        println!(
            "{:>5} {:>5}  {:>22} {:>22} {:>22}",
            "lex", "model", "sensitive sent: asked", "general: asked", "everyday: asked"
        );
        for &(l, m) in &edges {
            let count = |k: &str, need_sent: bool| {
                let of: Vec<_> = rows.iter().filter(|r| r.0 == k && (!need_sent || r.1) && r.2).collect();
                let asked = of.iter().filter(|r| r.3 >= l || r.4 >= m).count();
                let all = rows.iter().filter(|r| r.0 == k && (!need_sent || r.1)).count();
                format!("{asked}/{all}")
            };
            println!(
                "{l:>5.2} {m:>5.2}  {:>22} {:>22} {:>22}",
                count("sensitive", true),
                count("general", false),
                count("everyday", false)
            );
        }
    }
}
