//! The server with a backend that picks tokens itself (`Backend::decode_and_pick`, what the CUDA
//! backend does with its GPU sampler): plain sampling goes through it and gives the tokens the
//! host sampler gives; logprobs, penalties and settings the backend declines stay on the host;
//! a reply that ended in a pick is cached with the logits it was picked from.

mod common;

use anyhow::Result;
use common::*;
use serde_json::{json, Value};
use solo_cpu::CpuModel;
use solo_model::sampler::Sampler;
use solo_model::{Backend, Logits, ModelConfig};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// The CPU backend, picking "on the backend" as the GPU one does (decode, then the sampler,
/// both inside `decode_and_pick`), except with top_k 0, which it declines as the GPU sampler
/// does. Counts its picks and records every decoded token.
struct Picking {
    cpu: CpuModel,
    log: Arc<Log>,
    last_logits: Mutex<Vec<f32>>,
}

#[derive(Default)]
struct Log {
    picks: AtomicUsize,
    /// Tokens picked by `decode_batch_and_pick`.
    batch_picks: AtomicUsize,
    /// Tokens given to `decode` or `decode_and_pick`, in order.
    decoded: Mutex<Vec<u32>>,
    /// States handed back by `release_state`.
    released: AtomicUsize,
}

impl Backend for Picking {
    type State = <CpuModel as Backend>::State;

    fn config(&self) -> &ModelConfig {
        self.cpu.config()
    }

    fn new_state(&self) -> Result<Self::State> {
        self.cpu.new_state()
    }

    fn position(&self, state: &Self::State) -> usize {
        self.cpu.position(state)
    }

    fn prefill(&self, state: &mut Self::State, tokens: &[u32], logits: Logits) -> Result<Vec<f32>> {
        self.cpu.prefill(state, tokens, logits)
    }

    fn decode(&self, state: &mut Self::State, token: u32) -> Result<Vec<f32>> {
        self.log.decoded.lock().unwrap().push(token);
        self.cpu.decode(state, token)
    }

    fn decode_and_pick(&self, state: &mut Self::State, token: u32, sampler: &mut Sampler) -> Option<Result<u32>> {
        if sampler.config().top_k == 0 && sampler.config().temperature > 0.0 {
            return None;
        }
        self.log.picks.fetch_add(1, Relaxed);
        Some(self.decode(state, token).map(|logits| {
            let next = sampler.sample(&logits);
            *self.last_logits.lock().unwrap() = logits;
            next
        }))
    }

    fn decode_batch_and_pick(
        &self,
        states: &mut [&mut Self::State],
        tokens: &[u32],
        samplers: &mut [&mut Sampler],
    ) -> Option<Result<Vec<u32>>> {
        if samplers.iter().any(|s| s.config().top_k == 0 && s.config().temperature > 0.0) {
            return None;
        }
        self.log.batch_picks.fetch_add(tokens.len(), Relaxed);
        let vocab = self.config().vocab_size;
        Some(self.cpu.decode_batch(states, tokens).map(|rows| {
            self.log.decoded.lock().unwrap().extend(tokens);
            rows.chunks(vocab).zip(samplers.iter_mut()).map(|(row, s)| s.sample(row)).collect()
        }))
    }

    fn picked_logits(&self) -> Result<Vec<f32>> {
        Ok(self.last_logits.lock().unwrap().clone())
    }

    fn snapshot(&self, state: &Self::State) -> Option<Self::State> {
        self.cpu.snapshot(state)
    }

    fn release_state(&self, state: Self::State) {
        self.log.released.fetch_add(1, Relaxed);
        drop(state);
    }
}

fn start_picking() -> (solo_server::Server, Arc<Log>) {
    start_picking_with(config())
}

fn start_picking_with(config: solo_server::ServerConfig) -> (solo_server::Server, Arc<Log>) {
    let log = Arc::new(Log::default());
    let shared = log.clone();
    let server = solo_server::start(config, move || {
        Ok(Picking { cpu: solo_cpu::load(&fixture())?, log: shared, last_logits: Mutex::new(Vec::new()) })
    })
    .expect("server starts");
    (server, log)
}

fn chat(server: &solo_server::Server, sampling: &Value) -> String {
    let mut body = json!({"messages": user("Tell me a story"), "max_tokens": 8});
    body.as_object_mut().unwrap().extend(sampling.as_object().unwrap().clone());
    chat_body(server, &body)
}

#[test]
fn plain_sampling_is_picked_on_the_backend_with_the_host_samplers_tokens() {
    let host = start_cpu(config());
    let (picking, log) = start_picking();
    let picks = || log.picks.load(Relaxed);
    for sampling in [
        json!({"temperature": 1.0, "top_k": 20, "top_p": 0.95, "seed": 42}),
        json!({"temperature": 0.7, "top_k": 5, "top_p": 0.5, "seed": 7}),
        json!({"temperature": 0}),
    ] {
        let before = picks();
        assert_eq!(chat(&picking, &sampling), chat(&host, &sampling), "{sampling}");
        assert!(picks() > before, "{sampling}: nothing picked on the backend");
    }
    // What the backend cannot apply stays on the host, with the same tokens.
    for sampling in [
        json!({"temperature": 1.0, "top_k": 20, "seed": 3, "presence_penalty": 0.5}),
        json!({"temperature": 1.0, "top_k": 20, "seed": 3, "min_p": 0.1}),
        json!({"temperature": 1.0, "top_k": 20, "seed": 3, "logit_bias": {"100": 5}}),
        json!({"temperature": 1.0, "top_k": 20, "seed": 3, "logprobs": true}),
        json!({"temperature": 1.0, "top_k": 0, "seed": 3}),
    ] {
        let before = picks();
        assert_eq!(chat(&picking, &sampling), chat(&host, &sampling), "{sampling}");
        assert_eq!(picks(), before, "{sampling}: picked on the backend");
    }
}

/// Every finished request hands its state back to the backend (which may reuse it), whether it
/// ran alone or beside others.
#[test]
fn finished_requests_give_their_states_back() {
    let (server, log) = start_picking();
    let sampling = json!({"temperature": 1.0, "top_k": 20, "seed": 5});
    // (a reply is out just before the engine hands its state back)
    let released_within_a_second = |n: usize| {
        let start = std::time::Instant::now();
        while log.released.load(Relaxed) < n && start.elapsed().as_secs() < 1 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        log.released.load(Relaxed)
    };
    for _ in 0..3 {
        chat(&server, &sampling);
    }
    assert_eq!(released_within_a_second(3), 3, "states released after 3 requests in turn");
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| chat(&server, &sampling));
        }
    });
    assert_eq!(released_within_a_second(7), 7, "states released after 4 more at once");
}

/// A reply that ended in a pick is cached with the logits of that pick: a prompt that is
/// exactly the prompt and the reply's decoded tokens starts from the cache and chooses what a
/// cold prefill of it chooses.
#[test]
fn a_reply_ended_by_a_pick_is_cached_with_its_logits() {
    let host = start_cpu(config());
    let (picking, log) = start_picking();
    let prompt: Vec<u32> = vec![100, 200, 300, 400, 500];
    let first = ok(&picking, "/v1/completions", &json!({"prompt": prompt, "max_tokens": 6, "temperature": 0}));
    assert_eq!(first["usage"]["completion_tokens"], 6, "{first}");
    let decoded = log.decoded.lock().unwrap().clone();
    assert_eq!(decoded.len(), 5, "the 6th token is chosen, not decoded");
    assert_eq!(log.picks.load(Relaxed), 5);

    let mut longer = prompt.clone();
    longer.extend(&decoded);
    let body = json!({"prompt": longer, "max_tokens": 3, "temperature": 0});
    let resumed = ok(&picking, "/v1/completions", &body);
    assert_eq!(resumed["usage"]["prompt_tokens_details"]["cached_tokens"], longer.len(), "{resumed}");
    let cold = ok(&host, "/v1/completions", &body);
    assert_eq!(cold["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    assert_eq!(resumed["choices"][0]["text"], cold["choices"][0]["text"]);
}

/// `--batch-decode` with a backend that picks: concurrent plain requests (greedy and seeded)
/// are decoded in batched steps whose tokens the backend picks, and each gets the reply it gets
/// alone from the host sampler; a request whose settings the backend declines (top_k 0) joins
/// the batch through the logits instead, with the same result.
#[test]
fn batched_picks_give_the_replies_of_requests_alone() {
    let host = start_cpu(config());
    let mut c = config();
    c.max_batch = 4;
    c.batch_decode = true;
    let (picking, log) = start_picking_with(c);
    for declined in [false, true] {
        let bodies: Vec<Value> = (0..4)
            .map(|i| {
                let mut b =
                    json!({"messages": user(&format!("Tell me story number {i}")), "max_tokens": 24, "seed": i});
                b["temperature"] = json!(if i % 2 == 0 { 0.0 } else { 1.0 });
                b["top_k"] = json!(if declined && i == 3 { 0 } else { 20 });
                b
            })
            .collect();
        let want: Vec<String> = bodies.iter().map(|b| chat_body(&host, b)).collect();
        let before = log.batch_picks.load(Relaxed);
        let got: Vec<String> = std::thread::scope(|scope| {
            let handles: Vec<_> = bodies.iter().map(|b| scope.spawn(|| chat_body(&picking, b))).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(got, want, "declined {declined}");
        assert!(metric(&picking, "solo_batched_decode_size_sum") > metric(&picking, "solo_batched_decode_size_count"));
        if !declined {
            assert!(log.batch_picks.load(Relaxed) > before, "no batched pick");
        }
    }
}

fn chat_body(server: &solo_server::Server, body: &Value) -> String {
    let r = ok(server, "/v1/chat/completions", body);
    let m = &r["choices"][0]["message"];
    format!("{}|{}", m["reasoning_content"].as_str().unwrap_or(""), m["content"].as_str().unwrap_or(""))
}
