//! `solo::Engine` (what libsolo wraps) on the built-in demo checkpoint: requests at once,
//! cancelling, errors by kind, and closing under a running request.

use solo::{Engine, ErrorKind, Options};
use std::sync::Arc;

fn demo() -> Engine {
    // Each test process writes the demo once into its own cache.
    std::env::set_var("SOLO_CACHE", std::env::temp_dir().join(format!("solo-engine-test-{}", std::process::id())));
    Engine::open(None, Options { backend: solo::Backend::Cpu, ..Options::default() }).expect("the demo opens")
}

const ASK: &str =
    r#"{"messages": [{"role": "user", "content": "What color is the sky?"}], "max_tokens": 64, "temperature": 0}"#;

fn content(answer: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(answer).unwrap();
    v["choices"][0]["message"]["content"].as_str().unwrap_or_default().to_string()
}

#[test]
fn requests_from_several_threads_at_once_get_the_same_answer_as_alone() {
    let engine = Arc::new(demo());
    let alone = content(&engine.chat(ASK).unwrap().next().unwrap().unwrap());
    let answers: Vec<String> = (0..4)
        .map(|_| {
            let e = engine.clone();
            std::thread::spawn(move || content(&e.chat(ASK).unwrap().next().unwrap().unwrap()))
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect();
    assert!(!alone.is_empty());
    assert!(answers.iter().all(|a| *a == alone), "{answers:?} vs {alone:?}");
}

/// A completion that would run for thousands of tokens (the end-of-text tokens biased away).
fn long_completion(engine: &Engine) -> solo::Stream {
    let ids = engine.tokenize("<|im_end|><|endoftext|>").unwrap();
    let bias: serde_json::Map<String, serde_json::Value> = ids.iter().map(|i| (i.to_string(), (-100).into())).collect();
    let request = serde_json::json!({"prompt": "Once", "max_tokens": 5000, "stream": true, "logit_bias": bias});
    engine.completion(&request.to_string()).unwrap()
}

#[test]
fn a_cancelled_stream_ends_with_cancelled_and_errors_have_their_kind() {
    let engine = demo();
    let mut stream = long_completion(&engine);
    stream.next_chunk().unwrap().expect("a first chunk");
    stream.canceller().cancel();
    let rest: Vec<_> = stream.by_ref().collect();
    assert!(rest.len() < 5000);
    let last = rest.last().expect("the end comes as an item").as_ref().unwrap_err();
    assert_eq!(last.kind, ErrorKind::Cancelled);

    let bad = engine.chat(r#"{"messages": "hi"}"#).err().expect("refused");
    assert_eq!((bad.kind, bad.http_status), (ErrorKind::InvalidRequest, 400));
    let not_json = engine.chat("{").err().expect("refused");
    assert_eq!(not_json.kind, ErrorKind::InvalidRequest);
    let options = Options::from_json(r#"{"max_batch": 2, "colour": 1}"#).expect_err("refused");
    assert!(options.message.contains("colour"), "{}", options.message);
    assert_eq!(engine.detokenize(&[u32::MAX]).unwrap_err().kind, ErrorKind::InvalidArgument);
}

#[test]
fn closing_the_engine_ends_a_running_stream_with_an_error() {
    let engine = demo();
    let mut stream = long_completion(&engine);
    stream.next_chunk().unwrap().expect("a first chunk");
    drop(engine); // returns once the engine thread has let the model go
    let rest: Vec<_> = stream.by_ref().collect();
    assert!(rest.len() < 5000);
    let end = rest.last().expect("the end comes as an item").as_ref().unwrap_err();
    assert_eq!(end.kind, ErrorKind::Internal);
    assert!(end.message.contains("closed"), "{}", end.message);
}
