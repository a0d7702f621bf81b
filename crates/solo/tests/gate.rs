//! `solo gate` on the command line: one document, many (`--jsonl`), `eval`; an unreadable
//! policy stops `solo gate` and `solo serve` with the line number.

use std::io::Write;
use std::process::{Command, Stdio};

fn solo(args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_solo"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The command may exit before reading (a bad policy): a closed pipe is fine.
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    let out = child.wait_with_output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

fn temp(name: &str, text: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("solo-gate-cli-{}-{name}", std::process::id()));
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn one_document_with_character_offsets() {
    let text = "Grüße! Mail jane.doe@example.com, card ４１１１ １１１１ １１１１ １１１１.";
    let (code, out, err) = solo(&["gate"], text);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["outcome"], "keep_local");
    let spans = v["spans"].as_array().unwrap();
    assert_eq!(spans.len(), 2, "{v}");
    let chars: Vec<char> = text.chars().collect();
    for s in spans {
        let (a, z) = (s["start"].as_u64().unwrap() as usize, s["end"].as_u64().unwrap() as usize);
        assert_eq!(chars[a..z].iter().collect::<String>(), s["text"].as_str().unwrap());
    }
    assert_eq!(spans[0]["type"], "EMAIL");
    assert_eq!(spans[0]["start"], 12);
    assert_eq!(spans[1]["type"], "CARD");
    assert_eq!(spans[1]["text"], "４１１１ １１１１ １１１１ １１１１");

    let (_, out, _) = solo(&["gate"], "Nothing private here, version 1.2.3.");
    assert_eq!(out.trim(), r#"{"outcome":"allow","spans":[],"categories":[],"unsure":false}"#);

    // what a request is about: the user's own health stays local, general knowledge does not
    let (_, out, _) = solo(&["gate"], "Summarize my bloodwork results from last week");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["outcome"], "keep_local", "{v}");
    assert_eq!(v["categories"][0]["type"], "HEALTH", "{v}");
    let (_, out, _) = solo(&["gate"], "How does insulin work?");
    assert_eq!(out.trim(), r#"{"outcome":"allow","spans":[],"categories":[],"unsure":false}"#);
}

#[test]
fn jsonl_keeps_order_and_count() {
    let input = "{\"text\": \"call +1 415 555 0100\"}\nnot json\n{\"text\": \"plain\"}\n{\"text\": \"ssh 10.0.0.7\"}\n";
    let (code, out, err) = solo(&["gate", "--jsonl"], input);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[0]["spans"][0]["type"], "PHONE");
    assert_eq!(lines[0]["outcome"], "mask");
    assert!(lines[1]["error"].as_str().unwrap().contains("line 2"));
    assert_eq!(lines[2]["outcome"], "allow");
    assert_eq!(lines[3]["spans"][0]["type"], "IP_ADDRESS");
}

#[test]
fn custom_policy_and_bad_policy() {
    let policy = temp("ok.toml", "default = \"allow\"\n[[rule]]\ntypes = [\"EMAIL\"]\noutcome = \"refuse\"\n");
    let (code, out, _) = solo(&["gate", "--policy", policy.to_str().unwrap()], "mail a@b.co");
    assert_eq!(code, 0);
    assert!(out.contains("\"outcome\":\"refuse\""), "{out}");
    let bad =
        temp("bad.toml", "default = \"mask\"\n\n[[rule]]\ntypes = [\"EMAIL\", \"TELEPHONE\"]\noutcome = \"mask\"\n");
    let (code, _, err) = solo(&["gate", "--policy", bad.to_str().unwrap()], "x");
    assert_ne!(code, 0);
    assert!(err.contains("line 4") && err.contains("TELEPHONE"), "{err}");
    // The server refuses to start on it too, before loading any model.
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tiny-a");
    let (code, _, err) = solo(
        &[
            "serve",
            "--backend",
            "cpu",
            "--port",
            "0",
            "--model",
            fixture.to_str().unwrap(),
            "--policy",
            bad.to_str().unwrap(),
        ],
        "",
    );
    assert_ne!(code, 0);
    assert!(err.contains("line 4") && err.contains("TELEPHONE"), "{err}");
    let _ = std::fs::remove_file(policy);
    let _ = std::fs::remove_file(bad);
}

#[test]
fn eval_prints_the_table() {
    let corpus = temp(
        "corpus.jsonl",
        "{\"text\": \"mail a@b.co\", \"spans\": [{\"start\": 5, \"end\": 11, \"type\": \"EMAIL\"}]}\n{\"text\": \"Order #12345678 shipped.\", \"spans\": []}\n",
    );
    let (code, out, err) = solo(&["gate", "eval", "--corpus", corpus.to_str().unwrap()], "");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("EMAIL") && out.contains("1.000"), "{out}");
    assert!(out.contains("benign flagged: 0/1"), "{out}");
    assert!(out.contains("latency µs/KB: p50"), "{out}");
    assert!(out.contains("repeats caught: 1/1"), "{out}");
    let _ = std::fs::remove_file(corpus);
}
