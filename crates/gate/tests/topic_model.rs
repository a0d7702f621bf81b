//! The learned topic model (src/topic_model.rs, weights in data/topic_model.bin): the file loads,
//! a corrupt one is refused with a clear error, predictions are deterministic, and the three
//! detectors (the lexicon, the model, both: the shipped `Mode::Combined`) hold what they were
//! measured at on the three topic corpora, the blind set included (bounds a little under the
//! measured numbers, so a change that loses ground fails; README, "What the gate detects").
//!
//! topics_blind_test.jsonl (scripts/gate/blind_topics.py) was written by hand and committed before
//! the model or its training data existed; nothing was tuned on it.

use solo_gate::eval::{evaluate_with, read_corpus, Doc, Results};
use solo_gate::topic_model::{TopicModel, MODEL, VETO};
use solo_gate::topics::UNSURE_MODEL;
use solo_gate::{Category, Detector, Mode, Policy, Topics};

fn corpus(name: &str) -> Vec<Doc> {
    read_corpus(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus").join(name)).unwrap()
}

fn run(name: &str, mode: Mode) -> Results {
    evaluate_with(&Detector::new(), &Topics::with_mode(mode), &Policy::default(), &corpus(name))
}

#[test]
fn the_shipped_model_loads() {
    let m = TopicModel::shipped();
    assert_eq!(m.bits(), 14);
    assert!(MODEL.len() < 300_000, "{} bytes", MODEL.len());
    assert!(m.threshold > 0.3 && m.threshold < 0.95 && m.threshold_combined >= m.threshold);
    // What the training script writes is what the loader reads back.
    assert_eq!(TopicModel::parse(MODEL).unwrap().to_bytes(), MODEL);
    // The second opinion (beside the lexicon, a model category stands only where it agrees).
    let v = TopicModel::veto();
    assert_eq!(v.bits(), 14);
    assert!(v.threshold_combined > 0.1 && v.threshold_combined < m.threshold_combined);
    assert_eq!(TopicModel::parse(VETO).unwrap().to_bytes(), VETO);
}

#[test]
fn a_corrupt_model_is_refused_clearly() {
    let mut bytes = MODEL.to_vec();
    bytes[5000] ^= 0x40;
    let e = TopicModel::parse(&bytes).unwrap_err();
    assert!(e.contains("corrupt"), "{e}");
    let e = TopicModel::parse(&MODEL[..MODEL.len() / 2]).unwrap_err();
    assert!(e.contains("corrupt") || e.contains("bytes"), "{e}");
    let e = TopicModel::parse(b"not a model at all, not at all").unwrap_err();
    assert!(e.contains("SOLOTM01"), "{e}");
    assert!(TopicModel::parse(&[]).is_err());
}

#[test]
fn predictions_are_deterministic() {
    let m = TopicModel::shipped();
    let texts = [
        "ok so I threw up this morning and my stomach still hurts",
        "mi hermano lleva meses sin pagar el alquiler y le van a echar",
        "what is the capital of Australia?",
        &"A long text about gardening and tomatoes, sunlight and water. ".repeat(60),
    ];
    for t in texts {
        let (a, b) = (m.predict(t), m.predict(t));
        assert_eq!(a, b);
        assert!((0.0..=1.0).contains(&a.private));
        let topics = Topics::with_mode(Mode::Model);
        assert_eq!(topics.classify(t, &[]), topics.classify(t, &[]));
    }
}

#[test]
fn model_evidence_points_at_words() {
    let text = "been throwing up blood since last night and I can barely stand";
    let found = Topics::with_mode(Mode::Model).classify(text, &[]);
    assert!(found.iter().any(|t| t.kind == Category::Health), "{found:?}");
    let chars: Vec<char> = text.chars().collect();
    for t in &found {
        assert!(!t.evidence.is_empty() && t.evidence.len() <= 3);
        for e in &t.evidence {
            let w: String = chars[e.start..e.end].iter().collect();
            assert!(w.chars().all(char::is_alphanumeric) && !w.is_empty(), "{w:?}");
        }
    }
    // A general question, an everyday request: nothing.
    assert!(Topics::with_mode(Mode::Model).classify("How is blood pressure measured?", &[]).is_empty());
    assert!(Topics::with_mode(Mode::Model).classify("Give me a recipe for lentil soup", &[]).is_empty());
}

#[test]
fn the_judges_band_is_between_nothing_and_a_category() {
    let m = TopicModel::shipped();
    // (UNSURE_LEXICON < THRESHOLD is checked where they are defined, when it compiles.)
    assert!(UNSURE_MODEL > 0.0 && UNSURE_MODEL < m.threshold_combined, "{UNSURE_MODEL}");
    let topics = Topics::default();
    // A vague first-person matter: no category, the model's private head in the band.
    let vague = topics.assess("I have been feeling off lately and I do not know why", &[]);
    assert!(vague.topics.is_empty() && vague.unsure(), "{vague:?}");
    let p = vague.model.expect("the model ran");
    assert!((UNSURE_MODEL..m.threshold_combined).contains(&p), "{p}");
    // A category found is sure; so are a general question and an everyday request.
    let sure = topics.assess("My HIV test came back positive, what should I do?", &[]);
    assert!(!sure.topics.is_empty() && !sure.unsure(), "{sure:?}");
    for text in ["How does insulin work?", "Give me a recipe for lentil soup"] {
        let a = topics.assess(text, &[]);
        assert!(a.topics.is_empty() && !a.unsure(), "{text}: {a:?}");
    }
    // `classify` is `assess`'s categories; the lexicon alone never has a model score.
    let text = "my knee clicks when I climb stairs";
    assert_eq!(topics.classify(text, &[]), topics.assess(text, &[]).topics);
    assert_eq!(Topics::with_mode(Mode::Lexicon).assess(text, &[]).model, None);
}

/// kept local, general flagged, everyday flagged.
fn shares(r: &Results) -> (f64, f64, f64) {
    let t = &r.topics;
    (t.kept_local.rate(), t.general_flagged.rate(), t.everyday_flagged.rate())
}

#[test]
fn the_blind_set() {
    // Measured at the end of the second round: lexicon 0.650 / 0 % / 0 %, model 0.762 / 1.7 % /
    // 10 %, combined 0.844 / 0 % / 2.5 % (the first round's: lexicon 0.600, combined 0.819); at
    // the end of the fourth: lexicon 0.662, combined 0.850 / 0 % / 2.5 %; after issue #42's fifth
    // round combined 0.850 / 0 % / 0 %; after its sixth (lexicon families of the older sets'
    // misses, lone first names, a verb without its subject, the anchor after): lexicon 0.800,
    // combined 0.969 / 0 % / 0 % (tuned on since, so no longer blind); after its seventh (persons
    // named by a role, German compounds, more families): lexicon 0.819, combined 0.975 / 0 % / 0 %;
    // after its eighth (families by ending, pronouns, durations): lexicon 0.863, combined 0.981.
    let docs = corpus("topics_blind_test.jsonl");
    let count = |k: &str| docs.iter().filter(|d| d.kind.as_deref() == Some(k)).count();
    assert!(count("sensitive") >= 160 && count("general") >= 60 && count("everyday") >= 40);
    let (k, g, e) = shares(&run("topics_blind_test.jsonl", Mode::Lexicon));
    assert!(k >= 0.86 && g <= 0.02 && e <= 0.0, "lexicon: {k} {g} {e}");
    let (k, g, e) = shares(&run("topics_blind_test.jsonl", Mode::Model));
    assert!(k >= 0.74 && g <= 0.05 && e <= 0.125, "model: {k} {g} {e}");
    let r = run("topics_blind_test.jsonl", Mode::Combined);
    let (k, g, e) = shares(&r);
    assert!(k >= 0.98 && g <= 0.02 && e <= 0.0, "combined: {k} {g} {e}\n{}", r.table());
    for lang in ["en", "es", "de", "fr"] {
        let (k, _, _) = &r.topics.per_lang[lang];
        assert!(k.of == 40 && k.rate() >= 0.925, "{lang}: {}", k.rate());
    }
}

#[test]
fn the_fresh_and_template_corpora_with_each_detector() {
    // Measured (kept local): fresh test lexicon 0.862, model 0.725, combined 0.912; templates
    // lexicon 0.984, model 0.713, combined 0.993; no general or everyday request flagged by the
    // combined detector on either. After issue #42's sixth round: fresh test lexicon 0.912,
    // combined 0.963; templates lexicon 0.997, combined 1.000.
    for (name, lexicon, model, combined) in
        [("topics_fresh_test.jsonl", 0.90, 0.70, 0.95), ("topics_heldout.jsonl", 0.99, 0.69, 0.995)]
    {
        let (k, _, _) = shares(&run(name, Mode::Lexicon));
        assert!(k >= lexicon, "{name} lexicon {k}");
        let (k, g, e) = shares(&run(name, Mode::Model));
        assert!(k >= model && g <= 0.05 && e <= 0.05, "{name} model {k} {g} {e}");
        let (k, g, e) = shares(&run(name, Mode::Combined));
        assert!(k >= combined && g <= 0.0 && e <= 0.0, "{name} combined {k} {g} {e}");
    }
}

#[test]
fn names_with_accents_and_greetings() {
    let d = Detector::new();
    let persons = |t: &str| -> Vec<String> {
        d.detect(t).into_iter().filter(|s| s.kind == solo_gate::EntityType::Person).map(|s| s.text).collect()
    };
    // Known to the lists without the accent ("Alvaro", "Iñigo", "Elodie").
    assert_eq!(persons("Demandado: Álvaro Gómez\nFecha de juicio: 11/04"), ["Álvaro Gómez"]);
    assert_eq!(persons("Íñigo Muñoz me contó que está de baja."), ["Íñigo Muñoz"]);
    assert_eq!(persons("Défendeur : Élodie Bérard"), ["Élodie Bérard"]);
    // A greeting before a title opens the name as "Dear" does.
    assert_eq!(persons("Estimada Sra. José Gómez:\ngracias por su respuesta."), ["José Gómez"]);
    // Words with accents that are no names stay out.
    assert!(persons("Él dijo que Ébano es un color.").is_empty());
}

#[test]
fn odd_inputs_do_not_break_it() {
    let long_word = "x".repeat(500);
    let many_lines = "Label: 12\n".repeat(400);
    let texts = [
        "",
        "   \n\n\t",
        "!!!???...",
        long_word.as_str(),
        many_lines.as_str(),
        "日本語のテキストと한국어 그리고 العربية",
        "ß ẞ Æ œ İ ı ﬁ \u{200b}\u{0301}",
        "0 1 2 3 4 5 6 7 8 9 ٣ ४",
    ];
    // And xorshift-random characters from a few scripts.
    let mut x: u64 = 0x9e3779b97f4a7c15;
    let pool: Vec<char> = "aZ é€: \n0.;-ßЖ字😀".chars().collect();
    let random: Vec<String> = (0..50)
        .map(|_| {
            (0..200)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    pool[(x % pool.len() as u64) as usize]
                })
                .collect()
        })
        .collect();
    for t in texts.iter().copied().chain(random.iter().map(String::as_str)) {
        for mode in [Mode::Model, Mode::Combined] {
            let n = t.chars().count();
            for topic in Topics::with_mode(mode).classify(t, &[]) {
                assert!(topic.evidence.iter().all(|e| e.start < e.end && e.end <= n), "{t:?}");
            }
        }
    }
}

#[test]
fn the_r4_set() {
    // topics_r4_test.jsonl (scripts/gate/r4_topics.py): written by hand for the fourth round and
    // committed, with the gate's numbers on it, before any detector of that round changed; then
    // measured once more at the round's end, never tuned on. Measured then: lexicon 0.744 /
    // 1.6 % / 5.0 %, model 0.844 / 3.1 % / 17.5 %, combined 0.888 / 1.6 % / 13.8 % (before the
    // round: combined 0.881 / 1.6 % / 13.8 %, lexicon 0.738). Short of the 0.95 and 1 %.
    // After issue #42's fifth round: combined 0.894 / 1.6 % / 3.8 % (an everyday object or a pet
    // and no category word is not the model's alone; amounts and budgets at 0.3). After its sixth:
    // lexicon 0.844, combined 0.975 / 1.6 % / 3.8 % (tuned on since). After its seventh: lexicon
    // 0.850, combined unchanged. After its eighth: lexicon 0.894, combined 0.988 / 1.6 % / 3.8 %.
    let docs = corpus("topics_r4_test.jsonl");
    let count = |k: &str| docs.iter().filter(|d| d.kind.as_deref() == Some(k)).count();
    assert!(count("sensitive") >= 160 && count("general") >= 64 && count("everyday") >= 80);
    let (k, g, e) = shares(&run("topics_r4_test.jsonl", Mode::Lexicon));
    assert!(k >= 0.89 && g <= 0.035 && e <= 0.065, "lexicon: {k} {g} {e}");
    let (k, g, e) = shares(&run("topics_r4_test.jsonl", Mode::Model));
    assert!(k >= 0.83 && g <= 0.05 && e <= 0.19, "model: {k} {g} {e}");
    let r = run("topics_r4_test.jsonl", Mode::Combined);
    let (k, g, e) = shares(&r);
    assert!(k >= 0.98 && g <= 0.035 && e <= 0.0375, "combined: {k} {g} {e}\n{}", r.table());
    for (lang, floor) in [("en", 0.975), ("es", 0.925), ("de", 0.925), ("fr", 0.975)] {
        let (k, _, _) = &r.topics.per_lang[lang];
        assert!(k.of == 40 && k.rate() >= floor, "{lang}: {}", k.rate());
    }
}

#[test]
fn the_seventh_rounds_held_out_set_with_each_detector() {
    // topics_private_r7.jsonl (scripts/gate/heldout_r7.py): written and committed before any change
    // of issue #42's seventh round, many third persons named by a role with no possessive ("Opa",
    // "la vecina", "le collègue"); measured once, at the round's end. Before: lexicon 0.573, model
    // 0.562, combined 0.604; after: lexicon 0.823, model 0.562, combined 0.854.
    // The eighth round tuned on its misses (dev data since): lexicon 0.969, combined 0.990.
    let (k, _, _) = shares(&run("topics_private_r7.jsonl", Mode::Lexicon));
    assert!(k >= 0.96, "lexicon: {k}");
    let (k, _, _) = shares(&run("topics_private_r7.jsonl", Mode::Model));
    assert!(k >= 0.55, "model: {k}");
    let (k, _, _) = shares(&run("topics_private_r7.jsonl", Mode::Combined));
    assert!(k >= 0.98, "combined: {k}");
}

#[test]
fn the_eighth_rounds_held_out_set_with_each_detector() {
    // topics_private_r8.jsonl (scripts/gate/heldout_r8.py): written and committed before any change
    // of issue #42's eighth round, its vocabulary chosen apart from the earlier sets' (euphemisms,
    // slang, drugs and procedures by name, agents' notes); measured once, at the round's end.
    // Before: lexicon 0.531, model 0.604, combined 0.677; after: lexicon 0.604, model 0.604 (the
    // model is unchanged), combined 0.740. Short of the 0.95.
    let (k, _, _) = shares(&run("topics_private_r8.jsonl", Mode::Lexicon));
    assert!(k >= 0.60, "lexicon: {k}");
    let (k, _, _) = shares(&run("topics_private_r8.jsonl", Mode::Model));
    assert!(k >= 0.60, "model: {k}");
    let (k, _, _) = shares(&run("topics_private_r8.jsonl", Mode::Combined));
    assert!(k >= 0.73, "combined: {k}");
}
