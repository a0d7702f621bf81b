//! The hybrid router: every chat request passes the privacy gate (crate `solo-gate`) before it
//! may leave the machine.
//!
//! ```text
//! request ─▶ gate (every text of every message: its values, the conversation's known values,
//!               and what it is about: HEALTH, FINANCE, … categories)
//!   refuse       ─▶ 403, the entity types (never the values)
//!   ask_consent  ─▶ 428 + consent token; repeated with `X-Solo-Consent: TOKEN`, sent as it is
//!   keep_local   ─▶ the local engine
//!   mask         ─▶ the cloud, values replaced by [TYPE_n]; the answer restored (streamed too)
//!   nothing      ─▶ the cloud (or the local engine when there is no cloud)
//! ```
//!
//! A request with an image (`image_url` parts) stays local whatever its text holds: an image
//! cannot be scanned; its audit line says so (`"images"`, `"reason"`).
//!
//! `X-Solo-Route: local` (or `"solo_route": "local"` in the body) forces the local engine. The
//! cloud unreachable: the local engine answers, or a 502, as the policy says; the request is
//! never sent again in another form. Every gated request gets one JSON line in the audit log:
//! time, destination, route, outcome, entity types and counts, categories — no values, no text.
//! A category whose outcome is `mask` masks every value found (the subject goes out, not whose
//! it is). Responses carry `X-Solo-Categories` when categories were found.
//!
//! With `--gate-judge local` (`judge.rs`), a request the gate would send to the cloud whose texts
//! have no category but a topic score in the unsure band is first classified by the local engine:
//! a category it names joins the first stage's, `NONE` changes nothing, and no usable answer
//! (an error, the timeout, another word) keeps the request local. `X-Solo-Judge` and the audit
//! line's `judge` say whether it ran and what it said.

use crate::chat;
use crate::error::ApiError;
use crate::handlers::{self, sse_data, sse_done, App};
use crate::judge::{self, JudgeConfig, Verdict};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::{json, Map, Value};
use solo_gate::policy::OnCloudError;
use solo_gate::{
    Category, Conversation, Decision, Destination, Detector, EntityType, Outcome, Policy, Restorer, Span, Topics,
};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `solo serve --cloud-url … --policy …`.
#[derive(Clone, Debug)]
pub struct HybridConfig {
    /// An OpenAI-compatible base URL (`https://api.example.com/v1`); `None`: local only, still gated.
    pub cloud_url: Option<String>,
    /// `model` sent to the cloud (default: the client's).
    pub cloud_model: Option<String>,
    /// The cloud's API key (read from the environment variable `--cloud-key-env` names).
    pub cloud_key: Option<String>,
    pub policy: Policy,
    /// JSON lines, appended; `None`: no audit log.
    pub audit_log: Option<PathBuf>,
    /// The second stage (`--gate-judge local`): the local engine classifies unsure requests.
    pub judge: Option<JudgeConfig>,
}

/// What a consent token lets through: entity types and categories.
#[derive(Clone, Default)]
struct Consented {
    types: BTreeSet<EntityType>,
    categories: BTreeSet<Category>,
}

/// A consent token's conversation, what it consents to and its time of issue.
type Consent = (u64, Consented, Instant);

/// How long a consent token stays valid.
const CONSENT_TTL: Duration = Duration::from_secs(600);
/// Conversations remembered (their known values and placeholders).
const MAX_CONVERSATIONS: usize = 4096;

pub struct Hybrid {
    config: HybridConfig,
    detector: Detector,
    topics: Topics,
    client: reqwest::Client,
    /// conversation key → what it has shown so far.
    conversations: Mutex<(HashMap<u64, Conversation>, VecDeque<u64>)>,
    /// token → (conversation key, consented types, issued).
    consents: Mutex<HashMap<String, Consent>>,
    audit: Option<Mutex<std::fs::File>>,
}

impl Hybrid {
    pub fn new(config: HybridConfig) -> anyhow::Result<Hybrid> {
        let mut builder = reqwest::Client::builder().connect_timeout(Duration::from_secs(10));
        let loopback = config.cloud_url.as_deref().is_some_and(|u| {
            let host = u.split("://").nth(1).unwrap_or(u);
            host.starts_with("127.") || host.starts_with("localhost") || host.starts_with("[::1]")
        });
        if loopback {
            builder = builder.no_proxy();
        }
        let audit = match &config.audit_log {
            Some(path) => {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir)?;
                }
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| anyhow::anyhow!("cannot open the audit log {}: {e}", path.display()))?;
                Some(Mutex::new(file))
            }
            None => None,
        };
        Ok(Hybrid {
            detector: Detector::new(),
            topics: Topics::default(),
            client: builder.build()?,
            conversations: Mutex::new((HashMap::new(), VecDeque::new())),
            consents: Mutex::new(HashMap::new()),
            audit,
            config,
        })
    }

    fn endpoint(&self) -> Option<String> {
        let base = self.config.cloud_url.as_deref()?.trim_end_matches('/');
        Some(if base.ends_with("/chat/completions") { base.to_string() } else { format!("{base}/chat/completions") })
    }

    fn conversation(&self, key: u64) -> Conversation {
        let map = self.conversations.lock().unwrap_or_else(|e| e.into_inner());
        map.0.get(&key).cloned().unwrap_or_default()
    }

    fn keep_conversation(&self, key: u64, conv: Conversation) {
        let mut guard = self.conversations.lock().unwrap_or_else(|e| e.into_inner());
        let (map, order) = &mut *guard;
        if map.insert(key, conv).is_none() {
            order.push_back(key);
            while order.len() > MAX_CONVERSATIONS {
                if let Some(old) = order.pop_front() {
                    map.remove(&old);
                }
            }
        }
    }

    fn issue_consent(&self, app: &App, key: u64, types: Consented) -> String {
        let token = format!("consent-{:016x}{:016x}", app.random(), app.random());
        let mut map = self.consents.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, (_, _, at)| at.elapsed() < CONSENT_TTL);
        map.insert(token.clone(), (key, types, Instant::now()));
        token
    }

    /// What a token consents to, for this conversation.
    fn consented(&self, token: &str, key: u64) -> Consented {
        let map = self.consents.lock().unwrap_or_else(|e| e.into_inner());
        match map.get(token) {
            Some((k, consented, at)) if *k == key && at.elapsed() < CONSENT_TTL => consented.clone(),
            _ => Consented::default(),
        }
    }

    fn audit(&self, record: Value) {
        if let Some(file) = &self.audit {
            let mut f = file.lock().unwrap_or_else(|e| e.into_inner());
            let _ = writeln!(f, "{record}");
        }
    }
}

/// What the gate found in a request.
struct Gated {
    key: u64,
    conv: Conversation,
    /// Spans of each text field, in visiting order.
    spans: Vec<Vec<Span>>,
    counts: BTreeMap<EntityType, usize>,
    /// The categories of all the texts, each with its highest score.
    categories: BTreeMap<Category, f32>,
    /// The texts in the unsure band (`Assessment::unsure`), for the judge; kept only with one.
    unsure: Vec<String>,
}

/// Every text of the messages that the model reads, in order: content (string or text parts),
/// reasoning, tool-call arguments, names.
fn visit_texts(messages: &mut Value, f: &mut dyn FnMut(&mut String)) {
    let Some(list) = messages.as_array_mut() else { return };
    for m in list {
        let Some(m) = m.as_object_mut() else { continue };
        for key in ["content", "reasoning_content", "reasoning", "name"] {
            match m.get_mut(key) {
                Some(Value::String(s)) => f(s),
                Some(Value::Array(parts)) => {
                    for p in parts {
                        if let Some(Value::String(s)) = p.get_mut("text") {
                            f(s);
                        }
                    }
                }
                _ => {}
            }
        }
        if let Some(Value::Array(calls)) = m.get_mut("tool_calls") {
            for c in calls {
                if let Some(Value::String(s)) = c.pointer_mut("/function/arguments") {
                    f(s);
                }
            }
        }
    }
}

/// The conversation's identity: the client's `X-Solo-Conversation`, else the first message.
fn conversation_key(headers: &HeaderMap, body: &Value) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    match headers.get("x-solo-conversation").and_then(|v| v.to_str().ok()) {
        Some(id) => ("header", id).hash(&mut h),
        None => body.pointer("/messages/0").map(|m| m.to_string()).unwrap_or_default().hash(&mut h),
    }
    h.finish()
}

fn gate(hybrid: &Hybrid, key: u64, body: &mut Value) -> Gated {
    let mut conv = hybrid.conversation(key);
    let mut spans = Vec::new();
    let mut counts = BTreeMap::new();
    let mut categories: BTreeMap<Category, f32> = BTreeMap::new();
    let mut unsure = Vec::new();
    let judging = hybrid.config.judge.is_some();
    if let Some(messages) = body.get_mut("messages") {
        visit_texts(messages, &mut |s: &mut String| {
            let found = conv.scan(&hybrid.detector, s);
            for sp in &found {
                *counts.entry(sp.kind).or_insert(0) += 1;
            }
            let assessed = hybrid.topics.assess(s, &found);
            if judging && assessed.unsure() {
                unsure.push(s.clone());
            }
            for topic in assessed.topics {
                let score = categories.entry(topic.kind).or_insert(0.0);
                *score = score.max(topic.score);
            }
            spans.push(found);
        });
    }
    Gated { key, conv, spans, counts, categories, unsure }
}

/// The masked copy of the body: spans of the types in `masked` become placeholders.
fn mask_body(body: &Value, gated: &mut Gated, masked: &BTreeSet<EntityType>) -> Value {
    let mut out = body.clone();
    let mut i = 0;
    let spans = &gated.spans;
    let conv = &mut gated.conv;
    if let Some(messages) = out.get_mut("messages") {
        visit_texts(messages, &mut |s: &mut String| {
            if let Some(sp) = spans.get(i) {
                if sp.iter().any(|x| masked.contains(&x.kind)) {
                    *s = conv.mask(s, sp, |k| masked.contains(&k));
                }
            }
            i += 1;
        });
    }
    out
}

fn header_or_field<'a>(headers: &'a HeaderMap, body: &'a Value, header: &str, field: &str) -> Option<String> {
    headers
        .get(header)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| body.get(field).and_then(Value::as_str).map(str::to_string))
}

fn types_list(types: impl IntoIterator<Item = EntityType>) -> Vec<&'static str> {
    types.into_iter().map(EntityType::name).collect()
}

fn categories_list(categories: impl IntoIterator<Item = Category>) -> Vec<&'static str> {
    categories.into_iter().map(Category::name).collect()
}

/// "EMAIL, PHONE and HEALTH" for a message.
fn what(types: &[EntityType], categories: &[Category]) -> String {
    let mut names = types_list(types.iter().copied());
    names.extend(categories_list(categories.iter().copied()));
    names.join(", ")
}

fn with_route(mut response: Response, route: &'static str, categories: &[&str]) -> Response {
    response.headers_mut().insert("x-solo-route", HeaderValue::from_static(route));
    if let Ok(v) = HeaderValue::from_str(&categories.join(",")) {
        if !categories.is_empty() {
            response.headers_mut().insert("x-solo-categories", v);
        }
    }
    response
}

/// `POST /v1/chat/completions` when the gate is on (else straight to the local engine).
pub async fn chat(State(app): State<Arc<App>>, headers: HeaderMap, body: Result<Bytes, BytesRejection>) -> Response {
    let Some(hybrid) = app.hybrid.clone() else {
        return chat::chat_completions(State(app), body).await;
    };
    match route(app, hybrid, headers, body).await {
        Ok(r) | Err(r) => r,
    }
}

async fn route(
    app: Arc<App>,
    hybrid: Arc<Hybrid>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Response> {
    let mut body = handlers::parse_body(&app, body).map_err(IntoResponse::into_response)?;
    if !body.is_object() {
        return Err(ApiError::invalid("The request body must be a JSON object.").into_response());
    }
    let force_local =
        header_or_field(&headers, &body, "x-solo-route", "solo_route").is_some_and(|r| r.eq_ignore_ascii_case("local"));
    let consent = header_or_field(&headers, &body, "x-solo-consent", "solo_consent");
    if let Some(obj) = body.as_object_mut() {
        obj.remove("solo_route");
        obj.remove("solo_consent");
    }
    let endpoint = hybrid.endpoint().filter(|_| !force_local);
    let destination = if endpoint.is_some() { Destination::Cloud } else { Destination::Local };
    let key = conversation_key(&headers, &body);
    let hy = hybrid.clone();
    let mut scanned = body.clone();
    let mut gated = tokio::task::spawn_blocking(move || gate(&hy, key, &mut scanned))
        .await
        .map_err(|e| ApiError::internal(&e).into_response())?;
    let policy = &hybrid.config.policy;
    let consented = consent.map(|t| hybrid.consented(&t, key)).unwrap_or_default();
    let mut decision = decide(policy, &gated, destination, &consented);
    // An image cannot be scanned for personal data: a request with one never leaves the machine
    // (so no masked request carries an image either).
    let images = crate::images::count_images(body.get("messages"));
    let kept_for_images =
        images > 0 && destination == Destination::Cloud && matches!(decision.outcome, Outcome::Mask | Outcome::Allow);
    if kept_for_images {
        decision.outcome = Outcome::KeepLocal;
    }
    // The second stage: only where the request would leave, no category was found and some
    // text is in the unsure band.
    let mut judged: Option<(Verdict, Duration)> = None;
    if let Some(config) = &hybrid.config.judge {
        let leaving = destination == Destination::Cloud && matches!(decision.outcome, Outcome::Mask | Outcome::Allow);
        if leaving && gated.categories.is_empty() && !gated.unsure.is_empty() {
            let (verdict, took) = judge::ask(&app, config, &gated.unsure).await;
            match verdict {
                Verdict::Category(c) => {
                    gated.categories.insert(c, solo_gate::topics::THRESHOLD);
                    decision = decide(policy, &gated, destination, &consented);
                }
                Verdict::None => {}
                _ => decision.outcome = Outcome::KeepLocal,
            }
            judged = Some((verdict, took));
        }
    }
    let judge_record = hybrid.config.judge.as_ref().map(|_| match judged {
        Some((verdict, took)) => json!({"ran": true, "verdict": verdict.name(), "ms": took.as_millis() as u64}),
        None => json!({"ran": false}),
    });
    let judge_header = hybrid.config.judge.as_ref().map(|_| judged.map_or("skipped", |(v, _)| v.name()));
    let entities: Map<String, Value> = gated.counts.iter().map(|(t, n)| (t.name().to_string(), json!(n))).collect();
    let found_categories = categories_list(gated.categories.keys().copied());
    let audit = |route: &str, status: u16| {
        let mut record = json!({
            "time": std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64()),
            "conversation": format!("{:016x}", key),
            "destination": if destination == Destination::Cloud { "cloud" } else { "local" },
            "route": route,
            "outcome": decision.outcome.name(),
            "entities": entities,
            "categories": found_categories,
            "status": status,
        });
        if let Some(j) = &judge_record {
            record["judge"] = j.clone();
        }
        if images > 0 {
            record["images"] = json!(images);
        }
        if kept_for_images {
            record["reason"] = json!("the request has an image, which the gate cannot scan for personal data");
        }
        record
    };
    let conv_store = |gated: &Gated| hybrid.keep_conversation(gated.key, gated.conv.clone());
    let found = types_list(gated.counts.keys().copied()).join(",");
    let masked = types_list(decision.types_with(Outcome::Mask)).join(",");

    let result = match decision.outcome {
        Outcome::Refuse => {
            conv_store(&gated);
            let types = decision.types_with(Outcome::Refuse);
            let categories = decision.categories_with(Outcome::Refuse);
            hybrid.audit(audit("refused", 403));
            Err(privacy_error(
                StatusCode::FORBIDDEN,
                "privacy_refused",
                format!("The privacy policy does not allow this request: it contains {}.", what(&types, &categories)),
                (&types, &categories),
                None,
            ))
        }
        Outcome::AskConsent => {
            conv_store(&gated);
            let types = decision.types_with(Outcome::AskConsent);
            let categories = decision.categories_with(Outcome::AskConsent);
            let grant = Consented {
                types: types.iter().chain(&consented.types).copied().collect(),
                categories: categories.iter().chain(&consented.categories).copied().collect(),
            };
            let token = hybrid.issue_consent(&app, key, grant);
            hybrid.audit(audit("consent_required", 428));
            Err(privacy_error(
                StatusCode::PRECONDITION_REQUIRED,
                "consent_required",
                format!(
                    "This request contains {} and would be sent to the cloud model. To send it, repeat the request with the header `X-Solo-Consent: {token}`; to keep it on this machine, send `X-Solo-Route: local`.",
                    what(&types, &categories)
                ),
                (&types, &categories),
                Some(&token),
            ))
        }
        Outcome::KeepLocal => {
            conv_store(&gated);
            hybrid.audit(audit("local", 200));
            Ok(with_route(local(&app, body).await, "local", &found_categories))
        }
        Outcome::Mask | Outcome::Allow if destination == Destination::Local => {
            conv_store(&gated);
            hybrid.audit(audit("local", 200));
            Ok(with_route(local(&app, body).await, "local", &found_categories))
        }
        Outcome::Mask | Outcome::Allow => {
            // A category to be masked masks every value found that would otherwise go as it is.
            let mask_all = !decision.categories_with(Outcome::Mask).is_empty();
            let masked_types: BTreeSet<EntityType> = decision
                .per_type
                .iter()
                .filter(|(_, &o)| o == Outcome::Mask || mask_all && o == Outcome::Allow)
                .map(|(&t, _)| t)
                .collect();
            let mut outbound = mask_body(&body, &mut gated, &masked_types);
            conv_store(&gated);
            if let Some(model) = &hybrid.config.cloud_model {
                outbound["model"] = Value::from(model.clone());
            }
            let restorations = gated.conv.restorations();
            let endpoint = endpoint.unwrap_or_default();
            match send(&app, &hybrid, &endpoint, &outbound, restorations).await {
                Ok(response) => {
                    hybrid.audit(audit(
                        if masked_types.is_empty() { "cloud" } else { "cloud_masked" },
                        response.status().as_u16(),
                    ));
                    Ok(with_route(response, "cloud", &found_categories))
                }
                Err(cause) => match policy.on_cloud_error {
                    OnCloudError::Local => {
                        eprintln!("solo serve: the cloud is unreachable ({cause}); answering locally");
                        hybrid.audit(audit("local_fallback", 200));
                        Ok(with_route(local(&app, body).await, "local", &found_categories))
                    }
                    OnCloudError::Fail => {
                        hybrid.audit(audit("cloud_unreachable", 502));
                        let e = ApiError {
                            status: StatusCode::BAD_GATEWAY,
                            message: format!("The cloud model could not be reached ({cause}); the policy says not to answer locally. Nothing was sent."),
                            kind: "server_error",
                            code: Some("cloud_unreachable"),
                            param: None,
                            retry_after: None,
                        };
                        Err(e.into_response())
                    }
                },
            }
        }
    };
    let with_judge = |mut r: Response| {
        if let Some(v) = judge_header {
            r.headers_mut().insert("x-solo-judge", HeaderValue::from_static(v));
        }
        r
    };
    result.map(|r| with_judge(with_findings(r, &found, &masked))).map_err(with_judge)
}

/// The policy's decision on what the gate found, consent turning the consented types and
/// categories into `allow`.
fn decide(policy: &Policy, gated: &Gated, destination: Destination, consented: &Consented) -> Decision {
    let mut decision = policy.decide_all(gated.counts.keys().copied(), gated.categories.keys().copied(), destination);
    for (t, o) in decision.per_type.iter_mut() {
        if *o == Outcome::AskConsent && consented.types.contains(t) {
            *o = Outcome::Allow;
        }
    }
    for (c, o) in decision.per_category.iter_mut() {
        if *o == Outcome::AskConsent && consented.categories.contains(c) {
            *o = Outcome::Allow;
        }
    }
    decision.recompute();
    decision
}

/// `X-Solo-Entities`: the types the gate found; `X-Solo-Masked`: those sent to the cloud as
/// placeholders (comma-separated names, never values).
fn with_findings(mut response: Response, found: &str, masked: &str) -> Response {
    let cloud = response.headers().get("x-solo-route").is_some_and(|v| v == "cloud");
    let headers = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(found) {
        if !found.is_empty() {
            headers.insert("x-solo-entities", v);
        }
    }
    if let Ok(v) = HeaderValue::from_str(masked) {
        if cloud && !masked.is_empty() {
            headers.insert("x-solo-masked", v);
        }
    }
    response
}

fn privacy_error(
    status: StatusCode,
    code: &'static str,
    message: String,
    (types, categories): (&[EntityType], &[Category]),
    token: Option<&str>,
) -> Response {
    let mut body = json!({"error": {
        "message": message, "type": "invalid_request_error", "param": "messages", "code": code,
        "entity_types": types_list(types.iter().copied()),
        "categories": categories_list(categories.iter().copied()),
    }});
    if let Some(t) = token {
        body["error"]["consent_token"] = Value::from(t);
    }
    (status, axum::Json(body)).into_response()
}

/// The local engine answers the original request (whatever `model` the client named; a LoRA
/// adapter's id keeps its adapter).
async fn local(app: &Arc<App>, mut body: Value) -> Response {
    if body["model"].as_str().is_none_or(|m| app.lora.get(m).is_none()) {
        body["model"] = Value::from(app.model_name.clone());
    }
    let bytes = Bytes::from(body.to_string());
    chat::chat_completions(State(app.clone()), Ok(bytes)).await
}

/// Sends the (masked) request to the cloud. `Err` only when the cloud could not be reached (no
/// connection, a timeout, a 502/503/504 before any answer): then nothing came back and the
/// caller decides. Other statuses are passed through, restored.
async fn send(
    app: &App,
    hybrid: &Hybrid,
    endpoint: &str,
    body: &Value,
    restorations: HashMap<String, String>,
) -> Result<Response, String> {
    let mut request = hybrid.client.post(endpoint).timeout(app.request_timeout).json(body);
    if let Some(key) = &hybrid.config.cloud_key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.map_err(|e| {
        if e.is_timeout() {
            "timed out".to_string()
        } else {
            "connection failed".to_string()
        }
    })?;
    let status = response.status();
    if matches!(status.as_u16(), 502..=504) {
        return Err(format!("it answered {status}"));
    }
    let restorer = Restorer::new(restorations);
    let streaming = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if status.is_success() && streaming {
        return Ok(stream_restored(response, restorer));
    }
    let bytes = response.bytes().await.map_err(|_| "the answer was cut off".to_string())?;
    let mut value: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(_) => {
            let text = restorer.restore(&String::from_utf8_lossy(&bytes));
            return Ok((status_of(status), text).into_response());
        }
    };
    restore_message(&mut value, &restorer);
    Ok((status_of(status), axum::Json(value)).into_response())
}

fn status_of(s: reqwest::StatusCode) -> StatusCode {
    StatusCode::from_u16(s.as_u16()).unwrap_or(StatusCode::BAD_GATEWAY)
}

/// Restores every string of a complete answer (message content, reasoning, tool arguments,
/// error messages).
fn restore_message(value: &mut Value, restorer: &Restorer) {
    match value {
        Value::String(s) if s.contains('[') => *s = restorer.restore(s),
        Value::Array(items) => items.iter_mut().for_each(|v| restore_message(v, restorer)),
        Value::Object(map) => map.values_mut().for_each(|v| restore_message(v, restorer)),
        _ => {}
    }
}

/// The cloud's SSE stream, restored on the way: each streamed field of each choice has its own
/// restorer, which holds back a placeholder cut across chunks; what is held is sent before the
/// chunk that finishes the choice.
struct StreamRestore {
    template: Restorer,
    /// (choice, field, tool index) → restorer.
    fields: HashMap<(u64, &'static str, u64), Restorer>,
    buffer: String,
}

impl StreamRestore {
    fn restorer(&mut self, key: (u64, &'static str, u64)) -> &mut Restorer {
        let template = &self.template;
        self.fields.entry(key).or_insert_with(|| template.clone())
    }

    /// One `data:` payload → the payloads to send.
    fn event(&mut self, data: &str) -> Vec<Bytes> {
        let Ok(mut chunk) = serde_json::from_str::<Value>(data) else {
            return vec![Bytes::from(format!("data: {data}\n\n"))];
        };
        let mut out = Vec::new();
        if let Some(choices) = chunk.get_mut("choices").and_then(Value::as_array_mut) {
            let mut flushes = Vec::new();
            for choice in choices.iter_mut() {
                let index = choice.get("index").and_then(Value::as_u64).unwrap_or(0);
                if let Some(delta) = choice.get_mut("delta").and_then(Value::as_object_mut) {
                    for field in ["content", "reasoning_content", "reasoning"] {
                        if let Some(Value::String(s)) = delta.get_mut(field) {
                            *s = self.restorer((index, field, 0)).push(s);
                        }
                    }
                    if let Some(Value::Array(calls)) = delta.get_mut("tool_calls") {
                        for call in calls {
                            let t = call.get("index").and_then(Value::as_u64).unwrap_or(0);
                            if let Some(Value::String(s)) = call.pointer_mut("/function/arguments") {
                                *s = self.restorer((index, "arguments", t)).push(s);
                            }
                        }
                    }
                }
                if choice.get("finish_reason").is_some_and(|f| !f.is_null()) {
                    flushes.push(index);
                }
            }
            for index in flushes {
                if let Some(extra) = self.flush_choice(&chunk, index) {
                    out.push(sse_data(&extra));
                }
            }
        }
        out.push(sse_data(&chunk));
        out
    }

    /// A chunk with whatever the choice's restorers still hold (before its finish chunk).
    fn flush_choice(&mut self, like: &Value, index: u64) -> Option<Value> {
        let mut delta = Map::new();
        let mut calls = Vec::new();
        let mut keys: Vec<_> = self.fields.keys().filter(|k| k.0 == index).copied().collect();
        keys.sort();
        for key in keys {
            let held = self.fields.get_mut(&key).map(Restorer::finish).unwrap_or_default();
            if held.is_empty() {
                continue;
            }
            match key.1 {
                "arguments" => calls.push(json!({"index": key.2, "function": {"arguments": held}})),
                field => {
                    delta.insert(field.to_string(), Value::from(held));
                }
            }
        }
        if !calls.is_empty() {
            delta.insert("tool_calls".into(), Value::Array(calls));
        }
        if delta.is_empty() {
            return None;
        }
        let mut chunk = like.clone();
        chunk["choices"] = json!([{"index": index, "delta": delta, "finish_reason": null}]);
        if chunk.get("usage").is_some() {
            chunk["usage"] = Value::Null;
        }
        Some(chunk)
    }

    /// Complete SSE events out of the buffer.
    fn feed(&mut self, bytes: &[u8]) -> Vec<Bytes> {
        self.buffer.push_str(&String::from_utf8_lossy(bytes));
        let mut out = Vec::new();
        loop {
            let normalized = self.buffer.replace("\r\n", "\n");
            if normalized.len() != self.buffer.len() {
                self.buffer = normalized;
            }
            let Some(end) = self.buffer.find("\n\n") else { break };
            let event: String = self.buffer.drain(..end + 2).collect();
            let data: Vec<&str> = event
                .lines()
                .filter_map(|l| l.strip_prefix("data:").map(|d| d.strip_prefix(' ').unwrap_or(d)))
                .collect();
            if data.is_empty() {
                continue;
            }
            let data = data.join("\n");
            if data.trim() == "[DONE]" {
                out.extend(self.flush_all());
                out.push(sse_done());
            } else {
                out.extend(self.event(&data));
            }
        }
        out
    }

    /// Anything still held at the end of the stream.
    fn flush_all(&mut self) -> Vec<Bytes> {
        let mut choices: Vec<u64> = self.fields.keys().map(|k| k.0).collect();
        choices.sort();
        choices.dedup();
        let like = json!({"object": "chat.completion.chunk"});
        choices.into_iter().filter_map(|i| self.flush_choice(&like, i)).map(|c| sse_data(&c)).collect()
    }
}

fn stream_restored(response: reqwest::Response, restorer: Restorer) -> Response {
    let state = (
        response.bytes_stream(),
        StreamRestore { template: restorer, fields: HashMap::new(), buffer: String::new() },
        VecDeque::<Bytes>::new(),
        false,
    );
    let events = futures_util::stream::unfold(state, |(mut upstream, mut sr, mut queue, mut done)| async move {
        loop {
            if let Some(b) = queue.pop_front() {
                return Some((Ok::<Bytes, std::convert::Infallible>(b), (upstream, sr, queue, done)));
            }
            if done {
                return None;
            }
            match upstream.next().await {
                Some(Ok(bytes)) => queue.extend(sr.feed(&bytes)),
                Some(Err(_)) => {
                    let e = ApiError {
                        status: StatusCode::BAD_GATEWAY,
                        message: "The cloud model's stream broke off.".into(),
                        kind: "server_error",
                        code: Some("cloud_stream_error"),
                        param: None,
                        retry_after: None,
                    };
                    queue.extend(sr.flush_all());
                    queue.push_back(sse_data(&e.body()));
                    queue.push_back(sse_done());
                    done = true;
                }
                None => {
                    if !sr.buffer.trim().is_empty() {
                        sr.buffer.push_str("\n\n");
                        queue.extend(sr.feed(b""));
                    }
                    queue.extend(sr.flush_all());
                    done = true;
                }
            }
        }
    });
    handlers::sse_response(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_restore_across_split_events_and_placeholders() {
        let mut map = HashMap::new();
        map.insert("[EMAIL_1]".to_string(), "jane@example.com".to_string());
        let mut sr = StreamRestore { template: Restorer::new(map), fields: HashMap::new(), buffer: String::new() };
        let chunk = |t: &str| {
            format!("data: {}\n\n", json!({"choices": [{"index": 0, "delta": {"content": t}, "finish_reason": null}]}))
        };
        let raw = format!(
            "{}{}{}data: {}\n\ndata: [DONE]\n\n",
            chunk("Mail [EM"),
            chunk("AIL_1] now [EMA"),
            chunk("IL_1"),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        );
        let mut out = Vec::new();
        for piece in raw.as_bytes().chunks(7) {
            out.extend(sr.feed(piece));
        }
        let mut content = String::new();
        for b in &out {
            let s = std::str::from_utf8(b).unwrap();
            let data = s.strip_prefix("data: ").unwrap().trim();
            if data == "[DONE]" {
                continue;
            }
            let v: Value = serde_json::from_str(data).unwrap();
            content += v["choices"][0]["delta"]["content"].as_str().unwrap_or("");
        }
        assert_eq!(content, "Mail jane@example.com now [EMAIL_1");
        assert!(std::str::from_utf8(out.last().unwrap()).unwrap().contains("[DONE]"));
    }
}
