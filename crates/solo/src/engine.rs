//! `solo::Engine`: what `solo serve` serves, inside a program, without HTTP.
//!
//! The engine thread, the scheduler (several requests at once are batched), the chat template,
//! the reasoning / tool-call parser, the privacy gate and the hybrid router are the server's own
//! (crate `solo-server`): a request goes to the same handler functions as `POST
//! /v1/chat/completions` and `POST /v1/completions`, in this process, and its answer comes back
//! as the same JSON: one object, or (with `"stream": true`) the stream's chunks, one at a time.
//!
//! ```
//! use solo::{Engine, Options};
//!
//! // None: the built-in demo checkpoint (a tiny model, written to the cache on first use).
//! let engine = Engine::open(None, Options::default())?;
//! let request = r#"{"messages": [{"role": "user", "content": "What color is the sky?"}],
//!                   "stream": true, "max_tokens": 64, "temperature": 0}"#;
//! let mut text = String::new();
//! for chunk in engine.chat(request)? {
//!     let chunk: serde_json::Value = serde_json::from_str(&chunk?)?;
//!     if let Some(piece) = chunk["choices"][0]["delta"]["content"].as_str() {
//!         text += piece;
//!     }
//! }
//! assert!(!text.is_empty());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::HeaderMap;
use http_body_util::BodyExt as _;
use serde::Deserialize;
use solo_server::handlers::App;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// What went wrong, by kind (libsolo's status codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// A bad argument: options JSON, a token id, text that is not UTF-8.
    InvalidArgument,
    /// The request was refused as the HTTP endpoint refuses it with a 4xx (bad JSON, a field
    /// out of range, a prompt longer than the context).
    InvalidRequest,
    /// An unknown model or LoRA adapter (404).
    NotFound,
    /// The privacy gate refused the request (403) or needs consent (428: the message is the
    /// whole error object, with its consent token).
    Refused,
    /// The queue is full, or the request timed out before it started (503).
    Busy,
    /// Cancelled by the caller.
    Cancelled,
    /// The checkpoint could not be loaded.
    LoadFailed,
    /// The cloud route failed (502).
    Cloud,
    /// The engine failed (500), or the engine was closed.
    Internal,
}

#[derive(Clone, Debug)]
pub struct Error {
    pub kind: ErrorKind,
    /// The HTTP status the server would have answered with (0 where there is none).
    pub http_status: u16,
    pub message: String,
}

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error { kind, http_status: 0, message: message.into() }
    }

    fn cancelled() -> Error {
        Error::new(ErrorKind::Cancelled, "the request was cancelled")
    }

    fn closed() -> Error {
        Error::new(ErrorKind::Internal, "the engine was closed while the request ran")
    }

    /// From an HTTP status and the error object the server answers with.
    fn from_response(status: u16, body: &[u8]) -> Error {
        let kind = match status {
            404 => ErrorKind::NotFound,
            403 | 428 => ErrorKind::Refused,
            408 | 429 | 503 => ErrorKind::Busy,
            502 | 504 => ErrorKind::Cloud,
            400..=499 => ErrorKind::InvalidRequest,
            _ => ErrorKind::Internal,
        };
        let json: Option<serde_json::Value> = serde_json::from_slice(body).ok();
        let message = match json.as_ref().and_then(|j| j["error"]["message"].as_str()) {
            // The consent token travels in the object: the caller needs all of it.
            Some(_) if status == 428 => String::from_utf8_lossy(body).into_owned(),
            Some(m) => m.to_string(),
            None => format!("HTTP {status}: {}", String::from_utf8_lossy(body)),
        };
        Error { kind, http_status: status, message }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// Which backend runs the model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// CUDA when an NVIDIA GPU is present and the checkpoint has the real model's widths, else
    /// the CPU.
    #[default]
    Auto,
    Cpu,
    Cuda,
}

/// How to open an engine: `solo serve`'s settings that make sense in-process. As JSON (libsolo's
/// `options_json`), the same names; unknown names are refused.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Options {
    pub backend: Backend,
    /// Context length, prompt plus completion (default: the checkpoint's).
    pub max_seq: Option<usize>,
    /// Requests generating at once (batched); more wait in the queue.
    pub max_batch: usize,
    /// Requests that may wait; one more is refused (`ErrorKind::Busy`).
    pub max_queue: usize,
    /// Memory for the prefix cache's snapshots, in MiB (0 turns it off).
    pub cache_mb: usize,
    /// Seconds from a request's arrival to its last token.
    pub request_timeout_s: f64,
    /// MTP drafts per decode step (speculative decoding); 0: off.
    pub speculate: usize,
    /// The id `model` is checked against (default: from the checkpoint's path).
    pub model_name: Option<String>,
    /// Hybrid routing: an OpenAI-compatible base URL; chat requests pass the privacy gate and
    /// what the policy allows goes there (as `solo serve --cloud-url`).
    pub cloud_url: Option<String>,
    pub cloud_model: Option<String>,
    /// Name of the environment variable that holds the cloud's API key.
    pub cloud_key_env: Option<String>,
    /// Seconds the cloud has to answer before the request is answered locally (default 30).
    pub cloud_timeout_s: f64,
    /// Privacy policy (TOML); default: the shipped one. Also gates local-only requests.
    pub policy: Option<PathBuf>,
    /// Audit log of gated requests (JSON lines, no values); default: none.
    pub audit_log: Option<PathBuf>,
    /// LoRA adapters served beside the base model: model id → PEFT adapter directory.
    pub lora: std::collections::BTreeMap<String, PathBuf>,
    /// Threads that carry requests between the engine and the caller.
    pub threads: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            backend: Backend::Auto,
            max_seq: None,
            max_batch: 8,
            max_queue: 64,
            cache_mb: 1024,
            request_timeout_s: 600.0,
            speculate: 0,
            model_name: None,
            cloud_url: None,
            cloud_model: None,
            cloud_key_env: None,
            cloud_timeout_s: solo_server::hybrid::DEFAULT_CLOUD_TIMEOUT.as_secs_f64(),
            policy: None,
            audit_log: None,
            lora: Default::default(),
            threads: 2,
        }
    }
}

impl Options {
    /// From a JSON object (an empty string or `null`: the defaults); one line naming the
    /// field that is wrong otherwise.
    pub fn from_json(text: &str) -> Result<Options, Error> {
        let text = text.trim();
        if text.is_empty() || text == "null" {
            return Ok(Options::default());
        }
        serde_json::from_str(text).map_err(|e| Error::new(ErrorKind::InvalidArgument, format!("options: {e}")))
    }

    fn check(&self) -> Result<(), Error> {
        let bad = |m: String| Err(Error::new(ErrorKind::InvalidArgument, format!("options: {m}")));
        if !(self.request_timeout_s.is_finite() && self.request_timeout_s > 0.0) {
            return bad(format!(
                "request_timeout_s must be a number of seconds above 0, got {}",
                self.request_timeout_s
            ));
        }
        if self.speculate > solo_model::speculative::MAX_DRAFTS {
            return bad(format!(
                "speculate is at most {}, got {}",
                solo_model::speculative::MAX_DRAFTS,
                self.speculate
            ));
        }
        if !(self.cloud_timeout_s.is_finite() && self.cloud_timeout_s > 0.0 && self.cloud_timeout_s <= 3600.0) {
            return bad(format!("cloud_timeout_s must be seconds in (0, 3600], got {}", self.cloud_timeout_s));
        }
        if let Some(url) = &self.cloud_url {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return bad(format!("cloud_url must start with http:// or https://, got {url}"));
            }
        } else if self.cloud_model.is_some() || self.cloud_key_env.is_some() {
            return bad("cloud_model and cloud_key_env need cloud_url".into());
        }
        Ok(())
    }

    /// `solo serve`'s settings for a checkpoint in `dir`.
    fn server_config(&self, dir: &Path) -> Result<solo_server::ServerConfig, Error> {
        let mut config = solo_server::ServerConfig::new(dir);
        config.max_seq = self.max_seq;
        config.max_batch = self.max_batch.max(1);
        config.max_queue = self.max_queue.max(1);
        config.cache_bytes = self.cache_mb << 20;
        config.request_timeout = Duration::from_secs_f64(self.request_timeout_s);
        config.speculate = self.speculate;
        config.lora = self.lora.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        if let Some(name) = &self.model_name {
            config.model_name = name.clone();
        }
        config.hybrid = self.hybrid()?;
        Ok(config)
    }

    fn hybrid(&self) -> Result<Option<solo_server::hybrid::HybridConfig>, Error> {
        if self.cloud_url.is_none() && self.policy.is_none() {
            return Ok(None);
        }
        let cloud_key = match &self.cloud_key_env {
            Some(var) => Some(std::env::var(var).map_err(|_| {
                Error::new(ErrorKind::InvalidArgument, format!("options: cloud_key_env {var}: the variable is not set"))
            })?),
            None => None,
        };
        Ok(Some(solo_server::hybrid::HybridConfig {
            cloud_url: self.cloud_url.clone(),
            cloud_model: self.cloud_model.clone(),
            cloud_key,
            policy: load_policy(self.policy.as_deref())?,
            audit_log: self.audit_log.clone(),
            judge: None,
            cloud_timeout: Duration::from_secs_f64(self.cloud_timeout_s),
        }))
    }
}

fn load_policy(path: Option<&Path>) -> Result<solo_gate::Policy, Error> {
    match path {
        Some(p) => {
            solo_gate::Policy::load(p).map_err(|e| Error::new(ErrorKind::InvalidArgument, format!("policy: {e}")))
        }
        None => Ok(solo_gate::Policy::default()),
    }
}

/// One engine: a loaded model, its engine thread and the threads that carry requests. Send and
/// Sync: requests may come from any thread, several at once. Its calls block (`chat` until the
/// prompt is in, `Stream::next_chunk` until a chunk comes, dropping it until the model is freed):
/// from async code, call them on a blocking thread (`tokio::task::spawn_blocking`).
pub struct Engine {
    app: Option<Arc<App>>,
    runtime: Option<tokio::runtime::Runtime>,
    engine_thread: Option<std::thread::JoinHandle<()>>,
    model_dir: PathBuf,
    backend: &'static str,
    policy: Option<PathBuf>,
    gate: OnceLock<Result<solo_gate::Gate, Error>>,
}

impl Engine {
    /// Loads `model` (a checkpoint directory; `None`: the built-in demo checkpoint).
    pub fn open(model: Option<&Path>, options: Options) -> Result<Engine, Error> {
        Engine::open_with_progress(model, options, |_, _| {})
    }

    /// As [`Engine::open`], telling `progress` how far loading is: `(stage, fraction of the
    /// whole load)`, stages `checkpoint`, `text`, `weights`, `ready` (1.0).
    pub fn open_with_progress(
        model: Option<&Path>,
        options: Options,
        mut progress: impl FnMut(&str, f64),
    ) -> Result<Engine, Error> {
        options.check()?;
        let load_failed = |e: anyhow::Error| Error::new(ErrorKind::LoadFailed, format!("{e:#}"));
        progress("checkpoint", 0.0);
        let dir = match model {
            Some(dir) => dir.to_path_buf(),
            None => crate::demo::ensure(&crate::locate::solo_cache_dir()).map_err(load_failed)?,
        };
        let config = options.server_config(&dir)?;
        let cuda = match options.backend {
            Backend::Cpu => false,
            Backend::Cuda => true,
            Backend::Auto => solo_cuda::auto_picks_cuda(&dir),
        };
        progress("text", 0.1);
        // (the text assets load inside `build` before the weights: one step for both)
        progress("weights", 0.2);
        let engine = if cuda {
            // (without max_seq: the checkpoint's, or under a budget the longest that fits)
            let max_seq = options.max_seq;
            let d = dir.clone();
            Engine::start(config, &options, "cuda", move || solo_cuda::load(&d, max_seq))
        } else {
            let d = dir.clone();
            Engine::start(config, &options, "cpu", move || solo_cpu::load(&d))
        }?;
        progress("ready", 1.0);
        Ok(engine)
    }

    /// An engine over a backend of the caller's: `load` builds it on the engine thread; the
    /// text assets (tokenizer, template) come from `dir`. (What `overhead` times the request
    /// path with: a backend that costs nothing.)
    pub fn open_with_backend<B, F>(dir: &Path, options: Options, load: F) -> Result<Engine, Error>
    where
        B: solo_model::Backend + 'static,
        F: FnOnce() -> anyhow::Result<B> + Send + 'static,
    {
        options.check()?;
        Engine::start(options.server_config(dir)?, &options, "custom", load)
    }

    fn start<B, F>(
        config: solo_server::ServerConfig,
        options: &Options,
        backend: &'static str,
        load: F,
    ) -> Result<Engine, Error>
    where
        B: solo_model::Backend + 'static,
        F: FnOnce() -> anyhow::Result<B> + Send + 'static,
    {
        let local =
            solo_server::build(&config, load).map_err(|e| Error::new(ErrorKind::LoadFailed, format!("{e:#}")))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(options.threads.max(1))
            .thread_name("solo-requests")
            .enable_all()
            .build()
            .map_err(|e| Error::new(ErrorKind::Internal, format!("cannot start the request threads: {e}")))?;
        Ok(Engine {
            app: Some(local.app),
            runtime: Some(runtime),
            engine_thread: Some(local.engine_thread),
            model_dir: config.model_dir.clone(),
            backend,
            policy: options.policy.clone(),
            gate: OnceLock::new(),
        })
    }
    fn app(&self) -> &Arc<App> {
        self.app.as_ref().expect("an open engine has its app")
    }

    /// The checkpoint directory, model id, context length, vocabulary, backend, as JSON.
    pub fn info(&self) -> serde_json::Value {
        let app = self.app();
        serde_json::json!({
            "model": app.model_name, "model_dir": self.model_dir.display().to_string(),
            "max_seq": app.max_seq, "vocab": app.vocab, "backend": self.backend,
            "precision": app.precision, "version": env!("CARGO_PKG_VERSION"),
        })
    }

    /// A chat request: the body of `POST /v1/chat/completions` (messages, tools, sampling,
    /// thinking, stop, logprobs, `stream`). Returns once the prompt is in (errors up to then
    /// are this call's); the answer's JSON follows on the stream: the `chat.completion` object,
    /// or with `"stream": true` each `chat.completion.chunk`.
    pub fn chat(&self, request: &str) -> Result<Stream, Error> {
        self.request(Endpoint::Chat, request)
    }

    /// A text completion: the body of `POST /v1/completions`, as [`Engine::chat`].
    pub fn completion(&self, request: &str) -> Result<Stream, Error> {
        self.request(Endpoint::Completion, request)
    }

    fn request(&self, endpoint: Endpoint, request: &str) -> Result<Stream, Error> {
        let app = self.app().clone();
        let runtime = self.runtime.as_ref().expect("an open engine has its runtime");
        let (chunks, rx) = mpsc::channel::<Item>();
        let (head_tx, head_rx) = mpsc::sync_channel::<Result<(), Error>>(1);
        let (cancel, mut cancelled) = tokio::sync::watch::channel(false);
        let body = Bytes::copy_from_slice(request.as_bytes());
        runtime.spawn(async move {
            let answer = async {
                match endpoint {
                    Endpoint::Chat => solo_server::hybrid::chat(State(app), HeaderMap::new(), Ok(body)).await,
                    Endpoint::Completion => solo_server::completions::completions(State(app), Ok(body)).await,
                }
            };
            let response = tokio::select! {
                r = answer => r,
                _ = cancelled.wait_for(|c| *c) => return,
            };
            let status = response.status().as_u16();
            let sse = response.headers().get("content-type").is_some_and(|v| v.as_bytes() == b"text/event-stream");
            let body = response.into_body();
            if !(200..300).contains(&status) {
                let bytes = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                let _ = head_tx.send(Err(Error::from_response(status, &bytes)));
                return;
            }
            let _ = head_tx.send(Ok(()));
            let end = tokio::select! {
                end = relay(body, sse, &chunks) => end,
                _ = cancelled.wait_for(|c| *c) => Err(Error::cancelled()),
            };
            let _ = chunks.send(Item::End(end));
        });
        match head_rx.recv() {
            Ok(Ok(())) => Ok(Stream { rx, cancel: Canceller(Arc::new(cancel)), ended: false }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(Error::closed()),
        }
    }

    /// Token ids of `text` (special tokens written in it, such as `<|im_start|>`, count as
    /// theirs); no chat template.
    pub fn tokenize(&self, text: &str) -> Result<Vec<u32>, Error> {
        self.app().text.tokenizer.encode(text).map_err(|e| Error::new(ErrorKind::InvalidArgument, format!("{e:#}")))
    }

    /// The text of `ids`, special tokens included.
    pub fn detokenize(&self, ids: &[u32]) -> Result<String, Error> {
        let vocab = self.app().vocab;
        if let Some(bad) = ids.iter().find(|&&id| id as usize >= vocab) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("token id {bad} is past the vocabulary ({vocab} ids)"),
            ));
        }
        self.app()
            .text
            .tokenizer
            .decode(ids, false)
            .map_err(|e| Error::new(ErrorKind::InvalidArgument, format!("{e:#}")))
    }

    /// The privacy gate on `text` under this engine's policy, as `solo gate` prints it (outcome for
    /// the cloud, spans, categories).
    pub fn gate_check(&self, text: &str) -> Result<String, Error> {
        let gate = self
            .gate
            .get_or_init(|| load_policy(self.policy.as_deref()).map(solo_gate::Gate::new))
            .as_ref()
            .map_err(Clone::clone)?;
        gate_report(gate, text)
    }
}

/// The gate under the shipped policy (no engine needed), as [`Engine::gate_check`].
pub fn gate_check(text: &str) -> Result<String, Error> {
    static GATE: OnceLock<solo_gate::Gate> = OnceLock::new();
    gate_report(GATE.get_or_init(|| solo_gate::Gate::new(solo_gate::Policy::default())), text)
}

fn gate_report(gate: &solo_gate::Gate, text: &str) -> Result<String, Error> {
    let report = gate.check(text, solo_gate::Destination::Cloud);
    serde_json::to_string(&report).map_err(|e| Error::new(ErrorKind::Internal, e.to_string()))
}

impl Drop for Engine {
    /// Cancels what still runs, stops the request threads, and waits for the engine thread to
    /// free the model.
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            // Dropping the requests' tasks drops their event receivers: the engine lets them go.
            runtime.shutdown_timeout(Duration::from_secs(5));
        }
        // Only when nothing else holds the app does the engine thread end: join it then.
        let last = self.app.take().and_then(Arc::into_inner);
        if let (Some(app), Some(thread)) = (last, self.engine_thread.take()) {
            drop(app);
            let _ = thread.join();
        }
    }
}

#[derive(Clone, Copy)]
enum Endpoint {
    Chat,
    Completion,
}

enum Item {
    Chunk(String),
    End(Result<(), Error>),
}

/// Reads the answer's body: one JSON object, or the SSE events' data (`[DONE]` left out; an
/// error object sent after the headers ends the stream with that error).
async fn relay(mut body: Body, sse: bool, out: &mpsc::Sender<Item>) -> Result<(), Error> {
    let mut buf: Vec<u8> = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| Error::new(ErrorKind::Internal, format!("the answer broke off: {e}")))?;
        let Ok(data) = frame.into_data() else { continue };
        buf.extend_from_slice(&data);
        if !sse {
            continue;
        }
        let mut start = 0;
        while let Some(at) = buf[start..].windows(2).position(|w| w == b"\n\n") {
            let event = &buf[start..start + at];
            start += at + 2;
            let Some(data) = event.strip_prefix(b"data: ") else { continue };
            if data == b"[DONE]" {
                continue;
            }
            let mut text = String::from_utf8_lossy(data).into_owned();
            if text.starts_with("{\"error\"") {
                return Err(Error::from_response(500, data));
            }
            if stamp_chunks() && text.len() > 2 {
                // when libsolo had it (CLOCK_MONOTONIC), for scripts/capi_latency.py
                text.insert_str(1, &format!("\"solo_relayed_ns\":{},", monotonic_ns()));
            }
            if out.send(Item::Chunk(text)).is_err() {
                return Err(Error::cancelled()); // the caller dropped the stream
            }
        }
        buf.drain(..start);
    }
    if !sse {
        let _ = out.send(Item::Chunk(String::from_utf8_lossy(&buf).into_owned()));
    }
    Ok(())
}

/// `SOLO_STAMP_CHUNKS=1`: each streamed chunk gets `solo_relayed_ns`, the CLOCK_MONOTONIC time
/// libsolo took it from the server's handler (what the binding's delivery delay is measured from).
fn stamp_chunks() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("SOLO_STAMP_CHUNKS").is_some_and(|v| v == "1"))
}

fn monotonic_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Cancels one request, from any thread; cancelling twice, or after the end, does nothing.
#[derive(Clone)]
pub struct Canceller(Arc<tokio::sync::watch::Sender<bool>>);

impl Canceller {
    pub fn cancel(&self) {
        self.0.send_replace(true);
    }
}

/// One request's answer: its JSON chunks in order, then the end (an error item if it failed or
/// was cancelled). Dropping it cancels the request.
pub struct Stream {
    rx: mpsc::Receiver<Item>,
    cancel: Canceller,
    ended: bool,
}

impl Stream {
    pub fn canceller(&self) -> Canceller {
        self.cancel.clone()
    }

    /// The next chunk; `Ok(None)` at the end (blocks until one comes).
    pub fn next_chunk(&mut self) -> Result<Option<String>, Error> {
        if self.ended {
            return Ok(None);
        }
        match self.rx.recv() {
            Ok(Item::Chunk(c)) => Ok(Some(c)),
            Ok(Item::End(end)) => {
                self.ended = true;
                end.map(|()| None)
            }
            Err(_) => {
                self.ended = true;
                Err(Error::closed())
            }
        }
    }
}

/// What [`Stream::poll_chunk`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Poll {
    Chunk(String),
    /// Nothing yet.
    Pending,
    /// The end (after the last chunk).
    End,
}

impl Stream {
    /// The next chunk if one is waiting, without blocking.
    pub fn poll_chunk(&mut self) -> Result<Poll, Error> {
        if self.ended {
            return Ok(Poll::End);
        }
        match self.rx.try_recv() {
            Ok(Item::Chunk(c)) => Ok(Poll::Chunk(c)),
            Ok(Item::End(end)) => {
                self.ended = true;
                end.map(|()| Poll::End)
            }
            Err(mpsc::TryRecvError::Empty) => Ok(Poll::Pending),
            Err(mpsc::TryRecvError::Disconnected) => {
                self.ended = true;
                Err(Error::closed())
            }
        }
    }
}

impl Iterator for Stream {
    type Item = Result<String, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_chunk().transpose()
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if !self.ended {
            self.cancel.cancel();
        }
    }
}
