//! `solo chat` as a person uses it, through a pseudo-terminal: a conversation with the demo
//! model, Ctrl-C stopping a long reply while the program goes on, the slash commands; and with
//! stdin not a terminal, one message per line.

use rexpect::session::PtySession;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use tempfile::TempDir;

fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).canonicalize().unwrap()
}

fn command(args: &[&str], cache: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_solo"));
    cmd.arg("chat").args(args).current_dir(root());
    cmd.env_remove("HF_HOME").env_remove("XDG_CACHE_HOME");
    cmd.env("SOLO_CACHE", cache.join("solo")).env("HF_HUB_CACHE", cache.join("hub"));
    cmd
}

fn pty(args: &[&str], cache: &Path) -> PtySession {
    rexpect::session::spawn_command(command(args, cache), Some(60_000)).unwrap()
}

#[test]
fn a_conversation_in_the_terminal() {
    let cache = TempDir::new().unwrap();
    let mut p = pty(&["--temperature", "0"], cache.path());
    p.exp_string("/reset").unwrap(); // the help line
    p.exp_string("> ").unwrap();
    p.send_line("What is the capital of France?").unwrap();
    // the reasoning folded to one dim line, then the answer
    p.exp_string("(thought: The user asks about France.)").unwrap();
    p.exp_string("The capital of France is Paris.").unwrap();
    p.exp_string("> ").unwrap();
    p.send_line("/think off").unwrap();
    p.exp_string("thinking off").unwrap();
    p.send_line("What does a cow say?").unwrap();
    p.exp_string("A cow says moo.").unwrap();
    p.exp_string("> ").unwrap();
    let saved = cache.path().join("chat.json");
    p.send_line(&format!("/save {}", saved.display())).unwrap();
    p.exp_string("saved 4 messages").unwrap();
    p.send_line("/reset").unwrap();
    p.exp_string("conversation cleared").unwrap();
    p.send_line("/nonsense").unwrap();
    p.exp_string("unknown command /nonsense").unwrap();
    p.send_control('d').unwrap();
    p.exp_eof().unwrap();

    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    let messages = json["messages"].as_array().unwrap();
    let contents: Vec<&str> = messages.iter().map(|m| m["content"].as_str().unwrap()).collect();
    assert_eq!(
        contents,
        [
            "What is the capital of France?",
            "The capital of France is Paris.",
            "What does a cow say?",
            "A cow says moo."
        ]
    );
}

/// A reply that does not stop by itself (tiny-a with --ignore-eos and a huge --max-tokens): Ctrl-C
/// must stop it, and the program must go on to the next message.
#[test]
fn ctrl_c_stops_the_reply_not_the_program() {
    let cache = TempDir::new().unwrap();
    let mut p = pty(
        &["--model", "fixtures/tiny-a", "--temperature", "0", "--max-tokens", "100000000", "--ignore-eos"],
        cache.path(),
    );
    p.exp_string("> ").unwrap();
    p.send_line("Tell me a long story.").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    p.send_control('c').unwrap();
    p.exp_string("[stopped]").unwrap();
    p.exp_string("> ").unwrap();
    // still alive: a command answers, and a second reply can be stopped too
    p.send_line("/think off").unwrap();
    p.exp_string("thinking off").unwrap();
    p.send_line("again").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(800));
    p.send_control('c').unwrap();
    p.exp_string("[stopped]").unwrap();
    p.exp_string("> ").unwrap();
    // Ctrl-C at the prompt clears the line; the program goes on
    p.send_control('c').unwrap();
    p.exp_string("> ").unwrap();
    p.send_line("/exit").unwrap();
    p.exp_eof().unwrap();
}

#[test]
fn piped_stdin_is_one_message_per_line() {
    let cache = TempDir::new().unwrap();
    let mut child = command(&["--temperature", "0", "--no-think"], cache.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"Name the two colors of a chessboard.\n\n/think on\nWhat is the capital of Japan?\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        stdout,
        "The two colors of a chessboard are black and white.\n\
         (thought: The user asks about Japan.)\n\
         The capital of Japan is Tokyo.\n"
    );
}
