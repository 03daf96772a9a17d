//! What a remote server cannot make the gateway hold or do, against the scripted server of
//! `remote_faults`: answers past `max_message` (a JSON body, an event of many lines), a
//! `protocolVersion` or legacy endpoint that no request can carry, and a flood of
//! notifications from a client queued ahead of a call.

use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{Client, TIMEOUT, eventually, text};
use crate::remote_faults::{Reply, Scripted, Seen, gateway, is_init, started};

/// The tools of the scripted server in these tests.
const TOOLS: [&str; 4] = ["who", "huge_json", "huge_event", "big"];

/// Bytes of the huge answers: far past the default limit, and what the gateway would
/// hold several times over if it read them whole.
const HUGE: usize = 512 << 20;

/// Answers `tools/list` with [`TOOLS`] and the calls of the big ones; false for the rest,
/// which the scripted server's defaults answer.
fn big_answers(seen: &Seen, reply: &mut Reply) -> bool {
    match (seen.method(), seen.message["params"]["name"].as_str()) {
        ("tools/list", _) => {
            let tools: Vec<Value> = (TOOLS.iter())
                .map(|name| json!({"name": name, "inputSchema": {"type": "object"}}))
                .collect();
            reply.result(seen, json!({"tools": tools}));
        }
        ("tools/call", Some("huge_json")) => huge_json(seen, reply, HUGE),
        ("tools/call", Some("big")) => huge_json(seen, reply, 100 << 10),
        ("tools/call", Some("huge_event")) => huge_event(seen, reply),
        _ => return false,
    }
    true
}

/// A JSON answer whose text is `len` bytes, written as the gateway reads it (a write fails
/// once it stops reading).
fn huge_json(seen: &Seen, reply: &mut Reply, len: usize) {
    let head = format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"content":[{{"type":"text","text":""#,
        seen.message["id"]
    );
    let tail = r#""}]}}"#;
    let _ = write!(
        reply.stream,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{head}",
        head.len() + len + tail.len()
    );
    let chunk = vec![b'x'; 1 << 20];
    let mut left = len;
    while left > 0 {
        let n = left.min(chunk.len());
        if reply.stream.write_all(&chunk[..n]).is_err() {
            return;
        }
        left -= n;
    }
    let _ = reply.stream.write_all(tail.as_bytes());
}

/// An answer's event stream whose one event is [`HUGE`] bytes in lines of 1 MiB: no line is
/// long, the event is.
fn huge_event(seen: &Seen, reply: &mut Reply) {
    reply.events();
    let head = format!(
        "data: {{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{\"pad\":[\n",
        seen.message["id"]
    );
    if reply.stream.write_all(head.as_bytes()).is_err() {
        return;
    }
    let line = format!("data: \"{}\",\n", "x".repeat((1 << 20) - 12));
    for _ in 0..HUGE >> 20 {
        if reply.stream.write_all(line.as_bytes()).is_err() {
            return;
        }
    }
    let _ = reply.stream.write_all(b"data: \"x\"]}}\n\n");
}

/// The error message of a call that must fail with -32000 (what came instead is shown cut
/// short: it may be the whole huge answer).
fn failed(client: &mut Client, tool: &str) -> String {
    let response = client.request("tools/call", json!({"name": tool, "arguments": {}}));
    let shown: String = response.to_string().chars().take(300).collect();
    assert_eq!(response["error"]["code"], -32000, "{tool}: {shown}");
    response["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Answers of 512 MiB, as one JSON body and as one event of many lines, each fail their
/// call at once with an error that names the limit; the gateway never holds them (its peak
/// memory stays far below), and the next call goes on the same session.
#[test]
fn answers_past_max_message_fail_their_call_and_the_session_goes_on() {
    let server = Scripted::start(big_answers);
    let mut client = gateway(&server, &[r#"timeout = "60s""#]);
    for tool in ["up__huge_json", "up__huge_event"] {
        let started = Instant::now();
        let message = failed(&mut client, tool);
        assert!(
            message.contains("`up`")
                && message.contains("larger than the limit of 16 MiB")
                && message.contains("`max_message`"),
            "{tool}: {message}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{tool}: at once"
        );
        assert_eq!(text(&client.call("up__who", json!({}))), "session s1");
    }
    let peak = client.peak_rss();
    assert!(peak < 256 << 20, "peak RSS {} MiB", peak >> 20);
    assert_eq!(client.status()["backends"]["up"]["status"], "ready");
    assert_eq!(server.count(is_init), 1, "the same session");
}

/// `max_message` sets the limit per server.
#[test]
fn max_message_sets_the_limit() {
    let server = Scripted::start(big_answers);
    let mut client = gateway(&server, &[r#"max_message = "64KiB""#]);
    let message = failed(&mut client, "up__big");
    assert!(
        message.contains("larger than the limit of 64 KiB"),
        "{message}"
    );
    assert_eq!(text(&client.call("up__who", json!({}))), "session s1");
}

/// An event past `max_message` on the server's `GET` stream is skipped, and the stream
/// read on: the log message after it reaches the client.
#[test]
fn an_event_past_max_message_on_the_get_stream_is_skipped() {
    let server = Scripted::start(|seen, reply| {
        if seen.verb != "GET" {
            return false;
        }
        reply.events();
        let line = format!("data: {}\n", "x".repeat(16 << 10));
        let _ = writeln!(reply.stream, "{}", line.repeat(64));
        let log = json!({"jsonrpc": "2.0", "method": "notifications/message",
                         "params": {"level": "error", "data": "after"}});
        reply.event(None, &log);
        reply.hold();
        true
    });
    let mut client = gateway(&server, &[r#"max_message = "64KiB""#]);
    let message = client.next_notification("notifications/message", TIMEOUT);
    assert_eq!(message["params"]["data"], "after", "{message}");
    assert_eq!(server.count(|s| s.verb == "GET"), 1, "the same stream");
    assert!(
        client
            .stderr()
            .contains("skipped an event larger than the limit of 64 KiB"),
        "{}",
        client.stderr()
    );
}

/// Over the legacy transport an answer comes on the one event stream: one past
/// `max_message` is skipped, the stream read on, and its request fails at once.
#[test]
fn an_answer_past_max_message_on_the_legacy_stream_fails_its_call() {
    let stream: Arc<Mutex<Option<TcpStream>>> = Arc::default();
    let answers = stream.clone();
    let server = Scripted::start(move |seen, reply| {
        if seen.verb == "GET" {
            reply.events();
            let _ = write!(reply.stream, "event: endpoint\ndata: /messages\n\n");
            *answers.lock().unwrap() = reply.stream.try_clone().ok();
            reply.hold();
            return true;
        }
        let id = &seen.message["id"];
        let result = match (seen.method(), seen.message["params"]["name"].as_str()) {
            ("initialize", _) => json!({"protocolVersion": "2024-11-05",
                "capabilities": {"tools": {}}, "serverInfo": {"name": "legacy", "version": "1"}}),
            ("tools/list", _) => {
                let tools = ["who", "big"]
                    .map(|name| json!({"name": name, "inputSchema": {"type": "object"}}));
                json!({ "tools": tools })
            }
            ("tools/call", Some("big")) => json!({ "pad": vec!["x".repeat(16 << 10); 64] }),
            ("tools/call", _) => json!({"content": [{"type": "text", "text": "legacy"}]}),
            _ => Value::Null,
        };
        if !id.is_null() {
            let answer = json!({"jsonrpc": "2.0", "id": id, "result": result});
            let mut events = answers.lock().unwrap();
            let events = events.as_mut().expect("the GET stream first");
            let _ = write!(events, "event: message\ndata: {answer}\n\n");
        }
        reply.json("202 Accepted", "", None);
        true
    });
    let mut client = gateway(
        &server,
        &[
            r#"transport = "sse""#,
            r#"max_message = "64KiB""#,
            r#"timeout = "60s""#,
        ],
    );
    assert_eq!(text(&client.call("up__who", json!({}))), "legacy");
    let started = Instant::now();
    let message = failed(&mut client, "up__big");
    assert!(
        message.contains("larger than the limit of 64 KiB"),
        "{message}"
    );
    assert!(started.elapsed() < Duration::from_secs(20), "at once");
    assert_eq!(text(&client.call("up__who", json!({}))), "legacy");
}

/// The server's `last_error` once it holds `part`, the server `restarting` (to try again).
fn start_error(client: &mut Client, part: &str) -> String {
    eventually(TIMEOUT, &format!("`restarting` after {part:?}"), || {
        let status = client.status();
        let up = &status["backends"]["up"];
        let error = up["last_error"].as_str()?;
        (error.contains(part) && up["status"] == "restarting").then(|| error.to_string())
    })
}

/// A `protocolVersion` with a control character cannot go back in a header: the handshake
/// fails with an error that says so (no panic, no server stuck "starting"), and the
/// gateway tries again, as after any failed start, until the server answers well.
#[test]
fn a_protocol_version_no_header_can_carry_fails_the_handshake() {
    let fixed = Arc::new(AtomicBool::new(false));
    let answers_well = fixed.clone();
    let server = Scripted::start(move |seen, reply| {
        if seen.method() != "initialize" || answers_well.load(Ordering::SeqCst) {
            return false;
        }
        let answer = json!({"jsonrpc": "2.0", "id": seen.message["id"], "result": {
            "protocolVersion": "2025-06-18\u{1}", "capabilities": {"tools": {}},
            "serverInfo": {"name": "scripted", "version": "1"}}});
        reply.json("200 OK", "mcp-session-id: bad\r\n", Some(answer));
        true
    });
    let mut client = started(&server, &[]);
    let error = start_error(&mut client, "protocolVersion");
    assert!(
        error.contains(r#""2025-06-18\u{1}""#) && error.contains("MCP-Protocol-Version"),
        "{error}"
    );
    fixed.store(true, Ordering::SeqCst);
    client.wait_ready();
    assert_eq!(text(&client.call("up__who", json!({}))), "session s1");
    assert!(!client.stderr().contains("panicked"), "{}", client.stderr());
}

/// A legacy SSE server whose endpoint event names a path no request line can carry: the
/// start fails saying so, and is tried again.
#[test]
fn a_legacy_endpoint_no_request_can_go_to_fails_the_start() {
    let server = Scripted::start(|seen, reply| {
        if seen.verb != "GET" {
            return false;
        }
        reply.events();
        let _ = write!(reply.stream, "event: endpoint\ndata: /messages?a=\u{1}\n\n");
        let _ = reply.stream.flush();
        reply.hold();
        true
    });
    let mut client = started(&server, &[r#"transport = "sse""#]);
    let error = start_error(&mut client, "endpoint event");
    assert!(error.contains(r#""/messages?a=\u{1}""#), "{error}");
    assert!(!client.stderr().contains("panicked"), "{}", client.stderr());
}

/// Notifications a client floods the gateway with, each of which goes to every server,
/// wait in a short queue where a `list_changed` stands for its repeats: a call sent after
/// 50,000 of them is answered at once, not after the server was sent them all.
#[test]
fn a_flood_of_notifications_does_not_hold_up_a_call() {
    let server = Scripted::start(|_, _| false);
    let mut client = gateway(&server, &[]);
    let flood = 50_000;
    let note = json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"});
    let lines = format!("{note}\n").repeat(flood);
    client.send_bytes(lines.as_bytes());
    let started = Instant::now();
    assert_eq!(text(&client.call("up__who", json!({}))), "session s1");
    let took = started.elapsed();
    let posted = server.count(|s| s.method() == "notifications/roots/list_changed");
    assert!(posted < flood / 10, "{posted} of {flood} posted");
    assert!(took < Duration::from_secs(5), "the call took {took:?}");
}
