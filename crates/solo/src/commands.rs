//! The subcommands: `run`, `logits`, `perplexity`.

use crate::locate::{self, ModelDir};
use crate::output::Printer;
use crate::BackendChoice;
use anyhow::{bail, Context, Result};
use solo_cpu::CpuModel;
use solo_cuda::CudaModel;
use solo_model::lora::LoraAdapter;
use solo_model::sampler::{Sampler, SamplerConfig};
use solo_model::speculative::{self, Acceptance};
use solo_model::{Backend, Logits, PromptImage};
use solo_text::{ChatTemplate, TemplateOptions, Tokenizer};
use std::collections::VecDeque;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// A loaded model on either backend.
pub enum Engine {
    Cpu(Box<CpuModel>),
    Cuda(Box<CudaModel>),
}

/// Runs `$body` with `$m` bound to the loaded backend, whichever it is.
macro_rules! with_engine {
    ($engine:expr, $m:ident => $body:expr) => {
        match $engine {
            Engine::Cpu($m) => {
                let $m = &**$m;
                $body
            }
            Engine::Cuda($m) => {
                let $m = &**$m;
                $body
            }
        }
    };
}

pub fn load_engine(dir: &Path, choice: BackendChoice) -> Result<Engine> {
    let gguf = solo_model::gguf::is_gguf(dir);
    if gguf {
        // the load line: the file's types and bytes
        eprintln!("solo: {}", solo_model::gguf::GgufModel::open(dir)?.describe());
    }
    let cuda = match choice {
        BackendChoice::Cpu => false,
        BackendChoice::Cuda => {
            check_gpu()?;
            true
        }
        // a GGUF file runs on the GPU repacked to bf16 when the card holds that
        BackendChoice::Auto => solo_cuda::auto_picks_cuda(dir),
    };
    Ok(if cuda {
        Engine::Cuda(Box::new(solo_cuda::load(dir, None)?))
    } else {
        Engine::Cpu(Box::new(solo_cpu::load(dir)?))
    })
}

/// `--backend cuda` on a machine without an NVIDIA GPU: one line that says what to do.
pub fn check_gpu() -> Result<()> {
    if !solo_cuda::gpu_present() {
        bail!(
            "--backend cuda: no NVIDIA GPU found (no CUDA driver or no device); use --backend cpu, or leave \
             --backend auto to pick the GPU when there is one"
        );
    }
    Ok(())
}

/// `solo run`.
#[derive(clap::Args)]
pub struct RunArgs {
    /// Checkpoint directory. Default: Qwen3.6-35B-A3B from the Hugging Face cache, else the
    /// built-in demo checkpoint (a tiny trained model: short answers to simple questions).
    #[arg(long)]
    pub model: Option<PathBuf>,
    #[arg(long)]
    pub prompt: String,
    #[arg(long, default_value_t = 256)]
    pub max_tokens: usize,
    /// Sampling temperature; 0 is greedy. Default: the checkpoint's generation_config (else 1.0).
    #[arg(long)]
    pub temperature: Option<f32>,
    /// Seed for sampling. Default: from the clock.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Turn thinking off (`enable_thinking=false` in the chat template).
    #[arg(long)]
    pub no_think: bool,
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    pub backend: BackendChoice,
    /// Draft tokens per step from the checkpoint's MTP head (speculative decoding: several
    /// tokens per verify step, distributed as without; greedy, the same tokens on the CPU).
    /// 0, the default, turns it off; at most 15.
    #[arg(long, default_value_t = 0, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=solo_model::speculative::MAX_DRAFTS as u64))]
    pub speculate: usize,
    /// Run with the PEFT LoRA adapter in this directory (`adapter_config.json` +
    /// `adapter_model.safetensors`).
    #[arg(long, value_name = "DIR")]
    pub lora: Option<PathBuf>,
    /// An image (PNG, JPEG, WebP, GIF) put before the prompt's text, through the checkpoint's
    /// vision tower; repeatable. CPU backend for now.
    #[arg(long = "image", value_name = "FILE")]
    pub images: Vec<PathBuf>,
    /// Print no reasoning (by default it goes to stderr, dimmed on a terminal; stdout holds
    /// the answer alone).
    #[arg(long)]
    pub no_reasoning: bool,
}

/// `--speculate` against the backend: K > 0 needs an MTP head. Off unless asked for: the CUDA
/// verify step runs the prefill path, which costs more than the drafts save (bench/RESULTS.md).
pub fn check_speculation<B: Backend>(model: &B, k: usize, dir: &Path) -> Result<()> {
    if k > 0 && !model.can_draft() {
        bail!("--speculate {k}: {} has no MTP head (mtp.* tensors) to draft with", dir.display());
    }
    Ok(())
}

/// Chat: template, prefill, sample and stream until a stop token or `max_tokens`.
pub fn run(args: RunArgs) -> Result<()> {
    let ModelDir { path: dir, is_demo } = locate::resolve(args.model.as_deref())?;
    if is_demo {
        eprintln!(
            "solo: Qwen3.6-35B-A3B is not in the Hugging Face cache and no --model was given; \
             using the built-in demo checkpoint ({}), a tiny model that knows only its 138 training questions \
             (colors, animal sounds, capitals, opposites, days, small sums; `solo pull` downloads the real model).",
            dir.display()
        );
    }
    let engine = load_engine(&dir, args.backend)?;
    let tokenizer = Tokenizer::from_dir(&dir)?;
    let template = ChatTemplate::from_dir(&dir)?;
    let stops = solo_text::stop_token_ids(&dir)?;

    let messages = if args.images.is_empty() {
        serde_json::json!([{ "role": "user", "content": args.prompt }])
    } else {
        let mut parts: Vec<serde_json::Value> =
            args.images.iter().map(|_| serde_json::json!({"type": "image"})).collect();
        parts.push(serde_json::json!({"type": "text", "text": args.prompt}));
        serde_json::json!([{ "role": "user", "content": parts }])
    };
    let opts = TemplateOptions {
        add_generation_prompt: true,
        enable_thinking: args.no_think.then_some(false),
        preserve_thinking: None,
    };
    let rendered = template.render(&messages, None, &opts)?;
    let mut prompt = tokenizer.encode(&rendered)?;
    let starts_in_reasoning = solo_text_ends_in_think(&rendered);
    let sampler = Sampler::new(sampler_config(&dir, args.temperature, args.seed)?);
    let cuda = matches!(engine, Engine::Cuda(_));
    let backend = if cuda { "cuda" } else { "cpu" };
    let precision = with_engine!(&engine, model => model.config().precision.name());
    let speculate = args.speculate;
    with_engine!(&engine, model => check_speculation(model, speculate, &dir))?;
    eprintln!("solo: {precision} weights, {backend} backend");
    let lora = match &args.lora {
        Some(lora_dir) => {
            let config = with_engine!(&engine, model => model.config().clone());
            let a = LoraAdapter::load(lora_dir, &config)?;
            eprintln!("solo: LoRA adapter {} (rank {}, {} matrices)", lora_dir.display(), a.rank, a.matrices);
            Some(Arc::new(a))
        }
        None => None,
    };
    let images = with_engine!(&engine, model => prompt_images(model, &dir, &args.images, &mut prompt, &mut []))?;
    let printer = Printer::for_run(!args.no_reasoning, starts_in_reasoning);
    with_engine!(&engine, model => generate(model, &tokenizer, &stops, (&prompt, &images), sampler, &args, lora, printer))
}

/// `--image FILE`s: each decoded and preprocessed as the checkpoint's `preprocessor_config.json`
/// says and put through the vision tower; its one placeholder in `prompt` expanded, and `points`
/// (token counts of the unexpanded prompt) moved along.
fn prompt_images<B: Backend>(
    model: &B,
    dir: &Path,
    files: &[PathBuf],
    prompt: &mut Vec<u32>,
    points: &mut [usize],
) -> Result<Vec<PromptImage>> {
    if files.is_empty() {
        return Ok(Vec::new());
    }
    model.image_support().context("--image")?;
    let v = model.config().vision.as_ref().context("--image: the model has no vision tower")?;
    let vision = solo_server::images::Vision {
        preprocessor: solo_model::vision::PreprocessorConfig::from_dir(dir, v)?,
        merge: v.spatial_merge_size,
        image_token: v.image_token_id,
        limits: solo_server::images::ImageLimits::default(),
    };
    let mut patches = Vec::new();
    for f in files {
        let bytes = std::fs::read(f).with_context(|| format!("cannot read {}", f.display()))?;
        let limits = solo_model::image::DecodeLimits { max_pixels: vision.limits.max_pixels };
        let rgb = solo_model::image::decode(&bytes, limits).with_context(|| f.display().to_string())?;
        patches
            .push(solo_model::image::preprocess(&rgb, &vision.preprocessor).with_context(|| f.display().to_string())?);
    }
    let placed = solo_server::images::expand_placeholders(prompt, points, patches, &vision)
        .map_err(|e| anyhow::anyhow!("{}", e.message))?;
    let started = Instant::now();
    let mut out = Vec::new();
    for img in placed {
        let embeds = model.encode_image(&img.patches)?;
        out.push(PromptImage { start: img.start, grid: img.grid, embeds: Arc::new(embeds) });
    }
    eprintln!(
        "solo: {} image(s), {} tokens, vision tower {:.0} ms",
        out.len(),
        out.iter().map(|i| i.tokens()).sum::<usize>(),
        started.elapsed().as_secs_f64() * 1e3
    );
    Ok(out)
}

/// The rendered prompt ends inside an open `<think>` block: the reply starts as reasoning.
pub fn solo_text_ends_in_think(rendered: &str) -> bool {
    let tail = rendered.rsplit("<|im_start|>").next().unwrap_or(rendered);
    tail.rfind("<think>").is_some_and(|open| tail.rfind("</think>").is_none_or(|close| close < open))
}

/// Prefill `prompt` (its tokens, and its images through the tower), then sample and stream text
/// to stdout until a stop token or `max_tokens`; with `speculate` > 0, `speculate` MTP drafts per
/// verify step; with `lora`, that adapter.
#[allow(clippy::too_many_arguments)]
fn generate<B: Backend>(
    model: &B,
    tokenizer: &Tokenizer,
    stops: &[u32],
    (prompt, images): (&[u32], &[PromptImage]),
    mut sampler: Sampler,
    args: &RunArgs,
    lora: Option<Arc<LoraAdapter>>,
    mut printer: Printer,
) -> Result<()> {
    let (max_tokens, speculate) = (args.max_tokens, args.speculate);
    let mut state = model.new_state()?;
    model.set_adapter(&mut state, lora)?;
    let started = Instant::now();
    let mut logits = prefill_chunked(model, &mut state, prompt, images)?;
    let prefill_secs = started.elapsed().as_secs_f64();

    let mut text = tokenizer.stream_decoder(false);
    let decode_start = Instant::now();
    let mut generated = 0;
    // Tokens picked ahead, in order: by the backend itself (`decode_and_pick`: the GPU sampler)
    // or by a speculative round. Only the last of them is not yet in `state`.
    let mut ahead: VecDeque<u32> = VecDeque::new();
    let mut acceptance = Acceptance::default();
    while generated < max_tokens {
        let token = ahead.pop_front().unwrap_or_else(|| sampler.sample(&logits));
        generated += 1;
        if stops.contains(&token) {
            break;
        }
        if let Some(piece) = text.push(token)? {
            printer.push(&piece)?;
        }
        if generated == max_tokens || !ahead.is_empty() {
            continue; // done, or `token` is already in the state
        }
        if speculate > 0 {
            let round = speculative::round(model, &mut state, token, speculate, &mut sampler)?;
            acceptance.add(&round);
            ahead.extend(round.tokens);
            continue;
        }
        match model.decode_and_pick(&mut state, token, &mut sampler) {
            Some(next) => ahead.push_back(next?),
            None => logits = model.decode(&mut state, token)?,
        }
    }
    printer.push(&text.flush()?)?;
    printer.finish()?;
    let decode_secs = decode_start.elapsed().as_secs_f64();
    let speculation = if acceptance.rounds > 0 {
        format!(
            "; {speculate} drafts per step: {} of {} accepted, {:.2} tokens per step",
            acceptance.accepted,
            acceptance.drafted,
            acceptance.mean_accepted_length()
        )
    } else {
        String::new()
    };
    eprintln!(
        "solo: prompt {} tokens, prefill {:.1} tok/s; generated {} tokens, decode {:.1} tok/s{speculation}",
        prompt.len(),
        prompt.len() as f64 / prefill_secs,
        generated,
        generated as f64 / decode_secs.max(1e-9)
    );
    Ok(())
}

/// Prefills `tokens` in the backend's own chunks; returns the last token's logits.
fn prefill_chunked<B: Backend>(
    model: &B,
    state: &mut B::State,
    tokens: &[u32],
    images: &[PromptImage],
) -> Result<Vec<f32>> {
    let mut last = Vec::new();
    let chunks: Vec<&[u32]> = tokens.chunks(model.prefill_chunk()).collect();
    for (i, chunk) in chunks.iter().enumerate() {
        let rows = if i + 1 == chunks.len() { Logits::Last } else { Logits::None };
        last = model.prefill_with_images(state, chunk, images, rows)?;
    }
    Ok(last)
}

/// Sampling settings: the command line, else the checkpoint's generation_config.json, else
/// temperature 1 with no top-k/top-p cut.
pub fn sampler_config(dir: &Path, temperature: Option<f32>, seed: Option<u64>) -> Result<SamplerConfig> {
    let path = dir.join("generation_config.json");
    let gen: serde_json::Value = match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).with_context(|| format!("{}: not valid JSON", path.display()))?,
        Err(_) => serde_json::Value::Null,
    };
    let number = |key: &str| gen.get(key).and_then(|v| v.as_f64());
    let temperature = temperature.unwrap_or(number("temperature").unwrap_or(1.0) as f32);
    if !(temperature >= 0.0 && temperature.is_finite()) {
        bail!("--temperature must be a finite number ≥ 0, got {temperature}");
    }
    let seed = seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
    });
    Ok(SamplerConfig {
        temperature,
        top_k: number("top_k").unwrap_or(0.0) as usize,
        top_p: number("top_p").unwrap_or(1.0) as f32,
        seed,
    })
}

/// `solo logits`.
#[derive(clap::Args)]
pub struct LogitsArgs {
    #[arg(long)]
    pub model: PathBuf,
    /// Comma-separated token ids. With --image: each image written
    /// `<|vision_start|><|image_pad|><|vision_end|>` with one `<|image_pad|>`, which solo expands
    /// to the image's merged-token count (the rows are those of the expanded prompt).
    #[arg(long, value_delimiter = ',', required = true)]
    pub tokens: Vec<u32>,
    /// How many leading tokens go through one prefill; the rest are decoded one by one. Default:
    /// all. Counted in --tokens as given (an image's placeholder is one); the images must be in
    /// the prefill.
    #[arg(long)]
    pub prefill: Option<usize>,
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    pub backend: BackendChoice,
    /// An image (PNG, JPEG, WebP, GIF) for the next `<|image_pad|>` of --tokens, through the
    /// checkpoint's preprocessing and vision tower as `solo run --image`; repeatable.
    #[arg(long = "image", value_name = "FILE")]
    pub images: Vec<PathBuf>,
    /// Write the logits to this safetensors file (tensor `logits`, F32 [tokens, vocab]) instead
    /// of JSON on stdout (for large vocabularies).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// With the PEFT LoRA adapter in this directory (as `solo run --lora`).
    #[arg(long, value_name = "DIR")]
    pub lora: Option<PathBuf>,
}

/// `{"logits": [[…], …]}`: the first `prefill` tokens (and the images) in one prefill, the rest
/// one decode step each.
pub fn logits(args: LogitsArgs) -> Result<()> {
    let n = args.prefill.unwrap_or(args.tokens.len());
    if n == 0 || n > args.tokens.len() {
        bail!("--prefill must be between 1 and the number of tokens ({}), got {n}", args.tokens.len());
    }
    if let Some(f) = args.images.iter().find(|f| !f.is_file()) {
        bail!("--image {}: no such file", f.display());
    }
    let engine = load_engine(&args.model, args.backend)?;
    with_engine!(&engine, model => print_logits(model, &args, n))
}

/// With `files`: `tokens` has one `<|image_pad|>` for each, between `<|vision_start|>` and
/// `<|vision_end|>`, all of them in the first `prefill` tokens.
fn check_image_placeholders<B: Backend>(model: &B, tokens: &[u32], prefill: usize, files: &[PathBuf]) -> Result<()> {
    if files.is_empty() {
        return Ok(());
    }
    model.image_support().context("--image")?;
    let v = model.config().vision.as_ref().context("--image: the model has no vision tower")?;
    let (pad, start, end) = (v.image_token_id, v.vision_start_token_id, v.vision_end_token_id);
    let pads: Vec<usize> = (0..tokens.len()).filter(|&i| tokens[i] == pad).collect();
    if pads.len() != files.len() {
        bail!(
            "--tokens has {} <|image_pad|> ({pad}) for {} --image file(s): write each image as \
             <|vision_start|><|image_pad|><|vision_end|> ({start},{pad},{end}), one <|image_pad|>, which solo expands",
            pads.len(),
            files.len()
        );
    }
    if let Some(i) = pads.iter().find(|&&i| i == 0 || tokens[i - 1] != start || tokens.get(i + 1) != Some(&end)) {
        bail!("--tokens: the <|image_pad|> at index {i} is not between <|vision_start|> ({start}) and <|vision_end|> ({end})");
    }
    if let Some(last) = pads.iter().find(|&&i| i >= prefill) {
        bail!(
            "--prefill {prefill}: the image placeholder at index {last} is not in the prefill (images go through the \
             prefill; decode steps take text tokens)"
        );
    }
    Ok(())
}

fn print_logits<B: Backend>(model: &B, args: &LogitsArgs, n: usize) -> Result<()> {
    let vocab = model.config().vocab_size;
    if let Some(bad) = args.tokens.iter().find(|&&t| t as usize >= vocab) {
        bail!("token id {bad} is out of range: the vocabulary has {vocab} entries");
    }
    check_image_placeholders(model, &args.tokens, n, &args.images)?;
    let mut tokens = args.tokens.clone();
    let mut prefill = [n];
    let images = prompt_images(model, &args.model, &args.images, &mut tokens, &mut prefill)?;
    let n = prefill[0];
    let mut state = model.new_state()?;
    if let Some(dir) = &args.lora {
        model.set_adapter(&mut state, Some(Arc::new(LoraAdapter::load(dir, model.config())?)))?;
    }
    let mut rows = if images.is_empty() {
        model.prefill(&mut state, &tokens[..n], Logits::All)?
    } else {
        model.prefill_with_images(&mut state, &tokens[..n], &images, Logits::All)?
    };
    for &token in &tokens[n..] {
        rows.extend(model.decode(&mut state, token)?);
    }
    if let Some(path) = &args.out {
        let bytes: Vec<u8> = rows.iter().flat_map(|v| v.to_le_bytes()).collect();
        let view = safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![tokens.len(), vocab], &bytes)?;
        return safetensors::serialize_to_file([("logits", view)], None, path)
            .with_context(|| format!("cannot write {}", path.display()));
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    out.write_all(b"{\"logits\": [")?;
    for (i, row) in rows.chunks(vocab).enumerate() {
        if i > 0 {
            out.write_all(b", ")?;
        }
        serde_json::to_writer(&mut out, row)?;
    }
    out.write_all(b"]}\n")?;
    out.flush()?;
    Ok(())
}

/// Mean NLL (nats per token) and perplexity of a text file, printed as JSON.
pub fn perplexity(dir: &Path, text_file: &Path, backend: BackendChoice) -> Result<()> {
    let text = std::fs::read_to_string(text_file).with_context(|| format!("cannot read {}", text_file.display()))?;
    let tokens = Tokenizer::from_dir(dir)?.encode(&text)?;
    if tokens.len() < 2 {
        bail!("{}: needs at least 2 tokens, has {}", text_file.display(), tokens.len());
    }
    let engine = load_engine(dir, backend)?;
    let mean = with_engine!(&engine, model => mean_nll(model, &tokens))?;
    let predicted = tokens.len() - 1;
    println!(
        "{}",
        serde_json::json!({ "tokens": tokens.len(), "predicted": predicted, "mean_nll": mean, "perplexity": mean.exp() })
    );
    Ok(())
}

/// Mean −log p(token i+1 | tokens ..=i) over the sequence, prefilled in chunks.
fn mean_nll<B: Backend>(model: &B, tokens: &[u32]) -> Result<f64> {
    let vocab = model.config().vocab_size;
    let mut state = model.new_state()?;
    let mut nll_sum = 0.0f64;
    // Row i of each chunk's logits predicts the token after chunk[i].
    // Every row's logits come back ([chunk, vocab] f32: 0.5 GB at 512 tokens of the real vocabulary).
    let step = model.prefill_chunk().min(512);
    for (c, chunk) in tokens.chunks(step).enumerate() {
        let rows = model.prefill(&mut state, chunk, Logits::All)?;
        for (i, row) in rows.chunks(vocab).enumerate() {
            if let Some(&next) = tokens.get(c * step + i + 1) {
                nll_sum += negative_log_likelihood(row, next);
            }
        }
    }
    Ok(nll_sum / (tokens.len() - 1) as f64)
}

/// −log softmax(row)[target], in f64.
fn negative_log_likelihood(row: &[f32], target: u32) -> f64 {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
    max + sum.ln() - row[target as usize] as f64
}
