//! Test harness: the real server on an ephemeral loopback port, over the tiny-a fixture, with
//! either the CPU backend (random weights: noise, but real) or `Scripted`, a backend whose
//! logits force a chosen token sequence, so that the whole HTTP path runs deterministically
//! through real tokens.
#![allow(dead_code)]

use anyhow::{bail, Result};
use serde_json::Value;
use solo_model::{Backend, Logits, ModelConfig};
use solo_server::{Server, ServerConfig};
use solo_text::Tokenizer;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tiny-a")
}

pub fn config() -> ServerConfig {
    let mut c = ServerConfig::new(fixture());
    c.port = 0;
    c
}

pub fn start_cpu(config: ServerConfig) -> Server {
    solo_server::start(config, || solo_cpu::load(&fixture())).expect("server starts")
}

pub fn start_scripted(config: ServerConfig, scripts: Vec<Script>) -> Server {
    solo_server::start(config, move || Scripted::new(scripts)).expect("server starts")
}

/// What the scripted model says when the prompt's last mention of a trigger wins.
#[derive(Clone)]
pub struct Script {
    pub trigger: String,
    pub output: Vec<u32>,
    /// Sleep per decode step (to hold the engine busy).
    pub delay: Duration,
}

impl Script {
    pub fn text(trigger: &str, output: &str) -> Script {
        let tok = Tokenizer::from_dir(fixture()).unwrap();
        Script { trigger: trigger.into(), output: tok.encode(output).unwrap(), delay: Duration::ZERO }
    }

    /// From token ids (to place exact tokens, e.g. filler that forced tokens replace).
    pub fn tokens(trigger: &str, output: Vec<u32>) -> Script {
        Script { trigger: trigger.into(), output, delay: Duration::ZERO }
    }

    pub fn slow(mut self, delay: Duration) -> Script {
        self.delay = delay;
        self
    }
}

/// A backend that "generates" a script: after a prefill it picks the script whose trigger
/// occurs last in the sequence, and its logits force the script's next token (then
/// `<|im_end|>`). Trigger `FAIL` makes prefill fail; `PANIC` makes it panic.
pub struct Scripted {
    config: ModelConfig,
    tokenizer: Tokenizer,
    scripts: Vec<Script>,
    eos: u32,
}

#[derive(Clone)]
pub struct ScriptedState {
    tokens: Vec<u32>,
    script: Option<usize>,
    step: usize,
}

impl Scripted {
    pub fn new(scripts: Vec<Script>) -> Result<Self> {
        let tokenizer = Tokenizer::from_dir(fixture())?;
        let eos = tokenizer.token_id("<|im_end|>").unwrap();
        Ok(Scripted { config: ModelConfig::from_dir(&fixture())?, tokenizer, scripts, eos })
    }

    fn logits(&self, state: &ScriptedState) -> Vec<f32> {
        let next = state.script.and_then(|s| self.scripts[s].output.get(state.step).copied()).unwrap_or(self.eos);
        let mut row = vec![0.0; self.config.vocab_size];
        row[next as usize] = 100.0;
        row
    }
}

impl Backend for Scripted {
    type State = ScriptedState;

    fn config(&self) -> &ModelConfig {
        &self.config
    }

    fn new_state(&self) -> Result<ScriptedState> {
        Ok(ScriptedState { tokens: vec![], script: None, step: 0 })
    }

    fn position(&self, state: &ScriptedState) -> usize {
        state.tokens.len()
    }

    fn prefill(&self, state: &mut ScriptedState, tokens: &[u32], logits: Logits) -> Result<Vec<f32>> {
        assert_ne!(logits, Logits::All);
        state.tokens.extend(tokens);
        let text = self.tokenizer.decode(&state.tokens, false)?;
        if text.contains("FAIL") {
            bail!("scripted failure");
        }
        if text.contains("PANIC") {
            panic!("scripted panic");
        }
        state.script = (0..self.scripts.len())
            .filter_map(|i| Some((text.rfind(&self.scripts[i].trigger)?, i)))
            .max()
            .map(|(_, i)| i);
        state.step = 0;
        Ok(if logits == Logits::None { Vec::new() } else { self.logits(state) })
    }

    fn decode(&self, state: &mut ScriptedState, token: u32) -> Result<Vec<f32>> {
        state.tokens.push(token);
        state.step += 1;
        if let Some(s) = state.script {
            std::thread::sleep(self.scripts[s].delay);
        }
        Ok(self.logits(state))
    }

    fn snapshot(&self, state: &ScriptedState) -> Option<ScriptedState> {
        Some(state.clone())
    }

    fn state_bytes(&self, state: &ScriptedState) -> usize {
        4 * state.tokens.len()
    }
}

// ---------------------------------------------------------------- HTTP

pub fn client() -> reqwest::blocking::Client {
    // Loopback only: never through a proxy from the environment.
    reqwest::blocking::Client::builder().no_proxy().timeout(Duration::from_secs(60)).build().unwrap()
}

pub fn url(server: &Server, path: &str) -> String {
    format!("http://{}{path}", server.addr())
}

/// POST JSON; (status, body as JSON).
pub fn post(server: &Server, path: &str, body: &Value) -> (u16, Value) {
    let response = client().post(url(server, path)).json(body).send().unwrap();
    let status = response.status().as_u16();
    (status, response.json().unwrap_or(Value::Null))
}

/// POST expecting 200; the body.
pub fn ok(server: &Server, path: &str, body: &Value) -> Value {
    let (status, json) = post(server, path, body);
    assert_eq!(status, 200, "{json}");
    json
}

pub fn get(server: &Server, path: &str) -> (u16, String) {
    let response = client().get(url(server, path)).send().unwrap();
    (response.status().as_u16(), response.text().unwrap())
}

/// POST a streaming request; every `data:` payload in order (`[DONE]` as a string).
pub fn stream(server: &Server, path: &str, body: &Value) -> Vec<Value> {
    let response = client().post(url(server, path)).json(body).send().unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut events = Vec::new();
    let mut lines = BufReader::new(response).lines();
    while let Some(Ok(line)) = lines.next() {
        if let Some(data) = line.strip_prefix("data: ") {
            events.push(serde_json::from_str(data).unwrap_or_else(|_| Value::from(data)));
        } else {
            assert!(line.is_empty(), "not SSE: {line:?}");
        }
    }
    events
}

/// The value of a metric line `name value` (first match of the prefix).
pub fn metric(server: &Server, name: &str) -> f64 {
    let (_, text) = get(server, "/metrics");
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')).map(|v| v.parse().unwrap()))
        .unwrap_or_else(|| panic!("no metric {name} in\n{text}"))
}

/// A labelled sample (`name{labels} value`, e.g. a histogram bucket) from /metrics.
pub fn metric_labelled(server: &Server, name: &str, labels: &str) -> f64 {
    let (_, text) = get(server, "/metrics");
    let key = format!("{name}{{{labels}}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&key).map(|v| v.parse().unwrap()))
        .unwrap_or_else(|| panic!("no metric {key} in\n{text}"))
}

/// Polls until `cond` holds (panics after 10 s).
pub fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub fn tokenizer() -> Tokenizer {
    Tokenizer::from_dir(fixture()).unwrap()
}

pub fn user(text: &str) -> Value {
    serde_json::json!([{"role": "user", "content": text}])
}

/// A streamed chat put back together.
#[derive(Debug, Default)]
pub struct Assembled {
    pub reasoning: String,
    pub content: String,
    /// (id, name, arguments)
    pub tool_calls: Vec<(String, String, String)>,
    pub finish_reason: Option<String>,
    pub usage: Option<Value>,
    pub logprobs: Vec<Value>,
}

/// Checks the OpenAI chunk protocol on the way: role first, one id, `[DONE]` last.
pub fn assemble(events: &[Value]) -> Assembled {
    let mut a = Assembled::default();
    assert_eq!(events.last(), Some(&Value::from("[DONE]")), "{events:?}");
    let chunks = &events[..events.len() - 1];
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let id = chunks[0]["id"].as_str().unwrap();
    for c in chunks {
        assert_eq!(c["id"], id);
        assert_eq!(c["object"], "chat.completion.chunk");
        if let Some(u) = c.get("usage").filter(|u| !u.is_null()) {
            assert_eq!(c["choices"], serde_json::json!([]));
            a.usage = Some(u.clone());
            continue;
        }
        assert!(a.usage.is_none(), "the usage chunk comes last");
        let choice = &c["choices"][0];
        assert!(a.finish_reason.is_none(), "nothing after the finish chunk but usage");
        if let Some(f) = choice["finish_reason"].as_str() {
            a.finish_reason = Some(f.to_string());
        }
        if let Some(lp) = choice["logprobs"]["content"].as_array() {
            a.logprobs.extend(lp.iter().cloned());
        }
        let delta = &choice["delta"];
        if let Some(t) = delta["reasoning_content"].as_str() {
            assert!(a.content.is_empty(), "reasoning after content");
            a.reasoning += t;
        }
        if let Some(t) = delta["content"].as_str() {
            a.content += t;
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let i = call["index"].as_u64().unwrap() as usize;
            if i == a.tool_calls.len() {
                assert_eq!(call["type"], "function");
                a.tool_calls.push((
                    call["id"].as_str().unwrap().into(),
                    call["function"]["name"].as_str().unwrap().into(),
                    String::new(),
                ));
            }
            a.tool_calls[i].2 += call["function"]["arguments"].as_str().unwrap_or("");
        }
    }
    a
}
