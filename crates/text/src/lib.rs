//! Text in and out of the model: the tokenizer, streaming detokenisation, the chat template
//! and the stop tokens, all read from the checkpoint directory (or a GGUF file's metadata).
//!
//! The reference for every byte here is Hugging Face (`tokenizers`, and `apply_chat_template`
//! in transformers with vLLM's message clean-up); `fixtures/chat_template_cases.json` holds
//! HF's output for the tests to compare against.

pub mod gguf;
mod messages;
mod pyjson;
mod stop;
mod template;
mod tokenizer;

pub use messages::normalize_messages;
pub use stop::stop_token_ids;
pub use template::{ChatTemplate, TemplateException, TemplateOptions};
pub use tokenizer::{StreamDecoder, Tokenizer};

/// The server shares one tokenizer and template across request threads.
const _: () = {
    const fn shareable<T: Send + Sync>() {}
    shareable::<Tokenizer>();
    shareable::<ChatTemplate>();
};
