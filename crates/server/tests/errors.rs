//! Every error status the server gives, each with OpenAI's error object; fields clients commonly
//! send are accepted. (503 for a full queue is in `scripted.rs`.)

mod common;

use common::*;
use serde_json::{json, Value};

fn server() -> solo_server::Server {
    let mut c = config();
    c.max_seq = Some(64);
    c.max_body_bytes = 4096;
    start_scripted(c, vec![Script::text("hello", "ok\n</think>\n\nHi.")])
}

/// Asserts the status and the error object's shape; returns the message.
fn error(status: u16, body: &Value, want: u16) -> String {
    assert_eq!(status, want, "{body}");
    let e = &body["error"];
    assert!(e["type"].is_string() && e.get("param").is_some() && e.get("code").is_some(), "{body}");
    e["message"].as_str().unwrap().to_string()
}

fn chat(extra: Value) -> Value {
    let mut body = json!({"messages": user("hello"), "max_tokens": 16});
    body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    body
}

#[test]
fn bad_requests_are_400_and_say_why() {
    let s = server();
    let raw = client().post(url(&s, "/v1/chat/completions")).body("{not json").send().unwrap();
    let status = raw.status().as_u16();
    assert!(error(status, &raw.json().unwrap(), 400).contains("JSON"));

    let cases: Vec<(Value, &str)> = vec![
        (json!([1, 2]), "JSON object"),
        (json!({"max_tokens": 3}), "`messages` is required"),
        (json!({"messages": []}), "must not be empty"),
        (json!({"messages": [{"role": "wizard", "content": "x"}]}), "unknown role"),
        (json!({"messages": [{"role": "assistant", "content": "only me"}]}), "No user query"),
        (chat(json!({"n": 2})), "not supported"),
        (chat(json!({"temperature": "hot"})), "`temperature` must be a number"),
        (chat(json!({"temperature": 3})), "between 0 and 2"),
        (chat(json!({"top_p": 0})), "top_p"),
        (chat(json!({"max_tokens": 0})), "at least 1"),
        (chat(json!({"logprobs": true, "top_logprobs": 21})), "between 0 and 20"),
        (chat(json!({"top_logprobs": 2})), "needs `logprobs`"),
        (chat(json!({"stop": [1]})), "`stop` must be"),
        (chat(json!({"stop": "x".repeat(2000)})), "at most 1024 bytes"),
        (chat(json!({"logit_bias": {"99999": 1}})), "logit_bias"),
        (chat(json!({"response_format": {"type": "json_object"}})), "not supported"),
        (chat(json!({"functions": []})), "not supported"),
        (chat(json!({"tool_choice": "required"})), "no `tools`"),
        (
            chat(
                json!({"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": "g"}}}),
            ),
            "not in `tools`",
        ),
        (chat(json!({"tools": [{"type": "code_interpreter"}]})), "not supported"),
        (
            json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}),
            "messages[0].content[0]: this server does not take images",
        ),
        (chat(json!({"chat_template_kwargs": {"enable_thinking": "yes"}})), "boolean"),
        (
            json!({"messages": [{"role": "user", "content": [{"type": "audio", "audio": "x"}]}]}),
            "Content parts of type audio",
        ),
    ];
    for (body, needle) in cases {
        let (status, json) = post(&s, "/v1/chat/completions", &body);
        let message = error(status, &json, 400);
        assert!(message.contains(needle), "{body} → {message}");
    }
    let (status, json) = post(&s, "/v1/completions", &json!({"prompt": ["a", "b"]}));
    assert!(error(status, &json, 400).contains("not supported"));
    let (status, json) = post(&s, "/v1/completions", &json!({"prompt": "a", "echo": true}));
    assert!(error(status, &json, 400).contains("not supported"));
}

#[test]
fn prompt_plus_max_tokens_past_the_context_is_400_with_the_numbers() {
    let s = server();
    let (status, json) = post(&s, "/v1/chat/completions", &chat(json!({"max_tokens": 1000})));
    let message = error(status, &json, 400);
    let prompt = ok(&s, "/v1/chat/completions", &chat(json!({})))["usage"]["prompt_tokens"].as_u64().unwrap();
    assert!(message.contains("maximum context length is 64 tokens"), "{message}");
    assert!(
        message.contains(&format!("{} tokens ({prompt} in the messages, 1000 in the completion)", prompt + 1000)),
        "{message}"
    );
    let long = "hello ".repeat(100);
    let (status, json) = post(&s, "/v1/chat/completions", &json!({"messages": user(&long)}));
    assert!(error(status, &json, 400).contains("resulted in"));
}

#[test]
fn common_client_fields_are_accepted() {
    let s = server();
    let body = chat(json!({
        "model": "tiny-a", "user": "u1", "metadata": {"k": "v"}, "store": false, "service_tier": "auto",
        "parallel_tool_calls": true, "reasoning_effort": "low", "n": 1, "response_format": {"type": "text"},
        "stream_options": null, "logprobs": false, "frequency_penalty": 0, "some_future_field": [1, 2, 3],
    }));
    assert_eq!(ok(&s, "/v1/chat/completions", &body)["choices"][0]["message"]["content"], "Hi.");
}

#[test]
fn auth_is_401_without_the_key() {
    let mut c = config();
    c.api_key = Some("sekret".into());
    let s = start_scripted(c, vec![]);
    let body = chat(json!({}));
    let (status, json) = post(&s, "/v1/chat/completions", &body);
    assert!(error(status, &json, 401).contains("didn't provide an API key"));
    let wrong = client().post(url(&s, "/v1/chat/completions")).bearer_auth("nope").json(&body).send().unwrap();
    assert_eq!(wrong.status().as_u16(), 401);
    assert_eq!(client().get(url(&s, "/v1/models")).send().unwrap().status().as_u16(), 401);
    let right = client().post(url(&s, "/v1/chat/completions")).bearer_auth("sekret").json(&body).send().unwrap();
    assert_eq!(right.status().as_u16(), 200);
    assert_eq!(get(&s, "/health").0, 200, "probes need no key");
}

#[test]
fn unknown_routes_models_and_methods() {
    let s = server();
    let (status, body) = get(&s, "/v2/whatever");
    assert!(error(status, &serde_json::from_str(&body).unwrap(), 404).contains("/v2/whatever"));
    let (status, json) = post(&s, "/v1/chat/completions", &chat(json!({"model": "gpt-4o"})));
    assert!(error(status, &json, 404).contains("gpt-4o"));
    assert_eq!(json["error"]["code"], "model_not_found");
    let (status, json) = post(&s, "/v1/completions", &json!({"model": "nope", "prompt": "x"}));
    error(status, &json, 404);
    let (status, body) = get(&s, "/v1/models/other");
    error(status, &serde_json::from_str(&body).unwrap(), 404);
    let (status, body) = get(&s, "/v1/chat/completions");
    error(status, &serde_json::from_str(&body).unwrap(), 405);
}

#[test]
fn an_oversized_body_is_413() {
    let s = server();
    let big = chat(json!({"user": "x".repeat(5000)}));
    let (status, json) = post(&s, "/v1/chat/completions", &big);
    assert!(error(status, &json, 413).contains("4096"));
}

#[test]
fn engine_failures_are_500_without_details_and_the_server_lives_on() {
    let s = server();
    for trigger in ["FAIL", "PANIC"] {
        let (status, json) = post(&s, "/v1/chat/completions", &json!({"messages": user(trigger)}));
        let message = error(status, &json, 500);
        assert!(!message.contains("scripted"), "internal details leaked: {message}");
        assert_eq!(json["error"]["type"], "server_error");
    }
    assert_eq!(ok(&s, "/v1/chat/completions", &chat(json!({})))["choices"][0]["message"]["content"], "Hi.");
    let (_, metrics) = get(&s, "/metrics");
    assert!(metrics.contains("status=\"500\"} 2"), "{metrics}");
}
