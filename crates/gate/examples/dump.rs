//! Every document's spans and categories (each topic detector: lexicon, model, combined), one
//! JSON line each, to compare two builds: `dump FILE.jsonl... > out.jsonl`. Besides the corpus
//! documents, each file's texts cut at odd places and joined in pairs, so that a change that
//! should not change what the gate finds is checked on more than the corpus's own shapes.

fn main() {
    let d = solo_gate::Detector::new();
    let modes = [solo_gate::Mode::Lexicon, solo_gate::Mode::Model, solo_gate::Mode::Combined];
    let topics: Vec<solo_gate::Topics> = modes.iter().map(|&m| solo_gate::Topics::with_mode(m)).collect();
    for path in std::env::args().skip(1) {
        let docs = solo_gate::eval::read_corpus(path.as_ref()).unwrap_or_else(|e| panic!("{e}"));
        let mut texts: Vec<String> = docs.iter().map(|d| d.text.clone()).collect();
        for (k, pair) in docs.windows(2).enumerate() {
            let (a, b) = (&pair[0].text, &pair[1].text);
            let cut = a.char_indices().map(|(i, _)| i).nth(k % 37).unwrap_or(a.len());
            texts.push(format!("{}{}", &a[cut..], b.to_uppercase()));
            texts.push(format!("{a}\n{b}\n{a}"));
        }
        for text in &texts {
            let spans = d.detect(text);
            let found: Vec<_> = topics.iter().map(|t| t.classify(text, &spans)).collect();
            println!("{}", serde_json::json!({"spans": spans, "topics": found}));
        }
    }
}
