use std::io::BufRead;
fn main() {
    let path = std::env::args().nth(1).unwrap();
    let texts: Vec<String> = std::io::BufReader::new(std::fs::File::open(path).unwrap())
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(&l.unwrap()).unwrap()["text"].as_str().unwrap().to_string())
        .collect();
    let d = solo_gate::Detector::new();
    let spans: Vec<_> = texts.iter().map(|t| d.detect(t)).collect();
    let t = solo_gate::Topics::shipped();
    let kb: f64 = texts.iter().map(|t| t.len()).sum::<usize>() as f64 / 1024.0;
    let mut best = f64::MAX;
    let mut bestd = f64::MAX;
    for _ in 0..30 {
        let s = std::time::Instant::now();
        for (x, sp) in texts.iter().zip(&spans) {
            std::hint::black_box(t.classify(x, sp));
        }
        best = best.min(s.elapsed().as_secs_f64() * 1e6 / kb);
        let s = std::time::Instant::now();
        for x in &texts {
            std::hint::black_box(d.detect(x));
        }
        bestd = bestd.min(s.elapsed().as_secs_f64() * 1e6 / kb);
    }
    println!("best µs/KB: categories {best:.1} spans {bestd:.1}");
}
