//! WASM plugins end to end: the real binary with plugin components in a watched folder.
//! Listing and calling, every content kind, progress, limits, the sandbox's grants,
//! components that must be refused, hot reload with a client connected (also under a
//! steady stream of calls), the compilation cache, the bundled plugins of the embedded
//! default, and a plugin written in Python.
//!
//! Components: the fixtures (`echo`, `faulty`, `minimal`, `wrongworld`) and the shipped plugins
//! (`hash`, `json`, ...) are built by `build.rs`; the Python one by
//! `plugins/python/text/build.sh` (scripts/test.sh runs it).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::custom_section::with_custom_section;
use crate::harness::{Client, TIMEOUT, TestDir, eventually, text, toml_str};

/// Bound for what waits on compiling components: a debug gateway on a busy machine
/// (tests run in parallel, each gateway compiling its own plugins) is slow at it.
pub(crate) const LOAD_TIMEOUT: Duration = Duration::from_secs(120);

const LIST_CHANGED: &str = "notifications/tools/list_changed";

// ---- components ----

fn component(dir: &str, name: &str) -> PathBuf {
    let path = Path::new(dir).join(format!("{name}.wasm"));
    assert!(
        path.is_file(),
        "{} is missing: build.rs builds it on `cargo build` (it needs `rustup target add wasm32-wasip2`; \
         see the build script's warnings, and WASMGATE_SKIP_PLUGIN_BUILD must be unset)",
        path.display()
    );
    path
}

/// A test fixture component (`echo`, `faulty`, `minimal`, `wrongworld`).
pub(crate) fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(component(env!("WASMGATE_TEST_PLUGINS"), name)).expect("read fixture")
}

/// A shipped plugin component (`hash`, `json`, `files`, `fetch`).
fn shipped(name: &str) -> Vec<u8> {
    std::fs::read(component(env!("WASMGATE_PLUGINS"), name)).expect("read shipped plugin")
}

/// Bytes that are no WebAssembly at all (a fixed pseudo-random sequence).
fn noise(len: usize) -> Vec<u8> {
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as u8
        })
        .collect()
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Replaces `path` as build tools do: the new bytes go to a temporary name in the same
/// folder (not `*.wasm`, so not a plugin), which is then renamed over the old file.
fn replace_atomically(path: &Path, bytes: &[u8]) {
    let partial = path.with_extension("wasm.partial");
    std::fs::write(&partial, bytes).expect("write the new version");
    std::fs::rename(&partial, path).expect("rename it over the old one");
}

// ---- a gateway with plugins ----

/// A gateway config with `[plugins] dir = "{dir}/plugins"` and `cache_dir = "{dir}/cache"`.
/// `{dir}` in any line stands for the test's folder.
pub(crate) struct Setup {
    gateway: Vec<String>,
    /// Files to put in the plugin folder: (file name, bytes).
    files: Vec<(String, Vec<u8>)>,
    /// `[plugins]` lines after `dir` and `cache_dir`, then `[plugins.NAME]` tables.
    plugins: Vec<String>,
    /// Folders to create in the test's folder.
    folders: Vec<String>,
    env: Vec<(String, String)>,
    /// `cache_dir`, when not `{dir}/cache`.
    cache: Option<PathBuf>,
    /// The protocol version the client asks for, when not the latest.
    version: Option<&'static str>,
}

pub(crate) fn setup() -> Setup {
    Setup {
        // The first list waits for the plugins to load, for as long as startup_timeout.
        gateway: vec![
            r#"shutdown_grace = "1s""#.into(),
            r#"startup_timeout = "120s""#.into(),
        ],
        files: Vec::new(),
        plugins: Vec::new(),
        folders: Vec::new(),
        env: Vec::new(),
        cache: None,
        version: None,
    }
}

impl Setup {
    pub(crate) fn gateway(mut self, line: &str) -> Setup {
        self.gateway.push(line.into());
        self
    }

    pub(crate) fn file(mut self, name: &str, bytes: Vec<u8>) -> Setup {
        self.files.push((name.into(), bytes));
        self
    }

    /// `[plugins]` text: keys (before any table) or whole `[plugins.NAME]` tables.
    pub(crate) fn plugins(mut self, text: &str) -> Setup {
        self.plugins.push(text.into());
        self
    }

    pub(crate) fn version(mut self, version: &'static str) -> Setup {
        self.version = Some(version);
        self
    }

    pub(crate) fn folder(mut self, name: &str) -> Setup {
        self.folders.push(name.into());
        self
    }

    pub(crate) fn env(mut self, key: &str, value: &str) -> Setup {
        self.env.push((key.into(), value.into()));
        self
    }

    pub(crate) fn cache(mut self, dir: PathBuf) -> Setup {
        self.cache = Some(dir);
        self
    }

    fn render(&self, dir: &Path) -> String {
        let mut text = String::from("[gateway]\n");
        for line in &self.gateway {
            text.push_str(line);
            text.push('\n');
        }
        let path = |name: &str| toml_str(dir.join(name).to_str().expect("utf-8 path"));
        text.push_str(&format!(
            "\n[plugins]\ndir = {}\ncache_dir = {}\n",
            path("plugins"),
            self.cache.as_deref().map_or_else(
                || path("cache"),
                |c| toml_str(c.to_str().expect("utf-8 path"))
            )
        ));
        for part in &self.plugins {
            text.push('\n');
            text.push_str(part);
            text.push('\n');
        }
        text.replace("{dir}", dir.to_str().expect("utf-8 path"))
    }

    /// Writes the plugin folder, the other folders and `gateway.toml` into `dir`.
    pub(crate) fn write(&self, dir: &Path) -> PathBuf {
        let plugins = dir.join("plugins");
        std::fs::create_dir_all(&plugins).expect("plugin folder");
        for folder in &self.folders {
            std::fs::create_dir_all(dir.join(folder)).expect("folder");
        }
        for (name, bytes) in &self.files {
            std::fs::write(plugins.join(name), bytes).expect("write component");
        }
        let path = dir.join("gateway.toml");
        std::fs::write(&path, self.render(dir)).expect("write config");
        path
    }

    /// Starts the gateway on the config in `config`, with its own folder `dir` for stderr.
    pub(crate) fn spawn(&self, config: &Path, dir: TestDir) -> Client {
        let env: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let mut client = Client::spawn_with_env(
            &["serve", "--config", config.to_str().expect("utf-8 path")],
            dir,
            &env,
        );
        match self.version {
            Some(version) => client.initialize_with(version, json!({})),
            None => client.initialize(),
        };
        client
    }

    /// Starts a gateway in a fresh folder, initializes, and waits for the first list
    /// (which waits for the plugins to load); returns the client and the tool names.
    pub(crate) fn start(&self) -> (Client, Vec<String>) {
        let dir = TestDir::new("plugins");
        let config = self.write(&dir.path);
        let mut client = self.spawn(&config, dir);
        let names = first_list(&mut client);
        (client, names)
    }
}

/// The first `tools/list`: the gateway answers it once the plugins are loaded.
pub(crate) fn first_list(client: &mut Client) -> Vec<String> {
    let id = client.send_request("tools/list", json!({}));
    let response = client.wait_response(&id, LOAD_TIMEOUT);
    assert!(
        response.get("result").is_some(),
        "tools/list failed: {response}"
    );
    // The whole list (it may have more pages).
    client.tool_names()
}

pub(crate) fn plugin_dir(client: &Client) -> PathBuf {
    client.dir.join("plugins")
}

/// A tool call that must succeed: a result without `isError`.
pub(crate) fn call_ok(client: &mut Client, tool: &str, arguments: Value) -> Value {
    let result = client.call(tool, arguments.clone());
    assert_ne!(
        result["isError"],
        json!(true),
        "{tool} {arguments} returned an error result: {result}"
    );
    result
}

/// A tool call that must run and fail: a result with `isError: true`; its text.
pub(crate) fn call_failed(client: &mut Client, tool: &str, arguments: Value) -> String {
    let result = client.call(tool, arguments.clone());
    assert_eq!(
        result["isError"],
        json!(true),
        "{tool} {arguments} should be an error result: {result}"
    );
    text(&result).to_string()
}

/// The newest event of `event_type` about `source`, waiting for one.
pub(crate) fn wait_event(client: &mut Client, event_type: &str, source: &str) -> Value {
    eventually(
        LOAD_TIMEOUT,
        &format!("a {event_type} event of {source}"),
        || {
            client
                .events(json!({"event_type": event_type, "limit": 10000}))
                .into_iter()
                .find(|e| e["source"] == source)
        },
    )
}

/// Waits for `notifications/tools/list_changed` (at least one), then until the tool list
/// satisfies `want`, waiting for further notifications while it does not.
fn wait_list_change(
    client: &mut Client,
    what: &str,
    want: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    client.next_notification(LIST_CHANGED, LOAD_TIMEOUT);
    wait_tools(client, what, want)
}

/// The tool names once they satisfy `want`, waiting for `notifications/tools/list_changed`
/// while they do not.
pub(crate) fn wait_tools(
    client: &mut Client,
    what: &str,
    want: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    let deadline = Instant::now() + LOAD_TIMEOUT;
    loop {
        let names = client.tool_names();
        if want(&names) {
            return names;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if client.try_notification(LIST_CHANGED, left).is_none() {
            panic!(
                "timed out waiting for {what}; the tools now: {names:?}\nstderr:\n{}",
                client.stderr()
            );
        }
    }
}

pub(crate) fn has(names: &[String], name: &str) -> bool {
    names.iter().any(|n| n == name)
}

pub(crate) fn backend(client: &mut Client, name: &str) -> Value {
    client.status()["backends"][name].clone()
}

// ---- 1. load, list, call ----

#[test]
fn plugin_tools_are_listed_under_the_plugin_name_and_called() {
    let (mut client, names) = setup()
        .file("echo.wasm", fixture("echo"))
        .plugins("[plugins.echo]\nconfig = { greeting = \"hello from the config\", answer = 42 }")
        .start();
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
    assert_eq!(status["tool_count"].as_u64(), Some(17), "{status}");
    assert_eq!(status["limits"]["calls_at_once"], 32, "{status}");
}

#[test]
fn the_benchmarks_minimal_plugin_serves_its_one_tool() {
    let (mut client, names) = setup().file("minimal.wasm", fixture("minimal")).start();
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
    let (mut client, _) = setup().file("echo.wasm", fixture("echo")).start();
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
    let (mut client, _) = setup().file("echo.wasm", fixture("echo")).start();

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
        .start();
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
    let (mut client, _) = setup().file("echo.wasm", fixture("echo")).start();
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
    let (mut client, _) = setup().file("echo.wasm", fixture("echo")).start();
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

// ---- 3. limits ----

#[test]
fn limits_stop_a_plugin_and_the_gateway_keeps_serving() {
    let (mut client, names) = setup()
        .file("echo.wasm", fixture("echo"))
        .file("faulty.wasm", fixture("faulty"))
        .plugins("[plugins.faulty]\ntimeout = \"300ms\"\nmemory = \"16MiB\"")
        .start();
    assert!(
        has(&names, "faulty__spin") && has(&names, "echo__echo"),
        "{names:?}"
    );

    // The epoch ticker sleeps after a few ms without guest code: the call must wake it,
    // or its time limit would never fire.
    std::thread::sleep(Duration::from_millis(100));
    // A spinning call is stopped at its time limit; a call beside it is not held up.
    let started = Instant::now();
    let spin = client.send_request(
        "tools/call",
        json!({"name": "faulty__spin", "arguments": {}}),
    );
    let echo = client.send_request(
        "tools/call",
        json!({"name": "echo__echo", "arguments": {"text": "meanwhile"}}),
    );
    let first = client
        .take(TIMEOUT, |m| {
            crate::harness::is_response(m) && (m["id"] == spin || m["id"] == echo)
        })
        .expect("an answer");
    assert_eq!(
        first["id"], echo,
        "the spinning call held up the other one: {first}"
    );
    assert_eq!(text(&first["result"]), "meanwhile");
    let spun = client.wait_response(&spin, TIMEOUT);
    let elapsed = started.elapsed();
    let result = &spun["result"];
    assert_eq!(result["isError"], true, "{spun}");
    let message = text(result);
    assert!(
        message.contains("time limit") && message.contains("300ms"),
        "{message}"
    );
    assert!(
        elapsed >= Duration::from_millis(300),
        "stopped after {elapsed:?}"
    );
    assert!(
        elapsed < Duration::from_secs(10),
        "stopped only after {elapsed:?}"
    );

    // A call that allocates without end is stopped at the memory limit.
    let message = call_failed(&mut client, "faulty__hog", json!({}));
    assert!(
        message.contains("memory") && message.contains("16 MiB"),
        "{message}"
    );

    // Host resources live in the gateway's memory, outside the memory limit: a call that
    // keeps every handle it opens is stopped at a count of them (at most 10,000, fewer where
    // the open-file limit is low), not at wasmtime's 100,000 (~26 MB of the gateway's memory
    // per call).
    let message = call_failed(&mut client, "faulty__handles", json!({}));
    let count: usize = message
        .strip_prefix("plugin `faulty` held more than ")
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{message}"));
    assert!((64..=10_000).contains(&count), "{message}");
    assert!(
        message.ends_with(
            " host resources at once (streams, pollables, requests, open files: each handle \
             the plugin keeps is one)"
        ),
        "{message}"
    );
    // Random bytes are made in the gateway, in one go, before they reach the plugin: 1 MiB
    // a request at most (wasmtime's default, 64 MiB, took ~200 ms).
    let message = call_failed(&mut client, "faulty__random", json!({"len": 2 << 20}));
    assert!(
        message.contains("requested len 2097152 exceeds limit 1048576"),
        "{message}"
    );
    assert_eq!(
        text(&call_ok(&mut client, "faulty__random", json!({"len": 64}))),
        "64"
    );

    // A trap (a Rust panic) is an error result that quotes the panic message; the next
    // call gets a fresh instance.
    let message = call_failed(&mut client, "faulty__trap", json!({}));
    assert!(
        message.contains("plugin `faulty` trapped")
            && message.contains("its stderr: ")
            && message.contains("faulty.trap: requested panic"),
        "{message}"
    );
    assert_eq!(text(&call_ok(&mut client, "faulty__ok", json!({}))), "ok");
    // The panic's output is in the gateway's log, without the blank line it starts with.
    let stderr = client.stderr();
    let output: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("plugin=faulty") && l.contains("stream=\"stderr\""))
        .collect();
    assert!(
        output.iter().any(|l| l.contains("requested panic")),
        "{stderr}"
    );
    assert!(
        output.iter().all(|l| !l.contains("INFO  plugin=faulty")),
        "a blank line logged: {output:?}"
    );

    // What a plugin returns is bounded before the gateway expands it into JSON: items and
    // bytes of a result, and the text of an error (which the events keep too).
    let message = call_failed(&mut client, "faulty__many_items", json!({"items": 10_001}));
    assert_eq!(
        message,
        "plugin `faulty` tool `many_items` returned a result too big to pass on: 10001 content \
         items (a result may hold 10000)"
    );
    let result = client.call("faulty__many_items", json!({"items": 10_000}));
    assert_eq!(result["content"].as_array().map(Vec::len), Some(10_000));
    // Bytes as the answer carries them: a control character is six (`\u0001`).
    let message = call_failed(
        &mut client,
        "faulty__control_text",
        json!({"chars": 3 << 20}),
    );
    assert_eq!(
        message,
        "plugin `faulty` tool `control_text` returned a result too big to pass on: 18874368 \
         bytes with its texts escaped as JSON (a result may hold 16 MiB)"
    );
    let result = call_ok(
        &mut client,
        "faulty__control_text",
        json!({"chars": 1 << 20}),
    );
    assert_eq!(text(&result).len(), 1 << 20);
    let message = call_failed(&mut client, "faulty__fail_long", json!({"bytes": 100_000}));
    assert!(
        message.len() < 17_000 && message.ends_with("f… (100000 bytes)"),
        "{} bytes, ending {:?}",
        message.len(),
        &message[message.len().saturating_sub(40)..]
    );
    let events = client.events(json!({"event_type": "tool.called", "limit": 1}));
    let event = &events[0];
    assert_eq!(event["tool"], "faulty__fail_long", "{event}");
    let kept = event["error"].as_str().unwrap_or_default();
    assert!(
        kept.len() < 2100 && kept.ends_with("f… (16402 bytes)"),
        "{} bytes, ending {:?}",
        kept.len(),
        &kept[kept.len().saturating_sub(40)..]
    );

    // A pattern that backtracks without end gives up after a bounded number of steps, so
    // checking the arguments neither stalls the gateway nor refuses a value it allows.
    let started = Instant::now();
    let result = client.call(
        "faulty__backtrack",
        json!({"q": "What is the weather in Paris tomorrow?"}),
    );
    assert_eq!(text(&result), "checked", "{result}");
    // Bounded steps: seconds at worst on a loaded machine, not the minutes or more the
    // pattern takes unbounded.
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the check took {:?}",
        started.elapsed()
    );

    // An output schema with backtracking patterns: a result with more strings than it is
    // worth checking is refused at once; a smaller one is checked off the I/O thread, within
    // the call's time limit, while other requests are answered.
    let message = call_failed(&mut client, "faulty__slow_output", json!({"n": 400}));
    assert_eq!(
        message,
        "plugin `faulty` tool `slow_output` returned structured output too costly to check: up \
         to 401 strings against 31 backtracking patterns of its output schema (at most 10000 \
         matches)"
    );
    let slow = client.send_request(
        "tools/call",
        json!({"name": "faulty__slow_output", "arguments": {"n": 300}}),
    );
    // Pings, one at a time, until the call's answer: the check takes the whole 300 ms time
    // limit, and on the I/O thread it would hold up every ping after its start.
    let mut pings_answered = 0;
    let checked = loop {
        let ping = client.send_request("ping", json!({}));
        let answer = client
            .take(TIMEOUT, |m| {
                crate::harness::is_response(m) && (m["id"] == slow || m["id"] == ping)
            })
            .expect("an answer");
        if answer["id"] == slow {
            break answer;
        }
        pings_answered += 1;
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(
        pings_answered >= 5,
        "the check held up pings: {pings_answered} answered before it ended"
    );
    assert_eq!(
        text(&checked["result"]),
        "plugin `faulty` exceeded its time limit of 300ms while its result was checked against \
         the tool's output schema",
        "{checked}"
    );

    // A linear-time pattern whose DFA gives up costs ~5 ns per NFA state and byte, and a
    // check that has started cannot be stopped: bytes times states are bounded first.
    let message = call_failed(
        &mut client,
        "faulty__linear_output",
        json!({"len": 1 << 20}),
    );
    assert_eq!(
        message,
        "plugin `faulty` tool `linear_output` returned structured output too costly to check: \
         1048584 bytes against patterns of its output schema that compile to 1009 states (bytes \
         times states may be at most 400000000)"
    );
    let message = call_failed(&mut client, "faulty__linear_output", json!({"len": 1000}));
    assert!(
        message.contains("does not match its output schema: /t: "),
        "checked, within the bound: {message}"
    );
    // Arguments are checked on the I/O thread: those too costly for the input schema's
    // patterns (64 KiB times 1,009 states, ~0.3 s) are passed on unchecked, to the plugin,
    // whose own answer shows it got them; a short one is checked and refused.
    let message = client.call_invalid("faulty__linear_output", json!({"len": 0, "t": "ab"}));
    assert!(message.contains("/t: "), "{message}");
    let t = "ab".repeat(32 << 10);
    let message = call_failed(
        &mut client,
        "faulty__linear_output",
        json!({"len": 2, "t": t}),
    );
    assert!(
        message.contains("does not match its output schema: /t: "),
        "passed on unchecked: {message}"
    );

    // Structured output that breaks the tool's own output schema does not reach the client.
    let message = call_failed(&mut client, "faulty__off_schema", json!({}));
    assert!(
        message.contains("does not match its output schema: /len: "),
        "{message}"
    );

    assert_eq!(client.result("ping", json!({})), json!({}));
    assert_eq!(
        text(&call_ok(
            &mut client,
            "echo__echo",
            json!({"text": "still here"})
        )),
        "still here"
    );
    let status = backend(&mut client, "faulty");
    assert!(status["failures"].as_u64() >= Some(3), "{status}");
    assert!(status["last_error"].is_string(), "{status}");
}

// ---- 4. sandbox ----

/// A one-page HTTP/1.1 server on 127.0.0.1 that counts its connections.
pub(crate) struct HttpServer {
    pub port: u16,
    pub hits: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

pub(crate) const PAGE: &str = "hello from the test server";

impl HttpServer {
    pub(crate) fn start() -> HttpServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        let hits = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (counted, stopped) = (hits.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(mut stream) = stream else { continue };
                counted.fetch_add(1, Ordering::SeqCst);
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let mut request = Vec::new();
                let mut chunk = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => request.extend_from_slice(&chunk[..n]),
                    }
                }
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{PAGE}",
                    PAGE.len()
                );
                let _ = stream.write_all(response.as_bytes());
            }
        });
        HttpServer {
            port,
            hits,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so that it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[test]
fn big_structured_output_is_passed_on_without_being_built() {
    // Built in memory, each JSON value takes 80 bytes or more: 16 MiB of zeros took 837 MB,
    // 6.3 GB for 8 calls at once. Without an output schema, structured output is read
    // through as text and passed on as it is; one a schema checks may hold 250,000 values.
    let (mut client, _) = setup().file("faulty.wasm", fixture("faulty")).start();
    let before = client.peak_rss();
    let result = call_ok(&mut client, "faulty__numbers", json!({"n": 3_000_000}));
    let grown = client.peak_rss().saturating_sub(before);
    assert_eq!(text(&result), "numbers");
    let zeros = result["structuredContent"]["a"]
        .as_array()
        .expect("the zeros");
    assert!(zeros.len() == 3_000_000 && zeros.iter().all(|z| z == 0));
    assert!(
        grown < 150 << 20,
        "6 MB of structured output took the gateway's peak memory up {} MiB",
        grown >> 20
    );

    let checked = call_ok(&mut client, "faulty__checked_numbers", json!({"n": 1000}));
    assert_eq!(
        checked["structuredContent"]["a"].as_array().map(Vec::len),
        Some(1000)
    );
    let message = call_failed(
        &mut client,
        "faulty__checked_numbers",
        json!({"n": 300_000}),
    );
    assert_eq!(
        message,
        "plugin `faulty` tool `checked_numbers` returned structured output too costly to \
         check: up to 300003 JSON values, each built in memory to be checked against its \
         output schema (at most 250000)"
    );
}

#[test]
fn the_sandbox_grants_only_what_the_config_names() {
    let server = HttpServer::start();
    let echo = fixture("echo");
    // `echo` has grants; `bare` (the same component) has none.
    let setup = setup()
        .file("echo.wasm", echo.clone())
        .file("bare.wasm", echo)
        .folder("data")
        .folder("out")
        .plugins(&format!(
            "[plugins.echo]\n\
             allow_dirs = [{{ host = \"{{dir}}/data\", guest = \"/data\", mode = \"ro\" }},\n\
                           {{ host = \"{{dir}}/out\", guest = \"/out\", mode = \"rw\" }}]\n\
             allow_env = [\"WASMGATE_TEST_GRANTED\"]\n\
             allow_hosts = [\"127.0.0.1:{}\"]",
            server.port
        ))
        .env("WASMGATE_TEST_GRANTED", "granted value")
        .env("WASMGATE_TEST_SECRET", "secret value");
    let dir = TestDir::new("sandbox");
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::write(dir.join("data/notes.txt"), "granted notes").unwrap();
    std::fs::write(dir.join("outside.txt"), "outside the grant").unwrap();
    std::os::unix::fs::symlink(dir.join("outside.txt"), dir.join("data/link.txt")).unwrap();
    let config = setup.write(&dir.path);
    let outside = dir.join("outside.txt").to_str().unwrap().to_string();
    let mut client = setup.spawn(&config, dir);
    let names = first_list(&mut client);
    assert!(
        has(&names, "echo__read") && has(&names, "bare__read"),
        "{names:?}"
    );

    // Files: nothing without a grant.
    for path in ["/data/notes.txt", outside.as_str(), "/etc/passwd", "/"] {
        let message = call_failed(&mut client, "bare__read", json!({"path": path}));
        assert!(message.contains(&format!("read {path}")), "{message}");
    }
    // A read-only grant: reads work, writes and escapes do not.
    assert_eq!(
        text(&call_ok(
            &mut client,
            "echo__read",
            json!({"path": "/data/notes.txt"})
        )),
        "granted notes"
    );
    call_failed(
        &mut client,
        "echo__write",
        json!({"path": "/data/new.txt", "text": "x"}),
    );
    call_failed(
        &mut client,
        "echo__write",
        json!({"path": "/data/notes.txt", "text": "overwritten"}),
    );
    for path in [
        "/data/../outside.txt",
        "/data/../../etc/passwd",
        "/data/link.txt",
        outside.as_str(),
    ] {
        let message = call_failed(&mut client, "echo__read", json!({"path": path}));
        assert!(!message.contains("outside the grant"), "{path}: {message}");
    }
    // A read-write grant: the file lands in the host folder.
    assert_eq!(
        text(&call_ok(
            &mut client,
            "echo__write",
            json!({"path": "/out/result.txt", "text": "written"})
        )),
        "wrote 7"
    );
    let data = client.dir.join("data");
    assert_eq!(
        std::fs::read_to_string(data.join("notes.txt")).unwrap(),
        "granted notes"
    );
    assert!(!data.join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(client.dir.join("out/result.txt")).unwrap(),
        "written"
    );
    call_failed(
        &mut client,
        "echo__write",
        json!({"path": "/out/../escaped.txt", "text": "x"}),
    );
    assert!(!client.dir.join("escaped.txt").exists());

    // Environment: only the granted variable, with the gateway's value.
    assert_eq!(
        text(&call_ok(
            &mut client,
            "echo__env",
            json!({"name": "WASMGATE_TEST_GRANTED"})
        )),
        "granted value"
    );
    for name in ["WASMGATE_TEST_SECRET", "PATH", "HOME"] {
        assert_eq!(
            text(&call_ok(&mut client, "echo__env", json!({"name": name}))),
            "unset",
            "{name}"
        );
    }
    assert_eq!(
        text(&call_ok(
            &mut client,
            "bare__env",
            json!({"name": "WASMGATE_TEST_GRANTED"})
        )),
        "unset"
    );

    // Network: refused before any connection without the grant, served with it.
    let url = format!("http://127.0.0.1:{}/page", server.port);
    let message = call_failed(&mut client, "bare__http", json!({"url": url}));
    assert!(message.to_lowercase().contains("denied"), "{message}");
    assert!(message.contains("allow_hosts"), "{message}");
    assert_eq!(
        server.hits.load(Ordering::SeqCst),
        0,
        "the denied request reached the server"
    );
    let result = call_ok(&mut client, "echo__http", json!({"url": url}));
    assert_eq!(result["structuredContent"]["status"], 200, "{result}");
    assert_eq!(result["structuredContent"]["body"], PAGE, "{result}");
    assert_eq!(server.hits.load(Ordering::SeqCst), 1);
    // Another port of the same host is not granted.
    let message = call_failed(
        &mut client,
        "echo__http",
        json!({"url": format!("http://127.0.0.1:{}/", server.port.checked_add(1).unwrap_or(1))}),
    );
    assert!(message.to_lowercase().contains("denied"), "{message}");

    // A plugin's stdout and stderr go to the gateway's log, never to the MCP stream
    // (the client checks that every stdout line is JSON-RPC); `host.log` too.
    let marker = "plugin-stdout-marker-5d1e";
    assert_eq!(
        text(&call_ok(
            &mut client,
            "echo__stdout",
            json!({"text": marker})
        )),
        "printed"
    );
    assert_eq!(
        text(&call_ok(
            &mut client,
            "echo__log",
            json!({"message": "plugin-log-marker-77a0"})
        )),
        "logged"
    );
    client.result("ping", json!({}));
    let (out_lines, log_lines) = eventually(
        TIMEOUT,
        "the plugin's output in the gateway's stderr",
        || {
            let stderr = client.stderr();
            let out: Vec<String> = stderr
                .lines()
                .filter(|l| l.contains(marker))
                .map(str::to_string)
                .collect();
            let log: Vec<String> = stderr
                .lines()
                .filter(|l| l.contains("plugin-log-marker-77a0"))
                .map(str::to_string)
                .collect();
            (out.len() >= 2 && log.len() >= 3).then_some((out, log))
        },
    );
    assert!(
        out_lines.iter().all(|l| l.contains("echo")),
        "{out_lines:?}"
    );
    assert!(
        log_lines.iter().all(|l| l.contains("echo")),
        "{log_lines:?}"
    );
}

// ---- 5. bad plugins ----

#[test]
fn components_that_are_not_plugins_are_refused_and_the_others_served() {
    let (mut client, names) = setup()
        .file("echo.wasm", fixture("echo"))
        .file("not-a-component.wasm", noise(4096))
        .file("wrongworld.wasm", fixture("wrongworld"))
        // A core module (the empty one): WebAssembly, but not a component.
        .file("core.wasm", b"\0asm\x01\0\0\0".to_vec())
        // A component whose `ok` tool takes a string: no MCP client could call it.
        .file("strict.wasm", fixture("faulty"))
        .plugins("[plugins.strict]\nconfig = { string_schema = \"true\" }")
        .file("endless.wasm", fixture("faulty"))
        .plugins("[plugins.endless]\nconfig = { endless_schema = \"true\" }")
        .file("crowded.wasm", fixture("faulty"))
        .plugins("[plugins.crowded]\nconfig = { extra_tools = \"1000\" }")
        // 500 tools of 10 KB descriptions: 5 MB that every list would carry.
        .file("wordy.wasm", fixture("faulty"))
        .plugins(
            "[plugins.wordy]\nconfig = { extra_tools = \"500\", description_bytes = \"10000\" }",
        )
        // A schema of 33 patterns, each compiled in the gateway's memory.
        .file("patterned.wasm", fixture("faulty"))
        .plugins("[plugins.patterned]\nconfig = { patterns = \"33\" }")
        // Served, under a namespace clients accept.
        .file("my plugin.v2.wasm", fixture("minimal"))
        .start();
    assert!(has(&names, "echo__echo"), "{names:?}");
    assert!(has(&names, "my_plugin_v2__echo"), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("not-a-component__")
        || n.starts_with("wrongworld__")
        || n.starts_with("core__")
        || n.starts_with("strict__")
        || n.starts_with("endless__")
        || n.starts_with("crowded__")
        || n.starts_with("wordy__")
        || n.starts_with("patterned__")));
    assert_eq!(
        text(&call_ok(
            &mut client,
            "echo__echo",
            json!({"text": "served"})
        )),
        "served"
    );

    for (name, reason) in [
        ("not-a-component", "not a WebAssembly file"),
        ("wrongworld", "wasmgate:plugin"),
        ("core", "core WebAssembly module"),
        (
            "strict",
            r#"tool `ok`: input-schema must have "type": "object""#,
        ),
        (
            "endless",
            "tool `ok`: input-schema applies itself to the same value without end",
        ),
        ("crowded", "a plugin may have 1000 at most"),
        ("wordy", "schemas; a plugin may list 4 MiB at most"),
        (
            "patterned",
            "tool `ok`: input-schema has 33 patterns; a schema may have 32",
        ),
    ] {
        let event = wait_event(&mut client, "plugin.load_failed", name);
        assert_eq!(event["status"], "failure", "{event}");
        let error = event["error"]
            .as_str()
            .unwrap_or_else(|| panic!("no error in {event}"));
        assert!(
            error.contains(&format!("{name}.wasm")),
            "the reason does not name the file: {error}"
        );
        assert!(error.contains(reason), "{name}: {error}");
    }
    // A call to one of their tools says why there is none.
    let error = client.call_error("strict__ok", json!({}));
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Unknown tool: strict__ok (plugin `strict` (")
            && message.contains("strict.wasm) could not be loaded: tool `")
            && message.contains("input-schema must have")
            && message.matches("plugin `strict`").count() == 1,
        "{error}"
    );
    // Status shows them failed, with the reason, serving nothing.
    let status = client.status();
    assert_eq!(status["gateway"]["plugins_loading"], false, "{status}");
    for name in [
        "not-a-component",
        "wrongworld",
        "core",
        "strict",
        "endless",
        "crowded",
    ] {
        let backend = &status["backends"][name];
        assert_eq!(backend["status"], "failed", "{name}: {status}");
        assert_eq!(backend["namespace"], name, "{name}: {backend}");
        assert_eq!(backend["tool_count"], 0, "{name}: {backend}");
        assert!(
            backend["last_error"]
                .as_str()
                .is_some_and(|e| e.contains(&format!("{name}.wasm"))),
            "{name}: {backend}"
        );
    }
    // One that is removed is no longer reported.
    std::fs::remove_file(plugin_dir(&client).join("core.wasm")).expect("delete core.wasm");
    eventually(TIMEOUT, "core to leave the status", || {
        client.status()["backends"]
            .get("core")
            .is_none()
            .then_some(())
    });
    assert_eq!(client.result("ping", json!({})), json!({}));
}

// ---- 6. hot reload ----

#[test]
fn hot_reload_adds_replaces_keeps_and_removes_a_plugin() {
    let (mut client, names) = setup().file("echo.wasm", fixture("echo")).start();
    assert!(!names.iter().any(|n| n.starts_with("x__")), "{names:?}");
    client.drain_notifications(LIST_CHANGED);
    let x = plugin_dir(&client).join("x.wasm");

    // A new file: loaded, announced.
    std::fs::copy(component(env!("WASMGATE_PLUGINS"), "hash"), &x).expect("copy hash.wasm");
    wait_list_change(&mut client, "x__sha256 to be listed", |n| {
        has(n, "x__sha256")
    });
    let result = call_ok(&mut client, "x__sha256", json!({"text": "abc"}));
    assert_eq!(
        result["structuredContent"]["sha256"],
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    wait_event(&mut client, "plugin.loaded", "x");

    // Replaced atomically by another plugin: its tools instead.
    replace_atomically(&x, &shipped("json"));
    let names = wait_list_change(&mut client, "x__query to replace x__sha256", |n| {
        has(n, "x__query") && !has(n, "x__sha256")
    });
    assert!(has(&names, "echo__echo"), "{names:?}");
    let result = call_ok(
        &mut client,
        "x__query",
        json!({"json": "{\"a\": [1, 2]}", "pointer": "/a/1"}),
    );
    assert_eq!(text(&result).trim(), "2");
    let reloaded = wait_event(&mut client, "plugin.reloaded", "x");
    assert!(
        reloaded["compile_ms"].is_u64(),
        "new code is compiled: {reloaded}"
    );
    assert!(reloaded["total_ms"].is_u64(), "{reloaded}");
    assert_eq!(reloaded["cached"], false, "{reloaded}");
    assert_eq!(reloaded["tools"], 3, "{reloaded}");
    let error = client.call_error("x__sha256", json!({"text": "abc"}));
    assert_eq!(error["code"], -32602, "{error}");

    // A broken build over it: refused, the previous version keeps serving, and the client
    // is told (at level error, though it set no level).
    std::fs::write(&x, noise(1000)).expect("write a broken file");
    let failed = wait_event(&mut client, "plugin.reload_failed", "x");
    assert!(
        failed["error"]
            .as_str()
            .is_some_and(|e| e.contains("x.wasm")),
        "{failed}"
    );
    let told = client.next_notification("notifications/message", TIMEOUT);
    assert_eq!(told["params"]["level"], "error", "{told}");
    assert_eq!(told["params"]["logger"], "x", "{told}");
    let said = told["params"]["data"].as_str().unwrap_or_default();
    assert!(
        said.contains("previous one keeps serving") && said.contains("not a WebAssembly file"),
        "{told}"
    );
    let result = call_ok(
        &mut client,
        "x__query",
        json!({"json": "[true]", "pointer": "/0"}),
    );
    assert_eq!(text(&result).trim(), "true");
    assert!(has(&client.tool_names(), "x__query"));
    let status = backend(&mut client, "x");
    assert_eq!(status["status"], "ready", "{status}");
    assert!(
        status["reload_error"]
            .as_str()
            .is_some_and(|e| e.contains("not a WebAssembly file")),
        "{status}"
    );
    assert_eq!(
        status["failures"], 0,
        "a refused version is no failed call: {status}"
    );
    // A client that asked for `critical` only is not told of the next refusal.
    client.result("logging/setLevel", json!({"level": "critical"}));
    std::fs::write(&x, noise(1001)).expect("write another broken file");
    eventually(TIMEOUT, "a second plugin.reload_failed", || {
        let failed = client.events(json!({"event_type": "plugin.reload_failed"}));
        (failed.len() == 2).then_some(())
    });
    client.result("ping", json!({}));
    let told = client.drain_notifications("notifications/message");
    assert!(told.is_empty(), "below the client's level: {told:?}");

    // The serving version written back: the refusal no longer applies.
    replace_atomically(&x, &shipped("json"));
    eventually(TIMEOUT, "the reload error to clear", || {
        backend(&mut client, "x")["reload_error"]
            .is_null()
            .then_some(())
    });

    // Deleted: unloaded, its tools gone.
    client.drain_notifications(LIST_CHANGED);
    std::fs::remove_file(&x).expect("delete x.wasm");
    let names = wait_list_change(&mut client, "the x tools to go", |n| {
        !n.iter().any(|t| t.starts_with("x__"))
    });
    assert!(has(&names, "echo__echo"), "{names:?}");
    wait_event(&mut client, "plugin.unloaded", "x");
    let error = client.call_error("x__query", json!({"json": "1", "pointer": ""}));
    assert_eq!(error["code"], -32602, "{error}");
    assert_eq!(
        text(&call_ok(
            &mut client,
            "echo__echo",
            json!({"text": "unaffected"})
        )),
        "unaffected"
    );
}

#[test]
fn a_plugin_named_by_path_outside_the_folder_is_reloaded_too() {
    // The dev loop of plugins/README.md: `path` names the build output, relative to the config.
    let setup = setup()
        .folder("build")
        .plugins("[plugins.y]\npath = \"build/y.wasm\"\nnamespace = \"why\"");
    let dir = TestDir::new("by-path");
    let config = setup.write(&dir.path);
    std::fs::write(dir.join("build/y.wasm"), shipped("hash")).unwrap();
    let build = dir.join("build");
    let mut client = setup.spawn(&config, dir);
    let names = first_list(&mut client);
    assert!(has(&names, "why__sha256"), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("y__")), "{names:?}");
    client.drain_notifications(LIST_CHANGED);

    // A build tool writes the new output in place.
    std::fs::write(build.join("y.wasm"), shipped("json")).unwrap();
    wait_list_change(&mut client, "why__query to be listed", |n| {
        has(n, "why__query") && !has(n, "why__sha256")
    });
    let reloaded = wait_event(&mut client, "plugin.reloaded", "y");
    assert_eq!(reloaded["tools"], 3, "{reloaded}");
    let result = call_ok(
        &mut client,
        "why__query",
        json!({"json": "{\"k\": \"v\"}", "pointer": "/k"}),
    );
    assert_eq!(text(&result).trim(), "\"v\"");

    // A build dropped into the folder under the same name is not served (`path` wins),
    // and the log says so, once.
    let dropped = build.parent().unwrap().join("plugins/y.wasm");
    std::fs::write(&dropped, shipped("hash")).unwrap();
    let said = format!(
        "the plugin folder's {dropped:?} is not loaded: plugin `y` is served from {}",
        build.join("y.wasm").display()
    );
    eventually(TIMEOUT, "the passed-over file in the log", || {
        client.stderr().contains(&said).then_some(())
    });
    // Changed again, then a change that shows: by then the second was looked at too.
    std::fs::write(&dropped, shipped("json")).unwrap();
    std::fs::write(build.join("y.wasm"), shipped("hash")).unwrap();
    wait_list_change(&mut client, "why__sha256 to be listed", |n| {
        has(n, "why__sha256") && !n.iter().any(|n| n.starts_with("y__"))
    });
    assert_eq!(
        client.stderr().matches(&said).count(),
        1,
        "{}",
        client.stderr()
    );
}

#[test]
fn a_plugin_given_with_the_plugin_flag_is_reloaded_and_kept_across_config_edits() {
    // `wasmgate --config gateway.toml --plugin build/x.wasm` in a client's config while
    // x is being written: a rebuild is served at once, and an edit of the config keeps x,
    // applying the config's `[plugins.x]` table to it.
    let dir = TestDir::new("plugin-flag");
    std::fs::create_dir(dir.join("build")).unwrap();
    let x = dir.join("build/x.wasm");
    std::fs::write(&x, shipped("hash")).unwrap();
    let base = format!(
        "[gateway]\nshutdown_grace = \"1s\"\nstartup_timeout = \"120s\"\n\n\
         [plugins]\ncache_dir = {}\n",
        toml_str(dir.join("cache").to_str().unwrap())
    );
    let config = dir.write("gateway.toml", &base);
    let mut client = Client::spawn(
        &[
            "serve",
            "--config",
            config.to_str().unwrap(),
            "--plugin",
            x.to_str().unwrap(),
        ],
        TestDir::new("plugin-flag-gw"),
    );
    client.initialize();
    let names = first_list(&mut client);
    assert!(has(&names, "x__sha256"), "{names:?}");
    client.drain_notifications(LIST_CHANGED);

    replace_atomically(&x, &shipped("json"));
    wait_list_change(&mut client, "x__query to replace x__sha256", |n| {
        has(n, "x__query") && !has(n, "x__sha256")
    });
    wait_event(&mut client, "plugin.reloaded", "x");

    std::fs::write(
        &config,
        format!("{base}\n[plugins.x]\nnamespace = \"why\"\n"),
    )
    .unwrap();
    wait_list_change(&mut client, "why__query to replace x__query", |n| {
        has(n, "why__query") && !has(n, "x__query")
    });
    let result = call_ok(
        &mut client,
        "why__query",
        json!({"json": "{\"k\": 1}", "pointer": "/k"}),
    );
    assert_eq!(text(&result).trim(), "1");
    let events = client.events(json!({"event_type": "config.invalid"}));
    assert!(events.is_empty(), "{events:?}");
}

#[test]
fn two_plugins_with_one_namespace_serve_each_name_once_and_say_so() {
    // `a.b.wasm` and `a_b.wasm` both get the namespace `a_b`: the first by name keeps the
    // tool, the other's is hidden; the status counts each tool where it is served.
    let (mut client, names) = setup()
        .file("a.b.wasm", fixture("minimal"))
        .file("a_b.wasm", fixture("minimal"))
        .start();
    let echoes: Vec<&String> = names.iter().filter(|n| n.starts_with("a_b__")).collect();
    assert_eq!(echoes, ["a_b__echo"], "{names:?}");
    let conflict = wait_event(&mut client, "catalog.conflict", "wasmgate");
    assert!(
        conflict["detail"]
            .as_str()
            .is_some_and(|d| d.contains("`a_b__echo` of `a_b` is hidden by `a.b`'s tool")),
        "{conflict}"
    );
    let status = client.status();
    assert_eq!(status["backends"]["a.b"]["tool_count"], 1, "{status}");
    assert_eq!(status["backends"]["a_b"]["tool_count"], 0, "{status}");
    assert_eq!(status["backends"]["a_b"]["status"], "ready", "{status}");
    assert_eq!(status["gateway"]["tool_count"], 3, "{status}");
}

#[test]
fn a_plugins_namespace_and_tool_filter_apply() {
    let (mut client, names) = setup()
        .file("echo.wasm", fixture("echo"))
        .plugins("[plugins.echo]\nnamespace = \"e\"\ndisabled_tools = [\"fail\", \"bad_*\"]")
        .start();
    assert!(
        has(&names, "e__echo") && has(&names, "e__is_error"),
        "{names:?}"
    );
    for hidden in ["e__fail", "e__bad_args", "echo__echo"] {
        assert!(!has(&names, hidden), "{hidden} is listed: {names:?}");
    }
    assert_eq!(
        text(&call_ok(&mut client, "e__echo", json!({"text": "renamed"}))),
        "renamed"
    );
    let error = client.call_error("e__fail", json!({}));
    assert_eq!(error["code"], -32602, "a filtered tool was called: {error}");
    assert_eq!(backend(&mut client, "echo")["tool_count"], 15);
}

// ---- 7. reloads under load ----

#[test]
fn a_hundred_reloads_while_calls_run_lose_no_call() {
    const RELOADS: usize = 100;
    const IN_FLIGHT: usize = 4;
    let a = fixture("echo");
    let b = with_custom_section(&a, "wasmgate-test-variant", b"b");
    let variants = [a, b];
    let digests = [sha256_hex(&variants[0]), sha256_hex(&variants[1])];
    let (mut client, names) = setup()
        // Room for every event of the run (each call records one).
        .gateway("event_buffer = 1000000")
        .file("x.wasm", variants[0].clone())
        .start();
    assert!(has(&names, "x__echo"), "{names:?}");
    let x = plugin_dir(&client).join("x.wasm");
    assert_eq!(backend(&mut client, "x")["digest"], digests[0]);

    // A long call started now finishes on the version it started with, reloads or not.
    let long_call = client.send_request(
        "tools/call",
        json!({"name": "x__sleep", "arguments": {"ms": 2000}}),
    );

    let mut calls = 0usize;
    let mut failures = Vec::new();
    let started = Instant::now();
    for reload in 1..=RELOADS {
        let next = reload % 2;
        replace_atomically(&x, &variants[next]);
        // Until the new version serves: calls keep going, several in flight at once.
        let deadline = Instant::now() + LOAD_TIMEOUT;
        loop {
            let sent: Vec<(Value, String)> = (0..IN_FLIGHT)
                .map(|k| {
                    let word = format!("call-{reload}-{calls}-{k}");
                    let id = client.send_request(
                        "tools/call",
                        json!({"name": "x__echo", "arguments": {"text": word}}),
                    );
                    (id, word)
                })
                .collect();
            let status = client.send_request(
                "tools/call",
                json!({"name": "gateway_status", "arguments": {}}),
            );
            for (id, word) in sent {
                calls += 1;
                let response = client.wait_response(&id, TIMEOUT);
                let result = &response["result"];
                if result["isError"] == true || result["content"][0]["text"] != word.as_str() {
                    failures.push(response);
                }
            }
            let status = client.wait_response(&status, TIMEOUT);
            if status["result"]["structuredContent"]["backends"]["x"]["digest"] == digests[next] {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "reload {reload} was not served within {LOAD_TIMEOUT:?}: {status}"
            );
        }
    }
    let elapsed = started.elapsed();
    // Every swap is announced, though the tool definitions of both variants read the same.
    let mut announced = client.drain_notifications(LIST_CHANGED).len();
    while announced < RELOADS {
        client.next_notification(LIST_CHANGED, TIMEOUT);
        announced += 1;
    }
    let long = client.wait_response(&long_call, TIMEOUT);
    assert_eq!(long["result"]["content"][0]["text"], "slept 2000", "{long}");
    assert!(
        failures.is_empty(),
        "{} of {calls} calls failed during the reloads, the first: {}",
        failures.len(),
        failures[0]
    );
    assert!(calls >= RELOADS * IN_FLIGHT);
    let reloaded: Vec<Value> = client
        .events(json!({"event_type": "plugin.reloaded", "limit": 10000}))
        .into_iter()
        .filter(|e| e["source"] == "x")
        .collect();
    assert!(
        reloaded.len() >= RELOADS,
        "{} reload events for {RELOADS} reloads",
        reloaded.len()
    );
    // Both variants were compiled once; every later reload came from the cache.
    let compiled = reloaded.iter().filter(|e| e["compile_ms"].is_u64()).count();
    assert!(compiled <= 1, "{compiled} reloads compiled: {reloaded:?}");
    let failed = client.events(json!({"event_type": "plugin.reload_failed"}));
    assert!(failed.is_empty(), "{failed:?}");
    eprintln!("{RELOADS} reloads with {calls} calls in {elapsed:?}");
}

// ---- 8. the compilation cache ----

#[test]
fn a_second_start_loads_compiled_plugins_from_the_cache() {
    let setup = setup()
        .file("echo.wasm", fixture("echo"))
        .file("faulty.wasm", fixture("faulty"));
    let shared = TestDir::new("cache");
    let config = setup.write(&shared.path);

    let mut first = setup.spawn(&config, TestDir::new("cold"));
    first_list(&mut first);
    for name in ["echo", "faulty"] {
        let event = wait_event(&mut first, "plugin.loaded", name);
        assert_eq!(event["cached"], false, "{event}");
        assert!(event["compile_ms"].is_u64(), "{event}");
        assert!(event["total_ms"].is_u64(), "{event}");
    }
    drop(first);
    let cached = std::fs::read_dir(shared.join("cache"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert!(
        cached > 0,
        "nothing in the cache folder {}",
        shared.join("cache").display()
    );

    let mut second = setup.spawn(&config, TestDir::new("warm"));
    let names = first_list(&mut second);
    assert!(
        has(&names, "echo__echo") && has(&names, "faulty__ok"),
        "{names:?}"
    );
    for name in ["echo", "faulty"] {
        let event = wait_event(&mut second, "plugin.loaded", name);
        assert_eq!(event["cached"], true, "{event}");
        assert!(event["compile_ms"].is_null(), "{event}");
    }
    assert_eq!(
        text(&call_ok(&mut second, "echo__echo", json!({"text": "warm"}))),
        "warm"
    );
}

// ---- 9. the embedded default ----

/// The first `tools/list` waits for the plugins loading at start-up and holds their tools:
/// no `list_changed` for them comes before its answer (the client would only list again).
#[test]
fn no_list_changed_before_the_answer_to_a_first_list_that_waited_for_plugins() {
    let mut client = embedded_default("first-list");
    let id = client.send_request("tools/list", json!({}));
    let (before, _) = client.until_response(&id, LOAD_TIMEOUT);
    assert!(
        before.iter().all(|m| m["method"] != LIST_CHANGED),
        "notices before the answer: {before:?}"
    );
}

/// `wasmgate` with no config (the embedded default), initialized, with a compile cache of
/// its own in the test's folder.
fn embedded_default(label: &str) -> Client {
    let dir = TestDir::new(label);
    let cache = dir.join("xdg-cache");
    let mut client =
        Client::spawn_with_env(&[], dir, &[("XDG_CACHE_HOME", cache.to_str().unwrap())]);
    client.initialize();
    client
}

#[test]
fn without_a_config_the_bundled_plugins_are_served() {
    let mut client = embedded_default("embedded");
    first_list(&mut client);
    // The first list waits for the plugins only as long as the default startup_timeout
    // (10 s); a debug build on a busy machine may take longer to compile all four.
    let bundled = [
        "hash__sha256",
        "hash__base64_encode",
        "json__query",
        "json__validate",
        "files__read",
        "fetch__get",
    ];
    let names = wait_tools(&mut client, "the bundled plugins' tools", |n| {
        bundled.iter().all(|t| has(n, t))
    });
    for tool in bundled {
        assert!(has(&names, tool), "{tool} is not served: {names:?}");
    }
    let result = call_ok(&mut client, "hash__sha256", json!({"text": "abc"}));
    assert_eq!(
        text(&result),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    // Base64 both ways; URL-safe Base64 usually comes without its padding.
    let encoded = call_ok(
        &mut client,
        "hash__base64_encode",
        json!({"text": "ab?>", "url_safe": true}),
    );
    assert_eq!(text(&encoded), "YWI_Pg==");
    for data in ["YWI_Pg==", "YWI_Pg"] {
        let decoded = call_ok(
            &mut client,
            "hash__base64_decode",
            json!({"data": data, "url_safe": true}),
        );
        assert_eq!(text(&decoded), "ab?>", "{data}");
    }
    // 1.0 is an integer to JSON Schema, so to the plugins too.
    let formatted = call_ok(
        &mut client,
        "json__format",
        json!({"json": "{\"a\":1}", "indent": 1.0}),
    );
    assert_eq!(text(&formatted), "{\n \"a\": 1\n}");
    assert_eq!(
        backend(&mut client, "hash")["path"],
        Value::Null,
        "a bundled plugin has no file"
    );
    assert!(
        client.dir.join("xdg-cache/wasmgate").is_dir(),
        "the compiled plugins were not cached under $XDG_CACHE_HOME/wasmgate"
    );
}

#[test]
fn a_table_gives_a_bundled_plugin_its_grants_and_a_disabled_one_shows_in_status() {
    let setup = setup()
        .plugins("bundled = true")
        .plugins("[plugins.files]\nallow_dirs = [{ host = \"{dir}/data\", guest = \"/data\" }]")
        .plugins("[plugins.json]\ndisabled = true");
    let dir = TestDir::new("bundled-grant");
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::write(dir.join("data/notes.txt"), "granted notes").unwrap();
    let config = setup.write(&dir.path);
    let mut client = setup.spawn(&config, dir);
    first_list(&mut client);
    let names = wait_tools(&mut client, "the bundled files plugin", |n| {
        has(n, "files__read")
    });
    assert!(!names.iter().any(|n| n.starts_with("json__")), "{names:?}");
    let result = call_ok(&mut client, "files__read", json!({"path": "notes.txt"}));
    assert_eq!(text(&result), "granted notes");
    let json = backend(&mut client, "json");
    assert_eq!(json["status"], "disabled", "{json}");
    assert_eq!(json["tool_count"], 0, "{json}");
}

// ---- 10. a plugin in Python ----

#[test]
fn a_plugin_written_in_python_is_listed_and_called() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("plugins/python/text/text.wasm");
    if !path.is_file() {
        let why = format!(
            "{} is missing: build it with plugins/python/text/build.sh (scripts/test.sh does)",
            path.display()
        );
        if std::env::var_os("CI").is_some() {
            panic!("{why}");
        }
        eprintln!("skipped: {why}");
        return;
    }
    // Its first load compiles a whole CPython (tens of seconds in a debug build): the
    // compiled code is kept in the target folder, so later runs load it from the cache.
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("wasmgate-python-plugin-cache");
    let (mut client, names) = setup()
        .file("text.wasm", std::fs::read(&path).expect("read text.wasm"))
        .cache(cache)
        .start();
    for tool in ["text__word_count", "text__slugify", "text__reverse"] {
        assert!(
            has(&names, tool),
            "{tool} is not listed: {names:?}\nstderr:\n{}",
            client.stderr()
        );
    }
    // An interpreter inside: 8 calls at once, not 32 (each slot it used keeps ~16 MiB).
    assert_eq!(backend(&mut client, "text")["limits"]["calls_at_once"], 8);
    let result = call_ok(
        &mut client,
        "text__word_count",
        json!({"text": "one two\nthree"}),
    );
    assert_eq!(
        result["structuredContent"],
        json!({"words": 3, "lines": 2, "characters": 13}),
        "{result}"
    );
    assert_eq!(
        text(&call_ok(
            &mut client,
            "text__slugify",
            json!({"text": "Héllo, Wörld!"})
        )),
        "hello-world"
    );
    assert_eq!(
        text(&call_ok(
            &mut client,
            "text__reverse",
            json!({"text": "abc"})
        )),
        "cba"
    );
    let message = call_failed(&mut client, "text__slugify", json!({"text": "!!!"}));
    assert!(message.contains("no letters or digits"), "{message}");
    client.call_invalid("text__reverse", json!({}));
}

// ---- folders that appear after the start ----

/// How long a plugin that appears may take to be announced (compiling echo takes a
/// second or two in a debug build).
const APPEAR_TIMEOUT: Duration = Duration::from_secs(30);

#[test]
fn one_build_output_named_by_path_and_by_a_link_reloads_both() {
    // `path` spells the folder with `..`; the link in the plugin folder names it plainly.
    // The watcher sees the folder once, under one of the two spellings.
    let setup = setup()
        .folder("build")
        .folder("elsewhere")
        .plugins("[plugins.rl]\npath = \"{dir}/elsewhere/../build/y.wasm\"");
    let dir = TestDir::new("link-and-path");
    let config = setup.write(&dir.path);
    let build = dir.join("build");
    std::fs::write(build.join("y.wasm"), shipped("hash")).unwrap();
    std::os::unix::fs::symlink("../build/y.wasm", dir.join("plugins/sym.wasm")).unwrap();
    let mut client = setup.spawn(&config, dir);
    let names = first_list(&mut client);
    assert!(
        has(&names, "rl__sha256") && has(&names, "sym__sha256"),
        "{names:?}"
    );
    replace_atomically(&build.join("y.wasm"), &shipped("json"));
    wait_list_change(&mut client, "both to serve the new build", |n| {
        has(n, "rl__query") && has(n, "sym__query") && !has(n, "sym__sha256")
    });
    // `cargo clean`, then a build: both go, and both come back.
    std::fs::remove_dir_all(&build).unwrap();
    wait_list_change(&mut client, "both to go", |n| {
        !has(n, "rl__query") && !has(n, "sym__query")
    });
    std::fs::create_dir(&build).unwrap();
    replace_atomically(&build.join("y.wasm"), &shipped("hash"));
    wait_list_change(&mut client, "both to come back", |n| {
        has(n, "rl__sha256") && has(n, "sym__sha256")
    });
}

#[test]
fn the_plugin_folder_removed_and_made_again_unloads_then_loads_its_plugins() {
    let (mut client, names) = setup().file("a.wasm", shipped("hash")).start();
    assert!(has(&names, "a__sha256"), "{names:?}");
    let plugins = plugin_dir(&client);
    // `rm -rf`: its file's event and the folder's own both say it went.
    std::fs::remove_dir_all(&plugins).unwrap();
    wait_list_change(&mut client, "a to go", |n| !has(n, "a__sha256"));
    std::fs::create_dir(&plugins).unwrap();
    replace_atomically(&plugins.join("b.wasm"), &shipped("json"));
    wait_list_change(&mut client, "b to load", |n| has(n, "b__query"));
    // The folder was read again once for its going, not once per event.
    let stderr = client.stderr();
    assert_eq!(
        stderr
            .matches("a watched plugin folder was moved, removed or made again")
            .count(),
        1,
        "{stderr}"
    );
}

#[test]
fn a_tool_name_over_64_characters_is_served_with_a_warning() {
    let stem = "p".repeat(60);
    let (client, names) = setup()
        .file(&format!("{stem}.wasm"), fixture("minimal"))
        .start();
    let long = format!("{stem}__echo");
    assert!(has(&names, &long), "{names:?}");
    let stderr = client.stderr();
    assert!(
        stderr.contains(&format!(
            "tool `{long}` has 66 characters, more than the 64"
        )),
        "{stderr}"
    );
}

#[test]
fn a_plugin_flooded_with_slow_calls_leaves_instances_to_the_others() {
    // 60 calls of a second each to `slow` (all a stdio client may have in flight, with
    // the two requests after them), whose limit is 2 s: it runs 16 at once, so the last
    // ones wait their whole limit for a turn, and say so. `other` meanwhile answers at
    // once: `slow` cannot take every instance the gateway holds.
    let (mut client, _) = setup()
        .file("slow.wasm", fixture("echo"))
        .file("other.wasm", fixture("echo"))
        .plugins("[plugins.slow]\ntimeout = \"2s\"\ncalls_at_once = 16")
        .start();
    let ids: Vec<Value> = (0..60)
        .map(|_| {
            client.send_request(
                "tools/call",
                json!({"name": "slow__sleep", "arguments": {"ms": 1000}}),
            )
        })
        .collect();
    client.result("ping", json!({}));
    // Answered before any of the second-long calls ends: it did not wait for an instance.
    let other = client.send_request(
        "tools/call",
        json!({"name": "other__echo", "arguments": {"text": "not starved"}}),
    );
    let (before, answer) = client.until_response(&other, TIMEOUT);
    assert_eq!(text(&answer["result"]), "not starved");
    let slow_answered = before.iter().filter(|m| ids.contains(&m["id"])).count();
    assert_eq!(slow_answered, 0, "other waited for slow calls to end");
    let texts: Vec<String> = ids
        .iter()
        .map(|id| text(&client.wait_response(id, TIMEOUT)["result"]).to_string())
        .collect();
    assert!(
        texts.iter().filter(|t| *t == "slept 1000").count() >= 16,
        "{texts:?}"
    );
    assert!(
        texts.iter().any(
            |t| t.contains("had no turn within its time limit of 2s: it runs 16 calls at once")
        ),
        "{texts:?}"
    );
}

#[test]
fn a_plugin_slow_to_load_holds_up_only_its_own_tools() {
    // `faulty` with this config spins in list-tools until its 10 s limit: it is loading
    // for that long (as a Python plugin compiles for half a minute), then refused.
    let mut setup = setup();
    // The first list waits 1 s for the plugins, not the usual 120 s.
    setup
        .gateway
        .retain(|line| !line.starts_with("startup_timeout"));
    let (mut client, _) = setup
        .gateway(r#"startup_timeout = "1s""#)
        .file("echo.wasm", fixture("echo"))
        .file("faulty.wasm", fixture("faulty"))
        .plugins("[plugins.faulty]\ntimeout = \"10s\"\nconfig = { spin_in_list_tools = \"true\" }")
        .start();
    // Echo's tools come as soon as echo is compiled (in the first list, or announced).
    wait_tools(&mut client, "echo__echo", |n| has(n, "echo__echo"));
    let status = client.status();
    assert_eq!(
        status["backends"]["faulty"]["status"], "loading",
        "{status}"
    );
    assert_eq!(status["backends"]["echo"]["status"], "ready", "{status}");
    assert_eq!(status["gateway"]["plugins_loading"], true, "{status}");
    assert_eq!(
        text(&call_ok(
            &mut client,
            "echo__echo",
            json!({"text": "meanwhile"})
        )),
        "meanwhile"
    );
    let error = client.call_error("faulty__trap", json!({}));
    let message = error["message"].as_str().unwrap_or_default();
    assert!(message.contains("plugins are still loading"), "{error}");

    wait_event(&mut client, "plugin.load_failed", "faulty");
    let status = client.status();
    assert_eq!(status["backends"]["faulty"]["status"], "failed", "{status}");
    assert_eq!(status["gateway"]["plugins_loading"], false, "{status}");
}

/// A client that calls before it lists: the call waits for its own plugin only, not for
/// the start-up to end (here the other plugin takes 10 s to load, and startup_timeout is 60 s).
#[test]
fn a_call_during_start_up_waits_only_for_its_own_plugin() {
    let mut setup = setup();
    setup
        .gateway
        .retain(|line| !line.starts_with("startup_timeout"));
    let setup = setup
        .gateway(r#"startup_timeout = "60s""#)
        .file("echo.wasm", fixture("echo"))
        .file("faulty.wasm", fixture("faulty"))
        .plugins("[plugins.faulty]\ntimeout = \"10s\"\nconfig = { spin_in_list_tools = \"true\" }");
    let dir = TestDir::new("call-at-start");
    let config = setup.write(&dir.path);
    let mut client = setup.spawn(&config, dir);
    assert_eq!(
        text(&call_ok(
            &mut client,
            "echo__echo",
            json!({"text": "early"})
        )),
        "early"
    );
    let status = client.status();
    assert_eq!(
        status["backends"]["faulty"]["status"], "loading",
        "the call waited for the other plugin: {status}"
    );
}

#[test]
fn the_gateway_exits_promptly_while_a_plugin_is_still_loading() {
    // A plugin that takes its 10 s limit to load (as a Python compile takes half a
    // minute) does not hold up the exit when the client leaves.
    let setup = setup()
        .file("faulty.wasm", fixture("faulty"))
        .plugins("[plugins.faulty]\ntimeout = \"10s\"\nconfig = { spin_in_list_tools = \"true\" }");
    let dir = TestDir::new("exit-loading");
    let config = setup.write(&dir.path);
    let mut client = setup.spawn(&config, dir);
    eventually(LOAD_TIMEOUT, "faulty to be loading", || {
        (client.status()["backends"]["faulty"]["status"] == "loading").then_some(())
    });
    let started = Instant::now();
    client.close_stdin();
    let status = client.wait_exit(Duration::from_secs(8));
    assert!(
        status.is_some_and(|s| s.success()),
        "no clean exit within 8 s: {status:?}\n{}",
        client.stderr()
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn tools_list_changed_goes_to_clients_that_listed_tools() {
    // A client that has not listed yet would only list twice.
    let setup = setup().file("echo.wasm", fixture("echo"));
    let dir = TestDir::new("announce");
    let config = setup.write(&dir.path);
    let plugins = dir.join("plugins");
    let mut client = setup.spawn(&config, dir);
    wait_event(&mut client, "plugin.loaded", "echo");
    std::fs::write(plugins.join("hash.wasm"), shipped("hash")).unwrap();
    wait_event(&mut client, "plugin.loaded", "hash");
    assert!(
        client
            .try_notification(LIST_CHANGED, Duration::from_millis(300))
            .is_none(),
        "list_changed before any tools/list"
    );
    let names = client.tool_names();
    assert!(has(&names, "hash__sha256"), "{names:?}");
    std::fs::remove_file(plugins.join("hash.wasm")).unwrap();
    wait_list_change(&mut client, "hash__sha256 to go", |n| {
        !has(n, "hash__sha256")
    });
}

#[test]
fn a_symlinked_plugin_follows_the_file_it_points_to() {
    // The dev loop with a link in the plugin folder to the build output
    // (`ln -s ../build/y.wasm plugins/`): a build replaces the file behind the link.
    let setup = setup().folder("build");
    let dir = TestDir::new("symlink");
    let config = setup.write(&dir.path);
    let build = dir.join("build");
    std::fs::write(build.join("y.wasm"), shipped("hash")).unwrap();
    std::os::unix::fs::symlink("../build/y.wasm", dir.join("plugins/y.wasm")).unwrap();
    let mut client = setup.spawn(&config, dir);
    let names = first_list(&mut client);
    assert!(has(&names, "y__sha256"), "{names:?}");
    client.drain_notifications(LIST_CHANGED);

    replace_atomically(&build.join("y.wasm"), &shipped("json"));
    wait_list_change(&mut client, "y__query behind the link", |n| {
        has(n, "y__query") && !has(n, "y__sha256")
    });
    assert_eq!(wait_event(&mut client, "plugin.reloaded", "y")["tools"], 3);

    // `cargo clean` takes the build folder away: the plugin goes; the next build brings it back.
    std::fs::remove_dir_all(&build).unwrap();
    wait_list_change(&mut client, "y__query to go", |n| !has(n, "y__query"));
    std::fs::create_dir(&build).unwrap();
    replace_atomically(&build.join("y.wasm"), &shipped("hash"));
    wait_list_change(&mut client, "y__sha256 back", |n| has(n, "y__sha256"));

    // A link made while the gateway runs, to a file not built yet: loaded once it is,
    // and its target watched from then on.
    let plugins = plugin_dir(&client);
    std::os::unix::fs::symlink(build.join("z.wasm"), plugins.join("z.wasm")).unwrap();
    std::fs::write(build.join("z.wasm"), shipped("json")).unwrap();
    wait_list_change(&mut client, "z__query", |n| has(n, "z__query"));
    replace_atomically(&build.join("z.wasm"), &shipped("hash"));
    wait_list_change(&mut client, "z__sha256 behind the new link", |n| {
        has(n, "z__sha256") && !has(n, "z__query")
    });
}

/// Starts a gateway on `[plugins]` text whose folders do not exist yet.
fn start_before_folders(label: &str, plugins: &str) -> (Client, TestDir) {
    let dir = TestDir::new(label);
    let text = format!(
        "[gateway]\nshutdown_grace = \"1s\"\n\n[plugins]\ncache_dir = \"{{dir}}/cache\"\n{plugins}\n"
    );
    let config = dir.write(
        "gateway.toml",
        &text.replace("{dir}", dir.path.to_str().unwrap()),
    );
    let mut client = Client::spawn_with_env(
        &["serve", "--config", config.to_str().unwrap()],
        TestDir::new(&format!("{label}-gw")),
        &[],
    );
    client.initialize();
    let names = first_list(&mut client);
    assert!(!names.iter().any(|n| n.starts_with("echo__")), "{names:?}");
    client.drain_notifications(LIST_CHANGED);
    (client, dir)
}

fn wait_announced(client: &mut Client, tool: &str) {
    if client
        .try_notification(LIST_CHANGED, APPEAR_TIMEOUT)
        .is_none()
    {
        panic!(
            "{tool}: no tools/list_changed within {APPEAR_TIMEOUT:?} after the plugin appeared\nstderr:\n{}",
            client.stderr()
        );
    }
    wait_tools(client, &format!("{tool} to be listed"), |n| has(n, tool));
    assert_eq!(
        text(&call_ok(client, tool, json!({"text": "late"}))),
        "late"
    );
}

#[test]
fn a_plugin_folder_created_after_the_start_is_watched_when_it_appears() {
    // `wasmgate check` promises it: "plugins.dir ... is not a directory (yet); plugins
    // will be loaded when it appears".
    let (mut client, dir) = start_before_folders("late-dir", "dir = \"{dir}/later\"");
    std::fs::create_dir(dir.join("later")).unwrap();
    replace_atomically(&dir.join("later/echo.wasm"), &fixture("echo"));
    wait_announced(&mut client, "echo__echo");
}

#[test]
fn a_plugin_path_whose_folder_does_not_exist_yet_is_loaded_after_the_first_build() {
    // The dev loop of plugins/README.md before the first build: `target/` is not there yet.
    // The config check says "... does not exist (yet); it will be loaded when it appears".
    let (mut client, dir) = start_before_folders(
        "late-path",
        "[plugins.echo]\npath = \"{dir}/target/wasm32-wasip2/release/echo.wasm\"",
    );
    let release = dir.join("target/wasm32-wasip2/release");
    std::fs::create_dir_all(&release).unwrap();
    replace_atomically(&release.join("echo.wasm"), &fixture("echo"));
    wait_announced(&mut client, "echo__echo");
}
