//! From request to prompt tokens: the checkpoint's tokenizer and chat template, the message
//! checks the template does not do, and the choices that keep multi-turn prompts prefix-stable
//! so that the prefix cache hits.

use crate::error::ApiError;
use crate::images::{expand_placeholders, take_images, PromptImagePatches, Vision};
use crate::request::Defaults;
use anyhow::{Context as _, Result};
use serde_json::Value;
use solo_text::{ChatTemplate, TemplateException, TemplateOptions, Tokenizer};
use std::path::Path;
use std::sync::Arc;

/// Everything text-side the server reads from the checkpoint directory.
pub struct TextAssets {
    pub tokenizer: Arc<Tokenizer>,
    pub template: ChatTemplate,
    pub stop_ids: Vec<u32>,
    /// `</think>`, where a forced tool call starts when thinking is on.
    pub think_end: Option<u32>,
    pub defaults: Defaults,
}

impl TextAssets {
    pub fn from_dir(dir: &Path) -> Result<Self> {
        let tokenizer = Arc::new(Tokenizer::from_dir(dir)?);
        let template = ChatTemplate::from_dir(dir)?;
        let stop_ids = solo_text::stop_token_ids(dir)?;
        let think_end = tokenizer.token_id("</think>");
        Ok(TextAssets { tokenizer, template, stop_ids, think_end, defaults: generation_defaults(dir)? })
    }
}

/// Sampling defaults from `generation_config.json` (temperature 1, no top-k/top-p cut without it).
fn generation_defaults(dir: &Path) -> Result<Defaults> {
    let path = dir.join("generation_config.json");
    let gen: Value = match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).with_context(|| format!("{}: not valid JSON", path.display()))?,
        Err(_) => Value::Null,
    };
    let number = |key: &str| gen.get(key).and_then(Value::as_f64);
    Ok(Defaults {
        temperature: number("temperature").unwrap_or(1.0) as f32,
        top_k: number("top_k").unwrap_or(0.0).max(0.0) as usize,
        top_p: number("top_p").unwrap_or(1.0) as f32,
    })
}

pub struct ChatPrompt {
    pub tokens: Vec<u32>,
    /// Where the messages end, and where the last message starts: the lengths a later request
    /// most likely shares (the next turn; an edited last turn).
    pub snapshot_points: Vec<usize>,
    /// The prompt ends inside `<think>`: the output starts as reasoning.
    pub starts_in_reasoning: bool,
    /// Its images, their placeholders expanded in `tokens` (`crate::images`).
    pub images: Vec<PromptImagePatches>,
}

/// Renders and tokenises a chat. `enable_thinking` / `preserve_thinking` are the template's
/// variables (`None` leaves them undefined: thinking on, old reasoning dropped).
pub fn chat(
    assets: &TextAssets,
    messages: Option<&Value>,
    tools: Option<&Value>,
    enable_thinking: Option<bool>,
    preserve_thinking: Option<bool>,
) -> Result<ChatPrompt, ApiError> {
    chat_with_images(assets, messages, tools, enable_thinking, preserve_thinking, Err("no image support"))
}

/// `chat` where messages may hold images (`vision`: how this server takes them, or why it does
/// not): each is decoded and preprocessed, and its placeholder expanded.
pub fn chat_with_images(
    assets: &TextAssets,
    messages: Option<&Value>,
    tools: Option<&Value>,
    enable_thinking: Option<bool>,
    preserve_thinking: Option<bool>,
    vision: Result<&Vision, &str>,
) -> Result<ChatPrompt, ApiError> {
    let mut messages = check_messages(messages)?;
    let images = take_images(&mut messages, vision)?;
    let mut preserve_thinking = preserve_thinking;
    if enable_thinking == Some(false) && preserve_thinking.is_none() {
        // A thinking-off reply was generated after `<think>\n\n</think>\n\n`, but once a later
        // user turn arrives the template renders that reply without the block, so the cached
        // state would no longer be a prefix. Writing the empty block into every earlier
        // assistant turn (preserve_thinking with empty reasoning) keeps the render identical.
        blank_old_reasoning(&mut messages);
        preserve_thinking = Some(true);
    }
    let render = |messages: &[Value], add_generation_prompt: bool| {
        let opts = TemplateOptions { add_generation_prompt, enable_thinking, preserve_thinking };
        assets.template.render(&Value::Array(messages.to_vec()), tools, &opts)
    };
    let text = render(&messages, true).map_err(|e| match e.downcast_ref::<TemplateException>() {
        Some(TemplateException(msg)) => ApiError::invalid_param("messages", format!("Invalid conversation: {msg}")),
        None => ApiError::invalid_param("messages", format!("The conversation cannot be rendered: {e:#}")),
    })?;
    let tokens = assets.tokenizer.encode(&text).map_err(|e| ApiError::internal(&e))?;

    // Both renders are prefixes of the prompt's text in principle; the common token prefix
    // is what a snapshot there can really serve.
    let mut snapshot_points = Vec::new();
    let mut point = |messages: &[Value]| {
        if let Some(shared) = render(messages, false).ok().and_then(|p| shared_tokens(assets, &text, &tokens, &p)) {
            if shared > 0 && !snapshot_points.contains(&shared) {
                snapshot_points.push(shared);
            }
        }
    };
    point(&messages);
    if messages.len() > 1 {
        point(&messages[..messages.len() - 1]);
    }

    let tail = text.rsplit("<|im_start|>").next().unwrap_or(&text);
    let starts_in_reasoning =
        tail.rfind("<think>").is_some_and(|open| tail.rfind("</think>").is_none_or(|close| close < open));
    let (mut tokens, images) = (tokens, images);
    let images = match vision {
        Ok(v) if !images.is_empty() => expand_placeholders(&mut tokens, &mut snapshot_points, images, v)?,
        _ => Vec::new(),
    };
    Ok(ChatPrompt { tokens, snapshot_points, starts_in_reasoning, images })
}

/// How many of `tokens` (of `text`) the tokens of `prefix`, a render of fewer messages, share
/// from the start. Where `prefix` is a string prefix of `text` and the rest begins with a special
/// token (`<|im_start|>`), the tokenizer splits there in both (special tokens are matched before
/// anything else), so the rest's tokens end `tokens` and only the rest is encoded (the last
/// message and the generation prompt, where the prefix is the whole history); otherwise, or when
/// the prefix is the shorter, the prefix is encoded and compared.
fn shared_tokens(assets: &TextAssets, text: &str, tokens: &[u32], prefix: &str) -> Option<usize> {
    let tokenizer = &assets.tokenizer;
    if let Some(rest) = text.strip_prefix(prefix).filter(|rest| rest.len() < prefix.len()) {
        let ids = tokenizer.encode(rest).ok()?;
        if ids.first().is_some_and(|&id| tokenizer.is_added_token(id)) && tokens.ends_with(&ids) {
            return Some(tokens.len() - ids.len());
        }
    }
    let ids = tokenizer.encode(prefix).ok()?;
    Some(ids.iter().zip(tokens).take_while(|(a, b)| a == b).count())
}

/// The checks the template leaves to chance: a non-empty list of objects with known roles and
/// content of text parts and image parts (`crate::images` reads those). `developer` (OpenAI's newer name) becomes `system`.
fn check_messages(messages: Option<&Value>) -> Result<Vec<Value>, ApiError> {
    let list = match messages {
        Some(Value::Array(list)) if !list.is_empty() => list,
        Some(Value::Array(_)) => return Err(ApiError::invalid_param("messages", "`messages` must not be empty.")),
        None => return Err(ApiError::invalid_param("messages", "`messages` is required.")),
        Some(_) => return Err(ApiError::invalid_param("messages", "`messages` must be a list.")),
    };
    let mut out = Vec::with_capacity(list.len());
    for (i, m) in list.iter().enumerate() {
        let Some(fields) = m.as_object() else {
            return Err(ApiError::invalid_param("messages", format!("messages[{i}] must be an object.")));
        };
        let role = fields.get("role").and_then(Value::as_str).unwrap_or("");
        if !["system", "developer", "user", "assistant", "tool"].contains(&role) {
            return Err(ApiError::invalid_param("messages", format!("messages[{i}] has an unknown role {role:?}.")));
        }
        match fields.get("content") {
            None | Some(Value::Null) | Some(Value::String(_)) => {}
            Some(Value::Array(parts)) => {
                for part in parts {
                    let kind = part.get("type").and_then(Value::as_str);
                    if kind == Some("image_url") {
                        continue;
                    }
                    if kind != Some("text") || !part.get("text").is_some_and(Value::is_string) {
                        return Err(ApiError::unsupported(
                            "messages",
                            &format!(
                                "Content parts of type {} (text and image_url parts are)",
                                kind.unwrap_or("(missing)")
                            ),
                        ));
                    }
                }
            }
            Some(_) => {
                return Err(ApiError::invalid_param(
                    "messages",
                    format!("messages[{i}].content must be a string or a list of text parts."),
                ))
            }
        }
        let mut m = m.clone();
        if role == "developer" {
            m["role"] = Value::from("system");
        }
        out.push(m);
    }
    Ok(out)
}

/// Assistant turns before the last user message get empty reasoning (so an empty think block);
/// reasoning inlined in their content as `<think>…</think>` is dropped too.
fn blank_old_reasoning(messages: &mut [Value]) {
    let Some(last_user) = messages.iter().rposition(|m| m["role"] == "user") else { return };
    for m in &mut messages[..last_user] {
        let Some(fields) = m.as_object_mut().filter(|f| f.get("role").and_then(Value::as_str) == Some("assistant"))
        else {
            continue;
        };
        fields.remove("reasoning");
        fields.remove("thinking");
        fields.insert("reasoning_content".into(), Value::from(""));
        if let Some(Value::String(content)) = fields.get_mut("content") {
            if let Some((_, answer)) = content.rsplit_once("</think>") {
                *content = answer.trim_start().to_string();
            }
        }
    }
}

/// A completions `prompt`: a string, token ids, or a one-element list of either.
pub fn completion(assets: &TextAssets, prompt: Option<&Value>, vocab: usize) -> Result<Vec<u32>, ApiError> {
    let bad = || ApiError::invalid_param("prompt", "`prompt` must be a string or a list of token ids.");
    let tokens = match prompt {
        None => return Err(ApiError::invalid_param("prompt", "`prompt` is required.")),
        Some(Value::String(s)) => assets.tokenizer.encode(s).map_err(|e| ApiError::internal(&e))?,
        Some(Value::Array(items)) if items.len() == 1 && !items[0].is_number() => {
            return completion(assets, Some(&items[0]), vocab)
        }
        Some(Value::Array(items)) if items.iter().any(|v| v.is_string() || v.is_array()) => {
            return Err(ApiError::unsupported("prompt", "Several prompts in one request (batched completions)"))
        }
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_u64().filter(|&id| (id as usize) < vocab).map(|id| id as u32))
            .collect::<Option<Vec<u32>>>()
            .ok_or_else(|| {
                ApiError::invalid_param("prompt", format!("Token ids in `prompt` must be integers below {vocab}."))
            })?,
        Some(_) => return Err(bad()),
    };
    if tokens.is_empty() {
        return Err(ApiError::invalid_param("prompt", "`prompt` must not be empty."));
    }
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The snapshot points as first written: each prefix render encoded whole, and the common
    /// token prefix with the prompt.
    fn points_by_encoding_prefixes(
        assets: &TextAssets,
        messages: &[Value],
        tools: Option<&Value>,
        thinking: Option<bool>,
    ) -> Vec<usize> {
        let preserve = (thinking == Some(false)).then_some(true);
        let mut messages = messages.to_vec();
        if thinking == Some(false) {
            blank_old_reasoning(&mut messages);
        }
        let render = |m: &[Value], add_generation_prompt: bool| {
            let opts =
                TemplateOptions { add_generation_prompt, enable_thinking: thinking, preserve_thinking: preserve };
            assets.template.render(&Value::Array(m.to_vec()), tools, &opts)
        };
        let tokens = assets.tokenizer.encode(&render(&messages, true).unwrap()).unwrap();
        let mut points = Vec::new();
        let ends = if messages.len() > 1 { vec![messages.len(), messages.len() - 1] } else { vec![messages.len()] };
        for end in ends {
            if let Ok(text) = render(&messages[..end], false) {
                let ids = assets.tokenizer.encode(&text).unwrap();
                let shared = ids.iter().zip(&tokens).take_while(|(a, b)| a == b).count();
                if shared > 0 && !points.contains(&shared) {
                    points.push(shared);
                }
            }
        }
        points
    }

    #[test]
    fn snapshot_points_from_the_rest_equal_those_of_encoding_each_prefix() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tiny-a");
        let assets = TextAssets::from_dir(&dir).unwrap();
        let long = "A long history, word after word. ".repeat(20);
        let chats = [
            json!([{"role": "user", "content": "Hello there"}]),
            json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]),
            json!([
                {"role": "user", "content": long},
                {"role": "assistant", "content": "Sure.", "reasoning_content": "They asked."},
                {"role": "user", "content": "And then?"},
            ]),
            json!([
                {"role": "system", "content": long},
                {"role": "user", "content": "Question one"},
                {"role": "assistant", "content": "<think>\nhm\n</think>\n\nAnswer one"},
                {"role": "user", "content": "Question two, much longer than the history before it ".repeat(30)},
            ]),
        ];
        let tools = json!([{"type": "function", "function": {"name": "get_weather", "description": "Weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]);
        for chat in &chats {
            for (thinking, tools) in [(None, None), (Some(false), None), (None, Some(&tools))] {
                let got = super::chat(&assets, Some(chat), tools, thinking, None).unwrap();
                let want = points_by_encoding_prefixes(&assets, chat.as_array().unwrap(), tools, thinking);
                assert_eq!(got.snapshot_points, want, "{chat} thinking {thinking:?}");
                assert!(!want.is_empty());
            }
        }
    }
}
