//! A new user's first hour (issue 44): `solo run`'s stdout holds the answer alone, the built-in
//! demo answers its own training questions, and the mistakes a newcomer makes with `--model`,
//! `--backend cuda` and `--port` each fail in one line that says what to do.

use std::path::Path;
use tempfile::TempDir;

mod common;
use common::{assert_one_line_error, root, solo_with, Output};

/// `solo ARGS` in the workspace root, the demo written under `cache` and an empty Hugging Face cache.
fn solo_in(args: &[&str], cache: &Path) -> Output {
    solo_with(
        args,
        &["HF_HOME", "XDG_CACHE_HOME"],
        &[("SOLO_CACHE", cache.join("solo")), ("HF_HUB_CACHE", cache.join("hub"))],
    )
}

// ---- solo run: the answer alone on stdout -------------------------------------------------------

#[test]
fn run_prints_the_answer_alone_and_the_reasoning_on_stderr() {
    let cache = TempDir::new().unwrap();
    let prompt = "Name the two colors of a chessboard.";
    let args = ["run", "--prompt", prompt, "--temperature", "0", "--max-tokens", "120"];
    let out = solo_in(&args, cache.path()).ok();
    assert_eq!(out.stdout, "The two colors of a chessboard are black and white.\n");
    // the reasoning goes to stderr, without its markers (not a terminal: not dimmed)
    assert!(out.stderr.contains("The user asks about the colors of a chessboard."), "{}", out.stderr);
    assert!(!out.stderr.contains("think>") && !out.stderr.contains("\x1b["), "{}", out.stderr);

    let quiet = solo_in(&[&args[..], &["--no-reasoning"]].concat(), cache.path()).ok();
    assert_eq!(quiet.stdout, out.stdout);
    assert!(!quiet.stderr.contains("The user asks"), "{}", quiet.stderr);

    let off = solo_in(&[&args[..], &["--no-think"]].concat(), cache.path()).ok();
    assert_eq!(off.stdout, out.stdout);
    assert!(!off.stderr.contains("The user asks"), "{}", off.stderr);
}

// ---- the demo answers right ------------------------------------------------------------------

/// Every question of the demo's training set (fixtures/demo/questions.json), asked through
/// `solo run` greedily with thinking on and off: at least 95 % exact answers.
#[test]
fn the_demo_answers_its_training_questions() {
    let cache = TempDir::new().unwrap();
    let text = std::fs::read_to_string(root().join("fixtures/demo/questions.json")).unwrap();
    let rows: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    let qa: Vec<(String, String)> = rows
        .iter()
        .map(|r| (r["question"].as_str().unwrap().to_string(), r["answer"].as_str().unwrap().to_string()))
        .collect();
    assert!(qa.len() >= 100, "only {} questions", qa.len());
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    for q in ["Name the two colors of a chessboard.", "What is the capital of France?"] {
        assert!(qa.iter().any(|(question, _)| question == q), "{q} is not a training question");
    }
    assert!(readme.contains("Name the two colors of a chessboard."));
    // the demo checkpoint written once, then asked from two threads
    solo_in(&["run", "--prompt", "Hi", "--max-tokens", "1"], cache.path()).ok();
    let cases: Vec<(&(String, String), bool)> = qa.iter().flat_map(|c| [(c, true), (c, false)]).collect();
    let wrong: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = cases
            .chunks(cases.len().div_ceil(2))
            .map(|part| {
                let cache = cache.path();
                s.spawn(move || {
                    let mut wrong = Vec::new();
                    for ((q, a), think) in part {
                        let mut args = vec!["run", "--prompt", q, "--temperature", "0", "--max-tokens", "200"];
                        if !think {
                            args.push("--no-think");
                        }
                        let out = solo_in(&args, cache).ok();
                        if out.stdout.trim_end() != a {
                            wrong.push(format!("think {think}: {q:?} -> {:?} (want {a:?})", out.stdout));
                        }
                    }
                    wrong
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    let total = cases.len();
    let right = total - wrong.len();
    eprintln!("demo: {right} of {total} exact ({:.1} %)", 100.0 * right as f64 / total as f64);
    for w in &wrong {
        eprintln!("  {w}");
    }
    assert!(right * 100 >= total * 95, "{right} of {total} exact:\n{}", wrong.join("\n"));
}

// ---- errors a newcomer meets ----------------------------------------------------------------

fn copy(from: &str, to: &Path, names: &[&str]) {
    for name in names {
        std::fs::copy(root().join(from).join(name), to.join(name)).unwrap();
    }
}

#[test]
fn model_pointing_at_a_file_names_the_directory() {
    let cache = TempDir::new().unwrap();
    let out = solo_in(&["run", "--model", "fixtures/tiny-a/model.safetensors", "--prompt", "hi"], cache.path());
    assert_one_line_error(&out, &["is a file", "--model fixtures/tiny-a"]);
}

#[test]
fn model_directory_without_config() {
    let cache = TempDir::new().unwrap();
    let dir = TempDir::new().unwrap();
    let d = dir.path().to_str().unwrap();
    assert_one_line_error(
        &solo_in(&["run", "--model", d, "--prompt", "hi"], cache.path()),
        &["no config.json", "solo pull"],
    );
    // a directory holding a GGUF model: point at the file
    std::fs::write(dir.path().join("mmproj-F16.gguf"), b"GGUF").unwrap();
    std::fs::write(dir.path().join("Qwen3.6-35B-A3B-Q4_K_M.gguf"), b"GGUF").unwrap();
    let out = solo_in(&["chat", "--model", d], cache.path());
    assert_one_line_error(&out, &["Qwen3.6-35B-A3B-Q4_K_M.gguf"]);
    assert!(!out.stderr.contains("mmproj"), "{}", out.stderr);
}

#[test]
fn model_at_a_partial_download_names_the_missing_shard() {
    let cache = TempDir::new().unwrap();
    let dir = TempDir::new().unwrap();
    copy(
        "fixtures/tiny-b",
        dir.path(),
        &[
            "config.json",
            "tokenizer.json",
            "tokenizer_config.json",
            "model.safetensors.index.json",
            "model-00001-of-00002.safetensors",
        ],
    );
    let out = solo_in(&["run", "--model", dir.path().to_str().unwrap(), "--prompt", "hi"], cache.path());
    assert_one_line_error(&out, &["model-00002-of-00002.safetensors", "1 of the 2 shards", "solo pull"]);
}

#[test]
fn model_at_the_vision_projector() {
    let cache = TempDir::new().unwrap();
    let dir = TempDir::new().unwrap();
    let mmproj = dir.path().join("mmproj-Qwen3.6-35B-A3B-F16.gguf");
    std::fs::write(&mmproj, b"GGUF\x03\x00\x00\x00").unwrap();
    let out = solo_in(&["run", "--model", mmproj.to_str().unwrap(), "--prompt", "hi"], cache.path());
    assert_one_line_error(&out, &["vision projector", "mmproj", ".gguf"]);
}

#[test]
fn model_without_a_tokenizer() {
    let cache = TempDir::new().unwrap();
    let dir = TempDir::new().unwrap();
    copy("fixtures/tiny-a", dir.path(), &["config.json", "model.safetensors"]);
    let out = solo_in(&["run", "--model", dir.path().to_str().unwrap(), "--prompt", "hi"], cache.path());
    assert_one_line_error(&out, &["no tokenizer.json", "tokenizer_config.json"]);
}

#[test]
fn cuda_backend_without_a_gpu() {
    if solo_cuda::gpu_present() {
        eprintln!("a GPU is present: the no-GPU error cannot be observed here");
        return;
    }
    let cache = TempDir::new().unwrap();
    for cmd in ["run", "chat"] {
        let mut args = vec![cmd, "--model", "fixtures/tiny-a", "--backend", "cuda"];
        if cmd == "run" {
            args.extend(["--prompt", "hi"]);
        }
        assert_one_line_error(&solo_in(&args, cache.path()), &["no NVIDIA GPU", "--backend cpu"]);
    }
}

#[test]
fn serve_on_a_port_in_use() {
    let cache = TempDir::new().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = solo_in(&["serve", "--model", "fixtures/tiny-a", "--host", "127.0.0.1", "--port", &port], cache.path());
    assert_one_line_error(&out, &[&format!("port {port}"), "already in use", "--port"]);
}
