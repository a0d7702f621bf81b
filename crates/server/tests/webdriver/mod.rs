//! A small W3C WebDriver client (JSON over HTTP to `chromedriver`) for the browser test: a headless
//! Chromium session, navigation, elements, keyboard input, scripts, the console log, screenshots.

use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// `chromedriver` from `$SOLO_CHROMEDRIVER`, else the PATH, else Debian's place for it.
pub fn chromedriver_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("SOLO_CHROMEDRIVER") {
        return Some(PathBuf::from(p));
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("chromedriver"))
        .find(|p| p.is_file());
    on_path.or_else(|| Some(PathBuf::from("/usr/bin/chromedriver")).filter(|p| p.is_file()))
}

pub struct Browser {
    driver: Child,
    base: String,
    http: reqwest::blocking::Client,
}

pub type Element = String;

impl Browser {
    /// Starts chromedriver on a free port and a headless Chromium session (1280×960).
    pub fn start(chromedriver: &std::path::Path) -> Browser {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", chromedriver.display()));
        let http = reqwest::blocking::Client::builder().no_proxy().timeout(Duration::from_secs(60)).build().unwrap();
        let mut browser = Browser { driver, base: format!("http://127.0.0.1:{port}"), http };
        let deadline = Instant::now() + Duration::from_secs(20);
        while browser.http.get(format!("{}/status", browser.base)).send().is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut options = json!({"args": [
            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--window-size=1280,960", "--no-first-run", "--no-default-browser-check", "--disable-extensions",
        ]});
        if let Some(bin) = std::env::var_os("SOLO_CHROME") {
            options["binary"] = Value::from(bin.to_string_lossy().to_string());
        }
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome", "goog:chromeOptions": options, "goog:loggingPrefs": {"browser": "ALL"},
        }}});
        let r = browser.http.post(format!("{}/session", browser.base)).json(&caps).send().unwrap();
        let v: Value = r.json().unwrap();
        let id = v["value"]["sessionId"].as_str().unwrap_or_else(|| panic!("no session: {v}")).to_string();
        browser.base = format!("{}/session/{id}", browser.base);
        browser
    }

    fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let v: Value = req.send().unwrap().json().unwrap();
        if let Some(err) = v["value"].get("error") {
            panic!("WebDriver {path}: {err}: {}", v["value"]["message"]);
        }
        v["value"].clone()
    }

    fn post(&self, path: &str, body: Value) -> Value {
        self.call(reqwest::Method::POST, path, Some(body))
    }

    pub fn goto(&self, url: &str) {
        self.post("/url", json!({"url": url}));
    }

    pub fn refresh(&self) {
        self.post("/refresh", json!({}));
    }

    /// Runs `script` (a function body; `arguments[i]` are `args`) in the page; its return value.
    pub fn exec(&self, script: &str, args: Vec<Value>) -> Value {
        self.post("/execute/sync", json!({"script": script, "args": args}))
    }

    pub fn js(&self, script: &str) -> Value {
        self.exec(script, vec![])
    }

    /// Polls `expr` (a JS expression) until it is truthy; its value. Panics after `secs`.
    pub fn wait(&self, what: &str, expr: &str, secs: u64) -> Value {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let v = self.js(&format!("return ({expr});"));
            let truthy = !matches!(&v, Value::Null | Value::Bool(false)) && v != json!(0) && v != json!("");
            if truthy {
                return v;
            }
            if Instant::now() > deadline {
                let page = self.js("return document.body.innerText;");
                let shot = std::env::temp_dir().join(format!("solo-browser-failure-{}.png", std::process::id()));
                let _ = std::fs::write(&shot, self.screenshot());
                panic!(
                    "timed out waiting for {what}: `{expr}`\n--- the page ({}):\n{}",
                    shot.display(),
                    page.as_str().unwrap_or("")
                );
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    pub fn find(&self, css: &str) -> Element {
        let v = self.post("/element", json!({"using": "css selector", "value": css}));
        v[ELEMENT].as_str().unwrap_or_else(|| panic!("no element {css}")).to_string()
    }

    pub fn click(&self, css: &str) {
        let e = self.find(css);
        self.post(&format!("/element/{e}/click"), json!({}));
    }

    pub fn clear(&self, css: &str) {
        let e = self.find(css);
        self.post(&format!("/element/{e}/clear"), json!({}));
    }

    /// Focuses the element and types `text` (WebDriver key codes such as `ENTER` included).
    pub fn type_into(&self, css: &str, text: &str) {
        let e = self.find(css);
        self.post(&format!("/element/{e}/value"), json!({"text": text}));
    }

    /// Key presses to whatever has the focus, as a person at the keyboard would.
    pub fn keys(&self, text: &str) {
        let mut actions = Vec::new();
        for c in text.chars() {
            actions.push(json!({"type": "keyDown", "value": c.to_string()}));
            actions.push(json!({"type": "keyUp", "value": c.to_string()}));
        }
        self.post("/actions", json!({"actions": [{"type": "key", "id": "keyboard", "actions": actions}]}));
    }

    /// Browser console entries at level SEVERE since the last call.
    pub fn console_errors(&self) -> Vec<String> {
        let entries = self.post("/se/log", json!({"type": "browser"}));
        entries
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["level"] == "SEVERE")
            .map(|e| e["message"].as_str().unwrap_or("").to_string())
            .collect()
    }

    /// The visible page as PNG bytes.
    pub fn screenshot(&self) -> Vec<u8> {
        let v = self.call(reqwest::Method::GET, "/screenshot", None);
        base64_decode(v.as_str().expect("base64 PNG"))
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.http.delete(&self.base).send();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Standard base64 (with or without padding).
pub fn base64_decode(s: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let digits: Vec<u8> = s.bytes().filter(|c| !c.is_ascii_whitespace() && *c != b'=').map(value).collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let n = chunk.iter().enumerate().fold(0u32, |acc, (i, &d)| acc | (d as u32) << (18 - 6 * i));
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}
