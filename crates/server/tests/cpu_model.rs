//! The server over the real CPU backend on tiny-a (random weights, so the text is noise, but
//! every number is real): response shapes, usage, determinism, logprobs, stop strings and the
//! prefix cache over a multi-turn chat.

mod common;

use common::*;
use serde_json::{json, Value};
use solo_text::{ChatTemplate, TemplateOptions};

fn text_of(r: &Value) -> String {
    let m = &r["choices"][0]["message"];
    format!("{}|{}", m["reasoning_content"].as_str().unwrap_or(""), m["content"].as_str().unwrap_or(""))
}

#[test]
fn chat_response_shape_and_usage() {
    let s = start_cpu(config());
    let r = ok(
        &s,
        "/v1/chat/completions",
        &json!({"model": "tiny-a", "messages": user("Hello"), "max_tokens": 5, "temperature": 0}),
    );
    assert!(r["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(r["object"], "chat.completion");
    assert_eq!(r["model"], "tiny-a");
    assert!(r["created"].as_u64().unwrap() > 1_600_000_000);
    let choice = &r["choices"][0];
    assert_eq!(choice["index"], 0);
    assert_eq!(choice["message"]["role"], "assistant");
    assert!(["stop", "length"].contains(&choice["finish_reason"].as_str().unwrap()));
    assert_eq!(choice["logprobs"], Value::Null);

    let template = ChatTemplate::from_dir(fixture()).unwrap();
    let prompt = template
        .render(&user("Hello"), None, &TemplateOptions { add_generation_prompt: true, ..Default::default() })
        .unwrap();
    let usage = &r["usage"];
    assert_eq!(usage["prompt_tokens"], tokenizer().encode(&prompt).unwrap().len());
    let completion = usage["completion_tokens"].as_u64().unwrap();
    assert!((1..=5).contains(&completion));
    assert_eq!(usage["total_tokens"], usage["prompt_tokens"].as_u64().unwrap() + completion);
    assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], 0);
}

#[test]
fn streaming_matches_the_plain_response() {
    let s = start_cpu(config());
    let body = json!({"messages": user("Stream me"), "max_tokens": 12, "temperature": 0});
    let plain = ok(&s, "/v1/chat/completions", &body);
    let mut body = body;
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
    let events = stream(&s, "/v1/chat/completions", &body);
    let a = assemble(&events);
    assert_eq!(format!("{}|{}", a.reasoning, a.content), text_of(&plain));
    assert_eq!(a.finish_reason.as_deref(), plain["choices"][0]["finish_reason"].as_str());
    let usage = a.usage.expect("usage chunk");
    assert_eq!(usage["completion_tokens"], plain["usage"]["completion_tokens"]);
    assert_eq!(usage["prompt_tokens"], plain["usage"]["prompt_tokens"]);
    // With include_usage every other chunk carries `"usage": null`.
    assert!(events[..events.len() - 2].iter().all(|e| e["usage"].is_null()));
}

#[test]
fn temperature_zero_and_seeds_are_deterministic() {
    let s = start_cpu(config());
    let run = |extra: Value| {
        let mut body = json!({"messages": user("Tell me a story"), "max_tokens": 16});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        text_of(&ok(&s, "/v1/chat/completions", &body))
    };
    assert_eq!(run(json!({"temperature": 0})), run(json!({"temperature": 0, "seed": 5})));
    let a = run(json!({"temperature": 1.0, "top_k": 0, "top_p": 1.0, "seed": 42}));
    assert_eq!(a, run(json!({"temperature": 1.0, "top_k": 0, "top_p": 1.0, "seed": 42})));
    assert_ne!(a, run(json!({"temperature": 1.0, "top_k": 0, "top_p": 1.0, "seed": 43})));
    // Also with min_p and penalties in the mix.
    let b = json!({"temperature": 0.8, "min_p": 0.05, "presence_penalty": 0.5, "frequency_penalty": 0.5, "seed": 9});
    assert_eq!(run(b.clone()), run(b));
}

#[test]
fn logprobs_have_the_openai_shape() {
    let s = start_cpu(config());
    let body = json!({"messages": user("Hi"), "max_tokens": 4, "temperature": 0, "logprobs": true, "top_logprobs": 3});
    let r = ok(&s, "/v1/chat/completions", &body);
    let entries = r["choices"][0]["logprobs"]["content"].as_array().unwrap().clone();
    let completion = r["usage"]["completion_tokens"].as_u64().unwrap() as usize;
    let stopped = r["choices"][0]["finish_reason"] == "stop";
    assert_eq!(entries.len(), completion - stopped as usize, "one entry per output token");
    for e in &entries {
        assert!(e["token"].is_string() && e["bytes"].is_array());
        let lp = e["logprob"].as_f64().unwrap();
        assert!(lp <= 0.0);
        let top = e["top_logprobs"].as_array().unwrap();
        assert_eq!(top.len(), 3);
        let tops: Vec<f64> = top.iter().map(|t| t["logprob"].as_f64().unwrap()).collect();
        assert!(tops.windows(2).all(|w| w[0] >= w[1]), "{tops:?}");
        // Greedy: the chosen token is the most likely one.
        assert_eq!(lp, tops[0]);
        assert_eq!(e["token"], top[0]["token"]);
    }
    let mut body = body;
    body["stream"] = json!(true);
    let a = assemble(&stream(&s, "/v1/chat/completions", &body));
    assert_eq!(a.logprobs, entries);

    let r =
        ok(&s, "/v1/completions", &json!({"prompt": "Once upon", "max_tokens": 3, "temperature": 0, "logprobs": 2}));
    let lp = &r["choices"][0]["logprobs"];
    let n = lp["tokens"].as_array().unwrap().len();
    assert!(n >= 1);
    for key in ["token_logprobs", "top_logprobs", "text_offset"] {
        assert_eq!(lp[key].as_array().unwrap().len(), n, "{key}");
    }
    assert!(lp["top_logprobs"][0].as_object().unwrap().len() <= 2);
}

#[test]
fn completions_and_stop_strings() {
    let s = start_cpu(config());
    let body = json!({"prompt": "The quick brown fox", "max_tokens": 24, "temperature": 0});
    let r = ok(&s, "/v1/completions", &body);
    assert_eq!(r["object"], "text_completion");
    let text = r["choices"][0]["text"].as_str().unwrap().to_string();
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    assert!(chars.len() >= 6, "the model wrote {text:?}");
    // A stop string from the middle of the greedy output: the reply ends right before it.
    let (mid, _) = chars[chars.len() / 2];
    let end = chars.get(chars.len() / 2 + 2).map_or(text.len(), |c| c.0);
    let stop = &text[mid..end];
    let cut = text.find(stop).unwrap();
    let mut body = body;
    body["stop"] = json!([stop]);
    let r = ok(&s, "/v1/completions", &body);
    assert_eq!(r["choices"][0]["text"], &text[..cut]);
    assert_eq!(r["choices"][0]["finish_reason"], "stop");

    body["stream"] = json!(true);
    let events = stream(&s, "/v1/completions", &body);
    assert_eq!(events.last().unwrap(), "[DONE]");
    let streamed: String = events.iter().filter_map(|e| e["choices"][0]["text"].as_str()).collect();
    assert_eq!(streamed, &text[..cut]);
    assert_eq!(events[events.len() - 2]["choices"][0]["finish_reason"], "stop");

    // Token-id prompts work too.
    let r = ok(&s, "/v1/completions", &json!({"prompt": [381, 10, 20], "max_tokens": 2}));
    assert_eq!(r["usage"]["prompt_tokens"], 3);
}

/// Thinking on (the default): old reasoning is dropped from the render, so each turn resumes
/// from the snapshot at the end of the previous turn's messages; the cache grows with the chat.
#[test]
fn prefix_cache_hits_over_a_three_turn_chat() {
    let s = start_cpu(config());
    let mut messages = vec![json!({"role": "user", "content": "First question"})];
    let mut cached = Vec::new();
    for turn in ["Second question", "Third question", ""] {
        let r = ok(&s, "/v1/chat/completions", &json!({"messages": messages, "max_tokens": 6, "temperature": 0}));
        cached.push(r["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap());
        if turn.is_empty() {
            break;
        }
        let m = &r["choices"][0]["message"];
        messages
            .push(json!({"role": "assistant", "content": m["content"], "reasoning_content": m["reasoning_content"]}));
        messages.push(json!({"role": "user", "content": turn}));
    }
    assert_eq!(cached[0], 0);
    assert!(cached[1] > 0 && cached[2] > cached[1], "{cached:?}");
    assert!(metric(&s, "solo_prefix_cache_hits_total") >= 2.0);
    assert!(metric(&s, "solo_prefix_cache_entries") > 0.0);

    // Thinking off: the whole previous prompt is a prefix of the next one.
    let kwargs = json!({"enable_thinking": false});
    let first = ok(
        &s,
        "/v1/chat/completions",
        &json!({"messages": user("Off we go"), "max_tokens": 4, "chat_template_kwargs": kwargs}),
    );
    let m = &first["choices"][0]["message"];
    let messages = json!([
        {"role": "user", "content": "Off we go"},
        {"role": "assistant", "content": m["content"]},
        {"role": "user", "content": "Again"},
    ]);
    let second =
        ok(&s, "/v1/chat/completions", &json!({"messages": messages, "max_tokens": 4, "chat_template_kwargs": kwargs}));
    let cached = second["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap();
    assert!(cached >= first["usage"]["prompt_tokens"].as_u64().unwrap(), "{cached} {first}");
}

/// An edited last turn resumes from the interval snapshot inside the long shared prefix, and
/// a cached prompt gives the same tokens as a cold one.
#[test]
fn interval_snapshots_serve_an_edited_last_turn() {
    let mut c = config();
    c.snapshot_interval = Some(16);
    let s = start_cpu(c);
    let long = "A long system prompt about many things. ".repeat(8);
    let chat = |last: &str| json!({"messages": [{"role": "system", "content": long}, {"role": "user", "content": last}], "max_tokens": 4, "temperature": 0});
    let cold = ok(&s, "/v1/chat/completions", &chat("Question one"));
    let warm = ok(&s, "/v1/chat/completions", &chat("Question two, edited"));
    // Only a system message before the edit: no message-boundary snapshot there (the template
    // refuses a chat without a user turn), so the last interval snapshot inside the shared part.
    let template = ChatTemplate::from_dir(fixture()).unwrap();
    let tokens = |last: &str| {
        let opts = TemplateOptions { add_generation_prompt: true, ..Default::default() };
        tokenizer().encode(&template.render(&chat(last)["messages"], None, &opts).unwrap()).unwrap()
    };
    let (a, b) = (tokens("Question one"), tokens("Question two, edited"));
    let shared = a.iter().zip(&b).take_while(|(x, y)| x == y).count() as u64;
    assert!(shared > 64);
    assert_eq!(warm["usage"]["prompt_tokens_details"]["cached_tokens"], shared / 16 * 16, "{warm}");
    let again = ok(&s, "/v1/chat/completions", &chat("Question one"));
    assert_eq!(again["usage"]["prompt_tokens_details"]["cached_tokens"], cold["usage"]["prompt_tokens"]);
    assert_eq!(text_of(&again), text_of(&cold));
}

/// A snapshot inside a prompt keeps no logits (its piece was prefilled without them), so a later
/// prompt that ends exactly there resumes from the snapshot before it, with the cold reply.
#[test]
fn a_prompt_ending_at_an_interval_snapshot_resumes_from_the_one_before() {
    let server = || {
        let mut c = config();
        c.snapshot_interval = Some(16);
        start_cpu(c)
    };
    let s = server();
    let long: Vec<u32> = (0..40u32).map(|t| (t * 7919) % 300).collect();
    ok(&s, "/v1/completions", &json!({"prompt": long, "max_tokens": 1}));
    let short = json!({"prompt": long[..32], "max_tokens": 5, "temperature": 0});
    let warm = ok(&s, "/v1/completions", &short);
    assert_eq!(warm["usage"]["prompt_tokens_details"]["cached_tokens"], 16, "{warm}");
    let cold = ok(&server(), "/v1/completions", &short);
    assert_eq!(cold["usage"]["prompt_tokens_details"]["cached_tokens"], 0, "{cold}");
    assert_eq!(warm["choices"][0]["text"], cold["choices"][0]["text"]);
}

/// The prompt's own snapshot is taken after its first token is out (not before: the copy would
/// delay it), yet still of the prompt: a one-token reply and a longer one both leave it, and the
/// same prompt again resumes from all of it with the same reply.
#[test]
fn the_whole_prompt_is_kept_after_the_first_token() {
    let s = start_cpu(config());
    for (i, max_tokens) in [1, 5].into_iter().enumerate() {
        let prompt: Vec<u32> = (0..37u32).map(|t| (t * 7919 + i as u32) % 300).collect();
        let body = json!({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0});
        let cold = ok(&s, "/v1/completions", &body);
        let again = ok(&s, "/v1/completions", &body);
        assert_eq!(again["usage"]["prompt_tokens_details"]["cached_tokens"], 37, "{max_tokens} tokens: {again}");
        assert_eq!(again["choices"][0]["text"], cold["choices"][0]["text"], "{max_tokens} tokens");
    }
}

/// The default interval snapshot comes every 2048 prompt tokens, or every prefill chunk where
/// that is longer (as on CUDA): a prompt sharing 2,100 tokens with an earlier one resumes from
/// token 2048 in the first case and starts cold in the second.
#[test]
fn interval_snapshots_no_finer_than_the_prefill_chunk() {
    let first: Vec<u32> = (0..2200u32).map(|i| (i * 7919) % 300).collect();
    let mut second = first[..2100].to_vec();
    second.extend((0..50u32).map(|i| (i * 31 + 1) % 300));
    for (chunk, cached) in [(None, 2048), (Some(4096), 0)] {
        let mut c = config();
        c.prefill_chunk = chunk;
        let s = start_cpu(c);
        ok(&s, "/v1/completions", &json!({"prompt": first, "max_tokens": 1}));
        let r = ok(&s, "/v1/completions", &json!({"prompt": second, "max_tokens": 1}));
        assert_eq!(r["usage"]["prompt_tokens_details"]["cached_tokens"], cached, "chunk {chunk:?}: {r}");
    }
}

#[test]
fn models_health_and_metrics() {
    let s = start_cpu(config());
    let (status, body) = get(&s, "/v1/models");
    assert_eq!(status, 200);
    let models: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(models["object"], "list");
    assert_eq!(models["data"][0]["id"], "tiny-a");
    assert_eq!(models["data"][0]["object"], "model");
    assert_eq!(models["data"][0]["precision"], "bf16");
    assert_eq!(get(&s, "/v1/models/tiny-a").0, 200);
    assert_eq!(get(&s, "/health"), (200, r#"{"status":"ok"}"#.to_string()));
    ok(&s, "/v1/chat/completions", &json!({"messages": user("x"), "max_tokens": 2}));
    let (status, text) = get(&s, "/metrics");
    assert_eq!(status, 200);
    for needle in [
        "solo_requests_total{route=\"/v1/chat/completions\",status=\"200\"} 1",
        "solo_requests_total{route=\"/v1/models\",status=\"200\"} 1",
        "solo_time_to_first_token_seconds_count 1",
        "solo_decode_tokens_per_second_count 1",
        "solo_completion_tokens_total 2",
        "solo_queue_depth 0",
        "solo_queue_wait_seconds_count 1",
        // a prefill call per prompt piece: to the end of the messages (a snapshot point), then
        // the generation prompt
        "solo_prefill_seconds_count 2",
    ] {
        assert!(text.contains(needle), "{needle} missing from\n{text}");
    }
    // a step per prompt piece and token: the prefill, then the two tokens' steps
    assert!(metric(&s, "solo_engine_step_seconds_count") >= 2.0, "{text}");
    assert!(metric(&s, "solo_engine_step_seconds_sum") > 0.0);
    // the prefix cache's copies: at the end of the messages, of the whole prompt, and of the
    // conversation with its reply
    assert_eq!(metric(&s, "solo_snapshot_seconds_count"), 3.0, "{text}");
}

/// Speculative decoding (MTP drafts, tiny-a's random head) gives the replies of plain decoding:
/// greedy, with logprobs, streamed, and across a cached second turn; the metrics count drafts.
#[test]
fn speculation_gives_the_same_replies() {
    let plain = start_cpu(config());
    let mut spec_config = config();
    spec_config.speculate = 3;
    let spec = start_cpu(spec_config);
    for body in [
        json!({"messages": user("Tell me a story"), "max_tokens": 24, "temperature": 0}),
        json!({"messages": user("Tell me a story"), "max_tokens": 24, "temperature": 0, "logprobs": true, "top_logprobs": 2}),
        json!({"messages": user("Tell me a story"), "max_tokens": 9, "temperature": 0, "stop": ["e"]}),
    ] {
        let (a, b) = (ok(&plain, "/v1/chat/completions", &body), ok(&spec, "/v1/chat/completions", &body));
        assert_eq!(text_of(&a), text_of(&b), "{body}");
        assert_eq!(a["usage"], b["usage"], "{body}");
        assert_eq!(a["choices"][0]["logprobs"], b["choices"][0]["logprobs"], "{body}");
        // Again: now resumed from the prefix cache's snapshot of the speculative state.
        assert_eq!(text_of(&ok(&spec, "/v1/chat/completions", &body)), text_of(&a), "{body} (cached)");
    }
    let mut body = json!({"messages": user("Stream me"), "max_tokens": 12, "temperature": 0, "stream": true});
    let streamed = assemble(&stream(&spec, "/v1/chat/completions", &body));
    body["stream"] = json!(false);
    let whole = ok(&plain, "/v1/chat/completions", &body);
    assert_eq!(format!("{}|{}", streamed.reasoning, streamed.content), text_of(&whole));
    assert!(metric(&spec, "solo_draft_tokens_total") >= 3.0);
    assert_eq!(metric(&plain, "solo_draft_tokens_total"), 0.0);
    assert!(metric(&spec, "solo_speculative_accepted_length_count") >= 1.0);
}

/// Four requests at once (greedy and seeded sampling, with and without speculation, decoded one
/// step each or in one batched step) get the replies each gets alone with the same settings
/// (speculative sampling draws other tokens than plain sampling with the same seed, from the
/// same distribution).
#[test]
fn concurrent_requests_get_the_replies_they_get_alone() {
    let bodies: Vec<Value> = (0..4)
        .map(|i| {
            let mut b = json!({"messages": user(&format!("Tell me story number {i}")), "max_tokens": 40, "seed": i});
            b["temperature"] = json!(if i % 2 == 0 { 0.0 } else { 1.0 });
            b
        })
        .collect();
    for (speculate, batch_decode) in [(0, false), (2, false), (0, true)] {
        let server = |max_batch| {
            let mut c = config();
            c.max_batch = max_batch;
            c.speculate = speculate;
            c.batch_decode = batch_decode;
            start_cpu(c)
        };
        let alone = server(1);
        let want: Vec<String> = bodies.iter().map(|b| text_of(&ok(&alone, "/v1/chat/completions", b))).collect();
        let together = server(4);
        let got: Vec<String> = std::thread::scope(|scope| {
            let handles: Vec<_> =
                bodies.iter().map(|b| scope.spawn(|| text_of(&ok(&together, "/v1/chat/completions", b)))).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(got, want, "speculate {speculate}, batch_decode {batch_decode}");
        assert!(metric(&together, "solo_batch_size_sum") > metric(&together, "solo_batch_size_count"), "never batched");
        let batched = metric(&together, "solo_batched_decode_size_count");
        if batch_decode {
            assert!(batched >= 1.0, "no batched decode step");
            assert!(metric(&together, "solo_batched_decode_size_sum") > batched, "no batched step of two or more");
        } else {
            assert_eq!(batched, 0.0);
        }
    }
}
