//! Images in chat completions over real HTTP, on the CPU backend with tiny-a's vision tower:
//! `image_url` parts with data: URLs (plain and streamed), the prompt's placeholders, the prefix
//! cache keyed by the image's content, and every refusal as a 400 that names the part.

mod common;

use base64::Engine as _;
use common::*;
use serde_json::{json, Value};
use solo_text::{ChatTemplate, TemplateOptions};

fn image_file(name: &str) -> Vec<u8> {
    std::fs::read(fixture().join("../images").join(name)).unwrap()
}

fn data_url(mime: &str, bytes: &[u8]) -> String {
    format!("data:{mime};base64,{}", base64::engine::general_purpose::STANDARD.encode(bytes))
}

fn with_image(text: &str, url: &str) -> Value {
    json!([{"role": "user", "content": [
        {"type": "text", "text": text},
        {"type": "image_url", "image_url": {"url": url}},
    ]}])
}

fn chat_body(messages: Value) -> Value {
    json!({"messages": messages, "max_tokens": 8, "temperature": 0})
}

fn error_message(server: &solo_server::Server, body: &Value) -> String {
    let (status, r) = post(server, "/v1/chat/completions", body);
    assert_eq!(status, 400, "{r}");
    r["error"]["message"].as_str().unwrap().to_string()
}

/// The placeholder count: the template's prompt with one `<|image_pad|>`, which the 45×29
/// picture (resized to 48×32: 12×8 patches, 6×4 merged) turns into 24.
#[test]
fn an_image_prompt_answers_plain_and_streamed() {
    let s = start_cpu(config());
    let url = data_url("image/png", &image_file("wide.png"));
    let plain = ok(&s, "/v1/chat/completions", &chat_body(with_image("What is this?", &url)));
    let template = ChatTemplate::from_dir(fixture()).unwrap();
    let rendered = template
        .render(
            &json!([{"role": "user", "content": [{"type": "text", "text": "What is this?"}, {"type": "image"}]}]),
            None,
            &TemplateOptions { add_generation_prompt: true, ..Default::default() },
        )
        .unwrap();
    assert!(rendered.contains("<|vision_start|><|image_pad|><|vision_end|>"), "{rendered}");
    let text_tokens = tokenizer().encode(&rendered).unwrap().len();
    assert_eq!(plain["usage"]["prompt_tokens"], text_tokens + 23);
    assert_eq!(metric(&s, "solo_images_total"), 1.0);

    let mut body = chat_body(with_image("What is this?", &url));
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
    let a = assemble(&stream(&s, "/v1/chat/completions", &body));
    let m = &plain["choices"][0]["message"];
    assert_eq!(a.content, m["content"].as_str().unwrap_or(""));
    assert_eq!(a.reasoning, m["reasoning_content"].as_str().unwrap_or(""));
    assert_eq!(a.usage.unwrap()["prompt_tokens"], plain["usage"]["prompt_tokens"]);
}

/// The same image again resumes from the cache without the tower; another image at the same
/// place shares only the text before it.
#[test]
fn the_prefix_cache_keys_images_by_content() {
    let s = start_cpu(config());
    let (wide, large) =
        (data_url("image/png", &image_file("wide.png")), data_url("image/png", &image_file("large.png")));
    let first = ok(&s, "/v1/chat/completions", &chat_body(with_image("Describe", &wide)));
    let again = ok(&s, "/v1/chat/completions", &chat_body(with_image("Describe", &wide)));
    assert_eq!(again["choices"], first["choices"]);
    assert_eq!(again["usage"]["prompt_tokens_details"]["cached_tokens"], again["usage"]["prompt_tokens"]);
    assert_eq!(metric(&s, "solo_images_total"), 1.0, "the repeat ran no tower");

    let other = ok(&s, "/v1/chat/completions", &chat_body(with_image("Describe", &large)));
    let cached = other["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap();
    let prompt = other["usage"]["prompt_tokens"].as_u64().unwrap();
    assert!(cached < prompt - 35, "another image must not resume past its start ({cached} of {prompt})");
    assert_eq!(metric(&s, "solo_images_total"), 2.0);

    // Same pixels in another container (lossless WebP) are the same image.
    let webp = data_url("image/webp", &image_file("wide.webp"));
    let same = ok(&s, "/v1/chat/completions", &chat_body(with_image("Describe", &webp)));
    assert_eq!(same["usage"]["prompt_tokens_details"]["cached_tokens"], same["usage"]["prompt_tokens"]);
    assert_eq!(same["choices"], first["choices"]);
}

#[test]
fn two_images_and_every_format() {
    let s = start_cpu(config());
    let messages = json!([{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": data_url("image/jpeg", &image_file("wide.jpg"))}},
        {"type": "text", "text": "and"},
        {"type": "image_url", "image_url": {"url": data_url("image/gif", &image_file("wide.gif"))}},
        {"type": "image_url", "image_url": {"url": data_url("image/png", &image_file("small.png"))}},
    ]}]);
    let r = ok(&s, "/v1/chat/completions", &chat_body(messages));
    assert!(r["usage"]["prompt_tokens"].as_u64().unwrap() > 24 + 24 + 6);
    assert_eq!(metric(&s, "solo_images_total"), 3.0);
}

#[test]
fn refusals_name_the_part() {
    let mut c = config();
    c.image_limits.max_images = 2;
    c.image_limits.max_bytes = 10_000;
    c.image_limits.max_pixels = 5_000;
    let s = start_cpu(c);
    let png = data_url("image/png", &image_file("wide.png"));

    let e = error_message(&s, &chat_body(with_image("x", "https://example.com/cat.png")));
    assert!(e.contains("messages[0].content[1]") && e.contains("fetches nothing"), "{e}");

    let e = error_message(&s, &chat_body(with_image("x", &data_url("image/png", b"not a png at all"))));
    assert!(e.contains("messages[0].content[1]") && e.contains("not a PNG, JPEG, WebP or GIF"), "{e}");

    let mut broken = image_file("wide.png");
    broken.truncate(broken.len() / 2);
    let e = error_message(&s, &chat_body(with_image("x", &data_url("image/png", &broken))));
    assert!(e.contains("messages[0].content[1]") && e.contains("not a valid Png image"), "{e}");

    let e = error_message(&s, &chat_body(with_image("x", &data_url("image/png", &image_file("large.png")))));
    assert!(e.contains("messages[0].content[1]") && e.contains("limit of 10000 bytes"), "{e}");

    let messages = json!([{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": png}},
        {"type": "image_url", "image_url": {"url": png}},
        {"type": "image_url", "image_url": {"url": png}},
    ]}]);
    let e = error_message(&s, &chat_body(messages));
    assert!(e.contains("messages[0].content[2]") && e.contains("more than 2 images"), "{e}");

    // A flat 100×70 picture: a small file of 7,000 pixels, over 5,000.
    let mut big = Vec::new();
    let img = image::RgbImage::from_pixel(100, 70, image::Rgb([10, 20, 30]));
    img.write_to(&mut std::io::Cursor::new(&mut big), image::ImageFormat::Png).unwrap();
    let e = error_message(&s, &chat_body(with_image("x", &data_url("image/png", &big))));
    assert!(e.contains("messages[0].content[1]") && e.contains("100×70") && e.contains("5000 pixels"), "{e}");

    let e = error_message(&s, &chat_body(with_image("a <|image_pad|> b", &png)));
    assert!(e.contains("2 image placeholders") && e.contains("1 images"), "{e}");
}

/// tiny-b's tower has a head dim of 6, which its rotary form cannot split: its server takes no
/// images, and says why.
#[test]
fn a_server_without_a_usable_tower_refuses_images() {
    let dir = fixture().join("../tiny-b");
    let mut c = solo_server::ServerConfig::new(&dir);
    c.port = 0;
    let s = solo_server::start(c, move || solo_cpu::load(&dir)).unwrap();
    let url = data_url("image/png", &image_file("wide.png"));
    let e = error_message(&s, &chat_body(with_image("x", &url)));
    assert!(
        e.contains("messages[0].content[1]") && e.contains("does not take images") && e.contains("head dim of 6"),
        "{e}"
    );
    // Text still works.
    ok(&s, "/v1/chat/completions", &chat_body(user("hello")));
}

/// Behind the privacy gate with a cloud configured, a request with an image stays on this
/// machine (the local engine answers it) and the audit line says why; the cloud hears nothing.
#[test]
fn the_gate_keeps_image_requests_local() {
    let cloud = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    cloud.set_nonblocking(true).unwrap();
    let audit = std::env::temp_dir().join(format!("solo-images-audit-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&audit);
    let mut c = config();
    c.hybrid = Some(solo_server::hybrid::HybridConfig {
        cloud_url: Some(format!("http://{}/v1", cloud.local_addr().unwrap())),
        cloud_model: None,
        cloud_key: None,
        policy: solo_gate::Policy::default(),
        audit_log: Some(audit.clone()),
        judge: None,
        cloud_timeout: solo_server::hybrid::DEFAULT_CLOUD_TIMEOUT,
    });
    let s = start_cpu(c);
    let url = data_url("image/png", &image_file("wide.png"));
    let response = client().post(url_of(&s)).json(&chat_body(with_image("What is this?", &url))).send().unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.headers()["x-solo-route"], "local");
    let response_reason = response.headers()["x-solo-reason"].to_str().unwrap().to_string();
    assert!(cloud.accept().is_err(), "nothing may reach the cloud");
    let lines = std::fs::read_to_string(&audit).unwrap();
    let record: Value = serde_json::from_str(lines.lines().last().unwrap()).unwrap();
    assert_eq!(record["route"], "local");
    assert_eq!(record["images"], 1);
    assert!(record["reason"].as_str().unwrap().contains("an image (the gate cannot scan"), "{record}");
    assert!(response_reason.contains("an image"), "{response_reason}");
    assert!(!lines.contains("base64"), "the audit log holds no image");
    let _ = std::fs::remove_file(&audit);
}

fn url_of(s: &solo_server::Server) -> String {
    url(s, "/v1/chat/completions")
}

/// Prefill pieces of 5 tokens (cuts inside the image, snapshots on the way) give the reply and
/// the logprobs of one piece.
#[test]
fn image_prompts_in_small_pieces_answer_the_same() {
    let url = data_url("image/png", &image_file("large.png"));
    let mut body = chat_body(with_image("Look", &url));
    body["logprobs"] = json!(true);
    body["top_logprobs"] = json!(2);
    let whole = ok(&start_cpu(config()), "/v1/chat/completions", &body);
    let mut c = config();
    c.prefill_chunk = Some(5);
    c.snapshot_interval = Some(7);
    let pieces = ok(&start_cpu(c), "/v1/chat/completions", &body);
    assert_eq!(pieces["choices"][0]["message"], whole["choices"][0]["message"]);
    let lp = |r: &Value| -> Vec<f64> {
        r["choices"][0]["logprobs"]["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["logprob"].as_f64().unwrap())
            .collect()
    };
    for (a, b) in lp(&pieces).iter().zip(lp(&whole)) {
        assert!((a - b).abs() < 1e-4, "{a} vs {b}");
    }
}
