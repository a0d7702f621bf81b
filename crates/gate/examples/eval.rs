//! `solo gate eval` without the `solo` binary (for tuning): the table for one corpus file.
use std::io::BufRead;

fn main() {
    let path = std::env::args().nth(1).expect("usage: eval CORPUS.jsonl");
    let docs: Vec<solo_gate::eval::Doc> = std::io::BufReader::new(std::fs::File::open(&path).expect("corpus"))
        .lines()
        .map(|l| l.expect("UTF-8"))
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(n, l)| serde_json::from_str(&l).unwrap_or_else(|e| panic!("{path} line {}: {e}", n + 1)))
        .collect();
    let r = solo_gate::eval::evaluate(&solo_gate::Detector::new(), &docs);
    print!("{}", r.table());
    if std::env::var_os("ALL").is_some() {
        for x in &r.topics.examples {
            println!("{x}");
        }
    }
}
