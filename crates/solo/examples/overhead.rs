//! What a one-token chat request costs above the engine's own work, on the demo checkpoint (CPU):
//!
//! - prefill: the backend prefilling the request's prompt tokens (a fresh state each time) and
//!   picking the token — the engine's part;
//! - prompt: the chat template rendered and tokenised (`prompt::chat`), which every path does;
//! - `solo::Engine::chat` (what libsolo's `solo_chat` wraps) from request JSON to the answer;
//! - HTTP: `solo serve` on loopback, one keep-alive connection, the same request.
//!
//! `cargo run --release -p solo --example overhead [-- ROUNDS]`; medians in microseconds. The
//! prefix cache is off on both servers, so every request prefills its whole prompt.

use serde_json::json;
use solo::{Engine, Options};
use solo_model::{Backend, Logits};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn median_us(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e6
}

fn time(rounds: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..rounds / 10 + 1 {
        f(); // warm-up
    }
    median_us(
        (0..rounds)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .collect(),
    )
}

fn main() -> anyhow::Result<()> {
    let rounds: usize = std::env::args().nth(1).map_or(Ok(300), |s| s.parse())?;
    let messages = json!([{"role": "user", "content": "What colour is the sky?"}]);
    let request = json!({"messages": messages, "max_tokens": 1, "temperature": 0}).to_string();
    let options = Options { backend: solo::Backend::Cpu, cache_mb: 0, ..Options::default() };
    let engine = Engine::open(None, options)?;
    let dir = std::path::PathBuf::from(engine.info()["model_dir"].as_str().unwrap());

    let text = solo_server::prompt::TextAssets::from_dir(&dir)?;
    let prompt = solo_server::prompt::chat(&text, Some(&messages), None, None, None).map_err(anyhow::Error::msg)?;
    let tokens = prompt.tokens.clone();
    let backend = solo_cpu::load(&dir)?;
    let prefill = time(rounds, || {
        let mut state = backend.new_state().unwrap();
        let logits = backend.prefill(&mut state, &tokens, Logits::Last).unwrap();
        std::hint::black_box(solo_model::sampler::argmax(&logits));
    });
    let render = time(rounds, || {
        std::hint::black_box(solo_server::prompt::chat(&text, Some(&messages), None, None, None).unwrap());
    });
    let in_process = time(rounds, || {
        let answer: Vec<_> = engine.chat(&request).unwrap().collect();
        assert_eq!(answer.len(), 1);
    });

    let mut config = solo_server::ServerConfig::new(&dir);
    config.port = 0;
    config.cache_bytes = 0;
    let d = dir.clone();
    let server = solo_server::start(config, move || solo_cpu::load(&d))?;
    let mut conn = BufReader::new(TcpStream::connect(server.addr())?);
    conn.get_ref().set_nodelay(true)?;
    let http = time(rounds, || post(&mut conn, &request));

    println!("demo checkpoint, CPU, {} prompt tokens, one generated token; medians of {rounds} (µs):", tokens.len());
    println!("  engine prefill + pick               {prefill:8.1}");
    println!("  chat template + tokenizer           {render:8.1}");
    println!("  solo::Engine::chat (libsolo)        {in_process:8.1}   above prefill: {:8.1}", in_process - prefill);
    println!("  HTTP (solo serve, keep-alive)       {http:8.1}   above prefill: {:8.1}", http - prefill);
    Ok(())
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
