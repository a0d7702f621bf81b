//! What a chat request sends to the cloud, and every string in it. The forwarded request is built
//! from an allow-list of fields (top-level and per message); a field solo does not know is
//! dropped, never passed on unread. Every string left in it is visited, in one fixed order, with
//! where it stands (`Source`): the gate reads and masks each, the topic sensitivity weighs each by
//! its source.

use serde_json::{Map, Value};

/// Top-level fields forwarded to the cloud. Anything else is dropped.
pub const REQUEST_FIELDS: &[&str] = &[
    "model",
    "messages",
    "stream",
    "stream_options",
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "n",
    "stop",
    "presence_penalty",
    "frequency_penalty",
    "logit_bias",
    "logprobs",
    "top_logprobs",
    "seed",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "response_format",
    "user",
    "metadata",
    "prediction",
    "reasoning_effort",
    // Sampling and template settings other OpenAI-compatible servers (vLLM, another solo) take.
    "top_k",
    "min_p",
    "repetition_penalty",
    "enable_thinking",
    "chat_template_kwargs",
];

/// A message's fields forwarded to the cloud.
pub const MESSAGE_FIELDS: &[&str] =
    &["role", "content", "name", "tool_calls", "tool_call_id", "reasoning_content", "reasoning", "refusal"];

/// Keys whose strings are the request's structure, not its text (`"role": "user"`, a part's
/// `"type"`, ids): not scanned, never masked.
const STRUCTURE: &[&str] = &["role", "type", "tool_call_id", "id", "model", "reasoning_effort", "detail"];

/// Keys of JSON schemas and of the API's own objects: not the caller's text.
const SCHEMA_KEYS: &[&str] = &[
    "function",
    "name",
    "description",
    "parameters",
    "properties",
    "required",
    "items",
    "enum",
    "strict",
    "additionalProperties",
    "json_schema",
    "schema",
    "format",
    "default",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "pattern",
    "anyOf",
    "oneOf",
    "allOf",
    "const",
    "title",
    "$defs",
    "$ref",
    "content",
];

/// Where a string stands in the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// A message's text (content, name, reasoning, tool-call arguments): its index and role.
    Message(usize, Role),
    /// A tool definition: name, description, parameter schema.
    ToolDefinition,
    /// `metadata` and `user`: facts about the person the request is for.
    About,
    /// `stop`, `response_format`, `prediction` and the rest.
    Other,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl Role {
    fn of(name: &str) -> Role {
        match name {
            "system" | "developer" => Role::System,
            "assistant" => Role::Assistant,
            "tool" | "function" => Role::Tool,
            _ => Role::User,
        }
    }
}

/// The request as it may leave: the allow-listed fields of the body and of each message.
pub fn allow_listed(body: &Value) -> Value {
    let Some(obj) = body.as_object() else { return body.clone() };
    let mut out = Map::new();
    for (k, v) in obj {
        if !REQUEST_FIELDS.contains(&k.as_str()) {
            continue;
        }
        if k == "messages" {
            let messages = match v.as_array() {
                Some(list) => list
                    .iter()
                    .map(|m| match m.as_object() {
                        Some(m) => Value::Object(
                            m.iter()
                                .filter(|(k, _)| MESSAGE_FIELDS.contains(&k.as_str()))
                                .map(|(k, v)| (k.clone(), v.clone()))
                                .collect(),
                        ),
                        None => m.clone(),
                    })
                    .collect(),
                None => Vec::new(),
            };
            out.insert(k.clone(), Value::Array(messages));
        } else {
            out.insert(k.clone(), v.clone());
        }
    }
    Value::Object(out)
}

/// The top-level fields of `body` that `allow_listed` drops.
pub fn dropped(body: &Value) -> Vec<String> {
    body.as_object()
        .map(|o| o.keys().filter(|k| !REQUEST_FIELDS.contains(&k.as_str())).cloned().collect())
        .unwrap_or_default()
}

/// Calls `f` on every string of an (allow-listed) request but its structure, in a fixed order.
pub fn visit(body: &mut Value, f: &mut dyn FnMut(Source, &mut String)) {
    let Some(obj) = body.as_object_mut() else { return };
    for (key, value) in obj.iter_mut() {
        match key.as_str() {
            "model" | "stream" | "stream_options" | "reasoning_effort" => {}
            "messages" => {
                let Some(list) = value.as_array_mut() else { continue };
                for (i, m) in list.iter_mut().enumerate() {
                    let role = Role::of(m.get("role").and_then(Value::as_str).unwrap_or("user"));
                    strings(m, Source::Message(i, role), f);
                }
            }
            "tools" | "tool_choice" => strings(value, Source::ToolDefinition, f),
            "metadata" | "user" => strings(value, Source::About, f),
            _ => strings(value, Source::Other, f),
        }
    }
}

fn strings(value: &mut Value, source: Source, f: &mut dyn FnMut(Source, &mut String)) {
    match value {
        // An inline image or file (`data:`) is not read: the gate reads text, not pixels.
        Value::String(s) if !s.starts_with("data:") => f(source, s),
        Value::Array(items) => items.iter_mut().for_each(|v| strings(v, source, f)),
        Value::Object(map) => {
            // Outside the messages (whose shape is fixed), keys are the caller's too
            // (`metadata: {"jane@example.com": …}`, a schema's property names): read, and masked
            // like values, but for the keys of JSON schemas and of the API.
            let keys = !matches!(source, Source::Message(..));
            let entries = std::mem::take(map);
            for (mut k, mut v) in entries {
                if !(STRUCTURE.contains(&k.as_str()) && v.is_string()) {
                    strings(&mut v, source, f);
                }
                if keys && !SCHEMA_KEYS.contains(&k.as_str()) && !STRUCTURE.contains(&k.as_str()) {
                    f(source, &mut k);
                }
                map.insert(k, v);
            }
        }
        _ => {}
    }
}

/// A header value of any text: printable ASCII kept, anything else percent-encoded (UTF-8).
pub fn header_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if (0x20..0x7f).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_fields_are_dropped_and_every_string_is_visited() {
        let body = json!({
            "model": "m", "secret_field": "x", "user": "u@example.com", "stop": ["s1"],
            "metadata": {"diagnosis": "d"},
            "messages": [
                {"role": "system", "content": "sys", "extra": "dropped"},
                {"role": "user", "name": "Jen", "content": [{"type": "text", "text": "part"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "result"},
            ],
            "tools": [{"type": "function", "function": {"name": "f", "description": "desc", "parameters": {"type": "object", "properties": {"a": {"type": "string", "enum": ["e1"], "description": "pd"}}}}}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"description": "rd"}}},
            "prediction": {"type": "content", "content": "pred"},
        });
        let mut out = allow_listed(&body);
        assert!(out.get("secret_field").is_none() && out["messages"][0].get("extra").is_none());
        assert_eq!(dropped(&body), vec!["secret_field".to_string()]);
        let mut seen = Vec::new();
        visit(&mut out, &mut |src, s| seen.push((src, s.clone())));
        let texts: Vec<&str> = seen.iter().map(|(_, s)| s.as_str()).collect();
        for want in [
            "sys",
            "Jen",
            "part",
            "f",
            "{\"a\":1}",
            "result",
            "desc",
            "e1",
            "pd",
            "u@example.com",
            "s1",
            "d",
            "n",
            "rd",
            "pred",
        ] {
            assert!(texts.contains(&want), "{want} not visited: {texts:?}");
        }
        for never in ["m", "user", "system", "c1", "function", "text", "data:image/png;base64,AAAA"] {
            assert!(!texts.contains(&never), "{never} visited: {texts:?}");
        }
        assert!(seen.contains(&(Source::Message(3, Role::Tool), "result".into())));
        assert!(seen.contains(&(Source::About, "d".into())));
        assert_eq!(header_text("HEALTH: quimioterapia, bösartig"), "HEALTH: quimioterapia, b%C3%B6sartig");
        // The caller's keys are read (a metadata key, a property name); schema keywords are not.
        assert!(texts.contains(&"diagnosis") && texts.contains(&"a"), "{texts:?}");
        assert!(!texts.contains(&"properties") && !texts.contains(&"description"), "{texts:?}");
    }
}
