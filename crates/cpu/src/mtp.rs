//! The multi-token-prediction head: from the main model's final-normed hidden state h_t and the
//! token t+1 it predicts token t+2.
//!
//! ```text
//! x   = W_fc · concat[RMSN(embed(tok_{t+1}); pre_fc_norm_embedding), RMSN(h_t; pre_fc_norm_hidden)]
//! x  += Attention(RMSN(x; input_layernorm))      one full-attention layer, its own KV cache,
//! x  += MoE(RMSN(x; post_attention_layernorm))   pair t at rope position t
//! g_t = RMSN(x; norm)
//! draft logits = lm_head(g_t)                    the main model's lm_head
//! ```
//!
//! Drafting k tokens after `next` (the token just picked at position P): the head first runs over
//! every pair it has not seen, (h_p, tok_{p+1}) for the positions p < P of the sequence and
//! (h_{P-1}, next) last, which fills its cache up to position P − 1 and gives d_1 = pick(g_{P-1}).
//! Then it chains on its own output: (g_{P-1}, d_1) at position P gives d_2, and so on. The
//! chained pairs' cache rows are dropped afterwards: their hidden states are the head's guesses,
//! not the main model's, and the next draft rewrites those positions from the real ones.

use crate::attention::KvCache;
use crate::gdn::DeltaRule;
use crate::model::{decoder_layer, CpuModel, CpuState, LayerState};
use crate::ops::{matmul, rms_norm_one_plus};
use anyhow::{bail, Context, Result};
use solo_model::sampler::Sampler;
use solo_model::weights::MtpWeights;
use solo_model::Draft;

/// The head's memory for one sequence.
#[derive(Clone, Debug, Default)]
pub struct MtpState {
    /// Keys and values of the pairs seen so far, one per position 0..seen.
    kv: KvCache,
    seen: usize,
    /// [P − seen, hidden]: the main model's final-normed hidden states the head has not seen yet.
    hidden: Vec<f32>,
    /// The tokens at those positions (the first one's pair is already seen: it was the token after
    /// the last seen hidden state).
    tokens: Vec<u32>,
}

impl MtpState {
    /// The main model appended `tokens` with final-normed hidden states `normed` [T, hidden].
    pub fn push(&mut self, normed: &[f32], tokens: &[u32]) {
        self.hidden.extend_from_slice(normed);
        self.tokens.extend_from_slice(tokens);
    }

    /// The main model took back its last `n` positions (rejected drafts). They are never among the
    /// seen ones: a draft runs the head over every pending position before the main model moves on.
    pub fn drop_last(&mut self, n: usize, hidden_size: usize) {
        let keep = self.tokens.len() - n;
        self.tokens.truncate(keep);
        self.hidden.truncate(keep * hidden_size);
    }

    /// f32 values held (for the state's size).
    pub fn floats(&self) -> usize {
        self.kv.keys.len() + self.kv.values.len() + self.hidden.len()
    }
}

/// The draft above: k tokens after `next`, each picked by `sampler` from the head's logits.
pub fn draft(model: &CpuModel, state: &mut CpuState, next: u32, k: usize, sampler: &mut Sampler) -> Result<Draft> {
    let w = model.weights.mtp.as_ref().context("this checkpoint has no MTP head (no mtp.* tensors)")?;
    let s = state.mtp.as_mut().context("this sequence keeps no MTP state")?;
    if s.tokens.is_empty() {
        bail!("nothing to draft from: the head has seen every position (prefill or decode first)");
    }
    if next as usize >= model.config.vocab_size {
        bail!("token id {next} is out of range: the vocabulary has {} entries", model.config.vocab_size);
    }
    let h = model.config.hidden_size;
    // The pending pairs: (hidden_i, token after it), the last one's token being `next`.
    let mut after: Vec<u32> = s.tokens[1..].to_vec();
    after.push(next);
    let hidden = std::mem::take(&mut s.hidden);
    s.tokens.clear();
    let mut layer = LayerState::FullAttention(std::mem::take(&mut s.kv));
    let start = s.seen;
    let g = head(model, w, &mut layer, &hidden, &after, start);
    s.seen += after.len();
    let seen = s.seen;

    let mut out = Draft::default();
    let mut last = g[g.len() - h..].to_vec();
    for i in 0..k {
        let logits = model.lm_head(&last);
        let token = sampler.sample(&logits);
        out.tokens.push(token);
        out.logits.extend(logits);
        if i + 1 < k {
            last = head(model, w, &mut layer, &last, &[token], seen + i);
        }
    }
    let LayerState::FullAttention(mut kv) = layer else { unreachable!("built as FullAttention above") };
    kv.truncate(seen, &model.config);
    let s = state.mtp.as_mut().expect("checked above");
    s.kv = kv;
    Ok(out)
}

/// The head over pairs (hidden [n, hidden], tokens [n]) at positions `start..start+n`: g [n, hidden].
fn head(
    model: &CpuModel,
    w: &MtpWeights,
    layer: &mut LayerState,
    hidden: &[f32],
    tokens: &[u32],
    start: usize,
) -> Vec<f32> {
    let cfg = &model.config;
    let h = cfg.hidden_size;
    let mut embedded = vec![0.0f32; tokens.len() * h];
    for (row, &id) in embedded.chunks_mut(h).zip(tokens) {
        model.weights.embed_tokens.read_row_f32(id as usize, row);
    }
    let e = rms_norm_one_plus(&embedded, &w.pre_fc_norm_embedding.to_f32(), cfg.rms_norm_eps);
    let hn = rms_norm_one_plus(hidden, &w.pre_fc_norm_hidden.to_f32(), cfg.rms_norm_eps);
    // [n, 2·hidden]: embedding first, then the hidden state.
    let both: Vec<f32> = e.chunks(h).zip(hn.chunks(h)).flat_map(|(a, b)| a.iter().chain(b).copied()).collect();
    let mut x = matmul(&both, &w.fc);
    let positions: Vec<[usize; 3]> = (start..start + tokens.len()).map(|p| [p; 3]).collect();
    decoder_layer(cfg, &w.layer, None, layer, &mut x, &positions, DeltaRule::Recurrent);
    rms_norm_one_plus(&x, &w.norm.to_f32(), cfg.rms_norm_eps)
}
