//! `solo serve`: the OpenAI-compatible server (crate `solo-server`) on the chosen backend.

use crate::locate::{self, ModelDir};
use crate::BackendChoice;
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args)]
pub struct ServeArgs {
    /// Checkpoint directory. Default: as for `solo run`.
    #[arg(long)]
    model: Option<PathBuf>,
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    #[arg(long, default_value_t = 8000)]
    port: u16,
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    backend: BackendChoice,
    /// Context length, prompt plus completion. Default: the checkpoint's `max_position_embeddings`
    /// (262,144 for Qwen3.6-35B-A3B; on CUDA each running sequence's KV cache is sized for it).
    #[arg(long)]
    max_seq: Option<usize>,
    /// Require `Authorization: Bearer KEY` on /v1/ routes.
    #[arg(long)]
    api_key: Option<String>,
    /// The model id clients send and /v1/models lists. Default: from the checkpoint's path.
    #[arg(long)]
    model_name: Option<String>,
    /// Requests that may wait while one runs; more get 503 + Retry-After.
    #[arg(long, default_value_t = 64)]
    max_queue: usize,
    /// Seconds from arrival to the last token of a request.
    #[arg(long, default_value_t = 600)]
    request_timeout: u64,
    /// Seconds a client has to send its request headers (also how long an idle keep-alive
    /// connection stays open); 0: no limit.
    #[arg(long, default_value_t = 10)]
    header_timeout: u64,
    /// Seconds a client has to send the request body once its headers are in; past it, 408.
    /// 0: no limit. Streamed replies are not timed.
    #[arg(long, default_value_t = 30)]
    body_timeout: u64,
    /// Connections served at once; more get 503 + Retry-After.
    #[arg(long, default_value_t = 1024)]
    max_connections: usize,
    /// MTP drafts per decode step (speculative decoding; replies distributed as without). 0, the
    /// default, turns it off; ignored when the checkpoint has no MTP head; at most 15.
    #[arg(long, default_value_t = 0, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=solo_model::speculative::MAX_DRAFTS as u64))]
    speculate: usize,
    /// Requests generating at once: each engine step gives every one of them a prefill piece or
    /// a token (more wait in the queue).
    #[arg(long, default_value_t = 8)]
    max_batch: usize,
    /// Decode the generating requests' tokens one step each, in turns, instead of together in
    /// one batched step (the default: on CUDA each weight is read once for up to 8 sequences and
    /// each one's token drawn on the GPU; 1.5–1.7× the aggregate rate of turns at 2–8 streams
    /// on the H200, bench/RESULTS.md "Batched decoding").
    #[arg(long)]
    no_batch_decode: bool,
    /// Serve the PEFT LoRA adapter in DIR as the model id NAME beside the base model
    /// (repeatable); a request's `model` picks it. More load at run time through
    /// `POST /v1/load_lora_adapter`. Both backends run adapters of every linear layer and of the
    /// routed experts.
    #[arg(long = "lora", value_name = "NAME=DIR", value_parser = lora_arg)]
    lora: Vec<(String, PathBuf)>,
    /// Images in chat requests: most images in one request.
    #[arg(long, default_value_t = 8)]
    max_images: usize,
    /// Images: most bytes of one image file, in MiB.
    #[arg(long, default_value_t = 20)]
    max_image_mb: usize,
    /// Images: most pixels of one stored image (width × height, before resizing), in millions.
    #[arg(long, default_value_t = 50)]
    max_image_megapixels: u64,
    /// Memory for the prefix cache's state snapshots, in MiB (0 turns it off).
    #[arg(long, default_value_t = 8192)]
    cache_mb: usize,
    /// Hybrid routing: an OpenAI-compatible base URL (e.g. https://api.openai.com/v1). Chat
    /// requests pass the privacy gate; what the policy allows goes there, masked as it says.
    #[arg(long)]
    cloud_url: Option<String>,
    /// The `model` sent to the cloud. Default: the client's.
    #[arg(long)]
    cloud_model: Option<String>,
    /// Name of the environment variable that holds the cloud's API key.
    #[arg(long)]
    cloud_key_env: Option<String>,
    /// Seconds to wait for the cloud's first byte, and between its bytes; past them the cloud
    /// counts as unreachable (the policy's `on_cloud_error`: a local answer marked
    /// `X-Solo-Route: local-fallback`, or a 502).
    #[arg(long, default_value_t = solo_server::hybrid::DEFAULT_CLOUD_TIMEOUT.as_secs_f64())]
    cloud_timeout: f64,
    /// Privacy policy (TOML). Default: the shipped one. Also gates local-only serving.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Audit log of gated requests (JSON lines, no values). Default with --cloud-url:
    /// ~/.cache/solo/gate-audit.jsonl.
    #[arg(long)]
    audit_log: Option<PathBuf>,
    /// The gate's second stage: `local` asks the local engine to classify the requests whose
    /// topic verdict is unsure (no category, a score in the band); no usable answer keeps the
    /// request local. Needs --cloud-url.
    #[arg(long, value_enum, default_value_t = GateJudge::Off)]
    gate_judge: GateJudge,
    /// Seconds the judge has to answer; past them the request stays local.
    #[arg(long, default_value_t = solo_server::judge::DEFAULT_TIMEOUT.as_secs_f64())]
    gate_judge_timeout: f64,
}

/// `--gate-judge`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum GateJudge {
    /// The first stage alone (detectors, lexicon, learned model).
    Off,
    /// The local engine classifies the first stage's unsure requests.
    Local,
}

/// The judge's settings, checked: it needs a cloud to keep requests from, and a timeout.
fn judge(choice: GateJudge, timeout: f64, cloud_url: Option<&str>) -> Result<Option<solo_server::judge::JudgeConfig>> {
    if choice == GateJudge::Off {
        return Ok(None);
    }
    anyhow::ensure!(
        cloud_url.is_some(),
        "--gate-judge local needs --cloud-url: without a cloud every request is answered on this machine, so there is nothing to judge"
    );
    anyhow::ensure!(
        timeout.is_finite() && timeout > 0.0 && timeout <= 600.0,
        "--gate-judge-timeout must be a number of seconds above 0 and at most 600, got {timeout}"
    );
    Ok(Some(solo_server::judge::JudgeConfig { timeout: Duration::from_secs_f64(timeout) }))
}

/// The gate's settings; an unreadable policy stops the server before it starts, naming the line.
fn hybrid(
    cloud_url: Option<String>,
    cloud_model: Option<String>,
    cloud_key_env: Option<String>,
    policy: Option<PathBuf>,
    audit_log: Option<PathBuf>,
    judge: Option<solo_server::judge::JudgeConfig>,
) -> Result<Option<solo_server::hybrid::HybridConfig>> {
    if cloud_url.is_none() && policy.is_none() {
        anyhow::ensure!(
            cloud_model.is_none() && cloud_key_env.is_none(),
            "--cloud-model and --cloud-key-env need --cloud-url"
        );
        return Ok(None);
    }
    let policy = match &policy {
        Some(path) => solo_gate::Policy::load(path).map_err(anyhow::Error::msg)?,
        None => solo_gate::Policy::default(),
    };
    let cloud_key = match &cloud_key_env {
        Some(var) => Some(
            std::env::var(var)
                .map_err(|_| anyhow::anyhow!("--cloud-key-env {var}: the environment variable is not set"))?,
        ),
        None => None,
    };
    let audit_log = audit_log.or_else(|| {
        cloud_url.as_ref()?;
        let home = std::env::var_os("HOME")?;
        Some(PathBuf::from(home).join(".cache/solo/gate-audit.jsonl"))
    });
    if let Some(url) = &cloud_url {
        anyhow::ensure!(
            url.starts_with("http://") || url.starts_with("https://"),
            "--cloud-url must start with http:// or https://, got {url}"
        );
        eprintln!(
            "solo: hybrid routing to {url}; every chat request passes the privacy gate{}",
            audit_log.as_ref().map(|p| format!(" (audit log: {})", p.display())).unwrap_or_default()
        );
    }
    if let Some(j) = &judge {
        eprintln!(
            "solo: --gate-judge local: requests the gate is unsure about are classified by the local model first (timeout {:.1} s; no usable answer keeps them here)",
            j.timeout.as_secs_f64()
        );
    }
    Ok(Some(solo_server::hybrid::HybridConfig {
        cloud_url,
        cloud_model,
        cloud_key,
        policy,
        audit_log,
        judge,
        cloud_timeout: solo_server::hybrid::DEFAULT_CLOUD_TIMEOUT,
    }))
}

/// A port already taken fails before the model loads, in one line that says what to do.
fn check_port(host: &str, port: u16) -> Result<()> {
    match std::net::TcpListener::bind((host, port)) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => anyhow::bail!(
            "port {port} on {host} is already in use (another solo serve?): stop that program or pick another \
             port with --port N"
        ),
        Err(e) => Err(e).with_context(|| format!("cannot listen on {host}:{port}")),
    }
}

/// `NAME=DIR` of `--lora`.
fn lora_arg(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((name, dir)) if !name.is_empty() && !dir.is_empty() => Ok((name.to_string(), PathBuf::from(dir))),
        _ => {
            Err(format!("`{s}`: --lora takes NAME=DIR (the model id to serve it as, and the PEFT adapter's directory)"))
        }
    }
}

pub fn serve(args: ServeArgs) -> Result<()> {
    let ModelDir { path: dir, is_demo } = locate::resolve(args.model.as_deref())?;
    if is_demo {
        eprintln!(
            "solo: Qwen3.6-35B-A3B is not in the Hugging Face cache and no --model was given; serving the \
             built-in demo checkpoint ({}), a tiny model that knows only its 138 training questions \
             (`solo pull` downloads the real model).",
            dir.display()
        );
    }
    check_port(&args.host, args.port)?;
    let mut config = solo_server::ServerConfig::new(&dir);
    config.host = args.host;
    config.port = args.port;
    config.api_key = args.api_key;
    config.max_seq = args.max_seq;
    config.max_queue = args.max_queue;
    config.request_timeout = Duration::from_secs(args.request_timeout);
    config.header_timeout = Duration::from_secs(args.header_timeout);
    config.body_timeout = Duration::from_secs(args.body_timeout);
    config.max_connections = args.max_connections.max(1);
    config.cache_bytes = args.cache_mb << 20;
    if let Some(name) = args.model_name {
        config.model_name = name;
    }
    let judge = judge(args.gate_judge, args.gate_judge_timeout, args.cloud_url.as_deref())?;
    config.hybrid = hybrid(args.cloud_url, args.cloud_model, args.cloud_key_env, args.policy, args.audit_log, judge)?;
    anyhow::ensure!(
        args.cloud_timeout > 0.0 && args.cloud_timeout <= 3600.0,
        "--cloud-timeout must be a number of seconds above 0 and at most 3600, got {}",
        args.cloud_timeout
    );
    if let Some(h) = &mut config.hybrid {
        h.cloud_timeout = Duration::from_secs_f64(args.cloud_timeout);
    }
    let name = config.model_name.clone();
    // (a config.json that does not parse fails the load below, naming the file)
    let model_config = solo_model::config_of(&dir).ok();
    let gguf = solo_model::gguf::is_gguf(&dir);
    if gguf {
        eprintln!("solo: {}", solo_model::gguf::GgufModel::open(&dir)?.describe());
    }
    let cuda = match args.backend {
        BackendChoice::Cpu => false,
        BackendChoice::Cuda => {
            crate::commands::check_gpu()?;
            true
        }
        BackendChoice::Auto => solo_cuda::auto_picks_cuda(&dir),
    };
    config.speculate = args.speculate;
    config.max_batch = args.max_batch;
    config.batch_decode = !args.no_batch_decode;
    config.lora = args.lora;
    config.image_limits = solo_server::images::ImageLimits {
        max_bytes: args.max_image_mb << 20,
        max_pixels: args.max_image_megapixels * 1_000_000,
        max_images: args.max_images,
    };
    let server = if cuda {
        // The CUDA backend allocates its KV cache for the context length up front; without
        // --max-seq it takes the checkpoint's, or under --gpu-memory the longest that fits, and
        // says so in the model's max_position_embeddings (the server's default).
        let max_seq = args.max_seq;
        solo_server::start(config, move || solo_cuda::load(&dir, max_seq))?
    } else {
        solo_server::start(config, move || solo_cpu::load(&dir))?
    };
    let precision = match (gguf, cuda) {
        (true, true) => "bf16 repacked from GGUF",
        (true, false) => "GGUF",
        _ => model_config.map_or("bf16", |c| c.precision.name()),
    };
    eprintln!(
        "solo: serving {name} ({precision} weights, {} backend) at http://{}/v1 (OpenAI-compatible; Ctrl-C stops)",
        if cuda { "cuda" } else { "cpu" },
        server.addr()
    );
    server.wait()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_judge_needs_a_cloud_and_a_timeout() {
        assert!(judge(GateJudge::Off, 2.0, None).unwrap().is_none());
        let err = judge(GateJudge::Local, 2.0, None).unwrap_err().to_string();
        assert!(err.contains("needs --cloud-url"), "{err}");
        let err = judge(GateJudge::Local, 0.0, Some("http://127.0.0.1:9")).unwrap_err().to_string();
        assert!(err.contains("--gate-judge-timeout"), "{err}");
        let j = judge(GateJudge::Local, 0.5, Some("http://127.0.0.1:9")).unwrap().unwrap();
        assert_eq!(j.timeout, Duration::from_millis(500));
    }
}
