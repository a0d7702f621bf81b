//! Fixture locations shared by the integration tests. Fixtures are required: a missing one is
//! a test failure, never a skip.
#![allow(dead_code)]

use serde_json::Value;
use std::path::PathBuf;

/// Tiny checkpoint directory with the real Qwen3.6 chat template (made by scripts/make_fixtures.py).
pub const TOKENIZER_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/tiny-a");
/// HF renderings and ids (made by scripts/template_cases.py).
pub const CASES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/chat_template_cases.json");

pub fn cases() -> Value {
    let text = std::fs::read_to_string(CASES)
        .unwrap_or_else(|e| panic!("fixture {CASES} missing ({e}); run scripts/template_cases.py"));
    serde_json::from_str(&text).expect("chat_template_cases.json is valid JSON")
}

pub fn ids(v: &Value) -> Vec<u32> {
    v.as_array().expect("id list").iter().map(|x| x.as_u64().expect("id") as u32).collect()
}

/// A fresh empty directory under the system temp dir, unique to this process and `name`.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("solo-text-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
