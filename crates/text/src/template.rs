//! The checkpoint's chat template, rendered with minijinja configured to behave like the
//! Python jinja2 environment of HF `apply_chat_template` (transformers
//! `utils/chat_template_utils.py`): `trim_blocks`, `lstrip_blocks`, loop controls, no
//! autoescape, a non-escaping `tojson`, `raise_exception` and `strftime_now`.
//!
//! Where minijinja and jinja2 differ on something a template can observe, this module patches
//! minijinja (see `build_env`); the fixture tests compare against HF's own output byte for byte.

use crate::messages::normalize_messages;
use crate::pyjson::tojson_filter;
use anyhow::{bail, Context, Result};
use minijinja::value::Value;
use minijinja::{AutoEscape, Environment, Error, ErrorKind, State};
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// Template variables beyond the messages. `None` leaves the variable undefined in the
/// template, which is what omitting the keyword argument does in HF.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TemplateOptions {
    pub add_generation_prompt: bool,
    /// Qwen3.6 default (undefined) is thinking ON.
    pub enable_thinking: Option<bool>,
    /// Keep reasoning of assistant turns before the last user query.
    pub preserve_thinking: Option<bool>,
}

/// The template called `raise_exception(message)`: the request itself is invalid
/// (e.g. "No user query found in messages."). Recover it with `err.downcast_ref()`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateException(pub String);

impl fmt::Display for TemplateException {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "chat template error: {}", self.0)
    }
}

impl std::error::Error for TemplateException {}

/// A compiled chat template plus the special-token strings HF passes alongside the messages.
pub struct ChatTemplate {
    env: Environment<'static>,
    /// `bos_token`, `eos_token`, ... from tokenizer_config.json, as HF's `special_tokens_map`.
    special_tokens: BTreeMap<String, String>,
}

const NAME: &str = "chat_template";

impl ChatTemplate {
    /// Loads `chat_template.jinja` from a checkpoint directory, falling back to
    /// `tokenizer_config.json`'s `chat_template` (a string, or a list of `{name, template}`
    /// from which "default" is used), as transformers does.
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        if solo_model::gguf::is_gguf(dir) {
            let vocab = crate::gguf::vocab(dir)?;
            let Some(source) = vocab.chat_template.clone() else {
                bail!("{}: no tokenizer.chat_template in the GGUF metadata", vocab.source);
            };
            let mut template = Self::from_source(source)?;
            if let Some(eos) = vocab.eos_token_id.and_then(|id| vocab.tokens.get(id as usize)) {
                template.special_tokens.insert("eos_token".into(), eos.clone());
            }
            return Ok(template);
        }
        if !dir.is_dir() {
            bail!("checkpoint directory {} does not exist", dir.display());
        }
        let config = read_tokenizer_config(dir)?;
        let jinja = dir.join("chat_template.jinja");
        let source = if jinja.is_file() {
            std::fs::read_to_string(&jinja).with_context(|| format!("reading {}", jinja.display()))?
        } else {
            template_from_config(config.as_ref()).with_context(|| {
                format!(
                    "no chat template in {}: neither chat_template.jinja nor a \
                     tokenizer_config.json `chat_template` field",
                    dir.display()
                )
            })?
        };
        let mut template = Self::from_source(source)?;
        template.special_tokens = special_tokens_map(config.as_ref());
        Ok(template)
    }

    /// Compiles template source text (no special-token variables are defined).
    pub fn from_source(source: impl Into<String>) -> Result<Self> {
        let mut env = build_env();
        env.add_template_owned(NAME, source.into())
            .map_err(|e| anyhow::anyhow!("chat template does not compile: {e:#}"))?;
        Ok(Self { env, special_tokens: BTreeMap::new() })
    }

    /// Renders OpenAI-style `messages` (a JSON array) and optional `tools` (a JSON array of
    /// tool definitions) to the prompt text, as HF `apply_chat_template(tokenize=False)` would
    /// after vLLM's message clean-up (see `messages.rs`).
    pub fn render(
        &self,
        messages: &serde_json::Value,
        tools: Option<&serde_json::Value>,
        opts: &TemplateOptions,
    ) -> Result<String> {
        if !messages.is_array() {
            bail!("chat messages must be a JSON array");
        }
        // HF: `{**special_tokens_map, **kwargs}`, then messages/tools/documents/add_generation_prompt.
        let mut ctx: BTreeMap<String, Value> =
            self.special_tokens.iter().map(|(k, v)| (k.clone(), Value::from(v.as_str()))).collect();
        if let Some(v) = opts.enable_thinking {
            ctx.insert("enable_thinking".into(), Value::from(v));
        }
        if let Some(v) = opts.preserve_thinking {
            ctx.insert("preserve_thinking".into(), Value::from(v));
        }
        ctx.insert("messages".into(), Value::from_serialize(normalize_messages(messages)));
        ctx.insert("tools".into(), tools.map_or(Value::from(()), Value::from_serialize));
        ctx.insert("documents".into(), Value::from(()));
        ctx.insert("add_generation_prompt".into(), Value::from(opts.add_generation_prompt));

        let template = self.env.get_template(NAME)?;
        template.render(Value::from(ctx)).map_err(|err| match raised_message(&err) {
            Some(msg) => anyhow::Error::new(TemplateException(msg)),
            None => anyhow::anyhow!("rendering the chat template failed: {err:#}"),
        })
    }
}

/// The jinja2 environment of HF's `_compile_jinja_template`, reproduced in minijinja.
fn build_env() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    // jinja2 default: a single trailing newline of the template source is dropped.
    env.set_keep_trailing_newline(false);
    // jinja2.Environment autoescape=False; minijinja would escape templates named `*.html`.
    env.set_auto_escape_callback(|_| AutoEscape::None);
    // Python string/dict methods (`startswith`, `split`, `items`, ...), with Python's
    // whitespace set for argument-less strip/lstrip/rstrip.
    env.set_unknown_method_callback(python_methods);
    env.add_filter("tojson", tojson_filter);
    env.add_filter("trim", python_trim);
    env.add_function("raise_exception", raise_exception);
    env.add_function("strftime_now", strftime_now);
    env
}

/// Python's `str.isspace()` set: Rust's `char::is_whitespace` lacks U+001C..U+001F.
fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// `str.strip/lstrip/rstrip(chars=None)`: strip `chars` if given, else Python whitespace.
fn py_strip<'a>(s: &'a str, chars: Option<&str>, start: bool, end: bool) -> &'a str {
    let set: Option<Vec<char>> = chars.map(|c| c.chars().collect());
    let strip = |c: char| set.as_ref().map_or(is_py_space(c), |set| set.contains(&c));
    let s = if start { s.trim_start_matches(strip) } else { s };
    if end {
        s.trim_end_matches(strip)
    } else {
        s
    }
}

/// jinja2's `trim` filter is `str.strip(chars)`.
fn python_trim(value: String, chars: Option<String>) -> String {
    py_strip(&value, chars.as_deref(), true, true).to_string()
}

fn python_methods(state: &State, value: &Value, method: &str, args: &[Value]) -> Result<Value, Error> {
    if let (Some(s), "strip" | "lstrip" | "rstrip") = (value.as_str(), method) {
        let (chars,): (Option<&str>,) = minijinja::value::from_args(args)?;
        let (start, end) = (method != "rstrip", method != "lstrip");
        return Ok(Value::from(py_strip(s, chars, start, end)));
    }
    minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)
}

/// Carries the template's message out of minijinja so `render` can surface it unchanged.
#[derive(Debug)]
struct Raised(String);

impl fmt::Display for Raised {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Raised {}

fn raise_exception(message: String) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message.clone()).with_source(Raised(message)))
}

/// Finds a `raise_exception` message anywhere in the error's source chain (minijinja may wrap
/// errors raised inside macros).
fn raised_message(err: &Error) -> Option<String> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(raised) = e.downcast_ref::<Raised>() {
            return Some(raised.0.clone());
        }
        cur = e.source();
    }
    None
}

/// `datetime.now().strftime(format)`: local time, strftime directives (chrono's are a superset
/// of the common C ones).
fn strftime_now(format: String) -> Result<Value, Error> {
    use std::fmt::Write;
    let mut out = String::new();
    write!(out, "{}", chrono::Local::now().format(&format))
        .map_err(|_| Error::new(ErrorKind::InvalidOperation, format!("invalid strftime format {format:?}")))?;
    Ok(Value::from(out))
}

fn read_tokenizer_config(dir: &Path) -> Result<Option<serde_json::Value>> {
    let path = dir.join("tokenizer_config.json");
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let value = serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    Ok(Some(value))
}

fn template_from_config(config: Option<&serde_json::Value>) -> Result<String> {
    let field = config.and_then(|c| c.get("chat_template"));
    match field {
        Some(serde_json::Value::String(s)) => Ok(s.clone()),
        Some(serde_json::Value::Array(named)) => named
            .iter()
            .find(|t| t.get("name").and_then(|n| n.as_str()) == Some("default"))
            .and_then(|t| t.get("template")?.as_str())
            .map(str::to_string)
            .context("tokenizer_config.json lists named chat templates but none called \"default\""),
        _ => bail!("missing"),
    }
}

/// HF's `special_tokens_map`: the named special tokens that are set, as strings (the config
/// stores either the string or an AddedToken object with `content`).
fn special_tokens_map(config: Option<&serde_json::Value>) -> BTreeMap<String, String> {
    const NAMES: [&str; 7] =
        ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"];
    let Some(config) = config else {
        return BTreeMap::new();
    };
    NAMES
        .iter()
        .filter_map(|name| {
            let v = config.get(*name)?;
            let s = v.as_str().or_else(|| v.get("content")?.as_str())?;
            Some((name.to_string(), s.to_string()))
        })
        .collect()
}
