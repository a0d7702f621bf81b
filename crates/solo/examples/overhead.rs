//! What a one-token chat request costs besides the model, on the demo checkpoint (CPU):
//!
//! - through `solo::Engine::chat` (what libsolo's `solo_chat` wraps) and through `solo serve` on
//!   loopback (one keep-alive connection), each over a backend that costs nothing (`Fake::free`: its
//!   prefill and decode return a fixed row at once) — so the time is all overhead: request JSON,
//!   chat template and tokenizer, queue, engine thread, answer JSON, and for HTTP the socket;
//! - the chat template + tokenizer alone (`prompt::chat`), part of both;
//! - for scale, the same on the real demo model: its prefill + pick, and the two paths;
//! - the streaming delay inside Rust: a backend that takes 1 ms a token and notes when each
//!   token's logits are ready; `Stream::next_chunk` notes when that token's chunk arrives (the
//!   engine thread → request thread → caller hops that libsolo's bindings start from).
//!
//! `cargo run --release -p solo --example overhead [-- ROUNDS]`; medians, microseconds. The
//! prefix cache is off, so every request prefills its whole prompt.

use anyhow::Result;
use serde_json::json;
use solo::{Engine, Options};
use solo_model::{Backend, Logits, ModelConfig};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn time(rounds: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..rounds / 10 + 1 {
        f(); // warm-up
    }
    let mut v: Vec<Duration> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e6
}

/// A backend that does no work: every row puts token 0 first. Paced (`ready` given), it takes
/// 1 ms a token and notes when each row is ready.
struct Fake {
    config: ModelConfig,
    ready: Option<Arc<Mutex<Vec<Instant>>>>,
}

impl Backend for Fake {
    type State = usize;
    fn config(&self) -> &ModelConfig {
        &self.config
    }
    fn new_state(&self) -> Result<usize> {
        Ok(0)
    }
    fn position(&self, state: &usize) -> usize {
        *state
    }
    fn prefill(&self, state: &mut usize, tokens: &[u32], logits: Logits) -> Result<Vec<f32>> {
        *state += tokens.len();
        Ok(if logits == Logits::None { Vec::new() } else { self.row() })
    }
    fn decode(&self, state: &mut usize, _token: u32) -> Result<Vec<f32>> {
        *state += 1;
        Ok(self.row())
    }
}

impl Fake {
    fn free(config: ModelConfig) -> Self {
        Fake { config, ready: None }
    }

    fn row(&self) -> Vec<f32> {
        if self.ready.is_some() {
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut row = vec![0.0; self.config.vocab_size];
        row[0] = 10.0;
        if let Some(ready) = &self.ready {
            ready.lock().unwrap().push(Instant::now());
        }
        row
    }
}

/// Microseconds from each token's logits to its chunk at the caller: p50, p99, max.
fn streaming_delay(dir: &Path, config: &ModelConfig, requests: usize) -> Result<(f64, f64, f64, usize)> {
    let ready = Arc::new(Mutex::new(Vec::new()));
    let (c, r) = (config.clone(), ready.clone());
    let options = Options { backend: solo::Backend::Cpu, cache_mb: 0, ..Options::default() };
    let engine = Engine::open_with_backend(dir, options, move || Ok(Fake { config: c, ready: Some(r) }))?;
    let mut delays = Vec::new();
    for _ in 0..requests {
        ready.lock().unwrap().clear();
        let mut stream = engine.completion(r#"{"prompt": "Once", "max_tokens": 100, "stream": true}"#)?;
        let mut arrived = Vec::new();
        while let Some(chunk) = stream.next_chunk()? {
            let now = Instant::now();
            if chunk.contains(r#""finish_reason":null"#) {
                arrived.push(now);
            }
        }
        let ready = ready.lock().unwrap();
        // one chunk a token here (the token's text is one character); pair them in order
        anyhow::ensure!(arrived.len() <= ready.len(), "{} chunks for {} tokens", arrived.len(), ready.len());
        delays.extend(arrived.iter().zip(ready.iter()).map(|(a, r)| (*a - *r).as_secs_f64() * 1e6));
    }
    delays.sort_by(f64::total_cmp);
    let pct = |q: f64| delays[((q * delays.len() as f64) as usize).min(delays.len() - 1)];
    Ok((pct(0.5), pct(0.99), delays[delays.len() - 1], delays.len()))
}

fn main() -> Result<()> {
    let rounds: usize = std::env::args().nth(1).map_or(Ok(300), |s| s.parse())?;
    let messages = json!([{"role": "user", "content": "What color is the sky?"}]);
    let request = json!({"messages": messages, "max_tokens": 1, "temperature": 0}).to_string();
    let options = || Options { backend: solo::Backend::Cpu, cache_mb: 0, ..Options::default() };
    let engine = Engine::open(None, options())?;
    let dir = std::path::PathBuf::from(engine.info()["model_dir"].as_str().unwrap());
    let config = ModelConfig::from_dir(&dir)?;

    let text = solo_server::prompt::TextAssets::from_dir(&dir)?;
    let prompt = solo_server::prompt::chat(&text, Some(&messages), None, None, None).map_err(anyhow::Error::msg)?;
    let render = time(rounds, || {
        std::hint::black_box(solo_server::prompt::chat(&text, Some(&messages), None, None, None).unwrap());
    });

    let c = config.clone();
    let free = Engine::open_with_backend(&dir, options(), move || Ok(Fake::free(c)))?;
    let free_in_process = time(rounds, || chat_in_process(&free, &request));
    let c = config.clone();
    let free_server = serve(&dir, move || Ok(Fake::free(c)))?;
    let free_http = http(&free_server, rounds, &request)?;

    let backend = solo_cpu::load(&dir)?;
    let prefill = time(rounds, || {
        let mut state = backend.new_state().unwrap();
        let logits = backend.prefill(&mut state, &prompt.tokens, Logits::Last).unwrap();
        std::hint::black_box(solo_model::sampler::argmax(&logits));
    });
    let demo_in_process = time(rounds, || chat_in_process(&engine, &request));
    let d = dir.clone();
    let demo_server = serve(&dir, move || solo_cpu::load(&d))?;
    let demo_http = http(&demo_server, rounds, &request)?;

    let (p50, p99, max, n) = streaming_delay(&dir, &config, 10)?;

    println!("one-token chat request, {} prompt tokens; medians of {rounds} (µs)", prompt.tokens.len());
    println!("  over a backend that costs nothing (all overhead):");
    println!("    solo::Engine::chat (libsolo's path)     {free_in_process:9.1}");
    println!("    HTTP (solo serve, keep-alive)           {free_http:9.1}");
    println!("    of which chat template + tokenizer      {render:9.1}");
    println!("  on the demo model (CPU):");
    println!("    prefill + pick                          {prefill:9.1}");
    println!("    solo::Engine::chat                      {demo_in_process:9.1}");
    println!("    HTTP                                    {demo_http:9.1}");
    println!(
        "streaming, {n} tokens: logits ready → chunk at the Rust caller: p50 {p50:.1}, p99 {p99:.1}, max {max:.1}"
    );
    Ok(())
}

fn chat_in_process(engine: &Engine, request: &str) {
    let answer: Vec<_> = engine.chat(request).unwrap().collect();
    assert!(answer.len() == 1 && answer[0].is_ok());
}

fn serve<B, F>(dir: &Path, load: F) -> Result<solo_server::Server>
where
    B: Backend + 'static,
    F: FnOnce() -> Result<B> + Send + 'static,
{
    let mut config = solo_server::ServerConfig::new(dir);
    config.port = 0;
    config.cache_bytes = 0;
    solo_server::start(config, load)
}

fn http(server: &solo_server::Server, rounds: usize, request: &str) -> Result<f64> {
    let mut conn = BufReader::new(TcpStream::connect(server.addr())?);
    conn.get_ref().set_nodelay(true)?;
    Ok(time(rounds, || post(&mut conn, request)))
}

/// One POST /v1/chat/completions on a keep-alive connection; the body is read and dropped.
fn post(conn: &mut BufReader<TcpStream>, body: &str) {
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    conn.get_mut().write_all(format!("{head}{body}").as_bytes()).unwrap();
    let mut length = 0;
    loop {
        let mut line = String::new();
        conn.read_line(&mut line).unwrap();
        if line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap();
        }
    }
    let mut buf = vec![0; length];
    conn.read_exact(&mut buf).unwrap();
    assert!(buf.starts_with(b"{\"id\""), "{}", String::from_utf8_lossy(&buf));
}
