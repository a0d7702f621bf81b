//! The chat page (`GET /`) in a real browser: headless Chromium driven over WebDriver
//! (`chromedriver`; `scripts/test` installs Debian's `chromium` and `chromium-driver`). Against
//! the real server on the tiny fixture (the CPU backend: its replies are noise, but real), and a
//! hybrid pair where a second server (scripted, so its answers can be checked) plays the cloud.
//!
//! Without chromedriver the test fails; `SOLO_SKIP_BROWSER=1` skips it, saying so.
//! The screenshots go to `target/browser-test/`.

mod common;
mod webdriver;

use common::*;
use serde_json::{json, Value};
use solo_gate::Policy;
use solo_server::hybrid::HybridConfig;
use solo_server::Server;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use webdriver::Browser;

const ENTER: &str = "\u{E007}";
const ESCAPE: &str = "\u{E00C}";

/// Every message on the page, as the test reads it.
const MESSAGES_JS: &str = r#"return [...document.querySelectorAll('#messages .msg')].map(m => ({
  role: m.classList.contains('user') ? 'user' : m.classList.contains('assistant') ? 'assistant' : 'notice',
  state: m.dataset.state || null,
  kind: m.dataset.kind || null,
  reasoning: m.querySelector('.reasoning-text') ? m.querySelector('.reasoning-text').textContent : null,
  reasoning_open: m.querySelector('details.reasoning') ? m.querySelector('details.reasoning').open : null,
  content: m.querySelector('.content') ? m.querySelector('.content').textContent : '',
  meta: Object.fromEntries([...m.querySelectorAll('.meta span')].map(s => [s.dataset.k, s.textContent])),
  tools: [...m.querySelectorAll('.tool-call')].map(t => [t.querySelector('.tool-name').textContent, t.querySelector('.tool-args').textContent]),
  code_blocks: m.querySelectorAll('.code pre code').length,
  copy_buttons: m.querySelectorAll('.code button.copy').length,
}));"#;

fn messages(b: &Browser) -> Vec<Value> {
    b.js(MESSAGES_JS).as_array().cloned().unwrap_or_default()
}

fn count(b: &Browser) -> usize {
    b.js("return document.querySelectorAll('#messages .msg').length;").as_u64().unwrap() as usize
}

/// Waits until a message sent when the page had `before` messages has its answer (a reply or a
/// notice after it), or the consent dialog is open; the last message.
fn settled(b: &Browser, before: usize) -> Value {
    b.wait(
        "the reply",
        &format!(
            "document.getElementById('consent').open || (document.querySelectorAll('#messages .msg').length >= {} \
             && !document.body.classList.contains('running'))",
            before + 2
        ),
        60,
    );
    messages(b).pop().unwrap()
}

/// Types `text` into the message box and Enter, as a person would; the answer.
fn send(b: &Browser, text: &str) -> Value {
    let before = count(b);
    b.type_into("#input", &format!("{text}{ENTER}"));
    settled(b, before)
}

/// Waits until the last reply is streaming with at least `chars` characters of text.
fn streaming(b: &Browser, chars: usize) {
    b.wait(
        "a reply streaming",
        &format!(
            "(() => {{ const m = [...document.querySelectorAll('#messages .msg.assistant')].pop();
               return m && m.dataset.state === 'streaming' && m.textContent.length >= {chars}; }})()"
        ),
        30,
    );
}

fn set_field(b: &Browser, css: &str, value: &str) {
    b.clear(css);
    if !value.is_empty() {
        b.type_into(css, value);
    }
}

/// Console errors other than the failed requests the test causes on purpose (the browser logs
/// each 4xx/5xx response and a refused connection).
fn script_errors(b: &Browser) -> Vec<String> {
    b.console_errors()
        .into_iter()
        .filter(|e| !e.contains("Failed to load resource") && !e.contains("ERR_CONNECTION_REFUSED"))
        .collect()
}

/// Polls `cond` until it holds; panics after 30 s (a loaded machine is slow, not wrong).
fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn out_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/browser-test");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn save_screenshot(b: &Browser, name: &str) -> PathBuf {
    let png = b.screenshot();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    let path = out_dir().join(name);
    std::fs::write(&path, png).unwrap();
    path
}

const FORWARD: &str = "The user wants a short note for a colleague.\n</think>\n\n\
Here is a draft for **Jennifer Martinez**:\n\n```python\nprint(\"Hello, Jennifer: the report is ready.\")\n```\n\n\
- it greets her by name\n- it says the report is ready";
/// The scripted cloud's time per token (so that its replies stream, at a rate a person can read).
const PACE: Duration = Duration::from_millis(8);
const NOTED: &str = "Nothing to look up.\n</think>\n\nNoted: I will write to that address.";
const CAPITAL: &str = "A geography question.\n</think>\n\nThe capital of France is **Paris**.";
const WEATHER: &str = "I need the weather.\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>";
const TOOLS: &str = r#"[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]"#;

#[test]
fn the_chat_page_in_a_real_browser() {
    let started = Instant::now();
    let Some(driver) = webdriver::chromedriver_path() else {
        if std::env::var("SOLO_SKIP_BROWSER").is_ok_and(|v| v == "1") {
            let _ = writeln!(std::io::stderr(), "\n*** SKIPPED the browser test (SOLO_SKIP_BROWSER=1)\n");
            return;
        }
        panic!(
            "no chromedriver: install Debian's `chromium` and `chromium-driver` (scripts/test does), or set \
             SOLO_CHROMEDRIVER; SOLO_SKIP_BROWSER=1 skips this test"
        );
    };
    let b = Browser::start(&driver);
    local_server(&b);
    hybrid_pair(&b);
    stop_and_errors(&b);
    eprintln!("browser test: {:.1} s; screenshots in {}", started.elapsed().as_secs_f64(), out_dir().display());
}

/// The page against the real CPU engine: load, a reply, thinking on and off, a 400 with its
/// numbers, reload.
fn local_server(b: &Browser) {
    let server = start_cpu(config());
    b.goto(&url(&server, "/"));
    let info = b.wait("the model info", "document.getElementById('model-info').textContent.includes('8,192') && document.getElementById('model-info').textContent", 20);
    assert!(info.as_str().unwrap().starts_with("tiny-a"), "{info}");
    let errors = b.console_errors();
    assert!(errors.is_empty(), "console errors on load: {errors:?}");

    // Keyboard only: the message box has the focus on load; type, Enter sends.
    assert_eq!(b.js("return document.activeElement.id;"), "input");
    set_field(b, "#temperature", "0");
    set_field(b, "#max-tokens", "24");
    b.js("document.getElementById('input').focus();");
    let before = count(b);
    b.keys(&format!("Hello there{ENTER}"));
    let reply = settled(b, before);
    assert_eq!(reply["role"], "assistant", "{reply}");
    assert_eq!(reply["state"], "done");
    // Thinking on: the random model's output is all reasoning (the prompt ends inside <think>).
    assert!(!reply["reasoning"].as_str().unwrap_or("").is_empty(), "{reply}");
    let meta = &reply["meta"];
    assert!(meta["prompt"].as_str().unwrap().starts_with("prompt "), "{reply}");
    let completion: usize = meta["completion"].as_str().unwrap().trim_end_matches(" tok").parse().unwrap();
    assert!((1..=24).contains(&completion), "max tokens 24: {reply}");
    assert!(meta["ttft"].as_str().unwrap().starts_with("TTFT "), "{reply}");
    assert!(meta["tps"].as_str().unwrap().ends_with(" tok/s"), "{reply}");
    assert!(meta.get("route").is_none(), "no route label without a cloud: {reply}");

    // Thinking off: no reasoning at all.
    b.click("#thinking");
    assert_eq!(b.js("return document.getElementById('thinking').checked;"), false);
    let reply = send(b, "Now without thinking");
    assert_eq!(reply["state"], "done", "{reply}");
    assert!(reply["reasoning"].is_null(), "reasoning with thinking off: {reply}");
    assert!(!reply["content"].as_str().unwrap().is_empty(), "{reply}");

    // An image pasted into the message box (the attach button opens a file picker, which a
    // test cannot drive): its thumbnail waits, goes with the message, and the reply comes.
    assert_eq!(b.js("return document.getElementById('attach').textContent;"), "Attach");
    paste_image(b, "wide.png");
    b.wait("the thumbnail", "document.querySelectorAll('#attachments img.thumb').length === 1", 10);
    let reply = send(b, "What is in this picture?");
    assert_eq!(reply["state"], "done", "{reply}");
    assert_eq!(b.js("return document.querySelectorAll('#messages .msg.user img.thumb').length;"), 1);
    assert_eq!(b.js("return document.querySelectorAll('#attachments img').length;"), 0, "sent, not pending");
    let prompt: usize = reply["meta"]["prompt"].as_str().unwrap().split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(prompt > 24, "the image's 24 tokens are in the prompt: {reply}");
    save_screenshot(b, "image.png");

    // Too long for the context: the 400's numbers, the conversation kept.
    set_field(b, "#max-tokens", "9000");
    let kept = count(b);
    let notice = send(b, "A long one");
    assert_eq!(notice["kind"], "bad-request", "{notice}");
    let text = notice["content"].as_str().unwrap();
    assert!(text.contains("maximum context length is 8192") && text.contains("9000 in the completion"), "{text}");
    assert_eq!(count(b), kept + 2, "the conversation is kept, the notice added");

    // A reload keeps the conversation (localStorage), settings too.
    let shown = messages(b);
    b.refresh();
    b.wait("the page again", "document.querySelectorAll('#messages .msg').length > 0", 10);
    let strip = |ms: &[Value]| -> Vec<Value> {
        ms.iter().map(|m| json!([m["role"], m["content"], m["reasoning"], m["state"], m["kind"]])).collect()
    };
    assert_eq!(strip(&messages(b)), strip(&shown));
    assert_eq!(b.js("return document.querySelectorAll('#conversations .conv').length;"), 1);
    assert_eq!(
        b.js("return document.querySelector('#conversations .conv.current .conv-open').textContent;"),
        "Hello there"
    );
    assert_eq!(b.js("return document.getElementById('thinking').checked;"), false);
    assert_eq!(b.js("return document.getElementById('temperature').value;"), "0");
    let errors = script_errors(b);
    assert!(errors.is_empty(), "console errors: {errors:?}");
}

/// Pastes a fixture image into the message box, as a clipboard with the file would.
fn paste_image(b: &Browser, name: &str) {
    use base64::Engine as _;
    let bytes = std::fs::read(fixture().join("../images").join(name)).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
    b.js(&format!(
        "const bin = atob('{b64}'); const bytes = new Uint8Array(bin.length);
         for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
         const dt = new DataTransfer(); dt.items.add(new File([bytes], '{name}', {{type: 'image/png'}}));
         document.getElementById('input').dispatchEvent(new ClipboardEvent('paste', {{clipboardData: dt, bubbles: true, cancelable: true}}));
         return true;"
    ));
}

/// A hybrid `solo serve` (local: the CPU engine) whose cloud is a second server: the route label,
/// the types found and masked, the consent dialog round trip, a refusal, a tool call, markdown.
fn hybrid_pair(b: &Browser) {
    let mut cc = config();
    cc.model_name = "cloud-tiny".into();
    let cloud = start_scripted(
        cc,
        vec![
            Script::text("user", NOTED).slow(PACE),
            Script::text("capital", CAPITAL).slow(PACE),
            Script::text("forward", FORWARD).slow(PACE),
            Script::text("weather", WEATHER).slow(PACE),
        ],
    );
    let audit = std::env::temp_dir().join(format!("solo-browser-audit-{}.jsonl", std::process::id()));
    let policy = Policy::parse(&format!(
        "{}\n[[rule]]\ntypes = [\"SSN\"]\noutcome = \"refuse\"\n",
        solo_gate::policy::DEFAULT_POLICY
    ))
    .unwrap();
    let mut c = config();
    c.hybrid = Some(HybridConfig {
        cloud_url: Some(format!("http://{}/v1", cloud.addr())),
        cloud_model: Some("cloud-tiny".into()),
        cloud_key: None,
        policy,
        audit_log: Some(audit.clone()),
        judge: None,
        cloud_timeout: solo_server::hybrid::DEFAULT_CLOUD_TIMEOUT,
    });
    let server = start_cpu(c);
    b.goto(&url(&server, "/"));
    b.wait("the model info", "document.getElementById('model-info').textContent.startsWith('tiny-a')", 20);
    // A late request of the previous page (its icon) to the server the last part stopped is not
    // this page's error.
    let here = url(&server, "/");
    let errors: Vec<String> = b
        .console_errors()
        .into_iter()
        .filter(|e| !e.contains("ERR_CONNECTION_REFUSED") || e.starts_with(&here))
        .collect();
    assert!(errors.is_empty(), "console errors on load: {errors:?}");
    // Room for the cloud's scripted answers; the local engine's noise stops there too.
    set_field(b, "#max-tokens", "400");

    let reply = send(b, "What is the capital of France?");
    assert_eq!(reply["meta"]["route"], "cloud", "{reply}");
    assert_eq!(reply["content"], "The capital of France is Paris.");
    assert_eq!(reply["reasoning"], "A geography question.");
    assert_eq!(reply["reasoning_open"], false, "the reasoning folds away once the answer is there");

    let reply = send(b, "Email me at jane.doe@example.com please");
    assert_eq!(reply["meta"]["route"], "cloud · masked EMAIL", "{reply}");
    assert_eq!(reply["meta"]["entities"], "found: EMAIL");

    // A person's name: ask_consent under the shipped policy → the dialog → approved → the cloud.
    let before = count(b);
    b.type_into("#input", &format!("Please forward the report to Jennifer Martinez.{ENTER}"));
    settled(b, before);
    assert_eq!(b.js("return document.getElementById('consent').open;"), true, "{:?}", messages(b).pop());
    let asked = b.js("return document.getElementById('consent-text').textContent;");
    assert!(asked.as_str().unwrap().contains("PERSON"), "{asked}");
    b.click("#consent-cloud");
    let reply = settled(b, before);
    assert_eq!(reply["role"], "assistant", "{reply}");
    // The email from the turn before is in the conversation, so still masked.
    assert_eq!(reply["meta"]["route"], "cloud · masked EMAIL", "{reply}");
    assert!(reply["meta"]["entities"].as_str().unwrap().contains("PERSON"), "{reply}");
    assert_eq!(reply["meta"]["consented"], "sent with consent: PERSON");
    assert_eq!(reply["code_blocks"], 1, "{reply}");
    assert_eq!(reply["copy_buttons"], 1);
    assert!(reply["content"].as_str().unwrap().contains("print(\"Hello, Jennifer: the report is ready.\")"), "{reply}");
    let strong =
        b.js("return [...document.querySelectorAll('#messages .msg.assistant strong')].map(s => s.textContent);");
    assert_eq!(strong, json!(["Paris", "Jennifer Martinez"]));
    let shot = save_screenshot(b, "chat.png");
    eprintln!("screenshot of a finished exchange: {}", shot.display());

    // A tool call, shown as a call; the consent given holds for the conversation's next turn.
    b.click("#more summary");
    set_field(b, "#tools", TOOLS);
    let reply = send(b, "What is the weather in Paris?");
    assert!(reply["meta"]["route"].as_str().unwrap().starts_with("cloud"), "{reply}");
    assert_eq!(reply["meta"]["consented"], "sent with consent: PERSON");
    let tools = reply["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 1, "{reply}");
    assert_eq!(tools[0][0], "get_weather");
    assert_eq!(serde_json::from_str::<Value>(tools[0][1].as_str().unwrap()).unwrap(), json!({"city": "Paris"}));
    assert_eq!(reply["meta"]["finish"], "tool_calls");
    save_screenshot(b, "tool-call.png");
    set_field(b, "#tools", "");

    // A new conversation asks again; declining sends nothing and gives the message back.
    b.click("#new-chat");
    assert_eq!(count(b), 0, "a new conversation is empty");
    let requests = cloud_requests(&cloud);
    let before = 0;
    let declined = "Please forward the report to Jennifer Martinez.";
    b.type_into("#input", &format!("{declined}{ENTER}"));
    settled(b, before);
    b.click("#consent-cancel");
    b.wait("the notice", "document.querySelector('#messages .msg.notice')", 10);
    let notice = messages(b).pop().unwrap();
    assert_eq!(notice["kind"], "consent-declined", "{notice}");
    assert_eq!(b.js("return document.getElementById('input').value;"), declined);
    assert_eq!(cloud_requests(&cloud), requests, "nothing reached the cloud");
    set_field(b, "#input", "");

    // A refusal names the type, never the value.
    let before = count(b);
    b.type_into("#input", &format!("My SSN is 123-45-6789, remember it.{ENTER}"));
    b.wait("the refusal", "document.querySelector('#messages .msg.notice[data-kind=refused]')", 10);
    let notice = messages(b).pop().unwrap();
    let text = notice["content"].as_str().unwrap();
    assert!(text.contains("SSN") && !text.contains("6789"), "{text}");
    assert_eq!(count(b), before + 1, "the refused message went back to the box");
    set_field(b, "#input", "");

    // keep_local: a card number never leaves; the local engine answers.
    let reply = send(b, "Is my card 4111 1111 1111 1111 still valid?");
    assert_eq!(reply["meta"]["route"], "local", "{reply}");
    assert_eq!(reply["meta"]["entities"], "found: CARD");
    assert_eq!(cloud_requests(&cloud), requests, "nothing reached the cloud");
    let errors = script_errors(b);
    assert!(errors.is_empty(), "console errors: {errors:?}");
    let _ = std::fs::remove_file(&audit);
}

/// Chat requests the cloud server has answered (any status).
fn cloud_requests(cloud: &Server) -> f64 {
    let (_, text) = get(cloud, "/metrics");
    text.lines()
        .filter(|l| l.starts_with("solo_requests_total{route=\"/v1/chat/completions\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// With a scripted engine that takes its time: a reply streams, Stop (button and Escape) ends it
/// and the server counts a cancellation; a full queue (503 with Retry-After) and a server that
/// went away are said in words, the conversation kept.
fn stop_and_errors(b: &Browser) {
    let mut c = config();
    c.max_queue = 1;
    c.max_batch = 1; // one generating, one waiting: the queue is full
    let story = "Once upon a time there was a small engine that answered one question at a time. ";
    let server = start_scripted(
        c,
        vec![
            Script::text("user", &"word ".repeat(200)).slow(Duration::from_millis(20)),
            Script::text("story", &story.repeat(30)).slow(Duration::from_millis(20)),
        ],
    );
    b.goto(&url(&server, "/"));
    b.wait("the model info", "document.getElementById('model-info').textContent.startsWith('tiny-a')", 20);

    // Stop with the button: the generation ends and the server counts a cancellation.
    let cancelled = metric(&server, "solo_requests_cancelled_total");
    let before = count(b);
    b.type_into("#input", &format!("Tell me a long story{ENTER}"));
    streaming(b, 40);
    b.click("#stop");
    b.wait("stopped", "!document.body.classList.contains('running')", 10);
    let reply = messages(b).pop().unwrap();
    assert_eq!(reply["state"], "stopped", "{reply}");
    assert_eq!(reply["meta"]["finish"], "stopped");
    assert_eq!(count(b), before + 2);
    until("the cancellation counter", || metric(&server, "solo_requests_cancelled_total") > cancelled);

    // Stop with Escape, keyboard only.
    let cancelled = metric(&server, "solo_requests_cancelled_total");
    b.js("document.getElementById('input').focus();");
    b.keys(&format!("Another story, please{ENTER}"));
    streaming(b, 40);
    b.keys(ESCAPE);
    b.wait("stopped by Escape", "!document.body.classList.contains('running')", 10);
    assert_eq!(messages(b).pop().unwrap()["state"], "stopped");
    until("the cancellation counter", || metric(&server, "solo_requests_cancelled_total") > cancelled);
    until("the engine idle", || metric(&server, "solo_requests_running") == 0.0);

    b.click("#new-chat");
    // One request running, one waiting: the queue (1) is full. One at a time, so that the second
    // does not find the first still in the queue.
    let hold = || {
        let u = url(&server, "/v1/chat/completions");
        std::thread::spawn(move || {
            let body = json!({"messages": [{"role": "user", "content": "hold the engine"}], "max_tokens": 200});
            client().post(u).json(&body).send().unwrap().status().as_u16()
        })
    };
    let first = hold();
    until("the engine busy", || metric(&server, "solo_requests_running") == 1.0);
    let second = hold();
    until("the queue full", || metric(&server, "solo_queue_depth") == 1.0);
    let busy = [first, second];
    let notice = send(b, "Hello?");
    assert_eq!(notice["kind"], "busy", "{notice}");
    assert!(notice["content"].as_str().unwrap().contains("Try again in"), "{notice}");
    for t in busy {
        assert_eq!(t.join().unwrap(), 200);
    }

    drop(server);
    std::thread::sleep(Duration::from_millis(300));
    let notice = send(b, "Are you there?");
    assert_eq!(notice["kind"], "unreachable", "{notice}");
    let shown = messages(b);
    let users: Vec<&Value> = shown.iter().filter(|m| m["role"] == "user").map(|m| &m["content"]).collect();
    assert_eq!(users, [&json!("Hello?"), &json!("Are you there?")], "the conversation is kept");
    save_screenshot(b, "errors.png");
    let errors = script_errors(b);
    assert!(errors.is_empty(), "console errors: {errors:?}");
}
