//! Behaviour the README promises that no other test pinned down: cancellation both ways,
//! signals and the kill that follows, restart backoff, parallel starts, fields passed
//! through, list changes and pagination of every list, a renamed plugin, pending events,
//! and a call cut short by a config edit. Order and outcome are asserted, not timings.

use std::time::Duration;

use serde_json::{Value, json};

use crate::faults::{assert_gone, server_pids};
use crate::harness::{TIMEOUT, config, eventually, text};

/// The server learns of a call's end: the client's cancel and the gateway's timeout each
/// reach it as `notifications/cancelled` for the request it got.
#[test]
fn cancels_and_timeouts_reach_the_server() {
    let mut client = config()
        .example_with("ex", &[], &["timeout = \"1s\""])
        .start_initialized();
    client.send(
        &json!({"jsonrpc": "2.0", "id": "c-1", "method": "tools/call",
                         "params": {"name": "ex__slow", "arguments": {"ms": 5000}}}),
    );
    std::thread::sleep(Duration::from_millis(300));
    client.notify(
        "notifications/cancelled",
        json!({"requestId": "c-1", "reason": "user"}),
    );
    eventually(TIMEOUT, "the server to hear of the cancel", || {
        let log = client.stderr();
        log.contains("received notifications/cancelled")
            .then_some(())
    });
    let error = client.error("tools/call", json!({"name": "ex__hang", "arguments": {}}));
    assert_eq!(error["code"], -32001, "{error}");
    eventually(TIMEOUT, "the server to hear of the timeout", || {
        let log = client.stderr();
        (log.matches("received notifications/cancelled").count() == 2).then_some(())
    });
    assert!(
        client
            .try_response(&json!("c-1"), Duration::from_millis(200))
            .is_none()
    );
}

/// A server that gives up on its own request to the client (sampling) has the client told,
/// under the id the client knows the request by.
#[test]
fn a_servers_cancel_reaches_the_client() {
    let mut client = config().example("ex", &[]).start_initialized();
    let id = client.send_request(
        "tools/call",
        json!({"name": "ex__sample", "arguments": {"prompt": "p", "cancel_after_ms": 300}}),
    );
    let asked = client.next_client_request(TIMEOUT);
    assert_eq!(asked["method"], "sampling/createMessage");
    let cancelled = client.next_notification("notifications/cancelled", TIMEOUT);
    assert_eq!(cancelled["params"]["requestId"], asked["id"], "{cancelled}");
    assert_eq!(
        text(&client.wait_response(&id, TIMEOUT)["result"]),
        "gave up"
    );
}

/// SIGINT ends the gateway as SIGTERM does, with no server left behind.
#[test]
fn sigint_exits_and_leaves_no_server_behind() {
    let mut client = config().example("one", &[]).start_initialized();
    let pids = server_pids(&mut client, &["one"]);
    client.signal(libc::SIGINT);
    let status = client
        .wait_exit(Duration::from_secs(15))
        .expect("exits on SIGINT");
    assert!(status.code().is_some(), "exit status {status}");
    assert_gone(&pids);
}

/// A server that ignores its stdin closing and SIGTERM is killed (SIGKILL) after the grace
/// periods, and the gateway exits.
#[test]
fn a_server_that_ignores_sigterm_is_killed() {
    let mut client = config()
        .example("stubborn", &["--ignore-term"])
        .start_initialized();
    let pids = server_pids(&mut client, &["stubborn"]);
    client.close_stdin();
    let status = client
        .wait_exit(Duration::from_secs(30))
        .expect("the gateway exits");
    assert!(status.success(), "exit status {status}");
    assert_gone(&pids);
    let log = client.stderr();
    let term = log.find("sending SIGTERM").expect("SIGTERM was sent");
    let kill = log.find("sending SIGKILL").expect("SIGKILL was sent");
    assert!(term < kill, "{log}");
}

fn timestamps(events: &[Value]) -> Vec<chrono::DateTime<chrono::FixedOffset>> {
    let mut times: Vec<_> = events
        .iter()
        .map(|e| chrono::DateTime::parse_from_rfc3339(e["timestamp"].as_str().unwrap()).unwrap())
        .collect();
    times.sort();
    times
}

/// Restarts after a crash wait longer each time (100 ms, 200 ms, 400 ms, ...), then the
/// server is given up on after `max_restarts`.
#[test]
fn restarts_back_off() {
    let mut client = config()
        .gateway("max_restarts = 4")
        .example("crashy", &["--exit-at-start"])
        .start();
    client.initialize();
    let failed = eventually(TIMEOUT, "the server to be given up on", || {
        let failed = client.events(json!({"event_type": "backend.failed"}));
        (!failed.is_empty()).then_some(failed)
    });
    assert_eq!(failed[0]["source"], "crashy");
    let starts = timestamps(&client.events(json!({"event_type": "backend.started", "limit": 100})));
    assert_eq!(starts.len(), 5, "one start and four restarts");
    let gaps: Vec<i64> = starts
        .windows(2)
        .map(|w| (w[1] - w[0]).num_milliseconds())
        .collect();
    for (gap, at_least) in gaps.iter().zip([100, 200, 400, 800]) {
        assert!(*gap >= at_least, "gaps {gaps:?}");
    }
}

/// Servers start in parallel: every slow server has started before the first is ready.
#[test]
fn servers_start_in_parallel() {
    let mut config = config();
    for name in ["a", "b", "c"] {
        config = config.example(name, &["--name", name, "--start-delay-ms", "1500"]);
    }
    let mut client = config.start_initialized();
    let started = timestamps(&client.events(json!({"event_type": "backend.started"})));
    let ready = timestamps(&client.events(json!({"event_type": "backend.ready"})));
    assert_eq!((started.len(), ready.len()), (3, 3));
    assert!(
        started[2] < ready[0],
        "started {started:?}, ready {ready:?}"
    );
}

/// What the gateway does not read of a tool passes through as the server wrote it: icons,
/// `_meta`, annotations and fields no version of MCP defines.
#[test]
fn icons_and_unknown_fields_pass_through() {
    let mut client = config().example("ex", &[]).start_initialized();
    let tools = client.tools();
    let add = tools.iter().find(|t| t["name"] == "ex__add").unwrap();
    assert_eq!(
        add["icons"],
        json!([{"src": "data:image/png;base64,iVBORw0KGgo=", "mimeType": "image/png", "sizes": ["16x16"]}])
    );
    assert_eq!(add["x-custom"], json!({"keep": true}));
    assert_eq!(add["_meta"], json!({"example/extra": 1}));
    assert_eq!(add["title"], "Add two numbers");
}

/// A server's `list_changed` for prompts and for resources: re-fetched, and the client told.
#[test]
fn prompt_and_resource_list_changes_reach_the_client() {
    let mut client = config().example("ex", &[]).start_initialized();
    client.list_all("prompts/list", "prompts");
    client.list_all("resources/list", "resources");
    client.drain_notifications("notifications/prompts/list_changed");
    client.drain_notifications("notifications/resources/list_changed");
    client.call("ex__notify_changed", json!({"what": "prompts"}));
    client.next_notification("notifications/prompts/list_changed", TIMEOUT);
    let prompts = client.list_all("prompts/list", "prompts");
    assert!(
        prompts.iter().any(|p| p["name"] == "ex__late_prompt"),
        "{prompts:?}"
    );
    client.call("ex__notify_changed", json!({"what": "resources"}));
    client.next_notification("notifications/resources/list_changed", TIMEOUT);
    let resources = client.list_all("resources/list", "resources");
    assert!(
        resources
            .iter()
            .any(|r| r["uri"] == "example://static/late"),
        "{resources:?}"
    );
}

/// Prompts, resources and templates a server pages are all discovered, and the gateway's
/// own pages of them add up to every item once.
#[test]
fn prompts_resources_and_templates_are_paginated_both_ways() {
    let mut client = config()
        .gateway("page_size = 4")
        .example("ex", &["--items", "9", "--page-size", "2"])
        .start_initialized();
    for (method, key, field, want) in [
        ("prompts/list", "prompts", "name", 10),
        ("resources/list", "resources", "uri", 11),
        (
            "resources/templates/list",
            "resourceTemplates",
            "uriTemplate",
            10,
        ),
    ] {
        let first = client.result(method, json!({}));
        assert_eq!(first[key].as_array().unwrap().len(), 4, "{method}: {first}");
        assert!(first["nextCursor"].is_string(), "{method}: {first}");
        let all = client.list_all(method, key);
        let mut seen: Vec<&str> = all.iter().map(|i| i[field].as_str().unwrap()).collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), want, "{method}: {all:?}");
    }
}

/// `get_events` with `status: pending` gives what has begun and not ended: a server still
/// starting.
#[test]
fn pending_events_are_those_not_ended() {
    let mut client = config()
        .example("slow", &["--start-delay-ms", "60000"])
        .example("fast", &["--name", "fast"])
        .start();
    client.initialize();
    let pending = eventually(TIMEOUT, "a pending start", || {
        let pending = client.events(json!({"status": "pending"}));
        pending
            .iter()
            .any(|e| e["source"] == "slow")
            .then_some(pending)
    });
    assert!(
        pending.iter().all(|e| e["status"] == "pending"),
        "{pending:?}"
    );
    eventually(TIMEOUT, "fast to be ready", || {
        let ready = client.events(json!({"event_type": "backend.ready"}));
        ready.iter().any(|e| e["source"] == "fast").then_some(())
    });
    let pending = client.events(json!({"status": "pending"}));
    assert!(
        !pending
            .iter()
            .any(|e| e["source"] == "fast" && e["event_type"] == "backend.ready")
    );
    assert!(pending.iter().any(|e| e["source"] == "slow"), "{pending:?}");
}

/// A call in flight when a config edit restarts its server ends with -32000 saying that the
/// gateway stopped the server, and the restarted server serves the next call.
#[test]
fn a_call_cut_short_by_a_config_edit_says_so() {
    let config = config().example("ex", &[]);
    let mut client = config.start_initialized();
    let id = client.send_request("tools/call", json!({"name": "ex__hang", "arguments": {}}));
    std::thread::sleep(Duration::from_millis(200));
    let path = client.config_path();
    let edited = std::fs::read_to_string(&path)
        .unwrap()
        .replace("args = []", "args = [\"--name\", \"renamed\"]");
    std::fs::write(&path, edited).unwrap();
    let response = client.wait_response(&id, TIMEOUT);
    assert_eq!(response["error"]["code"], -32000, "{response}");
    let message = response["error"]["message"].as_str().unwrap();
    assert!(message.contains("was stopped by the gateway"), "{message}");
    eventually(TIMEOUT, "the restarted server to answer", || {
        let result = client.request(
            "tools/call",
            json!({"name": "ex__echo", "arguments": {"text": "x"}}),
        );
        (result["result"]["content"][0]["text"] == "x").then_some(())
    });
}

/// A plugin file renamed: the old name's tools go, the new name's come, announced.
#[test]
fn a_renamed_plugin_file_is_served_under_its_new_name() {
    use crate::harness::{fixture, plugin_dir, setup, wait_tools};
    let (mut client, names) = setup().file("echo.wasm", fixture("echo")).start_listed();
    assert!(names.iter().any(|n| n == "echo__echo"), "{names:?}");
    let dir = plugin_dir(&client);
    std::fs::rename(dir.join("echo.wasm"), dir.join("parrot.wasm")).unwrap();
    let names = wait_tools(&mut client, "the renamed plugin", |n| {
        n.iter().any(|t| t == "parrot__echo") && !n.iter().any(|t| t == "echo__echo")
    });
    assert!(!names.iter().any(|n| n.starts_with("echo__")), "{names:?}");
    assert_eq!(
        text(&client.call("parrot__echo", json!({"text": "renamed"}))),
        "renamed"
    );
}

/// A server's own -32602 error stays a JSON-RPC error for a 2025-11-25 client, whatever its
/// wording: only the gateway's own argument check becomes a tool error result.
#[test]
fn a_servers_invalid_params_error_is_not_taken_for_the_gateways_argument_check() {
    let mut client = crate::harness::config().example("ex", &[]).start();
    client.initialize_with("2025-11-25", json!({}));
    client.wait_ready();
    let spoof = "Invalid arguments for tool ex__error: from the server";
    let response = client.request(
        "tools/call",
        json!({"name": "ex__error", "arguments": {"code": -32602, "message": spoof}}),
    );
    assert_eq!(response["error"]["code"], -32602, "{response}");
    assert_eq!(response["error"]["message"], spoof, "{response}");
    // The gateway's own check of the same tool: a tool error result at this version.
    let response = client.request(
        "tools/call",
        json!({"name": "ex__error", "arguments": {"code": "not a number"}}),
    );
    assert_eq!(response["result"]["isError"], true, "{response}");
}
