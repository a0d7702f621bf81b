//! `solo serve` from the command line: it starts, says where it listens, and answers.
//! (The server itself is tested in crates/server.)

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};

/// A plain HTTP/1.1 exchange over loopback; the whole response as text.
fn http(addr: &str, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

#[test]
fn serve_starts_and_answers() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tiny-a");
    let mut child = Command::new(env!("CARGO_BIN_EXE_solo"))
        .args(["serve", "--backend", "cpu", "--port", "0", "--api-key", "k", "--model"])
        .arg(&fixture)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();

    let health = http(&addr, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let denied = http(&addr, "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let body = r#"{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}"#;
    let chat = http(
        &addr,
        &format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    );
    child.kill().unwrap();
    let _ = child.wait();

    assert!(line.contains("serving tiny-a (bf16 weights, cpu backend) at http://127.0.0.1:"), "{line}");
    assert!(health.starts_with("HTTP/1.1 200") && health.contains(r#"{"status":"ok"}"#), "{health}");
    assert!(denied.starts_with("HTTP/1.1 401"), "{denied}");
    assert!(chat.starts_with("HTTP/1.1 200") && chat.contains("\"object\":\"chat.completion\""), "{chat}");
}
