//! The tokenizer, chat template and stop ids of a GGUF file (built from `tokenizer.ggml.*`)
//! against llama.cpp's own tokenization of the same file (fixtures/gguf/tokenize.json, recorded
//! by scripts/make_gguf_fixtures.py) and against the tiny checkpoints' tokenizer.json, from which
//! the file's vocabulary was written.

use solo_text::{ChatTemplate, TemplateOptions, Tokenizer};
use std::path::PathBuf;

fn fixtures() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures"))
}

#[test]
fn tokenizer_matches_llama_cpp_and_the_release_tokenizer() {
    let file = fixtures().join("gguf/small-f32.gguf");
    let tok = Tokenizer::from_dir(&file).unwrap();
    let hf = Tokenizer::from_dir(fixtures().join("tiny-a")).unwrap();
    let cases: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(fixtures().join("gguf/tokenize.json")).unwrap()).unwrap();
    assert!(cases.len() >= 8);
    for (text, ids) in &cases {
        let want: Vec<u32> = ids.as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
        let got = tok.encode(text).unwrap();
        assert_eq!(got, want, "{text:?}: llama.cpp's ids");
        assert_eq!(got, hf.encode(text).unwrap(), "{text:?}: tokenizer.json's ids");
        assert_eq!(tok.decode(&got, false).unwrap(), hf.decode(&got, false).unwrap(), "{text:?} decoded");
    }
    // added tokens: special ones are skipped when asked, <think> (not special) stays
    let ids = tok.encode("<|im_start|>a<think>").unwrap();
    assert_eq!(tok.decode(&ids, true).unwrap(), "a<think>");
    assert_eq!(tok.token_id("<|im_end|>"), hf.token_id("<|im_end|>"));
}

#[test]
fn chat_template_and_stop_ids_come_from_the_metadata() {
    let file = fixtures().join("gguf/small-f32.gguf");
    let messages = serde_json::json!([{"role": "user", "content": "Hi"}]);
    let opts = TemplateOptions { add_generation_prompt: true, enable_thinking: None, preserve_thinking: None };
    let from_file = ChatTemplate::from_dir(&file).unwrap().render(&messages, None, &opts).unwrap();
    let from_dir = ChatTemplate::from_dir(fixtures().join("tiny-a")).unwrap().render(&messages, None, &opts).unwrap();
    assert_eq!(from_file, from_dir);
    let tok = Tokenizer::from_dir(&file).unwrap();
    let want: Vec<u32> = ["<|im_end|>", "<|endoftext|>"].iter().map(|t| tok.token_id(t).unwrap()).collect();
    assert_eq!(solo_text::stop_token_ids(&file).unwrap(), want);
}
