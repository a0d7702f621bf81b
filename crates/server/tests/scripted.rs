//! The full HTTP path with a scripted model: reasoning split, tool calls (streamed too, inside
//! the think block, forced by tool_choice), stop strings, the prefix cache, cancellation,
//! the queue and timeouts.

mod common;

use common::*;
use serde_json::{json, Value};
use std::time::Duration;

const WEATHER_TOOL: &str = r#"{"type": "function", "function": {"name": "get_weather", "description": "Weather forecast",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}"#;

fn tools() -> Value {
    json!([serde_json::from_str::<Value>(WEATHER_TOOL).unwrap()])
}

const CALL: &str = "I need the weather.\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>";

fn server() -> solo_server::Server {
    start_scripted(
        config(),
        vec![
            Script::text("ADD", "Two plus two.\n</think>\n\nThe answer is 4."),
            Script::text("PLAIN", "Plain answer."),
            Script::text("WEATHER", CALL),
            Script::text("INSIDE", "Let me check <tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>"),
            Script::text("COUNT", "one two three four"),
        ],
    )
}

#[test]
fn reasoning_is_split_from_content() {
    let s = server();
    let body = json!({"messages": user("ADD please")});
    let r = ok(&s, "/v1/chat/completions", &body);
    let choice = &r["choices"][0];
    assert_eq!(choice["message"]["reasoning_content"], "Two plus two.");
    assert_eq!(choice["message"]["content"], "The answer is 4.");
    assert_eq!(choice["finish_reason"], "stop");
    assert!(choice["message"].get("tool_calls").is_none());

    let mut body = body;
    body["stream"] = json!(true);
    let a = assemble(&stream(&s, "/v1/chat/completions", &body));
    assert_eq!((a.reasoning.as_str(), a.content.as_str()), ("Two plus two.", "The answer is 4."));
    assert_eq!(a.finish_reason.as_deref(), Some("stop"));
    assert!(a.usage.is_none(), "no usage chunk unless asked");
}

#[test]
fn thinking_off_gives_content_only() {
    let s = server();
    let r = ok(
        &s,
        "/v1/chat/completions",
        &json!({"messages": user("PLAIN"), "chat_template_kwargs": {"enable_thinking": false}}),
    );
    assert_eq!(r["choices"][0]["message"]["content"], "Plain answer.");
    assert_eq!(r["choices"][0]["message"]["reasoning_content"], Value::Null);
}

fn check_weather_call(name: &str, args: &str) {
    assert_eq!(name, "get_weather");
    assert_eq!(serde_json::from_str::<Value>(args).unwrap(), json!({"city": "Paris", "days": 3}));
}

#[test]
fn tool_calls_become_openai_tool_calls() {
    let s = server();
    let body = json!({"messages": user("WEATHER in Paris?"), "tools": tools()});
    let r = ok(&s, "/v1/chat/completions", &body);
    let choice = &r["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["content"], Value::Null);
    assert_eq!(choice["message"]["reasoning_content"], "I need the weather.");
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["type"], "function");
    assert!(call["id"].as_str().unwrap().starts_with("call_"));
    check_weather_call(call["function"]["name"].as_str().unwrap(), call["function"]["arguments"].as_str().unwrap());

    let mut body = body;
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
    let a = assemble(&stream(&s, "/v1/chat/completions", &body));
    assert_eq!(a.tool_calls.len(), 1);
    check_weather_call(&a.tool_calls[0].1, &a.tool_calls[0].2);
    assert_eq!(a.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!((a.reasoning.as_str(), a.content.as_str()), ("I need the weather.", ""));
    assert_eq!(a.usage.unwrap()["completion_tokens"], r["usage"]["completion_tokens"]);
}

#[test]
fn a_tool_call_inside_the_think_block_is_not_lost() {
    let s = server();
    let r = ok(&s, "/v1/chat/completions", &json!({"messages": user("INSIDE"), "tools": tools()}));
    let choice = &r["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["reasoning_content"], "Let me check");
    assert_eq!(choice["message"]["tool_calls"][0]["function"]["arguments"], r#"{"city": "Oslo"}"#);
}

#[test]
fn tool_choice_none_leaves_tools_out() {
    let s = server();
    let with = ok(&s, "/v1/chat/completions", &json!({"messages": user("WEATHER"), "tools": tools()}));
    let none =
        ok(&s, "/v1/chat/completions", &json!({"messages": user("WEATHER"), "tools": tools(), "tool_choice": "none"}));
    let message = &none["choices"][0]["message"];
    assert!(message.get("tool_calls").is_none());
    assert!(message["content"].as_str().unwrap().starts_with("<tool_call>"));
    assert_eq!(none["choices"][0]["finish_reason"], "stop");
    let prompt = |r: &Value| r["usage"]["prompt_tokens"].as_u64().unwrap();
    assert!(prompt(&none) < prompt(&with), "tool schemas are not rendered with tool_choice none");
}

/// The script never calls a tool; `tool_choice` forces the call's opening tags after the
/// reasoning, and the script's filler tokens in their place are never seen.
#[test]
fn named_and_required_tool_choice_force_a_call() {
    let tok = tokenizer();
    let think_end = tok.token_id("</think>").unwrap();
    let script = |trigger: &str, forced: &str, rest: &str| {
        let mut out = tok.encode("Thinking.").unwrap();
        out.push(think_end);
        let filler = tok.encode("x").unwrap()[0];
        out.extend(std::iter::repeat_n(filler, tok.encode(forced).unwrap().len()));
        out.extend(tok.encode(rest).unwrap());
        Script::tokens(trigger, out)
    };
    let s = start_scripted(
        config(),
        vec![
            script(
                "NAMED",
                "\n\n<tool_call>\n<function=get_weather>\n",
                "<parameter=city>\nRome\n</parameter>\n</function>\n</tool_call>",
            ),
            script(
                "REQUIRED",
                "\n\n<tool_call>\n",
                "<function=get_weather>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>",
            ),
        ],
    );
    let named = json!({"type": "function", "function": {"name": "get_weather"}});
    let r = ok(&s, "/v1/chat/completions", &json!({"messages": user("NAMED"), "tools": tools(), "tool_choice": named}));
    let m = &r["choices"][0]["message"];
    assert_eq!(m["tool_calls"][0]["function"]["arguments"], r#"{"city": "Rome"}"#, "{r}");
    assert_eq!(m["content"], Value::Null);
    assert_eq!(r["choices"][0]["finish_reason"], "tool_calls");
    let r = ok(
        &s,
        "/v1/chat/completions",
        &json!({"messages": user("REQUIRED"), "tools": tools(), "tool_choice": "required"}),
    );
    assert_eq!(r["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], r#"{"days": 2}"#, "{r}");
}

#[test]
fn tool_round_trip_renders_and_hits_the_cache() {
    let s = server();
    let first = ok(&s, "/v1/chat/completions", &json!({"messages": user("WEATHER in Paris?"), "tools": tools()}));
    let message = first["choices"][0]["message"].clone();
    let call_id = message["tool_calls"][0]["id"].clone();
    let messages = json!([
        {"role": "user", "content": "WEATHER in Paris?"},
        message,
        {"role": "tool", "tool_call_id": call_id, "content": "{\"forecast\": \"sunny\"}"},
    ]);
    let second = ok(&s, "/v1/chat/completions", &json!({"messages": messages, "tools": tools()}));
    let cached = second["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap();
    assert!(cached > 0, "{second}");
}

#[test]
fn stop_strings_end_the_reply() {
    let s = server();
    let body =
        json!({"messages": user("COUNT"), "chat_template_kwargs": {"enable_thinking": false}, "stop": ["thr", "zzz"]});
    let r = ok(&s, "/v1/chat/completions", &body);
    assert_eq!(r["choices"][0]["message"]["content"], "one two");
    assert_eq!(r["choices"][0]["finish_reason"], "stop");
    let mut body = body;
    body["stream"] = json!(true);
    body["stop"] = json!("four");
    let a = assemble(&stream(&s, "/v1/chat/completions", &body));
    assert_eq!((a.content.as_str(), a.finish_reason.as_deref()), ("one two three", Some("stop")));
}

/// Thinking off: the reply's state is cached and the next turn's render extends it exactly
/// (the empty think block is written into the earlier turn).
#[test]
fn prefix_cache_covers_the_previous_reply() {
    let s = server();
    let kwargs = json!({"enable_thinking": false});
    let first = ok(&s, "/v1/chat/completions", &json!({"messages": user("PLAIN one"), "chat_template_kwargs": kwargs}));
    let reply = first["choices"][0]["message"]["content"].as_str().unwrap().to_string();
    let p1 = first["usage"]["prompt_tokens"].as_u64().unwrap();
    let messages = json!([
        {"role": "user", "content": "PLAIN one"},
        {"role": "assistant", "content": reply},
        {"role": "user", "content": "PLAIN two"},
    ]);
    let second = ok(&s, "/v1/chat/completions", &json!({"messages": messages, "chat_template_kwargs": kwargs}));
    let cached = second["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap();
    let reply_tokens = tokenizer().encode("Plain answer.").unwrap().len() as u64;
    assert_eq!(cached, p1 + reply_tokens, "{second}");
}

#[test]
fn a_disconnected_stream_is_cancelled_at_the_next_token() {
    let s = start_scripted(config(), vec![Script::text("SLOW", &"word ".repeat(200)).slow(Duration::from_millis(20))]);
    let body = json!({"messages": user("SLOW"), "stream": true, "max_tokens": 400});
    {
        let response = client().post(url(&s, "/v1/chat/completions")).json(&body).send().unwrap();
        let mut reader = std::io::BufReader::new(response);
        let mut line = String::new();
        std::io::BufRead::read_line(&mut reader, &mut line).unwrap();
        assert!(line.starts_with("data: "));
    } // dropped: the connection closes
    wait_for("the cancellation", || metric(&s, "solo_requests_cancelled_total") == 1.0);
    wait_for("the engine to go idle", || metric(&s, "solo_requests_running") == 0.0);
    assert!(metric(&s, "solo_completion_tokens_total") < 150.0);
}

#[test]
fn a_disconnected_plain_request_is_cancelled_too() {
    let s = start_scripted(config(), vec![Script::text("SLOW", &"word ".repeat(200)).slow(Duration::from_millis(20))]);
    let short = reqwest::blocking::Client::builder().no_proxy().timeout(Duration::from_millis(300)).build().unwrap();
    let result =
        short.post(url(&s, "/v1/chat/completions")).json(&json!({"messages": user("SLOW"), "max_tokens": 400})).send();
    assert!(result.is_err(), "the client gave up");
    wait_for("the cancellation", || metric(&s, "solo_requests_cancelled_total") == 1.0);
    assert!(metric(&s, "solo_completion_tokens_total") < 150.0);
}

#[test]
fn a_full_queue_answers_503_with_retry_after() {
    let mut c = config();
    c.max_queue = 1;
    c.max_batch = 1;
    let s = start_scripted(c, vec![Script::text("SLOW", &"word ".repeat(100)).slow(Duration::from_millis(20))]);
    let body = json!({"messages": user("SLOW"), "stream": true, "max_tokens": 200});
    // A runs...
    let running = client().post(url(&s, "/v1/chat/completions")).json(&body).send().unwrap();
    wait_for("A to run", || metric(&s, "solo_requests_running") == 1.0);
    // ...B waits...
    let addr = url(&s, "/v1/chat/completions");
    let waiting = std::thread::spawn(move || {
        let r = client().post(addr).json(&json!({"messages": user("quick"), "max_tokens": 3})).send().unwrap();
        r.status().as_u16()
    });
    wait_for("B to queue", || metric(&s, "solo_queue_depth") == 1.0);
    // ...and C is turned away.
    let c = client().post(url(&s, "/v1/chat/completions")).json(&json!({"messages": user("quick")})).send().unwrap();
    assert_eq!(c.status().as_u16(), 503);
    assert_eq!(c.headers()["retry-after"], "1");
    let err: Value = c.json().unwrap();
    assert_eq!(err["error"]["type"], "server_error");
    drop(running); // A is cancelled, B runs
    assert_eq!(waiting.join().unwrap(), 200);
}

#[test]
fn the_request_timeout_ends_generation() {
    let mut c = config();
    c.request_timeout = Duration::from_millis(300);
    let s = start_scripted(c, vec![Script::text("SLOW", &"word ".repeat(100)).slow(Duration::from_millis(20))]);
    let r = ok(&s, "/v1/chat/completions", &json!({"messages": user("SLOW"), "max_tokens": 200}));
    assert_eq!(r["choices"][0]["finish_reason"], "length");
    assert!(r["usage"]["completion_tokens"].as_u64().unwrap() < 100);
    assert_eq!(metric(&s, "solo_requests_timed_out_total"), 1.0);
}

/// Requests run together: a second slow stream starts while the first is running, and a short
/// request gets its whole reply meanwhile; the batch-size histogram saw both at once.
#[test]
fn requests_generate_at_the_same_time() {
    let mut c = config();
    c.max_batch = 2;
    let s = start_scripted(c, vec![Script::text("SLOW", &"word ".repeat(100)).slow(Duration::from_millis(20))]);
    let body = json!({"messages": user("SLOW"), "stream": true, "max_tokens": 200});
    let a = client().post(url(&s, "/v1/chat/completions")).json(&body).send().unwrap();
    wait_for("A to run", || metric(&s, "solo_running_sequences") == 1.0);
    let quick = ok(&s, "/v1/chat/completions", &json!({"messages": user("quick"), "max_tokens": 3}));
    assert_eq!(quick["choices"][0]["finish_reason"], "stop", "{quick}");
    assert_eq!(metric(&s, "solo_running_sequences"), 1.0, "A was still running");
    let b = client().post(url(&s, "/v1/chat/completions")).json(&body).send().unwrap();
    wait_for("A and B to run together", || metric(&s, "solo_running_sequences") == 2.0);
    drop((a, b));
    wait_for("both to be cancelled", || metric(&s, "solo_requests_cancelled_total") == 2.0);
    let steps = metric(&s, "solo_batch_size_count");
    let single = metric_labelled(&s, "solo_batch_size_bucket", "le=\"1\"");
    assert!(single < steps, "no step ran two sequences ({single} of {steps} steps ran one)");
}

/// Prompts are built on the handler's thread up to `INLINE_PROMPT_BYTES` of body and on a
/// blocking thread past it: either way the same reply, and the prompt the template and the
/// tokenizer give.
#[test]
fn small_and_large_bodies_get_the_same_prompts() {
    let s = server();
    let limit = solo_server::handlers::INLINE_PROMPT_BYTES;
    let template = solo_text::ChatTemplate::from_dir(fixture()).unwrap();
    for filler in [limit / 4, limit * 2] {
        let content = format!("PLAIN {}", "x".repeat(filler));
        let body = json!({"messages": user(&content), "chat_template_kwargs": {"enable_thinking": false}});
        let size = body.to_string().len();
        assert_eq!(size > limit, filler > limit, "{size}");
        let r = ok(&s, "/v1/chat/completions", &body);
        assert_eq!(r["choices"][0]["message"]["content"], "Plain answer.", "{size}");
        let opts = solo_text::TemplateOptions {
            add_generation_prompt: true,
            enable_thinking: Some(false),
            preserve_thinking: Some(true),
        };
        let text = template.render(&user(&content), None, &opts).unwrap();
        assert_eq!(r["usage"]["prompt_tokens"], tokenizer().encode(&text).unwrap().len(), "{size}");

        let prompt = format!("PLAIN {}", "y".repeat(filler));
        let r = ok(&s, "/v1/completions", &json!({"prompt": prompt, "max_tokens": 20}));
        assert_eq!(r["usage"]["prompt_tokens"], tokenizer().encode(&prompt).unwrap().len(), "{size}");
        assert_eq!(r["choices"][0]["text"], "Plain answer.", "{size}");
    }
}
