//! The cloud's side of the hybrid router: the request sent with a bounded wait
//! (`--cloud-timeout`, for the first byte and between bytes), failures told apart (unreachable:
//! the policy's `on_cloud_error`; a 5xx: an OpenAI-style 502 naming the cloud), the answer
//! restored (placeholders → values, streamed too), and a local fallback's answer marked as one.

use crate::error::ApiError;
use crate::handlers::{self, sse_data, sse_done, App};
use crate::hybrid::Hybrid;
use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::{json, Map, Value};
use solo_gate::Restorer;
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

/// Why the cloud gave no answer.
#[derive(Debug)]
pub enum CloudFailure {
    /// No connection, no first byte within the timeout, a 502/503/504, a body cut off: nothing
    /// came back, the policy's `on_cloud_error` decides.
    Unreachable(String),
    /// The cloud answered with another 5xx: reported as a 502 naming it.
    Error(Response),
}

/// The cloud's host, for messages (never its key or path).
pub fn host(endpoint: &str) -> &str {
    let rest = endpoint.split("://").nth(1).unwrap_or(endpoint);
    rest.split('/').next().unwrap_or(rest)
}

fn cloud_error(status: StatusCode, message: String, code: &'static str) -> Response {
    ApiError { status, message, kind: "server_error", code: Some(code), param: None, retry_after: None }.into_response()
}

/// Sends the (masked) request to the cloud and gives back its answer, restored.
pub async fn send(
    app: &App,
    hybrid: &Hybrid,
    endpoint: &str,
    body: &Value,
    restorations: HashMap<String, String>,
) -> Result<Response, CloudFailure> {
    let wait = hybrid.config.cloud_timeout;
    let secs = wait.as_secs_f64();
    let mut request = hybrid.client.post(endpoint).timeout(app.request_timeout.max(wait)).json(body);
    if let Some(key) = &hybrid.config.cloud_key {
        request = request.bearer_auth(key);
    }
    let response = match tokio::time::timeout(wait, request.send()).await {
        Err(_) => return Err(CloudFailure::Unreachable(format!("no answer within {secs} s"))),
        Ok(Err(e)) if e.is_timeout() => return Err(CloudFailure::Unreachable("timed out".into())),
        Ok(Err(_)) => return Err(CloudFailure::Unreachable("connection failed".into())),
        Ok(Ok(r)) => r,
    };
    let status = response.status();
    if matches!(status.as_u16(), 502..=504) {
        return Err(CloudFailure::Unreachable(format!("it answered {status}")));
    }
    let restorer = Restorer::new(restorations);
    let streaming = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if status.is_success() && streaming {
        return Ok(stream_restored(response, restorer, wait, host(endpoint).to_string()));
    }
    let bytes = match tokio::time::timeout(wait, response.bytes()).await {
        Err(_) => return Err(CloudFailure::Unreachable(format!("the answer stalled for {secs} s"))),
        Ok(Err(_)) => return Err(CloudFailure::Unreachable("the answer was cut off".into())),
        Ok(Ok(b)) => b,
    };
    if status.is_server_error() {
        // The cloud's own message, restored, inside ours; never its status passed on raw.
        let said = serde_json::from_slice::<Value>(&bytes)
            .ok()
            .and_then(|v| v.pointer("/error/message").and_then(Value::as_str).map(str::to_string))
            .unwrap_or_else(|| String::from_utf8_lossy(&bytes).chars().take(300).collect());
        let message =
            format!("The cloud model at {} answered {status}: {}", host(endpoint), restorer.restore(said.trim()));
        return Err(CloudFailure::Error(cloud_error(StatusCode::BAD_GATEWAY, message, "cloud_error")));
    }
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

/// A local answer given because the cloud failed: `X-Solo-Route: local-fallback`,
/// `X-Solo-Reason`, and in the body `solo_route` / `solo_reason` (a JSON answer's fields; a
/// stream's first event, a chunk with no choices).
pub async fn mark_fallback(response: Response, reason: &str) -> Response {
    let (mut parts, body) = response.into_parts();
    parts.headers.insert("x-solo-route", HeaderValue::from_static("local-fallback"));
    if let Ok(v) = HeaderValue::from_str(&crate::outbound::header_text(reason)) {
        parts.headers.insert("x-solo-reason", v);
    }
    let streaming = parts
        .headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if streaming {
        let reason = reason.to_string();
        let state = (body.into_data_stream(), Vec::<u8>::new(), false);
        let events = futures_util::stream::unfold(state, move |(mut upstream, mut held, mut marked)| {
            let reason = reason.clone();
            async move {
                loop {
                    if marked {
                        return upstream.next().await.map(|b| (b, (upstream, held, marked)));
                    }
                    match upstream.next().await {
                        Some(Ok(bytes)) => held.extend_from_slice(&bytes),
                        Some(Err(e)) => return Some((Err(e), (upstream, held, true))),
                        None => {
                            marked = true;
                            if held.is_empty() {
                                return None;
                            }
                            let rest = Bytes::from(std::mem::take(&mut held));
                            return Some((Ok(rest), (upstream, held, marked)));
                        }
                    }
                    // The first event gains the fields; the rest goes on as it came.
                    let Some(end) = held.windows(2).position(|w| w == b"\n\n") else { continue };
                    let first = String::from_utf8_lossy(&held[..end]).to_string();
                    let rest = held.split_off(end + 2);
                    let marked_first = first
                        .strip_prefix("data: ")
                        .and_then(|d| serde_json::from_str::<Value>(d).ok())
                        .filter(Value::is_object)
                        .map(|mut v| {
                            v["solo_route"] = Value::from("local-fallback");
                            v["solo_reason"] = Value::from(reason.as_str());
                            format!("data: {v}\n\n")
                        })
                        .unwrap_or(format!("{first}\n\n"));
                    let mut out = marked_first.into_bytes();
                    out.extend_from_slice(&rest);
                    return Some((Ok(Bytes::from(out)), (upstream, Vec::new(), true)));
                }
            }
        });
        return Response::from_parts(parts, Body::from_stream(events));
    }
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap_or_default();
    let bytes = match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(mut map)) => {
            map.insert("solo_route".into(), Value::from("local-fallback"));
            map.insert("solo_reason".into(), Value::from(reason));
            parts.headers.remove("content-length");
            Bytes::from(Value::Object(map).to_string())
        }
        _ => bytes,
    };
    Response::from_parts(parts, Body::from(bytes))
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

/// The cloud's stream, restored; a stall past `wait` between its bytes ends it with an error
/// event naming the cloud (what came before stays sent).
fn stream_restored(response: reqwest::Response, restorer: Restorer, wait: Duration, host: String) -> Response {
    let state = (
        response.bytes_stream(),
        StreamRestore { template: restorer, fields: HashMap::new(), buffer: String::new() },
        VecDeque::<Bytes>::new(),
        false,
    );
    let events = futures_util::stream::unfold(state, move |(mut upstream, mut sr, mut queue, mut done)| {
        let host = host.clone();
        async move {
            loop {
                if let Some(b) = queue.pop_front() {
                    return Some((Ok::<Bytes, std::convert::Infallible>(b), (upstream, sr, queue, done)));
                }
                if done {
                    return None;
                }
                let broke = |message: String, code: &'static str| ApiError {
                    status: StatusCode::BAD_GATEWAY,
                    message,
                    kind: "server_error",
                    code: Some(code),
                    param: None,
                    retry_after: None,
                };
                match tokio::time::timeout(wait, upstream.next()).await {
                    Ok(Some(Ok(bytes))) => queue.extend(sr.feed(&bytes)),
                    Ok(Some(Err(_))) => {
                        let e = broke(format!("The cloud model's stream ({host}) broke off."), "cloud_stream_error");
                        queue.extend(sr.flush_all());
                        queue.push_back(sse_data(&e.body()));
                        queue.push_back(sse_done());
                        done = true;
                    }
                    Err(_) => {
                        let e = broke(
                            format!(
                                "The cloud model ({host}) sent nothing for {} s; its answer is cut off here.",
                                wait.as_secs_f64()
                            ),
                            "cloud_timeout",
                        );
                        queue.extend(sr.flush_all());
                        queue.push_back(sse_data(&e.body()));
                        queue.push_back(sse_done());
                        done = true;
                    }
                    Ok(None) => {
                        if !sr.buffer.trim().is_empty() {
                            sr.buffer.push_str("\n\n");
                            queue.extend(sr.feed(b""));
                        }
                        queue.extend(sr.flush_all());
                        done = true;
                    }
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
