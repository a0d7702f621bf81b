//! The message clean-up that HF and vLLM apply before the template sees the conversation.
//!
//! The rendered prompt must equal what a user of HF `apply_chat_template` (transformers 5) or of
//! vLLM's OpenAI server gets, and both rewrite the messages first:
//! - HF drops top-level message keys whose value is `None` (OpenAI clients send `content: null`).
//! - HF aliases reasoning: the first non-null of `reasoning_content`, `thinking`, `reasoning`
//!   fills `reasoning_content` (what the Qwen template reads) and `thinking` (if absent).
//! - vLLM parses tool-call `arguments` sent as a JSON string (the OpenAI wire format) into an
//!   object, because the Qwen template iterates `arguments|items`; HF alone would fail on a
//!   string. Empty/invalid/non-object arguments become `{}` and an empty `tool_calls` list is
//!   dropped, as vLLM does.

use serde_json::{Map, Value};

/// Returns the messages as the template should see them. Non-object entries are left alone
/// (the template then reports them).
pub fn normalize_messages(messages: &Value) -> Value {
    match messages {
        Value::Array(list) => Value::Array(list.iter().map(normalize_message).collect()),
        other => other.clone(),
    }
}

fn normalize_message(message: &Value) -> Value {
    let Value::Object(fields) = message else {
        return message.clone();
    };
    let mut out: Map<String, Value> =
        fields.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), v.clone())).collect();

    let reasoning = ["reasoning_content", "thinking", "reasoning"].iter().find_map(|k| out.get(*k)).cloned();
    if let Some(reasoning) = reasoning {
        // Python: {"thinking": r, **message, "reasoning_content": r}; order is irrelevant here.
        out.entry("thinking").or_insert_with(|| reasoning.clone());
        out.insert("reasoning_content".into(), reasoning);
    }

    if out.get("role").and_then(Value::as_str) == Some("assistant") {
        if let Some(Value::Array(calls)) = out.get_mut("tool_calls") {
            if calls.is_empty() {
                out.remove("tool_calls");
            } else {
                calls.iter_mut().for_each(normalize_tool_call);
            }
        }
    }
    Value::Object(out)
}

/// Accepts both the OpenAI shape `{"function": {"name", "arguments"}}` and a flat `{"name",
/// "arguments"}` (the template reads `tool_call.function` when it is defined).
fn normalize_tool_call(call: &mut Value) {
    let Some(call) = call.as_object_mut() else {
        return;
    };
    let target = match call.get_mut("function") {
        Some(Value::Object(function)) => function,
        _ => call,
    };
    let args = target.get("arguments").cloned().unwrap_or(Value::Null);
    let parsed = match args {
        Value::String(s) if !s.is_empty() => serde_json::from_str(&s).unwrap_or(Value::Null),
        other => other,
    };
    let parsed = match parsed {
        Value::Object(map) => Value::Object(map),
        _ => Value::Object(Map::new()),
    };
    target.insert("arguments".into(), parsed);
}

#[cfg(test)]
mod tests {
    use super::normalize_messages;
    use serde_json::json;

    #[test]
    fn drops_nulls_aliases_reasoning_and_parses_arguments() {
        let got = normalize_messages(&json!([
            {"role": "assistant", "content": null, "reasoning": "hmm", "tool_calls": [
                {"type": "function", "function": {"name": "f", "arguments": "{\"b\": 1, \"a\": [2]}"}},
                {"type": "function", "function": {"name": "g", "arguments": "not json"}},
                {"name": "h", "arguments": ""}
            ]},
            {"role": "assistant", "content": "x", "tool_calls": []}
        ]));
        let want = json!([
            {"role": "assistant", "reasoning": "hmm", "thinking": "hmm", "reasoning_content": "hmm",
             "tool_calls": [
                {"type": "function", "function": {"name": "f", "arguments": {"b": 1, "a": [2]}}},
                {"type": "function", "function": {"name": "g", "arguments": {}}},
                {"name": "h", "arguments": {}}
            ]},
            {"role": "assistant", "content": "x"}
        ]);
        assert_eq!(got, want);
        // Key order of parsed arguments is kept: the template lists parameters in this order.
        let args = &got[0]["tool_calls"][0]["function"]["arguments"];
        assert_eq!(args.as_object().unwrap().keys().collect::<Vec<_>>(), ["b", "a"]);
    }
}
