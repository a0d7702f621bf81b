//! Issue #42 end to end: `solo serve --cloud-url` (scripted local engine) in front of a capture
//! server that records every byte the "cloud" receives. Nothing private may be in those bytes:
//! facts about a person in system and tool turns, a topic told over several turns, the request's
//! other fields (metadata, user, names, tool definitions, stop), values split over turns,
//! credentials passed by position, and the held-out set of 64 conversations
//! (crates/gate/tests/corpus/leaks_heldout.jsonl, written before the gate changed). Also: masked
//! values come back restored, consent covers the values shown and no others, and a failing cloud
//! is told apart from a privacy decision and bounded in time.

mod common;

use axum::body::{Body, Bytes};
use axum::response::{IntoResponse, Response};
use common::*;
use serde_json::{json, Value};
use solo_gate::Policy;
use solo_server::hybrid::HybridConfig;
use solo_server::Server;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How the capture server answers.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// `ECHO: <last user message>`, streamed in 3-character pieces when asked.
    Echo,
    /// 500 with an error body.
    Fails,
    /// Never answers.
    Hangs,
    /// Streams one piece, then nothing for a minute.
    Stalls,
}

/// Every request body the cloud received, as bytes.
type Log = Arc<Mutex<Vec<Vec<u8>>>>;

struct Capture {
    url: String,
    log: Log,
    _stop: tokio::sync::oneshot::Sender<()>,
}

fn capture(mode: Mode) -> Capture {
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let state = log.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(async move {
            let app = axum::Router::new().route(
                "/v1/chat/completions",
                axum::routing::post(move |body: Bytes| {
                    let log = state.clone();
                    async move {
                        log.lock().unwrap().push(body.to_vec());
                        answer(mode, &body).await
                    }
                }),
            );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            addr_tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = rx.await;
                })
                .await
                .unwrap();
        });
    });
    let addr = addr_rx.recv().unwrap();
    Capture { url: format!("http://{addr}/v1"), log, _stop: tx }
}

fn chunk(delta: Value, finish: Value) -> String {
    format!(
        "data: {}\n\n",
        json!({"id": "c1", "object": "chat.completion.chunk", "model": "cloud", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    )
}

async fn answer(mode: Mode, body: &[u8]) -> Response {
    let body: Value = serde_json::from_slice(body).unwrap();
    match mode {
        Mode::Fails => {
            return (
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                axum::Json(json!({"error": {"message": "upstream exploded", "type": "server_error"}})),
            )
                .into_response()
        }
        Mode::Hangs => {
            tokio::time::sleep(Duration::from_secs(60)).await;
        }
        _ => {}
    }
    let last = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_string();
    let text = format!("ECHO: {last}");
    if body["stream"] == true {
        let first = chunk(json!({"role": "assistant", "content": ""}), Value::Null);
        if mode == Mode::Stalls {
            let pieces = futures_util::stream::iter(vec![Ok::<_, std::io::Error>(Bytes::from(
                first + &chunk(json!({"content": "ECH"}), Value::Null),
            ))]);
            let stall = futures_util::stream::once(async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok::<_, std::io::Error>(Bytes::from("data: [DONE]\n\n"))
            });
            use futures_util::StreamExt;
            return ([("content-type", "text/event-stream")], Body::from_stream(pieces.chain(stall))).into_response();
        }
        let mut sse = first;
        let chars: Vec<char> = text.chars().collect();
        for piece in chars.chunks(3) {
            sse += &chunk(json!({"content": piece.iter().collect::<String>()}), Value::Null);
        }
        sse += &chunk(json!({}), json!("stop"));
        sse += "data: [DONE]\n\n";
        return ([("content-type", "text/event-stream")], Body::from(sse)).into_response();
    }
    axum::Json(json!({
        "id": "c1", "object": "chat.completion", "created": 0, "model": "cloud",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
    }))
    .into_response()
}

fn audit_path(tag: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("solo-leaks-audit-{tag}-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

fn hybrid(cloud_url: &str, policy: Policy, audit: &std::path::Path, timeout: Duration) -> Server {
    let mut c = config();
    c.hybrid = Some(HybridConfig {
        cloud_url: Some(cloud_url.to_string()),
        cloud_model: None,
        cloud_key: None,
        policy,
        audit_log: Some(audit.to_path_buf()),
        judge: None,
        cloud_timeout: timeout,
    });
    start_scripted(c, vec![Script::text("user", "LOCAL ANSWER")])
}

struct Reply {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Value,
    /// The streamed events, for a streamed request.
    events: Vec<Value>,
}

impl Reply {
    fn header(&self, name: &str) -> String {
        self.headers.get(name).map(|v| v.to_str().unwrap().to_string()).unwrap_or_default()
    }
    fn content(&self) -> String {
        if self.events.is_empty() {
            return self.body["choices"][0]["message"]["content"].as_str().unwrap_or("").to_string();
        }
        self.events.iter().filter_map(|e| e["choices"][0]["delta"]["content"].as_str()).collect()
    }
}

fn send(server: &Server, body: &Value, headers: &[(&str, &str)]) -> Reply {
    let mut req = client().post(url(server, "/v1/chat/completions")).json(body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let r = req.send().unwrap();
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    let text = r.text().unwrap();
    let mut events = Vec::new();
    if headers.get("content-type").is_some_and(|v| v == "text/event-stream") {
        for line in text.lines() {
            if let Some(d) = line.strip_prefix("data: ") {
                events.push(serde_json::from_str(d).unwrap_or_else(|_| Value::from(d)));
            }
        }
    }
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Reply { status, headers, body, events }
}

/// Nothing the cloud received holds any of `values` (case-insensitive, JSON-escaped or not).
fn assert_never_sent(log: &Log, values: &[&str], what: &str) {
    for bytes in log.lock().unwrap().iter() {
        let raw = String::from_utf8_lossy(bytes).to_lowercase();
        // The body as JSON text decodes escapes (`\u00e9`): check the decoded strings too.
        let decoded = serde_json::from_slice::<Value>(bytes).map(|v| flatten(&v).to_lowercase()).unwrap_or_default();
        for v in values {
            let v = v.to_lowercase();
            assert!(!raw.contains(&v) && !decoded.contains(&v), "{what}: {v:?} reached the cloud: {raw}");
        }
    }
}

fn flatten(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(flatten).collect::<Vec<_>>().join("\n"),
        Value::Object(m) => m.iter().map(|(k, v)| format!("{k}\n{}", flatten(v))).collect::<Vec<_>>().join("\n"),
        _ => v.to_string(),
    }
}

fn u(t: &str) -> Value {
    json!({"role": "user", "content": t})
}
fn sys(t: &str) -> Value {
    json!({"role": "system", "content": t})
}
fn asst(t: &str) -> Value {
    json!({"role": "assistant", "content": t})
}
fn tool_turns(name: &str, result: &str) -> [Value; 2] {
    [
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": name, "arguments": "{\"id\": \"7\"}"}}]}),
        json!({"role": "tool", "tool_call_id": "call_1", "content": result}),
    ]
}

/// The issue's leak cases: (what, request, private strings).
fn issue_cases() -> Vec<(&'static str, Value, Vec<&'static str>)> {
    let [c1, t1] =
        tool_turns("crm_lookup", "{\"account\": \"A-7\", \"notes\": \"customer is filing Chapter 7 bankruptcy\"}");
    let [c2, t2] = tool_turns("case_status", "asylum application denied; removal proceedings scheduled");
    vec![
        (
            "system, third person",
            json!({"messages": [sys("Context about the user: undocumented, deportation hearing on June 3, injects insulin twice a day."), u("Recommend a movie for tonight.")]}),
            vec!["deportation", "insulin", "undocumented"],
        ),
        (
            "system, the user has",
            json!({"messages": [sys("The user has stage 3 breast cancer and is in chemotherapy."), u("Recommend a movie for tonight.")]}),
            vec!["breast cancer", "chemotherapy"],
        ),
        (
            "tool result, customer",
            json!({"messages": [u("Look up the account, then draft a renewal reminder."), c1, t1, u("Write the reminder now.")]}),
            vec!["bankruptcy", "chapter 7"],
        ),
        (
            "tool result, no subject",
            json!({"messages": [u("Check the case, then make me a checklist."), c2, t2, u("Make the checklist.")]}),
            vec!["asylum", "removal proceedings"],
        ),
        (
            "a topic split over turns",
            json!({"messages": [u("got a call from the clinic today"), asst("Oh? What did they say?"), u("the biopsy was malignant"), asst("I'm so sorry."), u("recommend a funny podcast")]}),
            vec!["biopsy", "malignant"],
        ),
        (
            "metadata and user",
            json!({"messages": [u("Summarise the benefits of a standing desk.")], "metadata": {"diagnosis": "HIV positive", "patient_id": "MRN-20931177"}, "user": "jennifer.morales@northwind-mail.com"}),
            vec!["hiv positive", "MRN-20931177", "jennifer.morales@northwind-mail.com"],
        ),
        (
            "tool definitions",
            json!({"messages": [u("Book the follow-up for Tuesday.")], "tools": [{"type": "function", "function": {"name": "book_visit", "description": "Books visits. Contact: lena.vogt@clinic-mail.de, +49 30 2099 4471. The patient Lena Vogt has epilepsy.", "parameters": {"type": "object", "properties": {"slot": {"type": "string", "description": "reply to lena.vogt@clinic-mail.de"}}}}}]}),
            vec!["lena.vogt@clinic-mail.de", "2099 4471", "epilepsy"],
        ),
        (
            "stop and name",
            json!({"messages": [{"role": "user", "name": "Jennifer_Morales", "content": "What should I pack for Lisbon?"}], "stop": ["call +1 415 555 0187"]}),
            vec!["Jennifer_Morales", "415 555 0187"],
        ),
        (
            "a card split over turns",
            json!({"messages": [u("my card number starts 4539 1488"), asst("Go on."), u("and ends 0343 6467. Is it a Visa?")]}),
            vec!["4539 1488", "0343 6467"],
        ),
        (
            "a phone split over turns",
            json!({"messages": [u("my mobile is +44 7700"), asst("And the rest?"), u("900 481, format it for a contact card")]}),
            vec!["7700", "900 481"],
        ),
        (
            "a password by position",
            json!({"messages": [u("Why does this time out?\n```python\nserver.login('ops@northwind.local', 'Winter2024!Northwind')\n```")]}),
            vec!["Winter2024!Northwind"],
        ),
        (
            "a metadata key",
            json!({"messages": [u("What is the capital of France?")], "metadata": {"jennifer.morales@northwind-mail.com": "vip"}}),
            vec!["jennifer.morales@northwind-mail.com"],
        ),
        (
            "an unknown field",
            json!({"messages": [u("What is the capital of France?")], "x_private_notes": "SSN 123-45-6789, diagnosis: HIV"}),
            vec!["123-45-6789", "x_private_notes"],
        ),
    ]
}

#[test]
fn the_issues_leak_cases_never_reach_the_cloud_streamed_or_not() {
    let up = capture(Mode::Echo);
    let audit = audit_path("cases");
    let server = hybrid(&up.url, Policy::default(), &audit, Duration::from_secs(10));
    for (n, (what, mut req, private)) in issue_cases().into_iter().enumerate() {
        for stream in [false, true] {
            req["stream"] = json!(stream);
            let conv = format!("case-{n}-{stream}");
            let r = send(&server, &req, &[("x-solo-conversation", &conv)]);
            assert!(matches!(r.status, 200 | 428), "{what}: {} {}", r.status, r.body);
            assert_never_sent(&up.log, &private, what);
        }
    }
    // The unknown field was dropped, the request itself went out.
    let sent = up.log.lock().unwrap().iter().map(|b| String::from_utf8_lossy(b).to_string()).collect::<Vec<_>>();
    assert!(sent.iter().any(|s| s.contains("capital of France")), "{sent:?}");
    let lines = std::fs::read_to_string(&audit).unwrap();
    assert!(lines.contains("\"dropped_fields\":[\"x_private_notes\"]"), "{lines}");
    let _ = std::fs::remove_file(&audit);
}

#[test]
fn keep_local_says_why_and_masked_values_come_back() {
    let up = capture(Mode::Echo);
    let audit = audit_path("why");
    let server = hybrid(&up.url, Policy::default(), &audit, Duration::from_secs(10));
    let req = json!({"messages": [sys("The user has stage 3 breast cancer and is in chemotherapy."), u("Recommend a movie.")]});
    let r = send(&server, &req, &[]);
    assert_eq!((r.status, r.header("x-solo-route").as_str()), (200, "local"), "{}", r.body);
    let why = r.header("x-solo-reason");
    assert!(why.starts_with("HEALTH (") && why.contains("chemotherapy"), "{why}");
    let lines = std::fs::read_to_string(&audit).unwrap();
    assert!(lines.contains("\"reason\":\"HEALTH (") && lines.contains("chemotherapy"), "{lines}");

    // Masked wherever it stands, restored in the answer, streamed too.
    for stream in [false, true] {
        let req = json!({"stream": stream, "messages": [u("Write to laura.benning@outlook.com about the renewal.")],
                         "user": "laura.benning@outlook.com", "stop": ["laura.benning@outlook.com"]});
        let r = send(&server, &req, &[]);
        assert_eq!((r.status, r.header("x-solo-route").as_str()), (200, "cloud"), "{}", r.body);
        assert_eq!(r.content(), "ECHO: Write to laura.benning@outlook.com about the renewal.");
        let last = String::from_utf8(up.log.lock().unwrap().last().unwrap().clone()).unwrap();
        let sent: Value = serde_json::from_str(&last).unwrap();
        assert_eq!(sent["user"], "[EMAIL_1]");
        assert_eq!(sent["stop"], json!(["[EMAIL_1]"]));
        assert_eq!(sent["messages"][0]["content"], "Write to [EMAIL_1] about the renewal.");
    }
    let _ = std::fs::remove_file(&audit);
}

#[test]
fn consent_covers_the_values_shown_and_no_others() {
    let up = capture(Mode::Echo);
    let audit = audit_path("consent");
    let server = hybrid(&up.url, Policy::default(), &audit, Duration::from_secs(10));
    let conv = [("x-solo-conversation", "consent-scope")];
    let first = json!({"messages": [u("Please forward the report to Jennifer Morales.")]});
    let r = send(&server, &first, &conv);
    assert_eq!(r.status, 428, "{}", r.body);
    assert_eq!(r.body["error"]["entity_types"], json!(["PERSON"]));
    assert!(!r.body.to_string().contains("Morales"), "no values in a 428: {}", r.body);
    let token = r.body["error"]["consent_token"].as_str().unwrap().to_string();
    let with = [("x-solo-conversation", "consent-scope"), ("x-solo-consent", token.as_str())];
    let r = send(&server, &first, &with);
    assert_eq!((r.status, r.header("x-solo-route").as_str()), (200, "cloud"), "{}", r.body);
    assert!(String::from_utf8_lossy(up.log.lock().unwrap().last().unwrap()).contains("Jennifer Morales"));
    let sent_before = up.log.lock().unwrap().len();

    // A new name asks again; nothing is sent.
    let mut next = first.clone();
    next["messages"]
        .as_array_mut()
        .unwrap()
        .extend([asst("Done."), u("Her email is jennifer.morales@northwind-mail.com; also copy Carlos Ruiz.")]);
    let r = send(&server, &next, &with);
    assert_eq!(r.status, 428, "{}", r.body);
    assert_eq!(r.body["error"]["entity_types"], json!(["PERSON"]));
    assert_eq!(up.log.lock().unwrap().len(), sent_before);

    // Her email, built from the consented name, goes out masked; her name as consented.
    let mut next = first.clone();
    next["messages"]
        .as_array_mut()
        .unwrap()
        .extend([asst("Done."), u("Her email is jennifer.morales@northwind-mail.com, remind Jennifer.")]);
    let r = send(&server, &next, &with);
    assert_eq!((r.status, r.header("x-solo-route").as_str()), (200, "cloud"), "{}", r.body);
    assert_eq!(r.content(), "ECHO: Her email is jennifer.morales@northwind-mail.com, remind Jennifer.");
    assert_never_sent(&up.log, &["jennifer.morales@"], "consent scope");
    let lines = std::fs::read_to_string(&audit).unwrap();
    let last: Value = serde_json::from_str(lines.lines().last().unwrap()).unwrap();
    // Her name and its part went out by consent; Carlos Ruiz ([PERSON_2]) is not in this request.
    let consented = last["consented"]["PERSON"].as_array().unwrap();
    assert!(consented.contains(&json!("[PERSON_1]")) && !consented.contains(&json!("[PERSON_2]")), "{last}");
    assert!(!lines.contains("Jennifer") && !lines.contains("Carlos"), "no values in the audit log: {lines}");
    let _ = std::fs::remove_file(&audit);
}

#[test]
fn a_failing_cloud_is_told_apart_and_bounded() {
    let audit = audit_path("fail");
    let plain = json!({"messages": [u("What is the capital of France?")], "max_tokens": 16, "enable_thinking": false});
    let mut streamed = plain.clone();
    streamed["stream"] = json!(true);

    // Down: a local answer marked as a fallback, with the reason, in the stream too.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/v1", l.local_addr().unwrap())
    };
    let server = hybrid(&dead, Policy::default(), &audit, Duration::from_secs(2));
    let r = send(&server, &plain, &[]);
    assert_eq!((r.status, r.header("x-solo-route").as_str()), (200, "local-fallback"), "{}", r.body);
    assert!(r.header("x-solo-reason").contains("unreachable"), "{}", r.header("x-solo-reason"));
    assert_eq!(r.body["solo_route"], "local-fallback");
    assert_eq!(r.content(), "LOCAL ANSWER");
    let r = send(&server, &streamed, &[]);
    assert_eq!(r.header("x-solo-route"), "local-fallback");
    assert_eq!(r.events[0]["solo_route"], "local-fallback", "{:?}", r.events);
    assert!(r.events[0]["solo_reason"].as_str().unwrap().contains("unreachable"));
    assert_eq!(r.content(), "LOCAL ANSWER");

    // Hanging: bounded by --cloud-timeout, then the fallback.
    let hang = capture(Mode::Hangs);
    let server = hybrid(&hang.url, Policy::default(), &audit, Duration::from_secs(1));
    let t = Instant::now();
    let r = send(&server, &plain, &[]);
    assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
    assert_eq!(r.header("x-solo-route"), "local-fallback");
    assert!(r.header("x-solo-reason").contains("no answer within 1 s"), "{}", r.header("x-solo-reason"));

    // A 500: an OpenAI-style 502 naming the cloud, never passed through.
    let failing = capture(Mode::Fails);
    let server = hybrid(&failing.url, Policy::default(), &audit, Duration::from_secs(5));
    let r = send(&server, &plain, &[]);
    assert_eq!(r.status, 502, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "cloud_error");
    let host = failing.url.trim_start_matches("http://").trim_end_matches("/v1");
    let message = r.body["error"]["message"].as_str().unwrap();
    assert!(message.contains(host) && message.contains("500") && message.contains("upstream exploded"), "{message}");

    // A stream that stalls: what came is kept, then an error event naming the cloud.
    let stalls = capture(Mode::Stalls);
    let server = hybrid(&stalls.url, Policy::default(), &audit, Duration::from_secs(1));
    let t = Instant::now();
    let r = send(&server, &streamed, &[]);
    assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
    assert_eq!(r.content(), "ECH");
    let error = r.events.iter().find(|e| e.get("error").is_some()).expect("an error event");
    assert_eq!(error["error"]["code"], "cloud_timeout", "{error}");
    assert_eq!(r.events.last(), Some(&Value::from("[DONE]")));

    let lines = std::fs::read_to_string(&audit).unwrap();
    assert!(lines.contains("\"local_fallback\"") && lines.contains("\"cloud_error\""), "{lines}");
    let _ = std::fs::remove_file(&audit);
}

/// One line of the held-out set.
#[derive(serde::Deserialize)]
struct Case {
    id: String,
    request: Value,
    private: Vec<String>,
}

#[test]
fn the_held_out_conversations_leak_nothing() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../gate/tests/corpus/leaks_heldout.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let cases: Vec<Case> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(cases.len(), 64);
    let up = capture(Mode::Echo);
    let audit = audit_path("heldout");
    let server = hybrid(&up.url, Policy::default(), &audit, Duration::from_secs(10));
    let mut leaked = Vec::new();
    for (n, case) in cases.iter().enumerate() {
        for stream in [false, true] {
            let mut req = case.request.clone();
            req["stream"] = json!(stream);
            let before = up.log.lock().unwrap().len();
            let r = send(&server, &req, &[("x-solo-conversation", &format!("held-{n}-{stream}"))]);
            assert!(matches!(r.status, 200 | 428), "{}: {} {}", case.id, r.status, r.body);
            let log = up.log.lock().unwrap();
            for bytes in &log[before..] {
                let raw = String::from_utf8_lossy(bytes).to_lowercase();
                let decoded = serde_json::from_slice::<Value>(bytes).map(|v| flatten(&v).to_lowercase()).unwrap();
                for p in &case.private {
                    let p = p.to_lowercase();
                    if raw.contains(&p) || decoded.contains(&p) {
                        leaked.push(format!("{} (stream {stream}): {p}", case.id));
                    }
                }
            }
        }
    }
    assert!(leaked.is_empty(), "{} leaks of 64 conversations:\n{}", leaked.len(), leaked.join("\n"));
    let _ = std::fs::remove_file(&audit);
}
