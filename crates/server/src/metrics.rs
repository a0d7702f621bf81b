//! Counters, gauges and histograms for `GET /metrics`, in the Prometheus text format.
//! Written by the HTTP layer (requests by status) and the engine thread (everything else).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

#[derive(Default)]
pub struct Metrics {
    /// (route, status) → count.
    requests: Mutex<BTreeMap<(String, u16), u64>>,
    pub prompt_tokens: AtomicU64,
    pub completion_tokens: AtomicU64,
    pub cached_prompt_tokens: AtomicU64,
    pub cache_hits: AtomicU64,
    pub cache_misses: AtomicU64,
    pub cache_entries: AtomicU64,
    pub cache_bytes: AtomicU64,
    /// Generations stopped because their client went away.
    pub cancelled: AtomicU64,
    /// Requests that ran past their time limit (in the queue or while generating).
    pub timeouts: AtomicU64,
    pub queue_depth: AtomicI64,
    pub running: AtomicI64,
    pub ttft: Histogram,
    pub decode_rate: Histogram,
    /// Speculative decoding: drafts proposed, drafts accepted, tokens emitted per verify step.
    pub draft_tokens: AtomicU64,
    pub accepted_tokens: AtomicU64,
    pub accepted_length: Histogram,
    /// Sequences stepped together, per engine step.
    pub batch_size: Histogram,
    /// Sequences fed to the backend in one batched decode step, per such step.
    pub batched_decode: Histogram,
    /// Wall time of one engine step over the running sequences (their prefill pieces or tokens).
    pub step_time: Histogram,
    /// From a request's arrival to the engine starting it (its prefill or cache resume).
    pub queue_wait: Histogram,
    /// Wall time of one backend prefill call (a prompt, or a piece of one).
    pub prefill_time: Histogram,
    /// Wall time of one prefix-cache snapshot (the backend's copy of a state) on a prompt's path.
    pub snapshot_time: Histogram,
    /// Images through the vision tower, and the tower's wall time per request.
    pub images: AtomicU64,
    pub image_time: Histogram,
    /// Connections being served; those turned away at the cap; those closed for slow headers.
    pub connections_open: AtomicI64,
    pub connections_refused: AtomicU64,
    pub connections_timed_out: AtomicU64,
}

impl Metrics {
    pub fn new() -> Self {
        Metrics {
            ttft: Histogram::new(&[0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0]),
            decode_rate: Histogram::new(&[1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0]),
            accepted_length: Histogram::new(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0]),
            batch_size: Histogram::new(&[1.0, 2.0, 4.0, 8.0, 16.0, 32.0]),
            batched_decode: Histogram::new(&[1.0, 2.0, 4.0, 8.0, 16.0, 32.0]),
            step_time: Histogram::new(&[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0]),
            queue_wait: Histogram::new(&[0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0]),
            prefill_time: Histogram::new(&[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0]),
            image_time: Histogram::new(&[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0]),
            snapshot_time: Histogram::new(&[0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1]),
            ..Default::default()
        }
    }

    pub fn count_request(&self, route: &str, status: u16) {
        let mut map = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        *map.entry((route.to_string(), status)).or_default() += 1;
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        let counter = |out: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}");
        };
        let gauge = |out: &mut String, name: &str, help: &str, v: i64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        };
        let _ = writeln!(out, "# HELP solo_requests_total HTTP requests by route and status.");
        let _ = writeln!(out, "# TYPE solo_requests_total counter");
        for ((route, status), n) in self.requests.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            let _ = writeln!(out, "solo_requests_total{{route=\"{route}\",status=\"{status}\"}} {n}");
        }
        let counters = [
            ("solo_prompt_tokens_total", "Prompt tokens of admitted requests.", &self.prompt_tokens),
            ("solo_completion_tokens_total", "Generated tokens.", &self.completion_tokens),
            (
                "solo_cached_prompt_tokens_total",
                "Prompt tokens served from the prefix cache.",
                &self.cached_prompt_tokens,
            ),
            ("solo_prefix_cache_hits_total", "Requests that resumed from a cached state.", &self.cache_hits),
            ("solo_prefix_cache_misses_total", "Requests that prefilled from scratch.", &self.cache_misses),
            ("solo_requests_cancelled_total", "Generations stopped because the client disconnected.", &self.cancelled),
            ("solo_requests_timed_out_total", "Requests that ran past the per-request timeout.", &self.timeouts),
            ("solo_draft_tokens_total", "Tokens the MTP head drafted (speculative decoding).", &self.draft_tokens),
            ("solo_accepted_draft_tokens_total", "Drafted tokens the model accepted.", &self.accepted_tokens),
            ("solo_images_total", "Images run through the vision tower.", &self.images),
        ];
        for (name, help, v) in counters {
            counter(&mut out, name, help, v.load(Relaxed));
        }
        gauge(
            &mut out,
            "solo_prefix_cache_entries",
            "Snapshots held by the prefix cache.",
            self.cache_entries.load(Relaxed) as i64,
        );
        gauge(
            &mut out,
            "solo_prefix_cache_bytes",
            "Memory held by the prefix cache.",
            self.cache_bytes.load(Relaxed) as i64,
        );
        gauge(&mut out, "solo_queue_depth", "Requests waiting for the engine.", self.queue_depth.load(Relaxed));
        gauge(&mut out, "solo_connections_open", "Connections being served.", self.connections_open.load(Relaxed));
        counter(
            &mut out,
            "solo_connections_refused_total",
            "Connections turned away (503) because as many were open as --max-connections.",
            self.connections_refused.load(Relaxed),
        );
        counter(
            &mut out,
            "solo_connections_timed_out_total",
            "Connections closed because request headers (or, when idle, the next request) did not arrive within --header-timeout.",
            self.connections_timed_out.load(Relaxed),
        );
        gauge(&mut out, "solo_requests_running", "Requests the engine is working on.", self.running.load(Relaxed));
        gauge(&mut out, "solo_running_sequences", "Sequences in the engine's batch.", self.running.load(Relaxed));
        self.ttft.render(&mut out, "solo_time_to_first_token_seconds", "From arrival to the first generated token.");
        self.decode_rate.render(&mut out, "solo_decode_tokens_per_second", "Decode speed of each finished request.");
        self.batch_size.render(&mut out, "solo_batch_size", "Sequences the engine stepped together, per step.");
        self.batched_decode.render(
            &mut out,
            "solo_batched_decode_size",
            "Sequences decoded in one batched backend step, per such step.",
        );
        self.step_time.render(
            &mut out,
            "solo_engine_step_seconds",
            "Wall time of one engine step over the running sequences (a prefill piece or a token each).",
        );
        self.queue_wait.render(
            &mut out,
            "solo_queue_wait_seconds",
            "From a request's arrival to the engine starting it (prefill or prefix-cache resume).",
        );
        self.prefill_time.render(
            &mut out,
            "solo_prefill_seconds",
            "Wall time of one backend prefill call (a prompt or a piece of one; a piece before the prompt's end returns no logits, so on a GPU it times the launches and the last piece waits for the rest).",
        );
        self.snapshot_time.render(
            &mut out,
            "solo_snapshot_seconds",
            "Wall time of one prefix-cache snapshot (a copy of the sequence's state).",
        );
        self.image_time.render(
            &mut out,
            "solo_vision_tower_seconds",
            "Wall time of the vision tower over one request's images (those the prefix cache did not hold).",
        );
        self.accepted_length.render(
            &mut out,
            "solo_speculative_accepted_length",
            "Tokens emitted per speculative verify step (accepted drafts plus one).",
        );
        out
    }
}

/// A Prometheus histogram with fixed upper bounds.
#[derive(Default)]
pub struct Histogram {
    bounds: Vec<f64>,
    /// Per bucket (not cumulative); one more than `bounds` for +Inf.
    counts: Vec<AtomicU64>,
    /// Sum of observations in micro-units, to stay atomic.
    sum_micros: AtomicU64,
}

impl Histogram {
    pub fn new(bounds: &[f64]) -> Self {
        Histogram {
            bounds: bounds.to_vec(),
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_micros: AtomicU64::new(0),
        }
    }

    pub fn observe(&self, v: f64) {
        if !v.is_finite() || v < 0.0 || self.counts.is_empty() {
            return;
        }
        let i = self.bounds.iter().position(|&b| v <= b).unwrap_or(self.bounds.len());
        self.counts[i].fetch_add(1, Relaxed);
        self.sum_micros.fetch_add((v * 1e6) as u64, Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (i, count) in self.counts.iter().enumerate() {
            cumulative += count.load(Relaxed);
            let le = self.bounds.get(i).map_or("+Inf".to_string(), |b| b.to_string());
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_sum {}", self.sum_micros.load(Relaxed) as f64 / 1e6);
        let _ = writeln!(out, "{name}_count {cumulative}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prometheus_text() {
        let m = Metrics::new();
        m.count_request("/v1/models", 200);
        m.count_request("/v1/models", 200);
        m.ttft.observe(0.02);
        m.ttft.observe(100.0);
        let text = m.render();
        assert!(text.contains("solo_requests_total{route=\"/v1/models\",status=\"200\"} 2"), "{text}");
        assert!(text.contains("solo_time_to_first_token_seconds_bucket{le=\"0.01\"} 0"), "{text}");
        assert!(text.contains("solo_time_to_first_token_seconds_bucket{le=\"0.025\"} 1"), "{text}");
        assert!(text.contains("solo_time_to_first_token_seconds_bucket{le=\"+Inf\"} 2"), "{text}");
        assert!(text.contains("solo_time_to_first_token_seconds_count 2"), "{text}");
        assert!(text.contains("# TYPE solo_queue_depth gauge\nsolo_queue_depth 0"), "{text}");
    }
}
