//! `solo pull` against a mock Hugging Face Hub on loopback: a test server with the Hub's HTTP
//! layout (`api/models/{repo}/revision/{rev}` with sizes and LFS sha256, `{repo}/resolve/{rev}/{file}`
//! with `Range`) serving the tiny sharded checkpoint fixtures/tiny-b. Each failure a user can
//! meet (a broken connection, a partial or corrupted file, 404, 401, a full disk) ends in one
//! clear line or is repaired.

mod common;
use common::{root, solo_with, Output};
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tempfile::TempDir;

const REPO: &str = "Qwen/Qwen3.6-35B-A3B";
const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
const TOKEN: &str = "hf_test_token";
const FILES: &[&str] = &[
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "model.safetensors.index.json",
    "model-00001-of-00002.safetensors",
    "model-00002-of-00002.safetensors",
];

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[derive(Default)]
struct Behaviour {
    /// Ask for `Authorization: Bearer TOKEN`.
    needs_token: bool,
    /// Files whose first full download stops halfway (the connection closes).
    break_once: HashSet<String>,
    /// Files always served with a byte flipped.
    corrupt: HashSet<String>,
}

/// What the server saw: (path, Range header) of every file request.
type Log = Arc<Mutex<Vec<(String, Option<String>)>>>;

struct Hub {
    url: String,
    log: Log,
}

impl Hub {
    fn start(behaviour: Behaviour) -> Hub {
        let files: HashMap<String, Vec<u8>> = FILES
            .iter()
            .map(|f| (f.to_string(), std::fs::read(root().join("fixtures/tiny-b").join(f)).unwrap()))
            .collect();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let log: Log = Arc::default();
        let state = Arc::new((files, Mutex::new(behaviour), log.clone()));
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let state = state.clone();
                std::thread::spawn(move || {
                    let (files, behaviour, log) = &*state;
                    let _ = serve(stream, files, behaviour, log);
                });
            }
        });
        Hub { url, log }
    }

    fn requests(&self) -> Vec<(String, Option<String>)> {
        self.log.lock().unwrap().clone()
    }
}

fn listing(files: &HashMap<String, Vec<u8>>) -> String {
    let siblings: Vec<serde_json::Value> = FILES
        .iter()
        .map(|name| {
            let bytes = &files[*name];
            let mut s = serde_json::json!({ "rfilename": name, "size": bytes.len(), "blobId": &sha256(bytes)[..40] });
            if name.ends_with(".safetensors") {
                s["lfs"] = serde_json::json!({ "sha256": sha256(bytes), "size": bytes.len() });
            }
            s
        })
        .collect();
    serde_json::json!({ "id": REPO, "sha": COMMIT, "siblings": siblings }).to_string()
}

fn serve(
    mut stream: TcpStream,
    files: &HashMap<String, Vec<u8>>,
    behaviour: &Mutex<Behaviour>,
    log: &Log,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    loop {
        let mut request = String::new();
        if reader.read_line(&mut request)? == 0 {
            return Ok(());
        }
        let mut headers = HashMap::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line)?;
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                headers.insert(k.trim().to_lowercase(), v.trim().to_string());
            }
        }
        let path = request.split_whitespace().nth(1).unwrap_or("/").to_string();
        let reply = |stream: &mut TcpStream, status: &str, extra: &str, body: &[u8]| -> std::io::Result<()> {
            write!(stream, "HTTP/1.1 {status}\r\nContent-Length: {}\r\n{extra}\r\n", body.len())?;
            stream.write_all(body)
        };
        let b = behaviour.lock().unwrap();
        if b.needs_token && headers.get("authorization").map(String::as_str) != Some(&format!("Bearer {TOKEN}")) {
            drop(b);
            reply(&mut stream, "401 Unauthorized", "", b"{\"error\":\"Invalid credentials\"}")?;
            continue;
        }
        drop(b);
        let api = format!("/api/models/{REPO}/revision/");
        let resolve = format!("/{REPO}/resolve/{COMMIT}/");
        if let Some(rest) = path.strip_prefix(&api) {
            if rest.split('?').next() == Some("main") || rest.starts_with(COMMIT) {
                reply(&mut stream, "200 OK", "Content-Type: application/json\r\n", listing(files).as_bytes())?;
            } else {
                reply(&mut stream, "404 Not Found", "", b"{\"error\":\"Revision Not Found\"}")?;
            }
        } else if let Some(name) = path.strip_prefix(&resolve).filter(|n| files.contains_key(*n)) {
            let range = headers.get("range").cloned();
            log.lock().unwrap().push((name.to_string(), range.clone()));
            let mut body = files[name].clone();
            let mut b = behaviour.lock().unwrap();
            if b.corrupt.contains(name) {
                let mid = body.len() / 2;
                body[mid] ^= 0xff;
            }
            let start: usize = range
                .as_deref()
                .and_then(|r| r.strip_prefix("bytes="))
                .and_then(|r| r.trim_end_matches('-').parse().ok())
                .unwrap_or(0);
            let whole = body.len();
            if start > 0 {
                let extra = format!("Content-Range: bytes {start}-{}/{whole}\r\n", whole - 1);
                drop(b);
                reply(&mut stream, "206 Partial Content", &extra, &body[start..])?;
            } else if b.break_once.remove(name) {
                drop(b);
                // the whole length announced, half of it sent, the connection closed
                write!(stream, "HTTP/1.1 200 OK\r\nContent-Length: {whole}\r\n\r\n")?;
                stream.write_all(&body[..whole / 2])?;
                stream.flush()?;
                return Ok(());
            } else {
                drop(b);
                reply(&mut stream, "200 OK", "", &body)?;
            }
        } else {
            reply(&mut stream, "404 Not Found", "", b"{\"error\":\"Repository Not Found\"}")?;
        }
    }
}

fn solo(args: &[&str], env: &[(&str, &str)]) -> Output {
    let unset = ["HF_HOME", "HF_HUB_CACHE", "HF_TOKEN", "HF_ENDPOINT", "SOLO_CACHE", "SOLO_PULL_FREE_BYTES"];
    solo_with(args, &unset, &[&[("HOME", "/nonexistent-home")], env].concat())
}

/// A failure: non-zero exit and a last stderr line `solo: error: …` naming each of `names`.
fn failed(out: &Output, names: &[&str]) {
    assert!(matches!(out.code, Some(c) if c != 0), "exit {:?}:\n{}", out.code, out.stderr);
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    let last = out.stderr.lines().last().unwrap_or_default();
    assert!(last.starts_with("solo: error: "), "{}", out.stderr);
    assert_eq!(out.stderr.matches("solo: error").count(), 1, "{}", out.stderr);
    for name in names {
        assert!(last.contains(name), "error does not name `{name}`: {last}");
    }
}

fn repo_dir(hub: &Path) -> PathBuf {
    hub.join("models--Qwen--Qwen3.6-35B-A3B")
}

fn blob_name(file: &str) -> String {
    let bytes = std::fs::read(root().join("fixtures/tiny-b").join(file)).unwrap();
    sha256(&bytes)
}

/// Every file in `snapshots/COMMIT/`, a link into `blobs/`, byte-identical to the fixture.
fn assert_snapshot_complete(hub: &Path) {
    let snap = repo_dir(hub).join("snapshots").join(COMMIT);
    for f in FILES {
        let link = std::fs::read_link(snap.join(f)).unwrap_or_else(|_| panic!("{f} is not a link"));
        assert!(link.starts_with("../../blobs"), "{f} -> {}", link.display());
        let got = std::fs::read(snap.join(f)).unwrap();
        assert_eq!(got, std::fs::read(root().join("fixtures/tiny-b").join(f)).unwrap(), "{f}");
    }
    let leftovers: Vec<_> = std::fs::read_dir(repo_dir(hub).join("blobs"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".incomplete"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn pull_fills_the_hugging_face_cache_and_run_finds_it() {
    let hub = Hub::start(Behaviour::default());
    let home = TempDir::new().unwrap();
    let hf_home = home.path().to_str().unwrap();
    let env = [("HF_ENDPOINT", hub.url.as_str()), ("HF_HOME", hf_home)];
    let out = solo(&["pull", "--jobs", "3"], &env).ok();
    assert_eq!(out.stdout, "", "pull writes its lines to stderr");
    // not a terminal: plain lines, one a file
    assert_eq!(out.stderr.matches("] ").count(), FILES.len(), "{}", out.stderr);
    let cache = home.path().join("hub");
    assert_snapshot_complete(&cache);
    assert_eq!(std::fs::read_to_string(repo_dir(&cache).join("refs/main")).unwrap(), COMMIT);
    assert!(repo_dir(&cache).join("blobs").join(blob_name("model-00001-of-00002.safetensors")).is_file());

    // again: nothing to download
    let before = hub.requests().len();
    solo(&["pull"], &env).ok();
    assert_eq!(hub.requests().len(), before, "a second pull downloaded again");

    // solo run finds the pulled model (not the demo)
    let run = solo(&["run", "--prompt", "hi", "--max-tokens", "3", "--temperature", "0"], &env).ok();
    assert!(!run.stderr.contains("demo"), "{}", run.stderr);
    assert!(run.stderr.contains("solo: prompt "), "{}", run.stderr);
}

#[test]
fn a_broken_connection_resumes() {
    let shard = "model-00002-of-00002.safetensors";
    let hub = Hub::start(Behaviour { break_once: HashSet::from([shard.to_string()]), ..Default::default() });
    let cache = TempDir::new().unwrap();
    let env = [("HF_ENDPOINT", hub.url.as_str()), ("HF_HUB_CACHE", cache.path().to_str().unwrap())];
    let out = solo(&["pull"], &env).ok();
    assert!(out.stderr.contains("resuming"), "{}", out.stderr);
    assert_snapshot_complete(cache.path());
    let half = std::fs::metadata(root().join("fixtures/tiny-b").join(shard)).unwrap().len() / 2;
    let want = (shard.to_string(), Some(format!("bytes={half}-")));
    assert!(hub.requests().contains(&want), "no resume request: {:?}", hub.requests());
}

#[test]
fn a_partial_file_from_an_earlier_run_is_resumed() {
    let shard = "model-00001-of-00002.safetensors";
    let hub = Hub::start(Behaviour::default());
    let cache = TempDir::new().unwrap();
    let blobs = repo_dir(cache.path()).join("blobs");
    std::fs::create_dir_all(&blobs).unwrap();
    let bytes = std::fs::read(root().join("fixtures/tiny-b").join(shard)).unwrap();
    let third = bytes.len() / 3;
    std::fs::write(blobs.join(format!("{}.incomplete", blob_name(shard))), &bytes[..third]).unwrap();
    let env = [("HF_ENDPOINT", hub.url.as_str()), ("HF_HUB_CACHE", cache.path().to_str().unwrap())];
    solo(&["pull"], &env).ok();
    assert_snapshot_complete(cache.path());
    let asked: Vec<_> = hub.requests().into_iter().filter(|(f, _)| f == shard).collect();
    assert_eq!(asked, [(shard.to_string(), Some(format!("bytes={third}-")))]);
}

#[test]
fn a_corrupted_partial_file_is_fetched_again() {
    let shard = "model-00001-of-00002.safetensors";
    let hub = Hub::start(Behaviour::default());
    let cache = TempDir::new().unwrap();
    let blobs = repo_dir(cache.path()).join("blobs");
    std::fs::create_dir_all(&blobs).unwrap();
    std::fs::write(blobs.join(format!("{}.incomplete", blob_name(shard))), vec![0x5a; 1000]).unwrap();
    let env = [("HF_ENDPOINT", hub.url.as_str()), ("HF_HUB_CACHE", cache.path().to_str().unwrap())];
    let out = solo(&["pull"], &env).ok();
    assert!(out.stderr.contains("sha256 mismatch"), "{}", out.stderr);
    assert_snapshot_complete(cache.path());
    let asked: Vec<_> = hub.requests().into_iter().filter(|(f, _)| f == shard).map(|(_, r)| r).collect();
    assert_eq!(asked, [Some("bytes=1000-".to_string()), None]);
}

#[test]
fn a_corrupted_download_fails_in_one_line() {
    let shard = "model-00002-of-00002.safetensors";
    let hub = Hub::start(Behaviour { corrupt: HashSet::from([shard.to_string()]), ..Default::default() });
    let cache = TempDir::new().unwrap();
    let env = [("HF_ENDPOINT", hub.url.as_str()), ("HF_HUB_CACHE", cache.path().to_str().unwrap())];
    let out = solo(&["pull", "--jobs", "1"], &env);
    failed(&out, &[shard, "sha256", "does not match", "solo pull again"]);
    let blobs = repo_dir(cache.path()).join("blobs");
    assert!(!blobs.join(blob_name(shard)).exists());
    assert!(!blobs.join(format!("{}.incomplete", blob_name(shard))).exists());
}

#[test]
fn an_unknown_repository_or_revision_is_a_404_line() {
    let hub = Hub::start(Behaviour::default());
    let cache = TempDir::new().unwrap();
    let env = [("HF_ENDPOINT", hub.url.as_str()), ("HF_HUB_CACHE", cache.path().to_str().unwrap())];
    failed(&solo(&["pull", "Qwen/No-Such-Model"], &env), &["Qwen/No-Such-Model", "404", "check the name"]);
    failed(&solo(&["pull", "--revision", "v9"], &env), &["v9", "404"]);
    failed(&solo(&["pull", "not-a-repo"], &env), &["ORG/NAME"]);
}

#[test]
fn a_gated_repository_needs_hf_token() {
    let hub = Hub::start(Behaviour { needs_token: true, ..Default::default() });
    let cache = TempDir::new().unwrap();
    let dir = cache.path().to_str().unwrap();
    let env = [("HF_ENDPOINT", hub.url.as_str()), ("HF_HUB_CACHE", dir)];
    failed(&solo(&["pull"], &env), &["401", "HF_TOKEN"]);
    failed(&solo(&["pull"], &[env[0], env[1], ("HF_TOKEN", "wrong")]), &["401"]);
    solo(&["pull"], &[env[0], env[1], ("HF_TOKEN", TOKEN)]).ok();
    assert_snapshot_complete(cache.path());
}

#[test]
fn a_full_disk_is_caught_before_downloading() {
    let hub = Hub::start(Behaviour::default());
    let cache = TempDir::new().unwrap();
    let env = [
        ("HF_ENDPOINT", hub.url.as_str()),
        ("HF_HUB_CACHE", cache.path().to_str().unwrap()),
        ("SOLO_PULL_FREE_BYTES", "10000"),
    ];
    failed(&solo(&["pull"], &env), &["free", "solo pull again"]);
    assert!(hub.requests().is_empty(), "downloaded anyway: {:?}", hub.requests());
}

#[test]
fn include_takes_only_matching_files() {
    let hub = Hub::start(Behaviour::default());
    let cache = TempDir::new().unwrap();
    let env = [("HF_ENDPOINT", hub.url.as_str()), ("HF_HUB_CACHE", cache.path().to_str().unwrap())];
    solo(&["pull", "--include", "*.json"], &env).ok();
    let snap = repo_dir(cache.path()).join("snapshots").join(COMMIT);
    let mut got: Vec<String> =
        std::fs::read_dir(&snap).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    got.sort();
    let mut want: Vec<&str> = FILES.iter().copied().filter(|f| f.ends_with(".json")).collect();
    want.sort();
    assert_eq!(got, want);
    failed(&solo(&["pull", "--include", "*.gguf"], &env), &["no file matches"]);
    // run finds the partial snapshot and says what is missing
    let run = solo(&["run", "--prompt", "hi", "--max-tokens", "2"], &env);
    failed(&run, &["model-00001-of-00002.safetensors", "solo pull"]);
}
