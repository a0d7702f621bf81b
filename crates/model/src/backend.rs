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

    /// An empty sequence (fails when the backend has no memory left for one).
    fn new_state(&self) -> Result<Self::State>;

    /// Number of tokens the sequence holds.
    fn position(&self, state: &Self::State) -> usize;

    /// Appends `tokens` to the sequence; returns logits as [rows, vocab] row-major.
    fn prefill(&self, state: &mut Self::State, tokens: &[u32], logits: Logits) -> Result<Vec<f32>>;

    /// Appends one token; returns its logits [vocab].
    fn decode(&self, state: &mut Self::State, token: u32) -> Result<Vec<f32>>;

    /// An independent copy of `state` (the server's prefix cache keeps these and resumes
    /// sequences from them). `None` when no copy can be made: the default, for a backend that
    /// cannot copy states, or one out of memory for it; the caller then goes on without it.
    fn snapshot(&self, state: &Self::State) -> Option<Self::State> {
        let _ = state;
        None
    }

    /// Memory `state` holds, in bytes (device memory for a GPU backend): what bounds the
    /// prefix cache. 0 (the default) leaves only the cache's entry count as a bound.
    fn state_bytes(&self, state: &Self::State) -> usize {
        let _ = state;
        0
    }
}
