//! Prompts with images on the GPU: the vision tower (`ops::vision`) turns each image into merged
//! tokens; a prompt piece is embedded, the tokens of its images written over their placeholders,
//! and every token runs at its multimodal rotary positions (`solo_model::place_images`, the same
//! placement as the CPU reference). After the image, text tokens turn by their position plus the
//! sequence's rotary delta, which lives on the device beside the position (`CudaState::pos`), so
//! a captured decode graph reads it as it reads the position.

use super::{CudaModel, CudaState, PREFILL_CHUNK};
use crate::ops::attention::Rope;
use crate::ops::embed::embed;
use crate::ops::vision::VisionGpu;
use anyhow::{bail, ensure, Context, Result};
use solo_model::{place_images, Logits, PromptImage};

/// The multimodal RoPE sections the attention kernel is compiled for (`MROPE_H`, `MROPE_W` in
/// attention_rope.cu): the release's.
const MROPE_SECTION: [usize; 3] = [11, 11, 10];

impl CudaModel {
    /// The vision tower, or why this model takes no images.
    pub(crate) fn vision(&self) -> Result<&VisionGpu> {
        let cfg = self.config.vision.as_ref().context("the checkpoint has no vision tower (no vision_config)")?;
        if let Some(why) = cfg.unsupported() {
            bail!("{why}");
        }
        let tower =
            self.weights.vision.as_ref().context("the checkpoint has a vision_config but no model.visual.* tensors")?;
        ensure!(
            self.config.mrope_section == MROPE_SECTION,
            "the CUDA kernels turn image positions by the release's mrope_section {MROPE_SECTION:?}, the checkpoint says {:?} (--backend cpu takes it)",
            self.config.mrope_section
        );
        Ok(tower)
    }

    /// Appends `tokens` (in chunks of PREFILL_CHUNK), the image tokens among them replaced by
    /// `images`' merged tokens; returns logits as `Backend::prefill` does.
    pub(crate) fn prefill_placed(
        &self,
        state: &mut CudaState,
        tokens: &[u32],
        images: &[PromptImage],
        logits: Logits,
    ) -> Result<Vec<f32>> {
        if tokens.is_empty() {
            bail!("prefill of zero tokens");
        }
        self.check_room(state, tokens.len())?;
        let vocab = self.config.vocab_size;
        let mut out = Vec::new();
        let chunks: Vec<&[u32]> = tokens.chunks(PREFILL_CHUNK).collect();
        for (c, chunk) in chunks.iter().enumerate() {
            let t = chunk.len();
            self.upload_ids(chunk)?;
            if images.is_empty() {
                self.forward(state, t)?;
            } else {
                self.forward_with_images(state, chunk, images)?;
            }
            state.position += t;
            match logits {
                Logits::All => {
                    let buf = self.gpu.alloc(t * vocab * 4)?;
                    self.lm_head(0, t, buf.ptr())?;
                    out.extend(self.gpu.download_f32(buf.ptr(), t * vocab)?);
                }
                Logits::Last if c + 1 == chunks.len() => {
                    self.lm_head(t - 1, 1, self.io.logits.ptr())?;
                    out = self.gpu.download_f32(self.io.logits.ptr(), vocab)?;
                }
                Logits::Last | Logits::None => {}
            }
            self.mtp_catch_up(state, chunk)?;
        }
        Ok(out)
    }

    /// `forward` of one chunk (ids uploaded) whose prompt holds `images`; sets the sequence's
    /// rotary delta for what follows.
    fn forward_with_images(&self, state: &mut CudaState, chunk: &[u32], images: &[PromptImage]) -> Result<()> {
        let (t, hidden) = (chunk.len(), self.config.hidden_size);
        let placed = place_images(&self.config, state.position, state.rope_delta, chunk, images)?;
        let h = self.io.h.ptr();
        embed(&self.gpu, &self.weights.embed_tokens, self.io.ids.ptr(), t, h)?;
        // each run of consecutive rows of one image in one copy
        let mut i = 0;
        while i < t {
            let Some((k, j)) = placed.rows[i] else {
                i += 1;
                continue;
            };
            let run = (1..t - i).take_while(|&n| placed.rows[i + n] == Some((k, j + n))).count() + 1;
            let rows = &images[k].embeds[j * hidden..(j + run) * hidden];
            self.gpu.write(h + (i * hidden * 4) as u64, crate::runtime::f32_bytes(rows))?;
            i += run;
        }
        let flat: Vec<i32> = placed.positions.iter().flatten().map(|&p| p as i32).collect();
        let mrope = self.gpu.upload_i32(&flat)?;
        self.forward_embedded(state, t, Rope { delta: None, mrope: Some(mrope.ptr()) })?;
        state.rope_delta = placed.rope_delta;
        self.gpu.set_i32(state.rope_delta_ptr(), placed.rope_delta as i32)?;
        self.gpu.sync() // `mrope` is freed here
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use solo_model::Backend;
    use std::sync::Arc;

    /// A 4-layer model of the real widths with random weights that knows the release's image
    /// token (its tower is not needed: the tests give the merged tokens themselves).
    fn model() -> CudaModel {
        let mut model = crate::synthetic::random_model(4, 1024, solo_model::Precision::Bf16).unwrap();
        model.config.vision = Some(crate::synthetic::real_vision_config());
        model
    }

    /// Rows `ids` of the embedding table, as f32 (exactly what `embed` makes of them).
    fn embedding_rows(model: &CudaModel, ids: &[u32]) -> Vec<f32> {
        let (m, hidden) = (&model.weights.embed_tokens, model.config.hidden_size);
        let mut out = Vec::with_capacity(ids.len() * hidden);
        for &id in ids {
            let bytes = model.gpu.download(m.ptr + (id as usize * hidden * 2) as u64, hidden * 2).unwrap();
            out.extend(bytes.chunks(2).map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32()));
        }
        out
    }

    fn relative_difference(a: &[f32], b: &[f32]) -> f32 {
        let scale = b.iter().fold(0f32, |m, v| m.max(v.abs()));
        a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs())) / scale
    }

    fn argmax(v: &[f32]) -> usize {
        v.iter().enumerate().fold((0, f32::NEG_INFINITY), |b, (i, &x)| if x > b.1 { (i, x) } else { b }).0
    }

    /// Per row of `vocab` logits, max|a − b| / max|b|, averaged over the rows.
    fn mean_row_difference(a: &[f32], b: &[f32], vocab: usize) -> f32 {
        let rows = a.chunks(vocab).zip(b.chunks(vocab));
        rows.map(|(x, y)| relative_difference(x, y)).sum::<f32>() / (a.len() / vocab) as f32
    }

    /// An image of one merged token sits at the positions of a text token (base + (0, 0, 0)) and
    /// moves the delta by max(1, 1) − 1 = 0: given the embedding of token X, it is token X. The
    /// prompt's logits and those of the decode steps after it are the text prompt's, as closely
    /// as the text prompt run twice agrees with itself (prefill's MoE adds its experts' rows with
    /// atomics, so a run is not bit for bit the last); given another token's embedding, they are
    /// not.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn a_one_token_image_of_a_tokens_embedding_is_that_token() {
        let model = model();
        let (vocab, pad) = (model.config.vocab_size, model.config.vision.as_ref().unwrap().image_token_id);
        let (x, y) = (4242u32, 99_999u32);
        let text: Vec<u32> = (0..30u32).map(|i| i * 7919 % 200_000).chain([x]).chain(0..9).collect();
        let mut with_pad = text.clone();
        with_pad[30] = pad;
        // the prompt's logits, then three decode steps' (the graph)
        let run = |image: Option<u32>| -> Vec<f32> {
            let mut state = model.try_new_state().unwrap();
            let mut logits = match image {
                None => model.prefill(&mut state, &text, Logits::All).unwrap(),
                Some(id) => {
                    let embeds = Arc::new(embedding_rows(&model, &[id]));
                    let image = PromptImage { start: 30, grid: [1, 1, 1], embeds };
                    let l = model.prefill_placed(&mut state, &with_pad, &[image], Logits::All).unwrap();
                    assert_eq!(state.rope_delta, 0);
                    l
                }
            };
            for token in [5u32, 77, 901] {
                logits.extend(model.decode(&mut state, token).unwrap());
            }
            logits
        };
        let text_logits = run(None);
        let floor = mean_row_difference(&run(None), &text_logits, vocab);
        let same = mean_row_difference(&run(Some(x)), &text_logits, vocab);
        let other = mean_row_difference(&run(Some(y)), &text_logits, vocab);
        eprintln!(
            "one-token image, mean over rows of max|Δlogit| / max|logit| against the text prompt: of X's embedding {same:.2e}, of another token's {other:.2e}; the text prompt again {floor:.2e}"
        );
        assert!(same <= 4.0 * floor + 1e-5, "X's embedding as an image: {same:e} (text again: {floor:e})");
        assert!(other > 10.0 * same.max(1e-6), "another token's embedding moved the logits only {other:e}");
    }

    /// After an image of 4×6 merged tokens the text goes on from base + 6, 18 positions before
    /// its index (the delta, on the device): the text after it prefilled with the image, prefilled
    /// on its own afterwards, decoded one token at a time (the graph), or decoded in a batch with
    /// a text-only sequence, gives the same logits; a sequence whose delta was left at 0 does not.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn text_after_an_image_turns_by_the_delta_in_every_step() {
        let model = model();
        let pad = model.config.vision.as_ref().unwrap().image_token_id;
        let (rows, cols) = (4usize, 6usize);
        let head: Vec<u32> = (0..20u32).map(|i| i * 7919 % 200_000).collect();
        let tail: Vec<u32> = (0..6u32).map(|i| 1000 + i * 31).collect();
        let mut prompt = head.clone();
        prompt.extend(std::iter::repeat_n(pad, rows * cols));
        let ids: Vec<u32> = (0..(rows * cols) as u32).map(|j| 50_000 + 97 * j).collect();
        let image =
            PromptImage { start: head.len(), grid: [1, rows, cols], embeds: Arc::new(embedding_rows(&model, &ids)) };
        let images = [image];
        let with_tail: Vec<u32> = prompt.iter().chain(&tail).copied().collect();

        // the whole prompt in one prefill: the last row's logits
        let mut whole = model.try_new_state().unwrap();
        let all = model.prefill_placed(&mut whole, &with_tail, &images, Logits::Last).unwrap();
        assert_eq!(whole.rope_delta, rows.max(cols) as i64 - (rows * cols) as i64);

        // the image prompt, then the tail: prefilled, decoded one at a time, decoded in a batch
        let mut imaged = model.try_new_state().unwrap();
        model.prefill_placed(&mut imaged, &prompt, &images, Logits::None).unwrap();
        let (mut prefilled, mut decoded, mut batched) = (
            model.copy_state(&imaged).unwrap(),
            model.copy_state(&imaged).unwrap(),
            model.copy_state(&imaged).unwrap(),
        );
        let after_prefill = model.prefill(&mut prefilled, &tail, Logits::Last).unwrap();
        let mut after_decode = Vec::new();
        for &t in &tail {
            after_decode = model.decode(&mut decoded, t).unwrap();
        }
        let mut other = model.try_new_state().unwrap();
        model.prefill(&mut other, &head, Logits::None).unwrap();
        let mut after_batch = Vec::new();
        for &t in &tail {
            let rows = model.decode_batch(&mut [&mut batched, &mut other], &[t, 3]).unwrap();
            after_batch = rows[..model.config.vocab_size].to_vec();
        }
        // the control: the same image prompt with the delta forgotten
        let mut forgot = model.copy_state(&imaged).unwrap();
        forgot.rope_delta = 0;
        model.gpu.set_i32(forgot.rope_delta_ptr(), 0).unwrap();
        let wrong = model.prefill(&mut forgot, &tail, Logits::Last).unwrap();

        let control = relative_difference(&wrong, &all);
        eprintln!(
            "text after a 4×6 image, max|Δlogit| / max|logit| against the one prefill: delta forgotten {control:e}"
        );
        for (name, got) in [("prefilled", &after_prefill), ("decoded", &after_decode), ("batched", &after_batch)] {
            let d = relative_difference(got, &all);
            eprintln!("  {name}: {d:e}");
            assert_eq!(argmax(got), argmax(&all), "{name}: another greedy token");
            assert!(
                d <= 2e-2 && d * 4.0 < control,
                "{name}: {d:e} from the one prefill (delta forgotten: {control:e})"
            );
        }
        assert!(after_batch == after_decode, "the batched step differs from the one-sequence step");
    }
}
