//! `solo`: one model (Qwen3.6-35B-A3B), as fast as the hardware allows.

mod bench;
mod chat;
mod commands;
mod gate;
mod output;
mod pull;
mod serve;
mod svg;

use solo::locate;

use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "solo", version, about = "Inference engine for exactly one model: Qwen3.6-35B-A3B")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// CUDA: run the kernels' portable forms (sm_80 instructions, at most 99 KB of shared memory a
    /// block: what an RTX 3090/4090 runs) on whatever GPU this is.
    #[arg(long, global = true)]
    portable_kernels: bool,
    /// CUDA: size every launch for this many SMs (with --portable-kernels: an RTX 3090 has 82).
    #[arg(long, global = true, value_name = "N")]
    sm_limit: Option<u32>,
    /// CUDA: the GPU memory solo may hold, everything included (e.g. 24GiB): the context and the
    /// lm_head screen are chosen to fit, a request that cannot fit is refused.
    #[arg(long, global = true, value_name = "SIZE", value_parser = solo_cuda::runtime::parse_bytes)]
    gpu_memory: Option<usize>,
}

/// Which backend runs the model.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum BackendChoice {
    /// CUDA when an NVIDIA GPU is present and the checkpoint has the real model's widths, else the CPU.
    Auto,
    /// The f32 reference.
    Cpu,
    /// Our CUDA kernels (H100/H200, the real model's widths).
    Cuda,
}

#[derive(Subcommand)]
enum Command {
    /// Chat with the model: renders the chat template, streams the reply to stdout.
    Run(commands::RunArgs),
    /// A conversation in the terminal: streamed replies, multi-turn, line editing and history;
    /// /reset, /think on|off, /system TEXT, /save FILE; Ctrl-C stops a reply. With stdin not a
    /// terminal, one message per line.
    Chat(chat::ChatArgs),
    /// Download a model repository from the Hugging Face Hub into the Hugging Face cache (where
    /// `solo run`, transformers and vLLM all find it). Honours HF_ENDPOINT, HF_TOKEN, HF_HUB_CACHE /
    /// HF_HOME; resumes an interrupted download.
    Pull {
        /// ORG/NAME on the Hub.
        #[arg(default_value = pull::DEFAULT_REPO)]
        repo: String,
        /// Branch, tag or commit.
        #[arg(long, default_value = "main")]
        revision: String,
        /// Only files whose path matches this glob (`*`, `?`), e.g. `*Q4_K_M*.gguf`; repeatable.
        #[arg(long)]
        include: Vec<String>,
        /// Files downloaded at once.
        #[arg(long, default_value_t = 4)]
        jobs: usize,
    },
    /// Print the logits of every position as JSON `{"logits": [[...], ...]}` (row i predicts token i+1).
    Logits(commands::LogitsArgs),
    /// Prefill and decode speed on the GPU at several context lengths (batch 1).
    Bench(bench::BenchArgs),
    /// OpenAI-compatible HTTP server: /v1/chat/completions, /v1/completions, /v1/models, /health, /metrics.
    Serve(serve::ServeArgs),
    /// The privacy gate: personal data and secrets in stdin, as JSON spans with the policy's outcome.
    Gate(gate::GateArgs),
    /// Write a GGUF file of the release's widths with random weights in llama.cpp's Q4_K_M or Q8_0
    /// mix (a placeholder tokenizer): the same file for `solo bench --model` and llama.cpp's
    /// benchmarks where no real one is (scripts/gguf_side_by_side.sh).
    RandomGguf {
        /// The file to write.
        out: PathBuf,
        /// Decoder layers (the release has 40).
        #[arg(long, default_value_t = 40)]
        layers: usize,
        #[arg(long, value_enum, default_value_t = bench::GgufMix::Q4KM)]
        mix: bench::GgufMix,
    },
    /// Compile every CUDA kernel for these architectures into the kernel cache ($SOLO_CACHE/kernels,
    /// else ~/.cache/solo/kernels), as the first start on such a GPU would: needs NVRTC, not a GPU.
    /// A machine given the cache starts without compiling (scripts/gpu_run.sh).
    Kernels {
        /// sm_80, sm_86, sm_87, sm_89, sm_90a, sm_100a, sm_103a, sm_120 or sm_121; repeatable.
        #[arg(long, default_value = "sm_90a")]
        arch: Vec<String>,
    },
    /// Mean negative log-likelihood and perplexity of a text file, as JSON.
    Perplexity {
        #[arg(long)]
        model: PathBuf,
        #[arg(long)]
        text_file: PathBuf,
        #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
        backend: BackendChoice,
    },
}

fn main() {
    let cli = Cli::parse();
    let gpu = solo_cuda::runtime::GpuOptions {
        portable: cli.portable_kernels,
        sm_limit: cli.sm_limit,
        gpu_memory: cli.gpu_memory,
    };
    if gpu != Default::default() {
        if let Err(e) = solo_cuda::runtime::configure(gpu) {
            eprintln!("error: {e:#}");
            std::process::exit(2);
        }
    }
    let result = match cli.command {
        Command::Run(args) => commands::run(args),
        Command::Logits(args) => commands::logits(args),
        Command::Bench(args) => bench::bench(args),
        Command::Serve(args) => serve::serve(args),
        Command::Chat(args) => chat::chat(args),
        Command::Pull { repo, revision, include, jobs } => pull::pull(pull::PullArgs { repo, revision, include, jobs }),
        Command::Gate(args) => gate::gate(args),
        Command::RandomGguf { out, layers, mix } => bench::random_gguf(&out, layers, mix),
        Command::Perplexity { model, text_file, backend } => commands::perplexity(&model, &text_file, backend),
        Command::Kernels { arch } => arch.iter().try_for_each(|a| {
            let dir = solo_cuda::runtime::fill_kernel_cache(a)?;
            println!("{a}: every kernel file compiled into {}", dir.display());
            Ok(())
        }),
    };
    if let Err(err) = result {
        // A closed pipe (`solo logits … | head`) is the reader's choice, not our failure.
        let broken_pipe =
            err.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe);
        if broken_pipe {
            std::process::exit(0);
        }
        eprintln!("solo: error: {err:#}");
        std::process::exit(1);
    }
}
