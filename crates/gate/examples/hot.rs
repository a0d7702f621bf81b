//! `detect` over a corpus, many times (for perf): `N=20` rounds; `BYTES=40-70` only documents
//! of that size (the median one is about 54 bytes); `KIND=PHONE` only documents whose first
//! labelled span is of that type (`benign`: those with none); `TOPICS=lexicon|model|combined`
//! also classifies each text (`ONLY=1`: the categories alone, of spans found before the rounds).
use std::io::BufRead;

fn main() {
    let d = solo_gate::Detector::new();
    let path = std::env::args().nth(1).unwrap();
    let range = std::env::var("BYTES").unwrap_or_default();
    let (lo, hi) = range.split_once('-').unwrap_or(("0", "18446744073709551615"));
    let sizes = lo.parse().unwrap_or(0)..=hi.parse().unwrap_or(usize::MAX);
    let kind = std::env::var("KIND").ok();
    let texts: Vec<String> = std::io::BufReader::new(std::fs::File::open(path).unwrap())
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(&l.unwrap()).unwrap();
            let first =
                v["spans"].as_array().and_then(|s| s.first()).map_or("benign", |s| s["type"].as_str().unwrap_or(""));
            let text = v["text"].as_str().unwrap().to_string();
            (sizes.contains(&text.len()) && kind.as_deref().is_none_or(|k| k == first)).then_some(text)
        })
        .collect();
    let topics = std::env::var("TOPICS").ok().map(|m| {
        let mode = match m.as_str() {
            "lexicon" => solo_gate::Mode::Lexicon,
            "model" => solo_gate::Mode::Model,
            _ => solo_gate::Mode::Combined,
        };
        (solo_gate::Topics::with_mode(mode), std::env::var_os("ONLY").is_some())
    });
    let spans: Vec<_> = texts.iter().map(|t| d.detect(t)).collect();
    let kb = texts.iter().map(|t| t.len()).sum::<usize>() as f64 / 1024.0;
    let mut k = 0;
    let t0 = std::time::Instant::now();
    let rounds: usize = std::env::var("N").ok().and_then(|n| n.parse().ok()).unwrap_or(20);
    for _ in 0..rounds {
        for (t, s) in texts.iter().zip(&spans) {
            match &topics {
                Some((topics, true)) => k += topics.classify(t, s).len(),
                Some((topics, false)) => k += topics.classify(t, &d.detect(t)).len(),
                None => k += d.detect(t).len(),
            }
        }
    }
    eprintln!("{:.1} µs/KB", t0.elapsed().as_secs_f64() * 1e6 / (kb * rounds as f64));
    println!("{k}");
}
