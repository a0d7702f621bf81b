//! The labelled spans of one type that the detectors miss, and the spans they find that are not
//! labelled (for tuning): `misses CORPUS.jsonl TYPE`.
use std::io::BufRead;

fn main() {
    let mut args = std::env::args().skip(1);
    let (path, kind) = (args.next().expect("corpus"), args.next().expect("type"));
    let d = solo_gate::Detector::new();
    for line in std::io::BufReader::new(std::fs::File::open(path).expect("corpus")).lines() {
        let doc: solo_gate::eval::Doc = serde_json::from_str(&line.expect("UTF-8")).expect("JSON");
        let found = d.detect(&doc.text);
        let chars: Vec<char> = doc.text.chars().collect();
        let text = |a: usize, b: usize| chars[a..b.min(chars.len())].iter().collect::<String>();
        for g in doc.spans.iter().filter(|g| g.kind.name() == kind) {
            if !found.iter().any(|s| s.kind == g.kind && s.start < g.end && g.start < s.end) {
                println!("MISS {:?} in {:?}", text(g.start, g.end), text(g.start.saturating_sub(40), g.end + 20));
            }
        }
        for s in found.iter().filter(|s| s.kind.name() == kind) {
            if !doc.spans.iter().any(|g| s.kind == g.kind && s.start < g.end && g.start < s.end) {
                println!("FALSE {:?} in {:?}", s.text, text(s.start.saturating_sub(40), s.end + 20));
            }
        }
    }
}
