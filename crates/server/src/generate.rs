//! One job on the engine thread: resume from the prefix cache, prefill the rest of the prompt
//! (taking snapshots on the way), then sample, detokenise and check stop strings token by token
//! until a stop, `max_tokens`, the deadline or the client's departure; with an MTP head,
//! several tokens per decode step (speculative decoding).

use crate::engine::{Context, Event, Finish, Job, Sampling, TokenLogprob};
use crate::error::ApiError;
use crate::prefix_cache::PrefixCache;
use crate::stop::StopMatcher;
use anyhow::Result;
use solo_model::sampler::{self, Sampler, SamplerConfig};
use solo_model::sampling::{self, Extras};
use solo_model::speculative;
use solo_model::{Backend, Logits};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

pub fn run<B: Backend>(cx: &Context<B>, cache: &mut PrefixCache<B::State>, job: &Job) -> Result<()> {
    let metrics = cx.metrics;
    if abandoned_before_generation(cx, job) {
        return Ok(());
    }

    // Resume from the longest cached prefix.
    let prompt = &job.prompt;
    let resumed = cache
        .longest_prefix(prompt)
        .and_then(|hit| Some((cx.backend.snapshot(&hit.state)?, hit.logits.clone(), hit.tokens.len())));
    let (mut state, mut logits, cached) = match resumed {
        Some(resumed) => resumed,
        None => (cx.backend.new_state()?, Vec::new(), 0),
    };
    metrics.prompt_tokens.fetch_add(prompt.len() as u64, Relaxed);
    metrics.cached_prompt_tokens.fetch_add(cached as u64, Relaxed);
    let counter = if cached > 0 { &metrics.cache_hits } else { &metrics.cache_misses };
    counter.fetch_add(1, Relaxed);

    // Prefill the rest, cut at chunk and snapshot boundaries.
    let interval = cx.config.snapshot_interval.max(1);
    let mut pos = cached;
    let chunk = cx.config.prefill_chunk.unwrap_or_else(|| cx.backend.prefill_chunk());
    for end in prefill_cuts(cached, prompt.len(), &job.snapshot_points, interval, chunk) {
        if abandoned_before_generation(cx, job) {
            return Ok(());
        }
        logits = cx.backend.prefill(&mut state, &prompt[pos..end], Logits::Last)?;
        pos = end;
        let wanted = end == prompt.len() || end % interval == 0 || job.snapshot_points.contains(&end);
        if wanted && !cache.contains(&prompt[..end]) {
            keep(cx, cache, prompt[..end].to_vec(), &state, &logits);
        }
    }
    let _ = job.events.send(Event::Started { prompt_tokens: prompt.len(), cached_tokens: cached });

    let mut sampler = Sampler::new(SamplerConfig {
        temperature: job.sampling.temperature,
        top_k: job.sampling.top_k,
        top_p: job.sampling.top_p,
        seed: job.sampling.seed,
    });
    let mut seen: HashMap<u32, u32> = HashMap::new();
    let mut forced: VecDeque<u32> = match &job.forced {
        Some(f) if f.after.is_none() => f.tokens.iter().copied().collect(),
        _ => VecDeque::new(),
    };
    let mut forcing_armed = job.forced.as_ref().is_some_and(|f| f.after.is_some());
    let mut text = cx.tokenizer.stream_decoder(true);
    let mut stops = StopMatcher::new(job.stop.clone());
    // Generated tokens that went through `decode` or `decode_and_pick` (so are in `state`).
    let mut fed: Vec<u32> = Vec::new();
    let mut generated = 0;
    let mut first_token: Option<Instant> = None;
    let mut stopped_by_string = false;
    // With only temperature, top-k and top-p to apply (and no tokens to force), the backend picks
    // each next token itself where it can (`decode_and_pick`: the logits stay on the GPU); the
    // token it picked waits in `picked`, and `logits` is stale (until `picked_logits`).
    let extras =
        Extras { logprobs: job.logprobs.is_some(), forced_tokens: job.forced.is_some(), ..job.sampling.extras() };
    let plain = sampling::is_plain(&extras);
    let mut picked: Option<u32> = None;
    let mut logits_stale = false;
    // Speculative decoding (`solo_model::speculative`) where only temperature, top-k and top-p
    // shape the draw (logprobs are read off the target's rows). A round's tokens wait in `ahead`
    // with the row each was drawn from and whether it is already in `state` (all but the last).
    let speculate = match sampling::is_plain(&Extras { logprobs: false, ..extras }) && cx.backend.can_draft() {
        true => cx.config.speculate,
        false => 0,
    };
    let mut ahead: VecDeque<(u32, Vec<f32>, bool)> = VecDeque::new();

    let finish = loop {
        if job.events.is_closed() {
            metrics.cancelled.fetch_add(1, Relaxed);
            metrics.completion_tokens.fetch_add(generated as u64, Relaxed);
            return Ok(());
        }
        if Instant::now() >= job.deadline {
            metrics.timeouts.fetch_add(1, Relaxed);
            break Finish::Length;
        }
        let token = if let Some(t) = forced.pop_front().or_else(|| picked.take()) {
            t
        } else if let Some((t, row, in_state)) = ahead.pop_front() {
            logits = row;
            if in_state {
                fed.push(t);
            }
            t
        } else {
            sample(&mut sampler, &logits, &job.sampling, &seen)
        };
        let logprob = job.logprobs.map(|top| {
            let (logprob, top) = sampler::logprobs(&logits, token, top);
            TokenLogprob { token, logprob, top }
        });
        generated += 1;
        *seen.entry(token).or_default() += 1;
        if first_token.is_none() {
            let now = Instant::now();
            metrics.ttft.observe((now - job.arrived).as_secs_f64());
            first_token = Some(now);
        }
        if cx.config.stop_ids.contains(&token) {
            break Finish::Stop;
        }
        if forcing_armed && job.forced.as_ref().is_some_and(|f| f.after == Some(token)) {
            forcing_armed = false;
            forced.extend(job.forced.iter().flat_map(|f| f.tokens.iter().copied()));
        }
        let piece = text.push(token)?.unwrap_or_default();
        let (out, hit) = stops.push(&piece);
        if !out.is_empty() || logprob.is_some() {
            let _ = job.events.send(Event::Text { text: out, logprob });
        }
        if hit {
            stopped_by_string = true;
            break Finish::Stop;
        }
        if generated >= job.max_tokens {
            break Finish::Length;
        }
        if !ahead.is_empty() {
            continue; // `token` is in the state already
        }
        if speculate > 0 {
            let round = speculative::round(cx.backend, &mut state, token, speculate, &mut sampler)?;
            metrics.draft_tokens.fetch_add(round.drafted as u64, Relaxed);
            metrics.accepted_tokens.fetch_add(round.accepted as u64, Relaxed);
            metrics.accepted_length.observe((round.accepted + 1) as f64);
            let vocab = cx.backend.config().vocab_size;
            let n = round.tokens.len();
            for (i, (&t, row)) in round.tokens.iter().zip(round.logits.chunks(vocab)).enumerate() {
                ahead.push_back((t, row.to_vec(), i + 1 < n));
            }
            fed.push(token);
            logits_stale = false;
            continue;
        }
        match plain.then(|| cx.backend.decode_and_pick(&mut state, token, &mut sampler)).flatten() {
            Some(next) => picked = Some(next?),
            None => logits = cx.backend.decode(&mut state, token)?,
        }
        logits_stale = picked.is_some();
        fed.push(token);
    };

    let mut finish = finish;
    if !stopped_by_string {
        // Bytes of a character cut off by the end, and text held for an undecided stop string.
        let (mut tail, hit) = stops.push(&text.flush()?);
        if hit {
            finish = Finish::Stop;
        } else {
            tail += &stops.finish();
        }
        if !tail.is_empty() {
            let _ = job.events.send(Event::Text { text: tail, logprob: None });
        }
    }
    // Accepted drafts not emitted (a stop came first) are in the state all the same; the row
    // after them is the last one's.
    if let Some((_, row, _)) = ahead.back() {
        fed.extend(ahead.iter().filter(|a| a.2).map(|a| a.0));
        logits = row.clone();
    }
    if !fed.is_empty() {
        let mut tokens = prompt.clone();
        tokens.extend(&fed);
        match logits_stale.then(|| cx.backend.picked_logits()) {
            None => keep(cx, cache, tokens, &state, &logits),
            Some(Ok(picked_from)) => keep(cx, cache, tokens, &state, &picked_from),
            // The reply is out: a failure here only costs the cache entry.
            Some(Err(e)) => eprintln!("solo serve: reply not cached, its logits could not be read: {e:#}"),
        }
    }
    metrics.completion_tokens.fetch_add(generated as u64, Relaxed);
    if let Some(first) = first_token.filter(|_| generated > 1) {
        let secs = first.elapsed().as_secs_f64();
        if secs > 0.0 {
            metrics.decode_rate.observe((generated - 1) as f64 / secs);
        }
    }
    let _ = job.events.send(Event::Done { finish, completion_tokens: generated });
    Ok(())
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

/// Snapshots `state` into the cache (when the backend can copy states).
fn keep<B: Backend>(
    cx: &Context<B>,
    cache: &mut PrefixCache<B::State>,
    tokens: Vec<u32>,
    state: &B::State,
    logits: &[f32],
) {
    if let Some(copy) = cx.backend.snapshot(state) {
        let bytes = cx.backend.state_bytes(&copy);
        cache.insert(tokens, copy, logits.to_vec(), bytes);
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
