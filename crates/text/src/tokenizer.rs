//! Byte-level BPE tokenizer from the checkpoint's `tokenizer.json` (HF `tokenizers`, built
//! with the pure-Rust `fancy-regex` backend), and an incremental decoder for streaming.

use anyhow::{anyhow, Context, Result};
use std::path::Path;

/// Wraps HF `tokenizers` with the conventions the engine needs: the chat template writes
/// every marker itself, so encoding never adds BOS/EOS, but special-token strings that appear
/// in the text (`<|im_start|>`, ...) are matched as their ids, as HF does for added tokens.
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
}

impl Tokenizer {
    /// Loads `tokenizer.json` from a checkpoint directory, or builds it from a GGUF file's
    /// `tokenizer.ggml.*` metadata.
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Self> {
        if solo_model::gguf::is_gguf(dir.as_ref()) {
            let json = crate::gguf::tokenizer_json(&crate::gguf::vocab(dir.as_ref())?)?;
            let inner = json.parse().map_err(|e| anyhow!("{}: tokenizer: {e}", dir.as_ref().display()))?;
            return Ok(Self { inner });
        }
        let path = dir.as_ref().join("tokenizer.json");
        if !path.is_file() {
            anyhow::bail!("no tokenizer.json in {}", dir.as_ref().display());
        }
        let inner = tokenizers::Tokenizer::from_file(&path).map_err(|e| anyhow!("loading {}: {e}", path.display()))?;
        Ok(Self { inner })
    }

    /// Token ids of `text`, with no implicit special tokens (`add_special_tokens=False`).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let encoding = self.inner.encode(text, false).map_err(|e| anyhow!("encode: {e}"))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Text of `ids`; with `skip_special_tokens` the special added tokens are left out
    /// (`<tool_call>` and `<think>` are not special in Qwen3.6, so they stay).
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String> {
        self.inner.decode(ids, skip_special_tokens).map_err(|e| anyhow!("decode: {e}"))
    }

    /// Id of a token string (vocabulary entry or added token), e.g. `"<|im_end|>"`.
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// Whether `id` is an added token (`<|im_start|>`, `<think>`, ...): the tokenizer matches
    /// those in the text before anything else, so text never merges across one.
    pub fn is_added_token(&self, id: u32) -> bool {
        self.inner.get_added_vocabulary().get_added_tokens_decoder().contains_key(&id)
    }

    /// The bytes token `id` stands for (what OpenAI's logprobs `bytes` field carries): an added
    /// token's content, or a byte-level BPE token's bytes, which may be part of a UTF-8
    /// character. `None` for an id the tokenizer does not know.
    pub fn token_bytes(&self, id: u32) -> Option<Vec<u8>> {
        // (the added vocabulary's own map: `Tokenizer::get_added_tokens_decoder` copies it)
        if let Some(added) = self.inner.get_added_vocabulary().get_added_tokens_decoder().get(&id) {
            return Some(added.content.as_bytes().to_vec());
        }
        let piece = self.inner.id_to_token(id)?;
        // GPT-2's byte-level alphabet: printable Latin-1 bytes stand for themselves; the other
        // bytes were moved to U+0100 + n, in byte order.
        let printable = |b: u32| (0x21..=0x7E).contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b);
        let shifted: Vec<u8> = (0u32..256).filter(|&b| !printable(b)).map(|b| b as u8).collect();
        piece
            .chars()
            .map(|c| match c as u32 {
                b if printable(b) => Some(b as u8),
                b if b >= 0x100 => shifted.get((b - 0x100) as usize).copied(),
                _ => None,
            })
            .collect()
    }

    /// Number of tokens the tokenizer knows, added tokens included. The model's embedding
    /// table may be larger (padded); ids past this never decode.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// Starts incremental decoding of a generated sequence.
    pub fn stream_decoder(&self, skip_special_tokens: bool) -> StreamDecoder<'_> {
        StreamDecoder { tokenizer: self, skip_special_tokens, ids: Vec::new(), prefix: 0, read: 0 }
    }
}

/// Turns generated token ids into text as they arrive.
///
/// A character can span several byte-level tokens (an emoji is often 2-4), so decoding one
/// token at a time would emit U+FFFD garbage. Instead we keep a window `ids[prefix..]`, decode
/// it with and without the newest tokens, and emit only the suffix once it no longer ends in
/// an incomplete character. Decoding from `prefix` (not 0) keeps each step O(window).
pub struct StreamDecoder<'a> {
    tokenizer: &'a Tokenizer,
    skip_special_tokens: bool,
    ids: Vec<u32>,
    /// Start of the window that is re-decoded for context.
    prefix: usize,
    /// Tokens before this index have had their text emitted.
    read: usize,
}

impl StreamDecoder<'_> {
    /// Adds one token; returns the text it completes, or `None` while a character is still
    /// incomplete (or the token decodes to nothing, e.g. a skipped special token).
    pub fn push(&mut self, id: u32) -> Result<Option<String>> {
        self.ids.push(id);
        let emitted = self.decode(self.prefix..self.read)?;
        let full = self.decode(self.prefix..self.ids.len())?;
        if full.len() <= emitted.len() || full.ends_with('\u{FFFD}') {
            return Ok(None);
        }
        let delta = match full.strip_prefix(emitted.as_str()) {
            Some(delta) => delta.to_string(),
            // The new token changed earlier text (not expected for byte-level BPE); emit
            // what follows the old length on a char boundary rather than lose text.
            None => full.get(emitted.len()..).unwrap_or_default().to_string(),
        };
        self.prefix = self.read;
        self.read = self.ids.len();
        Ok(Some(delta))
    }

    /// Text of tokens pushed but not yet emitted (an incomplete character decodes to U+FFFD).
    /// Call at the end of generation so every byte is emitted exactly once.
    pub fn flush(&mut self) -> Result<String> {
        let emitted = self.decode(self.prefix..self.read)?;
        let full = self.decode(self.prefix..self.ids.len())?;
        self.prefix = self.ids.len();
        self.read = self.ids.len();
        Ok(full.get(emitted.len()..).unwrap_or_default().to_string())
    }

    /// Every id pushed so far.
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    fn decode(&self, range: std::ops::Range<usize>) -> Result<String> {
        self.tokenizer.decode(&self.ids[range], self.skip_special_tokens).context("stream decode")
    }
}
