//! The `solo` binary as a user runs it, from the workspace root, on the tiny fixtures: `logits`
//! against Hugging Face's, `perplexity` against `logits`, `run` (explicit model, seeded sampling,
//! the demo checkpoint), and bad input: one `solo: error:` line on stderr, a non-zero exit, no panic.

use safetensors::{Dtype, SafeTensors};
use std::path::Path;
use tempfile::TempDir;

const MAX_REL_ERR: f32 = 1e-4;

mod common;
use common::{assert_one_line_error as assert_error, root, solo_with, Output};

/// `solo ARGS` with `env` set and the cache variables otherwise unset.
fn solo_env(args: &[&str], env: &[(&str, &Path)]) -> Output {
    solo_with(args, &["SOLO_CACHE", "HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"], env)
}

fn solo(args: &[&str]) -> Output {
    solo_env(args, &[])
}

/// HF's reference for a fixture: the tokens and the fp32 logits, one row per token.
fn hf_reference(fixture: &str) -> (Vec<u32>, Vec<Vec<f32>>) {
    reference(&root().join("fixtures").join(fixture).join("hf_reference.safetensors"))
}

/// A reference file's tokens (I64) and fp32 logits, one row per token.
fn reference(path: &Path) -> (Vec<u32>, Vec<Vec<f32>>) {
    let bytes = std::fs::read(path).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let tokens = st.tensor("tokens").unwrap();
    assert_eq!(tokens.dtype(), Dtype::I64);
    let tokens: Vec<u32> =
        tokens.data().chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap()) as u32).collect();
    let logits = st.tensor("logits").unwrap();
    assert_eq!(logits.dtype(), Dtype::F32);
    let vocab = logits.shape()[1];
    let values: Vec<f32> = logits.data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
    (tokens, values.chunks(vocab).map(<[f32]>::to_vec).collect())
}

/// The rows of `solo logits` output.
fn parse_logits(stdout: &str) -> Vec<Vec<f32>> {
    let json: serde_json::Value = serde_json::from_str(stdout).expect("solo logits did not print JSON");
    json["logits"]
        .as_array()
        .expect("no `logits` array")
        .iter()
        .map(|row| row.as_array().unwrap().iter().map(|x| x.as_f64().expect("non-finite logit") as f32).collect())
        .collect()
}

fn argmax(v: &[f32]) -> usize {
    (0..v.len()).fold(0, |best, i| if v[i] > v[best] { i } else { best })
}

fn join(tokens: &[u32]) -> String {
    tokens.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

/// A copy of a fixture's checkpoint (without the HF outputs) in a temp dir.
fn copy_fixture(name: &str) -> TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(root().join("fixtures").join(name)).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap();
        if file != "hf_reference.safetensors" {
            std::fs::copy(&path, tmp.path().join(file)).unwrap();
        }
    }
    tmp
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

// ---- logits -------------------------------------------------------------------------------------

#[test]
fn logits_match_hugging_face() {
    let (tokens, hf) = hf_reference("tiny-a");
    let tokens = join(&tokens[..20]);
    for prefill in [None, Some("7"), Some("1"), Some("20")] {
        let mut args = vec!["logits", "--model", "fixtures/tiny-a", "--tokens", &tokens];
        if let Some(n) = prefill {
            args.extend(["--prefill", n]);
        }
        let rows = parse_logits(&solo(&args).ok().stdout);
        assert_eq!(rows.len(), 20, "prefill {prefill:?}");
        for (pos, (ours, theirs)) in rows.iter().zip(&hf).enumerate() {
            assert_eq!(ours.len(), theirs.len(), "prefill {prefill:?}: row {pos} length");
            let scale = theirs.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let err = ours.iter().zip(theirs).fold(0.0f32, |m, (a, b)| m.max((a - b).abs())) / scale;
            assert!(err <= MAX_REL_ERR, "prefill {prefill:?}: row {pos} relative error {err:.3e}");
            assert_eq!(argmax(ours), argmax(theirs), "prefill {prefill:?}: row {pos} argmax");
        }
    }
}

/// `solo logits --lora` on tiny-a with its PEFT adapter (every adaptable module, the routed
/// experts too; `scripts/make_lora_fixtures.py`): PEFT's own fp32 logits, through prefill and
/// decode.
#[test]
fn logits_with_a_lora_adapter_match_peft() {
    let (tokens, peft) = reference(&root().join("fixtures/lora/tiny-a/peft_reference.safetensors"));
    let all = join(&tokens);
    let half = (tokens.len() / 2).to_string();
    let args = ["logits", "--model", "fixtures/tiny-a", "--lora", "fixtures/lora/tiny-a", "--tokens", &all];
    let rows = parse_logits(&solo(&[&args[..], &["--prefill", &half]].concat()).ok().stdout);
    assert_eq!(rows.len(), tokens.len());
    for (pos, (ours, theirs)) in rows.iter().zip(&peft).enumerate() {
        let scale = theirs.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let err = ours.iter().zip(theirs).fold(0.0f32, |m, (a, b)| m.max((a - b).abs())) / scale;
        assert!(err <= MAX_REL_ERR, "row {pos}: relative error {err:.3e} to PEFT");
        assert_eq!(argmax(ours), argmax(theirs), "row {pos} argmax");
    }
    // without the adapter the same tokens give other logits
    let plain = parse_logits(&solo(&["logits", "--model", "fixtures/tiny-a", "--tokens", &all]).ok().stdout);
    let moved = plain.iter().zip(&rows).any(|(a, b)| a.iter().zip(b).any(|(x, y)| (x - y).abs() > 1e-2));
    assert!(moved, "the adapter does not change the logits");
}

#[test]
fn logits_of_the_sharded_fixture() {
    let (tokens, hf) = hf_reference("tiny-b");
    let rows =
        parse_logits(&solo(&["logits", "--model", "fixtures/tiny-b", "--tokens", &join(&tokens[..5])]).ok().stdout);
    assert_eq!(rows.len(), 5);
    for (pos, (ours, theirs)) in rows.iter().zip(&hf).enumerate() {
        assert_eq!(argmax(ours), argmax(theirs), "row {pos}");
    }
}

/// The FP8 checkpoint through the binary: its logits are HF's on the dequantised weights, and
/// `solo run` names its precision.
#[test]
fn fp8_checkpoint_logits_and_run() {
    let (tokens, hf) = hf_reference("tiny-fp8");
    let rows = parse_logits(
        &solo(&["logits", "--model", "fixtures/tiny-fp8", "--backend", "cpu", "--tokens", &join(&tokens[..6])])
            .ok()
            .stdout,
    );
    assert_eq!(rows.len(), 6);
    for (pos, (ours, theirs)) in rows.iter().zip(&hf).enumerate() {
        assert_eq!(argmax(ours), argmax(theirs), "row {pos}");
    }
    let args = ["run", "--model", "fixtures/tiny-fp8", "--backend", "cpu", "--prompt", "hi", "--max-tokens", "3"];
    let out = solo(&args).ok();
    assert!(out.stderr.contains("fp8-block128 weights, cpu backend"), "{}", out.stderr);
}

// ---- perplexity ---------------------------------------------------------------------------------

/// English and code, long enough to cross perplexity's 512-token prefill chunks.
fn sample_text() -> String {
    let mut text = String::new();
    for i in 0..12 {
        text.push_str(&format!(
            "Paragraph {i}: the quick brown fox jumps over the lazy dog, and the dog does not mind. \
             fn add(a: i32, b: i32) -> i32 {{ a + b * {i} }}\n"
        ));
    }
    text
}

#[test]
fn perplexity_agrees_with_logits() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("sample.txt");
    let text = sample_text();
    std::fs::write(&file, &text).unwrap();
    let out = solo(&["perplexity", "--model", "fixtures/tiny-a", "--text-file", path_str(&file)]).ok();
    let json: serde_json::Value = serde_json::from_str(&out.stdout).expect("perplexity did not print JSON");
    let mean_nll = json["mean_nll"].as_f64().unwrap();
    let ppl = json["perplexity"].as_f64().unwrap();
    assert!(mean_nll.is_finite() && mean_nll > 0.0, "{json}");
    assert!((ppl - mean_nll.exp()).abs() <= 1e-9 * ppl, "{json}");

    // The same tokens, independently: the tokenizer, then `solo logits` in one prefill.
    let tokens = solo_text::Tokenizer::from_dir(root().join("fixtures/tiny-a")).unwrap().encode(&text).unwrap();
    assert!(tokens.len() > 512, "the sample should span two prefill chunks, has {} tokens", tokens.len());
    assert_eq!(json["tokens"].as_u64(), Some(tokens.len() as u64), "{json}");
    assert_eq!(json["predicted"].as_u64(), Some(tokens.len() as u64 - 1), "{json}");
    let rows = parse_logits(&solo(&["logits", "--model", "fixtures/tiny-a", "--tokens", &join(&tokens)]).ok().stdout);
    let nll: f64 = rows
        .iter()
        .zip(&tokens[1..])
        .map(|(row, &next)| {
            let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
            let sum: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
            max + sum.ln() - row[next as usize] as f64
        })
        .sum();
    let expected = nll / (tokens.len() - 1) as f64;
    assert!(
        (mean_nll - expected).abs() <= 1e-4 * expected,
        "perplexity's mean_nll {mean_nll} vs {expected} from solo logits"
    );
}

// ---- run ----------------------------------------------------------------------------------------

/// The stderr summary: `solo: prompt N tokens, prefill … tok/s; generated M tokens, decode … tok/s`.
fn summary(stderr: &str) -> (usize, usize) {
    let line =
        stderr.lines().find(|l| l.starts_with("solo: prompt ")).unwrap_or_else(|| panic!("no summary:\n{stderr}"));
    assert!(line.contains("prefill") && line.contains("decode") && line.contains("tok/s"), "{line}");
    let number_after = |word: &str| -> usize {
        let rest = &line[line.find(word).unwrap_or_else(|| panic!("{line}")) + word.len()..];
        rest.split_whitespace().next().unwrap().parse().unwrap_or_else(|_| panic!("{line}"))
    };
    (number_after("prompt "), number_after("generated "))
}

#[test]
fn run_greedy() {
    // thinking off: the tokens are the answer (with thinking on, 8 tokens are all reasoning, on stderr)
    let args = [
        "run",
        "--model",
        "fixtures/tiny-a",
        "--prompt",
        "hi",
        "--max-tokens",
        "8",
        "--temperature",
        "0",
        "--no-think",
    ];
    let first = solo(&args).ok();
    assert!(!first.stdout.is_empty());
    let (prompt, generated) = summary(&first.stderr);
    assert!(prompt > 1, "{}", first.stderr);
    assert!((1..=8).contains(&generated), "{}", first.stderr);
    let second = solo(&args).ok();
    assert_eq!(first.stdout, second.stdout, "greedy decoding is not deterministic");
}

#[test]
fn run_with_a_seed_is_reproducible() {
    let args = [
        "run",
        "--model",
        "fixtures/tiny-b",
        "--prompt",
        "Name a color.",
        "--max-tokens",
        "12",
        "--temperature",
        "1",
        "--seed",
        "42",
    ];
    let first = solo(&args).ok();
    let second = solo(&args).ok();
    summary(&first.stderr);
    assert_eq!(first.stdout, second.stdout);
}

#[test]
fn run_without_a_model_uses_the_demo_checkpoint() {
    let cache = tempfile::tempdir().unwrap();
    let hub = tempfile::tempdir().unwrap(); // an empty Hugging Face cache
    let env = [("SOLO_CACHE", cache.path()), ("HF_HUB_CACHE", hub.path())];
    let args = ["run", "--prompt", "hello", "--max-tokens", "4", "--temperature", "0"];

    let first = solo_env(&args, &env).ok();
    assert!(first.stderr.contains("demo checkpoint") && first.stderr.contains("tiny model"), "{}", first.stderr);
    summary(&first.stderr);
    let entries: Vec<_> =
        std::fs::read_dir(cache.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert_eq!(entries, [solo::demo::dir_name()], "leftovers in the cache");
    assert!(entries[0].starts_with("demo-"));
    let weights = cache.path().join(&entries[0]).join("model.safetensors");
    assert!(weights.exists(), "no demo checkpoint in {}", cache.path().display());
    let written = std::fs::metadata(&weights).unwrap().modified().unwrap();

    let second = solo_env(&args, &env).ok();
    assert!(second.stderr.contains("tiny model"), "{}", second.stderr);
    assert_eq!(std::fs::metadata(&weights).unwrap().modified().unwrap(), written, "the demo checkpoint was rewritten");
    assert_eq!(first.stdout, second.stdout);
}

#[test]
fn the_demo_checkpoint_answers_the_readme_prompt_in_words() {
    let cache = tempfile::tempdir().unwrap();
    let hub = tempfile::tempdir().unwrap();
    let env = [("SOLO_CACHE", cache.path()), ("HF_HUB_CACHE", hub.path())];
    for think in [true, false] {
        let mut args = vec!["run", "--prompt", "Name the two colors of a chessboard.", "--max-tokens", "80"];
        args.extend(["--temperature", "0"]);
        if !think {
            args.push("--no-think");
        }
        let out = solo_env(&args, &env).ok();
        assert!(out.stdout.contains("black and white"), "think {think}: {}", out.stdout);
    }
}

/// `--speculate 3` on the demo (its MTP head is trained): the same greedy reply, and the summary
/// line counts the drafts accepted.
#[test]
fn speculation_gives_the_same_reply_and_reports_acceptance() {
    let cache = tempfile::tempdir().unwrap();
    let hub = tempfile::tempdir().unwrap();
    let env = [("SOLO_CACHE", cache.path()), ("HF_HUB_CACHE", hub.path())];
    let args = ["run", "--prompt", "Name the two colors of a chessboard.", "--max-tokens", "40", "--temperature", "0"];
    let plain = solo_env(&args, &env).ok();
    let mut spec_args = args.to_vec();
    spec_args.extend(["--speculate", "3"]);
    let spec = solo_env(&spec_args, &env).ok();
    assert_eq!(spec.stdout, plain.stdout);
    let line = spec.stderr.lines().last().unwrap_or_default();
    assert!(line.contains("3 drafts per step:") && line.contains("tokens per step"), "{line}");
    assert!(!plain.stderr.contains("drafts per step"), "{}", plain.stderr);
}

// ---- bad input ----------------------------------------------------------------------------------

#[test]
fn nonexistent_model_dir() {
    let missing = "fixtures/no-such-model";
    assert_error(&solo(&["logits", "--model", missing, "--tokens", "1,2"]), &[missing]);
    assert_error(&solo(&["run", "--model", missing, "--prompt", "hi"]), &[missing]);
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("t.txt");
    std::fs::write(&file, "some text to score").unwrap();
    assert_error(&solo(&["perplexity", "--model", missing, "--text-file", path_str(&file)]), &[missing]);
}

#[test]
fn token_id_out_of_vocab() {
    // tiny-a's vocab_size is 512: 511 is the last valid id.
    solo(&["logits", "--model", "fixtures/tiny-a", "--tokens", "3,511"]).ok();
    assert_error(&solo(&["logits", "--model", "fixtures/tiny-a", "--tokens", "3,512,7"]), &["512"]);
    assert_error(&solo(&["logits", "--model", "fixtures/tiny-a", "--tokens", "4000000000"]), &["4000000000"]);
}

#[test]
fn prefill_out_of_range() {
    assert_error(
        &solo(&["logits", "--model", "fixtures/tiny-a", "--tokens", "1,2,3", "--prefill", "0"]),
        &["--prefill", "0"],
    );
    assert_error(
        &solo(&["logits", "--model", "fixtures/tiny-a", "--tokens", "1,2,3", "--prefill", "4"]),
        &["--prefill", "4"],
    );
}

#[test]
fn truncated_checkpoint() {
    let tmp = copy_fixture("tiny-a");
    let weights = tmp.path().join("model.safetensors");
    let len = std::fs::metadata(&weights).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&weights).unwrap().set_len(len * 6 / 10).unwrap();
    let dir = path_str(tmp.path());
    assert_error(
        &solo(&["logits", "--model", dir, "--tokens", "1,2"]),
        &["model.safetensors", "tensor `", "truncated"],
    );
    assert_error(&solo(&["run", "--model", dir, "--prompt", "hi"]), &["model.safetensors", "truncated"]);
}

#[test]
fn foreign_config() {
    let tmp = copy_fixture("tiny-a");
    let path = tmp.path().join("config.json");
    let mut cfg: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    cfg["model_type"] = "llama".into();
    std::fs::write(&path, cfg.to_string()).unwrap();
    assert_error(&solo(&["logits", "--model", path_str(tmp.path()), "--tokens", "1,2"]), &["config.json", "llama"]);
}

#[test]
fn missing_text_file() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("absent.txt");
    assert_error(
        &solo(&["perplexity", "--model", "fixtures/tiny-a", "--text-file", path_str(&file)]),
        &[path_str(&file)],
    );
}

#[test]
fn text_too_short_to_score() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("empty.txt");
    std::fs::write(&file, "").unwrap();
    assert_error(
        &solo(&["perplexity", "--model", "fixtures/tiny-a", "--text-file", path_str(&file)]),
        &["empty.txt", "2 tokens"],
    );
}

#[test]
fn negative_temperature() {
    let out = solo(&["run", "--model", "fixtures/tiny-a", "--prompt", "hi", "--temperature=-1"]);
    assert_error(&out, &["--temperature"]);
}

/// Without a GPU (CI, most laptops) the CUDA paths fail with one line that says what is missing.
/// On a machine with a GPU this test has nothing to check and says so.
#[test]
fn cuda_without_a_gpu_is_one_clear_line() {
    if solo_cuda::gpu_present() {
        eprintln!("a GPU is present: the no-GPU error cannot be observed here");
        return;
    }
    let out = solo(&["bench", "--synthetic", "--contexts", "256"]);
    assert_error(&out, &["CUDA"]);
    // `--backend cuda` says there is no GPU and what to use instead.
    let out = solo(&["logits", "--model", "fixtures/tiny-a", "--tokens", "1,2", "--backend", "cuda"]);
    assert_error(&out, &["no NVIDIA GPU", "--backend cpu"]);
}
