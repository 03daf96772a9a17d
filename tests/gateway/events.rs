//! The event log: `get_events` and its filters, and the JSON-lines file.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{config, eventually};

#[test]
fn tool_calls_are_recorded_with_tool_server_duration_and_status() {
    let mut client = config().example("ex", &[]).start_initialized();
    client.call("ex__echo", json!({"text": "hi"}));
    client.call("ex__fail", json!({}));
    client.call_error("ex__error", json!({"code": -32099}));

    let calls = client.events(json!({"event_type": "tool.called"}));
    assert_eq!(calls.len(), 3, "{calls:?}");
    // Newest first.
    let tools: Vec<&str> = calls.iter().map(|e| e["tool"].as_str().unwrap()).collect();
    assert_eq!(tools, ["ex__error", "ex__fail", "ex__echo"]);
    for event in &calls {
        assert_eq!(event["event_type"], "tool.called");
        assert_eq!(event["server"], "ex", "{event}");
        assert!(
            event["duration_ms"].as_f64().is_some_and(|d| d >= 0.0),
            "{event}"
        );
        assert!(
            event["trace_id"].as_str().is_some_and(|t| !t.is_empty()),
            "{event}"
        );
        assert!(chrono_like(&event["timestamp"]), "{event}");
    }
    assert_eq!(calls[2]["status"], "success");
    assert_eq!(calls[1]["status"], "failure");
    assert_eq!(calls[0]["status"], "failure");
    assert!(
        calls[1]["error"]
            .as_str()
            .is_some_and(|e| e.contains("always fails")),
        "{}",
        calls[1]
    );
}

fn chrono_like(value: &Value) -> bool {
    value
        .as_str()
        .is_some_and(|t| t.len() >= 20 && t.as_bytes()[4] == b'-' && t.contains('T'))
}

#[test]
fn filters_limit_trace_id_and_since() {
    let mut client = config().example("ex", &[]).start_initialized();
    for i in 0..3 {
        client.call("ex__echo", json!({"text": format!("{i}")}));
    }
    client.call("ex__fail", json!({}));

    let failures = client.events(json!({"status": "failure", "event_type": "tool.called"}));
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0]["tool"], "ex__fail");
    let successes = client.events(json!({"status": "success", "event_type": "tool.called"}));
    assert_eq!(successes.len(), 3, "{successes:?}");

    let one = client.events(json!({"limit": 1}));
    assert_eq!(one.len(), 1);
    let two = client.events(json!({"event_type": "tool.called", "limit": 2}));
    assert_eq!(two.len(), 2);

    let all = client.events(json!({}));
    assert!(
        all.iter().any(|e| e["event_type"] == "gateway.started"),
        "{all:?}"
    );
    assert!(
        all.iter()
            .any(|e| e["event_type"] == "backend.ready" && e["source"] == "ex"),
        "{all:?}"
    );

    let trace = successes[1]["trace_id"].as_str().unwrap().to_string();
    let traced = client.events(json!({"trace_id": trace}));
    assert!(!traced.is_empty());
    assert!(
        traced.iter().all(|e| e["trace_id"] == trace.as_str()),
        "{traced:?}"
    );
    assert!(
        traced.iter().any(
            |e| e["event_type"] == "tool.called" && e["timestamp"] == successes[1]["timestamp"]
        )
    );

    let future = client.events(json!({"since": "2999-01-01T00:00:00Z"}));
    assert!(future.is_empty(), "{future:?}");
    let past = client.events(json!({"since": "2000-01-01T00:00:00Z", "event_type": "tool.called"}));
    assert_eq!(past.len(), 4);

    let message = client.call_invalid("get_events", json!({"since": "yesterday"}));
    assert!(
        message.contains("since: \"yesterday\" is not an RFC 3339 time"),
        "{message}"
    );
    client.call_invalid("get_events", json!({"status": "maybe"}));
    client.call_invalid("get_events", json!({"limit": 0}));
    // A misspelt filter is refused, not ignored (which would return every event).
    let message = client.call_invalid("get_events", json!({"type": "tool.called"}));
    assert!(message.contains("type"), "{message}");
}

#[test]
fn events_file_gets_json_lines() {
    let mut client = config()
        .gateway(r#"events = "{dir}/events.jsonl""#)
        .example("ex", &[])
        .start_initialized();
    client.call("ex__echo", json!({"text": "to the file"}));
    let path = client.dir.join("events.jsonl");
    let lines = eventually(
        Duration::from_secs(5),
        "tool.called in the events file",
        || {
            let text = std::fs::read_to_string(&path).ok()?;
            let lines: Vec<Value> = text
                .lines()
                .map(|l| {
                    serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}"))
                })
                .collect();
            lines
                .iter()
                .any(|e| e["event_type"] == "tool.called")
                .then_some(lines)
        },
    );
    assert!(
        lines.iter().any(|e| e["event_type"] == "gateway.started"),
        "{lines:?}"
    );
    let call = lines
        .iter()
        .find(|e| e["event_type"] == "tool.called")
        .unwrap();
    assert_eq!(call["tool"], "ex__echo");
    assert_eq!(call["server"], "ex");
    assert_eq!(call["status"], "success");
    // The same event as get_events reports.
    let listed = client.events(json!({"event_type": "tool.called"}));
    assert_eq!(listed[0]["trace_id"], call["trace_id"]);
}

/// Replicas sharing one config append to one events file, at a high rate: every line is
/// one whole record (none torn, none blank) naming the replica that wrote it, and the file
/// is created readable by its owner only.
#[test]
fn replicas_appending_to_one_events_file_keep_every_line_whole() {
    use std::os::unix::fs::PermissionsExt;
    const REPLICAS: usize = 4;
    const CALLS: usize = 1500;
    let shared = crate::harness::TestDir::new("shared-events");
    let path = shared.join("events.jsonl");
    let line = format!(
        "events = {}",
        crate::harness::toml_str(path.to_str().unwrap())
    );
    let mut replicas: Vec<_> = (0..REPLICAS)
        .map(|_| {
            config()
                .gateway(&line)
                .example("ex", &[])
                .start_initialized()
        })
        .collect();
    std::thread::scope(|scope| {
        for client in &mut replicas {
            scope.spawn(move || {
                // Sent ahead of their answers, so that the calls (and their events) come
                // as fast as the gateway takes them.
                let ids: Vec<Value> = (0..CALLS)
                    .map(|i| {
                        let (tool, arguments) = match i % 3 {
                            0 => ("ex__fail", json!({})),
                            _ => ("ex__echo", json!({"text": "x".repeat(i % 500)})),
                        };
                        client.send_request(
                            "tools/call",
                            json!({"name": tool, "arguments": arguments}),
                        )
                    })
                    .collect();
                for id in &ids {
                    client.wait_response(id, crate::harness::TIMEOUT);
                }
            });
        }
    });
    let text = std::fs::read_to_string(&path).unwrap();
    let mut calls = 0;
    let mut names = std::collections::HashSet::new();
    for line in text.lines() {
        let event: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("a torn or blank line ({e}): {line:?}"));
        let replica = event["replica"]
            .as_str()
            .unwrap_or_else(|| panic!("no replica: {line}"));
        names.insert(replica.to_owned());
        calls += usize::from(event["event_type"] == "tool.called");
    }
    assert_eq!(calls, REPLICAS * CALLS);
    assert_eq!(names.len(), REPLICAS, "{names:?}");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the events file is created {mode:o}");
}
