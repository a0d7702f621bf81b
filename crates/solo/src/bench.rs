//! `solo bench`: prefill and decode speed of the CUDA backend at several context lengths.
//!
//! Method (design.md "Measuring"): batch 1, synthetic prompt ids, one warm-up of the same shape,
//! then `rounds` timed rounds on a fresh (reset) sequence each: prefill tok/s = prompt length /
//! time to first token (prefill + lm_head + the logits on the host); decode tok/s over the steps
//! after the first (greedy, one CUDA-graph replay per token, no host round trip between steps).
//! The median round is reported. Greedy steps end with the screened lm_head (`ops::lm_head`: an
//! int8 copy, then the candidates' bf16 rows; the same tokens as the full one) unless
//! `--full-lm-head`. With `--sampled`, each round goes on decoding the same sequence through the
//! server's step (`decode_pick`: the GPU sampler at the checkpoint defaults, the token back on
//! the host every step) and then through host sampling (`decode`: the logits downloaded, the CPU
//! sampler), each over `decode_steps` tokens.

use anyhow::{bail, ensure, Context, Result};
use solo_cuda::synthetic::AdapterTargets;
use solo_model::lora::LoraAdapter;
use solo_model::sampler::{argmax, Sampler, SamplerConfig, SplitMix};
use solo_model::{Backend, Logits, Precision};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// `--precision` of `solo bench --synthetic`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum PrecisionArg {
    Bf16,
    Fp8,
    /// The GPTQ-Int4 release's shape: the routed experts int4 (groups of 128), the rest bf16.
    Int4,
    /// The all-linear int4 recipe: the routed experts and the mixers' projections (linear_attn,
    /// self_attn) int4, the rest bf16.
    #[value(name = "int4-all")]
    Int4All,
    /// A GGUF Q4_K_M file as the CUDA backend holds it: the routed experts' Q4_K rows (and Q6_K
    /// down rows in every other layer), the mixers' projections, embedding and lm_head as stored.
    #[value(name = "q4_k_m")]
    Q4KM,
}

impl From<PrecisionArg> for solo_cuda::synthetic::Synthetic {
    fn from(p: PrecisionArg) -> Self {
        use solo_cuda::synthetic::Synthetic;
        match p {
            PrecisionArg::Bf16 => Synthetic::Checkpoint(Precision::Bf16),
            PrecisionArg::Fp8 => Synthetic::Checkpoint(Precision::Fp8Block128),
            PrecisionArg::Int4 => Synthetic::Checkpoint(Precision::Int4 { group: solo_cuda::int4::GROUP }),
            PrecisionArg::Q4KM => Synthetic::GgufQ4KM,
            PrecisionArg::Int4All => Synthetic::Int4AllLinear,
        }
    }
}

/// `solo random-gguf --mix`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum GgufMix {
    #[value(name = "q4_k_m")]
    Q4KM,
    #[value(name = "q8_0")]
    Q8_0,
}

/// `solo random-gguf`: the release's widths, `layers` layers, random weights in `mix`.
pub fn random_gguf(out: &std::path::Path, layers: usize, mix: GgufMix) -> Result<()> {
    use solo_model::gguf::random::{write, Mix};
    let mix = match mix {
        GgufMix::Q4KM => Mix::Q4KM,
        GgufMix::Q8_0 => Mix::Q8_0,
    };
    write(out, &solo_cuda::synthetic::real_config(layers), mix)?;
    let gib = std::fs::metadata(out)?.len() as f64 / (1u64 << 30) as f64;
    eprintln!("solo: wrote {} ({gib:.2} GiB)", out.display());
    Ok(())
}

/// `solo bench`.
#[derive(clap::Args)]
pub struct BenchArgs {
    /// Checkpoint directory (the real widths; any number of layers).
    #[arg(long, conflicts_with = "synthetic")]
    pub model: Option<PathBuf>,
    /// The full-size model with random weights made in GPU memory.
    #[arg(long)]
    pub synthetic: bool,
    /// Layers of the synthetic model.
    #[arg(long, default_value_t = 40)]
    pub layers: usize,
    /// Weights of the synthetic model: bf16, or fp8 (the official FP8 checkpoint's format:
    /// e4m3 with 128×128 block scales where it quantises, bf16 elsewhere).
    #[arg(long, value_enum, default_value_t = PrecisionArg::Bf16, requires = "synthetic")]
    pub precision: PrecisionArg,
    #[arg(long, value_delimiter = ',', default_value = "256,4096,32768,131072")]
    pub contexts: Vec<usize>,
    #[arg(long, default_value_t = 128)]
    pub decode_steps: usize,
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Also print where one decode step's time goes, by kernel group, at each context.
    #[arg(long)]
    pub profile: bool,
    /// Decode with the full bf16 lm_head (then the argmax, or the GPU sampler with
    /// --sampled), instead of the screened lm_head (an int8 copy, then the candidates' bf16
    /// rows: the same tokens).
    #[arg(long)]
    pub full_lm_head: bool,
    /// Also time the server's decode step (one `decode_and_pick` per token: the GPU sampler
    /// at temperature 1, top-k 20, top-p 0.95, the token back on the host) and the host
    /// sampling it replaces where it can (the logits downloaded, then the CPU sampler).
    #[arg(long)]
    pub sampled: bool,
    /// Instead of the context sweep: what single kernels and ops cost on the synthetic
    /// model's weights (CUDA events; empty kernels, decode GEMVs hot and cold, the lm_head,
    /// the MoE block, attention, the GDN kernels, the GPU sampler, a server request's setup).
    #[arg(long)]
    pub kernels: bool,
    /// Instead of the context sweep: decode N sequences at once (the batched step) for each N
    /// given (e.g. 1,2,4,8), each after a prompt of the first --contexts length; aggregate and
    /// per-stream tok/s.
    #[arg(long, value_delimiter = ',')]
    pub batch: Vec<usize>,
    /// Also time speculative decoding with K MTP drafts per step: with --model, the head's
    /// own drafts and the real acceptance; with --synthetic (random weights predict nothing)
    /// each step's acceptance is replayed (`--accept`), the head's drafts, the verify and the
    /// roll-back running as they would, so their cost is real.
    #[arg(long, default_value_t = 0, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=solo_model::speculative::MAX_DRAFTS as u64))]
    pub speculate: usize,
    /// With --speculate --synthetic: the mean accepted length (tokens per verify step,
    /// 1 ..= K + 1) the replayed drafts aim at.
    #[arg(long, default_value_t = 3.0)]
    pub accept: f64,
    /// Also draw prefill and decode tok/s against context into this SVG file.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Draw these saved --json reports (comma-separated or repeated) into --svg instead of
    /// measuring; no GPU needed.
    #[arg(long, value_delimiter = ',', requires = "svg")]
    pub from: Vec<PathBuf>,
    /// Instead of the context sweep: the vision tower (the release's widths, random weights) on
    /// an image of W×H pixels (multiples of 32), and the time to the first token of that image
    /// and a 256-token text (the tower, then the text model's prefill of as many tokens).
    #[arg(long, value_name = "WxH", value_parser = parse_image_size, requires = "synthetic")]
    pub image: Option<(usize, usize)>,
    /// With --synthetic: prefill and decode with a random LoRA adapter of this rank (0: none),
    /// on what --lora-targets names; with --batch, each sequence its own. Run once without it
    /// for the base figures.
    #[arg(long, default_value_t = 0, requires = "synthetic")]
    pub lora_rank: usize,
    /// What the --lora-rank adapter adapts.
    #[arg(long, value_enum, default_value_t = LoraTargets::Attn)]
    pub lora_targets: LoraTargets,
}

/// `--lora-targets` of `solo bench`.
#[derive(Clone, Copy, Debug, PartialEq, clap::ValueEnum)]
pub enum LoraTargets {
    /// The attention and GDN projections (q/k/v/o, in_proj_qkv/z/b/a, out_proj).
    Attn,
    /// Every linear layer but the routed experts (what PEFT's `all-linear` adapts in this
    /// model): those, the router, the shared expert and its gate.
    #[value(name = "all-linear")]
    AllLinear,
    /// The attention and GDN projections and the routed experts (the decode step's kernels take
    /// both).
    #[value(name = "attn-experts")]
    AttnExperts,
    /// Every linear layer, the routed experts too.
    All,
}

/// `--image WxH`: pixels, each a multiple of 32 (16-pixel patches merged 2×2).
fn parse_image_size(text: &str) -> Result<(usize, usize), String> {
    let (w, h) = text.split_once(['x', 'X']).ok_or_else(|| format!("`{text}` is not WxH (e.g. 1024x1024)"))?;
    let num = |v: &str| v.trim().parse::<usize>().map_err(|_| format!("`{text}` is not WxH (e.g. 1024x1024)"));
    let (w, h) = (num(w)?, num(h)?);
    if w == 0 || h == 0 || w % 32 != 0 || h % 32 != 0 {
        return Err(format!("{w}x{h}: each side must be a positive multiple of 32 pixels"));
    }
    Ok((w, h))
}

#[derive(serde::Serialize)]
struct Row {
    context: usize,
    prefill_tok_s: f64,
    ttft_ms: f64,
    decode_tok_s: f64,
    decode_ms_per_token: f64,
    rounds_prefill_tok_s: Vec<f64>,
    rounds_decode_tok_s: Vec<f64>,
    /// bf16 lm_head rows the screen multiplied in the round's last step (0 with --full-lm-head)
    screen_candidates: u32,
    /// --sampled: the server's step (`decode_pick`), and `decode` + the CPU sampler
    picked_decode_tok_s: Option<f64>,
    host_sampled_decode_tok_s: Option<f64>,
    /// --speculate: greedy decoding with replayed drafts
    speculative: Option<Speculative>,
}

#[derive(serde::Serialize, Clone)]
struct Speculative {
    drafts: usize,
    decode_tok_s: f64,
    mean_accepted_length: f64,
    /// Mean per verify step in the median round (by tok/s): the head's k drafts, the verify of k + 1
    /// tokens, the roll-back (a forward of the kept tokens when a draft was rejected)
    draft_ms: f64,
    verify_ms: f64,
    keep_ms: f64,
    rounds_decode_tok_s: Vec<f64>,
}

/// The sampling the server's step is timed with: the checkpoint's defaults
/// (its generation_config.json).
const GREEDY: SamplerConfig = SamplerConfig { temperature: 0.0, top_k: 0, top_p: 1.0, seed: 0 };
const SERVER_SAMPLING: SamplerConfig = SamplerConfig { temperature: 1.0, top_k: 20, top_p: 0.95, seed: 1 };

pub fn bench(args: BenchArgs) -> Result<()> {
    if !args.from.is_empty() {
        return crate::svg::draw_files(&args.from, args.svg.as_deref().context("--from needs --svg FILE")?);
    }
    if args.decode_steps < 2 {
        bail!("--decode-steps must be at least 2 (the first step is not timed)");
    }
    if args.rounds == 0 || args.contexts.is_empty() {
        bail!("--rounds and --contexts must not be empty");
    }
    if args.speculate > 0 && !(1.0..=(args.speculate + 1) as f64).contains(&args.accept) {
        bail!("--accept must be between 1 and --speculate + 1 = {}, got {}", args.speculate + 1, args.accept);
    }
    let max_ctx = *args.contexts.iter().max().unwrap();
    let passes = if args.sampled { 3 } else { 1 } + usize::from(args.speculate > 0) * 2;
    let max_seq = max_ctx + passes * args.decode_steps + 1 + 2 * (args.speculate + 1);
    let load_start = Instant::now();
    let (mut model, source) = match (&args.model, args.synthetic) {
        (Some(dir), false) => (solo_cuda::load(dir, Some(max_seq))?, dir.display().to_string()),
        (None, true) => {
            let model = solo_cuda::synthetic::random_model_as(args.layers, max_seq, args.precision.into())?;
            (model, format!("synthetic, {} layers, random weights", args.layers))
        }
        _ => bail!("give exactly one of --model DIR or --synthetic"),
    };
    eprintln!("solo bench: model ready in {:.1} s", load_start.elapsed().as_secs_f64());
    if args.kernels {
        return kernel_costs(&model, &source, args.json.as_deref());
    }
    if let Some(size) = args.image {
        return image_ttft(model, size, args.rounds, args.decode_steps, args.profile);
    }
    if !args.batch.is_empty() {
        return batched_decode(&model, &source, &args);
    }
    // (off where the model has none: a GGUF lm_head read as stored, or a budget too short)
    model.screened_lm_head &= !args.full_lm_head;
    let vocab = model.config.vocab_size;
    let lora = bench_adapter(&model, &args, 1)?;
    let mut state = model.try_new_state()?;
    let mut rows = Vec::new();
    let mut profiles = Vec::new();
    for &ctx in &args.contexts {
        let prompt = synthetic_prompt(ctx, vocab);
        let mut prefill = Vec::new();
        let mut decode = Vec::new();
        let (mut picked, mut host_sampled) = (Vec::new(), Vec::new());
        let mut screen_candidates = 0;
        let mut spec_rounds = Vec::new();
        for round in 0..=args.rounds {
            model.reset(&mut state)?;
            model.set_adapter(&mut state, lora.clone())?;
            let t0 = Instant::now();
            let logits = model.prefill(&mut state, &prompt, Logits::Last)?;
            let ttft = t0.elapsed().as_secs_f64();
            let first = argmax(&logits);
            model.decode_greedy(&mut state, Some(first), 1)?; // first step: not timed (graph capture on round 0)
            let t1 = Instant::now();
            let mut token = model.decode_greedy(&mut state, None, args.decode_steps - 1)?;
            let dt = t1.elapsed().as_secs_f64();
            if model.screened_lm_head {
                screen_candidates = model.last_screen_candidates()?;
            }
            if round > 0 {
                // round 0 is the warm-up of the same shape
                prefill.push(ctx as f64 / ttft);
                decode.push((args.decode_steps - 1) as f64 / dt);
            }
            if args.sampled {
                let steps = args.decode_steps;
                let mut sampler = Sampler::new(SERVER_SAMPLING);
                let t = Instant::now();
                for _ in 0..steps {
                    token = model.decode_pick(&mut state, token, &mut sampler)?;
                }
                let picked_s = t.elapsed().as_secs_f64();
                let t = Instant::now();
                for _ in 0..steps {
                    token = sampler.sample(&model.decode(&mut state, token)?);
                }
                if round > 0 {
                    picked.push(steps as f64 / picked_s);
                    host_sampled.push(steps as f64 / t.elapsed().as_secs_f64());
                }
            }
            if args.speculate > 0 {
                let result = speculative_round(&model, &mut state, &prompt, &args)?;
                if round > 0 {
                    spec_rounds.push(result);
                }
            }
        }
        let speculative = (!spec_rounds.is_empty()).then(|| summarize(&spec_rounds));
        let row = Row {
            context: ctx,
            prefill_tok_s: median(&prefill),
            ttft_ms: ctx as f64 / median(&prefill) * 1e3,
            decode_tok_s: median(&decode),
            decode_ms_per_token: 1e3 / median(&decode),
            rounds_prefill_tok_s: prefill,
            rounds_decode_tok_s: decode,
            screen_candidates,
            picked_decode_tok_s: args.sampled.then(|| median(&picked)),
            host_sampled_decode_tok_s: args.sampled.then(|| median(&host_sampled)),
            speculative,
        };
        eprintln!("  context {ctx}: prefill {:.0} tok/s, decode {:.1} tok/s", row.prefill_tok_s, row.decode_tok_s);
        rows.push(row);
        if args.profile {
            profiles.push((format!("one decode step at context {ctx}"), model.profile_decode(&mut state, 0)?));
            // The prompt's last prefill call (at long contexts the one whose attention reads most).
            let last = ctx.min(solo_cuda::model::PREFILL_CHUNK);
            model.reset(&mut state)?;
            if ctx > last {
                model.prefill(&mut state, &prompt[..ctx - last], Logits::None)?;
            }
            let what = format!("the last prefill call ({last} tokens after {})", ctx - last);
            profiles.push((what, model.profile_prefill(&mut state, &prompt[ctx - last..])?));
        }
    }
    let (used, total) = model.memory_used()?;
    let commit = env!("SOLO_COMMIT");
    let precision = model.weights.form();
    let weight_gib = gib(model.weights.bytes());
    println!(
        "solo bench — {} — {precision} weights ({weight_gib:.1} GiB), f32 state — commit {commit}",
        model.gpu.name
    );
    println!("kernels: {}, launches sized for {} SMs", model.gpu.target.describe(), model.gpu.sms);
    let pdl = model.gpu.pdl_launched();
    println!(
        "kernels launched with programmatic dependent launch: {}",
        if pdl.is_empty() { "none".to_string() } else { pdl.join(", ") }
    );
    println!(
        "model: {source}; batch 1; {} decode steps; median of {} rounds after 1 warm-up",
        args.decode_steps, args.rounds
    );
    if let Some(a) = &lora {
        println!(
            "LoRA: {} ({} matrices, {:.1} MB; --lora-targets {:?})",
            a.dir.display(),
            a.matrices,
            a.bytes as f64 / 1e6,
            args.lora_targets
        );
    }
    if model.screened_lm_head {
        let counts: Vec<String> = rows.iter().map(|r| r.screen_candidates.to_string()).collect();
        println!(
            "lm_head: screened (int8 copy, then bf16 rows of the candidates: {} in the last step, by context)",
            counts.join(", ")
        );
    } else {
        println!("lm_head: full bf16, then an argmax kernel (--full-lm-head)");
    }
    println!(
        "{:>9} | {:>13} | {:>10} | {:>12} | {:>10}",
        "context", "prefill tok/s", "TTFT ms", "decode tok/s", "ms/token"
    );
    for r in &rows {
        println!(
            "{:>9} | {:>13.0} | {:>10.1} | {:>12.1} | {:>10.3}",
            r.context, r.prefill_tok_s, r.ttft_ms, r.decode_tok_s, r.decode_ms_per_token
        );
    }
    if args.sampled {
        println!("\nsampled decode (temperature 1, top-k 20, top-p 0.95), one token to the host per step:");
        println!(
            "{:>9} | {:>27} | {:>32}",
            "context", "server's step (GPU sampler)", "host sampling (logits download)"
        );
        for r in &rows {
            let (p, h) = (r.picked_decode_tok_s.unwrap_or(0.0), r.host_sampled_decode_tok_s.unwrap_or(0.0));
            println!("{:>9} | {:>21.1} tok/s | {:>26.1} tok/s", r.context, p, h);
        }
    }
    if args.speculate > 0 {
        println!(
            "\nspeculative greedy decode, {} MTP drafts per step, {}; per step: the head's drafts, \
             the verify, the roll-back:",
            args.speculate,
            if args.model.is_some() {
                "the head's own drafts judged by the model (the real acceptance)".to_string()
            } else {
                format!("acceptance replayed (aiming at {:.2} tokens per step)", args.accept)
            }
        );
        println!(
            "{:>9} | {:>12} | {:>15} | {:>8} | {:>9} | {:>7}",
            "context", "decode tok/s", "tokens per step", "draft ms", "verify ms", "keep ms"
        );
        for r in &rows {
            if let Some(s) = &r.speculative {
                println!(
                    "{:>9} | {:>12.1} | {:>15.2} | {:>8.3} | {:>9.3} | {:>7.3}",
                    r.context, s.decode_tok_s, s.mean_accepted_length, s.draft_ms, s.verify_ms, s.keep_ms
                );
            }
        }
    }
    for (what, kernels) in &profiles {
        print_profile(what, kernels);
    }
    println!(
        "GPU memory in use at the end (KV cache for {max_seq} tokens): {:.1} GiB of {:.1} GiB",
        gib(used),
        gib(total)
    );
    let report = serde_json::json!({
        "gpu": model.gpu.name, "commit": commit, "precision": precision, "weights_bytes": model.weights.bytes(),
        "kernels": model.gpu.target.describe(), "sms": model.gpu.sms,
        "state": "f32 recurrent state, bf16 KV cache",
        "model": source, "decode_steps": args.decode_steps, "rounds": args.rounds,
        "lora": lora.as_ref().map(|a| serde_json::json!({"rank": a.rank, "matrices": a.matrices, "targets": format!("{:?}", args.lora_targets)})),
        "gpu_memory_used_bytes": used, "gpu_memory_total_bytes": total, "results": rows,
    });
    if let Some(path) = args.json {
        std::fs::write(&path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(path) = args.svg {
        crate::svg::write(&[(String::new(), report)], &path)?;
    }
    Ok(())
}

/// `--kernels`: the table of `solo_cuda::costs::kernel_costs`, and its JSON.
fn kernel_costs(model: &solo_cuda::CudaModel, source: &str, json: Option<&std::path::Path>) -> Result<()> {
    eprintln!("solo bench --kernels: timing each kernel alone");
    let costs = solo_cuda::costs::kernel_costs(model)?;
    let commit = env!("SOLO_COMMIT");
    let precision = model.weights.form();
    println!("solo bench --kernels — {} — {precision} weights ({source}) — commit {commit}", model.gpu.name);
    let width = costs.iter().map(|c| c.name.chars().count()).max().unwrap_or(0);
    println!("{:width$}  {:>10}  note", "kernel or op", "µs");
    for c in &costs {
        println!("{:width$}  {:>10.2}  {}", c.name, c.micros, c.note);
    }
    if let Some(path) = json {
        let rows: Vec<_> =
            costs.iter().map(|c| serde_json::json!({"name": c.name, "micros": c.micros, "note": c.note})).collect();
        let report = serde_json::json!({
            "gpu": model.gpu.name, "commit": commit, "precision": precision, "model": source, "kernels": rows,
        });
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// One round of speculative greedy decoding after `prompt`, `decode_steps` tokens in verify
/// steps. With a checkpoint (`--model`) its head's drafts are judged as `solo serve` judges them
/// (`speculative::accept`: the real acceptance). A random head predicts nothing, so with
/// `--synthetic` the acceptance is replayed: each step accepts as many drafts as a Bresenham
/// schedule over the steps gives for the mean accepted length `--accept`, and the bonus is the
/// verify row's argmax. The head drafts, the verify and the roll-back run as they would; only the
/// decision is set.
fn speculative_round(
    model: &solo_cuda::CudaModel,
    state: &mut solo_cuda::model::CudaState,
    prompt: &[u32],
    args: &BenchArgs,
) -> Result<Speculative> {
    let (k, vocab) = (args.speculate, model.config.vocab_size);
    model.reset(state)?;
    let first = argmax(&model.prefill(state, prompt, Logits::Last)?);
    let mut sampler = Sampler::new(GREEDY);
    let (mut next, mut owed) = (first, 0.0f64);
    let (mut steps, mut emitted) = (0usize, 0usize);
    let (mut draft_s, mut verify_s, mut keep_s) = (Vec::new(), Vec::new(), Vec::new());
    let start = Instant::now();
    let real = args.model.is_some();
    while emitted < args.decode_steps {
        owed += args.accept - 1.0;
        let replayed = (owed.floor() as usize).min(k);
        owed -= replayed as f64;
        let t0 = Instant::now();
        let draft = model.draft(state, next, k, &mut sampler)?;
        let t1 = Instant::now();
        let mut tokens = vec![next];
        tokens.extend(&draft.tokens);
        let rows = model.verify(state, &tokens)?;
        let t2 = Instant::now();
        let (right, bonus) = if real {
            solo_model::speculative::accept(&rows, &draft, vocab, &mut sampler)
        } else {
            (replayed, argmax(&rows[replayed * vocab..(replayed + 1) * vocab]))
        };
        model.keep_verified(state, right + 1)?;
        let t3 = Instant::now();
        draft_s.push((t1 - t0).as_secs_f64());
        verify_s.push((t2 - t1).as_secs_f64());
        keep_s.push((t3 - t2).as_secs_f64());
        steps += 1;
        emitted += right + 1;
        next = bonus;
    }
    let secs = start.elapsed().as_secs_f64();
    let ms = |v: &[f64]| 1e3 * v.iter().sum::<f64>() / v.len() as f64;
    Ok(Speculative {
        drafts: k,
        decode_tok_s: emitted as f64 / secs,
        mean_accepted_length: emitted as f64 / steps as f64,
        draft_ms: ms(&draft_s),
        verify_ms: ms(&verify_s),
        keep_ms: ms(&keep_s),
        rounds_decode_tok_s: Vec::new(),
    })
}

/// The median round's numbers, with every round's rate.
fn summarize(rounds: &[Speculative]) -> Speculative {
    let rates: Vec<f64> = rounds.iter().map(|r| r.decode_tok_s).collect();
    let mid = median(&rates);
    let pick = rounds.iter().find(|r| r.decode_tok_s == mid).cloned().expect("the median is one of them");
    Speculative { rounds_decode_tok_s: rates, ..pick }
}

fn gib(bytes: usize) -> f64 {
    bytes as f64 / (1u64 << 30) as f64
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[s.len() / 2]
}

#[derive(serde::Serialize)]
struct BatchRow {
    sequences: usize,
    context: usize,
    aggregate_tok_s: f64,
    per_stream_tok_s: f64,
    ms_per_step: f64,
    rounds_aggregate_tok_s: Vec<f64>,
}

/// `--batch`: for each n, n sequences after prompts of the first context's length (different
/// ids each), then `decode_steps` greedy steps of all n at once (`Backend::decode_batch_and_pick`:
/// each row's argmax on the GPU, n ids to the host); the median of the rounds after a warm-up.
fn batched_decode(model: &solo_cuda::CudaModel, source: &str, args: &BenchArgs) -> Result<()> {
    let (ctx, vocab) = (args.contexts[0], model.config.vocab_size);
    let (mut rows, mut profiles) = (Vec::new(), Vec::new());
    // with --lora-rank, each sequence its own adapter (`bench_adapter`'s, seeded by its index)
    let most = args.batch.iter().copied().max().unwrap_or(0);
    let adapters = (0..most).map(|i| bench_adapter(model, args, i as u64 + 1)).collect::<Result<Vec<_>>>()?;
    for &n in &args.batch {
        ensure!(n >= 1, "--batch takes sequence counts of at least 1");
        let mut states = (0..n).map(|_| model.try_new_state()).collect::<Result<Vec<_>>>()?;
        let (mut rates, mut tokens) = (Vec::new(), Vec::new());
        for round in 0..=args.rounds {
            tokens.clear();
            for (i, state) in states.iter_mut().enumerate() {
                model.reset(state)?;
                model.set_adapter(state, adapters[i].clone())?;
                let prompt = synthetic_prompt(ctx + i, vocab);
                tokens.push(argmax(&model.prefill(state, &prompt[i..], Logits::Last)?));
            }
            let t0 = Instant::now();
            let mut pickers: Vec<Sampler> = (0..n).map(|_| Sampler::new(GREEDY)).collect();
            for _ in 0..args.decode_steps {
                let mut refs: Vec<&mut solo_cuda::CudaState> = states.iter_mut().collect();
                let mut samplers: Vec<&mut Sampler> = pickers.iter_mut().collect();
                tokens = match model.decode_batch_and_pick(&mut refs, &tokens, &mut samplers) {
                    Some(picks) => picks?,
                    None => model.decode_batch(&mut refs, &tokens)?.chunks(vocab).map(argmax).collect(),
                };
            }
            if round > 0 {
                rates.push((n * args.decode_steps) as f64 / t0.elapsed().as_secs_f64());
            }
        }
        let aggregate = median(&rates);
        eprintln!("  {n} sequences: {aggregate:.1} tok/s together");
        if args.profile {
            let mut refs: Vec<&mut solo_cuda::CudaState> = states.iter_mut().collect();
            profiles.push((n, model.profile_batch_step(&mut refs, &tokens)?));
        }
        rows.push(BatchRow {
            sequences: n,
            context: ctx,
            aggregate_tok_s: aggregate,
            per_stream_tok_s: aggregate / n as f64,
            ms_per_step: 1e3 * n as f64 / aggregate,
            rounds_aggregate_tok_s: rates,
        });
    }
    let commit = env!("SOLO_COMMIT");
    println!(
        "solo bench --batch — {} — {} weights — commit {commit}\nmodel: {source}; prompts of {ctx} tokens; {} greedy steps of all the sequences at once (each row's argmax on the GPU); median of {} rounds after 1 warm-up",
        model.gpu.name,
        model.weights.form(),
        args.decode_steps,
        args.rounds
    );
    if let Some(a) = adapters.first().and_then(|a| a.as_ref()) {
        println!("LoRA: each sequence its own {} (--lora-targets {:?})", a.dir.display(), args.lora_targets);
    }
    println!("{:>9} | {:>14} | {:>16} | {:>11}", "sequences", "aggregate tok/s", "per-stream tok/s", "ms per step");
    for r in &rows {
        println!(
            "{:>9} | {:>14.1} | {:>16.1} | {:>11.3}",
            r.sequences, r.aggregate_tok_s, r.per_stream_tok_s, r.ms_per_step
        );
    }
    for (n, kernels) in &profiles {
        print_profile(&format!("one batched step of {n} sequences at context {ctx}"), kernels);
    }
    if let Some(path) = &args.json {
        let report = serde_json::json!({ "gpu": model.gpu.name, "commit": commit, "model": source, "batch": rows });
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// A step's kernels, the slowest first: µs, share, launches, µs per launch.
fn print_profile(what: &str, kernels: &[solo_cuda::profile::KernelTime]) {
    let total: f32 = kernels.iter().map(|k| k.micros).sum();
    let launches: usize = kernels.iter().map(|k| k.launches).sum();
    println!("\n{what}: {launches} kernel launches, {total:.0} µs run back to back");
    println!("{:>9} | {:>6} | {:>8} | {:>6} | kernel <<<grid, block>>>", "µs", "share", "launches", "µs each");
    let mut sorted = kernels.to_vec();
    sorted.sort_by(|a, b| b.micros.total_cmp(&a.micros));
    for k in &sorted {
        let each = k.micros / k.launches as f32;
        println!(
            "{:>9.1} | {:>5.1}% | {:>8} | {each:>7.2} | {}",
            k.micros,
            100.0 * k.micros / total,
            k.launches,
            k.kernel
        );
    }
}

/// Deterministic token ids spread over the ordinary vocabulary.
/// `--image WxH`: the release's vision tower with random weights on one W×H image of random
/// patches (the upload of its patches and the download of its tokens included), then the text
/// model's prefill of the image's tokens (over their placeholders, at their multimodal positions:
/// `Backend::prefill_with_images`), its two markers and 256 text tokens; TTFT is the sum. Then
/// greedy decoding after that prompt against decoding after a text prompt of the same length.
fn image_ttft(
    mut model: solo_cuda::model::CudaModel,
    (w, h): (usize, usize),
    rounds: usize,
    decode_steps: usize,
    profile: bool,
) -> Result<()> {
    let cfg = solo_cuda::synthetic::real_vision_config();
    model.weights.vision = Some(solo_cuda::synthetic::random_vision(&model.gpu, &cfg)?);
    model.config.vision = Some(cfg.clone());
    let grid = [1, h / cfg.patch_size, w / cfg.patch_size];
    let patches = grid.iter().product::<usize>();
    let mut rng = SplitMix(1);
    let values = (0..patches * cfg.patch_len()).map(|_| rng.next_f32() * 2.0 - 1.0).collect();
    let img = solo_model::image::ImagePatches { grid, values, hash: [0; 32] };
    let m = cfg.spatial_merge_size;
    let merged = [1, grid[1] / m, grid[2] / m];
    let tokens = merged.iter().product::<usize>();
    let mut prompt = vec![cfg.vision_start_token_id];
    prompt.extend(std::iter::repeat_n(cfg.image_token_id, tokens));
    prompt.push(cfg.vision_end_token_id);
    prompt.extend(synthetic_prompt(256, model.config.vocab_size));
    ensure!(
        prompt.len() + rounds * decode_steps < model.max_seq,
        "--image {w}x{h} prefills {} tokens: give --contexts up to at least that",
        prompt.len()
    );
    let mut state = model.try_new_state()?;
    let (mut tower_ms, mut prefill_ms) = (Vec::new(), Vec::new());
    for round in 0..=rounds {
        let t0 = Instant::now();
        let embeds = model.encode_image(&img)?;
        let t1 = Instant::now();
        ensure!(
            embeds.len() == tokens * cfg.out_hidden_size && embeds.iter().all(|v| v.is_finite()),
            "the tower did not give {tokens} finite tokens"
        );
        let image = solo_model::PromptImage { start: 1, grid: merged, embeds: std::sync::Arc::new(embeds) };
        model.reset(&mut state)?;
        model.prefill_with_images(&mut state, &prompt, &[image], Logits::Last)?;
        let t2 = Instant::now();
        if round > 0 {
            // round 0 is the warm-up of the same shapes
            tower_ms.push((t1 - t0).as_secs_f64() * 1e3);
            prefill_ms.push((t2 - t1).as_secs_f64() * 1e3);
        }
    }
    // decoding after the image prompt (its text turning by the delta) and after text alone
    let mut text_state = model.try_new_state()?;
    model.prefill(&mut text_state, &synthetic_prompt(prompt.len(), model.config.vocab_size), Logits::Last)?;
    let (mut after_image, mut after_text) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        for (st, rates) in [(&mut state, &mut after_image), (&mut text_state, &mut after_text)] {
            model.decode_greedy(st, Some(17), 1)?; // the graph, captured on the first
            let t = Instant::now();
            model.decode_greedy(st, None, decode_steps)?;
            rates.push(decode_steps as f64 / t.elapsed().as_secs_f64());
        }
    }
    let (tower, prefill) = (median(&tower_ms), median(&prefill_ms));
    println!(
        "solo bench --image {w}x{h} — {} — vision tower {} blocks × {} (random bf16 weights), {patches} patches → {tokens} tokens",
        model.gpu.name, cfg.depth, cfg.hidden_size
    );
    println!("| step | ms (median of {rounds}) |\n|---|---:|");
    println!("| vision tower + merger | {tower:.2} |");
    println!("| prefill of {} tokens (image + 256 text) | {prefill:.2} |", prompt.len());
    println!("| time to first token | {:.2} |", tower + prefill);
    let (image_rate, text_rate) = (median(&after_image), median(&after_text));
    println!(
        "decode after the image prompt {image_rate:.1} tok/s, after a text prompt of the same length {text_rate:.1} tok/s ({:+.2} %; {decode_steps} steps, median of {rounds})",
        (image_rate / text_rate - 1.0) * 100.0
    );
    if profile {
        let kernels = solo_cuda::profile::profile_launches(&model.gpu, || model.encode_image(&img).map(|_| ()))?;
        print_profile(&format!("the vision tower on a {w}x{h} image"), &kernels);
    }
    Ok(())
}

/// `--lora-rank`'s adapter (B's entries a tenth of the product's size; `seed` picks one of many),
/// checked against what the backend adapts; `None` without one.
fn bench_adapter(model: &solo_cuda::model::CudaModel, args: &BenchArgs, seed: u64) -> Result<Option<Arc<LoraAdapter>>> {
    if args.lora_rank == 0 {
        return Ok(None);
    }
    if !(1..=solo_model::lora::MAX_RANK).contains(&args.lora_rank) {
        bail!("--lora-rank {}: ranks go up to {}", args.lora_rank, solo_model::lora::MAX_RANK);
    }
    let targets = match args.lora_targets {
        LoraTargets::Attn => AdapterTargets::Mixers,
        LoraTargets::AllLinear => AdapterTargets::AllLinear,
        LoraTargets::AttnExperts => AdapterTargets::MixersAndExperts,
        LoraTargets::All => AdapterTargets::All,
    };
    Ok(Some(Arc::new(solo_cuda::synthetic::random_adapter(model, args.lora_rank, seed, 0.05, targets))))
}

fn synthetic_prompt(len: usize, vocab: usize) -> Vec<u32> {
    let mut rng = SplitMix(len as u64);
    (0..len).map(|_| (rng.next_u64() % (vocab as u64).min(200_000)) as u32).collect()
}
