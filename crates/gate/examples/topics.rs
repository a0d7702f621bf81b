//! The spans and categories of each line of stdin (for tuning the lexicon).
use std::io::BufRead;

fn main() {
    let d = solo_gate::Detector::new();
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("UTF-8");
        let spans = d.detect(&line);
        let topics = solo_gate::Topics::shipped().classify(&line, &spans);
        let s: Vec<String> = spans.iter().map(|s| format!("{}={}", s.kind, s.text)).collect();
        let t: Vec<String> = topics.iter().map(|t| format!("{}:{}", t.kind, t.score)).collect();
        println!("{line}\n    spans {s:?} topics {t:?}");
    }
}
