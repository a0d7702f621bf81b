//! The topic model's features of each document of a JSON-lines corpus (`{"text": …}` a line),
//! one line of distinct bucket numbers each: what scripts/gate/train_topic_model.py trains on.
//! Usage: topic_features BITS < corpus.jsonl > features.txt
use std::io::{BufRead, Write};

fn main() {
    let bits: u32 = std::env::args().nth(1).and_then(|b| b.parse().ok()).expect("usage: topic_features BITS");
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("UTF-8");
        if line.trim().is_empty() {
            continue;
        }
        let doc: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
        let text = doc["text"].as_str().expect("a \"text\" field");
        let b: Vec<String> = solo_gate::topic_model::text_buckets(text, bits).iter().map(u32::to_string).collect();
        writeln!(out, "{}", b.join(" ")).expect("stdout");
    }
}
