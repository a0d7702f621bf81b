//! Reading OpenAI request bodies: every field solo honours is checked here, with a 400 that names
//! the field; features solo does not offer get a 400 that says so; anything else (`user`,
//! `metadata`, `store`, `service_tier`, …) is accepted and ignored.

use crate::engine::Sampling;
use crate::error::ApiError;
use serde_json::{Map, Value};

/// Most `top_logprobs` a request may ask for (OpenAI's limit).
pub const MAX_TOP_LOGPROBS: usize = 20;

/// Typed access to the body's fields; `null` counts as absent.
pub struct Fields<'a>(pub &'a Map<String, Value>);

impl<'a> Fields<'a> {
    /// The body must be a JSON object.
    pub fn of(body: &'a Value) -> Result<Self, ApiError> {
        body.as_object().map(Fields).ok_or_else(|| ApiError::invalid("The request body must be a JSON object."))
    }

    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.0.get(key).filter(|v| !v.is_null())
    }

    fn typed<T>(&self, key: &str, what: &str, read: impl Fn(&'a Value) -> Option<T>) -> Result<Option<T>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => read(v)
                .map(Some)
                .ok_or_else(|| ApiError::invalid_param(key, format!("`{key}` must be {what}, got {}.", describe(v)))),
        }
    }

    pub fn number(&self, key: &str) -> Result<Option<f64>, ApiError> {
        self.typed(key, "a number", Value::as_f64)
    }

    pub fn integer(&self, key: &str) -> Result<Option<i64>, ApiError> {
        self.typed(key, "an integer", |v| v.as_i64().or_else(|| v.as_u64().map(|u| u as i64)))
    }

    pub fn boolean(&self, key: &str) -> Result<Option<bool>, ApiError> {
        self.typed(key, "a boolean", Value::as_bool)
    }

    pub fn string(&self, key: &str) -> Result<Option<&'a str>, ApiError> {
        self.typed(key, "a string", Value::as_str)
    }

    pub fn object(&self, key: &str) -> Result<Option<&'a Map<String, Value>>, ApiError> {
        self.typed(key, "an object", Value::as_object)
    }

    /// A number in `[lo, hi]`.
    pub fn ranged(&self, key: &str, lo: f64, hi: f64) -> Result<Option<f32>, ApiError> {
        match self.number(key)? {
            Some(x) if !(lo..=hi).contains(&x) => {
                Err(ApiError::invalid_param(key, format!("`{key}` must be between {lo} and {hi}, got {x}.")))
            }
            x => Ok(x.map(|x| x as f32)),
        }
    }
}

fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Sampling defaults: the checkpoint's generation_config.json.
#[derive(Clone, Debug)]
pub struct Defaults {
    pub temperature: f32,
    pub top_k: usize,
    pub top_p: f32,
}

/// What chat and completions requests share.
pub struct Common {
    pub max_tokens: Option<usize>,
    pub sampling: Sampling,
    pub stop: Vec<String>,
    pub stream: bool,
    pub include_usage: bool,
}

/// Reads the shared fields. `vocab` bounds `logit_bias` ids; `fallback_seed` is used when the
/// request gives none.
pub fn common(f: &Fields, defaults: &Defaults, vocab: usize, fallback_seed: u64) -> Result<Common, ApiError> {
    reject_unsupported(f)?;
    let max_tokens = match f.integer("max_completion_tokens")?.or(f.integer("max_tokens")?) {
        Some(n) if n < 1 => {
            return Err(ApiError::invalid_param("max_tokens", format!("`max_tokens` must be at least 1, got {n}.")))
        }
        n => n.map(|n| n as usize),
    };
    let temperature = match f.number("temperature")? {
        Some(t) if !(0.0..=2.0).contains(&t) => {
            return Err(ApiError::invalid_param(
                "temperature",
                format!("`temperature` must be between 0 and 2, got {t}."),
            ))
        }
        t => t.map_or(defaults.temperature, |t| t as f32),
    };
    let top_p = match f.number("top_p")? {
        Some(p) if !(p > 0.0 && p <= 1.0) => {
            return Err(ApiError::invalid_param("top_p", format!("`top_p` must be in (0, 1], got {p}.")))
        }
        p => p.map_or(defaults.top_p, |p| p as f32),
    };
    let top_k = match f.integer("top_k")? {
        Some(k) if k < -1 => {
            return Err(ApiError::invalid_param("top_k", format!("`top_k` must be -1 (off) or at least 0, got {k}.")))
        }
        Some(k) => k.max(0) as usize,
        None => defaults.top_k,
    };
    let sampling = Sampling {
        temperature,
        top_k,
        top_p,
        min_p: f.ranged("min_p", 0.0, 1.0)?.unwrap_or(0.0),
        presence_penalty: f.ranged("presence_penalty", -2.0, 2.0)?.unwrap_or(0.0),
        frequency_penalty: f.ranged("frequency_penalty", -2.0, 2.0)?.unwrap_or(0.0),
        logit_bias: logit_bias(f, vocab)?,
        seed: f.integer("seed")?.map_or(fallback_seed, |s| s as u64),
    };
    let stream = f.boolean("stream")?.unwrap_or(false);
    let include_usage = match f.object("stream_options")? {
        Some(o) => Fields(o).boolean("include_usage")?.unwrap_or(false),
        None => false,
    };
    Ok(Common { max_tokens, sampling, stop: stop(f)?, stream, include_usage })
}

/// `stop`: a string or a list of strings.
fn stop(f: &Fields) -> Result<Vec<String>, ApiError> {
    let bad = || ApiError::invalid_param("stop", "`stop` must be a string or a list of strings.");
    let list = match f.get("stop") {
        None => vec![],
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => {
            items.iter().map(|v| v.as_str().map(str::to_string).ok_or_else(bad)).collect::<Result<_, _>>()?
        }
        Some(_) => return Err(bad()),
    };
    if list.len() > 16 {
        return Err(ApiError::invalid_param("stop", format!("At most 16 stop strings, got {}.", list.len())));
    }
    // Each token compares the held-back text against every prefix of every stop string.
    if let Some(long) = list.iter().find(|s| s.len() > 1024) {
        return Err(ApiError::invalid_param(
            "stop",
            format!("Stop strings may be at most 1024 bytes; one has {}.", long.len()),
        ));
    }
    Ok(list)
}

/// `logit_bias`: token id (as a string key) → bias in [-100, 100].
fn logit_bias(f: &Fields, vocab: usize) -> Result<Vec<(u32, f32)>, ApiError> {
    let Some(map) = f.object("logit_bias")? else { return Ok(vec![]) };
    map.iter()
        .map(|(k, v)| {
            let id = k.parse::<u32>().ok().filter(|&id| (id as usize) < vocab).ok_or_else(|| {
                ApiError::invalid_param(
                    "logit_bias",
                    format!("`logit_bias` key {k:?} is not a token id below {vocab}."),
                )
            })?;
            let bias = v.as_f64().filter(|b| (-100.0..=100.0).contains(b)).ok_or_else(|| {
                ApiError::invalid_param(
                    "logit_bias",
                    format!("`logit_bias` values must be numbers in [-100, 100]; {k:?} has {v}."),
                )
            })?;
            Ok((id, bias as f32))
        })
        .collect()
}

/// Fields that ask for something solo cannot do. Each gets a 400 that names it, rather than
/// being silently ignored.
fn reject_unsupported(f: &Fields) -> Result<(), ApiError> {
    if let Some(n) = f.integer("n")? {
        if n != 1 {
            return Err(ApiError::unsupported("n", &format!("n = {n} (several choices per request); use n = 1")));
        }
    }
    if f.integer("best_of")?.is_some_and(|b| b != 1) {
        return Err(ApiError::unsupported("best_of", "best_of > 1"));
    }
    if f.get("functions").is_some() || f.get("function_call").is_some() {
        return Err(ApiError::unsupported("functions", "The legacy `functions`/`function_call` API (use `tools`)"));
    }
    if let Some(format) = f.get("response_format") {
        if format.get("type").and_then(Value::as_str) != Some("text") {
            return Err(ApiError::unsupported(
                "response_format",
                "response_format other than text (JSON mode, structured outputs)",
            ));
        }
    }
    if f.get("audio").is_some() {
        return Err(ApiError::unsupported("audio", "Audio output"));
    }
    if let Some(m) = f.get("modalities") {
        if m.as_array().is_none_or(|list| list.iter().any(|x| x.as_str() != Some("text"))) {
            return Err(ApiError::unsupported("modalities", "Output modalities other than text"));
        }
    }
    if f.get("prediction").is_some() {
        return Err(ApiError::unsupported("prediction", "Predicted outputs"));
    }
    if f.get("web_search_options").is_some() {
        return Err(ApiError::unsupported("web_search_options", "Web search"));
    }
    if f.number("repetition_penalty")?.is_some_and(|p| p != 1.0) {
        return Err(ApiError::unsupported(
            "repetition_penalty",
            "repetition_penalty (use presence_penalty / frequency_penalty)",
        ));
    }
    if f.boolean("echo")? == Some(true) {
        return Err(ApiError::unsupported("echo", "echo"));
    }
    if f.get("suffix").is_some() {
        return Err(ApiError::unsupported("suffix", "suffix (fill-in-the-middle)"));
    }
    Ok(())
}

/// `model` must name the served model when given: its id, or the id's last path part
/// (`Qwen3.6-35B-A3B` for `Qwen/Qwen3.6-35B-A3B`).
pub fn check_model(f: &Fields, served: &str) -> Result<(), ApiError> {
    let Some(model) = f.string("model")? else { return Ok(()) };
    let short = served.rsplit('/').next().unwrap_or(served);
    if model == served || model == short {
        Ok(())
    } else {
        Err(ApiError::model_not_found(model))
    }
}

/// Chat `logprobs` + `top_logprobs`: `None` for no logprobs, else how many alternatives.
pub fn chat_logprobs(f: &Fields) -> Result<Option<usize>, ApiError> {
    let top = f.integer("top_logprobs")?;
    if let Some(n) = top {
        if !(0..=MAX_TOP_LOGPROBS as i64).contains(&n) {
            return Err(ApiError::invalid_param(
                "top_logprobs",
                format!("`top_logprobs` must be between 0 and {MAX_TOP_LOGPROBS}, got {n}."),
            ));
        }
    }
    match f.boolean("logprobs")? {
        Some(true) => Ok(Some(top.unwrap_or(0) as usize)),
        _ if top.is_some_and(|n| n > 0) => {
            Err(ApiError::invalid_param("top_logprobs", "`top_logprobs` needs `logprobs` set to true."))
        }
        _ => Ok(None),
    }
}

/// Completions `logprobs`: an integer, how many alternatives (0 = the chosen token only).
pub fn completion_logprobs(f: &Fields) -> Result<Option<usize>, ApiError> {
    match f.integer("logprobs")? {
        Some(n) if !(0..=MAX_TOP_LOGPROBS as i64).contains(&n) => Err(ApiError::invalid_param(
            "logprobs",
            format!("`logprobs` must be between 0 and {MAX_TOP_LOGPROBS}, got {n}."),
        )),
        n => Ok(n.map(|n| n as usize)),
    }
}

/// `tool_choice`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolChoice {
    Auto,
    None,
    Required,
    Named(String),
}

/// `tools` (function tools only) and `tool_choice`.
pub fn tools(f: &Fields) -> Result<(Vec<Value>, ToolChoice), ApiError> {
    let tools = match f.get("tools") {
        None => vec![],
        Some(Value::Array(list)) => list.clone(),
        Some(_) => return Err(ApiError::invalid_param("tools", "`tools` must be a list.")),
    };
    for tool in &tools {
        let kind = tool.get("type").and_then(Value::as_str);
        if kind != Some("function") {
            return Err(ApiError::unsupported("tools", &format!("Tools of type {}", kind.unwrap_or("(missing)"))));
        }
        if tool.pointer("/function/name").and_then(Value::as_str).is_none_or(str::is_empty) {
            return Err(ApiError::invalid_param("tools", "Every tool needs `function.name`."));
        }
    }
    let names = || tools.iter().filter_map(|t| t.pointer("/function/name")?.as_str());
    let choice = match f.get("tool_choice") {
        None => ToolChoice::Auto,
        Some(Value::String(s)) => match s.as_str() {
            "auto" => ToolChoice::Auto,
            "none" => ToolChoice::None,
            "required" => ToolChoice::Required,
            other => return Err(ApiError::invalid_param("tool_choice", format!("Unknown `tool_choice` {other:?}."))),
        },
        Some(v) => match v.pointer("/function/name").and_then(Value::as_str) {
            Some(name) if v.get("type").and_then(Value::as_str) == Some("function") => {
                ToolChoice::Named(name.to_string())
            }
            _ => return Err(ApiError::invalid_param(
                "tool_choice",
                "`tool_choice` must be auto, none, required or {\"type\": \"function\", \"function\": {\"name\": …}}.",
            )),
        },
    };
    match &choice {
        ToolChoice::Required | ToolChoice::Named(_) if tools.is_empty() => Err(ApiError::invalid_param(
            "tool_choice",
            "`tool_choice` requires a tool, but the request has no `tools`.",
        )),
        ToolChoice::Named(name) if !names().any(|n| n == name) => Err(ApiError::invalid_param(
            "tool_choice",
            format!("`tool_choice` names {name:?}, which is not in `tools`."),
        )),
        _ => Ok((tools, choice)),
    }
}

/// `chat_template_kwargs` (`enable_thinking`, `preserve_thinking`); a top-level
/// `enable_thinking`, as some clients send it, counts too.
pub fn thinking(f: &Fields) -> Result<(Option<bool>, Option<bool>), ApiError> {
    let (mut enable, mut preserve) = (f.boolean("enable_thinking")?, None);
    if let Some(kwargs) = f.object("chat_template_kwargs")? {
        let k = Fields(kwargs);
        enable = k.boolean("enable_thinking")?.or(enable);
        preserve = k.boolean("preserve_thinking")?;
    }
    Ok((enable, preserve))
}
