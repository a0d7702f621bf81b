//! `solo serve`: an OpenAI-compatible HTTP server (axum on tokio) around one engine thread.
//!
//! ```text
//! HTTP handlers ──(bounded queue: 503 when full)──▶ engine thread ──▶ Backend (CPU, CUDA)
//!   request.rs  read and check the fields          engine.rs    the thread, jobs and events
//!   prompt.rs   chat template, tokens              generate.rs  one job: cache, prefill, decode
//!   chat.rs     reasoning/tools, JSON or SSE       prefix_cache.rs  snapshots of sequence states
//!   completions.rs                                 stop.rs      stop strings
//!   parser.rs + tool_args.rs  <think> and <tool_call> out of the streamed text
//!   routes.rs   router, auth, metrics.rs, error.rs
//!   conn.rs     accept loop: header and body timeouts, the connection cap, graceful shutdown
//!   hybrid.rs   the privacy gate and the hybrid (local / cloud) route of chat requests;
//!               outbound.rs what may leave (allow-list, every string), cloud.rs the cloud side
//!   web.rs      `GET /`: the chat page (assets/, compiled in)
//!   lora.rs     LoRA adapters: which ones are served, picking one per request, loading at run time
//! ```
//!
//! The engine is generic over [`solo_model::Backend`]; [`start`] takes a function that builds the
//! backend on the engine thread, so a backend need not be `Send`.

pub mod chat;
pub mod cloud;
pub mod completions;
pub mod conn;
pub mod engine;
pub mod error;
pub mod generate;
pub mod handlers;
pub mod hybrid;
pub mod images;
pub mod judge;
pub mod lora;
pub mod metrics;
pub mod outbound;
pub mod parser;
pub mod prefix_cache;
pub mod prompt;
pub mod request;
pub mod routes;
pub mod stop;
pub mod tool_args;
pub mod web;

use anyhow::{Context as _, Result};
use engine::EngineConfig;
use handlers::App;
use metrics::Metrics;
use prompt::TextAssets;
use solo_model::sampler::SplitMix;
use solo_model::Backend;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Checkpoint directory: tokenizer, chat template, generation_config.json.
    pub model_dir: PathBuf,
    /// The id clients send as `model` and `/v1/models` lists.
    pub model_name: String,
    pub host: String,
    /// 0 picks a free port (see [`Server::addr`]).
    pub port: u16,
    pub api_key: Option<String>,
    /// Context length (prompt + completion); default and ceiling: the model's
    /// `max_position_embeddings`.
    pub max_seq: Option<usize>,
    /// Requests that may wait for the engine; one more gets a 503.
    pub max_queue: usize,
    /// From arrival to the last token; past it a waiting request gets a 503 and a running one
    /// ends with `finish_reason: "length"`.
    pub request_timeout: Duration,
    pub max_body_bytes: usize,
    /// A client must send its request headers within this (also: how long an idle keep-alive
    /// connection stays open); past it the connection is closed. Zero: no limit.
    pub header_timeout: Duration,
    /// ... and the body within this of the headers; past it, 408 and the connection closes.
    /// Zero: no limit. Streamed replies are not timed.
    pub body_timeout: Duration,
    /// Connections served at once; one more gets a 503 with `Retry-After` and is closed.
    pub max_connections: usize,
    pub cache_entries: usize,
    pub cache_bytes: usize,
    /// Snapshot the state every this many prompt tokens (besides message boundaries); `None`
    /// (the default): every 2048, or every backend prefill chunk where that is longer (CUDA:
    /// 4096, so that no prompt is cut finer than the backend prefills fastest).
    pub snapshot_interval: Option<usize>,
    /// Longest prefill call, in tokens; `None` (the default): the backend's own chunk, so a
    /// prompt is cut only at snapshot points and where the backend needs it.
    pub prefill_chunk: Option<usize>,
    /// MTP drafts per decode step (speculative decoding) when the backend can draft; 0: off.
    pub speculate: usize,
    /// Most requests generating at once (the rest wait in the queue).
    pub max_batch: usize,
    /// Decode the running requests' tokens in one batched backend step
    /// (`Backend::decode_batch_and_pick`, or `decode_batch` where a request needs its logits)
    /// instead of one step each; on by default.
    pub batch_decode: bool,
    /// The privacy gate and hybrid router (see [`hybrid`]).
    pub hybrid: Option<hybrid::HybridConfig>,
    /// LoRA adapters served from the start: (model id, PEFT adapter directory).
    pub lora: Vec<(String, PathBuf)>,
    /// Limits on images in chat requests (`images`).
    pub image_limits: images::ImageLimits,
}

impl ServerConfig {
    pub fn new(model_dir: impl Into<PathBuf>) -> Self {
        let model_dir = model_dir.into();
        ServerConfig {
            model_name: model_name_for(&model_dir),
            model_dir,
            host: "127.0.0.1".into(),
            port: 8000,
            api_key: None,
            max_seq: None,
            max_queue: 64,
            request_timeout: Duration::from_secs(600),
            max_body_bytes: 32 << 20,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            max_connections: 1024,
            cache_entries: 64,
            cache_bytes: 8 << 30,
            snapshot_interval: None,
            prefill_chunk: None,
            speculate: 0,
            max_batch: 8,
            batch_decode: true,
            hybrid: None,
            lora: Vec::new(),
            image_limits: images::ImageLimits::default(),
        }
    }
}

/// How the server takes images, or why it takes none (the model has no tower, the backend does
/// not run it, `preprocessor_config.json` is missing or wrong).
fn vision_for(
    config: &ServerConfig,
    model: &solo_model::ModelConfig,
    support: Result<(), String>,
) -> Result<Arc<images::Vision>, String> {
    support?;
    let v = model.vision.as_ref().ok_or("the model has no vision tower")?;
    let preprocessor =
        solo_model::vision::PreprocessorConfig::from_dir(&config.model_dir, v).map_err(|e| format!("{e:#}"))?;
    Ok(Arc::new(images::Vision {
        preprocessor,
        merge: v.spatial_merge_size,
        image_token: v.image_token_id,
        limits: config.image_limits,
    }))
}

/// `Qwen/Qwen3.6-35B-A3B` for a Hugging Face cache snapshot
/// (`…/models--Qwen--Qwen3.6-35B-A3B/snapshots/<rev>`), else the directory's name.
pub fn model_name_for(dir: &Path) -> String {
    let repo = dir.ancestors().filter_map(|p| p.file_name()?.to_str()).find_map(|n| n.strip_prefix("models--"));
    if let Some(repo) = repo {
        return repo.replacen("--", "/", 1);
    }
    let canonical = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    canonical.file_name().and_then(|n| n.to_str()).unwrap_or("solo").to_string()
}

/// A running server; dropping it starts a graceful shutdown.
pub struct Server {
    addr: SocketAddr,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<std::io::Result<()>>>,
}

impl Server {
    /// Where it listens (with the real port when 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Blocks until the server stops.
    pub fn wait(mut self) -> Result<()> {
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(result)) => Ok(result?),
            Some(Err(_)) => anyhow::bail!("the HTTP server thread panicked"),
            None => Ok(()),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// The engine without the HTTP server: what `solo serve` serves, for a program that calls the
/// handlers itself (`solo::Engine`, libsolo).
pub struct Local {
    pub app: Arc<App>,
    /// The engine thread: it ends once `app` (and every clone of it) is gone and the running
    /// requests are done; joining it then waits for the backend's memory to be freed.
    pub engine_thread: std::thread::JoinHandle<()>,
}

/// Loads the text assets and starts the engine thread (where `load` builds the backend);
/// returns once the model is loaded. [`start`] puts the HTTP server in front of it.
pub fn build<B, F>(config: &ServerConfig, load: F) -> Result<Local>
where
    B: Backend + 'static,
    F: FnOnce() -> Result<B> + Send + 'static,
{
    let text = Arc::new(TextAssets::from_dir(&config.model_dir)?);
    let metrics = Arc::new(Metrics::new());
    let engine_config = EngineConfig {
        stop_ids: text.stop_ids.clone(),
        prefill_chunk: config.prefill_chunk.map(|c| c.max(1)),
        speculate: config.speculate.min(solo_model::speculative::MAX_DRAFTS),
        max_batch: config.max_batch.max(1),
        batch_decode: config.batch_decode,
        snapshot_interval: config.snapshot_interval.map(|n| n.max(1)),
        cache_entries: config.cache_entries,
        cache_bytes: config.cache_bytes,
    };
    let engine::Spawned { engine, model, image_support, lora_support, thread: engine_thread } =
        engine::spawn(load, text.tokenizer.clone(), engine_config, metrics.clone(), config.max_queue)?;
    let vision = vision_for(config, &model, image_support);
    let max_seq = config.max_seq.map_or(model.max_position_embeddings, |n| n.min(model.max_position_embeddings));
    let lora = lora::Adapters::new(model.clone(), lora_support);
    for (name, dir) in &config.lora {
        let a = lora.load(name, dir).with_context(|| format!("LoRA adapter `{name}`"))?;
        eprintln!(
            "LoRA adapter `{name}`: {} (rank {}, {} matrices, {:.1} MB)",
            dir.display(),
            a.rank,
            a.matrices,
            a.bytes as f64 / 1e6
        );
    }
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let app = Arc::new(App {
        model_name: config.model_name.clone(),
        api_key: config.api_key.clone(),
        max_seq,
        request_timeout: config.request_timeout,
        max_body_bytes: config.max_body_bytes,
        body_timeout: config.body_timeout,
        vocab: model.vocab_size,
        precision: model.precision.name(),
        created: handlers::unix_now(),
        text,
        engine,
        metrics,
        rng: Mutex::new(SplitMix(seed)),
        hybrid: match &config.hybrid {
            Some(h) => Some(Arc::new(hybrid::Hybrid::new(h.clone())?)),
            None => None,
        },
        lora,
        vision,
    });
    Ok(Local { app, engine_thread })
}

/// Loads the text assets, starts the engine thread (where `load` builds the backend) and the
/// HTTP server; returns once the socket is bound and the model is loaded.
pub fn start<B, F>(config: ServerConfig, load: F) -> Result<Server>
where
    B: Backend + 'static,
    F: FnOnce() -> Result<B> + Send + 'static,
{
    let app = build(&config, load)?.app;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind((config.host.as_str(), config.port)))
        .with_context(|| format!("cannot listen on {}:{}", config.host, config.port))?;
    let addr = listener.local_addr()?;
    let (shutdown, stop) = tokio::sync::oneshot::channel::<()>();
    let limits = conn::Limits {
        header_timeout: config.header_timeout,
        body_timeout: config.body_timeout,
        max_connections: config.max_connections,
    };
    let metrics = app.metrics.clone();
    let thread = std::thread::Builder::new().name("solo-http".into()).spawn(move || {
        runtime.block_on(conn::serve(listener, routes::router(app), limits, metrics, async move {
            let _ = stop.await;
        }));
        Ok(())
    })?;
    Ok(Server { addr, shutdown: Some(shutdown), thread: Some(thread) })
}
