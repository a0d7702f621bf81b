//! What the server's pieces of a one-token request cost outside HTTP, on the CPU backend: the
//! prompts `scripts/serve_overhead.py` sends, each piece timed alone (median of the runs).
//!
//! ```text
//! cargo run --release -p solo-server --example request_costs -- fixtures/tiny-a [runs]
//! ```

use serde_json::{json, Value};
use solo_model::{Backend, Logits};
use solo_server::prompt::{self, TextAssets};
use std::path::PathBuf;
use std::time::Instant;

fn median_ms(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    1e3 * v[v.len() / 2]
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().unwrap_or_else(|| "fixtures/tiny-a".into()));
    let runs: usize = args.next().map_or(Ok(200), |n| n.parse())?;
    let text = TextAssets::from_dir(&dir)?;
    let backend = solo_cpu::load(&dir)?;
    let words = ["hello"; 8].join(" ");
    let chat_body = |i: usize| {
        json!({"max_tokens": 1, "temperature": 0, "stream": false, "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": format!("{words} (request {i})")}]})
        .to_string()
    };
    let completion_body = |i: usize| {
        json!({"max_tokens": 1, "temperature": 0, "stream": false, "prompt": format!("{words} (request {i})")})
            .to_string()
    };

    let mut rows: Vec<(&str, Vec<f64>)> = Vec::new();
    let mut time = |name: &'static str, f: &mut dyn FnMut(usize)| {
        let mut times = Vec::with_capacity(runs);
        for i in 0..runs {
            let t = Instant::now();
            f(i);
            times.push(t.elapsed().as_secs_f64());
        }
        rows.push((name, times));
    };
    let mut chat_tokens = 0;
    let mut completion_tokens = 0;
    time("chat: JSON body parse", &mut |i| {
        let _: Value = serde_json::from_str(&chat_body(i)).unwrap();
    });
    time("chat: prompt::chat (renders + encodes)", &mut |i| {
        let body: Value = serde_json::from_str(&chat_body(i)).unwrap();
        let p = prompt::chat(&text, body.get("messages"), None, None, None).unwrap();
        chat_tokens = p.tokens.len();
    });
    time("chat: one render", &mut |i| {
        let body: Value = serde_json::from_str(&chat_body(i)).unwrap();
        let opts = solo_text::TemplateOptions { add_generation_prompt: true, ..Default::default() };
        text.template.render(&body["messages"], None, &opts).unwrap();
    });
    time("chat: one encode", &mut |i| {
        text.tokenizer.encode(&format!("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n{words} (request {i})<|im_end|>\n<|im_start|>assistant\n<think>\n")).unwrap();
    });
    time("completions: prompt::completion (encode)", &mut |i| {
        let body: Value = serde_json::from_str(&completion_body(i)).unwrap();
        completion_tokens = prompt::completion(&text, body.get("prompt"), 512).unwrap().len();
    });
    let chat_prompts: Vec<Vec<u32>> = (0..runs)
        .map(|i| {
            let body: Value = serde_json::from_str(&chat_body(i)).unwrap();
            prompt::chat(&text, body.get("messages"), None, None, None).unwrap().tokens
        })
        .collect();
    let completion_prompts: Vec<Vec<u32>> = (0..runs)
        .map(|i| {
            let body: Value = serde_json::from_str(&completion_body(i)).unwrap();
            prompt::completion(&text, body.get("prompt"), 512).unwrap()
        })
        .collect();
    for (name, prompts) in [("chat prompt", &chat_prompts), ("completions prompt", &completion_prompts)] {
        let mut new_state = Vec::new();
        let mut prefill = Vec::new();
        let mut snapshot = Vec::new();
        for p in prompts {
            let t = Instant::now();
            let mut state = backend.new_state()?;
            new_state.push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            backend.prefill(&mut state, p, Logits::Last)?;
            prefill.push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            let _ = backend.snapshot(&state);
            snapshot.push(t.elapsed().as_secs_f64());
        }
        println!(
            "{name}: new_state {:.3} ms, prefill {:.3} ms, snapshot {:.3} ms (medians of {runs})",
            median_ms(new_state),
            median_ms(prefill),
            median_ms(snapshot)
        );
    }
    // The chat prompt as the engine prefills it: cut at its snapshot points (a call each).
    let chats: Vec<prompt::ChatPrompt> = (0..runs)
        .map(|i| {
            let body: Value = serde_json::from_str(&chat_body(i)).unwrap();
            prompt::chat(&text, body.get("messages"), None, None, None).unwrap()
        })
        .collect();
    let cuts = |p: &prompt::ChatPrompt| {
        solo_server::generate::prefill_cuts(0, p.tokens.len(), &p.snapshot_points, 2048, backend.prefill_chunk())
    };
    println!("chat prompt's prefill calls: ends at {:?}", cuts(&chats[0]));
    let mut cut_times = Vec::new();
    for p in &chats {
        let mut state = backend.new_state()?;
        let t = Instant::now();
        let mut pos = 0;
        for end in cuts(p) {
            backend.prefill(&mut state, &p.tokens[pos..end], Logits::Last)?;
            let _ = backend.snapshot(&state);
            pos = end;
        }
        cut_times.push(t.elapsed().as_secs_f64());
    }
    println!("chat prompt in those calls (with their snapshots): {:.3} ms", median_ms(cut_times));
    for n in [1, 4, 8, 16, 32, 42, 64, 80, 128] {
        let mut times = Vec::new();
        for p in &chat_prompts {
            let mut state = backend.new_state()?;
            let t = Instant::now();
            backend.prefill(&mut state, &p.iter().cycle().take(n).copied().collect::<Vec<u32>>(), Logits::Last)?;
            times.push(t.elapsed().as_secs_f64());
        }
        println!("one prefill call of {n:>3} tokens: {:.3} ms", median_ms(times));
    }
    // The same work right after a prefill (as in the server, where each request's prompt comes
    // after the previous one's prefill): caches hold the model's weights, not the tokenizer's.
    let mut cold_chat = Vec::new();
    let mut cold_completion = Vec::new();
    for (i, p) in chat_prompts.iter().enumerate() {
        let mut state = backend.new_state()?;
        backend.prefill(&mut state, p, Logits::Last)?;
        let body: Value = serde_json::from_str(&chat_body(i)).unwrap();
        let t = Instant::now();
        let _ = prompt::chat(&text, body.get("messages"), None, None, None).unwrap();
        cold_chat.push(t.elapsed().as_secs_f64());
        let mut state = backend.new_state()?;
        backend.prefill(&mut state, p, Logits::Last)?;
        let body: Value = serde_json::from_str(&completion_body(i)).unwrap();
        let t = Instant::now();
        let _ = prompt::completion(&text, body.get("prompt"), 512).unwrap();
        cold_completion.push(t.elapsed().as_secs_f64());
    }
    println!(
        "right after a prefill: prompt::chat {:.3} ms, prompt::completion {:.3} ms",
        median_ms(cold_chat),
        median_ms(cold_completion)
    );
    // Template and tokenizer against the body's size (what decides running them inline).
    for kib in [1, 2, 4, 16] {
        let content = "The quick brown fox jumps over the lazy dog. ".repeat(kib * 1024 / 45);
        let body = json!({"messages": [{"role": "user", "content": content}]});
        let mut times = Vec::new();
        for _ in 0..runs.min(50) {
            let t = Instant::now();
            prompt::chat(&text, body.get("messages"), None, None, None).unwrap();
            times.push(t.elapsed().as_secs_f64());
        }
        println!("prompt::chat of a {kib:>2} KiB message: {:.3} ms", median_ms(times));
    }
    println!("chat prompt: {chat_tokens} tokens; completions prompt: {completion_tokens} tokens");
    for (name, times) in rows {
        println!("{name:>42}: {:.3} ms", median_ms(times));
    }
    Ok(())
}
