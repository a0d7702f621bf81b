//! The whole forward pass, top to bottom (RMSN(h; w) = h / √(mean(h²) + eps) · (1 + w), the
//! zero-centred RMSNorm every norm here uses; only the GDN's gated norm multiplies by w itself):
//!
//! ```text
//! h = embed[ids]                                     an image's placeholders: its merged tokens (`crate::vision`)
//! for each layer:
//!     h = h + Mixer(RMSN(h; input_layernorm))        Mixer = Gated DeltaNet or gated attention
//!     h = h + MoE(RMSN(h; post_attention_layernorm))
//! logits = lm_head(RMSN(h; norm))
//! ```
//!
//! Rotary positions are multimodal (temporal, height, width; `crate::attention`): a text token's
//! three are its index plus the sequence's `rope_delta`; an image's tokens at base + (t, row, col)
//! with base = its first index + delta, and the text after it goes on from base + max(rows, cols),
//! as transformers' `get_rope_index` (so the delta changes by max(rows, cols) − tokens).
//!
//! The MTP head (`crate::mtp`) drafts tokens from the final-normed h; `verify` and
//! `keep_verified` check drafts as decode steps that can be taken back.

use crate::attention::{attention_forward_at, KvCache};
use crate::gdn::{gdn_forward, DeltaRule, GdnState};
use crate::moe::moe_forward;
use crate::mtp::MtpState;
use crate::ops::{add_in_place, matmul, rms_norm_one_plus};
use anyhow::{bail, ensure, Context, Result};
use solo_model::image::ImagePatches;
use solo_model::lora::{LayerLora, LoraAdapter, LoraSupport};
use solo_model::sampler::Sampler;
use solo_model::vision::{VisionConfig, VisionWeights};
use solo_model::weights::{LayerWeights, Mixer};
use solo_model::{Backend, Draft, LayerKind, Logits, ModelConfig, ModelWeights, PromptImage};
use std::sync::Arc;

/// The f32 reference backend. Weights stay in their stored dtype (memory-mapped) and are
/// converted row by row as they are used.
pub struct CpuModel {
    pub config: ModelConfig,
    pub weights: ModelWeights,
}

/// One sequence's memory. Cloning it is a snapshot.
#[derive(Clone, Debug)]
pub struct CpuState {
    /// Tokens seen so far; the next token's index.
    pub position: usize,
    /// A text token's rotary position minus its index: 0 until an image, then what the images
    /// took less than their token count (negative).
    pub rope_delta: i64,
    pub layers: Vec<LayerState>,
    /// The MTP head's memory, when the model has one.
    pub mtp: Option<MtpState>,
    /// After `verify`: the GDN layers' states after each verified token, to go back to.
    verified: Vec<Vec<GdnState>>,
    /// The LoRA adapter the sequence runs with (`Backend::set_adapter`).
    pub adapter: Option<Arc<LoraAdapter>>,
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
        self.forward_with_images(state, tokens, &[], rule)
    }

    /// `forward_hidden` where the prompt holds images: `images` (all of the prompt's, placed by
    /// their first token's index) replace the placeholders of theirs that fall in `tokens`.
    pub fn forward_with_images(
        &self,
        state: &mut CpuState,
        tokens: &[u32],
        images: &[PromptImage],
        rule: DeltaRule,
    ) -> Result<Vec<f32>> {
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
        let positions = place_images(cfg, state, tokens, images, &mut h)?;
        let adapter = state.adapter.clone();
        for (i, (layer, layer_state)) in self.weights.layers.iter().zip(&mut state.layers).enumerate() {
            let lora = adapter.as_ref().map(|a| &a.layers[i]);
            decoder_layer(cfg, layer, lora, layer_state, &mut h, &positions, rule);
        }
        state.position += tokens.len();
        let normed = rms_norm_one_plus(&h, &self.weights.final_norm.to_f32(), cfg.rms_norm_eps);
        if let Some(mtp) = &mut state.mtp {
            mtp.push(&normed, tokens);
        }
        Ok(normed)
    }

    /// The vision tower's config and weights, or why it cannot run.
    fn vision(&self) -> Result<(&VisionConfig, &VisionWeights)> {
        let cfg = self.config.vision.as_ref().context("the checkpoint has no vision tower (no vision_config)")?;
        let w =
            self.weights.visual.as_ref().context("the checkpoint has a vision_config but no model.visual.* tensors")?;
        if let Some(why) = cfg.unsupported() {
            bail!("{why}");
        }
        Ok((cfg, w))
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
        let mtp = self.weights.mtp.as_ref().map(|_| MtpState::default());
        Ok(CpuState { position: 0, rope_delta: 0, layers, mtp, verified: Vec::new(), adapter: None })
    }

    fn lora_support(&self) -> LoraSupport {
        LoraSupport::All
    }

    fn set_adapter(&self, state: &mut CpuState, adapter: Option<Arc<LoraAdapter>>) -> Result<()> {
        if let Some(a) = &adapter {
            ensure!(
                a.layers.len() == self.config.num_hidden_layers,
                "the LoRA adapter {} was loaded for another model",
                a.dir.display()
            );
        }
        state.adapter = adapter;
        Ok(())
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
            Logits::None => return Ok(Vec::new()),
        };
        Ok(self.lm_head(rows))
    }

    fn image_support(&self) -> Result<()> {
        self.vision().map(|_| ())
    }

    fn encode_image(&self, image: &ImagePatches) -> Result<Vec<f32>> {
        let (cfg, w) = self.vision()?;
        ensure!(
            image.values.len() == image.grid.iter().product::<usize>() * cfg.patch_len(),
            "the image's patches do not match its grid {:?}",
            image.grid
        );
        Ok(crate::vision::encode_image(cfg, w, image))
    }

    fn prefill_with_images(
        &self,
        state: &mut CpuState,
        tokens: &[u32],
        images: &[PromptImage],
        logits: Logits,
    ) -> Result<Vec<f32>> {
        if tokens.is_empty() {
            bail!("prefill of zero tokens");
        }
        let normed = self.forward_with_images(state, tokens, images, DeltaRule::Chunked)?;
        let rows = match logits {
            Logits::All => &normed[..],
            Logits::Last => &normed[normed.len() - self.config.hidden_size..],
            Logits::None => return Ok(Vec::new()),
        };
        Ok(self.lm_head(rows))
    }

    fn decode(&self, state: &mut CpuState, token: u32) -> Result<Vec<f32>> {
        let normed = self.forward_hidden(state, &[token], DeltaRule::Recurrent)?;
        Ok(self.lm_head(&normed))
    }

    fn can_draft(&self) -> bool {
        self.weights.mtp.is_some()
    }

    fn draft(&self, state: &mut CpuState, next: u32, k: usize, sampler: &mut Sampler) -> Result<Draft> {
        crate::mtp::draft(self, state, next, k, sampler)
    }

    /// One decode step per token (so the logits are the decode steps' own), keeping the GDN
    /// states after each; the attention caches and the MTP head's pending rows only grow, so
    /// going back cuts them.
    fn verify(&self, state: &mut CpuState, tokens: &[u32]) -> Result<Vec<f32>> {
        ensure!(!tokens.is_empty(), "verify of zero tokens");
        let mut logits = Vec::with_capacity(tokens.len() * self.config.vocab_size);
        state.verified.clear();
        for &token in tokens {
            logits.extend(self.decode(state, token)?);
            let gdn = state.layers.iter().filter_map(|l| match l {
                LayerState::GatedDeltaNet(s) => Some(s.clone()),
                LayerState::FullAttention(_) => None,
            });
            state.verified.push(gdn.collect());
        }
        Ok(logits)
    }

    fn keep_verified(&self, state: &mut CpuState, n: usize) -> Result<()> {
        let verified = std::mem::take(&mut state.verified);
        ensure!(n >= 1 && n <= verified.len(), "keep {n} of {} verified tokens", verified.len());
        let dropped = verified.len() - n;
        state.position -= dropped;
        let mut kept = verified.into_iter().nth(n - 1).into_iter().flatten();
        for layer in &mut state.layers {
            match layer {
                LayerState::GatedDeltaNet(s) => *s = kept.next().expect("one GDN state per GDN layer"),
                LayerState::FullAttention(kv) => kv.truncate(state.position, &self.config),
            }
        }
        if let Some(mtp) = &mut state.mtp {
            mtp.drop_last(dropped, self.config.hidden_size);
        }
        Ok(())
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
        let mtp = state.mtp.as_ref().map_or(0, |m| m.floats());
        (floats + mtp) * std::mem::size_of::<f32>()
    }
}

/// Writes the image tokens among `tokens` (the sequence's next, from `state.position`) into h and
/// returns every token's rotary position (temporal, height, width), advancing `state.rope_delta`
/// past each image that ends here (`solo_model::place_images`).
fn place_images(
    cfg: &ModelConfig,
    state: &mut CpuState,
    tokens: &[u32],
    images: &[PromptImage],
    h: &mut [f32],
) -> Result<Vec<[usize; 3]>> {
    let hidden = cfg.hidden_size;
    let placed = solo_model::place_images(cfg, state.position, state.rope_delta, tokens, images)?;
    for (i, row) in placed.rows.iter().enumerate() {
        if let &Some((k, j)) = row {
            h[i * hidden..(i + 1) * hidden].copy_from_slice(&images[k].embeds[j * hidden..(j + 1) * hidden]);
        }
    }
    state.rope_delta = placed.rope_delta;
    Ok(placed.positions)
}

/// One decoder layer on h [T, hidden] at rotary positions `positions` (one per token), in place:
/// h += Mixer(RMSN(h; input_layernorm)), then h += MoE(RMSN(h; post_attention_layernorm)),
/// with the layer's LoRA adapters `lora` when there are any.
pub fn decoder_layer(
    cfg: &ModelConfig,
    layer: &LayerWeights,
    lora: Option<&LayerLora>,
    state: &mut LayerState,
    h: &mut [f32],
    positions: &[[usize; 3]],
    rule: DeltaRule,
) {
    let x = rms_norm_one_plus(h, &layer.input_norm.to_f32(), cfg.rms_norm_eps);
    let mixed = match (&layer.mixer, state) {
        (Mixer::GatedDeltaNet(w), LayerState::GatedDeltaNet(s)) => gdn_forward(cfg, w, lora, &x, s, rule),
        (Mixer::FullAttention(w), LayerState::FullAttention(kv)) => {
            attention_forward_at(cfg, w, lora, &x, positions, kv)
        }
        _ => unreachable!("state layers are built from the same layer_types as the weights"),
    };
    add_in_place(h, &mixed);
    let x = rms_norm_one_plus(h, &layer.post_attention_norm.to_f32(), cfg.rms_norm_eps);
    add_in_place(h, &moe_forward(cfg, &layer.moe, lora, &x));
}
