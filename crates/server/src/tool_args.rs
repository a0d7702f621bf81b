//! Tool-call arguments: the model writes each parameter as raw text between
//! `<parameter=NAME>` and `</parameter>` (inside `<tool_call><function=NAME>`); OpenAI clients want a JSON object. The
//! text becomes a JSON value by the type the request's tool schema gives the parameter, as
//! vLLM's `qwen3_coder` parser does: strings stay strings, numbers and booleans are parsed,
//! objects and arrays are read as JSON; anything that does not parse stays a string.

use serde_json::{Map, Value};
use std::collections::HashMap;

/// Function name → parameter name → JSON-schema type (`"integer"`, `["string", "null"]`, …).
#[derive(Clone, Debug, Default)]
pub struct ToolSchemas(HashMap<String, HashMap<String, Value>>);

impl ToolSchemas {
    /// From the request's `tools` (already validated as a list of function tools).
    pub fn from_tools(tools: &[Value]) -> Self {
        let mut map = HashMap::new();
        for tool in tools {
            let Some(function) = tool.get("function") else { continue };
            let Some(name) = function.get("name").and_then(Value::as_str) else { continue };
            let properties = function
                .pointer("/parameters/properties")
                .and_then(Value::as_object)
                .map(|props| props.iter().map(|(k, v)| (k.clone(), param_type(v))).collect())
                .unwrap_or_default();
            map.insert(name.to_string(), properties);
        }
        ToolSchemas(map)
    }

    fn param_type(&self, function: &str, param: &str) -> Option<&Value> {
        self.0.get(function)?.get(param)
    }

    /// `"NAME": VALUE` for one parameter, as a fragment of the arguments JSON.
    pub fn json_member(&self, function: &str, param: &str, raw: &str) -> String {
        let value = convert(raw, self.param_type(function, param));
        format!("{}: {}", Value::from(param), value)
    }
}

/// The `type` of a property schema; `anyOf`/`oneOf` lists contribute their first non-null type.
fn param_type(schema: &Value) -> Value {
    if let Some(t) = schema.get("type") {
        return t.clone();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(list) = schema.get(key).and_then(Value::as_array) {
            if let Some(t) = list.iter().filter_map(|s| s.get("type")).find(|t| t.as_str() != Some("null")) {
                return t.clone();
            }
        }
    }
    Value::Null
}

/// The parameter's text as a JSON value of the schema's type.
pub fn convert(raw: &str, ty: Option<&Value>) -> Value {
    // The format puts the value on its own lines: `<parameter=x>\nVALUE\n</parameter>`.
    let text = raw.strip_prefix('\n').unwrap_or(raw);
    let text = text.strip_suffix('\n').unwrap_or(text);
    let ty = match ty {
        Some(Value::String(t)) => t.to_ascii_lowercase(),
        Some(Value::Array(list)) => {
            list.iter().filter_map(Value::as_str).find(|t| *t != "null").unwrap_or("string").to_ascii_lowercase()
        }
        // Unknown function or parameter: keep the text.
        _ => "string".to_string(),
    };
    let trimmed = text.trim();
    if trimmed.eq_ignore_ascii_case("null") && ty != "string" {
        return Value::Null;
    }
    let parsed =
        match ty.as_str() {
            "string" | "str" | "text" | "varchar" | "char" | "enum" => None,
            "integer" | "int" => trimmed.parse::<i64>().ok().map(Value::from),
            "number" | "float" | "double" => trimmed.parse::<i64>().ok().map(Value::from).or_else(|| {
                trimmed.parse::<f64>().ok().and_then(|f| serde_json::Number::from_f64(f).map(Value::Number))
            }),
            "boolean" | "bool" => match trimmed.to_ascii_lowercase().as_str() {
                "true" => Some(Value::Bool(true)),
                "false" => Some(Value::Bool(false)),
                _ => None,
            },
            _ => serde_json::from_str::<Value>(trimmed).ok(),
        };
    parsed.unwrap_or_else(|| Value::String(text.to_string()))
}

/// A Hermes-style call, `{"name": …, "arguments": {…}}`, written inside `<tool_call>` instead of
/// the XML form: (name, arguments JSON).
pub fn json_call(body: &str) -> Option<(String, String)> {
    let value: Value = serde_json::from_str(body.trim()).ok()?;
    let name = value.get("name")?.as_str()?.to_string();
    let args = match value.get("arguments").or_else(|| value.get("parameters")) {
        Some(Value::String(s)) => serde_json::from_str::<Value>(s).ok().filter(Value::is_object)?,
        Some(v @ Value::Object(_)) => v.clone(),
        None => Value::Object(Map::new()),
        Some(_) => return None,
    };
    Some((name, args.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn converts_by_schema_type() {
        let tools = [
            json!({"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
                "s": {"type": "string"}, "i": {"type": "integer"}, "n": {"type": "number"}, "b": {"type": "boolean"},
                "o": {"type": "object"}, "a": {"type": "array"}, "u": {"anyOf": [{"type": "null"}, {"type": "integer"}]},
                "l": {"type": ["null", "number"]}
            }}}}),
        ];
        let s = ToolSchemas::from_tools(&tools);
        let member = |p: &str, raw: &str| s.json_member("f", p, raw);
        assert_eq!(member("s", "\n42\n"), r#""s": "42""#);
        assert_eq!(member("s", "\nline 1\nline 2\n"), r#""s": "line 1\nline 2""#);
        assert_eq!(member("i", "\n42\n"), r#""i": 42"#);
        assert_eq!(member("i", "\nforty\n"), r#""i": "forty""#);
        assert_eq!(member("n", "\n2.5\n"), r#""n": 2.5"#);
        assert_eq!(member("b", "\nTrue\n"), r#""b": true"#);
        assert_eq!(member("o", "\n{\"k\": [1]}\n"), r#""o": {"k":[1]}"#);
        assert_eq!(member("a", "\n[1, 2]\n"), r#""a": [1,2]"#);
        assert_eq!(member("u", "\n7\n"), r#""u": 7"#);
        assert_eq!(member("l", "\nnull\n"), r#""l": null"#);
        assert_eq!(member("zzz", "\n7\n"), r#""zzz": "7""#);
        assert_eq!(s.json_member("unknown_fn", "q\"", "x"), r#""q\"": "x""#);
    }

    #[test]
    fn hermes_json_calls() {
        assert_eq!(json_call(r#" {"name": "f", "arguments": {"a": 1}} "#), Some(("f".into(), r#"{"a":1}"#.into())));
        assert_eq!(json_call(r#"{"name": "f", "arguments": "{\"a\": 1}"}"#), Some(("f".into(), r#"{"a":1}"#.into())));
        assert_eq!(json_call("not json"), None);
    }
}
