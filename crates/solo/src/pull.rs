//! `solo pull`: a model repository from the Hugging Face Hub into the standard Hugging Face
//! cache (`models--ORG--NAME/{blobs,snapshots/REV,refs}`), so transformers, vLLM and solo share
//! one copy.
//!
//! The Hub's HTTP API: `GET {endpoint}/api/models/{repo}/revision/{rev}?blobs=true` lists the
//! files (size, git blob id, and for LFS files their sha256), `GET
//! {endpoint}/{repo}/resolve/{commit}/{file}` serves one (with `Range`). Files download in
//! parallel into `blobs/{etag}.incomplete` (the name huggingface_hub uses), resume from where an
//! interrupted run stopped, and LFS files are checked against their sha256 before they are
//! renamed into place and linked from the snapshot.

use crate::locate;
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use sha2::{Digest, Sha256};
use std::io::{IsTerminal, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

pub const DEFAULT_REPO: &str = "Qwen/Qwen3.6-35B-A3B";

/// Tries per file after a broken connection (each resumes where the last stopped).
const TRIES: usize = 4;

pub struct PullArgs {
    pub repo: String,
    pub revision: String,
    /// Glob patterns (`*`, `?`) on file paths; none: every file.
    pub include: Vec<String>,
    /// Files downloaded at once.
    pub jobs: usize,
}

/// One file of the repository, as the Hub lists it.
#[derive(Clone, Debug)]
struct RemoteFile {
    path: String,
    size: u64,
    /// The cache's blob name: the LFS sha256, else the git blob id.
    etag: String,
    /// Checked after the download.
    sha256: Option<String>,
}

fn endpoint() -> String {
    std::env::var("HF_ENDPOINT").unwrap_or_else(|_| "https://huggingface.co".into()).trim_end_matches('/').into()
}

/// `$HF_TOKEN`, else the token `huggingface-cli login` saved (`$HF_HOME/token`).
fn token() -> Option<String> {
    if let Ok(t) = std::env::var("HF_TOKEN") {
        return Some(t.trim().to_string()).filter(|t| !t.is_empty());
    }
    let home = std::env::var_os("HF_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/huggingface")))?;
    let t = std::fs::read_to_string(home.join("token")).ok()?;
    Some(t.trim().to_string()).filter(|t| !t.is_empty())
}

pub fn pull(args: PullArgs) -> Result<()> {
    let repo = args.repo.trim_matches('/');
    if repo.split('/').count() != 2 || repo.split('/').any(str::is_empty) {
        bail!("solo pull {repo}: a repository is ORG/NAME, e.g. {DEFAULT_REPO}");
    }
    let hub = locate::hf_hub_dir().context("no Hugging Face cache directory: set HF_HUB_CACHE or HF_HOME")?;
    let endpoint = endpoint();
    let client = Client::new(&endpoint, token())?;
    let (commit, mut files) = client.list(repo, &args.revision)?;
    if !args.include.is_empty() {
        files.retain(|f| args.include.iter().any(|p| glob(p, &f.path)));
        if files.is_empty() {
            bail!("solo pull {repo}: no file matches --include {}", args.include.join(", "));
        }
    }
    let repo_dir = hub.join(format!("models--{}", repo.replace('/', "--")));
    let blobs = repo_dir.join("blobs");
    let snapshot = repo_dir.join("snapshots").join(&commit);
    for dir in [&blobs, &snapshot, &repo_dir.join("refs")] {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }

    // What is still to fetch, and whether it fits.
    let todo: Vec<RemoteFile> = files.iter().filter(|f| !complete(&blobs, f)).cloned().collect();
    let have: u64 = todo.iter().map(|f| partial_len(&blobs, f)).sum();
    let need = todo.iter().map(|f| f.size).sum::<u64>().saturating_sub(have);
    let total: u64 = files.iter().map(|f| f.size).sum();
    let free = free_bytes(&blobs)?;
    if need > free {
        bail!(
            "solo pull {repo}: needs {} more but {} has only {} free: free some space (or set HF_HUB_CACHE \
             to a bigger disk) and run solo pull again",
            human(need),
            blobs.display(),
            human(free)
        );
    }
    eprintln!(
        "solo: pulling {repo} at {} ({} files, {}; {} to download) into {}",
        short(&commit),
        files.len(),
        human(total),
        human(need),
        repo_dir.display()
    );

    let progress = Progress::new(need, todo.len());
    let queue = Mutex::new(todo.into_iter());
    let failed: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..args.jobs.max(1) {
            s.spawn(|| loop {
                if failed.lock().unwrap().is_some() {
                    return;
                }
                let Some(file) = queue.lock().unwrap().next() else { return };
                if let Err(e) = fetch(&client, repo, &commit, &blobs, &file, &progress) {
                    failed.lock().unwrap().get_or_insert(e);
                    return;
                }
                progress.file_done(&file);
            });
        }
    });
    progress.finish();
    if let Some(e) = failed.into_inner().unwrap() {
        return Err(e);
    }

    for f in &files {
        link(&snapshot, f)?;
    }
    if args.revision != commit {
        let refs = repo_dir.join("refs").join(&args.revision);
        if let Some(dir) = refs.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        }
        std::fs::write(&refs, &commit).with_context(|| format!("cannot write {}", refs.display()))?;
    }
    eprintln!("solo: {repo} is in {}", snapshot.display());
    Ok(())
}

/// Blocking HTTP against the Hub, with the token if there is one.
struct Client {
    http: reqwest::blocking::Client,
    endpoint: String,
    token: Option<String>,
}

impl Client {
    fn new(endpoint: &str, token: Option<String>) -> Result<Client> {
        let http = reqwest::blocking::Client::builder()
            .connect_timeout(Duration::from_secs(20))
            .timeout(None)
            .user_agent(concat!("solo/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Client { http, endpoint: endpoint.into(), token })
    }

    fn get(&self, url: &str) -> reqwest::blocking::RequestBuilder {
        let req = self.http.get(url);
        match &self.token {
            Some(t) => req.bearer_auth(t),
            None => req,
        }
    }

    /// The commit `revision` resolves to and the files there.
    fn list(&self, repo: &str, revision: &str) -> Result<(String, Vec<RemoteFile>)> {
        let url = format!("{}/api/models/{repo}/revision/{revision}?blobs=true", self.endpoint);
        let resp = self.get(&url).send().map_err(|e| unreachable(&self.endpoint, e))?;
        let status = resp.status();
        if !status.is_success() {
            bail!("{}", self.refused(repo, revision, status.as_u16()));
        }
        let json: serde_json::Value =
            resp.json().with_context(|| format!("{url}: the Hub's answer is not the JSON expected"))?;
        let commit = json["sha"].as_str().context("the Hub's listing has no commit sha")?.to_string();
        let siblings = json["siblings"].as_array().context("the Hub's listing has no files (siblings)")?;
        let mut files = Vec::new();
        for s in siblings {
            let path = s["rfilename"].as_str().context("a file without rfilename in the Hub's listing")?;
            if path.split('/').any(|p| p == ".." || p.is_empty()) {
                bail!("the Hub's listing names an unsafe path: {path}");
            }
            let sha256 = s["lfs"]["sha256"].as_str().map(str::to_string);
            let size = s["lfs"]["size"].as_u64().or(s["size"].as_u64()).with_context(|| format!("{path}: no size"))?;
            let etag = match (&sha256, s["blobId"].as_str()) {
                (Some(sha), _) => sha.clone(),
                (None, Some(id)) => id.to_string(),
                (None, None) => bail!("{path}: the Hub's listing has no blobId (ask with ?blobs=true)"),
            };
            if !etag.chars().all(|c| c.is_ascii_alphanumeric()) {
                bail!("{path}: unexpected blob id {etag}");
            }
            files.push(RemoteFile { path: path.to_string(), size, etag, sha256 });
        }
        Ok((commit, files))
    }

    /// One line for a refused request.
    fn refused(&self, repo: &str, what: &str, status: u16) -> String {
        match status {
            401 | 403 => format!(
                "solo pull {repo}: the Hub refused access ({status}): the repository is gated or private, or the \
                 token is wrong; set HF_TOKEN to a token that may read it (and accept the model's terms on its page)"
            ),
            404 => {
                format!("solo pull {repo}: {what} not found on {} (404): check the name and --revision", self.endpoint)
            }
            _ => format!("solo pull {repo}: {what}: the Hub answered HTTP {status}; try again later"),
        }
    }
}

fn unreachable(endpoint: &str, e: reqwest::Error) -> anyhow::Error {
    anyhow::anyhow!("cannot reach {endpoint} ({e}); check the network, or set HF_ENDPOINT to a mirror")
}

fn incomplete(blobs: &Path, f: &RemoteFile) -> PathBuf {
    blobs.join(format!("{}.incomplete", f.etag))
}

fn complete(blobs: &Path, f: &RemoteFile) -> bool {
    std::fs::metadata(blobs.join(&f.etag)).is_ok_and(|m| m.len() == f.size)
}

fn partial_len(blobs: &Path, f: &RemoteFile) -> u64 {
    std::fs::metadata(incomplete(blobs, f)).map_or(0, |m| m.len()).min(f.size)
}

/// Downloads one file into `blobs/{etag}`: resumes a partial file, retries a broken connection,
/// checks the sha256; a corrupt resumed file is fetched once more from the start.
fn fetch(client: &Client, repo: &str, commit: &str, blobs: &Path, f: &RemoteFile, progress: &Progress) -> Result<()> {
    let part = incomplete(blobs, f);
    let mut restarted = false;
    let mut tries = 0;
    loop {
        tries += 1;
        match fetch_once(client, repo, commit, &part, f, progress) {
            Ok(()) => {}
            Err(Fetch::Broken(e)) if tries < TRIES => {
                progress.note(&format!("{}: {e}; resuming", f.path));
                std::thread::sleep(Duration::from_millis(200 * tries as u64));
                continue;
            }
            Err(Fetch::Broken(e)) => bail!(
                "{}: the connection broke {TRIES} times ({e}); run solo pull again to resume from {}",
                f.path,
                human(partial_len(blobs, f))
            ),
            Err(Fetch::Fatal(e)) => return Err(e),
        }
        if let Some(expected) = &f.sha256 {
            let got = sha256_file(&part)?;
            if &got != expected {
                let _ = std::fs::remove_file(&part);
                if !restarted {
                    restarted = true;
                    progress.note(&format!("{}: sha256 mismatch; downloading it again from the start", f.path));
                    continue;
                }
                bail!(
                    "{}: sha256 {} does not match the Hub's {} (corrupted in transit?); the file was deleted: run \
                     solo pull again",
                    f.path,
                    short(&got),
                    short(expected)
                );
            }
        }
        let blob = blobs.join(&f.etag);
        std::fs::rename(&part, &blob)
            .with_context(|| format!("cannot move {} to {}", part.display(), blob.display()))?;
        return Ok(());
    }
}

enum Fetch {
    /// Worth a retry (resuming).
    Broken(String),
    Fatal(anyhow::Error),
}

fn fetch_once(
    client: &Client,
    repo: &str,
    commit: &str,
    part: &Path,
    f: &RemoteFile,
    progress: &Progress,
) -> Result<(), Fetch> {
    let fatal = |e: anyhow::Error| Fetch::Fatal(e);
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .append(false)
        .read(true)
        .write(true)
        .open(part)
        .with_context(|| format!("cannot open {}", part.display()))
        .map_err(fatal)?;
    let mut have = file.metadata().map_err(|e| fatal(e.into()))?.len();
    if have > f.size {
        file.set_len(0).map_err(|e| fatal(e.into()))?;
        have = 0;
    }
    if have == f.size {
        return Ok(());
    }
    let url = format!("{}/{repo}/resolve/{commit}/{}", client.endpoint, f.path);
    let mut req = client.get(&url);
    if have > 0 {
        req = req.header(reqwest::header::RANGE, format!("bytes={have}-"));
    }
    let mut resp = req.send().map_err(|e| Fetch::Broken(e.to_string()))?;
    let status = resp.status().as_u16();
    match status {
        206 => {}
        200 => {
            // The server ignored the range: start over.
            file.set_len(0).map_err(|e| fatal(e.into()))?;
            have = 0;
        }
        416 if have > 0 => {
            // Nothing left to send for this range: the partial file is whole or wrong; the sha decides.
            file.set_len(0).map_err(|e| fatal(e.into()))?;
            return Err(Fetch::Broken("the server refused the resume range".into()));
        }
        500..=599 => return Err(Fetch::Broken(format!("HTTP {status}"))),
        _ => return Err(Fetch::Fatal(anyhow::anyhow!("{}", client.refused(repo, &f.path, status)))),
    }
    file.seek(std::io::SeekFrom::Start(have)).map_err(|e| fatal(e.into()))?;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = match resp.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Fetch::Broken(e.to_string())),
        };
        file.write_all(&buf[..n]).map_err(|e| fatal(write_error(part, e)))?;
        have += n as u64;
        progress.add(n as u64);
    }
    file.flush().map_err(|e| fatal(write_error(part, e)))?;
    if have < f.size {
        return Err(Fetch::Broken(format!("the connection closed at {} of {}", human(have), human(f.size))));
    }
    if have > f.size {
        let _ = std::fs::remove_file(part);
        return Err(Fetch::Fatal(anyhow::anyhow!(
            "{}: the Hub sent {have} bytes, its listing says {}; the file was deleted",
            f.path,
            f.size
        )));
    }
    Ok(())
}

/// A failed write, in one line: a full disk says what to do.
pub fn write_error(path: &Path, e: std::io::Error) -> anyhow::Error {
    if e.kind() == std::io::ErrorKind::StorageFull || e.raw_os_error() == Some(28) || e.raw_os_error() == Some(122) {
        anyhow::anyhow!(
            "the disk is full (writing {}): free some space and run solo pull again; it resumes where it stopped",
            path.display()
        )
    } else {
        anyhow::anyhow!("cannot write {}: {e}", path.display())
    }
}

fn sha256_file(path: &Path) -> Result<String> {
    let mut file = std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).with_context(|| format!("cannot read {}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// `snapshots/COMMIT/PATH` → `../../blobs/ETAG` (relative, as huggingface_hub links them).
fn link(snapshot: &Path, f: &RemoteFile) -> Result<()> {
    let dest = snapshot.join(&f.path);
    let depth = f.path.matches('/').count();
    let mut target = PathBuf::new();
    for _ in 0..depth + 2 {
        target.push("..");
    }
    target.push("blobs");
    target.push(&f.etag);
    if let Some(dir) = dest.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    if std::fs::read_link(&dest).is_ok_and(|t| t == target) {
        return Ok(());
    }
    let _ = std::fs::remove_file(&dest);
    std::os::unix::fs::symlink(&target, &dest).with_context(|| format!("cannot link {}", dest.display()))
}

/// Free bytes on the file system holding `dir` (`SOLO_PULL_FREE_BYTES` overrides it, for tests of
/// a full disk).
#[allow(clippy::unnecessary_cast)] // statvfs's field types differ between platforms
fn free_bytes(dir: &Path) -> Result<u64> {
    if let Some(v) = std::env::var("SOLO_PULL_FREE_BYTES").ok().and_then(|v| v.parse().ok()) {
        return Ok(v);
    }
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).context("a path with a NUL byte")?;
    // SAFETY: `c` is a valid NUL-terminated path and `stat` a plain struct statvfs fills.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut stat) } != 0 {
        return Ok(u64::MAX); // unknown: let the writes tell
    }
    Ok(stat.f_bavail as u64 * stat.f_frsize as u64)
}

/// `*` any run of characters, `?` one character; the whole path must match.
pub fn glob(pattern: &str, path: &str) -> bool {
    let (p, s): (Vec<char>, Vec<char>) = (pattern.chars().collect(), path.chars().collect());
    let (mut pi, mut si, mut star, mut mark) = (0, 0, None, 0);
    while si < s.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = si;
            pi += 1;
        } else if let Some(st) = star {
            pi = st + 1;
            mark += 1;
            si = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

pub fn human(bytes: u64) -> String {
    let b = bytes as f64;
    match bytes {
        0..1_000 => format!("{bytes} B"),
        1_000..1_000_000 => format!("{:.1} kB", b / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} MB", b / 1e6),
        _ => format!("{:.2} GB", b / 1e9),
    }
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}

/// A bar (bytes, rate, ETA) on a terminal; plain lines, one a file, otherwise.
struct Progress {
    bar: Option<ProgressBar>,
    files: usize,
    done: AtomicUsize,
    lines: Mutex<()>,
}

impl Progress {
    fn new(bytes: u64, files: usize) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(bytes);
            bar.set_style(
                ProgressStyle::with_template("{bar:30} {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta} {msg}")
                    .expect("a valid template"),
            );
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Progress { bar, files, done: AtomicUsize::new(0), lines: Mutex::new(()) }
    }

    fn add(&self, n: u64) {
        if let Some(bar) = &self.bar {
            bar.inc(n);
        }
    }

    fn note(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(format!("solo: {line}")),
            None => {
                let _guard = self.lines.lock().unwrap();
                eprintln!("solo: {line}");
            }
        }
    }

    fn file_done(&self, f: &RemoteFile) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        match &self.bar {
            Some(bar) => bar.set_message(format!("{done}/{} files", self.files)),
            None => self.note(&format!("[{done}/{}] {} ({})", self.files, f.path, human(f.size))),
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_matches_whole_paths() {
        assert!(glob("*.json", "config.json"));
        assert!(glob("*Q4_K_M*.gguf", "Qwen3.6-35B-A3B-Q4_K_M.gguf"));
        assert!(glob("model-0000?-of-*", "model-00001-of-00026.safetensors"));
        assert!(!glob("*.json", "model.safetensors"));
        assert!(!glob("config", "config.json"));
    }

    #[test]
    fn a_full_disk_says_what_to_do() {
        let e = write_error(Path::new("/x/blob"), std::io::Error::from_raw_os_error(28)).to_string();
        assert!(e.contains("disk is full") && e.contains("solo pull again"), "{e}");
    }

    #[test]
    fn sizes_read_well() {
        assert_eq!(human(999), "999 B");
        assert_eq!(human(67_000_000_000), "67.00 GB");
    }
}
