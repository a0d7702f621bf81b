//! The seam between the engine and a backend (CPU reference, CUDA).
//!
//! A backend owns the weights; a `State` is one sequence's memory (KV cache for the attention
//! layers, conv windows and fp32 recurrent state for the GDN layers) and its length so far.

use crate::config::ModelConfig;
use anyhow::Result;

/// Which rows of logits a prefill returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logits {
    /// One row per prompt token (row i predicts token i + 1).
    All,
    /// Only the row of the last token: what generation needs.
    Last,
}

pub trait Backend {
    type State;

    fn config(&self) -> &ModelConfig;

    /// An empty sequence.
    fn new_state(&self) -> Self::State;

    /// Number of tokens the sequence holds.
    fn position(&self, state: &Self::State) -> usize;

    /// Appends `tokens` to the sequence; returns logits as [rows, vocab] row-major.
    fn prefill(&self, state: &mut Self::State, tokens: &[u32], logits: Logits) -> Result<Vec<f32>>;

    /// Appends one token; returns its logits [vocab].
    fn decode(&self, state: &mut Self::State, token: u32) -> Result<Vec<f32>>;
}
