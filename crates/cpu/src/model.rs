//! The whole forward pass, top to bottom (RMSN(h; w) = h / √(mean(h²) + eps) · (1 + w), the
//! zero-centred RMSNorm every norm here uses; only the GDN's gated norm multiplies by w itself):
//!
//! ```text
//! h = embed[ids]
//! for each layer:
//!     h = h + Mixer(RMSN(h; input_layernorm))        Mixer = Gated DeltaNet or gated attention
//!     h = h + MoE(RMSN(h; post_attention_layernorm))
//! logits = lm_head(RMSN(h; norm))
//! ```

use crate::attention::{attention_forward, KvCache};
use crate::gdn::{gdn_forward, DeltaRule, GdnState};
use crate::moe::moe_forward;
use crate::ops::{add_in_place, matmul, rms_norm_one_plus};
use anyhow::{bail, Result};
use solo_model::weights::Mixer;
use solo_model::{Backend, LayerKind, Logits, ModelConfig, ModelWeights};

/// The f32 reference backend. Weights stay in their stored dtype (memory-mapped) and are
/// converted row by row as they are used.
pub struct CpuModel {
    pub config: ModelConfig,
    pub weights: ModelWeights,
}

/// One sequence's memory. Cloning it is a snapshot.
#[derive(Clone, Debug)]
pub struct CpuState {
    /// Tokens seen so far; the next token's position.
    pub position: usize,
    pub layers: Vec<LayerState>,
}

#[derive(Clone, Debug)]
pub enum LayerState {
    GatedDeltaNet(GdnState),
    FullAttention(KvCache),
}

impl CpuModel {
    pub fn new(config: ModelConfig, weights: ModelWeights) -> Self {
        CpuModel { config, weights }
    }

    /// Runs `tokens` through every layer, advancing `state`; returns the final hidden states [T, hidden]
    /// after the final norm. GDN layers use `rule` for the delta rule.
    pub fn forward_hidden(&self, state: &mut CpuState, tokens: &[u32], rule: DeltaRule) -> Result<Vec<f32>> {
        let cfg = &self.config;
        let hidden = cfg.hidden_size;
        for &id in tokens {
            if id as usize >= cfg.vocab_size {
                bail!("token id {id} is out of range: the vocabulary has {} entries", cfg.vocab_size);
            }
        }
        // h: [T, hidden]
        let mut h = vec![0.0f32; tokens.len() * hidden];
        for (row, &id) in h.chunks_mut(hidden).zip(tokens) {
            self.weights.embed_tokens.read_row_f32(id as usize, row);
        }
        for (layer, layer_state) in self.weights.layers.iter().zip(&mut state.layers) {
            let x = rms_norm_one_plus(&h, &layer.input_norm.to_f32(), cfg.rms_norm_eps);
            let mixed = match (&layer.mixer, layer_state) {
                (Mixer::GatedDeltaNet(w), LayerState::GatedDeltaNet(s)) => gdn_forward(cfg, w, &x, s, rule),
                (Mixer::FullAttention(w), LayerState::FullAttention(kv)) => {
                    attention_forward(cfg, w, &x, state.position, kv)
                }
                _ => unreachable!("state layers are built from the same layer_types as the weights"),
            };
            add_in_place(&mut h, &mixed);
            let x = rms_norm_one_plus(&h, &layer.post_attention_norm.to_f32(), cfg.rms_norm_eps);
            add_in_place(&mut h, &moe_forward(cfg, &layer.moe, &x));
        }
        state.position += tokens.len();
        Ok(rms_norm_one_plus(&h, &self.weights.final_norm.to_f32(), cfg.rms_norm_eps))
    }

    /// Logits [rows, vocab] for normalised hidden states [rows, hidden].
    pub fn lm_head(&self, normed: &[f32]) -> Vec<f32> {
        matmul(normed, &self.weights.lm_head)
    }
}

impl Backend for CpuModel {
    type State = CpuState;

    fn config(&self) -> &ModelConfig {
        &self.config
    }

    fn new_state(&self) -> Result<CpuState> {
        let layers = self
            .config
            .layer_types
            .iter()
            .map(|kind| match kind {
                LayerKind::GatedDeltaNet => LayerState::GatedDeltaNet(GdnState::new(&self.config)),
                LayerKind::FullAttention => LayerState::FullAttention(KvCache::default()),
            })
            .collect();
        Ok(CpuState { position: 0, layers })
    }

    fn position(&self, state: &CpuState) -> usize {
        state.position
    }

    fn prefill(&self, state: &mut CpuState, tokens: &[u32], logits: Logits) -> Result<Vec<f32>> {
        if tokens.is_empty() {
            bail!("prefill of zero tokens");
        }
        let normed = self.forward_hidden(state, tokens, DeltaRule::Chunked)?;
        let rows = match logits {
            Logits::All => &normed[..],
            Logits::Last => &normed[normed.len() - self.config.hidden_size..],
        };
        Ok(self.lm_head(rows))
    }

    fn decode(&self, state: &mut CpuState, token: u32) -> Result<Vec<f32>> {
        let normed = self.forward_hidden(state, &[token], DeltaRule::Recurrent)?;
        Ok(self.lm_head(&normed))
    }

    fn snapshot(&self, state: &CpuState) -> Option<CpuState> {
        Some(state.clone())
    }

    fn state_bytes(&self, state: &CpuState) -> usize {
        let floats: usize = state
            .layers
            .iter()
            .map(|layer| match layer {
                LayerState::GatedDeltaNet(s) => s.conv.len() + s.recurrent.len(),
                LayerState::FullAttention(kv) => kv.keys.len() + kv.values.len(),
            })
            .sum();
        floats * std::mem::size_of::<f32>()
    }
}
