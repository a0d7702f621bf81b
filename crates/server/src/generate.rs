//! One request on the engine thread, as a sequence the scheduler (`engine`) steps: resume from
//! the prefix cache, prefill the rest of the prompt one piece per step (taking snapshots on the
//! way), then one token per step: sample, detokenise and check stop strings, until a stop,
//! `max_tokens`, the deadline or the client's departure; with an MTP head, several tokens per
//! decode step (speculative decoding). A sequence's tokens do not depend on what else runs: its
//! state, sampler and stream are its own.

use crate::engine::{Context, Event, Finish, Job, Sampling, TokenLogprob};
use crate::error::ApiError;
use crate::prefix_cache::PrefixCache;
use crate::stop::StopMatcher;
use anyhow::Result;
use solo_model::sampler::{self, Sampler, SamplerConfig};
use solo_model::sampling::{self, Extras};
use solo_model::speculative;
use solo_model::{Backend, Logits, PromptImage};
use solo_text::StreamDecoder;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

/// What a step left the sequence as.
#[derive(Debug, PartialEq, Eq)]
pub enum Progress {
    Running,
    /// The token was drawn (and sent); it waits to be fed to the backend together with the
    /// other running sequences' (`Sequence::fed`).
    Feed(u32),
    /// Finished, failed to the client, or abandoned: the scheduler drops it.
    Done,
}

/// How `Sequence::start` went.
pub enum Start<'t, B: Backend> {
    Running(Box<Sequence<'t, B>>),
    /// The client left or the deadline passed before anything ran (already answered).
    Abandoned,
    /// The backend had no memory for another sequence: the job, to retry once one finishes.
    NoRoom(Box<Job>, anyhow::Error),
}

/// One request and everything its token loop keeps.
pub struct Sequence<'t, B: Backend> {
    job: Job,
    state: B::State,
    /// Where the prompt's remaining prefill calls end; `pos` is how far it is prefilled.
    cuts: VecDeque<usize>,
    /// The prompt's images through the vision tower (those the cached prefix does not hold
    /// whole), once its first piece is prefilled.
    encoded: Option<Vec<PromptImage>>,
    pos: usize,
    cached: usize,
    started: bool,
    /// The row the next token is drawn from (stale while `logits_stale`: the backend picked).
    logits: Vec<f32>,
    logits_stale: bool,
    sampler: Sampler,
    seen: HashMap<u32, u32>,
    forced: VecDeque<u32>,
    forcing_armed: bool,
    text: StreamDecoder<'t>,
    stops: StopMatcher,
    /// Generated tokens that are in `state`.
    fed: Vec<u32>,
    generated: usize,
    first_token: Option<Instant>,
    /// With only temperature, top-k and top-p to apply (and no tokens to force), the backend
    /// picks each next token itself where it can (`decode_and_pick`: the logits stay on the GPU);
    /// the token it picked waits in `picked`.
    plain: bool,
    picked: Option<u32>,
    /// Speculative decoding (`solo_model::speculative`) where only temperature, top-k and top-p
    /// shape the draw (logprobs are read off the target's rows): drafts per round, and a round's
    /// tokens waiting with the row each was drawn from and whether it is already in `state`
    /// (all but the last).
    speculate: usize,
    ahead: VecDeque<(u32, Vec<f32>, bool)>,
    /// Whether the backend ran nothing for another sequence since this one's previous step: only
    /// then does `Backend::picked_logits` still hold the logits of its last pick.
    backend_untouched: bool,
    /// The whole prompt is to be kept in the prefix cache: done once the first token is out (a
    /// snapshot copies the state, which would delay the first token), while the state and
    /// `logits` are still the prompt's (before the first token is fed).
    keep_prompt: bool,
}

impl<'t, B: Backend> Sequence<'t, B> {
    /// Resumes `job` from the longest cached prefix of its prompt, or a fresh state.
    pub fn start(cx: &Context<'t, B>, cache: &mut PrefixCache<B::State>, job: Job) -> Start<'t, B> {
        if abandoned_before_generation(cx, &job) {
            return Start::Abandoned;
        }
        cx.metrics.queue_wait.observe(job.arrived.elapsed().as_secs_f64());
        let prompt = &job.prompt;
        // A cached snapshot carries its adapter; a fresh state is given the job's.
        let resumed = cache
            .longest_prefix(job.lora_id(), prompt)
            .and_then(|hit| Some((cx.backend.resume(&hit.state)?, hit.logits.clone(), hit.tokens.len())));
        let (state, logits, cached) = match resumed {
            Some(resumed) => resumed,
            None => match cx.backend.new_state() {
                Ok(mut state) => {
                    if let Err(e) = cx.backend.set_adapter(&mut state, job.adapter.clone()) {
                        cx.backend.release_state(state);
                        let _ = job.events.send(Event::Error(ApiError::invalid(format!("{e:#}"))));
                        return Start::Abandoned;
                    }
                    (state, Vec::new(), 0)
                }
                Err(e) => return Start::NoRoom(Box::new(job), e),
            },
        };
        let metrics = cx.metrics;
        metrics.prompt_tokens.fetch_add(prompt.len() as u64, Relaxed);
        metrics.cached_prompt_tokens.fetch_add(cached as u64, Relaxed);
        let counter = if cached > 0 { &metrics.cache_hits } else { &metrics.cache_misses };
        counter.fetch_add(1, Relaxed);

        let (interval, chunk) = (snapshot_interval(cx), prefill_chunk(cx));
        let cuts = prefill_cuts(cached, prompt.len(), &job.snapshot_points, interval, chunk).into();
        let sampler = Sampler::new(SamplerConfig {
            temperature: job.sampling.temperature,
            top_k: job.sampling.top_k,
            top_p: job.sampling.top_p,
            seed: job.sampling.seed,
        });
        let forced = match &job.forced {
            Some(f) if f.after.is_none() => f.tokens.iter().copied().collect(),
            _ => VecDeque::new(),
        };
        let extras =
            Extras { logprobs: job.logprobs.is_some(), forced_tokens: job.forced.is_some(), ..job.sampling.extras() };
        let can_speculate = sampling::is_plain(&Extras { logprobs: false, ..extras }) && cx.backend.can_draft();
        let speculate = if can_speculate { cx.config.speculate } else { 0 };
        Start::Running(Box::new(Sequence {
            forcing_armed: job.forced.as_ref().is_some_and(|f| f.after.is_some()),
            stops: StopMatcher::new(job.stop.clone()),
            plain: sampling::is_plain(&extras),
            job,
            state,
            cuts,
            encoded: None,
            pos: cached,
            cached,
            started: false,
            logits,
            logits_stale: false,
            sampler,
            seen: HashMap::new(),
            forced,
            text: cx.tokenizer.stream_decoder(true),
            fed: Vec::new(),
            generated: 0,
            first_token: None,
            picked: None,
            speculate,
            ahead: VecDeque::new(),
            backend_untouched: false,
            keep_prompt: false,
        }))
    }

    /// The next piece of the prompt, or the next token and the decode step after it.
    /// `backend_untouched`: the engine's previous step was this sequence's.
    pub fn step(
        &mut self,
        cx: &Context<'t, B>,
        cache: &mut PrefixCache<B::State>,
        backend_untouched: bool,
        batch: bool,
    ) -> Result<Progress> {
        self.backend_untouched = backend_untouched;
        if let Some(end) = self.cuts.pop_front() {
            if abandoned_before_generation(cx, &self.job) {
                return Ok(Progress::Done);
            }
            if !self.job.images.is_empty() && self.encoded.is_none() {
                self.encoded = Some(encode_images(cx, &self.job, self.cached)?);
            }
            let prompt = &self.job.prompt;
            let prefill_start = Instant::now();
            // only the prompt's last piece needs logits: the others go to the device without a wait
            let rows = if end == prompt.len() { Logits::Last } else { Logits::None };
            self.logits = match &self.encoded {
                None => cx.backend.prefill(&mut self.state, &prompt[self.pos..end], rows)?,
                Some(images) => {
                    let tokens = crate::images::backend_tokens(&prompt[self.pos..end], self.job.image_token);
                    cx.backend.prefill_with_images(&mut self.state, &tokens, images, rows)?
                }
            };
            cx.metrics.prefill_time.observe(prefill_start.elapsed().as_secs_f64());
            self.pos = end;
            let interval = snapshot_interval(cx);
            let wanted = end == prompt.len() || end % interval == 0 || self.job.snapshot_points.contains(&end);
            if wanted && !cache.contains(self.job.lora_id(), &prompt[..end]) {
                if end == prompt.len() {
                    self.keep_prompt = true;
                } else {
                    keep(cx, cache, self.job.lora_id(), prompt[..end].to_vec(), &self.state, &self.logits);
                }
            }
            if !self.cuts.is_empty() {
                return Ok(Progress::Running);
            }
        }
        if !self.started {
            self.started = true;
            let _ = self
                .job
                .events
                .send(Event::Started { prompt_tokens: self.job.prompt.len(), cached_tokens: self.cached });
        }
        self.token(cx, cache, batch)
    }

    /// The state a batched decode step feeds (`Progress::Feed`).
    pub fn state_mut(&mut self) -> &mut B::State {
        &mut self.state
    }

    /// The state, and the sampler the backend may pick the next token with itself (`None`:
    /// the draw needs the logits on the host: logprobs, penalties, forced tokens).
    pub fn state_and_picker(&mut self) -> (&mut B::State, Option<&mut Sampler>) {
        (&mut self.state, self.plain.then_some(&mut self.sampler))
    }

    /// After `Progress::Feed(token)`: the batched step fed `token`, and `logits` follow it.
    pub fn fed(&mut self, token: u32, logits: Vec<f32>) {
        self.logits = logits;
        self.logits_stale = false;
        self.fed.push(token);
    }

    /// After `Progress::Feed(token)`: the batched step fed `token` and picked `next` with this
    /// sequence's sampler (`Backend::decode_batch_and_pick`). The logits stayed on the device
    /// and are not kept: the reply's prefix-cache entry is dropped, as after any other
    /// sequence's step.
    pub fn fed_picked(&mut self, token: u32, next: u32) {
        self.picked = Some(next);
        self.logits_stale = true;
        self.backend_untouched = false;
        self.fed.push(token);
    }

    /// One token: pick it, send its text, and stop or feed it to the backend (with `batch`, a
    /// plain decode step is left to the scheduler: `Progress::Feed`).
    fn token(&mut self, cx: &Context<'t, B>, cache: &mut PrefixCache<B::State>, batch: bool) -> Result<Progress> {
        let (job, metrics) = (&self.job, cx.metrics);
        if job.events.is_closed() {
            metrics.cancelled.fetch_add(1, Relaxed);
            metrics.completion_tokens.fetch_add(self.generated as u64, Relaxed);
            return Ok(Progress::Done);
        }
        if Instant::now() >= job.deadline {
            metrics.timeouts.fetch_add(1, Relaxed);
            return self.finish(cx, cache, Finish::Length, false);
        }
        let token = if let Some(t) = self.forced.pop_front().or_else(|| self.picked.take()) {
            t
        } else if let Some((t, row, in_state)) = self.ahead.pop_front() {
            self.logits = row;
            if in_state {
                self.fed.push(t);
            }
            t
        } else {
            sample(&mut self.sampler, &self.logits, &job.sampling, &self.seen)
        };
        let logprob = job.logprobs.map(|top| {
            let (logprob, top) = sampler::logprobs(&self.logits, token, top);
            TokenLogprob { token, logprob, top }
        });
        self.generated += 1;
        *self.seen.entry(token).or_default() += 1;
        if self.first_token.is_none() {
            let now = Instant::now();
            metrics.ttft.observe((now - job.arrived).as_secs_f64());
            self.first_token = Some(now);
        }
        if cx.config.stop_ids.contains(&token) {
            if std::mem::take(&mut self.keep_prompt) {
                keep(cx, cache, job.lora_id(), job.prompt.clone(), &self.state, &self.logits);
                // the prompt's, while the state is
            }
            return self.finish(cx, cache, Finish::Stop, false);
        }
        if self.forcing_armed && job.forced.as_ref().is_some_and(|f| f.after == Some(token)) {
            self.forcing_armed = false;
            self.forced.extend(job.forced.iter().flat_map(|f| f.tokens.iter().copied()));
        }
        let piece = self.text.push(token)?.unwrap_or_default();
        let (out, hit) = self.stops.push(&piece);
        if !out.is_empty() || logprob.is_some() {
            let _ = job.events.send(Event::Text { text: out, logprob });
        }
        if std::mem::take(&mut self.keep_prompt) {
            keep(cx, cache, job.lora_id(), job.prompt.clone(), &self.state, &self.logits);
            // the prompt's, while the state is
        }
        if hit {
            return self.finish(cx, cache, Finish::Stop, true);
        }
        if self.generated >= job.max_tokens {
            return self.finish(cx, cache, Finish::Length, false);
        }
        if !self.ahead.is_empty() {
            return Ok(Progress::Running); // `token` is in the state already
        }
        if self.speculate > 0 {
            let round = speculative::round(cx.backend, &mut self.state, token, self.speculate, &mut self.sampler)?;
            metrics.draft_tokens.fetch_add(round.drafted as u64, Relaxed);
            metrics.accepted_tokens.fetch_add(round.accepted as u64, Relaxed);
            metrics.accepted_length.observe((round.accepted + 1) as f64);
            let vocab = cx.backend.config().vocab_size;
            let n = round.tokens.len();
            for (i, (&t, row)) in round.tokens.iter().zip(round.logits.chunks(vocab)).enumerate() {
                self.ahead.push_back((t, row.to_vec(), i + 1 < n));
            }
            self.fed.push(token);
            self.logits_stale = false;
            return Ok(Progress::Running);
        }
        if batch {
            return Ok(Progress::Feed(token));
        }
        match self.plain.then(|| cx.backend.decode_and_pick(&mut self.state, token, &mut self.sampler)).flatten() {
            Some(next) => self.picked = Some(next?),
            None => self.logits = cx.backend.decode(&mut self.state, token)?,
        }
        self.logits_stale = self.picked.is_some();
        self.fed.push(token);
        Ok(Progress::Running)
    }

    /// The end of the reply: held text, the cache entry of the whole sequence, the metrics.
    fn finish(
        &mut self,
        cx: &Context<'t, B>,
        cache: &mut PrefixCache<B::State>,
        mut finish: Finish,
        stopped_by_string: bool,
    ) -> Result<Progress> {
        let job = &self.job;
        if !stopped_by_string {
            // Bytes of a character cut off by the end, and text held for an undecided stop string.
            let (mut tail, hit) = self.stops.push(&self.text.flush()?);
            if hit {
                finish = Finish::Stop;
            } else {
                tail += &self.stops.finish();
            }
            if !tail.is_empty() {
                let _ = job.events.send(Event::Text { text: tail, logprob: None });
            }
        }
        // Accepted drafts not emitted (a stop came first) are in the state all the same; the row
        // after them is the last one's.
        if let Some((_, row, _)) = self.ahead.back() {
            self.fed.extend(self.ahead.iter().filter(|a| a.2).map(|a| a.0));
            self.logits = row.clone();
            self.logits_stale = false;
        }
        if !self.fed.is_empty() {
            let mut tokens = job.prompt.clone();
            tokens.extend(&self.fed);
            match self.logits_stale.then(|| self.backend_untouched.then(|| cx.backend.picked_logits())) {
                None => keep(cx, cache, job.lora_id(), tokens, &self.state, &self.logits),
                Some(Some(Ok(picked_from))) => keep(cx, cache, job.lora_id(), tokens, &self.state, &picked_from),
                // Another sequence ran since the pick: its logits are gone, and so is the entry.
                Some(None) => {}
                // The reply is out: a failure here only costs the cache entry.
                Some(Some(Err(e))) => eprintln!("solo serve: reply not cached, its logits could not be read: {e:#}"),
            }
        }
        let metrics = cx.metrics;
        metrics.completion_tokens.fetch_add(self.generated as u64, Relaxed);
        if let Some(first) = self.first_token.filter(|_| self.generated > 1) {
            let secs = first.elapsed().as_secs_f64();
            if secs > 0.0 {
                metrics.decode_rate.observe((self.generated - 1) as f64 / secs);
            }
        }
        let _ = job.events.send(Event::Done { finish, completion_tokens: self.generated });
        Ok(Progress::Done)
    }

    /// The sequence's state, for the backend to take back once the sequence has left.
    pub fn into_state(self) -> B::State {
        self.state
    }

    /// Where the job's events go (the scheduler reports a failed step there).
    pub fn job(&self) -> &Job {
        &self.job
    }
}

/// The vision tower over the job's images that are not wholly in the first `cached` tokens.
fn encode_images<B: Backend>(cx: &Context<B>, job: &Job, cached: usize) -> Result<Vec<PromptImage>> {
    let start = Instant::now();
    let mut out = Vec::new();
    for img in job.images.iter().filter(|im| im.start + im.tokens() > cached) {
        let embeds = cx.backend.encode_image(&img.patches)?;
        out.push(PromptImage { start: img.start, grid: img.grid, embeds: std::sync::Arc::new(embeds) });
    }
    cx.metrics.image_time.observe(start.elapsed().as_secs_f64());
    cx.metrics.images.fetch_add(out.len() as u64, Relaxed);
    Ok(out)
}

/// The longest prefill call: the configured one, else the backend's own chunk.
fn prefill_chunk<B: Backend>(cx: &Context<B>) -> usize {
    cx.config.prefill_chunk.unwrap_or_else(|| cx.backend.prefill_chunk()).max(1)
}

/// Prompt tokens between interval snapshots: the configured interval, by default 2048 or the
/// prefill chunk where that is longer (CUDA's 4,096: a shorter interval would cut prompts into
/// pieces the backend prefills more slowly than whole chunks; on the H200 a 4K prompt in two
/// 2,048-token calls reached its first token in 20 ms, where one call takes 14).
fn snapshot_interval<B: Backend>(cx: &Context<B>) -> usize {
    cx.config.snapshot_interval.unwrap_or_else(|| 2048.max(prefill_chunk(cx)))
}

/// Where prefill calls end, after `from` up to `to`: every multiple of `chunk` and of
/// `interval`, every snapshot point, and `to`. The cuts depend only on the prompt, so a
/// repeated prompt is prefilled (and rounded) exactly as before whatever the cache held.
pub fn prefill_cuts(from: usize, to: usize, points: &[usize], interval: usize, chunk: usize) -> Vec<usize> {
    let multiples = |step: usize| {
        let step = step.max(1);
        (from / step + 1..).map(move |k| k * step).take_while(move |&p| p < to)
    };
    let mut cuts: Vec<usize> = multiples(chunk)
        .chain(multiples(interval))
        .chain(points.iter().copied().filter(|&p| p > from && p < to))
        .chain((to > from).then_some(to))
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

/// Logit bias, penalties and min-p on a copy of the row, then the sampler.
fn sample(sampler: &mut Sampler, logits: &[f32], s: &Sampling, seen: &HashMap<u32, u32>) -> u32 {
    let mut row = logits.to_vec();
    for &(token, bias) in &s.logit_bias {
        if let Some(l) = row.get_mut(token as usize) {
            *l += bias;
        }
    }
    sampler::apply_penalties(&mut row, seen, s.presence_penalty, s.frequency_penalty);
    sampler::apply_min_p(&mut row, s.min_p, s.temperature);
    sampler.sample(&row)
}

/// Snapshots `state` (run with the adapter `adapter`) into the cache, when the backend can copy states.
fn keep<B: Backend>(
    cx: &Context<B>,
    cache: &mut PrefixCache<B::State>,
    adapter: u64,
    tokens: Vec<u32>,
    state: &B::State,
    logits: &[f32],
) {
    if !cache.enabled() {
        return; // (a copy made only to be dropped)
    }
    let start = Instant::now();
    if let Some(copy) = cx.backend.snapshot(state) {
        cx.metrics.snapshot_time.observe(start.elapsed().as_secs_f64());
        let bytes = cx.backend.state_bytes(&copy);
        cache.insert(adapter, tokens, copy, logits.to_vec(), bytes);
    }
}

/// Before the first token: a departed client cancels the job; a passed deadline answers 503.
/// Either way the caller stops (true).
fn abandoned_before_generation<B: Backend>(cx: &Context<B>, job: &Job) -> bool {
    if job.events.is_closed() {
        cx.metrics.cancelled.fetch_add(1, Relaxed);
        return true;
    }
    if Instant::now() >= job.deadline {
        cx.metrics.timeouts.fetch_add(1, Relaxed);
        let _ = job.events.send(Event::Error(ApiError::overloaded(
            "The request timed out before generation could start. Retry shortly.",
            1,
        )));
        return true;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::prefill_cuts;

    #[test]
    fn cuts_at_chunks_intervals_points_and_the_end() {
        assert_eq!(prefill_cuts(0, 10, &[], 4, 3), [3, 4, 6, 8, 9, 10]);
        assert_eq!(prefill_cuts(5, 10, &[2, 7, 10, 12], 100, 100), [7, 10]);
        assert_eq!(prefill_cuts(10, 10, &[], 4, 4), Vec::<usize>::new());
        assert_eq!(prefill_cuts(8, 9, &[], 4, 4), [9]);
    }
}
