//! The decode step for several tokens at once: t ≤ 8 consecutive tokens of one sequence (the
//! verify step of speculative decoding, `mtp.rs`: `decode_tokens`), or one token of each of
//! n ≤ 8 sequences (batched decoding, `Backend::decode_batch`: `batch_step`, the same kernels,
//! each token with its own sequence's state, position and KV cache).
//!
//! Each weight is read once for all t tokens: the stacked GDN in-projection, the stacked q/k/v
//! projection (`gemv_norm_mma`, on the tensor cores) and the lm_head (`gemv_norm_tokens`); the MoE block in its four-kernel form
//! (`moe_decode_kernels`: out_proj / o_proj and the router once, the experts' GEMVs over every
//! token's slots in one launch). What reads the sequence's state runs over the tokens in order:
//! the causal conv and the delta rule (one launch each, the GDN state after every token kept, so
//! the step can be cut after any token), and q/k norm + RoPE + attention at each token's
//! position (a launch per token; in the batched step one launch each over the sequences, through
//! device arrays of their positions and caches). Every kernel sums what it sums in the one-token step's order,
//! so each token's logits are `decode`'s bit for bit, and a greedy speculative reply is the
//! plain one.
//!
//! ```text
//! h[i] = embed[tokens[i]]                                   i < t
//! for each layer:
//!     P = W_in · RMSN(h[i])  for all i (one read of W_in)
//!     for i in order: y[i] = Mixer_i(P[i]; state after token i−1) → state after token i
//!     h[i] += W_o · y[i];  h[i] += MoE(RMSN(h[i]))   for all i (one read of W_o, the router)
//! logits[i] = lm_head · RMSN(h[i])  for all i (one read of lm_head)
//! ```
//! The sequence's own GDN states stay as they were; `keep_tokens(n)` moves the states after token
//! n − 1 into them. Captured as one graph per sequence and t. bf16 weights (FP8 verifies
//! through the prefill path: `mtp.rs`).

use crate::model::{CudaModel, CudaState, LayerStateGpu, GRAPHS_KEPT};
use crate::ops::attention::{attention_decode_batch, attention_decode_tokens, BatchCaches, KvCacheGpu};
use crate::ops::embed::embed;
use crate::ops::gdn::{gdn_decode_batch, gdn_decode_tokens, GdnStatesAfter};
use crate::ops::linear::{gemv_norm_tokens, GEMV_MAX_TOKENS};
use crate::ops::moe::{moe_decode_kernels, MixerOut};
use crate::ops::sample::{sample, SamplingParamsGpu};
use crate::profile::{profile_launches, KernelTime};
use crate::runtime::{DevBuf, DevPtr, Gpu, GraphCache};
use crate::weights::MixerGpu;
use anyhow::{anyhow, ensure, Context, Result};
use solo_model::sampler::Sampler;
use solo_model::Precision;

/// Most tokens one multi-token step takes.
pub const MAX_TOKENS: usize = GEMV_MAX_TOKENS;

/// The multi-token step's own memory (one per model, made on first use: ~500 MB).
pub(crate) struct TokenStates {
    /// Per GDN layer, in order: the state after each of the last step's tokens.
    after: Vec<GdnStatesAfter>,
    /// i32 [MAX_TOKENS]: the positions of the step's tokens.
    positions: DevBuf,
    /// i32 [MAX_TOKENS]: the batched step's sequences' rotary deltas (`CudaState::rope_delta`).
    deltas: DevBuf,
    /// f32 [MAX_TOKENS, vocab]: the step's logits.
    logits: DevBuf,
    /// The step's graphs by (state id, its adapter's upload id or 0, t).
    graphs: GraphCache<(u64, u64, usize)>,
    /// u64 [GDN layers][2][MAX_TOKENS]: per GDN layer, the batched step's sequences' conv-window
    /// and recurrent-state pointers.
    pointers: DevBuf,
    /// u64 [attention layers][2][MAX_TOKENS]: per attention layer, the batched step's sequences'
    /// key and value caches.
    kv_pointers: DevBuf,
    /// Rows each of the batched step's sequences' KV caches holds (all alike).
    batch_capacity: std::cell::Cell<usize>,
    /// The batched step's graphs by its sequences' ids, in order.
    batch_graphs: GraphCache<Vec<u64>>,
    /// u64 [layers][2][MAX_TOKENS]: per layer, the step's tokens' LoRA sites (input, then output
    /// projection; `LoraSite` addresses, 0: none): each sequence's in the batched step, the
    /// sequence's for every token in the multi-token one.
    lora_sites: DevBuf,
    /// Whether the step being run has LoRA sites (then its kernels read `lora_sites`).
    lora_on: std::cell::Cell<bool>,
    /// Per sequence of a batched step: its sampler's settings and draw count (`batch_step_pick`).
    sampling: Vec<SamplingParamsGpu>,
    /// i32 [MAX_TOKENS]: the batched step's picks.
    picks: DevBuf,
}

impl TokenStates {
    fn new(gpu: &Gpu, gdn_layers: usize, attention_layers: usize, vocab: usize) -> Result<Self> {
        let after = (0..gdn_layers).map(|_| GdnStatesAfter::new(gpu, MAX_TOKENS)).collect::<Result<Vec<_>>>()?;
        Ok(TokenStates {
            after,
            positions: gpu.alloc(MAX_TOKENS * 4)?,
            deltas: gpu.alloc(MAX_TOKENS * 4)?,
            logits: gpu.alloc(MAX_TOKENS * vocab * 4)?,
            graphs: GraphCache::new(GRAPHS_KEPT),
            pointers: gpu.alloc(gdn_layers * 2 * MAX_TOKENS * 8)?,
            kv_pointers: gpu.alloc(attention_layers.max(1) * 2 * MAX_TOKENS * 8)?,
            batch_capacity: std::cell::Cell::new(0),
            batch_graphs: GraphCache::new(GRAPHS_KEPT),
            lora_sites: gpu.alloc((gdn_layers + attention_layers) * 2 * MAX_TOKENS * 8)?,
            lora_on: std::cell::Cell::new(false),
            sampling: (0..MAX_TOKENS).map(|_| SamplingParamsGpu::new(gpu)).collect::<Result<Vec<_>>>()?,
            picks: gpu.alloc(MAX_TOKENS * 4)?,
        })
    }

    /// Device address of GDN layer g's pointer array, `recurrent` or conv windows.
    fn pointers(&self, g: usize, recurrent: bool) -> DevPtr {
        self.pointers.ptr() + ((2 * g + usize::from(recurrent)) * MAX_TOKENS * 8) as DevPtr
    }

    /// Layer i's device array of the step's tokens' LoRA sites (`output`: of the output
    /// projection, else of the input projections), or 0 when none has an adapter.
    fn lora_sites(&self, i: usize, output: bool) -> DevPtr {
        if !self.lora_on.get() {
            return 0;
        }
        self.lora_sites.ptr() + ((2 * i + usize::from(output)) * MAX_TOKENS * 8) as DevPtr
    }

    /// Where attention layer a of the batched step finds its sequences.
    fn batch_caches(&self, a: usize) -> BatchCaches {
        let at = |values: usize| self.kv_pointers.ptr() + ((2 * a + values) * MAX_TOKENS * 8) as DevPtr;
        BatchCaches {
            positions: self.positions.ptr(),
            deltas: self.deltas.ptr(),
            keys: at(0),
            values: at(1),
            max_seq: self.batch_capacity.get(),
        }
    }
}

/// Layer i's KV cache in `state`, if layer i is an attention layer.
fn kv_cache(state: &CudaState, i: usize) -> Option<&KvCacheGpu> {
    match &state.layers[i] {
        LayerStateGpu::FullAttention(kv) => Some(kv),
        LayerStateGpu::GatedDeltaNet(_) => None,
    }
}

/// Whose tokens a step runs.
#[derive(Clone, Copy)]
enum Tokens<'a> {
    /// t consecutive tokens of one sequence (the states after each kept in `TokenStates::after`).
    OfOne(&'a CudaState, usize),
    /// One token of each sequence (their states updated in place, through `TokenStates::pointers`).
    OfEach(&'a [&'a mut CudaState]),
}

impl CudaModel {
    /// One decode step for several sequences at once: `tokens[i]` fed to `states[i]` (n ≤
    /// MAX_TOKENS distinct sequences, bf16 weights); returns the logits f32 [n, vocab], row i
    /// `decode(states[i], tokens[i])`'s bit for bit, and advances each sequence by one. The
    /// weights are read once for all n (as in `decode_tokens`); the conv and the delta step take
    /// every sequence's token in one launch each, and so do q/k norm + RoPE, attention and its
    /// combine (`attention_decode_batch`). One graph
    /// per batch (its sequences, in order), captured on first use; one synchronisation.
    pub(crate) fn batch_step(&self, states: &mut [&mut CudaState], tokens: &[u32]) -> Result<Vec<f32>> {
        let slot = self.batch_step_on_device(states, tokens)?;
        let s = slot.as_ref().expect("made by token_states");
        let logits = self.gpu.download_f32(s.logits.ptr(), tokens.len() * self.config.vocab_size)?;
        drop(slot);
        self.advance_all(states)?;
        Ok(logits)
    }

    /// `batch_step`, each sequence's next token then drawn on the GPU from its row of logits by
    /// its own sampler (`samplers[i]`: greedy or top_k in 1..=64, as `decode_pick`): the picks,
    /// what `samplers[i].sample(row i)` gives with the same draw of its seeded stream (which
    /// advances). Only the n ids come back to the host. The draws are kernels of their own after
    /// the graph (two a sequence).
    pub(crate) fn batch_step_pick(
        &self,
        states: &mut [&mut CudaState],
        tokens: &[u32],
        samplers: &mut [&mut Sampler],
    ) -> Result<Vec<u32>> {
        ensure!(samplers.len() == tokens.len(), "{} samplers for {} tokens", samplers.len(), tokens.len());
        for sampler in samplers.iter() {
            SamplingParamsGpu::encode(sampler.config())?;
        }
        let (gpu, vocab) = (&self.gpu, self.config.vocab_size);
        let slot = self.batch_step_on_device(states, tokens)?;
        let s = slot.as_ref().expect("made by token_states");
        for (i, sampler) in samplers.iter().enumerate() {
            let params = &s.sampling[i];
            params.write_at(gpu, sampler.config(), sampler.draws())?;
            let row = s.logits.ptr() + (i * vocab * 4) as DevPtr;
            sample(gpu, row, vocab, params, self.sample_scratch(), s.picks.ptr() + (4 * i) as DevPtr)?;
        }
        let picks = gpu.download_i32(s.picks.ptr(), tokens.len())?;
        drop(slot);
        self.advance_all(states)?;
        for sampler in samplers.iter_mut().filter(|s| s.config().temperature > 0.0) {
            sampler.skip_draw(); // the device drew it
        }
        Ok(picks.into_iter().map(|p| p as u32).collect())
    }

    /// Each sequence one token further, on the host and the device.
    fn advance_all(&self, states: &mut [&mut CudaState]) -> Result<()> {
        for st in states.iter_mut() {
            st.advance_without_head(1);
            self.gpu.write(st.pos.ptr(), &(st.position as i32).to_le_bytes())?;
        }
        Ok(())
    }

    /// The batched step up to its logits (f32 [n, vocab] in the step's memory, returned borrowed),
    /// the states not yet advanced.
    fn batch_step_on_device(
        &self,
        states: &mut [&mut CudaState],
        tokens: &[u32],
    ) -> Result<std::cell::Ref<'_, Option<TokenStates>>> {
        let n = tokens.len();
        ensure!(states.len() == n, "{} states for {n} tokens", states.len());
        ensure!(
            self.can_decode_tokens(n),
            "the batched step takes 1..={MAX_TOKENS} sequences of bf16 weights, not {n}"
        );
        for st in states.iter() {
            self.check_room(st, 1)?;
        }
        let gpu = &self.gpu;
        let slot = self.token_states(states[0])?;
        let s = slot.as_ref().expect("made by token_states");
        let positions: Vec<u8> = states.iter().flat_map(|st| (st.position as i32).to_le_bytes()).collect();
        gpu.write(s.positions.ptr(), &positions)?;
        let deltas: Vec<u8> = states.iter().flat_map(|st| (st.rope_delta as i32).to_le_bytes()).collect();
        gpu.write(s.deltas.ptr(), &deltas)?;
        let mut pointers = vec![0u64; s.after.len() * 2 * MAX_TOKENS];
        for (i, st) in states.iter().enumerate() {
            for (g, gdn) in st.gdn_states().enumerate() {
                pointers[2 * g * MAX_TOKENS + i] = gdn.conv.ptr();
                pointers[(2 * g + 1) * MAX_TOKENS + i] = gdn.recurrent.ptr();
            }
        }
        gpu.write(s.pointers.ptr(), &pointers.iter().flat_map(|p| p.to_le_bytes()).collect::<Vec<u8>>())?;
        let capacity = states[0].capacity;
        ensure!(states.iter().all(|st| st.capacity == capacity), "the batched step takes sequences of one KV capacity");
        s.batch_capacity.set(capacity);
        let mut kv = Vec::new();
        for (i, st) in states.iter().enumerate() {
            let caches = (0..st.layers.len()).filter_map(|l| kv_cache(st, l));
            for (a, cache) in caches.enumerate() {
                kv.resize(kv.len().max((2 * a + 2) * MAX_TOKENS), 0u64);
                kv[2 * a * MAX_TOKENS + i] = cache.keys.ptr();
                kv[(2 * a + 1) * MAX_TOKENS + i] = cache.values.ptr();
            }
        }
        if !kv.is_empty() {
            gpu.write(s.kv_pointers.ptr(), &kv.iter().flat_map(|p| p.to_le_bytes()).collect::<Vec<u8>>())?;
        }
        let adapters: Vec<_> = states.iter().map(|st| st.lora.as_deref()).collect();
        self.write_lora_sites(s, &adapters)?;
        self.upload_ids(tokens)?;
        // a graph per batch: its sequences, then the uploads of their adapters (0: none)
        let ids: Vec<u64> =
            states.iter().map(|st| st.id).chain(states.iter().map(|st| st.lora.as_ref().map_or(0, |l| l.id))).collect();
        s.batch_graphs.launch(gpu, ids, || self.step_kernels(Tokens::OfEach(states), s))?;
        Ok(slot)
    }

    /// The step's tokens' LoRA sites into `s.lora_sites` (token j's adapter `adapters[j]`), and
    /// whether there are any. Only adapters their kernels take (`fuses_tokens`) come here.
    fn write_lora_sites(&self, s: &TokenStates, adapters: &[Option<&crate::ops::lora::LoraGpu>]) -> Result<()> {
        let any = adapters.iter().any(Option::is_some);
        s.lora_on.set(any);
        if !any {
            return Ok(());
        }
        let layers = self.weights.layers.len();
        let mut sites = vec![0u64; layers * 2 * MAX_TOKENS];
        for (j, l) in adapters.iter().enumerate() {
            let Some(l) = l else { continue };
            ensure!(self.fuses_tokens(l), "the multi-token steps take the adapters their kernels take");
            for (i, layer) in l.layers.iter().enumerate() {
                (sites[2 * i * MAX_TOKENS + j], sites[(2 * i + 1) * MAX_TOKENS + j]) = layer.fused_sites();
            }
        }
        self.gpu.write(s.lora_sites.ptr(), &sites.iter().flat_map(|p| p.to_le_bytes()).collect::<Vec<u8>>())
    }

    /// The multi-token step's memory, made on first use (for states shaped like `state`).
    fn token_states(&self, state: &CudaState) -> Result<std::cell::Ref<'_, Option<TokenStates>>> {
        if self.token_states.borrow().is_none() {
            let gdn = state.gdn_states().count();
            let made = TokenStates::new(&self.gpu, gdn, state.layers.len() - gdn, self.config.vocab_size)?;
            *self.token_states.borrow_mut() = Some(made);
        }
        Ok(self.token_states.borrow())
    }

    /// Whether `decode_tokens` takes t tokens: 1 ..= MAX_TOKENS, bf16 weights (a GGUF model's
    /// matrices as stored too: its mixers' and lm_head's GEMVs go a token at a time).
    pub(crate) fn can_decode_tokens(&self, t: usize) -> bool {
        (1..=MAX_TOKENS).contains(&t) && self.weights.precision == Precision::Bf16
    }

    /// Runs `tokens` at positions `state.position ..` and returns their logits (f32 [t, vocab],
    /// each row `decode`'s for that token, bit for bit). Writes the t positions of the KV caches
    /// and leaves the tokens' residual rows in `io.h` (the MTP head's catch-up reads them); the
    /// GDN layers' states after each token wait for `keep_tokens`, `state` itself is unchanged
    /// (its position too). One graph per state and t (captured on first use), one
    /// synchronisation (the download).
    pub(crate) fn decode_tokens(&self, state: &CudaState, tokens: &[u32]) -> Result<Vec<f32>> {
        let t = tokens.len();
        ensure!(
            self.can_decode_tokens(t),
            "the multi-token step takes 1..={MAX_TOKENS} tokens of bf16 weights, not {t}"
        );
        self.check_room(state, t)?;
        let (gpu, vocab) = (&self.gpu, self.config.vocab_size);
        let slot = self.token_states(state)?;
        let s = slot.as_ref().expect("made by token_states");
        let positions: Vec<u8> = (0..t).flat_map(|i| ((state.position + i) as i32).to_le_bytes()).collect();
        gpu.write(s.positions.ptr(), &positions)?;
        self.write_lora_sites(s, &vec![state.lora.as_deref(); t])?;
        self.upload_ids(tokens)?;
        let key = (state.id, state.lora.as_ref().map_or(0, |l| l.id), t);
        s.graphs.launch(gpu, key, || self.step_kernels(Tokens::OfOne(state, t), s))?;
        gpu.download_f32(s.logits.ptr(), t * vocab)
    }

    /// Where `decode_tokens` of `tokens` spends its time, kernel by kernel (`profile`: launched
    /// outside the graph, timed back to back on the GPU). Leaves `state` as `decode_tokens` does.
    pub fn profile_decode_tokens(&self, state: &CudaState, tokens: &[u32]) -> Result<Vec<KernelTime>> {
        self.decode_tokens(state, tokens)?; // its buffers, and the positions and ids
        let slot = self.token_states.borrow();
        let s = slot.as_ref().expect("made by decode_tokens");
        profile_launches(&self.gpu, || self.step_kernels(Tokens::OfOne(state, tokens.len()), s))
    }

    /// Where `batch_step` of `tokens` spends its time, kernel by kernel (launched outside the
    /// graph, timed back to back on the GPU), after one `batch_step` of the same tokens. For
    /// `solo bench`: the states' GDN layers then hold two steps' updates (reset them after).
    pub fn profile_batch_step(&self, states: &mut [&mut CudaState], tokens: &[u32]) -> Result<Vec<KernelTime>> {
        self.batch_step(states, tokens)?; // its buffers, pointers, positions and ids
        let slot = self.token_states.borrow();
        let s = slot.as_ref().expect("made by batch_step");
        profile_launches(&self.gpu, || self.step_kernels(Tokens::OfEach(states), s))
    }

    /// The kernels of `decode_tokens` and `batch_step` (what their graphs hold), for the ids in
    /// `io.ids`: the tokens of one sequence, or one token of each of several.
    fn step_kernels(&self, tokens: Tokens, s: &TokenStates) -> Result<()> {
        let (gpu, w, eps, vocab) = (&self.gpu, &self.weights, self.config.rms_norm_eps, self.config.vocab_size);
        let n = match tokens {
            Tokens::OfOne(_, t) => t,
            Tokens::OfEach(states) => states.len(),
        };
        let h = self.main_residual(0);
        embed(gpu, &w.embed_tokens, self.ids(), n, h)?;
        let mismatch = |i: usize| anyhow!("layer {i}: state and weights disagree on the layer kind");
        let (mut g, mut a) = (0, 0); // GDN and attention layers so far
        for (i, layer) in w.layers.iter().enumerate() {
            let norm = &layer.input_norm;
            let (out_proj, y) = match &layer.mixer {
                MixerGpu::GatedDeltaNet(m) => {
                    let y = match tokens {
                        Tokens::OfOne(state, t) => {
                            let LayerStateGpu::GatedDeltaNet(st) = &state.layers[i] else { return Err(mismatch(i)) };
                            let after = s.after.get(g).context("more GDN layers than kept states")?;
                            gdn_decode_tokens(
                                gpu,
                                m,
                                h,
                                norm,
                                eps,
                                t,
                                st,
                                after,
                                &self.scratch,
                                s.lora_sites(i, false),
                            )?
                        }
                        Tokens::OfEach(_) => {
                            let (windows, recurrents) = (s.pointers(g, false), s.pointers(g, true));
                            let lora = s.lora_sites(i, false);
                            gdn_decode_batch(gpu, m, h, norm, eps, n, windows, recurrents, &self.scratch, lora)?
                        }
                    };
                    g += 1;
                    (&m.out_proj, y)
                }
                MixerGpu::FullAttention(m) => {
                    let y = match tokens {
                        Tokens::OfOne(state, t) => {
                            let cache = kv_cache(state, i).ok_or_else(|| mismatch(i))?;
                            let (pos, rope) = (s.positions.ptr(), state.text_rope());
                            let lora = s.lora_sites(i, false);
                            attention_decode_tokens(gpu, m, h, norm, eps, pos, rope, t, cache, &self.scratch, lora)?
                        }
                        Tokens::OfEach(_) => {
                            let (caches, lora) = (s.batch_caches(a), s.lora_sites(i, false));
                            attention_decode_batch(gpu, m, h, norm, eps, n, &caches, &self.scratch, lora)?
                        }
                    };
                    a += 1;
                    (&m.o_proj, y)
                }
            };
            let mixer = MixerOut { w: out_proj, y, lora: s.lora_sites(i, true) };
            moe_decode_kernels(gpu, mixer, &layer.moe, h, &layer.post_attention_norm, eps, n, &self.scratch)?;
        }
        gemv_norm_tokens(gpu, h, &w.final_norm, eps, &w.lm_head, n, s.logits.ptr(), vocab)
    }

    /// After `decode_tokens` of at least n tokens: the sequence keeps the first n and advances
    /// by n. Each GDN layer takes its state after token n − 1; the KV caches already hold them.
    pub(crate) fn keep_tokens(&self, state: &mut CudaState, n: usize) -> Result<()> {
        let slot = self.token_states.borrow();
        let s = slot.as_ref().context("keep_tokens before any multi-token step")?;
        ensure!((1..=MAX_TOKENS).contains(&n), "keep {n} tokens of a multi-token step");
        for (st, after) in state.gdn_states().zip(&s.after) {
            after.copy_into(&self.gpu, n - 1, st)?;
        }
        state.position += n;
        self.gpu.write(state.pos.ptr(), &(state.position as i32).to_le_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use solo_model::{Backend, Logits};

    /// On a 4-layer model of the real widths (3 GDN layers and an attention layer): the
    /// multi-token step's logits for t = 1, 3, 8 tokens are those of t decode steps bit for bit;
    /// keeping n of them leaves the state those n decode steps leave (the next step's logits bit
    /// for bit), and the sequence's own state is untouched until then.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn decode_tokens_equals_decode_steps() {
        decode_tokens_equal_decode_steps(&crate::synthetic::random_model(4, 256, Precision::Bf16).unwrap());
    }

    /// The same for a GGUF Q4_K_M file's shape (synthetic; the mixers' in-projections and the
    /// lm_head as stored, their GEMVs a token at a time).
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn gguf_decode_tokens_equal_decode_steps() {
        let model = crate::synthetic::random_model_as(4, 256, crate::synthetic::Synthetic::GgufQ4KM).unwrap();
        assert!(model.weights.lm_head.format.is_some());
        decode_tokens_equal_decode_steps(&model);
    }

    fn decode_tokens_equal_decode_steps(model: &CudaModel) {
        let vocab = model.config.vocab_size;
        let prompt: Vec<u32> = (0..40u32).map(|i| i * 7919 % 200_000).collect();
        let mut base = model.try_new_state().unwrap();
        model.prefill(&mut base, &prompt, Logits::Last).unwrap();
        for (t, n) in [(1, 1), (3, 2), (8, 8), (8, 5)] {
            let tokens: Vec<u32> = (0..t as u32).map(|i| 1000 + 37 * i).collect();
            let mut plain = model.copy_state(&base).unwrap();
            let want: Vec<Vec<f32>> = tokens.iter().map(|&x| model.decode(&mut plain, x).unwrap()).collect();
            let mut multi = model.copy_state(&base).unwrap();
            let got = model.decode_tokens(&multi, &tokens).unwrap();
            for (i, (g, w)) in got.chunks(vocab).zip(&want).enumerate() {
                assert!(
                    g.iter().zip(w).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{t} tokens: token {i}'s logits are not the decode step's"
                );
            }
            // untouched until kept: a plain step from it is a step from base
            let mut probe = model.copy_state(&multi).unwrap();
            let mut from_base = model.copy_state(&base).unwrap();
            assert_eq!(model.decode(&mut probe, 7).unwrap(), model.decode(&mut from_base, 7).unwrap());
            model.keep_tokens(&mut multi, n).unwrap();
            let mut kept = model.copy_state(&base).unwrap();
            for &x in &tokens[..n] {
                model.decode(&mut kept, x).unwrap();
            }
            assert_eq!(multi.position, kept.position);
            assert_eq!(
                model.decode(&mut multi, 9).unwrap(),
                model.decode(&mut kept, 9).unwrap(),
                "{t} tokens, {n} kept: the next step differs"
            );
        }
        let nine = vec![5u32; 9];
        assert!(model.decode_tokens(&base, &nine).is_err(), "9 tokens");
    }

    /// Three sequences after prompts of 40, 7 and 300 tokens, twice: the ones to batch, and
    /// copies to decode alone.
    fn three_sequences(model: &CudaModel) -> (Vec<CudaState>, Vec<CudaState>) {
        let (mut batched, mut alone) = (Vec::new(), Vec::new());
        for (len, seed) in [(40u32, 7919u32), (7, 104_729), (300, 15_485_863)] {
            let prompt: Vec<u32> = (0..len).map(|i| i.wrapping_mul(seed) % 200_000).collect();
            let mut st = model.try_new_state().unwrap();
            model.prefill(&mut st, &prompt, Logits::Last).unwrap();
            alone.push(model.copy_state(&st).unwrap());
            batched.push(st);
        }
        (batched, alone)
    }

    /// The batched step: one token of each of 3 sequences at different positions gives each
    /// the logits its own decode step gives, bit for bit, step after step (so it leaves each
    /// where its own decode leaves it).
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn decode_batch_equals_decode_per_sequence() {
        decode_batch_equals_decode_alone(&crate::synthetic::random_model(4, 512, Precision::Bf16).unwrap());
        let gguf = crate::synthetic::random_model_as(4, 512, crate::synthetic::Synthetic::GgufQ4KM).unwrap();
        decode_batch_equals_decode_alone(&gguf);
    }

    fn decode_batch_equals_decode_alone(model: &CudaModel) {
        let vocab = model.config.vocab_size;
        let (mut batched, mut alone) = three_sequences(model);
        let mut tokens = vec![11u32, 22, 33];
        for step in 0..4 {
            let mut refs: Vec<&mut CudaState> = batched.iter_mut().collect();
            let rows = model.decode_batch(&mut refs, &tokens).unwrap();
            for (i, (row, st)) in rows.chunks(vocab).zip(alone.iter_mut()).enumerate() {
                let want = model.decode(st, tokens[i]).unwrap();
                assert!(
                    row.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "step {step}, sequence {i}: not its own decode step's logits"
                );
                assert_eq!(batched[i].position, st.position);
            }
            tokens = tokens.iter().map(|t| (t * 31 + 5) % 200_000).collect();
        }
        // back to one sequence at a time: the batched states decode as the others
        for (a, b) in batched.iter_mut().zip(alone.iter_mut()) {
            assert_eq!(model.decode(a, 3).unwrap(), model.decode(b, 3).unwrap());
        }
    }

    /// The batched step's picks on the GPU: each sequence's token is the one its own
    /// `decode_pick` draws with the same sampler (greedy, and two seeded samplers), step after
    /// step, and each sampler's stream advances as there.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn batch_picks_equal_decode_picks() {
        let model = crate::synthetic::random_model(4, 512, Precision::Bf16).unwrap();
        let configs = [(0.0, 0, 1.0, 0), (1.0, 20, 0.95, 7), (0.7, 64, 0.8, 42)];
        let sampler = |(temperature, top_k, top_p, seed): (f32, usize, f32, u64)| {
            Sampler::new(solo_model::sampler::SamplerConfig { temperature, top_k, top_p, seed })
        };
        let (mut batched, mut alone) = three_sequences(&model);
        let mut batch_samplers: Vec<Sampler> = configs.iter().map(|&c| sampler(c)).collect();
        let mut alone_samplers: Vec<Sampler> = configs.iter().map(|&c| sampler(c)).collect();
        let mut tokens = vec![11u32, 22, 33];
        for step in 0..5 {
            let mut refs: Vec<&mut CudaState> = batched.iter_mut().collect();
            let mut samplers: Vec<&mut Sampler> = batch_samplers.iter_mut().collect();
            let picks = model.decode_batch_and_pick(&mut refs, &tokens, &mut samplers).unwrap().unwrap();
            for i in 0..3 {
                let want = model.decode_pick(&mut alone[i], tokens[i], &mut alone_samplers[i]).unwrap();
                assert_eq!(picks[i], want, "step {step}, sequence {i}");
                assert_eq!(batch_samplers[i].draws(), alone_samplers[i].draws());
            }
            tokens = picks;
        }
        let mut host_only = [sampler((1.0, 0, 1.0, 3))]; // top_k 0: the host samples
        let mut refs: Vec<&mut CudaState> = batched.iter_mut().take(1).collect();
        let mut samplers: Vec<&mut Sampler> = host_only.iter_mut().collect();
        assert!(model.decode_batch_and_pick(&mut refs, &tokens[..1], &mut samplers).is_none());
    }
}
