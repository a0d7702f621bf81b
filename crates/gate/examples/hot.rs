//! `detect` over a corpus, many times (for perf).
use std::io::BufRead;
fn main() {
    let d = solo_gate::Detector::new();
    let path = std::env::args().nth(1).unwrap();
    let texts: Vec<String> = std::io::BufReader::new(std::fs::File::open(path).unwrap())
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(&l.unwrap()).unwrap()["text"].as_str().unwrap().to_string())
        .filter(|t: &String| {
            // BYTES=40-70: only documents of that size (the median one is about 54 bytes).
            let range = std::env::var("BYTES").unwrap_or_default();
            let (lo, hi) = range.split_once('-').unwrap_or(("0", "18446744073709551615"));
            (lo.parse().unwrap_or(0)..=hi.parse().unwrap_or(usize::MAX)).contains(&t.len())
        })
        .collect();
    let mut k = 0;
    for _ in 0..std::env::var("N").ok().and_then(|n| n.parse().ok()).unwrap_or(20) {
        for t in &texts {
            k += d.detect(t).len();
        }
    }
    println!("{k}");
}
