//! Helpers many test files share: the built plugin components, programs on PATH, and the
//! waits and checks of a gateway serving plugins.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{Client, eventually, text};

/// Bound for what waits on compiling components: a debug gateway on a busy machine
/// (tests run in parallel, each gateway compiling its own plugins) is slow at it.
pub const LOAD_TIMEOUT: Duration = Duration::from_secs(120);

pub const LIST_CHANGED: &str = "notifications/tools/list_changed";

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

/// The path of a test fixture component (`echo`, `faulty`, `minimal`, `wrongworld`, ...).
pub fn fixture_path(name: &str) -> PathBuf {
    component(env!("WASMGATE_TEST_PLUGINS"), name)
}

/// A test fixture component's bytes.
pub fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(fixture_path(name)).expect("read fixture")
}

/// The path of a shipped plugin component (`hash`, `json`, `files`, `fetch`).
pub fn shipped_path(name: &str) -> PathBuf {
    component(env!("WASMGATE_PLUGINS"), name)
}

/// A shipped plugin component's bytes.
pub fn shipped(name: &str) -> Vec<u8> {
    std::fs::read(shipped_path(name)).expect("read shipped plugin")
}

/// Finds `command` on PATH.
pub fn on_path(command: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(command))
        .find(|p| is_executable(p))
}

pub fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The first `tools/list`: the gateway answers it once the plugins are loaded.
pub fn first_list(client: &mut Client) -> Vec<String> {
    let id = client.send_request("tools/list", json!({}));
    let response = client.wait_response(&id, LOAD_TIMEOUT);
    assert!(
        response.get("result").is_some(),
        "tools/list failed: {response}"
    );
    // The whole list (it may have more pages).
    client.tool_names()
}

pub fn plugin_dir(client: &Client) -> PathBuf {
    client.dir.join("plugins")
}

/// A tool call that must succeed: a result without `isError`.
pub fn call_ok(client: &mut Client, tool: &str, arguments: Value) -> Value {
    let result = client.call(tool, arguments.clone());
    assert_ne!(
        result["isError"],
        json!(true),
        "{tool} {arguments} returned an error result: {result}"
    );
    result
}

/// A tool call that must run and fail: a result with `isError: true`; its text.
pub fn call_failed(client: &mut Client, tool: &str, arguments: Value) -> String {
    let result = client.call(tool, arguments.clone());
    assert_eq!(
        result["isError"],
        json!(true),
        "{tool} {arguments} should be an error result: {result}"
    );
    text(&result).to_string()
}

/// The newest event of `event_type` about `source`, waiting for one.
pub fn wait_event(client: &mut Client, event_type: &str, source: &str) -> Value {
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

/// The tool names once they satisfy `want`, waiting for `notifications/tools/list_changed`
/// while they do not.
pub fn wait_tools(
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

pub fn has(names: &[String], name: &str) -> bool {
    names.iter().any(|n| n == name)
}

pub fn backend(client: &mut Client, name: &str) -> Value {
    client.status()["backends"][name].clone()
}
