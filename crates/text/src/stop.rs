//! Which generated token ids end a reply.
//!
//! The checkpoint spreads this over two files: `generation_config.json` (`eos_token_id`, for
//! Qwen3.6 `[248046 <|im_end|>, 248044 <|endoftext|>]`) and `config.json` (`eos_token_id` at the
//! top level or, for the multimodal wrapper, under `text_config`). Class defaults are not to be
//! trusted (transformers' defaults are not the release's), so we take the union of what the files say.

use anyhow::{Context, Result};
use serde_json::Value;
use std::path::Path;

/// Union of the eos ids in `generation_config.json` and `config.json` (top level, then
/// `text_config`), in that order, without duplicates (a GGUF file: `gguf::stop_token_ids`). A missing file contributes nothing; a
/// file that exists but is not valid JSON is an error naming it.
pub fn stop_token_ids(dir: impl AsRef<Path>) -> Result<Vec<u32>> {
    let dir = dir.as_ref();
    if solo_model::gguf::is_gguf(dir) {
        return crate::gguf::stop_token_ids(dir);
    }
    let mut ids = Vec::new();
    if let Some(gen) = read_json(&dir.join("generation_config.json"))? {
        push_eos(&mut ids, gen.get("eos_token_id"));
    }
    if let Some(config) = read_json(&dir.join("config.json"))? {
        push_eos(&mut ids, config.get("eos_token_id"));
        push_eos(&mut ids, config.get("text_config").and_then(|t| t.get("eos_token_id")));
    }
    Ok(ids)
}

/// `eos_token_id` is an int or a list of ints; anything else (null, absent) adds nothing.
fn push_eos(ids: &mut Vec<u32>, field: Option<&Value>) {
    let values = match field {
        Some(Value::Array(list)) => list.iter().collect(),
        Some(v) => vec![v],
        None => vec![],
    };
    for id in values.into_iter().filter_map(|v| v.as_u64()).filter_map(|v| u32::try_from(v).ok()) {
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
}

fn read_json(path: &Path) -> Result<Option<Value>> {
    if !path.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let value = serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    Ok(Some(value))
}
