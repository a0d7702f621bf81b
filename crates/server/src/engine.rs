//! The engine thread: it alone owns the backend (and so the GPU, once there is one). HTTP handlers
//! hand it jobs through a bounded queue and read each job's events from the job's own channel.
//!
//! Up to `max_batch` jobs run at once, admitted in arrival order: each step gives every running
//! sequence one step of its own (a piece of its prompt's prefill, or one token: `generate`), so a
//! new request starts at the next step and a long prompt holds the others up by one prefill piece
//! at a time. A sequence that finishes, times out or whose client left (its event receiver was
//! dropped) leaves at its next step. A job the backend has no memory for waits until a running
//! one leaves (alone, it fails with a 500). A panic inside a step is caught: that job fails with a
//! 500 and the engine carries on with an empty prefix cache.

use crate::error::ApiError;
use crate::generate::{Progress, Sequence, Start};
use crate::images::PromptImagePatches;
use crate::metrics::Metrics;
use crate::prefix_cache::PrefixCache;
use anyhow::Result;
use solo_model::lora::{LoraAdapter, LoraSupport};
use solo_model::sampler::Sampler;
use solo_model::sampling::Extras;
use solo_model::{Backend, ModelConfig};
use solo_text::Tokenizer;
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;

/// How to pick tokens (OpenAI's sampling fields, resolved against the checkpoint's defaults).
#[derive(Clone, Debug, PartialEq)]
pub struct Sampling {
    /// 0 = greedy.
    pub temperature: f32,
    /// 0 = off.
    pub top_k: usize,
    pub top_p: f32,
    /// 0 = off.
    pub min_p: f32,
    pub presence_penalty: f32,
    pub frequency_penalty: f32,
    pub logit_bias: Vec<(u32, f32)>,
    pub seed: u64,
}

impl Sampling {
    /// What this asks for beyond temperature, top-k and top-p (`solo_model::sampling::is_plain`
    /// decides with the job's logprobs and forced tokens).
    pub fn extras(&self) -> Extras {
        Extras {
            min_p: self.min_p,
            presence_penalty: self.presence_penalty,
            frequency_penalty: self.frequency_penalty,
            logit_bias: !self.logit_bias.is_empty(),
            ..Extras::default()
        }
    }
}

/// Tokens written into the output instead of sampled: how `tool_choice` `required` or a named
/// function is enforced (the call's opening tags, after the reasoning).
#[derive(Clone, Debug)]
pub struct Forced {
    /// Force once this token has been generated (`</think>`); `None`: from the first token.
    pub after: Option<u32>,
    pub tokens: Vec<u32>,
}

/// One generation request.
pub struct Job {
    pub prompt: Vec<u32>,
    /// Prompt lengths worth a snapshot besides the regular interval: message boundaries. The
    /// end of the prompt and the end of the reply always get one.
    pub snapshot_points: Vec<usize>,
    pub max_tokens: usize,
    pub sampling: Sampling,
    /// Alternatives per token for logprobs; `None`: no logprobs.
    pub logprobs: Option<usize>,
    pub stop: Vec<String>,
    pub forced: Option<Forced>,
    pub arrived: Instant,
    pub deadline: Instant,
    pub events: mpsc::UnboundedSender<Event>,
    /// The LoRA adapter the request's `model` picked; `None`: the base model.
    pub adapter: Option<Arc<LoraAdapter>>,
    /// The prompt's images (their placeholders in `prompt` carry their content keys,
    /// `crate::images::cache_keys`), for the vision tower; empty for a text prompt.
    pub images: Vec<PromptImagePatches>,
    /// `<|image_pad|>`, what the backend sees at each image key.
    pub image_token: u32,
}

impl Job {
    /// The adapter's id (the prefix cache's key beside the tokens); 0 without one.
    pub fn lora_id(&self) -> u64 {
        self.adapter.as_ref().map_or(0, |a| a.id)
    }
}

#[derive(Debug)]
pub enum Event {
    /// The prompt is in; tokens follow.
    Started {
        prompt_tokens: usize,
        cached_tokens: usize,
    },
    /// New output text (possibly empty while a stop string is undecided) and the logprob of
    /// the token that produced it.
    Text {
        text: String,
        logprob: Option<TokenLogprob>,
    },
    Done {
        finish: Finish,
        completion_tokens: usize,
    },
    Error(ApiError),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finish {
    /// A stop token or stop string.
    Stop,
    /// `max_tokens`, or the request's time ran out.
    Length,
}

#[derive(Clone, Debug)]
pub struct TokenLogprob {
    pub token: u32,
    pub logprob: f32,
    /// Most likely alternatives, best first.
    pub top: Vec<(u32, f32)>,
}

/// The engine's fixed settings.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Token ids that end a reply.
    pub stop_ids: Vec<u32>,
    /// Longest prefill call, in tokens; `None`: the backend's own (`Backend::prefill_chunk`).
    pub prefill_chunk: Option<usize>,
    /// MTP drafts per decode step when the backend can draft (`Backend::can_draft`); 0: off.
    pub speculate: usize,
    /// Most sequences running at once.
    pub max_batch: usize,
    /// Feed the running sequences' plainly decoded tokens to the backend together, one batched
    /// step a step (`feed_together`), instead of one decode step each.
    pub batch_decode: bool,
    /// A prompt snapshot every this many tokens (`None`: `generate::snapshot_interval`'s default).
    pub snapshot_interval: Option<usize>,
    pub cache_entries: usize,
    pub cache_bytes: usize,
}

/// The handlers' side of the engine.
#[derive(Clone)]
pub struct EngineHandle {
    jobs: mpsc::Sender<Job>,
    metrics: Arc<Metrics>,
}

impl EngineHandle {
    /// Queues a job; 503 with `Retry-After` when the queue is full.
    pub fn submit(&self, job: Job) -> Result<(), ApiError> {
        // Count first so that the engine's decrement can never go below zero.
        self.metrics.queue_depth.fetch_add(1, Relaxed);
        match self.jobs.try_send(job) {
            Ok(()) => Ok(()),
            Err(err) => {
                self.metrics.queue_depth.fetch_sub(1, Relaxed);
                Err(match err {
                    mpsc::error::TrySendError::Full(_) => {
                        ApiError::overloaded("The server is busy: its request queue is full. Retry shortly.", 1)
                    }
                    mpsc::error::TrySendError::Closed(_) => ApiError::internal(&"the engine thread has stopped"),
                })
            }
        }
    }
}

/// What a job runs with.
pub struct Context<'a, B: Backend> {
    pub backend: &'a B,
    pub tokenizer: &'a Tokenizer,
    pub config: &'a EngineConfig,
    pub metrics: &'a Metrics,
}

/// A started engine.
pub struct Spawned {
    pub engine: EngineHandle,
    /// The model's config.
    pub model: ModelConfig,
    /// Whether the backend takes images (`Backend::image_support`; the reason if not).
    pub image_support: Result<(), String>,
    /// What the backend's LoRA adapters may adapt (`Backend::lora_support`).
    pub lora_support: LoraSupport,
    /// The engine thread: it ends, dropping the backend, once every `EngineHandle` is gone and
    /// the running jobs are done.
    pub thread: std::thread::JoinHandle<()>,
}

/// Starts the engine thread: `load` builds the backend there (so it need not be `Send`), and
/// this returns once it has.
pub fn spawn<B, F>(
    load: F,
    tokenizer: Arc<Tokenizer>,
    config: EngineConfig,
    metrics: Arc<Metrics>,
    max_queue: usize,
) -> Result<Spawned>
where
    B: Backend + 'static,
    F: FnOnce() -> Result<B> + Send + 'static,
{
    let (jobs, mut queue) = mpsc::channel::<Job>(max_queue.max(1));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(ModelConfig, Result<(), String>, LoraSupport)>>();
    let engine_metrics = metrics.clone();
    let thread = std::thread::Builder::new().name("solo-engine".into()).spawn(move || {
        let backend = match load() {
            Ok(b) => b,
            Err(e) => {
                let _ = ready_tx.send(Err(e));
                return;
            }
        };
        let images = backend.image_support().map_err(|e| format!("{e:#}"));
        let _ = ready_tx.send(Ok((backend.config().clone(), images, backend.lora_support())));
        let metrics = engine_metrics;
        let mut cache = PrefixCache::new(config.cache_entries, config.cache_bytes);
        let cx = Context { backend: &backend, tokenizer: &tokenizer, config: &config, metrics: &metrics };
        schedule(&cx, &mut cache, &mut queue);
    })?;
    let (model, image_support, lora_support) =
        ready_rx.recv().map_err(|_| anyhow::anyhow!("the engine thread died while loading the model"))??;
    Ok(Spawned { engine: EngineHandle { jobs, metrics }, model, image_support, lora_support, thread })
}

/// The engine's loop: admit, step every running sequence once, repeat; returns when the job
/// channel closes and nothing is left.
fn schedule<B: Backend>(cx: &Context<B>, cache: &mut PrefixCache<B::State>, queue: &mut mpsc::Receiver<Job>) {
    let metrics = cx.metrics;
    let max_batch = cx.config.max_batch.max(1);
    // Each with a serial number; `last` is the one the backend last ran a step for.
    let mut running: Vec<(u64, Box<Sequence<B>>)> = Vec::new();
    let (mut serial, mut last) = (0u64, None);
    let mut waiting: VecDeque<Job> = VecDeque::new();
    let mut open = true;
    loop {
        // Jobs leave the channel (so its bound keeps answering 503) only when there is a slot.
        if open && running.is_empty() && waiting.is_empty() {
            match queue.blocking_recv() {
                Some(job) => waiting.push_back(job),
                None => open = false,
            }
        }
        while open && running.len() + waiting.len() < max_batch {
            match queue.try_recv() {
                Ok(job) => waiting.push_back(job),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => open = false,
            }
        }
        while running.len() < max_batch {
            let Some(job) = waiting.pop_front() else { break };
            metrics.queue_depth.fetch_sub(1, Relaxed);
            match catch_unwind(AssertUnwindSafe(|| Sequence::start(cx, cache, job))) {
                Ok(Start::Running(seq)) => {
                    serial += 1;
                    running.push((serial, seq));
                }
                Ok(Start::Abandoned) => {}
                Ok(Start::NoRoom(job, _)) if running.is_empty() && !cache.is_empty() => {
                    // the prefix cache's snapshots hold device memory: give it back, try again
                    cache.clear();
                    metrics.queue_depth.fetch_add(1, Relaxed);
                    waiting.push_front(*job);
                }
                Ok(Start::NoRoom(job, e)) if running.is_empty() => {
                    // nothing else holds memory: this request cannot fit (--gpu-memory, --max-seq)
                    let message = format!("Not enough GPU memory for this request: {e:#}");
                    let _ = job.events.send(Event::Error(ApiError::overloaded(message, 5)));
                }
                Ok(Start::NoRoom(job, _)) => {
                    metrics.queue_depth.fetch_add(1, Relaxed);
                    waiting.push_front(*job); // again once a running sequence has left
                    break;
                }
                Err(_) => cache.clear(),
            }
        }
        if running.is_empty() {
            if !open && waiting.is_empty() {
                return;
            }
            continue;
        }
        metrics.running.store(running.len() as i64, Relaxed);
        metrics.batch_size.observe(running.len() as f64);
        let step_start = Instant::now();
        // Sequences whose token waits to be fed with the others' (`--batch-decode`), by serial.
        let batch = cx.config.batch_decode && running.len() > 1;
        let mut feeds: Vec<(u64, u32)> = Vec::new();
        let finished: Vec<_> = running
            .extract_if(.., |(id, seq)| {
                let untouched = last == Some(*id);
                last = Some(*id);
                !step_one(cx, cache, seq, untouched, batch, *id, &mut feeds)
            })
            .collect();
        // Their states go back to the backend, which may keep them for the next requests.
        for (_, seq) in finished {
            cx.backend.release_state(seq.into_state());
        }
        metrics.running.store(running.len() as i64, Relaxed); // the finished ones have left
        if !feeds.is_empty() {
            last = None; // the backend ran several sequences: no pick is left to read back
            feed_together(cx, &mut running, &feeds);
        }
        metrics.step_time.observe(step_start.elapsed().as_secs_f64());
        metrics.running.store(running.len() as i64, Relaxed);
        metrics.cache_entries.store(cache.len() as u64, Relaxed);
        metrics.cache_bytes.store(cache.bytes() as u64, Relaxed);
    }
}

/// One engine step of `seq` (serial `id`): whether it goes on running. A token it leaves to be
/// fed with the others' goes to `feeds`; a failure or a panic is reported to its client.
fn step_one<'t, B: Backend>(
    cx: &Context<'t, B>,
    cache: &mut PrefixCache<B::State>,
    seq: &mut Sequence<'t, B>,
    untouched: bool,
    batch: bool,
    id: u64,
    feeds: &mut Vec<(u64, u32)>,
) -> bool {
    match catch_unwind(AssertUnwindSafe(|| seq.step(cx, cache, untouched, batch))) {
        Ok(Ok(Progress::Running)) => return true,
        Ok(Ok(Progress::Feed(token))) => {
            feeds.push((id, token));
            return true;
        }
        Ok(Ok(Progress::Done)) => {}
        Ok(Err(e)) => {
            let _ = seq.job().events.send(Event::Error(ApiError::internal(&e)));
        }
        Err(_) => {
            // The panic message went to stderr; the cache may hold a half-made entry.
            cache.clear();
            let _ = seq.job().events.send(Event::Error(ApiError::internal(&"the engine panicked during a request")));
        }
    }
    false
}

/// One batched backend step for the sequences in `feeds` (serial, token), in `running`'s
/// order: `Backend::decode_batch_and_pick` when every one of them lets the backend pick (each
/// gets its next token), else `Backend::decode_batch` (each gets its row of logits). If it
/// fails, each of them gets the error and leaves.
fn feed_together<B: Backend>(cx: &Context<B>, running: &mut Vec<(u64, Box<Sequence<B>>)>, feeds: &[(u64, u32)]) {
    cx.metrics.batched_decode.observe(feeds.len() as f64);
    let tokens: Vec<u32> = feeds.iter().map(|f| f.1).collect();
    let fed = |id: &u64| feeds.iter().any(|f| f.0 == *id);
    let picked = {
        let (mut states, mut samplers): (Vec<&mut B::State>, Vec<Option<&mut Sampler>>) =
            running.iter_mut().filter(|(id, _)| fed(id)).map(|(_, s)| s.state_and_picker()).unzip();
        match samplers.iter_mut().map(|s| s.as_deref_mut()).collect::<Option<Vec<&mut Sampler>>>() {
            Some(mut samplers) => {
                catch_unwind(AssertUnwindSafe(|| cx.backend.decode_batch_and_pick(&mut states, &tokens, &mut samplers)))
            }
            None => Ok(None),
        }
    };
    let outcome = match picked {
        Ok(Some(Ok(picks))) => {
            let seqs = running.iter_mut().filter(|(id, _)| fed(id));
            for (((_, seq), &next), &token) in seqs.zip(&picks).zip(&tokens) {
                seq.fed_picked(token, next);
            }
            return;
        }
        Ok(Some(Err(e))) => Ok(Err(e)),
        Err(panic) => Err(panic),
        Ok(None) => {
            let mut states: Vec<&mut B::State> =
                running.iter_mut().filter(|(id, _)| fed(id)).map(|(_, s)| s.state_mut()).collect();
            catch_unwind(AssertUnwindSafe(|| cx.backend.decode_batch(&mut states, &tokens)))
        }
    };
    let failure = match outcome {
        Ok(Ok(rows)) => {
            let vocab = cx.backend.config().vocab_size;
            let seqs = running.iter_mut().filter(|(id, _)| fed(id));
            for (((_, seq), row), &token) in seqs.zip(rows.chunks(vocab)).zip(&tokens) {
                seq.fed(token, row.to_vec());
            }
            return;
        }
        Ok(Err(e)) => ApiError::internal(&e),
        Err(_) => ApiError::internal(&"the engine panicked during a request"),
    };
    running.retain(|(id, seq)| {
        if fed(id) {
            let _ = seq.job().events.send(Event::Error(failure.clone()));
        }
        !fed(id)
    });
}
