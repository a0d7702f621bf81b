//! LoRA adapters through the HTTP API, on the CPU backend over tiny-a: `--lora NAME=DIR` at start,
//! each adapter its own model id in `/v1/models`, a request's `model` picking its adapter (the
//! first token's logprob is PEFT's own, from `fixtures/lora/tiny-a/peft_reference.safetensors`),
//! requests of different adapters decoding together, loading and unloading at run time behind
//! the API key, and the prefix cache keyed on the adapter.

mod common;

use common::*;
use safetensors::SafeTensors;
use serde_json::{json, Value};
use solo_server::Server;
use std::path::PathBuf;

fn adapter_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/lora").join(name)
}

/// `tokens` and `logits` [T, vocab] of a reference file.
fn reference(path: PathBuf) -> (Vec<u64>, Vec<Vec<f32>>) {
    let bytes = std::fs::read(&path).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let tokens = st.tensor("tokens").unwrap().data().chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().unwrap()));
    let logits = st.tensor("logits").unwrap();
    let vocab = logits.shape()[1];
    let values: Vec<f32> = logits.data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
    (tokens.collect(), values.chunks(vocab).map(<[f32]>::to_vec).collect())
}

/// The greedy token after row `row` of `logits` and its log-probability.
fn greedy(logits: &[f32]) -> (usize, f32) {
    let best = (0..logits.len()).fold(0, |b, i| if logits[i] > logits[b] { i } else { b });
    let max = logits[best];
    let lse = max + logits.iter().map(|v| (v - max).exp()).sum::<f32>().ln();
    (best, logits[best] - lse)
}

/// One greedy token after the first `n` fixture tokens with `model`; its logprob and the usage.
fn first_logprob(s: &Server, model: &str, prompt: &[u64]) -> (f32, Value) {
    let body = json!({"model": model, "prompt": prompt, "max_tokens": 1, "temperature": 0, "logprobs": 1});
    let r = ok(s, "/v1/completions", &body);
    assert_eq!(r["model"], "tiny-a"); // the served base model's id
    (r["choices"][0]["logprobs"]["token_logprobs"][0].as_f64().unwrap() as f32, r["usage"].clone())
}

fn with_adapters(adapters: &[(&str, &str)]) -> Server {
    let mut c = config();
    c.lora = adapters.iter().map(|(name, dir)| (name.to_string(), adapter_dir(dir))).collect();
    start_cpu(c)
}

#[test]
fn models_list_each_adapter_and_requests_pick_theirs() {
    let s = with_adapters(&[("tone", "tiny-a")]);
    let (_, models) = get(&s, "/v1/models");
    let models: Value = serde_json::from_str(&models).unwrap();
    let ids: Vec<&str> = models["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["tiny-a", "tone"]);
    let tone = &models["data"][1];
    assert_eq!((tone["parent"].as_str(), tone["lora_rank"].as_u64()), (Some("tiny-a"), Some(4)));
    assert!(tone["root"].as_str().unwrap().ends_with("tiny-a"));
    assert_eq!(get(&s, "/v1/models/tone").0, 200);

    let (tokens, peft) = reference(adapter_dir("tiny-a").join("peft_reference.safetensors"));
    let (_, hf) = reference(fixture().join("hf_reference.safetensors"));
    let n = 30;
    for (model, want) in [("tone", &peft), ("tiny-a", &hf), ("tone", &peft)] {
        let (logprob, _) = first_logprob(&s, model, &tokens[..n]);
        let (_, expected) = greedy(&want[n - 1]);
        assert!((logprob - expected).abs() < 1e-3, "{model}: logprob {logprob}, reference {expected}");
    }
    let (_, base_first) = greedy(&hf[n - 1]);
    let (_, lora_first) = greedy(&peft[n - 1]);
    assert!((base_first - lora_first).abs() > 1e-2, "the adapter changes the distribution");

    let (status, err) = post(&s, "/v1/completions", &json!({"model": "nope", "prompt": "x"}));
    assert_eq!((status, err["error"]["code"].as_str()), (404, Some("model_not_found")));
}

/// A snapshot made under one adapter never serves another: the same prompt with the base model,
/// then the adapter (nothing cached for it), then the adapter again (cached).
#[test]
fn prefix_cache_keys_on_the_adapter() {
    let s = with_adapters(&[("tone", "tiny-a")]);
    let (tokens, peft) = reference(adapter_dir("tiny-a").join("peft_reference.safetensors"));
    let n = 40;
    let cached = |u: &Value| u["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap();
    let (_, base) = first_logprob(&s, "tiny-a", &tokens[..n]);
    assert_eq!(cached(&base), 0);
    let (logprob, first) = first_logprob(&s, "tone", &tokens[..n]);
    assert_eq!(cached(&first), 0, "the base model's snapshot must not serve the adapter");
    assert!((logprob - greedy(&peft[n - 1]).1).abs() < 1e-3);
    let (logprob, again) = first_logprob(&s, "tone", &tokens[..n]);
    assert_eq!(cached(&again), n as u64);
    assert!((logprob - greedy(&peft[n - 1]).1).abs() < 1e-3);
}

/// Requests of two adapters and of none, at once: each reply is what it is alone, and the engine
/// ran batched decode steps.
#[test]
fn different_adapters_decode_together() {
    let s = with_adapters(&[("one", "tiny-a")]);
    // A second adapter: the same files under another name, loaded at run time.
    ok_text(&s, "/v1/load_lora_adapter", &json!({"lora_name": "two", "lora_path": adapter_dir("tiny-a")}), None);
    // End-of-text tokens banned so that every reply runs its full length.
    let body = |model: &str| {
        json!({"model": model, "prompt": "The quick brown fox", "max_tokens": 24, "temperature": 0,
               "logit_bias": {"380": -100, "382": -100}})
    };
    let models = ["one", "tiny-a", "two", "one"];
    let alone: Vec<String> =
        models.iter().map(|m| ok(&s, "/v1/completions", &body(m))["choices"][0]["text"].to_string()).collect();
    assert_ne!(alone[0], alone[1], "the adapter changes the reply");
    assert_eq!(alone[0], alone[2]);
    let before = metric(&s, "solo_batched_decode_size_count");
    let together: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = models
            .iter()
            .map(|m| {
                let (s, b) = (&s, body(m));
                scope.spawn(move || ok(s, "/v1/completions", &b)["choices"][0]["text"].to_string())
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(together, alone);
    assert!(metric(&s, "solo_batched_decode_size_count") > before, "no batched decode step ran");
}

/// POST with an optional bearer key; (status, body text).
fn post_text(s: &Server, path: &str, body: &Value, key: Option<&str>) -> (u16, String) {
    let mut request = client().post(url(s, path)).json(body);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request.send().unwrap();
    (response.status().as_u16(), response.text().unwrap())
}

fn ok_text(s: &Server, path: &str, body: &Value, key: Option<&str>) -> String {
    let (status, text) = post_text(s, path, body, key);
    assert_eq!(status, 200, "{text}");
    text
}

#[test]
fn adapters_load_and_unload_at_run_time_behind_the_key() {
    let mut c = config();
    c.api_key = Some("secret".into());
    let s = start_cpu(c);
    let key = Some("secret");
    let load = json!({"lora_name": "tone", "lora_path": adapter_dir("tiny-a")});
    assert_eq!(post_text(&s, "/v1/load_lora_adapter", &load, None).0, 401);
    assert_eq!(post_text(&s, "/v1/load_lora_adapter", &load, Some("wrong")).0, 401);
    let text = ok_text(&s, "/v1/load_lora_adapter", &load, key);
    assert!(text.contains("tone"), "{text}");

    let models = client().get(url(&s, "/v1/models")).bearer_auth("secret").send().unwrap().text().unwrap();
    assert!(models.contains("\"tone\""), "{models}");
    let chat = json!({"model": "tone", "messages": user("Hi"), "max_tokens": 3});
    ok_text(&s, "/v1/chat/completions", &chat, key);

    let (status, err) = post_text(&s, "/v1/load_lora_adapter", &load, key);
    assert!(status == 400 && err.contains("already been loaded"), "{status} {err}");
    // tiny-b's adapter does not fit tiny-a: refused, naming a tensor, one line per problem.
    let misfit = json!({"lora_name": "misfit", "lora_path": adapter_dir("tiny-b")});
    let (status, err) = post_text(&s, "/v1/load_lora_adapter", &misfit, key);
    let message = serde_json::from_str::<Value>(&err).unwrap()["error"]["message"].as_str().unwrap().to_string();
    assert_eq!(status, 400, "{err}");
    // (20 lines, then how many more)
    assert!(message.lines().take(20).all(|l| l.contains("tensor `base_model.model.")), "{message}");
    assert!(message.lines().nth(20).is_some_and(|l| l.contains("more problems")), "{message}");
    let base = json!({"lora_name": "tiny-a", "lora_path": adapter_dir("tiny-a")});
    assert_eq!(post_text(&s, "/v1/load_lora_adapter", &base, key).0, 400);
    assert_eq!(post_text(&s, "/v1/load_lora_adapter", &json!({"lora_name": "x"}), key).0, 400);

    ok_text(&s, "/v1/unload_lora_adapter", &json!({"lora_name": "tone"}), key);
    let (status, err) = post_text(&s, "/v1/chat/completions", &chat, key);
    assert!(status == 404 && err.contains("model_not_found"), "{status} {err}");
    assert_eq!(post_text(&s, "/v1/unload_lora_adapter", &json!({"lora_name": "tone"}), key).0, 404);
}
