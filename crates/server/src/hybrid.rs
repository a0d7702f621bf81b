//! The hybrid router: every chat request passes the privacy gate (crate `solo-gate`) before it
//! may leave the machine.
//!
//! ```text
//! request ─▶ allow-list (outbound.rs: unknown fields dropped) ─▶ gate (every string left: its
//!               values, the conversation's known values, values split over the user's turns,
//!               and what each text, and each window of three messages, is about: HEALTH, …)
//!   refuse       ─▶ 403, the entity types (never the values)
//!   ask_consent  ─▶ 428 + consent token for the values shown; repeated with `X-Solo-Consent:
//!                   TOKEN`, those values sent as they are (a value not shown asks again)
//!   keep_local   ─▶ the local engine, `X-Solo-Reason` saying why (category and its words, types)
//!   mask         ─▶ the cloud, values replaced by [TYPE_n]; the answer restored (streamed too)
//!   nothing      ─▶ the cloud (or the local engine when there is no cloud)
//! ```
//!
//! A request with an image (`image_url` parts) stays local whatever its text holds: an image
//! cannot be scanned; its audit line says so (`"images"`, `"reason"`).
//!
//! `X-Solo-Route: local` (or `"solo_route": "local"` in the body) forces the local engine. The
//! cloud unreachable (cloud.rs; no first byte within `--cloud-timeout`): the local engine answers
//! marked `X-Solo-Route: local-fallback`, or a 502, as the policy says; a cloud 5xx is a 502 naming
//! it. The request is never sent again in another form. Every gated request gets one JSON line in the audit log:
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
use crate::cloud::{self, CloudFailure};
use crate::error::ApiError;
use crate::handlers::{self, App};
use crate::judge::{self, JudgeConfig, Verdict};
use crate::outbound::{self, Role, Source};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};
use solo_gate::policy::OnCloudError;
use solo_gate::split::split_values;
use solo_gate::{Category, Conversation, Decision, Destination, Detector, EntityType, Outcome, Policy, Span, Topics};
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
    /// `--cloud-timeout`: the longest wait for the cloud's first byte, and between its bytes.
    pub cloud_timeout: Duration,
}

/// `--cloud-timeout`'s default.
pub const DEFAULT_CLOUD_TIMEOUT: Duration = Duration::from_secs(30);

/// What a consent token lets through: the values shown when it was issued (by type, their
/// letters and digits) and categories.
#[derive(Clone, Default)]
struct Consented {
    values: BTreeMap<EntityType, BTreeSet<String>>,
    categories: BTreeSet<Category>,
}

impl Consented {
    /// Was this value shown? A part of a consented name ("Morales" of "Jennifer Morales") is.
    fn covers(&self, kind: EntityType, value: &str) -> bool {
        let key = skeleton(value);
        let Some(shown) = self.values.get(&kind) else { return false };
        shown.contains(&key)
            || kind == EntityType::Person
                && shown.iter().any(|name| name.len() > key.len() && words_of(name).iter().any(|w| *w == key))
    }
}

/// The skeletons of a consented name's words are kept joined by spaces (`jennifer morales`).
fn words_of(name: &str) -> Vec<&str> {
    name.split(' ').collect()
}

/// A value's letters and digits, lower case; a name's words kept apart by spaces.
fn skeleton(value: &str) -> String {
    value
        .split([' ', '-', '_', '.'])
        .map(solo_gate::conversation::skeleton)
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A consent token's conversation, what it consents to and its time of issue.
type Consent = (u64, Consented, Instant);

/// How long a consent token stays valid.
const CONSENT_TTL: Duration = Duration::from_secs(600);
/// Conversations remembered (their known values and placeholders).
const MAX_CONVERSATIONS: usize = 4096;

pub struct Hybrid {
    pub(crate) config: HybridConfig,
    detector: Detector,
    topics: Topics,
    /// The windows' topics: the lexicon alone (the learned model has read each text already).
    window_topics: Topics,
    pub(crate) client: reqwest::Client,
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
            window_topics: Topics::with_mode(solo_gate::Mode::Lexicon),
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
    /// Spans of each string of the allow-listed request, in `outbound::visit`'s order.
    spans: Vec<Vec<Span>>,
    counts: BTreeMap<EntityType, usize>,
    /// The values found, by type, as written: what consent is asked for and covers.
    values: BTreeMap<EntityType, BTreeSet<String>>,
    /// The categories of all the texts, each with its highest score.
    categories: BTreeMap<Category, f32>,
    /// The words that led to each category (lower case, a few): the reason a request stays.
    evidence: BTreeMap<Category, BTreeSet<String>>,
    /// The texts in the unsure band (`Assessment::unsure`), for the judge; kept only with one.
    unsure: Vec<String>,
}

/// How far a text's words are bound to a person whatever its wording (`Topics::assess_bound`):
/// a tool's result and the request's `metadata` and `user` are about someone.
fn floor(source: Source) -> f32 {
    match source {
        Source::Message(_, Role::Tool) | Source::About => 0.6,
        _ => 0.0,
    }
}

/// Messages read together, so that a subject told over several turns scores as one.
const WINDOW: usize = 3;

/// How far the words of a window of the user's own turns are bound to the user.
const USER_WINDOW_FLOOR: f32 = 0.5;

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

fn gate(hybrid: &Hybrid, key: u64, outbound: &mut Value) -> Gated {
    let mut conv = hybrid.conversation(key);
    let mut texts: Vec<(Source, String)> = Vec::new();
    outbound::visit(outbound, &mut |source, s| texts.push((source, s.clone())));
    // An identifier-like text (a message's `name`: `Jennifer_Morales`) is read with spaces for
    // its underscores (one character for one: the spans fit the text as it is).
    let identifier = |t: &str| t.len() <= 64 && t.contains('_') && !t.contains(char::is_whitespace);
    let mut spans: Vec<Vec<Span>> = texts
        .iter()
        .map(|(_, t)| match identifier(t) {
            true => conv.scan(&hybrid.detector, &t.replace('_', " ")),
            false => conv.scan(&hybrid.detector, t),
        })
        .collect();
    // Values split over the user's turns (a card number in two messages).
    let turns: Vec<usize> =
        (0..texts.len()).filter(|&i| matches!(texts[i].0, Source::Message(_, Role::User))).collect();
    let refs: Vec<&str> = turns.iter().map(|&i| texts[i].1.as_str()).collect();
    for piece in split_values(&hybrid.detector, &refs) {
        let i = turns[piece.text];
        if spans[i].iter().any(|s| s.start < piece.end && s.end > piece.start) {
            continue;
        }
        let text: String = texts[i].1.chars().skip(piece.start).take(piece.end - piece.start).collect();
        conv.remember(piece.kind, &text);
        spans[i].push(Span { start: piece.start, end: piece.end, kind: piece.kind, text });
        spans[i].sort_by_key(|s| s.start);
    }
    let mut counts = BTreeMap::new();
    let mut values: BTreeMap<EntityType, BTreeSet<String>> = BTreeMap::new();
    for sp in spans.iter().flatten() {
        *counts.entry(sp.kind).or_insert(0) += 1;
        values.entry(sp.kind).or_default().insert(sp.text.clone());
    }
    let mut categories: BTreeMap<Category, f32> = BTreeMap::new();
    let mut evidence: BTreeMap<Category, BTreeSet<String>> = BTreeMap::new();
    let mut unsure = Vec::new();
    let judging = hybrid.config.judge.is_some();
    let mut note = |text: &str, assessed: solo_gate::Assessment, unsure: &mut Vec<String>| {
        if judging && assessed.unsure() {
            unsure.push(text.to_string());
        }
        for topic in assessed.topics {
            let score = categories.entry(topic.kind).or_insert(0.0);
            *score = score.max(topic.score);
            let words = evidence.entry(topic.kind).or_default();
            for e in &topic.evidence {
                if words.len() >= 6 {
                    break;
                }
                let w: String = text.chars().skip(e.start).take(e.end - e.start).collect();
                words.insert(w.to_lowercase());
            }
        }
    };
    for ((source, text), found) in texts.iter().zip(&spans) {
        let assessed = hybrid.topics.assess_bound(text, found, floor(*source));
        note(text, assessed, &mut unsure);
    }
    // Each window of consecutive messages, read as one text.
    let mut messages: Vec<String> = Vec::new();
    for (source, text) in &texts {
        if let Source::Message(i, _) = *source {
            if messages.len() <= i {
                messages.resize(i + 1, String::new());
            }
            if !messages[i].is_empty() {
                messages[i].push(' ');
            }
            messages[i].push_str(text);
        }
    }
    let users: Vec<String> = texts
        .iter()
        .filter(|(source, _)| matches!(source, Source::Message(_, Role::User)))
        .map(|(_, t)| t.clone())
        .filter(|t| !t.trim().is_empty())
        .collect();
    messages.retain(|m| !m.trim().is_empty());
    let windows = |list: &[String], floor: f32, note: &mut dyn FnMut(&str, solo_gate::Assessment)| {
        if list.len() >= 2 {
            for w in list.windows(WINDOW.min(list.len())) {
                let joined = w.iter().map(|m| m.trim()).collect::<Vec<_>>().join(" . ");
                note(&joined, hybrid.window_topics.assess_bound(&joined, &[], floor));
            }
        }
    };
    let mut note_window = |text: &str, assessed| note(text, assessed, &mut Vec::new());
    windows(&messages, 0.0, &mut note_window);
    // The user's own turns tell of the user, "I" said or not ("got a call from the clinic" /
    // "the biopsy was malignant"): their words are half bound, so two of a subject keep it.
    windows(&users, USER_WINDOW_FLOOR, &mut note_window);
    Gated { key, conv, spans, counts, values, categories, evidence, unsure }
}

/// The masked copy of the (allow-listed) request: spans of the types in `masked` become
/// placeholders, wherever in it they stand.
fn mask_body(outbound: &Value, gated: &mut Gated, masked: &BTreeSet<EntityType>) -> Value {
    let mut out = outbound.clone();
    let mut i = 0;
    let spans = &gated.spans;
    let conv = &mut gated.conv;
    outbound::visit(&mut out, &mut |_, s: &mut String| {
        if let Some(sp) = spans.get(i) {
            if sp.iter().any(|x| masked.contains(&x.kind)) {
                *s = conv.mask(s, sp, |k| masked.contains(&k));
            }
        }
        i += 1;
    });
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
    // What could leave: the allow-listed fields; the gate reads every string of them.
    let allowed = outbound::allow_listed(&body);
    let dropped = outbound::dropped(&body);
    let hy = hybrid.clone();
    let mut scanned = allowed.clone();
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
                    gated.evidence.entry(c).or_default().insert("the local judge".into());
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
    // Why a request stays: each category with the words that led to it, each type.
    let reason = {
        let mut parts: Vec<String> = decision
            .categories_with(decision.outcome)
            .into_iter()
            .map(|c| {
                let words: Vec<&str> =
                    gated.evidence.get(&c).map(|w| w.iter().map(String::as_str).collect()).unwrap_or_default();
                if words.is_empty() {
                    c.name().to_string()
                } else {
                    format!("{} ({})", c.name(), words.join(", "))
                }
            })
            .collect();
        parts.extend(decision.types_with(decision.outcome).into_iter().map(|t| t.name().to_string()));
        if parts.is_empty() && judged.is_some() {
            parts.push(format!("the local judge: {}", judge_header.unwrap_or("error")));
        }
        if kept_for_images {
            parts.push("an image (the gate cannot scan images for personal data)".into());
        }
        parts.join("; ")
    };
    // The values let through by consent, as their placeholders (never the values).
    let consented_record: Map<String, Value> = gated
        .values
        .iter()
        .filter_map(|(t, vals)| {
            let shown: Vec<Value> = vals
                .iter()
                .filter(|v| consented.covers(*t, v))
                .map(|v| Value::from(gated.conv.placeholder(v).unwrap_or("?").to_string()))
                .collect();
            (!shown.is_empty()).then(|| (t.name().to_string(), Value::Array(shown)))
        })
        .collect();
    let audit = |route: &str, status: u16, reason: &str| {
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
        if !reason.is_empty() {
            record["reason"] = Value::from(reason);
        }
        if !consented_record.is_empty() {
            record["consented"] = Value::Object(consented_record.clone());
        }
        if !dropped.is_empty() {
            record["dropped_fields"] = json!(dropped);
        }
        if let Some(j) = &judge_record {
            record["judge"] = j.clone();
        }
        if images > 0 {
            record["images"] = json!(images);
        }
        record
    };
    let conv_store = |gated: &Gated| hybrid.keep_conversation(gated.key, gated.conv.clone());
    let found = types_list(gated.counts.keys().copied()).join(",");
    let masked = types_list(decision.types_with(Outcome::Mask)).join(",");
    let with_reason = |mut r: Response, reason: &str| {
        if let Ok(v) = HeaderValue::from_str(&outbound::header_text(reason)) {
            if !reason.is_empty() {
                r.headers_mut().insert("x-solo-reason", v);
            }
        }
        r
    };

    let result = match decision.outcome {
        Outcome::Refuse => {
            conv_store(&gated);
            let types = decision.types_with(Outcome::Refuse);
            let categories = decision.categories_with(Outcome::Refuse);
            hybrid.audit(audit("refused", 403, &reason));
            Err(with_reason(
                privacy_error(
                    StatusCode::FORBIDDEN,
                    "privacy_refused",
                    format!(
                        "The privacy policy does not allow this request: it contains {}.",
                        what(&types, &categories)
                    ),
                    (&types, &categories),
                    None,
                ),
                &reason,
            ))
        }
        Outcome::AskConsent => {
            conv_store(&gated);
            let types = decision.types_with(Outcome::AskConsent);
            let categories = decision.categories_with(Outcome::AskConsent);
            // The token covers exactly the values shown now (and those consented before).
            let mut grant = consented.clone();
            for t in &types {
                for v in gated.values.get(t).into_iter().flatten() {
                    grant.values.entry(*t).or_default().insert(skeleton(v));
                }
            }
            grant.categories.extend(categories.iter().copied());
            let token = hybrid.issue_consent(&app, key, grant);
            hybrid.audit(audit("consent_required", 428, &reason));
            let response = privacy_error(
                StatusCode::PRECONDITION_REQUIRED,
                "consent_required",
                format!(
                    "This request contains {} and would be sent to the cloud model. To send it, repeat the request with the header `X-Solo-Consent: {token}` (it covers the values of this request; any other asks again); to keep it on this machine, send `X-Solo-Route: local`.",
                    what(&types, &categories)
                ),
                (&types, &categories),
                Some(&token),
            );
            Err(response)
        }
        Outcome::KeepLocal => {
            conv_store(&gated);
            hybrid.audit(audit("local", 200, &reason));
            Ok(with_reason(with_route(local(&app, body).await, "local", &found_categories), &reason))
        }
        Outcome::Mask | Outcome::Allow if destination == Destination::Local => {
            conv_store(&gated);
            hybrid.audit(audit("local", 200, ""));
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
            let mut outbound = mask_body(&allowed, &mut gated, &masked_types);
            conv_store(&gated);
            if let Some(model) = &hybrid.config.cloud_model {
                outbound["model"] = Value::from(model.clone());
            }
            let restorations = gated.conv.restorations();
            let endpoint = endpoint.unwrap_or_default();
            match cloud::send(&app, &hybrid, &endpoint, &outbound, restorations).await {
                Ok(response) => {
                    hybrid.audit(audit(
                        if masked_types.is_empty() { "cloud" } else { "cloud_masked" },
                        response.status().as_u16(),
                        "",
                    ));
                    Ok(with_route(response, "cloud", &found_categories))
                }
                Err(CloudFailure::Error(response)) => {
                    let why = format!("the cloud model at {} failed", cloud::host(&endpoint));
                    hybrid.audit(audit("cloud_error", 502, &why));
                    Err(with_reason(with_route(response, "cloud", &found_categories), &why))
                }
                Err(CloudFailure::Unreachable(cause)) => {
                    let why = format!("the cloud model at {} is unreachable: {cause}", cloud::host(&endpoint));
                    match policy.on_cloud_error {
                        OnCloudError::Local => {
                            eprintln!("solo serve: {why}; answering locally");
                            hybrid.audit(audit("local_fallback", 200, &why));
                            let answer = with_route(local(&app, body).await, "local", &found_categories);
                            Ok(cloud::mark_fallback(answer, &why).await)
                        }
                        OnCloudError::Fail => {
                            hybrid.audit(audit("cloud_unreachable", 502, &why));
                            let e = ApiError {
                                status: StatusCode::BAD_GATEWAY,
                                message: format!("The cloud model at {} could not be reached ({cause}); the policy says not to answer locally. Nothing was sent.", cloud::host(&endpoint)),
                                kind: "server_error",
                                code: Some("cloud_unreachable"),
                                param: None,
                                retry_after: None,
                            };
                            Err(with_reason(e.into_response(), &why))
                        }
                    }
                }
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

/// The policy's decision on what the gate found, consent turning into `allow` the types whose
/// every value was shown when consent was given, and the consented categories.
fn decide(policy: &Policy, gated: &Gated, destination: Destination, consented: &Consented) -> Decision {
    let mut decision = policy.decide_all(gated.counts.keys().copied(), gated.categories.keys().copied(), destination);
    for (t, o) in decision.per_type.iter_mut() {
        let all_shown = gated.values.get(t).is_some_and(|vals| vals.iter().all(|v| consented.covers(*t, v)));
        if *o == Outcome::AskConsent && all_shown {
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

#[cfg(test)]
mod latency {
    use super::*;

    /// The whole request's gate (allow-list, every string's detectors and topics, the windows,
    /// split values) over the held-out leak set and over one long conversation: µs per KB of
    /// request JSON, p50. Printed (`--nocapture`); the bound is loose for loaded test machines.
    #[test]
    fn whole_request_gate_latency() {
        let config = HybridConfig {
            cloud_url: Some("http://127.0.0.1:9/v1".into()),
            cloud_model: None,
            cloud_key: None,
            policy: Policy::default(),
            audit_log: None,
            judge: None,
            cloud_timeout: DEFAULT_CLOUD_TIMEOUT,
        };
        let hybrid = Hybrid::new(config).unwrap();
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../gate/tests/corpus/leaks_heldout.jsonl");
        let mut requests: Vec<Value> = std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap()["request"].clone())
            .collect();
        // A long agent conversation: every held-out request's messages in one (~20 KB).
        let all: Vec<Value> = requests.iter().flat_map(|r| r["messages"].as_array().unwrap().clone()).collect();
        let long = json!({"messages": all});
        let mut per_kb = Vec::new();
        for r in &requests {
            per_kb.push(time(&hybrid, r));
        }
        per_kb.sort_by(f64::total_cmp);
        let p50 = per_kb[per_kb.len() / 2];
        let long_kb = time(&hybrid, &long);
        eprintln!(
            "gate latency: held-out requests p50 {p50:.1} µs/KB (of {}), a {:.1} KB conversation {long_kb:.1} µs/KB",
            per_kb.len(),
            long.to_string().len() as f64 / 1024.0
        );
        requests.clear();
        assert!(p50 < 1500.0 && long_kb < 1500.0, "{p50} {long_kb}");
    }

    /// Best of 5 runs of the gate on one request, µs per KB of its JSON.
    fn time(hybrid: &Hybrid, request: &Value) -> f64 {
        let kb = request.to_string().len() as f64 / 1024.0;
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            let mut allowed = outbound::allow_listed(request);
            let g = gate(hybrid, 1, &mut allowed);
            std::hint::black_box(&g.counts);
            best = best.min(t.elapsed().as_secs_f64() * 1e6 / kb);
        }
        best
    }
}
