//! The CUDA backend: the forward pass of `solo_cpu::model` with GPU kernels, same order of
//! operations. The residual stream is f32; each sub-layer reads a bf16 normalised copy.
//!
//! ```text
//! h = embed[ids];  x = RMSN(h; input_norm[0])
//! for each layer i:
//!     delta = Mixer_i(x);  h += delta;  x = RMSN(h; post_attention_norm[i])
//!     delta = MoE_i(x);    h += delta;  x = RMSN(h; input_norm[i+1] or the final norm)
//! logits = lm_head(x)
//! ```
//! Decode runs that for one token as a captured CUDA graph (`decode_forward`), with the norms
//! and residual adds folded into the projections around them: each sub-layer's first GEMV
//! normalises h itself, its last GEMV adds into h — the same arithmetic, in fewer kernels (the
//! mixer's out_proj / o_proj is the first phase of the MoE block's one kernel). The
//! token id and the position live on the device, the argmax of the logits is written back as
//! the next step's token id, so a greedy decode loop never needs the host between steps. The
//! step ends in one of four ways (`StepEnd`), each its own graph: the full lm_head and its
//! argmax (`decode`, which returns the logits); the screened lm_head, which finds the same
//! argmax from an int8 copy without forming the logits (`decode_greedy`, `ops::lm_head`); the
//! full lm_head and the GPU sampler (`decode_sampled`: temperature, top-k ≤ 64, top-p, seeded on
//! the device); or the screened lm_head's exact top-k logits and the GPU sampler (`decode_pick`,
//! one token at a time: the server's step).

mod adapters;
mod images;

use crate::mtp::{MtpIo, MtpStateGpu, VerifyBackup, VerifyMark};
use crate::multi_token::TokenStates;
use crate::ops::attention::{attention_decode, attention_mixer, KvCacheGpu, Rope};
use crate::ops::gdn::{gdn_decode, gdn_mixer, GdnStateGpu};
use crate::ops::linear::{gemv_norm, linear};
use crate::ops::lm_head::LmHeadScreen;
use crate::ops::lora::LoraGpu;
use crate::ops::moe::{moe_block, moe_decode, MixerOut};
use crate::ops::{embed::embed, norm, sample, Scratch};
use crate::runtime::{DevBuf, DevPtr, Gpu, GraphCache};
use crate::weights::{MixerGpu, ModelGpu};
use anyhow::{anyhow, bail, ensure, Result};
use solo_model::image::ImagePatches;
use solo_model::lora::{LoraAdapter, LoraSupport};
use solo_model::sampler::{Sampler, SamplerConfig};
use solo_model::{Backend, Draft, Logits, ModelConfig, ModelWeights, PromptImage};
use std::cell::RefCell;
use std::sync::{Arc, Weak};

/// Tokens per prefill launch sequence: longer prompts are prefilled in chunks of this size.
pub const PREFILL_CHUNK: usize = 4096;

pub struct CudaModel {
    pub gpu: Gpu,
    pub config: ModelConfig,
    pub weights: ModelGpu,
    /// Longest sequence a state can hold (KV cache size).
    pub max_seq: usize,
    pub(crate) scratch: Scratch,
    io: Io,
    /// FP8 weights: where prefill dequantises each layer's mixer matrices to bf16 for cuBLAS.
    pub(crate) dequantized: Option<DevBuf>,
    /// The MTP head's buffers (with an MTP head), and the states a verify step may go back to.
    pub(crate) mtp_io: Option<MtpIo>,
    pub(crate) verify_backup: RefCell<Option<VerifyBackup>>,
    /// The multi-token decode step's kept states, positions and logits (`multi_token`).
    pub(crate) token_states: RefCell<Option<TokenStates>>,
    /// The int8 copy of the lm_head that greedy and picked steps screen with (`ops::lm_head`),
    /// made on the first screened step (508 MB that `decode` and `decode_sampled` never read).
    screen: std::cell::OnceCell<LmHeadScreen>,
    /// Whether `decode_greedy` and `decode_pick` use the screened lm_head (default) or the full
    /// one (`solo bench --full-lm-head`); both choose the same tokens.
    pub screened_lm_head: bool,
    /// Per `StepEnd`, the decode step's graphs by the id of the state each was captured for and
    /// of its adapter's upload (0: none): up to `GRAPHS_KEPT`, so that the server's several
    /// running sequences each keep theirs.
    graphs: [GraphCache<(u64, u64)>; 4],
    /// The adapters uploaded for the sequences that run with them (`Backend::set_adapter`), each
    /// kept while its `LoraAdapter` lives (`model/adapters.rs`).
    pub(crate) adapters: RefCell<Vec<(Weak<LoraAdapter>, Arc<LoraGpu>)>>,
    /// Sequences the server is done with (`Backend::release_state`), kept whole for the next
    /// `new_state` / `resume`: no allocation, and their decode graphs stay captured. At most
    /// `SPARE_STATES`, each of `max_seq` capacity.
    spare_states: RefCell<Vec<CudaState>>,
}

/// Released sequences kept for reuse (the batched step's width: what `solo serve` runs at once).
const SPARE_STATES: usize = crate::multi_token::MAX_TOKENS;

/// Decode graphs kept per step kind (one per sequence that decodes in turn).
pub(crate) const GRAPHS_KEPT: usize = 16;

/// How a decode step ends, after the last layer.
#[derive(Clone, Copy, PartialEq, Debug)]
enum StepEnd {
    /// The full lm_head into `io.logits`, then its argmax.
    Logits,
    /// The screened lm_head's argmax; `io.logits` is not written.
    Screened,
    /// The full lm_head, then the GPU sampler.
    Sampled,
    /// The screened lm_head's top-k logits (the rest −∞), then the GPU sampler.
    ScreenedSampled,
}

/// The forward pass's own buffers, sized for PREFILL_CHUNK tokens.
struct Io {
    /// i32 [chunk]: token ids; ids[0] is also where the decode step's argmax lands
    ids: DevBuf,
    /// f32 [chunk, hidden]: the residual stream
    h: DevBuf,
    /// bf16 [chunk, hidden]: the normalised input of the next sub-layer
    x: DevBuf,
    /// f32 [chunk, hidden]: a sub-layer's output
    delta: DevBuf,
    /// f32 [vocab]: the last token's logits
    logits: DevBuf,
    /// argmax partials
    partials: DevBuf,
    /// The GPU sampler's parameters, its scratch (sample::SAMPLE_SCRATCH_BYTES), and the ids it
    /// chose: i32 [1 + max_seq], a count then the ids (`decode_sampled`)
    sampling: sample::SamplingParamsGpu,
    sample_scratch: DevBuf,
    history: DevBuf,
}

/// One sequence on the GPU.
pub struct CudaState {
    /// Unique per allocation: the key of the decode graphs captured for this state's buffers.
    pub(crate) id: u64,
    pub position: usize,
    /// Positions its KV caches hold: `max_seq`, or fewer for a compact copy (`compact_copy`).
    pub capacity: usize,
    /// i32 [2] on the device: the position the next token is written at, then the rotary delta
    /// (`rope_delta`, `rope_delta_ptr`).
    pub pos: DevBuf,
    /// A text token's rotary position minus its position: 0 until an image, then what the images
    /// took less than their tokens (`solo_model::place_images`). On the device too.
    pub rope_delta: i64,
    pub layers: Vec<LayerStateGpu>,
    /// The MTP head's cache and pending row (with an MTP head).
    pub mtp: Option<MtpStateGpu>,
    /// Set by `verify` until `keep_verified`.
    pub(crate) verify: Option<VerifyMark>,
    /// The LoRA adapter it runs with (`Backend::set_adapter`; `ops::lora` says where its terms
    /// are added).
    pub(crate) lora: Option<Arc<LoraGpu>>,
}

impl CudaState {
    /// The sequence's GDN layers' states, in order.
    pub(crate) fn gdn_states(&self) -> impl Iterator<Item = &GdnStateGpu> {
        self.layers.iter().filter_map(|l| match l {
            LayerStateGpu::GatedDeltaNet(s) => Some(s),
            LayerStateGpu::FullAttention(_) => None,
        })
    }

    /// i32 on the device: `rope_delta`.
    pub(crate) fn rope_delta_ptr(&self) -> DevPtr {
        self.pos.ptr() + 4
    }

    /// The rotary positions of its text tokens.
    pub(crate) fn text_rope(&self) -> Rope {
        Rope::text(self.rope_delta_ptr())
    }

    /// A decode step (which the MTP head does not follow) appended `steps` tokens.
    pub(crate) fn advance_without_head(&mut self, steps: usize) {
        self.position += steps;
        if let Some(m) = &mut self.mtp {
            m.skip_to(self.position);
        }
    }
}

pub enum LayerStateGpu {
    GatedDeltaNet(GdnStateGpu),
    FullAttention(KvCacheGpu),
}

impl CudaModel {
    /// Uploads the weights (real widths only) and allocates the forward buffers.
    pub fn new(gpu: Gpu, config: ModelConfig, weights: &ModelWeights, max_seq: usize) -> Result<Self> {
        let weights = ModelGpu::upload(&gpu, &config, weights)?;
        Self::from_gpu_weights(gpu, config, weights, max_seq)
    }

    pub fn from_gpu_weights(gpu: Gpu, config: ModelConfig, weights: ModelGpu, max_seq: usize) -> Result<Self> {
        let hidden = config.hidden_size;
        let io = Io {
            ids: gpu.alloc(PREFILL_CHUNK * 4)?,
            h: gpu.alloc(PREFILL_CHUNK * hidden * 4)?,
            x: gpu.alloc(PREFILL_CHUNK * hidden * 2)?,
            delta: gpu.alloc(PREFILL_CHUNK * hidden * 4)?,
            logits: gpu.alloc(config.vocab_size * 4)?,
            partials: gpu.alloc(sample::ARGMAX_PARTS * 8)?,
            sampling: sample::SamplingParamsGpu::new(&gpu)?,
            sample_scratch: gpu.alloc(sample::SAMPLE_SCRATCH_BYTES)?,
            history: gpu.alloc((1 + max_seq) * 4)?,
        };
        let scratch = Scratch::new(&gpu, PREFILL_CHUNK)?;
        // FP8: prefill multiplies a bf16 copy of each layer's mixer in turn (~68 MB, the largest)
        let dequant_bytes = weights.layers.iter().map(|l| l.dequantized_bytes()).max().unwrap_or(0);
        let dequantized = if dequant_bytes > 0 { Some(gpu.alloc(dequant_bytes)?) } else { None };
        let mtp_io = match &weights.mtp {
            Some(_) => Some(MtpIo::new(&gpu, PREFILL_CHUNK, hidden, config.vocab_size)?),
            None => None,
        };
        let screened_lm_head = weights.lm_head.is_bf16();
        Ok(CudaModel {
            dequantized,
            mtp_io,
            verify_backup: RefCell::new(None),
            token_states: RefCell::new(None),
            spare_states: RefCell::new(Vec::new()),
            gpu,
            config,
            weights,
            max_seq,
            scratch,
            io,
            screen: Default::default(),
            screened_lm_head,
            graphs: std::array::from_fn(|_| GraphCache::new(GRAPHS_KEPT)),
            adapters: RefCell::new(Vec::new()),
        })
    }

    /// Runs `t` tokens (ids already in `io.ids`) through the model, leaving the final normalised
    /// hidden states in `io.x` and advancing the device position.
    pub(crate) fn forward(&self, state: &CudaState, t: usize) -> Result<()> {
        embed(&self.gpu, &self.weights.embed_tokens, self.io.ids.ptr(), t, self.io.h.ptr())?;
        self.forward_embedded(state, t, state.text_rope())
    }

    /// `forward` from the embedded tokens in `io.h` (f32 [t, hidden]) at rotary positions `rope`
    /// (a prompt piece with an image: `images.rs`).
    pub(crate) fn forward_embedded(&self, state: &CudaState, t: usize, rope: Rope) -> Result<()> {
        self.layers_forward(state, t, rope)?;
        sample::advance_position(&self.gpu, state.pos.ptr(), t)
    }

    /// `forward_embedded` but for advancing the device position: the layers, with the state's
    /// adapter if it has one.
    fn layers_forward(&self, state: &CudaState, t: usize, rope: Rope) -> Result<()> {
        let (gpu, w, io, eps) = (&self.gpu, &self.weights, &self.io, self.config.rms_norm_eps);
        let (h, x, delta) = (io.h.ptr(), io.x.ptr(), io.delta.ptr());
        norm::rms_norm(gpu, h, &w.layers[0].input_norm, t, eps, x)?;
        for (i, (layer, layer_state)) in w.layers.iter().zip(&state.layers).enumerate() {
            let bf16_copy;
            let layer = match &self.dequantized {
                Some(buf) => {
                    bf16_copy = layer.dequantized(gpu, buf)?;
                    &bf16_copy
                }
                None => layer,
            };
            let lora = state.lora.as_deref().map(|l| (l, &l.layers[i]));
            match (&layer.mixer, layer_state) {
                (MixerGpu::GatedDeltaNet(m), LayerStateGpu::GatedDeltaNet(s)) => {
                    gdn_mixer(gpu, m, x, t, s, &self.scratch, lora, delta)?;
                }
                (MixerGpu::FullAttention(m), LayerStateGpu::FullAttention(kv)) => {
                    attention_mixer(gpu, m, x, t, state.pos.ptr(), rope, kv, &self.scratch, lora, delta)?;
                }
                _ => bail!("layer {i}: state and weights disagree on the layer kind"),
            }
            norm::add_rms_norm(gpu, h, delta, &layer.post_attention_norm, t, eps, x)?;
            moe_block(gpu, &layer.moe, x, t, &self.scratch, lora, delta)?;
            let next_norm = w.layers.get(i + 1).map_or(&w.final_norm, |l| &l.input_norm);
            norm::add_rms_norm(gpu, h, delta, next_norm, t, eps, x)?;
        }
        Ok(())
    }

    /// The decode step's layers for the token at `io.ids[0]`, leaving the residual stream in
    /// `io.h` for the lm_head. It stays there from the embedding on: every sub-layer normalises
    /// it in its first projection and adds its output to it in its last (see the module comment).
    /// Graph-capturable.
    fn decode_forward(&self, state: &CudaState) -> Result<()> {
        let (gpu, w, io, eps) = (&self.gpu, &self.weights, &self.io, self.config.rms_norm_eps);
        let h = io.h.ptr();
        embed(gpu, &w.embed_tokens, io.ids.ptr(), 1, h)?;
        for (i, (layer, layer_state)) in w.layers.iter().zip(&state.layers).enumerate() {
            // a LoRA adapter's sites in their fused forms (`ops::lora`; 0: none)
            let (lora_in, lora_out, lora_experts) =
                state.lora.as_ref().map_or((0, 0, 0), |l| l.layers[i].fused_arrays());
            let mixer_out = match (&layer.mixer, layer_state) {
                (MixerGpu::GatedDeltaNet(m), LayerStateGpu::GatedDeltaNet(s)) => MixerOut {
                    w: &m.out_proj,
                    y: gdn_decode(gpu, m, h, &layer.input_norm, eps, s, &self.scratch, lora_in)?,
                    lora: lora_out,
                },
                (MixerGpu::FullAttention(m), LayerStateGpu::FullAttention(kv)) => MixerOut {
                    w: &m.o_proj,
                    lora: lora_out,
                    y: attention_decode(
                        gpu,
                        m,
                        h,
                        &layer.input_norm,
                        eps,
                        state.pos.ptr(),
                        state.text_rope(),
                        kv,
                        &self.scratch,
                        lora_in,
                    )?,
                },
                _ => bail!("layer {i}: state and weights disagree on the layer kind"),
            };
            // out_proj / o_proj (and their residual add) run as the MoE kernel's first phase
            let norm = &layer.post_attention_norm;
            moe_decode(gpu, mixer_out, &layer.moe, h, norm, eps, &self.scratch, lora_experts)?;
        }
        Ok(())
    }

    /// lm_head over `rows` normalised rows starting at row `first` of `io.x`, into `out` (f32 [rows, vocab]).
    pub(crate) fn lm_head(&self, first: usize, rows: usize, out: DevPtr) -> Result<()> {
        let x = self.io.x.ptr() + (first * self.config.hidden_size * 2) as u64;
        linear(&self.gpu, x, &self.weights.lm_head, rows, out)
    }

    /// Row `row` of the residual stream `io.h` (f32 [hidden]): after `forward`, the final layer's
    /// output before the final norm.
    pub(crate) fn main_residual(&self, row: usize) -> DevPtr {
        self.io.h.ptr() + (row * self.config.hidden_size * 4) as u64
    }

    /// i32 [PREFILL_CHUNK] on the device: the token ids `upload_ids` wrote.
    pub(crate) fn ids(&self) -> DevPtr {
        self.io.ids.ptr()
    }

    pub(crate) fn check_room(&self, state: &CudaState, t: usize) -> Result<()> {
        if state.position + t > state.capacity {
            if state.capacity < self.max_seq {
                bail!(
                    "sequence of {} tokens exceeds this compact copy's KV cache of {} tokens (resume it with copy_state)",
                    state.position + t,
                    state.capacity
                );
            }
            bail!(
                "sequence of {} tokens exceeds the KV cache of {} tokens (--max-seq)",
                state.position + t,
                self.max_seq
            );
        }
        Ok(())
    }

    pub(crate) fn upload_ids(&self, tokens: &[u32]) -> Result<()> {
        let vocab = self.config.vocab_size;
        if let Some(bad) = tokens.iter().find(|&&t| t as usize >= vocab) {
            bail!("token id {bad} is out of range: the vocabulary has {vocab} entries");
        }
        let bytes: Vec<u8> = tokens.iter().flat_map(|&t| (t as i32).to_le_bytes()).collect();
        self.gpu.write(self.io.ids.ptr(), &bytes)
    }

    /// One decode step on the device: reads the token id at `io.ids[0]` and writes the next one
    /// back there (the argmax, or the GPU sampler's pick, also appended to `io.history`); see
    /// `StepEnd`. Captured once per state and kind, then replayed.
    fn decode_step_on_device(&self, state: &CudaState, end: StepEnd) -> Result<()> {
        if matches!(end, StepEnd::Screened | StepEnd::ScreenedSampled) {
            self.screen()?; // made before a capture: it allocates and launches
        }
        let key = (state.id, state.lora.as_ref().map_or(0, |l| l.id));
        self.graphs[end as usize].launch(&self.gpu, key, || self.decode_kernels(state, end))
    }

    /// The kernels of one decode step (what the graph holds).
    fn decode_kernels(&self, state: &CudaState, end: StepEnd) -> Result<()> {
        match &state.lora {
            Some(lora) if !self.fuses(lora) => {
                // an adapter the fused kernels do not take: the layer-by-layer forward of one token
                embed(&self.gpu, &self.weights.embed_tokens, self.io.ids.ptr(), 1, self.io.h.ptr())?;
                self.layers_forward(state, 1, state.text_rope())?;
            }
            _ => self.decode_forward(state)?,
        }
        let (gpu, w, io, vocab, eps) =
            (&self.gpu, &self.weights, &self.io, self.config.vocab_size, self.config.rms_norm_eps);
        let (h, logits) = (io.h.ptr(), io.logits.ptr());
        match end {
            StepEnd::Screened => self.screen()?.argmax(gpu, h, &w.final_norm, eps, io.ids.ptr())?,
            StepEnd::Logits => {
                gemv_norm(gpu, h, &w.final_norm, eps, &w.lm_head, logits)?;
                sample::argmax(gpu, logits, vocab, io.partials.ptr(), io.ids.ptr())?;
            }
            StepEnd::Sampled | StepEnd::ScreenedSampled => {
                if end == StepEnd::Sampled {
                    gemv_norm(gpu, h, &w.final_norm, eps, &w.lm_head, logits)?;
                } else {
                    self.screen()?.top_logits(gpu, h, &w.final_norm, eps, io.sampling.ptr(), logits)?;
                }
                let scratch = io.sample_scratch.ptr();
                sample::sample_recording(
                    gpu,
                    logits,
                    vocab,
                    &io.sampling,
                    scratch,
                    io.ids.ptr(),
                    io.history.ptr(),
                    self.max_seq,
                )?;
            }
        }
        sample::advance_position(gpu, state.pos.ptr(), 1)
    }

    /// Device scratch of the GPU sampler (SAMPLE_SCRATCH_BYTES; one draw at a time on the stream).
    pub(crate) fn sample_scratch(&self) -> DevPtr {
        self.io.sample_scratch.ptr()
    }

    /// Makes the lm_head screen now (under a memory budget, at load: `plan_memory`).
    pub(crate) fn make_screen(&self) -> Result<()> {
        self.screen().map(|_| ())
    }

    /// The lm_head screen, made on first use.
    fn screen(&self) -> Result<&LmHeadScreen> {
        if self.screen.get().is_none() {
            let made = LmHeadScreen::new(&self.gpu, &self.weights.lm_head)?;
            let _ = self.screen.set(made);
        }
        Ok(self.screen.get().expect("set above"))
    }

    /// How `decode_greedy` ends its steps.
    fn greedy_end(&self) -> StepEnd {
        if self.screened_lm_head {
            StepEnd::Screened
        } else {
            StepEnd::Logits
        }
    }

    /// How `decode_pick` ends a sampled step.
    fn sampled_end(&self) -> StepEnd {
        if self.screened_lm_head {
            StepEnd::ScreenedSampled
        } else {
            StepEnd::Sampled
        }
    }

    /// How many lm_head rows the last screened step multiplied in bf16 (synchronises); 0
    /// before any screened step.
    pub fn last_screen_candidates(&self) -> Result<u32> {
        self.screen.get().map_or(Ok(0), |s| s.last_candidates(&self.gpu))
    }

    /// Where one greedy decode step's time goes, kernel by kernel (`profile::profile_launches`:
    /// the step's kernels run outside the graph, timed back to back on the GPU).
    pub fn profile_decode(&self, state: &mut CudaState, token: u32) -> Result<Vec<crate::profile::KernelTime>> {
        self.check_room(state, 1)?;
        self.upload_ids(&[token])?;
        if self.greedy_end() == StepEnd::Screened {
            self.screen()?; // made outside the timed launches
        }
        let times = crate::profile::profile_launches(&self.gpu, || self.decode_kernels(state, self.greedy_end()))?;
        state.advance_without_head(1);
        Ok(times)
    }

    /// Where one prefill call of `tokens` (at most one chunk, after what `state` holds) spends its
    /// time, kernel by kernel (cuBLAS calls included), timed back to back on the GPU. For
    /// `solo bench --profile`; `state` advances by the tokens.
    pub fn profile_prefill(&self, state: &mut CudaState, tokens: &[u32]) -> Result<Vec<crate::profile::KernelTime>> {
        ensure!(!tokens.is_empty() && tokens.len() <= PREFILL_CHUNK, "profile_prefill of {} tokens", tokens.len());
        self.check_room(state, tokens.len())?;
        self.upload_ids(tokens)?;
        let times = crate::profile::profile_launches(&self.gpu, || self.forward(state, tokens.len()))?;
        state.position += tokens.len();
        Ok(times)
    }

    /// Greedy decoding of `steps` tokens, entirely on the device (one graph replay per token, one
    /// synchronisation at the end), starting from `first`, or with `None` from the token the
    /// previous step chose. Returns the last chosen token id. For `solo bench`. Each step ends
    /// with the screened lm_head (`screened_lm_head`): the argmax without the logits.
    pub fn decode_greedy(&self, state: &mut CudaState, first: Option<u32>, steps: usize) -> Result<u32> {
        self.check_room(state, steps)?;
        if let Some(first) = first {
            self.upload_ids(&[first])?;
        }
        for _ in 0..steps {
            self.decode_step_on_device(state, self.greedy_end())?;
        }
        state.advance_without_head(steps);
        Ok(self.gpu.download_i32(self.io.ids.ptr(), 1)?[0] as u32)
    }

    /// Sampled decoding of `steps` tokens entirely on the device, like `decode_greedy` but each
    /// step ends with the GPU sampler (`ops::sample::sample`: temperature, top_k in 1..=64,
    /// top_p) instead of the argmax; the chosen ids collect in a device history, downloaded once
    /// at the end (one synchronisation per call). Starts from `first`, or with `None` from the
    /// token the previous step chose. `cfg: Some(c)` sets the parameters and restarts the random
    /// stream, so the draws are the CPU `Sampler::new(c)`'s; `None` keeps the parameters and
    /// continues the stream (for a reply decoded in several calls; parameters never written
    /// mean greedy). Temperature ≤ 0 is greedy.
    /// Returns the `steps` chosen ids; the last one is also the next step's input.
    pub fn decode_sampled(
        &self,
        state: &mut CudaState,
        first: Option<u32>,
        steps: usize,
        cfg: Option<&SamplerConfig>,
    ) -> Result<Vec<u32>> {
        self.check_room(state, steps)?;
        if let Some(cfg) = cfg {
            self.io.sampling.write(&self.gpu, cfg)?;
        }
        if let Some(first) = first {
            self.upload_ids(&[first])?;
        }
        self.gpu.write(self.io.history.ptr(), &0i32.to_le_bytes())?;
        for _ in 0..steps {
            self.decode_step_on_device(state, StepEnd::Sampled)?;
        }
        state.advance_without_head(steps);
        let got = self.gpu.download_i32(self.io.history.ptr(), 1 + steps)?;
        ensure!(got[0] as usize == steps, "GPU sampler recorded {} ids for {steps} steps", got[0]);
        Ok(got[1..].iter().map(|&t| t as u32).collect())
    }

    /// One decode step of `token` ending in the GPU sampler at `sampler`'s settings and draw
    /// number (over the screened top-k logits unless `screened_lm_head` is off), or at
    /// temperature ≤ 0 in `decode_greedy`'s end (`Backend::decode_and_pick`, the server's and
    /// `solo run`'s step): the logits stay on the device, the pick comes back as 4 bytes. Fails
    /// for settings the GPU sampler lacks.
    pub fn decode_pick(&self, state: &mut CudaState, token: u32, sampler: &mut Sampler) -> Result<u32> {
        self.check_room(state, 1)?;
        let end = if sampler.config().temperature > 0.0 {
            self.io.sampling.write_at(&self.gpu, sampler.config(), sampler.draws())?;
            self.sampled_end()
        } else {
            sample::SamplingParamsGpu::encode(sampler.config())?; // the same checks (NaN)
            self.greedy_end()
        };
        self.upload_ids(&[token])?;
        self.decode_step_on_device(state, end)?;
        state.advance_without_head(1);
        let picked = self.gpu.download_i32(self.io.ids.ptr(), 1)?[0] as u32;
        if sampler.config().temperature > 0.0 {
            sampler.skip_draw(); // the device drew it
        }
        Ok(picked)
    }
}

impl Backend for CudaModel {
    type State = CudaState;

    fn config(&self) -> &ModelConfig {
        &self.config
    }

    fn new_state(&self) -> Result<CudaState> {
        match self.spare_states.borrow_mut().pop() {
            Some(mut state) => {
                self.reset(&mut state)?;
                Ok(state)
            }
            None => self.try_new_state(),
        }
    }

    fn release_state(&self, state: CudaState) {
        let mut spare = self.spare_states.borrow_mut();
        if state.capacity == self.max_seq && spare.len() < SPARE_STATES {
            spare.push(state);
        }
    }

    fn snapshot(&self, state: &CudaState) -> Option<CudaState> {
        // (under --gpu-memory, a snapshot leaves the reserve for cuBLAS and graphs alone)
        if self
            .gpu
            .budget_left()
            .is_some_and(|left| left < crate::BUDGET_RESERVE + self.sequence_bytes_at(self.compact_capacity(state)))
        {
            return None;
        }
        self.compact_copy(state).ok()
    }

    fn decode_batch(&self, states: &mut [&mut CudaState], tokens: &[u32]) -> Result<Vec<f32>> {
        ensure!(states.len() == tokens.len(), "{} states for {} tokens", states.len(), tokens.len());
        // the batched step takes up to MAX_TOKENS sequences of bf16 weights, each with its own
        // adapter or none (`batches`); FP8, and batches with other adapters, decode in turn
        let most = crate::multi_token::MAX_TOKENS;
        let mut rows = Vec::new();
        for (states, tokens) in states.chunks_mut(most).zip(tokens.chunks(most)) {
            if self.can_decode_tokens(tokens.len()) && self.batches(states) {
                rows.extend(self.batch_step(states, tokens)?);
            } else {
                for (state, &token) in states.iter_mut().zip(tokens) {
                    rows.extend(self.decode(state, token)?);
                }
            }
        }
        Ok(rows)
    }

    fn decode_batch_and_pick(
        &self,
        states: &mut [&mut CudaState],
        tokens: &[u32],
        samplers: &mut [&mut Sampler],
    ) -> Option<Result<Vec<u32>>> {
        // Settings the GPU sampler lacks: the caller's way (the logits to the host).
        let pickable = samplers.iter().all(|s| sample::SamplingParamsGpu::encode(s.config()).is_ok());
        if !pickable || states.len() != tokens.len() || samplers.len() != tokens.len() {
            return None;
        }
        // Up to 8 sequences of bf16 weights in one batched step (`batches`); else in turns.
        let most = crate::multi_token::MAX_TOKENS;
        let mut picks = Vec::with_capacity(tokens.len());
        let chunks = states.chunks_mut(most).zip(tokens.chunks(most)).zip(samplers.chunks_mut(most));
        for ((states, tokens), samplers) in chunks {
            let picked = if self.can_decode_tokens(tokens.len()) && self.batches(states) {
                self.batch_step_pick(states, tokens, samplers)
            } else {
                let each = states.iter_mut().zip(tokens).zip(samplers.iter_mut());
                each.map(|((st, &t), s)| self.decode_pick(st, t, s)).collect()
            };
            match picked {
                Ok(p) => picks.extend(p),
                Err(e) => return Some(Err(e)),
            }
        }
        Some(Ok(picks))
    }

    fn resume(&self, snapshot: &CudaState) -> Option<CudaState> {
        let spare = self.spare_states.borrow_mut().pop();
        match spare {
            Some(mut state) => match self.copy_into(&mut state, snapshot) {
                Ok(()) => Some(state),
                Err(_) => None,
            },
            None => self.copy_state(snapshot).ok(),
        }
    }

    fn state_bytes(&self, state: &CudaState) -> usize {
        let layers: usize = state
            .layers
            .iter()
            .map(|l| match l {
                LayerStateGpu::GatedDeltaNet(s) => s.conv.bytes + s.recurrent.bytes,
                LayerStateGpu::FullAttention(kv) => kv.keys.bytes + kv.values.bytes,
            })
            .sum();
        layers + state.mtp.as_ref().map_or(0, |m| m.bytes())
    }

    fn prefill_chunk(&self) -> usize {
        PREFILL_CHUNK
    }

    fn can_draft(&self) -> bool {
        self.weights.mtp.is_some()
    }

    fn draft(&self, state: &mut CudaState, next: u32, k: usize, sampler: &mut Sampler) -> Result<Draft> {
        self.mtp_draft(state, next, k, sampler)
    }

    fn verify(&self, state: &mut CudaState, tokens: &[u32]) -> Result<Vec<f32>> {
        self.mtp_verify(state, tokens)
    }

    fn keep_verified(&self, state: &mut CudaState, n: usize) -> Result<()> {
        self.mtp_keep(state, n)
    }

    fn lora_support(&self) -> LoraSupport {
        LoraSupport::All
    }

    fn set_adapter(&self, state: &mut CudaState, adapter: Option<Arc<LoraAdapter>>) -> Result<()> {
        self.drop_released_adapters();
        state.lora = match adapter {
            Some(a) => Some(self.upload_adapter(&a)?),
            None => None,
        };
        Ok(())
    }

    fn position(&self, state: &CudaState) -> usize {
        state.position
    }

    fn prefill(&self, state: &mut CudaState, tokens: &[u32], logits: Logits) -> Result<Vec<f32>> {
        self.prefill_placed(state, tokens, &[], logits)
    }

    fn image_support(&self) -> Result<()> {
        self.vision().map(|_| ())
    }

    fn encode_image(&self, image: &ImagePatches) -> Result<Vec<f32>> {
        self.vision()?.encode(&self.gpu, image)
    }

    fn prefill_with_images(
        &self,
        state: &mut CudaState,
        tokens: &[u32],
        images: &[PromptImage],
        logits: Logits,
    ) -> Result<Vec<f32>> {
        if !images.is_empty() {
            self.image_support()?;
        }
        self.prefill_placed(state, tokens, images, logits)
    }

    fn decode(&self, state: &mut CudaState, token: u32) -> Result<Vec<f32>> {
        self.check_room(state, 1)?;
        self.upload_ids(&[token])?;
        self.decode_step_on_device(state, StepEnd::Logits)?;
        state.advance_without_head(1);
        self.gpu.download_f32(self.io.logits.ptr(), self.config.vocab_size)
    }

    fn decode_and_pick(&self, state: &mut CudaState, token: u32, sampler: &mut Sampler) -> Option<Result<u32>> {
        // Settings the GPU sampler lacks (top_k 0 or above 64) are sampled on the host.
        sample::SamplingParamsGpu::encode(sampler.config()).ok()?;
        Some(self.decode_pick(state, token, sampler))
    }

    fn picked_logits(&self) -> Result<Vec<f32>> {
        // The residual stream of the last step is still in io.h (a screened step formed no
        // logits): the full lm_head over it, as the step's would be.
        let (w, io) = (&self.weights, &self.io);
        gemv_norm(&self.gpu, io.h.ptr(), &w.final_norm, self.config.rms_norm_eps, &w.lm_head, io.logits.ptr())?;
        self.gpu.download_f32(io.logits.ptr(), self.config.vocab_size)
    }
}

impl CudaModel {
    /// A fresh sequence: zero conv/recurrent state, an empty KV cache of `max_seq` tokens.
    pub fn try_new_state(&self) -> Result<CudaState> {
        self.new_state_holding(self.max_seq)
    }

    /// A fresh sequence whose KV caches hold `capacity` positions.
    fn new_state_holding(&self, capacity: usize) -> Result<CudaState> {
        let layers = self
            .weights
            .layers
            .iter()
            .map(|l| match l.mixer {
                MixerGpu::GatedDeltaNet(_) => Ok(LayerStateGpu::GatedDeltaNet(GdnStateGpu::new(&self.gpu)?)),
                MixerGpu::FullAttention(_) => Ok(LayerStateGpu::FullAttention(KvCacheGpu::new(&self.gpu, capacity)?)),
            })
            .collect::<Result<Vec<_>>>()?;
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mtp = match &self.weights.mtp {
            Some(_) => Some(MtpStateGpu::new(&self.gpu, capacity, self.config.hidden_size)?),
            None => None,
        };
        let pos = self.gpu.alloc(8)?; // position 0, rotary delta 0
        Ok(CudaState { id, position: 0, rope_delta: 0, capacity, pos, layers, mtp, verify: None, lora: None })
    }

    /// An independent copy of `state` on the device that can go on to `max_seq` tokens (a
    /// sequence resumed from the prefix cache).
    pub fn copy_state(&self, state: &CudaState) -> Result<CudaState> {
        self.copy_state_holding(state, self.max_seq)
    }

    /// A copy of `state` whose KV caches hold only its positions, rounded up to 256 (what the
    /// prefix cache keeps: at a 262,144-token `max_seq` a full copy is 5.4 GB whatever the
    /// prompt). It cannot take more tokens than it holds; `copy_state` of it can.
    pub fn compact_copy(&self, state: &CudaState) -> Result<CudaState> {
        self.copy_state_holding(state, self.compact_capacity(state))
    }

    /// The positions `compact_copy` of `state` holds.
    fn compact_capacity(&self, state: &CudaState) -> usize {
        state.position.max(1).next_multiple_of(256).min(self.max_seq)
    }

    fn copy_state_holding(&self, state: &CudaState, capacity: usize) -> Result<CudaState> {
        let mut copy = self.new_state_holding(capacity)?;
        self.copy_into(&mut copy, state)?;
        Ok(copy)
    }

    /// `state`'s contents into `dst`, whose caches hold at least `state.position` positions; its
    /// buffers (and so the decode graphs captured for it) stay.
    fn copy_into(&self, dst: &mut CudaState, state: &CudaState) -> Result<()> {
        ensure!(dst.capacity >= state.position, "a copy of {} positions into {}", state.position, dst.capacity);
        for (d, s) in dst.layers.iter().zip(&state.layers) {
            match (d, s) {
                (LayerStateGpu::GatedDeltaNet(d), LayerStateGpu::GatedDeltaNet(s)) => d.copy_from(&self.gpu, s)?,
                (LayerStateGpu::FullAttention(d), LayerStateGpu::FullAttention(s)) => {
                    d.copy_from(&self.gpu, s, state.position)?
                }
                _ => bail!("state layers disagree"),
            }
        }
        // no host wait: a snapshot stays off the prefill's path
        self.gpu.set_i32(dst.pos.ptr(), state.position as i32)?;
        self.gpu.set_i32(dst.rope_delta_ptr(), state.rope_delta as i32)?;
        dst.rope_delta = state.rope_delta;
        dst.mtp = match (&dst.mtp, &state.mtp) {
            (Some(d), Some(s)) => Some(d.copy_from(&self.gpu, s, self.config.hidden_size)?),
            _ => None,
        };
        dst.position = state.position;
        dst.verify = None;
        dst.lora = state.lora.clone();
        Ok(())
    }

    /// Empties a sequence without reallocating it (its buffers, and so a captured decode graph,
    /// stay valid): zero conv and recurrent state, position 0. Old KV entries are never read.
    pub fn reset(&self, state: &mut CudaState) -> Result<()> {
        for layer in &state.layers {
            if let LayerStateGpu::GatedDeltaNet(s) = layer {
                s.reset(&self.gpu)?;
            }
        }
        self.gpu.set_i32(state.pos.ptr(), 0)?;
        self.gpu.set_i32(state.rope_delta_ptr(), 0)?;
        state.position = 0;
        state.rope_delta = 0;
        state.lora = None;
        if let Some(m) = &mut state.mtp {
            m.reset();
        }
        Ok(())
    }

    /// Device bytes one sequence of `max_seq` tokens holds (`try_new_state`): its KV caches, the
    /// MTP head's, and the GDN states.
    pub fn sequence_bytes(&self) -> usize {
        self.sequence_bytes_at(self.max_seq)
    }

    /// `sequence_bytes` for sequences of `max_seq` tokens.
    pub fn sequence_bytes_at(&self, max_seq: usize) -> usize {
        let kv = KvCacheGpu::bytes_for(max_seq);
        let per_layer = |l: &crate::weights::LayerGpu| match l.mixer {
            MixerGpu::GatedDeltaNet(_) => GdnStateGpu::CONV_BYTES + GdnStateGpu::RECURRENT_BYTES,
            MixerGpu::FullAttention(_) => kv,
        };
        self.weights.layers.iter().map(per_layer).sum::<usize>() + self.weights.mtp.as_ref().map_or(0, |_| kv)
    }

    /// Bytes of GPU memory in use on the device (all processes), and the card's total.
    pub fn memory_used(&self) -> Result<(usize, usize)> {
        let (free, total) = self.gpu.ctx.mem_get_info().map_err(|e| anyhow!("{e:?}"))?;
        Ok((total - free, total))
    }
}

#[cfg(test)]
mod tests;
