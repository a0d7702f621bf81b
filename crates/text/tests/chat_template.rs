//! The chat template must render exactly what HF `apply_chat_template` renders.

mod common;

use common::{cases, ids, temp_dir, TOKENIZER_DIR};
use serde_json::{json, Value};
use solo_text::{ChatTemplate, TemplateException, TemplateOptions, Tokenizer};

fn options(case: &Value) -> TemplateOptions {
    TemplateOptions {
        add_generation_prompt: case["add_generation_prompt"].as_bool().expect("add_generation_prompt"),
        enable_thinking: case.get("enable_thinking").and_then(Value::as_bool),
        preserve_thinking: case.get("preserve_thinking").and_then(Value::as_bool),
    }
}

#[test]
fn every_case_renders_like_hf() {
    let template = ChatTemplate::from_dir(TOKENIZER_DIR).unwrap();
    let cases = cases();
    let chat = cases["chat"].as_array().expect("chat cases");
    assert!(chat.len() >= 15, "expected the full case list, got {}", chat.len());
    let mut failures = Vec::new();
    for case in chat {
        let name = case["name"].as_str().unwrap();
        let tools = case.get("tools").filter(|t| !t.is_null());
        let got = template.render(&case["messages"], tools, &options(case));
        match (case.get("expected"), case.get("error"), got) {
            (Some(want), _, Ok(got)) if want.as_str() == Some(got.as_str()) => {}
            (Some(want), _, got) => {
                failures.push(format!("{name}:\n--- HF\n{}\n--- solo\n{got:?}", want.as_str().unwrap()))
            }
            (None, Some(want), Err(err)) => {
                let raised = err.downcast_ref::<TemplateException>();
                if raised.map(|e| e.0.as_str()) != want.as_str() {
                    failures.push(format!("{name}: want error {want}, got {err:#}"));
                }
            }
            (None, Some(want), Ok(got)) => failures.push(format!("{name}: want error {want}, got {got:?}")),
            (None, None, _) => failures.push(format!("{name}: case has neither expected nor error")),
        }
    }
    assert!(failures.is_empty(), "{} of {} cases differ:\n{}", failures.len(), chat.len(), failures.join("\n\n"));
}

#[test]
fn rendered_prompts_tokenize_like_hf() {
    let tokenizer = Tokenizer::from_dir(TOKENIZER_DIR).unwrap();
    let cases = cases();
    let with_ids: Vec<&Value> =
        cases["chat"].as_array().unwrap().iter().filter(|c| c.get("expected_ids").is_some()).collect();
    assert!(with_ids.len() >= 3, "fixture should record ids for several chat cases");
    for case in with_ids {
        let text = case["expected"].as_str().unwrap();
        assert_eq!(tokenizer.encode(text).unwrap(), ids(&case["expected_ids"]), "{}", case["name"]);
    }
}

#[test]
fn tojson_is_python_json_dumps() {
    // `x` and `e` come in through `messages` to exercise the serde_json -> minijinja path.
    let template = ChatTemplate::from_source(concat!(
        "{% set x = messages[0] %}{% set e = messages[1] %}",
        "{{ x|tojson }}|{{ x|tojson(indent=2) }}|{{ x|tojson(separators=[',', ':'], sort_keys=true) }}",
        "|{{ e|tojson(indent=2) }}|{{ 'é🙂'|tojson(ensure_ascii=true) }}"
    ))
    .unwrap();
    let messages = json!([
        {"b": "<a href='x'>&</a>", "a": [1, 2.0, 1e-7, null, true], "ü": "\u{1}\n🙂"},
        {"k": [], "m": {}}
    ]);
    let got = template.render(&messages, None, &TemplateOptions::default()).unwrap();
    // Python: json.dumps(x), json.dumps(x, indent=2), ... with ensure_ascii=False unless given.
    let want = concat!(
        r#"{"b": "<a href='x'>&</a>", "a": [1, 2.0, 1e-07, null, true], "ü": "\u0001\n🙂"}|"#,
        "{\n  \"b\": \"<a href='x'>&</a>\",\n  \"a\": [\n    1,\n    2.0,\n    1e-07,\n    null,\n    true\n  ],\n  \"ü\": \"\\u0001\\n🙂\"\n}|",
        r#"{"a":[1,2.0,1e-07,null,true],"b":"<a href='x'>&</a>","ü":"\u0001\n🙂"}|"#,
        "{\n  \"k\": [],\n  \"m\": {}\n}|",
        r#""\u00e9\ud83d\ude42""#
    );
    assert_eq!(got, want);
}

#[test]
fn raise_exception_message_is_kept() {
    let template = ChatTemplate::from_dir(TOKENIZER_DIR).unwrap();
    let only_tool = json!([{"role": "tool", "content": "x"}]);
    let err = template.render(&only_tool, None, &TemplateOptions::default()).unwrap_err();
    let raised = err.downcast_ref::<TemplateException>().expect("a TemplateException");
    assert_eq!(raised.0, "No user query found in messages.");
    assert!(err.to_string().contains("No user query found in messages."));
}

#[test]
fn from_dir_errors_name_the_directory() {
    let missing = temp_dir("no-such").join("checkpoint");
    let err = ChatTemplate::from_dir(&missing).err().expect("missing dir must fail");
    assert!(format!("{err:#}").contains(&missing.display().to_string()), "{err:#}");

    let empty = temp_dir("no-template");
    std::fs::write(empty.join("tokenizer_config.json"), r#"{"eos_token": "<|im_end|>"}"#).unwrap();
    let err = ChatTemplate::from_dir(&empty).err().expect("no template must fail");
    let msg = format!("{err:#}");
    assert!(msg.contains(&empty.display().to_string()) && msg.contains("chat_template"), "{msg}");

    std::fs::write(empty.join("tokenizer_config.json"), "{not json").unwrap();
    let err = ChatTemplate::from_dir(&empty).err().expect("bad JSON must fail");
    assert!(format!("{err:#}").contains("tokenizer_config.json"), "{err:#}");
}

#[test]
fn tokenizer_config_fallback_string_and_named_list() {
    let messages = json!([{"role": "user", "content": "hi"}]);
    let opts = TemplateOptions::default();
    let dir = temp_dir("config-string");
    let config =
        json!({"eos_token": {"content": "<|im_end|>"}, "chat_template": "{{ messages[0].content }}{{ eos_token }}"});
    std::fs::write(dir.join("tokenizer_config.json"), config.to_string()).unwrap();
    assert_eq!(ChatTemplate::from_dir(&dir).unwrap().render(&messages, None, &opts).unwrap(), "hi<|im_end|>");

    let dir = temp_dir("config-list");
    let config = json!({"chat_template": [
        {"name": "tool_use", "template": "tools"},
        {"name": "default", "template": "default {{ messages|length }}"}
    ]});
    std::fs::write(dir.join("tokenizer_config.json"), config.to_string()).unwrap();
    assert_eq!(ChatTemplate::from_dir(&dir).unwrap().render(&messages, None, &opts).unwrap(), "default 1");
}

#[test]
fn python_string_semantics() {
    // Python's str.strip() also strips U+001C..U+001F; Rust's trim does not.
    let template = ChatTemplate::from_source(concat!(
        "[{{ messages[0].content|trim }}][{{ messages[0].content.strip() }}]",
        "[{{ messages[0].content.rstrip() }}][{{ 'a.b.c'.split('.')[-1] }}]",
        "[{{ 'xxhixx'.lstrip('x') }}][{{ strftime_now('%Y')|length }}]"
    ))
    .unwrap();
    let messages = json!([{"role": "user", "content": "\u{1f} hi \u{1c}\n"}]);
    let got = template.render(&messages, None, &TemplateOptions::default()).unwrap();
    assert_eq!(got, "[hi][hi][\u{1f} hi][c][hixx][4]");
}
