//! For tuning: one line per document of the corpora named: its kind, language, whether the
//! shipped detector flags it, and what the detectors see (`Topics::probe`: the lexicon's bound
//! score, its heaviest category word bound or not, its strongest anchor, the model's private head).

fn main() {
    let d = solo_gate::Detector::new();
    let topics = solo_gate::Topics::default();
    let lexicon = solo_gate::Topics::with_mode(solo_gate::Mode::Lexicon);
    // MODEL_FILE=PATH: another model than the shipped one (a training run's, to compare).
    let bytes =
        std::env::var("MODEL_FILE").ok().filter(|p| !p.is_empty()).map(|p| std::fs::read(p).expect("MODEL_FILE"));
    let model = match &bytes {
        Some(b) => solo_gate::topic_model::TopicModel::parse(b).expect("a model"),
        None => solo_gate::topic_model::TopicModel::shipped().clone(),
    };
    for path in std::env::args().skip(1) {
        let docs = solo_gate::eval::read_corpus(path.as_ref()).unwrap_or_else(|e| panic!("{e}"));
        for doc in docs {
            let spans = d.detect(&doc.text);
            let flagged = !topics.classify(&doc.text, &spans).is_empty();
            let lex = !lexicon.classify(&doc.text, &spans).is_empty();
            let [best, raw, anchor, p, meta] = topics.probe(&doc.text, &spans, &model);
            let kind = doc.kind.as_deref().unwrap_or(if doc.categories.is_some() { "?" } else { "everyday" });
            let line = serde_json::json!({
                "file": path.rsplit('/').next(), "kind": kind, "lang": doc.lang, "flagged": flagged, "lex": lex,
                "best": best, "raw": raw, "anchor": anchor, "p": p, "meta": meta > 0.0, "spans": spans.len(),
                "text": doc.text.chars().take(100).collect::<String>(),
            });
            println!("{line}");
        }
    }
}
