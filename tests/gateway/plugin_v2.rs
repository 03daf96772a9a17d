//! Plugins of the 0.2 world end to end: the real binary over stdio with the `v2demo`
//! fixture (tests/plugins/v2demo) beside the 0.1 `echo` one — resources, a template,
//! prompts and completions; requests to the client (elicitation, sampling, roots), their
//! bounds and their wait outside the call's limit; the store; announcements; the declared
//! instance mode; cancellation; and a result bounded as it is written.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{
    Client, LIST_CHANGED, LOAD_TIMEOUT, TestDir, fixture, setup, wait_tools, wasmgate,
};
use crate::http_client::HttpGateway;

/// A gateway with `v2demo` (and the 0.1 `echo`), `settings` in `[plugins.v2demo]`,
/// initialized with `capabilities`, its first tool list in.
fn start(settings: &str, capabilities: Value) -> Client {
    let mut client = setup()
        .file("v2demo.wasm", fixture("v2demo"))
        .file("echo.wasm", fixture("echo"))
        .plugins(&format!("[plugins.v2demo]\n{settings}"))
        .start();
    client.initialize_with("2025-11-25", capabilities);
    wait_tools(&mut client, "both plugins' tools", |names| {
        names.iter().any(|n| n == "v2demo__echo") && names.iter().any(|n| n == "echo__echo")
    });
    client
}

fn every_capability() -> Value {
    json!({"sampling": {}, "elicitation": {}, "roots": {"listChanged": true}})
}

/// The first text of a tool result, or of the response that carries one.
fn text_of(answer: &Value) -> String {
    let result = answer.get("result").unwrap_or(answer);
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {answer}"))
        .to_string()
}

#[test]
fn a_0_2_plugin_serves_resources_prompts_and_completions_beside_a_0_1_one() {
    let mut client = start("", every_capability());
    assert_eq!(
        text_of(&client.call("v2demo__echo", json!({"text": "hi"}))),
        "hi"
    );
    assert_eq!(
        text_of(&client.call("echo__echo", json!({"text": "old"}))),
        "old"
    );

    let resources = client.result("resources/list", json!({}));
    let hello = &resources["resources"][0];
    assert_eq!(hello["uri"], "demo://hello", "{resources}");
    assert_eq!(hello["title"], "Hello", "{resources}");
    let read = client.result("resources/read", json!({"uri": "demo://hello"}));
    assert_eq!(
        read["contents"][0]["text"], "Hello from a 0.2 plugin",
        "{read}"
    );

    let templates = client.result("resources/templates/list", json!({}));
    assert_eq!(
        templates["resourceTemplates"][0]["uriTemplate"], "demo://items/{id}",
        "{templates}"
    );
    let item = client.result("resources/read", json!({"uri": "demo://items/7"}));
    assert_eq!(item["contents"][0]["text"], r#"{"id":"7"}"#, "{item}");
    let missing = client.error("resources/read", json!({"uri": "demo://nothing"}));
    assert_eq!(missing["code"], -32002, "{missing}");

    let prompts = client.result("prompts/list", json!({}));
    assert_eq!(prompts["prompts"][0]["name"], "v2demo__greet", "{prompts}");
    let prompt = client.result(
        "prompts/get",
        json!({"name": "v2demo__greet", "arguments": {"name": "Ada"}}),
    );
    assert_eq!(
        prompt["messages"][0]["content"]["text"], "Please greet Ada.",
        "{prompt}"
    );
    let no_name = client.error("prompts/get", json!({"name": "v2demo__greet"}));
    assert_eq!(no_name["code"], -32602, "{no_name}");
    assert_eq!(no_name["message"], "`name` is required", "{no_name}");

    let completion = client.result(
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "v2demo__greet"},
               "argument": {"name": "name", "value": "A"}}),
    );
    assert_eq!(
        completion["completion"]["values"],
        json!(["Ada", "Alan"]),
        "{completion}"
    );

    let structured = client.call("v2demo__structured", json!({}));
    assert_eq!(
        structured["structuredContent"]["answer"], 42,
        "{structured}"
    );
    assert_eq!(structured["isError"], true, "{structured}");
}

#[test]
fn a_0_2_plugin_asks_the_client_and_its_wait_does_not_count() {
    // One second for the call; the client takes longer to answer, and the call goes on.
    let mut client = start(r#"timeout = "1s""#, every_capability());
    let id = client.send_request(
        "tools/call",
        json!({"name": "v2demo__ask", "arguments": {}}),
    );
    let asked = client.next_client_request(LOAD_TIMEOUT);
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    assert_eq!(asked["params"]["message"], "Who are you?", "{asked}");
    std::thread::sleep(Duration::from_millis(1500));
    client.respond(
        asked["id"].clone(),
        json!({"action": "accept", "content": {"name": "Ada"}}),
    );
    let answer = client.wait_response(&id, LOAD_TIMEOUT);
    assert_eq!(text_of(&answer), "Hello, Ada!");

    let id = client.send_request(
        "tools/call",
        json!({"name": "v2demo__sample", "arguments": {}}),
    );
    let asked = client.next_client_request(LOAD_TIMEOUT);
    assert_eq!(asked["method"], "sampling/createMessage", "{asked}");
    client.respond(
        asked["id"].clone(),
        json!({"role": "assistant", "model": "m", "content": {"type": "text", "text": "hi!"}}),
    );
    assert_eq!(
        text_of(&client.wait_response(&id, LOAD_TIMEOUT)),
        "model said: hi!"
    );

    let id = client.send_request(
        "tools/call",
        json!({"name": "v2demo__roots", "arguments": {}}),
    );
    let asked = client.next_client_request(LOAD_TIMEOUT);
    assert_eq!(asked["method"], "roots/list", "{asked}");
    client.respond(
        asked["id"].clone(),
        json!({"roots": [{"uri": "file:///w", "name": "w"}]}),
    );
    let roots: Value =
        serde_json::from_str(&text_of(&client.wait_response(&id, LOAD_TIMEOUT))).unwrap();
    assert_eq!(roots[0]["uri"], "file:///w");
}

#[test]
fn requests_to_the_client_are_bounded_and_need_its_capability() {
    let mut client = start("", json!({"elicitation": {}}));
    // No sampling capability: the plugin is told, and its call goes on.
    let sampled = text_of(&client.call("v2demo__sample", json!({})));
    assert!(
        sampled.starts_with("unsupported:") && sampled.contains("sampling"),
        "{sampled}"
    );
    // An oversized schema is refused before it reaches the client.
    let huge = text_of(&client.call("v2demo__ask_huge", json!({})));
    assert!(
        huge.starts_with("refused:") && huge.contains("KiB"),
        "{huge}"
    );
    // A call that asks in a loop is stopped after 32 requests.
    let id = client.send_request(
        "tools/call",
        json!({"name": "v2demo__ask_many", "arguments": {"n": 1000}}),
    );
    for _ in 0..32 {
        let asked = client.next_client_request(LOAD_TIMEOUT);
        client.respond(asked["id"].clone(), json!({"action": "decline"}));
    }
    let last = text_of(&client.wait_response(&id, LOAD_TIMEOUT));
    assert!(
        last.starts_with("refused:") && last.contains("32 times"),
        "{last}"
    );
    assert!(!client.has_buffered_client_request());
}

#[test]
fn a_0_2_plugin_keeps_notes_in_its_store_and_announces_changes() {
    let grant = r#"allow_dirs = [{ host = "{dir}/data", guest = "/data", mode = "rw" }]"#;
    let mut client = setup()
        .folder("data")
        .file("v2demo.wasm", fixture("v2demo"))
        .plugins(&format!("[plugins.v2demo]\n{grant}"))
        .start();
    client.initialize_with("2025-11-25", every_capability());
    wait_tools(&mut client, "the plugin's tools", |names| {
        names.iter().any(|n| n == "v2demo__echo")
    });
    // It declares `session`: its global counter lives on between this client's calls,
    // with no instance mode in the config.
    assert_eq!(text_of(&client.call("v2demo__count", json!({}))), "1");
    assert_eq!(text_of(&client.call("v2demo__count", json!({}))), "2");
    let kept = text_of(&client.call("v2demo__note_add", json!({"key": "k", "text": "remember"})));
    assert_eq!(kept, "kept");
    // Another instance (a call of its own) reads what the first one kept.
    assert_eq!(
        text_of(&client.call("v2demo__note_get", json!({"key": "k"}))),
        "remember"
    );

    client.result("resources/subscribe", json!({"uri": "demo://hello"}));
    assert_eq!(
        text_of(&client.call("v2demo__announce", json!({}))),
        "announced"
    );
    let updated = client.next_notification("notifications/resources/updated", LOAD_TIMEOUT);
    assert_eq!(updated["params"]["uri"], "demo://hello", "{updated}");
    client.next_notification(LIST_CHANGED, LOAD_TIMEOUT);
    wait_tools(&mut client, "the announced tool", |names| {
        names.iter().any(|n| n == "v2demo__announced")
    });
}

#[test]
fn a_result_is_bounded_as_it_is_written() {
    let mut client = start("", every_capability());
    let answer = client.call("v2demo__flood", json!({}));
    assert_eq!(answer["isError"], true, "{answer}");
    assert_eq!(text_of(&answer), "kept 16 items; the next refused: true");
}

#[test]
fn a_cancelled_0_2_call_sees_its_cancellation() {
    let mut client = start("", every_capability());
    let id = client.send_request(
        "tools/call",
        json!({"name": "v2demo__wait_for_cancel", "arguments": {}}),
    );
    // Cancelled once the plugin is in its loop, not before it started.
    crate::harness::eventually(LOAD_TIMEOUT, "the plugin to start waiting", || {
        client
            .stderr()
            .contains("waiting for the cancellation")
            .then_some(())
    });
    client.notify(
        "notifications/cancelled",
        json!({"requestId": id, "reason": "enough"}),
    );
    crate::harness::eventually(
        LOAD_TIMEOUT,
        "the plugin to log that it saw the cancel",
        || {
            client
                .stderr()
                .contains("saw the cancellation")
                .then_some(())
        },
    );
    // The gateway keeps serving.
    assert_eq!(
        text_of(&client.call("v2demo__echo", json!({"text": "still"}))),
        "still"
    );
}

/// The official Python SDK's `Client` in `mode` answers the plugin's requests, over stdio
/// and HTTP (tests/gateway/fixtures/plugin_ask_client.py).
fn python_client_answers(mode: &str) {
    let Some(python) = crate::third_party::sdk_python() else {
        return;
    };
    let dir = TestDir::new("plugin-v2-sdk");
    let config = setup()
        .file("v2demo.wasm", fixture("v2demo"))
        .plugins("[plugins.v2demo]\n");
    config.write(&dir.path);
    let text = config.render(&dir.path);
    let path = dir.write("stdio.toml", &text);
    let wasmgate = wasmgate();
    let over_stdio = crate::third_party::run_fixture_script(
        &python,
        "plugin_ask_client.py",
        &[
            mode,
            "stdio",
            wasmgate.to_str().unwrap(),
            path.to_str().unwrap(),
        ],
        &[],
    );
    let gateway = HttpGateway::start_in(dir, &text, &[]);
    let url = gateway.url("/mcp");
    let over_http = crate::third_party::run_fixture_script(
        &python,
        "plugin_ask_client.py",
        &[mode, "http", &url],
        &[],
    );
    for seen in [over_stdio, over_http] {
        assert_eq!(seen["ask"], format!("Hello, Ada-{mode}!"), "{seen}");
        assert_eq!(seen["sample"], format!("model said: hi-{mode}"), "{seen}");
        assert_eq!(seen["roots"][0]["uri"], "file:///work", "{seen}");
        assert_eq!(seen["read"], "Hello from a 0.2 plugin", "{seen}");
        assert_eq!(seen["prompt"], "Please greet Grace.", "{seen}");
        assert_eq!(
            seen["asked"],
            json!(["elicitation", "sampling", "roots"]),
            "{seen}"
        );
    }
}

#[test]
fn the_python_sdk_answers_a_plugin_in_the_session_era() {
    python_client_answers("legacy");
}

#[test]
fn the_python_sdk_answers_a_plugin_in_the_stateless_era() {
    python_client_answers("2026-07-28");
}

/// Replaces `path` with `bytes` as build tools do (a new file renamed over the old).
fn replace(path: &std::path::Path, bytes: &[u8]) {
    let partial = path.with_extension("wasm.partial");
    std::fs::write(&partial, bytes).expect("write the new version");
    std::fs::rename(&partial, path).expect("rename it over the old one");
}

#[test]
fn a_0_1_and_a_0_2_plugin_reload_under_calls_and_lose_none() {
    const RELOADS: usize = 20;
    let variants = |name: &str| {
        let a = fixture(name);
        let b = crate::custom_section::with_custom_section(&a, "wasmgate-test-variant", b"b");
        [a, b]
    };
    let plugins = [("echo", variants("echo")), ("v2demo", variants("v2demo"))];
    let mut client = start("", every_capability());
    let status = client.status();
    assert_eq!(status["backends"]["echo"]["world"], "0.1.0", "{status}");
    assert_eq!(status["backends"]["v2demo"]["world"], "0.2.0", "{status}");
    assert_eq!(
        status["backends"]["v2demo"]["declared_instance"], "session",
        "{status}"
    );
    let folder = crate::harness::plugin_dir(&client);
    let mut calls = 0;
    let mut failures = Vec::new();
    for reload in 1..=RELOADS {
        let (name, bytes) = &plugins[reload % 2];
        let digest = crate::harness::sha256_hex(&bytes[(reload / 2) % 2]);
        replace(
            &folder.join(format!("{name}.wasm")),
            &bytes[(reload / 2) % 2],
        );
        // Calls to both keep going, several in flight, until the new version serves.
        let deadline = std::time::Instant::now() + LOAD_TIMEOUT;
        loop {
            let sent: Vec<(Value, String)> = (0..4)
                .map(|k| {
                    let word = format!("call-{reload}-{calls}-{k}");
                    let tool = ["echo__echo", "v2demo__echo"][k % 2];
                    let id = client.send_request(
                        "tools/call",
                        json!({"name": tool, "arguments": {"text": word}}),
                    );
                    (id, word)
                })
                .collect();
            for (id, word) in sent {
                calls += 1;
                let response = client.wait_response(&id, LOAD_TIMEOUT);
                if response["result"]["isError"] == true || text_of(&response) != word {
                    failures.push(response);
                }
            }
            if crate::harness::backend(&mut client, name)["digest"] == digest.as_str() {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "reload {reload} of {name} not served"
            );
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {calls} calls failed during the reloads, the first: {}",
        failures.len(),
        failures[0]
    );
}

#[test]
fn calls_waiting_for_their_clients_never_hold_every_turn() {
    // Two calls at once: one of them may wait for its client, the other turn stays free.
    let settings = "calls_at_once = 2\nconfig = { declare = \"none\" }";
    let mut client = start(settings, every_capability());
    let first = client.send_request(
        "tools/call",
        json!({"name": "v2demo__ask", "arguments": {}}),
    );
    let asked = client.next_client_request(LOAD_TIMEOUT);
    let second = text_of(&client.call("v2demo__ask", json!({})));
    assert!(
        second.starts_with("refused:") && second.contains("wait for their clients"),
        "{second}"
    );
    assert_eq!(
        text_of(&client.call("v2demo__echo", json!({"text": "served"}))),
        "served"
    );
    client.respond(
        asked["id"].clone(),
        json!({"action": "accept", "content": {"name": "Bo"}}),
    );
    assert_eq!(
        text_of(&client.wait_response(&first, LOAD_TIMEOUT)),
        "Hello, Bo!"
    );
}

#[test]
fn a_declared_shared_instance_needs_the_operators_word() {
    let mut client = start("config = { declare = \"shared\" }", every_capability());
    let status = client.status();
    assert_eq!(
        status["backends"]["v2demo"]["declared_instance"], "shared",
        "{status}"
    );
    assert_eq!(
        status["backends"]["v2demo"]["instance"], "session",
        "{status}"
    );
    assert!(
        client.stderr().contains("declares instance \"shared\""),
        "{}",
        client.stderr()
    );

    let settings = "instance = \"shared\"\nconfig = { declare = \"shared\" }";
    let mut client = start(settings, every_capability());
    let status = client.status();
    assert_eq!(
        status["backends"]["v2demo"]["instance"], "shared",
        "{status}"
    );
}

#[test]
fn inspect_shows_what_a_0_2_plugin_serves_and_declares() {
    let output = std::process::Command::new(wasmgate())
        .args(["plugin", "inspect"])
        .arg(crate::harness::fixture_path("v2demo"))
        .output()
        .expect("run plugin inspect");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for line in [
        "world:   wasmgate:plugin/plugin@0.2.0",
        "instance: declares \"session\"",
        "wasmgate:plugin/client@0.2.0",
        "resources (1):",
        "  demo://hello  A greeting.",
        "resource templates (1):",
        "  demo://items/{id}  An item by id.",
        "prompts (1):",
        "  greet  Greets `name`.",
        "completions: yes",
    ] {
        assert!(text.contains(line), "no {line:?} in:\n{text}");
    }
}

#[test]
fn plugin_call_answers_an_elicitation_from_the_command_line() {
    let dir = TestDir::new("plugin-call-answer");
    let answer = dir.write(
        "answer.json",
        r#"{"action": "accept", "content": {"name": "File"}}"#,
    );
    let plugin = crate::harness::fixture_path("v2demo");
    let run = |extra: &[&str]| {
        let output = std::process::Command::new(wasmgate())
            .args(["plugin", "call"])
            .arg(&plugin)
            .arg("ask")
            .args(extra)
            .env("XDG_DATA_HOME", dir.join("store"))
            .output()
            .expect("run plugin call");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        (output.status.code(), stdout, stderr)
    };
    let (code, stdout, stderr) = run(&[
        "--answer",
        r#"{"action": "accept", "content": {"name": "Ada"}}"#,
    ]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("Hello, Ada!"), "{stdout}");
    assert!(stderr.contains("asked: Who are you?"), "{stderr}");
    let from_file = format!("@{}", answer.display());
    let (_, stdout, _) = run(&["--answer", &from_file]);
    assert!(stdout.contains("Hello, File!"), "{stdout}");
    let (_, stdout, _) = run(&[]);
    assert!(stdout.contains("unsupported:"), "{stdout}");
    let (code, _, stderr) = run(&["--answer", r#"{"name": "no action"}"#]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("must be an elicitation result"), "{stderr}");
}
