//! The seam between the engine and a backend (CPU reference, CUDA).
//!
//! A backend owns the weights; a `State` is one sequence's memory (KV cache for the attention
//! layers, conv windows and fp32 recurrent state for the GDN layers) and its length so far.

use crate::config::ModelConfig;
use crate::image::ImagePatches;
use crate::lora::{LoraAdapter, LoraSupport};
use crate::sampler::Sampler;
use anyhow::{bail, ensure, Result};
use std::sync::Arc;

/// Which rows of logits a prefill returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logits {
    /// One row per prompt token (row i predicts token i + 1).
    All,
    /// Only the row of the last token: what generation needs.
    Last,
    /// No rows: the state advances and nothing comes back (a piece of a prompt before its end;
    /// a GPU backend need not wait for the device).
    None,
}

/// Draft tokens from the MTP head (`Backend::draft`).
#[derive(Clone, Debug, Default)]
pub struct Draft {
    pub tokens: Vec<u32>,
    /// [tokens, vocab]: the head's logits each draft was drawn from. Empty when the draw was
    /// greedy (the acceptance test then needs only the tokens).
    pub logits: Vec<f32>,
}

/// One image of a prompt after the vision tower: where its placeholder tokens start and what
/// replaces them (`Backend::prefill_with_images`).
#[derive(Clone, Debug)]
pub struct PromptImage {
    /// Index in the prompt of its first `<|image_pad|>`.
    pub start: usize,
    /// Merged tokens along time, height and width (the patch grid over spatial_merge_size).
    pub grid: [usize; 3],
    /// [tokens, hidden]: the tower's merged tokens, in grid order.
    pub embeds: Arc<Vec<f32>>,
}

impl PromptImage {
    /// Placeholder tokens the image fills.
    pub fn tokens(&self) -> usize {
        self.grid.iter().product()
    }
}

/// Where the tokens of a prompt piece go when the prompt holds images (`place_images`).
#[derive(Clone, Debug, PartialEq)]
pub struct Placement {
    /// Per token: its rotary positions (temporal, height, width).
    pub positions: Vec<[usize; 3]>,
    /// Per token: the image (index in `images`) and the row of its merged tokens that replaces
    /// the token's embedding; `None` for a text token.
    pub rows: Vec<Option<(usize, usize)>>,
    /// The sequence's rotary delta after the piece (a text token's position minus its index).
    pub rope_delta: i64,
}

/// Places the prompt piece `tokens`, which starts at the sequence's index `position` with rotary
/// delta `rope_delta`, among the prompt's `images` (transformers' `get_rope_index`): a text token
/// at index p turns by p + delta on all three axes; the image token j of an image of merged grid
/// (t, rows, cols) starting at index s by base + (j / (rows·cols), j / cols % rows, j % cols) with
/// base = s + delta, and the text after the image goes on from base + max(rows, cols), so the
/// delta changes by max(rows, cols) − tokens. Every `<|image_pad|>` must belong to an image
/// (when there are any) and every image token must be one.
pub fn place_images(
    cfg: &ModelConfig,
    position: usize,
    rope_delta: i64,
    tokens: &[u32],
    images: &[PromptImage],
) -> Result<Placement> {
    let hidden = cfg.hidden_size;
    let image_token = cfg.vision.as_ref().map(|v| v.image_token_id);
    let mut delta = rope_delta;
    let mut positions = Vec::with_capacity(tokens.len());
    let mut rows = Vec::with_capacity(tokens.len());
    for (i, &id) in tokens.iter().enumerate() {
        let p = position + i;
        let Some((k, img)) = images.iter().enumerate().find(|(_, im)| im.start <= p && p < im.start + im.tokens())
        else {
            if !images.is_empty() && Some(id) == image_token {
                bail!("prompt token {p} is an image placeholder that no image fills");
            }
            positions.push([(p as i64 + delta) as usize; 3]);
            rows.push(None);
            continue;
        };
        ensure!(Some(id) == image_token, "prompt token {p} is inside an image but is not its placeholder");
        ensure!(
            img.embeds.len() == img.tokens() * hidden,
            "an image's embeddings are not [{}, {hidden}]",
            img.tokens()
        );
        let j = p - img.start;
        let [_, h, w] = img.grid;
        let base = (img.start as i64 + delta) as usize;
        positions.push([base + j / (h * w), base + j / w % h, base + j % w]);
        rows.push(Some((k, j)));
        if j + 1 == img.tokens() {
            delta += h.max(w) as i64 - img.tokens() as i64;
        }
    }
    Ok(Placement { positions, rows, rope_delta: delta })
}

pub trait Backend {
    type State;

    fn config(&self) -> &ModelConfig;

    /// An empty sequence (fails when the backend has no memory left for one).
    fn new_state(&self) -> Result<Self::State>;

    /// The caller is done with `state`. A backend may keep its memory for a later `new_state` or
    /// `resume` (the CUDA one keeps a few whole, with their decode graphs); the default drops it.
    fn release_state(&self, state: Self::State) {
        drop(state);
    }

    /// Runs `state` with the LoRA adapter `adapter` (`None`: without one) from its next token on;
    /// snapshots and resumed copies keep it. `decode_batch` then applies each row's own adapter
    /// (the CUDA backend: each adapter uploaded once in bf16 and shared by the sequences that run
    /// it; a batch with adapters in it decodes its rows in turn). The default refuses adapters: a
    /// backend that runs them overrides this.
    fn set_adapter(&self, state: &mut Self::State, adapter: Option<Arc<LoraAdapter>>) -> Result<()> {
        let _ = state;
        match adapter {
            None => Ok(()),
            Some(a) => LoraSupport::Nothing.check(&a),
        }
    }

    /// Which matrices its adapters may adapt (`set_adapter` refuses the others; the server
    /// checks each adapter it loads against this). The default: none.
    fn lora_support(&self) -> LoraSupport {
        LoraSupport::Nothing
    }

    /// Number of tokens the sequence holds.
    fn position(&self, state: &Self::State) -> usize;

    /// Appends `tokens` to the sequence; returns logits as [rows, vocab] row-major.
    fn prefill(&self, state: &mut Self::State, tokens: &[u32], logits: Logits) -> Result<Vec<f32>>;

    /// Whether this backend takes images with this checkpoint (`encode_image`,
    /// `prefill_with_images`); the error says why not. The default: it does not.
    fn image_support(&self) -> Result<()> {
        bail!("this backend does not take images yet; the CPU backend does (--backend cpu)")
    }

    /// The vision tower: merged image tokens [tokens, hidden] for one preprocessed image. The
    /// default refuses: a backend that runs the tower overrides it.
    fn encode_image(&self, image: &ImagePatches) -> Result<Vec<f32>> {
        let _ = image;
        bail!("this backend does not take images yet; the CPU backend does (--backend cpu)")
    }

    /// `prefill` of a prompt piece whose prompt holds `images` (all of the prompt's, each placed
    /// by its first token's index): their merged tokens replace the placeholders that fall in
    /// `tokens`, and rotary positions are multimodal from the first image on. The default runs
    /// `prefill` when there are none and refuses otherwise.
    fn prefill_with_images(
        &self,
        state: &mut Self::State,
        tokens: &[u32],
        images: &[PromptImage],
        logits: Logits,
    ) -> Result<Vec<f32>> {
        if images.is_empty() {
            return self.prefill(state, tokens, logits);
        }
        bail!("this backend does not take images yet; the CPU backend does (--backend cpu)")
    }

    /// Appends one token; returns its logits [vocab].
    fn decode(&self, state: &mut Self::State, token: u32) -> Result<Vec<f32>>;

    /// Appends `token` and picks the next token on the backend itself, as
    /// `sampler.sample(&self.decode(state, token)?)` would (with the same draw of the sampler's
    /// seeded stream, which advances), without bringing the logits to the host. `None` (the
    /// default) when the backend cannot pick with the sampler's settings: nothing has changed,
    /// so the caller uses `decode` and samples on the host.
    fn decode_and_pick(&self, state: &mut Self::State, token: u32, sampler: &mut Sampler) -> Option<Result<u32>> {
        let _ = (state, token, sampler);
        None
    }

    /// The logits [vocab] the last `decode_and_pick` (of any state) picked from: what `decode`
    /// would have returned. Only right until the backend runs anything else. For the prefix
    /// cache, which keeps a state with its logits.
    fn picked_logits(&self) -> Result<Vec<f32>> {
        bail!("this backend does not pick tokens itself")
    }

    /// An independent copy of `state` (the server's prefix cache keeps these and resumes
    /// sequences from them). `None` when no copy can be made: the default, for a backend that
    /// cannot copy states, or one out of memory for it; the caller then goes on without it.
    fn snapshot(&self, state: &Self::State) -> Option<Self::State> {
        let _ = state;
        None
    }

    /// One decode step for several sequences at once: `tokens[i]` fed to `states[i]`; returns
    /// the logits [n, vocab], row i what `decode(states[i], tokens[i])` returns. A backend that
    /// reads its weights once for all of them (CUDA) overrides it; the default decodes them one
    /// after the other.
    fn decode_batch(&self, states: &mut [&mut Self::State], tokens: &[u32]) -> Result<Vec<f32>> {
        ensure!(states.len() == tokens.len(), "{} states for {} tokens", states.len(), tokens.len());
        let mut rows = Vec::with_capacity(tokens.len() * self.config().vocab_size);
        for (state, &token) in states.iter_mut().zip(tokens) {
            rows.extend(self.decode(state, token)?);
        }
        Ok(rows)
    }

    /// `decode_batch`, each sequence's next token then picked on the backend itself, as
    /// `samplers[i].sample(row i)` would (the same draw of its seeded stream, which advances),
    /// without bringing the logits to the host. `None` (the default) when the backend cannot
    /// pick these with these settings: nothing has changed, so the caller uses `decode_batch`.
    fn decode_batch_and_pick(
        &self,
        states: &mut [&mut Self::State],
        tokens: &[u32],
        samplers: &mut [&mut Sampler],
    ) -> Option<Result<Vec<u32>>> {
        let _ = (states, tokens, samplers);
        None
    }

    /// A state to go on from `snapshot` (one `snapshot` made): a copy that can take tokens up to
    /// the backend's limit. The default is `snapshot` itself; a backend whose snapshots are
    /// compact (the CUDA one's KV caches hold only their positions) makes a full-size copy.
    fn resume(&self, snapshot: &Self::State) -> Option<Self::State> {
        self.snapshot(snapshot)
    }

    /// Memory `state` holds, in bytes (device memory for a GPU backend): what bounds the
    /// prefix cache. 0 (the default) leaves only the cache's entry count as a bound.
    fn state_bytes(&self, state: &Self::State) -> usize {
        let _ = state;
        0
    }

    /// The longest prefill call worth making: longer prompts go in pieces of this many tokens
    /// (the backend's own limit; callers cut no finer except at their snapshot points).
    fn prefill_chunk(&self) -> usize {
        512
    }

    /// Whether `draft` can propose tokens: the checkpoint has an MTP head and this backend runs it.
    fn can_draft(&self) -> bool {
        false
    }

    /// Proposes `k` tokens to follow `next` (the token just picked, not yet in `state`), each drawn
    /// by `sampler` from the MTP head's logits (greedy: the argmax). The head first catches up on
    /// every position of `state` it has not seen, then chains k steps on its own outputs. `state`
    /// keeps only what the head learned of its positions; the chained steps leave no trace.
    fn draft(&self, state: &mut Self::State, next: u32, k: usize, sampler: &mut Sampler) -> Result<Draft> {
        let _ = (state, next, k, sampler);
        bail!("this backend has no draft head")
    }

    /// Appends `tokens` as `decode` would one at a time, and returns their logits
    /// [tokens, vocab] (row i predicts what follows token i). Until `keep_verified`, the state
    /// can still go back to any prefix of them.
    fn verify(&self, state: &mut Self::State, tokens: &[u32]) -> Result<Vec<f32>> {
        let _ = (state, tokens);
        bail!("this backend cannot verify drafts")
    }

    /// Keeps the first `n` (1 ..= T) tokens of the last `verify` and drops the rest.
    fn keep_verified(&self, state: &mut Self::State, n: usize) -> Result<()> {
        let _ = (state, n);
        bail!("this backend cannot verify drafts")
    }
}
