//! The tokenizer, chat template and stop tokens of a GGUF file, from its `tokenizer.ggml.*` and
//! `tokenizer.chat_template` metadata (read by `solo_model::gguf`).
//!
//! llama.cpp's converter writes this model's tokenizer.json into those keys: the byte-level BPE
//! vocabulary by id, the merges in rank order, a type per token (3 control = a special added
//! token, 4 user-defined = a non-special added token such as `<think>`) and the pre-tokenizer's
//! name. We rebuild the tokenizer.json the release ships: NFC, the named split regex, byte-level
//! BPE and decoder, the added tokens matched before anything else. Tested against llama.cpp's own
//! tokenization (fixtures/gguf/tokenize.json).

use anyhow::{bail, Result};
use serde_json::json;
use solo_model::gguf::{GgufModel, Vocab};
use std::path::Path;

/// llama.cpp's token types.
const CONTROL: u32 = 3;
const USER_DEFINED: u32 = 4;

/// The split regex of each pre-tokenizer name this model's files use (llama-vocab.cpp).
fn split_regex(pre: &str) -> Option<&'static str> {
    match pre {
        // Qwen3.5's: Qwen2's with \p{M} in the letter class
        "qwen35" => Some(
            r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ),
        "qwen2" => Some(
            r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ),
        _ => None,
    }
}

/// The tokenizer.json that `vocab` stands for.
pub fn tokenizer_json(vocab: &Vocab) -> Result<String> {
    let Some(regex) = split_regex(&vocab.pre) else {
        bail!(
            "{}: tokenizer.ggml.pre is `{}`; solo reads the Qwen pre-tokenizers (qwen35, qwen2)",
            vocab.source,
            vocab.pre
        );
    };
    let kind = |id: usize| vocab.token_types.get(id).copied().unwrap_or(1);
    let added: Vec<_> = vocab
        .tokens
        .iter()
        .enumerate()
        .filter(|&(id, _)| kind(id) == CONTROL || kind(id) == USER_DEFINED)
        .map(|(id, content)| {
            json!({"id": id, "content": content, "single_word": false, "lstrip": false, "rstrip": false,
                   "normalized": false, "special": kind(id) == CONTROL})
        })
        .collect();
    let ids: serde_json::Map<String, serde_json::Value> =
        vocab.tokens.iter().enumerate().map(|(id, t)| (t.clone(), json!(id))).collect();
    let byte_level = json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false});
    let tokenizer = json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": false},
            byte_level,
        ]},
        "post_processor": byte_level,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                  "vocab": ids, "merges": vocab.merges},
    });
    Ok(tokenizer.to_string())
}

pub(crate) fn vocab(path: &Path) -> Result<Vocab> {
    GgufModel::open(path)?.vocab()
}

/// The ids that end a reply: the file's eos (and eot), and `<|im_end|>` / `<|endoftext|>`, which
/// the release's generation_config.json lists.
pub(crate) fn stop_token_ids(path: &Path) -> Result<Vec<u32>> {
    let vocab = vocab(path)?;
    let mut ids: Vec<u32> = vocab.eos_token_id.into_iter().collect();
    for name in ["<|im_end|>", "<|endoftext|>"] {
        if let Some(id) = vocab.tokens.iter().position(|t| t == name) {
            if !ids.contains(&(id as u32)) {
                ids.push(id as u32);
            }
        }
    }
    Ok(ids)
}
