//! `solo gate eval` without the `solo` binary (for tuning): the table for one corpus file, then
//! what the spans and the categories each cost, timed in turns over the same documents (so a
//! busy machine slows both alike). `ALL=1` also prints every topic miss and false flag;
//! `MODE=lexicon|model|combined` picks the topic detector (combined: the shipped one).

fn main() {
    let path = std::env::args().nth(1).expect("usage: eval CORPUS.jsonl");
    let docs = solo_gate::eval::read_corpus(path.as_ref()).unwrap_or_else(|e| panic!("{e}"));
    // MODE=lexicon|model|combined (the default): which topic detector.
    let mode = match std::env::var("MODE").as_deref() {
        Ok("lexicon") => solo_gate::Mode::Lexicon,
        Ok("model") => solo_gate::Mode::Model,
        _ => solo_gate::Mode::Combined,
    };
    let topics = solo_gate::Topics::with_mode(mode);
    let policy = solo_gate::Policy::default();
    let r = solo_gate::eval::evaluate_with(&solo_gate::Detector::new(), &topics, &policy, &docs);
    println!("topics: {mode:?}");
    print!("{}", r.table());
    let d = solo_gate::Detector::new();
    let (mut spans_us, mut topics_us, mut kb) = (0.0, 0.0, 0.0);
    for _ in 0..5 {
        for doc in &docs {
            let t = std::time::Instant::now();
            let spans = std::hint::black_box(d.detect(&doc.text));
            spans_us += t.elapsed().as_secs_f64() * 1e6;
            let t = std::time::Instant::now();
            std::hint::black_box(topics.classify(&doc.text, &spans));
            topics_us += t.elapsed().as_secs_f64() * 1e6;
            kb += doc.text.len() as f64 / 1024.0;
        }
    }
    println!("mean µs/KB: spans {:.1}, categories {:.1}", spans_us / kb, topics_us / kb);
    if std::env::var_os("ALL").is_some() {
        for x in &r.topics.examples {
            println!("{x}");
        }
    }
}
