//! Real MCP servers from the package registries, behind the gateway: the Python time
//! server (`pip install mcp-server-time`) and the reference "everything" server
//! (`npm install @modelcontextprotocol/server-everything`, its bin in `WASMGATE_EVERYTHING`).
//! Missing ones fail the test under CI and are skipped elsewhere, with a note on stderr.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{Client, TIMEOUT, config, is_executable, on_path, text};

/// The server's command, or `None` after reporting the skip; under CI, a missing one fails.
pub(crate) fn require(what: &str, found: Option<PathBuf>, how: &str) -> Option<PathBuf> {
    if found.is_some() {
        return found;
    }
    let why = format!("{what} is not installed ({how})");
    if std::env::var_os("CI").is_some() {
        panic!("{why}; CI must install it");
    }
    eprintln!("skipped: {why}");
    None
}

pub(crate) fn time_server() -> Option<PathBuf> {
    let found = std::env::var_os("WASMGATE_TIME_SERVER")
        .map(PathBuf::from)
        .filter(|p| is_executable(p))
        .or_else(|| on_path("mcp-server-time"));
    require("mcp-server-time", found, "pip install mcp-server-time")
}

pub(crate) fn everything_server() -> Option<PathBuf> {
    let found = match std::env::var_os("WASMGATE_EVERYTHING") {
        Some(path) => Some(PathBuf::from(path)).filter(|p| is_executable(p)),
        None => on_path("mcp-server-everything"),
    };
    require(
        "mcp-server-everything",
        found,
        "npm install --prefix DIR @modelcontextprotocol/server-everything, then WASMGATE_EVERYTHING=DIR/node_modules/.bin/mcp-server-everything",
    )
}

#[test]
fn time_server_through_the_gateway() {
    let Some(command) = time_server() else { return };
    let mut client = config()
        .gateway(r#"startup_timeout = "30s""#)
        .server(
            "time",
            command.to_str().unwrap(),
            &["--local-timezone", "UTC"],
            &[],
        )
        .start_initialized();
    let names = client.tool_names();
    assert!(
        names.contains(&"time__get_current_time".to_string()),
        "{names:?}"
    );
    assert!(
        names.contains(&"time__convert_time".to_string()),
        "{names:?}"
    );
    let result = client.call("time__get_current_time", json!({"timezone": "UTC"}));
    assert_ne!(result["isError"], true, "{result}");
    assert_eq!(result["structuredContent"]["timezone"], "UTC", "{result}");
    assert!(text(&result).contains("UTC"), "{result}");
    // The gateway checks the required timezone.
    let message = client.call_invalid("time__get_current_time", json!({}));
    assert!(message.contains("timezone"), "{message}");
}

fn everything() -> Option<Client> {
    let command = everything_server()?;
    Some(
        config()
            .gateway(r#"startup_timeout = "30s""#)
            .server("every", command.to_str().unwrap(), &["stdio"], &[])
            .start_initialized(),
    )
}

/// Waits until `tool` is listed: the server registers some tools only after it saw
/// the gateway's capabilities, and announces them with list_changed.
pub(crate) fn wait_for_tool(client: &mut Client, tool: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !client.tool_names().iter().any(|n| n == tool) {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "{tool} never appeared: {:?}",
            client.tool_names()
        );
        client.try_notification(
            "notifications/tools/list_changed",
            left.min(Duration::from_millis(500)),
        );
    }
}

#[test]
fn everything_server_tools_resources_prompts() {
    let Some(mut client) = everything() else {
        return;
    };
    let names = client.tool_names();
    for tool in [
        "every__echo",
        "every__get-sum",
        "every__get-structured-content",
    ] {
        assert!(
            names.contains(&tool.to_string()),
            "{tool} missing: {names:?}"
        );
    }
    let result = client.call("every__echo", json!({"message": "through wasmgate"}));
    assert_eq!(text(&result), "Echo: through wasmgate");
    let sum = client.call("every__get-sum", json!({"a": 2, "b": 40}));
    assert!(text(&sum).contains("42"), "{sum}");
    let structured = client.call(
        "every__get-structured-content",
        json!({"location": "Chicago"}),
    );
    assert!(
        structured["structuredContent"]["temperature"].is_number(),
        "{structured}"
    );
    client.call_invalid("every__echo", json!({"message": 5}));

    let resources = client.list_all("resources/list", "resources");
    let first = resources
        .first()
        .unwrap_or_else(|| panic!("no resources: {resources:?}"));
    let uri = first["uri"].as_str().unwrap();
    let read = client.result("resources/read", json!({"uri": uri}));
    assert_eq!(read["contents"][0]["uri"], uri, "{read}");
    assert!(
        read["contents"][0]["text"]
            .as_str()
            .is_some_and(|t| !t.is_empty()),
        "{read}"
    );
    let templates = client.list_all("resources/templates/list", "resourceTemplates");
    assert!(
        templates
            .iter()
            .any(|t| t["uriTemplate"] == "demo://resource/dynamic/text/{resourceId}"),
        "{templates:?}"
    );
    let read = client.result(
        "resources/read",
        json!({"uri": "demo://resource/dynamic/text/7"}),
    );
    assert!(
        read["contents"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains('7')),
        "{read}"
    );

    let prompts = client.list_all("prompts/list", "prompts");
    assert!(
        prompts.iter().any(|p| p["name"] == "every__args-prompt"),
        "{prompts:?}"
    );
    let prompt = client.result(
        "prompts/get",
        json!({"name": "every__args-prompt", "arguments": {"city": "Paris"}}),
    );
    let body = prompt["messages"][0]["content"]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(body.contains("Paris"), "{prompt}");
}

#[test]
fn everything_server_progress() {
    let Some(mut client) = everything() else {
        return;
    };
    wait_for_tool(&mut client, "every__trigger-long-running-operation");
    let result = client.result(
        "tools/call",
        json!({"name": "every__trigger-long-running-operation", "arguments": {"duration": 1, "steps": 3},
               "_meta": {"progressToken": "every-progress"}}),
    );
    assert!(text(&result).contains("completed"), "{result}");
    let mut seen = Vec::new();
    for _ in 0..3 {
        let progress = client.next_notification("notifications/progress", Duration::from_secs(5));
        assert_eq!(
            progress["params"]["progressToken"], "every-progress",
            "{progress}"
        );
        seen.push(progress["params"]["progress"].clone());
    }
    assert_eq!(seen, [json!(1), json!(2), json!(3)]);
}

#[test]
fn everything_server_sampling() {
    let Some(mut client) = everything() else {
        return;
    };
    wait_for_tool(&mut client, "every__trigger-sampling-request");
    let id = client.send_request(
        "tools/call",
        json!({"name": "every__trigger-sampling-request", "arguments": {"prompt": "what is 2+2", "maxTokens": 20}}),
    );
    let request = client.next_client_request(TIMEOUT);
    assert_eq!(request["method"], "sampling/createMessage", "{request}");
    let asked = request["params"]["messages"][0]["content"]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(asked.contains("what is 2+2"), "{request}");
    client.respond(
        request["id"].clone(),
        json!({"role": "assistant", "content": {"type": "text", "text": "four, says the client"}, "model": "test", "stopReason": "endTurn"}),
    );
    let response = client.wait_response(&id, TIMEOUT);
    let result: &Value = &response["result"];
    assert!(text(result).contains("four, says the client"), "{response}");
}

/// The Python that has the official MCP SDK (it comes with mcp-server-time); `None`, with a
/// note, where it is not installed.
pub(crate) fn sdk_python() -> Option<PathBuf> {
    let time = time_server()?;
    let python = time.with_file_name("python");
    Some(
        require(
            "the MCP Python SDK",
            Some(python).filter(|p| is_executable(p)),
            "pip install mcp",
        )
        .expect("found with mcp-server-time"),
    )
}

/// tests/gateway/fixtures/sdk_client.py with `args`, not yet started.
pub(crate) fn sdk_client(python: &Path, args: &[&str]) -> std::process::Command {
    fixture_script(python, "sdk_client.py", args)
}

/// The Python script `name` of tests/gateway/fixtures with `args`, not yet started.
fn fixture_script(python: &Path, name: &str, args: &[&str]) -> std::process::Command {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/gateway/fixtures")
        .join(name);
    let mut command = std::process::Command::new(python);
    command
        .arg(&script)
        .args(args)
        .env_remove("WASMGATE_CONFIG");
    command
}

/// Runs tests/gateway/fixtures/sdk_client.py with `args` and `env`; what it saw.
pub(crate) fn run_sdk_client(python: &Path, args: &[&str], env: &[(&str, &str)]) -> Value {
    run_fixture_script(python, "sdk_client.py", args, env)
}

/// Runs the Python script `name` of tests/gateway/fixtures with `args` and `env`; the
/// JSON it printed.
pub(crate) fn run_fixture_script(
    python: &Path,
    name: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Value {
    let output = fixture_script(python, name, args)
        .envs(env.iter().copied())
        .output()
        .expect("run the SDK client");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim()).expect("one JSON value")
}

/// The official Python SDK's client through the gateway: the handshake, lists, a call
/// with progress, a sampling request answered by its callback, logging, an error result,
/// a JSON-RPC error, resources and prompts, as a client built on the SDK sees them
/// (tests/gateway/fixtures/sdk_client.py).
#[test]
fn the_python_sdk_client_sees_a_whole_session() {
    let Some(python) = sdk_python() else { return };
    let dir = crate::harness::TestDir::new("sdk");
    let config = dir.write(
        "gateway.toml",
        &config().example("ex", &[]).render(&dir.path),
    );
    let wasmgate = crate::harness::wasmgate();
    let seen = run_sdk_client(
        &python,
        &[
            "stdio",
            wasmgate.to_str().unwrap(),
            config.to_str().unwrap(),
        ],
        &[],
    );
    check_sdk_session(&seen);
}

/// What the SDK client must have seen of a session through the gateway, whatever the transport.
pub(crate) fn check_sdk_session(seen: &Value) {
    assert_eq!(seen["server"], "wasmgate");
    let tools = seen["tools"].as_array().unwrap();
    assert!(tools.contains(&json!("ex__echo")) && tools.contains(&json!("gateway_status")));
    assert_eq!(seen["echo"], "via the sdk");
    assert_eq!(seen["slow"], "slept 300 ms");
    assert_eq!(seen["progress"], json!([1.0, 2.0, 3.0]));
    assert_eq!(seen["sampled"], json!(["hello"]));
    assert_eq!(seen["sample"], "sampled: hello");
    assert_eq!(seen["fail_is_error"], true);
    assert_eq!(seen["error"], "example error");
    assert_eq!(seen["logs"], json!(["careful"]));
    assert_eq!(
        seen["resources"],
        json!(["example://static/blob", "example://static/hello"])
    );
    assert_eq!(seen["read"], "hello from example");
    assert_eq!(seen["prompt"], "Hello, Ada!");
    assert_eq!(seen["elicit"]["action"], "accept", "{seen}");
    assert_eq!(seen["elicit"]["content"]["name"], "answer to your name?");
    assert_eq!(seen["roots"][0]["uri"], "file:///work", "{seen}");
    assert_eq!(seen["templates"], json!(["example://item/{id}"]), "{seen}");
    assert_eq!(seen["completions"], json!(["Alice"]), "{seen}");
    assert_eq!(seen["updated"], json!(["example://static/hello"]), "{seen}");
}
