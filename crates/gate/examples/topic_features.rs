//! The topic model's features of each document of a JSON-lines corpus (`{"text": …}` a line),
//! a line a window of it (`DOC B1 B2 …`: the document's number, then the window's distinct
//! buckets): what scripts/gate/train_topic_model.py trains on.
//! Usage: topic_features BITS < corpus.jsonl > features.txt
use std::io::{BufRead, Write};

fn main() {
    let bits: u32 = std::env::args().nth(1).and_then(|b| b.parse().ok()).expect("usage: topic_features BITS");
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for (n, line) in std::io::stdin().lock().lines().enumerate() {
        let line = line.expect("UTF-8");
        let doc: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
        let text = doc["text"].as_str().expect("a \"text\" field");
        for w in solo_gate::topic_model::text_buckets(text, bits) {
            let b: Vec<String> = w.iter().map(u32::to_string).collect();
            writeln!(out, "{n} {}", b.join(" ")).expect("stdout");
        }
    }
}
