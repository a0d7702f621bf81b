//! The privacy gate and hybrid router over real HTTP: `solo serve` (scripted local engine) in
//! front of a recording "cloud" that echoes what it receives, and a second real `solo serve` on
//! the tiny fixture as the cloud. Checks: no raw value ever reaches the cloud, each outcome is
//! enforced, the consent round trip, restored values in answers (also streamed, with placeholders
//! cut across chunks), repeats caught across requests, the cloud down, the audit log.

mod common;

use axum::body::{Body, Bytes};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use common::*;
use serde_json::{json, Value};
use solo_gate::Policy;
use solo_server::hybrid::HybridConfig;
use solo_server::judge::JudgeConfig;
use solo_server::Server;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const EMAIL: &str = "jane.doe@example.com";
const PHONE: &str = "+44 20 7946 0958";
const CARD: &str = "4111 1111 1111 1111";
const IBAN: &str = "DE89 3704 0044 0532 0130 00";
const NAME: &str = "Jennifer Martinez";

/// What the fake cloud received: (authorization header, body).
type Log = Arc<Mutex<Vec<(String, Value)>>>;

/// An OpenAI-compatible endpoint on loopback that records every request and answers
/// `ECHO: <last user message>`; streamed in 3-character pieces so placeholders are cut.
struct Cloud {
    url: String,
    log: Log,
    _stop: tokio::sync::oneshot::Sender<()>,
}

fn cloud() -> Cloud {
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let state = log.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let app = axum::Router::new().route(
                "/v1/chat/completions",
                axum::routing::post(move |headers: HeaderMap, body: Bytes| {
                    let log = state.clone();
                    async move { answer(&log, &headers, &body) }
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
    Cloud { url: format!("http://{addr}/v1"), log, _stop: tx }
}

fn answer(log: &Log, headers: &HeaderMap, body: &[u8]) -> Response {
    let body: Value = serde_json::from_slice(body).unwrap();
    let auth = headers.get("authorization").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    log.lock().unwrap().push((auth, body.clone()));
    let last = body["messages"].as_array().unwrap().iter().rev().find(|m| m["role"] == "user").unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    let text = format!("ECHO: {last}");
    if body["stream"] == true {
        let mut sse = String::new();
        let chars: Vec<char> = text.chars().collect();
        sse += &format!(
            "data: {}\n\n",
            json!({"id": "c1", "object": "chat.completion.chunk", "model": "cloud", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]})
        );
        for piece in chars.chunks(3) {
            let p: String = piece.iter().collect();
            sse += &format!(
                "data: {}\n\n",
                json!({"id": "c1", "object": "chat.completion.chunk", "model": "cloud", "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": null}]})
            );
        }
        sse += &format!(
            "data: {}\n\n",
            json!({"id": "c1", "object": "chat.completion.chunk", "model": "cloud", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        );
        sse += "data: [DONE]\n\n";
        return ([("content-type", "text/event-stream")], Body::from(sse)).into_response();
    }
    axum::Json(json!({
        "id": "c1", "object": "chat.completion", "created": 0, "model": "cloud",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }))
    .into_response()
}

fn audit_path(tag: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("solo-gate-audit-{tag}-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

fn hybrid(cloud_url: Option<String>, policy: Policy, audit: &std::path::Path) -> Server {
    let mut c = config();
    c.hybrid = Some(HybridConfig {
        cloud_url,
        cloud_model: Some("cloud-model".into()),
        cloud_key: Some("sk-test-key".into()),
        policy,
        audit_log: Some(audit.to_path_buf()),
        judge: None,
        cloud_timeout: solo_server::hybrid::DEFAULT_CLOUD_TIMEOUT,
    });
    start_scripted(c, vec![Script::text("user", "LOCAL ANSWER")])
}

/// A hybrid server with `--gate-judge local`: the scripted engine answers `LOCAL ANSWER` to
/// requests and `judge` to the judge's prompt (which ends with "One word:"), each step of it
/// taking `delay`.
fn judged(cloud: &Cloud, audit: &std::path::Path, judge: &str, delay: Duration, timeout: Duration) -> Server {
    let mut c = config();
    c.hybrid = Some(HybridConfig {
        cloud_url: Some(cloud.url.clone()),
        cloud_model: Some("cloud-model".into()),
        cloud_key: None,
        policy: Policy::default(),
        audit_log: Some(audit.to_path_buf()),
        judge: Some(JudgeConfig { timeout }),
        cloud_timeout: solo_server::hybrid::DEFAULT_CLOUD_TIMEOUT,
    });
    start_scripted(c, vec![Script::text("user", "LOCAL ANSWER"), Script::text("One word:", judge).slow(delay)])
}

/// A request the first stage is unsure about (no category; the model's private head in the band).
const VAGUE: &str = "I have been feeling off lately and I do not know why";

/// POST; (status, route, `X-Solo-Judge`, `X-Solo-Categories`).
fn send_judged(server: &Server, text: &str) -> (u16, String, String, String) {
    let r = client().post(url(server, "/v1/chat/completions")).json(&chat(text)).send().unwrap();
    let header = |name: &str| r.headers().get(name).map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    (r.status().as_u16(), header("x-solo-route"), header("x-solo-judge"), header("x-solo-categories"))
}

/// The audit log's records.
fn records(audit: &std::path::Path) -> Vec<Value> {
    let lines = std::fs::read_to_string(audit).unwrap();
    assert!(!lines.contains("feeling off") && !lines.contains("insulin"), "the audit log holds no text: {lines}");
    lines.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// POST with headers; (status, route header, body).
fn send(server: &Server, body: &Value, headers: &[(&str, &str)]) -> (u16, String, Value) {
    let mut req = client().post(url(server, "/v1/chat/completions")).json(body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let r = req.send().unwrap();
    let status = r.status().as_u16();
    let route = r.headers().get("x-solo-route").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    (status, route, r.json().unwrap_or(Value::Null))
}

fn chat(text: &str) -> Value {
    json!({"model": "gpt-whatever", "messages": user(text), "max_tokens": 32, "enable_thinking": false})
}

fn content(v: &Value) -> String {
    v["choices"][0]["message"]["content"].as_str().unwrap_or("").to_string()
}

/// Nothing the cloud ever received holds any of `values`.
fn assert_never_sent(log: &Log, values: &[&str]) {
    for (_, body) in log.lock().unwrap().iter() {
        let text = body.to_string();
        for v in values {
            assert!(!text.contains(v), "raw {v:?} reached the cloud: {text}");
        }
    }
}

#[test]
fn mask_restore_keep_local_and_nothing_private() {
    let up = cloud();
    let audit = audit_path("mask");
    let server = hybrid(Some(up.url.clone()), Policy::default(), &audit);

    // mask: placeholders out, real values back.
    let (status, route, body) = send(&server, &chat(&format!("Email me at {EMAIL} or call {PHONE} today.")), &[]);
    assert_eq!((status, route.as_str()), (200, "cloud"), "{body}");
    assert_eq!(content(&body), format!("ECHO: Email me at {EMAIL} or call {PHONE} today."));
    {
        let log = up.log.lock().unwrap();
        let (auth, sent) = log.last().unwrap();
        assert_eq!(auth, "Bearer sk-test-key");
        assert_eq!(sent["model"], "cloud-model");
        assert_eq!(sent["messages"][0]["content"], "Email me at [EMAIL_1] or call [PHONE_1] today.");
    }

    // keep_local: a card never leaves.
    let before = up.log.lock().unwrap().len();
    let (status, route, body) = send(&server, &chat(&format!("My card is {CARD}, is it valid?")), &[]);
    assert_eq!((status, route.as_str()), (200, "local"), "{body}");
    assert_eq!(content(&body), "LOCAL ANSWER");
    assert_eq!(up.log.lock().unwrap().len(), before);

    // nothing private: to the cloud as it is.
    let (status, route, body) = send(&server, &chat("What is the capital of France?"), &[]);
    assert_eq!((status, route.as_str()), (200, "cloud"));
    assert_eq!(content(&body), "ECHO: What is the capital of France?");

    // forced local.
    let (status, route, _) = send(&server, &chat(&format!("mail {EMAIL}")), &[("x-solo-route", "local")]);
    assert_eq!((status, route.as_str()), (200, "local"));
    let (status, route, _) = send(
        &server,
        &json!({"messages": user("hello there"), "solo_route": "local", "max_tokens": 4, "enable_thinking": false}),
        &[],
    );
    assert_eq!((status, route.as_str()), (200, "local"));

    assert_never_sent(&up.log, &[EMAIL, PHONE, CARD, "4111111111111111"]);

    // The audit log: one line per gated request, types and counts, never values.
    let lines = std::fs::read_to_string(&audit).unwrap();
    let records: Vec<Value> = lines.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(records.len(), 5, "{lines}");
    assert_eq!(records[0]["route"], "cloud_masked");
    assert_eq!(records[0]["entities"], json!({"EMAIL": 1, "PHONE": 1}));
    assert_eq!(records[0]["outcome"], "mask");
    assert_eq!(records[1]["route"], "local");
    assert_eq!(records[1]["outcome"], "keep_local");
    assert_eq!(records[1]["entities"], json!({"CARD": 1}));
    assert!(!lines.contains(EMAIL) && !lines.contains("4111"), "{lines}");
    let _ = std::fs::remove_file(&audit);
}

#[test]
fn streaming_restore_across_split_placeholders() {
    let up = cloud();
    let audit = audit_path("stream");
    let server = hybrid(Some(up.url.clone()), Policy::default(), &audit);
    let text = format!("Write to {EMAIL}, then to bob@example.org, then to {EMAIL} again.");
    let mut req = chat(&text);
    req["stream"] = json!(true);
    let events = stream(&server, "/v1/chat/completions", &req);
    let a = assemble(&events);
    assert_eq!(a.content, format!("ECHO: {text}"));
    assert_eq!(a.finish_reason.as_deref(), Some("stop"));
    let log = up.log.lock().unwrap();
    assert_eq!(
        log.last().unwrap().1["messages"][0]["content"],
        "Write to [EMAIL_1], then to [EMAIL_2], then to [EMAIL_1] again."
    );
    drop(log);
    assert_never_sent(&up.log, &[EMAIL, "bob@example.org"]);
    let _ = std::fs::remove_file(&audit);
}

#[test]
fn refuse_and_consent_round_trip() {
    let up = cloud();
    let audit = audit_path("consent");
    let policy = Policy::parse(&format!(
        "{}\n[[rule]]\ntypes = [\"SSN\"]\noutcome = \"refuse\"\n",
        solo_gate::policy::DEFAULT_POLICY
    ))
    .unwrap();
    let server = hybrid(Some(up.url.clone()), policy, &audit);

    // refuse: 403 with the types, never the values.
    let (status, _, body) = send(&server, &chat("My SSN is 123-45-6789 and my email is a@b.co"), &[]);
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "privacy_refused");
    assert_eq!(body["error"]["entity_types"], json!(["SSN"]));
    assert!(!body.to_string().contains("6789"), "{body}");

    // ask_consent: 428 with a token naming the types.
    let req = chat(&format!("Please forward this to {NAME} at {EMAIL}."));
    let (status, _, body) = send(&server, &req, &[]);
    assert_eq!(status, 428, "{body}");
    assert_eq!(body["error"]["code"], "consent_required");
    assert_eq!(body["error"]["entity_types"], json!(["PERSON"]));
    let token = body["error"]["consent_token"].as_str().unwrap().to_string();
    assert!(!body.to_string().contains("Martinez"));
    assert!(up.log.lock().unwrap().is_empty(), "nothing was sent before consent");

    // A wrong token: asked again.
    let (status, _, _) = send(&server, &req, &[("x-solo-consent", "consent-bogus")]);
    assert_eq!(status, 428);

    // With the token: the name goes as it is (consented), the email still masked.
    let (status, route, body) = send(&server, &req, &[("x-solo-consent", &token)]);
    assert_eq!((status, route.as_str()), (200, "cloud"), "{body}");
    assert_eq!(content(&body), format!("ECHO: Please forward this to {NAME} at {EMAIL}."));
    let sent = up.log.lock().unwrap().last().unwrap().1.clone();
    assert_eq!(sent["messages"][0]["content"], format!("Please forward this to {NAME} at [EMAIL_1]."));
    // The token belongs to that conversation only.
    let (status, _, _) = send(&server, &chat(&format!("Also tell {NAME} hello.")), &[("x-solo-consent", &token)]);
    assert_eq!(status, 428);
    assert_never_sent(&up.log, &[EMAIL, "123-45-6789"]);
    let _ = std::fs::remove_file(&audit);
}

#[test]
fn repeats_are_caught_across_requests_with_stable_placeholders() {
    let up = cloud();
    let audit = audit_path("repeat");
    let server = hybrid(Some(up.url.clone()), Policy::default(), &audit);
    let conv = [("x-solo-conversation", "conv-42")];
    let (status, _, _) = send(&server, &chat(&format!("My IBAN is {IBAN}.")), &conv);
    assert_eq!(status, 200);
    // Reformatted with dots: no detector shape, but the conversation knows the value.
    let again = "Did the transfer to DE89.3704.0044.0532.0130.00 arrive?";
    let (status, _, body) = send(&server, &chat(again), &conv);
    assert_eq!(status, 200, "{body}");
    // Restored as first written.
    assert_eq!(content(&body), format!("ECHO: Did the transfer to {IBAN} arrive?"));
    let log = up.log.lock().unwrap();
    assert_eq!(log[0].1["messages"][0]["content"], "My IBAN is [IBAN_1].");
    assert_eq!(log[1].1["messages"][0]["content"], "Did the transfer to [IBAN_1] arrive?");
    drop(log);
    assert_never_sent(&up.log, &["3704", "0532"]);
    let _ = std::fs::remove_file(&audit);
}

#[test]
fn cloud_down_answers_locally_or_fails_by_policy() {
    // A port with nothing listening.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/v1", l.local_addr().unwrap())
    };
    let audit = audit_path("down");
    let server = hybrid(Some(dead.clone()), Policy::default(), &audit);
    let (status, route, body) = send(&server, &chat(&format!("mail {EMAIL}")), &[]);
    assert_eq!((status, route.as_str()), (200, "local-fallback"), "{body}");
    assert_eq!(content(&body), "LOCAL ANSWER");
    let mut req = chat("no private data here");
    req["stream"] = json!(true);
    let a = assemble(&stream(&server, "/v1/chat/completions", &req));
    assert_eq!(a.content, "LOCAL ANSWER");

    let policy = Policy::parse(
        &solo_gate::policy::DEFAULT_POLICY.replace("on_cloud_error = \"local\"", "on_cloud_error = \"fail\""),
    )
    .unwrap();
    let failing = hybrid(Some(dead), policy, &audit);
    let (status, _, body) = send(&failing, &chat(&format!("mail {EMAIL}")), &[]);
    assert_eq!(status, 502, "{body}");
    assert_eq!(body["error"]["code"], "cloud_unreachable");
    let lines = std::fs::read_to_string(&audit).unwrap();
    assert!(lines.contains("\"local_fallback\"") && lines.contains("\"cloud_unreachable\""), "{lines}");
    let _ = std::fs::remove_file(&audit);
}

#[test]
fn a_second_solo_serve_plays_the_cloud() {
    // The real server on the tiny fixture (CPU) is the cloud; its answers are noise, but real.
    let mut cc = config();
    cc.model_name = "cloud-tiny".into();
    let cloud_server = start_cpu(cc);
    let audit = audit_path("solo");
    let mut c = config();
    c.hybrid = Some(HybridConfig {
        cloud_url: Some(format!("http://{}/v1", cloud_server.addr())),
        cloud_model: Some("cloud-tiny".into()),
        cloud_key: None,
        policy: Policy::default(),
        audit_log: Some(audit.clone()),
        judge: None,
        cloud_timeout: solo_server::hybrid::DEFAULT_CLOUD_TIMEOUT,
    });
    let server = start_scripted(c, vec![Script::text("user", "LOCAL ANSWER")]);
    let (status, route, body) = send(&server, &chat(&format!("Email me at {EMAIL}")), &[]);
    assert_eq!((status, route.as_str()), (200, "cloud"), "{body}");
    assert_eq!(body["model"], "cloud-tiny");
    assert_eq!(body["object"], "chat.completion");
    let mut req = chat(&format!("Email me at {EMAIL}"));
    req["stream"] = json!(true);
    let a = assemble(&stream(&server, "/v1/chat/completions", &req));
    assert!(a.finish_reason.is_some());
    let _ = std::fs::remove_file(&audit);
}

#[test]
fn without_a_cloud_the_policy_still_refuses() {
    let audit = audit_path("local");
    let policy =
        Policy::parse("[[rule]]\ntypes = [\"SECRET\"]\noutcome = \"refuse\"\ndestination = \"any\"\n").unwrap();
    let server = hybrid(None, policy, &audit);
    let (status, _, body) = send(&server, &chat("my key is AKIAIOSFODNN7EXAMPLE"), &[]);
    assert_eq!(status, 403, "{body}");
    let (status, route, _) = send(&server, &chat(&format!("mail {EMAIL}")), &[]);
    assert_eq!((status, route.as_str()), (200, "local"));
    let _ = std::fs::remove_file(&audit);
}

#[test]
fn categories_stay_local_or_follow_the_policy() {
    let up = cloud();
    let audit = audit_path("topics");
    let server = hybrid(Some(up.url.clone()), Policy::default(), &audit);
    // The shipped policy keeps a person's own health on this machine; a general question goes.
    let r = client()
        .post(url(&server, "/v1/chat/completions"))
        .json(&chat("Summarize my bloodwork results from last week"))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["x-solo-route"], "local");
    assert_eq!(r.headers()["x-solo-categories"], "HEALTH");
    let (status, route, body) = send(&server, &chat("How does insulin work?"), &[]);
    assert_eq!((status, route.as_str()), (200, "cloud"), "{body}");
    assert_eq!(up.log.lock().unwrap().len(), 1);
    assert_never_sent(&up.log, &["bloodwork"]);
    let lines = std::fs::read_to_string(&audit).unwrap();
    let records: Vec<Value> = lines.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(records.len(), 2, "{lines}");
    assert_eq!((records[0]["route"].as_str(), &records[0]["categories"]), (Some("local"), &json!(["HEALTH"])));
    assert_eq!(records[1]["categories"], json!([]));
    // The keep-local's reason names the category and its evidence words (issue #42); nothing
    // else of the text is there.
    assert_eq!(records[0]["reason"], "HEALTH (bloodwork, results)", "{lines}");
    let rest: Vec<Value> = records
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r.as_object_mut().unwrap().remove("reason");
            r
        })
        .collect();
    let rest = serde_json::to_string(&rest).unwrap();
    assert!(!rest.contains("bloodwork") && !rest.contains("insulin"), "the audit log holds no text: {lines}");
    let _ = std::fs::remove_file(&audit);

    // Any outcome for any category: HEALTH masked (the subject goes, the values do not), FINANCE
    // refused with the category named.
    let up = cloud();
    let audit = audit_path("topics-policy");
    let policy = Policy::parse(
        "default = \"allow\"\n[[rule]]\ntypes = [\"HEALTH\"]\noutcome = \"mask\"\n[[rule]]\ntypes = [\"FINANCE\"]\noutcome = \"refuse\"\n",
    )
    .unwrap();
    let server = hybrid(Some(up.url.clone()), policy, &audit);
    let text = format!("My HIV test came back positive; send the clinic's answer to {EMAIL}.");
    let (status, route, body) = send(&server, &chat(&text), &[]);
    assert_eq!((status, route.as_str()), (200, "cloud"), "{body}");
    assert_eq!(content(&body), format!("ECHO: {text}"));
    let sent = up.log.lock().unwrap()[0].1["messages"][0]["content"].clone();
    assert_eq!(sent, "My HIV test came back positive; send the clinic's answer to [EMAIL_1].");
    let (status, _, body) =
        send(&server, &chat("Here is my bank statement: balance 12,430 EUR, account ending 4471"), &[]);
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "privacy_refused");
    assert!(body["error"]["categories"].as_array().unwrap().contains(&json!("FINANCE")), "{body}");
    assert_eq!(up.log.lock().unwrap().len(), 1);
    let _ = std::fs::remove_file(&audit);
}

#[test]
fn the_judge_keeps_an_unsure_request_local_when_it_names_a_category() {
    let up = cloud();
    let audit = audit_path("judge-health");
    let server = judged(&up, &audit, "HEALTH", Duration::ZERO, Duration::from_secs(10));
    let (status, route, judge, categories) = send_judged(&server, VAGUE);
    assert_eq!((status, route.as_str(), judge.as_str(), categories.as_str()), (200, "local", "HEALTH", "HEALTH"));
    assert!(up.log.lock().unwrap().is_empty(), "nothing reached the cloud");
    let r = &records(&audit)[0];
    assert_eq!((r["route"].as_str(), r["outcome"].as_str()), (Some("local"), Some("keep_local")), "{r}");
    assert_eq!(r["categories"], json!(["HEALTH"]));
    assert_eq!((&r["judge"]["ran"], &r["judge"]["verdict"]), (&json!(true), &json!("HEALTH")), "{r}");
    let _ = std::fs::remove_file(&audit);
}

#[test]
fn the_judge_saying_none_leaves_the_first_stage_outcome() {
    let up = cloud();
    let audit = audit_path("judge-none");
    let server = judged(&up, &audit, "NONE", Duration::ZERO, Duration::from_secs(10));
    let (status, route, judge, categories) = send_judged(&server, VAGUE);
    assert_eq!((status, route.as_str(), judge.as_str(), categories.as_str()), (200, "cloud", "NONE", ""));
    assert_eq!(up.log.lock().unwrap().len(), 1);
    // With an e-mail in it the first stage masks it; the judge's NONE keeps that.
    let (status, route, judge, _) = send_judged(&server, &format!("{VAGUE}, write to {EMAIL}"));
    assert_eq!((status, route.as_str(), judge.as_str()), (200, "cloud", "NONE"));
    assert_never_sent(&up.log, &[EMAIL]);
    let r = records(&audit);
    assert_eq!((r[0]["route"].as_str(), r[1]["route"].as_str()), (Some("cloud"), Some("cloud_masked")), "{r:?}");
    assert_eq!(r[0]["judge"]["verdict"], "NONE");
    let _ = std::fs::remove_file(&audit);
}

#[test]
fn the_judge_failing_keeps_the_request_local() {
    // An answer that is not one of the words.
    let up = cloud();
    let audit = audit_path("judge-fail");
    let server = judged(&up, &audit, "banana bread", Duration::ZERO, Duration::from_secs(10));
    let (status, route, judge, _) = send_judged(&server, VAGUE);
    assert_eq!((status, route.as_str(), judge.as_str()), (200, "local", "unparsable"));
    // No answer in time: each of the judge's steps takes longer than its timeout.
    let slow = judged(&up, &audit, "NONE", Duration::from_millis(700), Duration::from_millis(300));
    let (status, route, judge, _) = send_judged(&slow, VAGUE);
    assert_eq!((status, route.as_str(), judge.as_str()), (200, "local", "timeout"));
    // An engine error: the judge's prompt does not fit a context that the request itself fits.
    let mut c = config();
    c.max_seq = Some(160);
    c.hybrid = Some(HybridConfig {
        cloud_url: Some(up.url.clone()),
        cloud_model: None,
        cloud_key: None,
        policy: Policy::default(),
        audit_log: Some(audit.clone()),
        judge: Some(JudgeConfig { timeout: Duration::from_secs(10) }),
        cloud_timeout: solo_server::hybrid::DEFAULT_CLOUD_TIMEOUT,
    });
    let small = start_scripted(c, vec![Script::text("user", "LOCAL ANSWER"), Script::text("One word:", "NONE")]);
    let (status, route, judge, _) = send_judged(&small, VAGUE);
    assert_eq!((status, route.as_str(), judge.as_str()), (200, "local", "error"));
    assert!(up.log.lock().unwrap().is_empty(), "nothing reached the cloud");
    let r = records(&audit);
    let verdicts: Vec<&str> = r.iter().map(|r| r["judge"]["verdict"].as_str().unwrap()).collect();
    assert_eq!(verdicts, ["unparsable", "timeout", "error"]);
    assert!(r.iter().all(|r| r["route"] == "local" && r["outcome"] == "keep_local"), "{r:?}");
    let _ = std::fs::remove_file(&audit);
}

#[test]
fn confident_requests_never_call_the_judge() {
    // A judge that would name FINANCE for anything: where it ran, it would show.
    let up = cloud();
    let audit = audit_path("judge-sure");
    let server = judged(&up, &audit, "FINANCE", Duration::ZERO, Duration::from_secs(10));
    let tokens = metric(&server, "solo_prompt_tokens_total");
    let (status, route, judge, categories) = send_judged(&server, "How does insulin work?");
    assert_eq!((status, route.as_str(), judge.as_str(), categories.as_str()), (200, "cloud", "skipped", ""));
    assert_eq!(metric(&server, "solo_prompt_tokens_total"), tokens, "the local engine was not asked");
    let (status, route, judge, categories) = send_judged(&server, "My HIV test came back positive, what should I do?");
    assert_eq!((status, route.as_str(), judge.as_str(), categories.as_str()), (200, "local", "skipped", "HEALTH"));
    // Unsure words (no category), but a secret keeps it here already.
    let secret = format!("{VAGUE}. AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
    let (status, route, judge, _) = send_judged(&server, &secret);
    assert_eq!((status, route.as_str(), judge.as_str()), (200, "local", "skipped"));
    // Forced local: nothing would leave, nothing to judge.
    let r = client()
        .post(url(&server, "/v1/chat/completions"))
        .header("x-solo-route", "local")
        .json(&chat(VAGUE))
        .send()
        .unwrap();
    assert_eq!(r.headers()["x-solo-judge"], "skipped");
    assert_eq!(up.log.lock().unwrap().len(), 1);
    let r = records(&audit);
    assert_eq!(r.len(), 4);
    assert!(r.iter().all(|r| r["judge"] == json!({"ran": false})), "{r:?}");
    let _ = std::fs::remove_file(&audit);
}

#[test]
fn the_cpu_engine_on_the_tiny_fixture_is_a_judge_too() {
    // The real CPU backend (random weights: its one word is noise, read as such): the judge
    // runs through the engine that answers local requests, and what it says decides the route.
    let up = cloud();
    let audit = audit_path("judge-cpu");
    let mut c = config();
    c.hybrid = Some(HybridConfig {
        cloud_url: Some(up.url.clone()),
        cloud_model: None,
        cloud_key: None,
        policy: Policy::default(),
        audit_log: Some(audit.clone()),
        judge: Some(JudgeConfig { timeout: Duration::from_secs(60) }),
        cloud_timeout: solo_server::hybrid::DEFAULT_CLOUD_TIMEOUT,
    });
    let server = start_cpu(c);
    let (status, route, judge, _) = send_judged(&server, VAGUE);
    assert_eq!(status, 200);
    assert_ne!(judge, "skipped");
    let sent = up.log.lock().unwrap().len();
    match judge.as_str() {
        "NONE" => assert_eq!((route.as_str(), sent), ("cloud", 1)),
        _ => assert_eq!((route.as_str(), sent), ("local", 0), "judge said {judge}"),
    }
    let r = &records(&audit)[0];
    assert_eq!((&r["judge"]["ran"], r["judge"]["verdict"].as_str()), (&json!(true), Some(judge.as_str())), "{r}");
    let _ = std::fs::remove_file(&audit);
}
