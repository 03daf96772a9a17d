//! Plugin tools listed under the plugin's name and called: every content kind, error
//! results and bad arguments, progress and log lines on their way to the client.

use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};

use crate::harness::{TIMEOUT, backend, call_failed, call_ok, fixture, has, setup, text};

// ---- 1. load, list, call ----

#[test]
fn plugin_tools_are_listed_under_the_plugin_name_and_called() {
    let (mut client, names) = setup()
        .file("echo.wasm", fixture("echo"))
        .plugins("[plugins.echo]\nconfig = { greeting = \"hello from the config\", answer = 42 }")
        .start_listed();
    for tool in [
        "echo", "kinds", "progress", "log", "config", "env", "read", "write", "listings", "count",
        "crash", "fail", "bad_args", "is_error", "stdout", "http",
    ] {
        assert!(
            has(&names, &format!("echo__{tool}")),
            "echo__{tool} is not listed: {names:?}"
        );
    }
    // The gateway's own tools are there too, without a prefix.
    assert!(
        has(&names, "gateway_status") && has(&names, "get_events"),
        "{names:?}"
    );

    let tools = client.tools();
    let echo = tools
        .iter()
        .find(|t| t["name"] == "echo__echo")
        .expect("echo__echo");
    assert_eq!(echo["inputSchema"]["type"], "object", "{echo}");
    assert_eq!(echo["inputSchema"]["required"], json!(["text"]), "{echo}");
    assert!(
        echo["description"].as_str().is_some_and(|d| !d.is_empty()),
        "{echo}"
    );
    let kinds = tools
        .iter()
        .find(|t| t["name"] == "echo__kinds")
        .expect("echo__kinds");
    assert_eq!(
        kinds["outputSchema"]["required"],
        json!(["kinds", "count"]),
        "{kinds}"
    );

    let result = call_ok(&mut client, "echo__echo", json!({"text": "hello, plugin"}));
    assert_eq!(text(&result), "hello, plugin");
    assert_eq!(
        result["content"].as_array().map(Vec::len),
        Some(1),
        "{result}"
    );

    // The plugin's config table, numbers kept as text.
    assert_eq!(
        text(&call_ok(
            &mut client,
            "echo__config",
            json!({"key": "greeting"})
        )),
        "hello from the config"
    );
    assert_eq!(
        text(&call_ok(
            &mut client,
            "echo__config",
            json!({"key": "answer"})
        )),
        "42"
    );
    assert_eq!(
        text(&call_ok(
            &mut client,
            "echo__config",
            json!({"key": "nothing"})
        )),
        "unset"
    );

    let status = backend(&mut client, "echo");
    assert_eq!(status["kind"], "wasm", "{status}");
    assert_eq!(status["status"], "ready", "{status}");
    assert_eq!(status["tool_count"].as_u64(), Some(18), "{status}");
    assert_eq!(status["limits"]["calls_at_once"], 32, "{status}");
}

#[test]
fn the_benchmarks_minimal_plugin_serves_its_one_tool() {
    let (mut client, names) = setup()
        .file("minimal.wasm", fixture("minimal"))
        .start_listed();
    let own: Vec<_> = names
        .iter()
        .filter(|n| n.starts_with("minimal__"))
        .collect();
    assert_eq!(own, ["minimal__echo"], "{names:?}");
    for text_in in ["hello, plugin", "", "ünïcode ✓ \"quoted\"\n"] {
        assert_eq!(
            text(&call_ok(
                &mut client,
                "minimal__echo",
                json!({"text": text_in})
            )),
            text_in
        );
    }
    // Its schema is strict: the host refuses what the plugin would not accept.
    client.call_invalid("minimal__echo", json!({"text": "x", "extra": 1}));
}

#[test]
fn every_content_kind_becomes_mcp_content_with_structured_content() {
    let (mut client, _) = setup().file("echo.wasm", fixture("echo")).start_listed();
    let result = call_ok(&mut client, "echo__kinds", json!({}));
    let assets = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plugins/echo/assets");
    let png = BASE64.encode(std::fs::read(assets.join("pixel.png")).expect("pixel.png"));
    let wav = BASE64.encode(std::fs::read(assets.join("beep.wav")).expect("beep.wav"));
    let expected = json!([
        {"type": "text", "text": "text item"},
        {"type": "image", "data": png, "mimeType": "image/png"},
        {"type": "audio", "data": wav, "mimeType": "audio/wav"},
        {"type": "resource", "resource": {"uri": "test://echo/text", "mimeType": "text/plain", "text": "resource text"}},
        {"type": "resource", "resource": {"uri": "test://echo/blob", "mimeType": "application/octet-stream",
                                           "blob": BASE64.encode([0u8, 1, 2, 3, 255])}},
    ]);
    let content = result["content"].as_array().expect("content array");
    assert_eq!(content.len(), 5, "{result}");
    for (got, want) in content.iter().zip(expected.as_array().unwrap()) {
        // Extra fields (annotations, _meta) may come; the ones above must be exact.
        for (key, value) in want.as_object().unwrap() {
            assert_eq!(&got[key], value, "content item {got} vs {want}");
        }
    }
    // The binary items decode to the bytes the plugin sent.
    assert!(
        BASE64
            .decode(content[1]["data"].as_str().unwrap())
            .is_ok_and(|b| b.starts_with(b"\x89PNG"))
    );
    assert!(
        BASE64
            .decode(content[2]["data"].as_str().unwrap())
            .is_ok_and(|b| b.starts_with(b"RIFF"))
    );
    assert_eq!(
        result["structuredContent"],
        json!({"kinds": ["text", "image", "audio", "resource-text", "resource-blob"], "count": 5}),
        "{result}"
    );
}

#[test]
fn failures_and_bad_arguments_are_error_results() {
    let (mut client, _) = setup().file("echo.wasm", fixture("echo")).start_listed();

    // call-error::failed: a result the model reads.
    let message = call_failed(&mut client, "echo__fail", json!({}));
    assert!(message.contains("fail: requested failure"), "{message}");
    // A result the plugin itself marked as an error.
    let message = call_failed(&mut client, "echo__is_error", json!({}));
    assert_eq!(message, "is_error: reported error");

    // call-error::invalid-arguments: worded as the gateway's own check, with the name the
    // client called; a tool error result at 2025-11-25 (-32602 before: see
    // `invalid_arguments_are_error_32602_before_2025_11_25`).
    let message = client.call_invalid("echo__bad_args", json!({}));
    assert!(message.contains("bad_args: rejected"), "{message}");

    // Arguments that break the declared schema never reach the plugin.
    let calls_before = backend(&mut client, "echo")["calls"]
        .as_u64()
        .expect("calls");
    for (tool, arguments) in [
        ("echo__echo", json!({})),          // required `text` missing
        ("echo__echo", json!({"text": 5})), // wrong type
        ("echo__echo", json!({"text": "a", "extra": true})), // additionalProperties: false
        ("echo__progress", json!({"steps": -1})), // below minimum
        ("echo__progress", json!({"steps": "3"})), // a string for an integer
    ] {
        client.call_invalid(tool, arguments);
    }
    let result = client.result(
        "tools/call",
        json!({"name": "echo__echo", "arguments": "text"}),
    );
    assert_eq!(
        result["content"][0]["text"],
        "Invalid arguments for tool echo__echo: `arguments` must be an object",
        "{result}"
    );
    let calls_after = backend(&mut client, "echo")["calls"]
        .as_u64()
        .expect("calls");
    assert_eq!(
        calls_after, calls_before,
        "a call with invalid arguments reached the plugin"
    );

    // A tool the plugin does not have.
    let error = client.call_error("echo__nope", json!({}));
    assert_eq!(error["code"], -32602, "{error}");

    // The error results are recorded as failed calls.
    let called = client.events(json!({"event_type": "tool.called", "status": "failure"}));
    assert!(
        called.iter().any(|e| e["tool"] == "echo__fail"),
        "{called:?}"
    );
}

/// Before 2025-11-25, MCP answered a tool's invalid arguments with JSON-RPC error -32602.
#[test]
fn invalid_arguments_are_error_32602_before_2025_11_25() {
    let (mut client, _) = setup()
        .file("echo.wasm", fixture("echo"))
        .version("2025-06-18")
        .start_listed();
    for (tool, arguments, why) in [
        (
            "echo__echo",
            json!({"text": 5}),
            "/text: 5 is not of type \"string\"",
        ),
        ("echo__bad_args", json!({}), "bad_args: rejected"),
        ("get_events", json!({"since": "yesterday"}), "since: "),
    ] {
        let error = client.call_error(tool, arguments);
        assert_eq!(error["code"], -32602, "{error}");
        let message = error["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with(&format!("Invalid arguments for tool {tool}: "))
                && message.contains(why),
            "{message}"
        );
        // Whether the schema or the plugin refused them, the error names the plugin.
        if tool.starts_with("echo__") {
            assert_eq!(error["data"]["server"], "echo", "{error}");
        }
    }
}

// ---- 2. progress ----

#[test]
fn plugin_progress_reaches_the_client_with_its_own_token() {
    let (mut client, _) = setup().file("echo.wasm", fixture("echo")).start_listed();
    for token in [json!("progress-token-1"), json!(7)] {
        let id = client.send_request(
            "tools/call",
            json!({"name": "echo__progress", "arguments": {"steps": 3}, "_meta": {"progressToken": token}}),
        );
        // The notifications come before the answer (none may follow it).
        let (before, response) = client.until_response(&id, TIMEOUT);
        let notes: Vec<Value> = before
            .into_iter()
            .filter(|m| m["method"] == "notifications/progress")
            .collect();
        assert_eq!(text(&response["result"]), "done 3", "{response}");
        assert_eq!(notes.len(), 3, "progress before the answer: {notes:?}");
        for (note, step) in notes.iter().zip(1..=3) {
            let params = &note["params"];
            assert_eq!(params["progressToken"], token, "{note}");
            assert_eq!(params["progress"].as_f64(), Some(f64::from(step)), "{note}");
            assert_eq!(params["total"].as_f64(), Some(3.0), "{note}");
            assert_eq!(params["message"], format!("step {step} of 3"), "{note}");
        }
    }
    // Without a token, no progress is sent.
    let result = call_ok(&mut client, "echo__progress", json!({"steps": 2}));
    assert_eq!(text(&result), "done 2");
    client.result("ping", json!({}));
    assert!(
        client
            .drain_notifications("notifications/progress")
            .is_empty()
    );
}

#[test]
fn plugin_log_lines_reach_a_client_that_set_a_level() {
    let (mut client, _) = setup().file("echo.wasm", fixture("echo")).start_listed();
    let log = json!({"message": "from the plugin"});
    // Before logging/setLevel: the gateway's log only.
    call_ok(&mut client, "echo__log", log.clone());
    client.result("ping", json!({}));
    assert!(
        client
            .drain_notifications("notifications/message")
            .is_empty()
    );
    // At warning: the warning and error lines, each named after the plugin.
    client.result("logging/setLevel", json!({"level": "warning"}));
    call_ok(&mut client, "echo__log", log);
    client.result("ping", json!({}));
    let messages = client.drain_notifications("notifications/message");
    let levels: Vec<&Value> = messages.iter().map(|m| &m["params"]["level"]).collect();
    assert_eq!(levels, [&json!("warning"), &json!("error")], "{messages:?}");
    for message in &messages {
        assert_eq!(message["params"]["logger"], "echo", "{message}");
        assert_eq!(message["params"]["data"], "from the plugin", "{message}");
    }
    // Control characters stay in the client's message, and are escaped in the gateway's
    // own log, where a line break could pass for a line of the gateway's and a carriage
    // return or backspace rewrite one on a terminal; so in what the plugin prints.
    let forged = "first\nFORGED gateway line\rover\u{8}";
    call_ok(&mut client, "echo__log", json!({ "message": forged }));
    client.result("ping", json!({}));
    let messages = client.drain_notifications("notifications/message");
    assert_eq!(messages[0]["params"]["data"], forged, "{messages:?}");
    call_ok(
        &mut client,
        "echo__stdout",
        json!({"text": "printed\rover\u{8}"}),
    );
    let stderr = client.stderr();
    assert!(
        stderr.contains("first\\nFORGED gateway line\\rover\\u{8}"),
        "{stderr}"
    );
    assert!(stderr.contains("printed\\rover\\u{8}"), "{stderr}");
    assert!(!stderr.lines().any(|l| l.starts_with("FORGED")), "{stderr}");
    assert!(!stderr.contains(['\r', '\u{8}']), "{stderr}");
}
