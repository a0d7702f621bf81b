//! Time per detector over a corpus: `cargo run --release -p solo-gate --example profile -- FILE.jsonl`.
use std::io::BufRead;

fn main() {
    let path = std::env::args().nth(1).expect("corpus path");
    let d = solo_gate::Detector::new();
    let texts: Vec<String> = std::io::BufReader::new(std::fs::File::open(path).unwrap())
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(&l.unwrap()).unwrap()["text"].as_str().unwrap().to_string())
        .collect();
    let kb: f64 = texts.iter().map(|t| t.len() as f64).sum::<f64>() / 1024.0;
    let mut acc = [0.0; 10];
    for _ in 0..3 {
        for t in &texts {
            d.profile(t, &mut acc);
        }
    }
    let names = ["secrets", "emails", "ibans", "numbers", "ids", "network", "phones", "dates", "addresses", "persons"];
    for (n, a) in names.iter().zip(acc) {
        println!("{n:<10} {:>8.1} µs/KB", a * 1e6 / 3.0 / kb);
    }
    println!("total      {:>8.1} µs/KB", acc.iter().sum::<f64>() * 1e6 / 3.0 / kb);
    let t0 = std::time::Instant::now();
    for t in &texts {
        std::hint::black_box(d.detect(t));
    }
    println!("detect     {:>8.1} µs/KB", t0.elapsed().as_secs_f64() * 1e6 / kb);
    let t0 = std::time::Instant::now();
    for t in &texts {
        std::hint::black_box(solo_gate::normalize::Normalized::new(t).chars);
    }
    println!("normalize  {:>8.1} µs/KB", t0.elapsed().as_secs_f64() * 1e6 / kb);
    for (n, secs) in d.regex_costs(&texts) {
        println!("  regex {n:<16} {:>8.1} µs/KB", secs * 1e6 / kb);
    }
}
