//! Slow and surplus clients over raw TCP: stalled headers are disconnected and stalled bodies
//! answered 408 within their timeouts, a streamed reply outlives the body timeout, connections
//! beyond the cap get 503 + Retry-After, and normal requests are served all along.

mod common;

use common::*;
use serde_json::{json, Value};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// A raw connection to the server.
fn connect(s: &solo_server::Server) -> TcpStream {
    let stream = TcpStream::connect(s.addr()).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream
}

/// One response off a keep-alive connection: (status, head, body), read by its Content-Length.
fn read_response(stream: &mut TcpStream) -> (u16, String, String) {
    let mut bytes = Vec::new();
    let mut byte = [0u8; 1];
    while !bytes.ends_with(b"\r\n\r\n") {
        assert_eq!(stream.read(&mut byte).unwrap(), 1, "closed mid-head: {:?}", String::from_utf8_lossy(&bytes));
        bytes.push(byte[0]);
    }
    let head = String::from_utf8(bytes).unwrap().to_ascii_lowercase();
    let status = head[9..12].parse().unwrap();
    let length = head.lines().find_map(|l| l.strip_prefix("content-length:")).map_or(0, |v| v.trim().parse().unwrap());
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).unwrap();
    (status, head, String::from_utf8(body).unwrap())
}

fn get_health(stream: &mut TcpStream) -> (u16, String, String) {
    stream.write_all(b"GET /health HTTP/1.1\r\nHost: solo\r\n\r\n").unwrap();
    read_response(stream)
}

/// Whether the server has closed `stream` (reads to its end), or it is still open with nothing
/// to read.
fn is_closed(mut stream: &TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let mut sink = Vec::new();
    let closed = match stream.read_to_end(&mut sink) {
        Ok(_) => true,
        Err(e) if e.kind() == ErrorKind::WouldBlock => false,
        Err(e) if e.kind() == ErrorKind::ConnectionReset => true,
        Err(e) => panic!("{e}"),
    };
    stream.set_nonblocking(false).unwrap();
    closed
}

/// Everything until the server closes the connection.
fn read_until_closed(stream: &mut TcpStream) -> String {
    let mut bytes = Vec::new();
    match stream.read_to_end(&mut bytes) {
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
        Err(e) => panic!("not closed: {e} after {:?}", String::from_utf8_lossy(&bytes)),
    }
    String::from_utf8(bytes).unwrap()
}

const TIMEOUT: Duration = Duration::from_millis(600);

#[test]
fn stalled_headers_and_bodies_are_dropped_in_time_while_others_are_served() {
    let mut c = config();
    c.header_timeout = TIMEOUT;
    c.body_timeout = TIMEOUT;
    c.max_connections = 256;
    let s = start_scripted(c, vec![Script::text("PLAIN", "Plain answer.")]);
    let started = Instant::now();
    let mut no_headers: Vec<TcpStream> = (0..60)
        .map(|_| {
            let mut t = connect(&s);
            t.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: solo\r\nContent-Ty").unwrap();
            t
        })
        .collect();
    let mut no_body: Vec<TcpStream> = (0..60)
        .map(|_| {
            let mut t = connect(&s);
            t.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: solo\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"messages\": [").unwrap();
            t
        })
        .collect();

    // While they stall, the server answers others, and has closed none of them yet.
    let r = ok(
        &s,
        "/v1/chat/completions",
        &json!({"messages": user("PLAIN"), "chat_template_kwargs": {"enable_thinking": false}}),
    );
    assert_eq!(r["choices"][0]["message"]["content"], "Plain answer.");
    if started.elapsed() < TIMEOUT / 2 {
        let open = no_headers.iter().chain(&no_body).filter(|t| !is_closed(t)).count();
        assert_eq!(open, 120, "closed before their timeout");
    }

    for t in &mut no_headers {
        assert_eq!(read_until_closed(t), "", "a stalled head gets no reply, only a close");
    }
    for t in &mut no_body {
        let reply = read_until_closed(t);
        assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
        let body: Value = serde_json::from_str(&reply[reply.find("\r\n\r\n").unwrap() + 4..]).unwrap();
        assert_eq!(body["error"]["code"], "request_timeout", "{body}");
        assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
    }
    let all_closed = started.elapsed();
    assert!(all_closed >= TIMEOUT, "closed after {all_closed:?}, before the timeout");
    assert!(all_closed < TIMEOUT + Duration::from_secs(4), "closed only after {all_closed:?}");

    assert_eq!(metric(&s, "solo_connections_timed_out_total"), 60.0);
    assert_eq!(metric(&s, "solo_requests_total{route=\"/v1/chat/completions\",status=\"408\"}"), 60.0);
    // (the one open connection is the one asking)
    wait_for("the stalled connections to be let go", || metric(&s, "solo_connections_open") == 1.0);
}

#[test]
fn a_streamed_reply_outlives_the_body_timeout() {
    let mut c = config();
    c.header_timeout = Duration::from_millis(300);
    c.body_timeout = Duration::from_millis(300);
    let s = start_scripted(c, vec![Script::text("COUNT", "one two three four").slow(Duration::from_millis(100))]);
    let started = Instant::now();
    let a = assemble(&stream(
        &s,
        "/v1/chat/completions",
        &json!({"messages": user("COUNT"), "stream": true,
        "chat_template_kwargs": {"enable_thinking": false}}),
    ));
    assert!(started.elapsed() > Duration::from_millis(600), "the reply should take longer than the timeouts");
    assert_eq!(a.content, "one two three four");
    assert_eq!(a.finish_reason.as_deref(), Some("stop"));
}

#[test]
fn connections_beyond_the_cap_get_503_with_retry_after() {
    let mut c = config();
    c.max_connections = 4;
    let s = start_scripted(c, vec![]);
    let mut held: Vec<TcpStream> = (0..4).map(|_| connect(&s)).collect();
    for t in &mut held {
        assert_eq!(get_health(t).0, 200);
    }

    for _ in 0..3 {
        let mut surplus = connect(&s);
        let (status, head, body) = get_health(&mut surplus);
        assert_eq!(status, 503, "{head}{body}");
        assert!(head.contains("retry-after: 1\r\n"), "{head}");
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["error"]["code"], "server_overloaded", "{body}");
        assert_eq!(body["error"]["type"], "server_error", "{body}");
        assert_eq!(read_until_closed(&mut surplus), "", "closed after the 503");
    }

    // The connections inside the cap keep being served, and metrics count the refusals.
    let (status, _, body) = get_health(&mut held[0]);
    assert_eq!((status, body.as_str()), (200, r#"{"status":"ok"}"#));
    held[1].write_all(b"GET /metrics HTTP/1.1\r\nHost: solo\r\n\r\n").unwrap();
    let (_, _, metrics) = read_response(&mut held[1]);
    assert!(metrics.contains("\nsolo_connections_refused_total 3\n"), "{metrics}");
    assert!(metrics.contains("\nsolo_connections_open 4\n"), "{metrics}");

    // One closes; a new connection gets its place.
    held.pop();
    wait_for("a free connection slot", || get_health(&mut connect(&s)).0 == 200);
}
