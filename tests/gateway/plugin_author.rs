//! What a plugin author hits: `plugin call` with settings and several calls on one
//! instance, `plugin build` leaving its compile in the cache, `dev` telling the client
//! the compiler's first errors, and the hint a missing grant's error number gets.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{
    Client, TestDir, fixture_path, run_cli, run_cli_with_env, wait_event, wasmgate,
};
use crate::plugin_cli::shared_target;

const LIMIT: Duration = Duration::from_secs(60);
/// A fresh crate's first build compiles wit-bindgen and its dependencies.
const BUILD_LIMIT: Duration = Duration::from_secs(900);

fn echo() -> String {
    fixture_path("echo").to_str().unwrap().to_owned()
}

/// Each stdout line as JSON.
fn lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn texts(results: &[Value]) -> Vec<&str> {
    results
        .iter()
        .map(|r| r["content"][0]["text"].as_str().unwrap_or("-"))
        .collect()
}

/// `--config KEY=VALUE` reaches `host.config` (it used to be taken for the gateway's
/// config file, and dropped); `--repeat` and `--script` make their calls on one instance,
/// so `count` counts up, one result a line.
#[test]
fn plugin_call_applies_settings_and_keeps_one_instance() {
    let dir = TestDir::new("call-settings");
    let echo = echo();
    let key = r#"{"key": "greeting"}"#;
    let out = run_cli(
        &[
            "plugin",
            "call",
            &echo,
            "config",
            key,
            "--config",
            "greeting=hi",
            "--config",
            "other=x",
        ],
        &dir.path,
        LIMIT,
    );
    out.assert_exit(0);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["content"][0]["text"], "hi", "{result}");
    // A file where a setting belongs: said, not ignored.
    let out = run_cli(
        &[
            "plugin", "call", &echo, "config", key, "--config", "gw.toml",
        ],
        &dir.path,
        LIMIT,
    );
    out.assert_exit(2);
    assert!(
        out.stderr.contains("--config gw.toml: write KEY=VALUE"),
        "{}",
        out.stderr
    );

    let out = run_cli(
        &["plugin", "call", &echo, "count", "--repeat", "3"],
        &dir.path,
        LIMIT,
    );
    out.assert_exit(0);
    assert_eq!(
        texts(&lines(&out.stdout)),
        ["1", "2", "3"],
        "{}",
        out.stdout
    );

    let script = dir.write(
        "calls.jsonl",
        "{\"tool\": \"count\"}\n\n{\"tool\": \"config\", \"arguments\": {\"key\": \"greeting\"}}\n\
         {\"tool\": \"count\", \"arguments\": {}}\n{\"tool\": \"fail\"}\n{\"tool\": \"count\"}\n",
    );
    let out = run_cli(
        &[
            "plugin",
            "call",
            &echo,
            "--script",
            script.to_str().unwrap(),
            "--config",
            "greeting=hey",
        ],
        &dir.path,
        LIMIT,
    );
    // One call failed: exit 1, and the run went on.
    out.assert_exit(1);
    let results = lines(&out.stdout);
    assert_eq!(
        texts(&results),
        ["1", "hey", "2", "fail: requested failure", "3"],
        "{}",
        out.stdout
    );
    assert_eq!(results[3]["isError"], true);

    // From stdin, and a line that is no call stops the run there, saying which.
    let mut child = Command::new(wasmgate())
        .args(["plugin", "call", &echo, "--script", "-"])
        .current_dir(&dir.path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(
            b"{\"tool\": \"count\"}\n{\"tool\": \"count\"}\nnot json\n{\"tool\": \"count\"}\n",
        )
        .unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(texts(&lines(&stdout)), ["1", "2"], "{stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("script line 3: "), "{stderr}");

    // A tool the plugin lacks, named in the script: exit 2, with what it has.
    let script = dir.write("bad.jsonl", "{\"tool\": \"nope\"}\n");
    let out = run_cli(
        &[
            "plugin",
            "call",
            &echo,
            "--script",
            script.to_str().unwrap(),
        ],
        &dir.path,
        LIMIT,
    );
    out.assert_exit(2);
    assert!(out.stderr.contains("no tool `nope`"), "{}", out.stderr);
}

/// A file a plugin cannot open for want of a grant: the error result says which grant.
#[test]
fn a_missing_grant_is_named_after_the_error_number() {
    let dir = TestDir::new("errno-hint");
    let out = run_cli(
        &[
            "plugin",
            "call",
            &echo(),
            "read",
            r#"{"path": "/data/a.txt"}"#,
        ],
        &dir.path,
        LIMIT,
    );
    out.assert_exit(1);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("(os error 44)"), "{text}");
    assert!(
        text.contains("is its directory granted? (allow_dirs"),
        "{text}"
    );

    // A write under a read-only grant: the hint says rw.
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let grant = format!("{}:/data", data.display());
    let out = run_cli(
        &[
            "plugin",
            "call",
            &echo(),
            "write",
            r#"{"path": "/data/b.txt", "text": "x"}"#,
            "--allow-dir",
            &grant,
        ],
        &dir.path,
        LIMIT,
    );
    out.assert_exit(1);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("read-write grant"), "{text}");
}

/// A JavaScript project whose `componentize-js` (in `node_modules/.bin`) is a script: it
/// copies the `echo` fixture to `fake_js.wasm`, or, when app.js says `BROKEN`, prints a
/// compiler's error lines among others and fails.
fn fake_js_project(dir: &TestDir) -> PathBuf {
    let proj = dir.join("proj");
    std::fs::create_dir_all(proj.join("wit")).unwrap();
    std::fs::create_dir_all(proj.join("node_modules/.bin")).unwrap();
    std::fs::write(proj.join("package.json"), r#"{"name": "fake-js"}"#).unwrap();
    std::fs::write(proj.join("app.js"), "// the tool\n").unwrap();
    let script = format!(
        "#!/bin/sh\n\
         if grep -q BROKEN app.js; then\n\
           echo 'Compiling app.js'\n\
           echo 'app.js:3:7: SyntaxError: Unexpected token' >&2\n\
           echo '  at parse (engine.js:10:2)' >&2\n\
           exit 1\n\
         fi\n\
         cp {plugin:?} \"$6\"\n",
        plugin = fixture_path("echo"),
    );
    let bin = proj.join("node_modules/.bin/componentize-js");
    std::fs::write(&bin, script).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    proj
}

/// `plugin build` compiles the component once: its check stores the compiled code, and
/// the gateway that serves the build loads it from the cache (`cached` in the event).
#[test]
fn plugin_build_leaves_its_compile_in_the_cache() {
    let dir = TestDir::new("build-cache");
    fake_js_project(&dir);
    let cache = dir.join("cache");
    let env = [("XDG_CACHE_HOME", cache.to_str().unwrap())];
    let out = run_cli_with_env(&["plugin", "build", "proj"], &dir.path, &env, LIMIT);
    out.assert_exit(0);
    assert!(out.stdout.contains("compile: "), "{}", out.stdout);
    let mut client = Client::spawn_with_env(&["--plugin", "proj/fake_js.wasm"], dir, &env);
    client.initialize();
    let event = wait_event(&mut client, "plugin.loaded", "fake_js");
    assert_eq!(event["cached"], true, "{event}");
}

/// A build that fails under `dev` tells the client its first errors (file and line), not
/// only that it failed; the tool's other lines stay on stderr.
#[test]
fn dev_tells_the_client_a_tools_first_errors() {
    let dir = TestDir::new("dev-errors");
    let proj = fake_js_project(&dir);
    let mut client = Client::spawn(&["dev", "proj"], dir);
    client.initialize();
    client.call("fake_js__echo", json!({"text": "up"}));
    std::fs::write(proj.join("app.js"), "BROKEN\n").unwrap();
    let told = client
        .take(LIMIT, |m| {
            m["method"] == "notifications/message" && m["params"]["logger"] == "wasmgate dev"
        })
        .expect("the failed build is told to the client");
    assert_eq!(told["params"]["level"], "error", "{told}");
    let data = told["params"]["data"].as_str().unwrap();
    assert!(data.contains("componentize-js failed; 2 errors"), "{data}");
    assert!(
        data.contains("\napp.js:3:7: SyntaxError: Unexpected token\n"),
        "{data}"
    );
    assert!(!data.contains("Compiling app.js"), "{data}");
    assert!(client.stderr().contains("Compiling app.js"));
}

/// A real broken edit of the Rust template under `dev`: the client's log message names
/// the file, line and column, and the compiler's message.
#[test]
fn dev_tells_the_client_where_rust_fails_to_compile() {
    let dir = TestDir::new("dev-rust-errors");
    let target = shared_target();
    let env = [("CARGO_TARGET_DIR", target.to_str().unwrap())];
    run_cli(
        &["plugin", "new", "dev_errors", "--dir", "src_dir"],
        &dir.path,
        LIMIT,
    )
    .assert_exit(0);
    // Built once ahead, so that the gateway's start is not a cold build.
    run_cli_with_env(
        &["plugin", "build", "src_dir"],
        &dir.path,
        &env,
        BUILD_LIMIT,
    )
    .assert_exit(0);
    let source = dir.join("src_dir/src/lib.rs");
    let mut client = Client::spawn_with_env(&["dev", "src_dir"], dir, &env);
    client.initialize();
    let text = std::fs::read_to_string(&source).unwrap();
    let line = text
        .lines()
        .position(|l| l.contains("let name = args.name;"))
        .unwrap()
        + 1;
    std::fs::write(
        &source,
        text.replace("let name = args.name;", "let name = args.nam;"),
    )
    .unwrap();
    let told = client
        .take(BUILD_LIMIT, |m| {
            m["method"] == "notifications/message" && m["params"]["logger"] == "wasmgate dev"
        })
        .expect("the failed build is told to the client");
    assert_eq!(told["params"]["level"], "error", "{told}");
    let data = told["params"]["data"].as_str().unwrap();
    assert!(
        data.contains(&format!("\nsrc/lib.rs:{line}:")),
        "line {line}: {data}"
    );
    assert!(data.contains("error[E0609]: no field `nam`"), "{data}");
    assert!(data.len() < 2500, "{data}");
    // It starts with the release build there is, and rebuilds with the fast overrides.
    let stderr = client.stderr();
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("cargo build --release"))
            && stderr.contains("CARGO_PROFILE_RELEASE_LTO=false "),
        "{stderr}"
    );
}

/// One HTTP/1.1 exchange on 127.0.0.1: the request as the server read it (request line,
/// headers, body), answered with 201 and `seen` as the body.
fn one_request_server() -> (u16, std::thread::JoinHandle<String>) {
    use std::io::Read;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let thread = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut request = Vec::new();
        let mut chunk = [0u8; 4096];
        let head_end = loop {
            if let Some(at) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            let n = stream.read(&mut chunk).unwrap();
            assert!(n > 0, "the request ended early");
            request.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&request[..head_end]).to_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .map_or(0, |n| n.trim().parse().unwrap());
        while request.len() < head_end + length {
            let n = stream.read(&mut chunk).unwrap();
            assert!(n > 0, "the body ended early");
            request.extend_from_slice(&chunk[..n]);
        }
        let seen = String::from_utf8_lossy(&request).into_owned();
        let response = format!(
            "HTTP/1.1 201 Created\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{seen}",
            seen.len()
        );
        stream.write_all(response.as_bytes()).unwrap();
        seen
    });
    (port, thread)
}

/// The SDK's `http::request`: the method, headers and body reach the server, within the
/// grant; without it, nothing is sent.
#[test]
fn the_sdk_sends_any_method_with_headers_and_a_body() {
    let dir = TestDir::new("sdk-http");
    let (port, server) = one_request_server();
    let url = format!("http://127.0.0.1:{port}/notes?x=1");
    let arguments = json!({
        "method": "PUT",
        "url": url,
        "headers": {"content-type": "application/json", "x-test": "yes"},
        "body": "{\"text\": \"milk\"}",
    })
    .to_string();
    let denied = run_cli(
        &["plugin", "call", &echo(), "http_request", &arguments],
        &dir.path,
        LIMIT,
    );
    denied.assert_exit(1);
    assert!(denied.stdout.contains("allow_hosts"), "{}", denied.stdout);
    assert!(
        denied.stdout.contains("PUT http://127.0.0.1"),
        "{}",
        denied.stdout
    );

    let grant = format!("127.0.0.1:{port}");
    let out = run_cli(
        &[
            "plugin",
            "call",
            &echo(),
            "http_request",
            &arguments,
            "--allow-host",
            &grant,
        ],
        &dir.path,
        LIMIT,
    );
    out.assert_exit(0);
    let seen = server.join().unwrap();
    assert!(seen.starts_with("PUT /notes?x=1 HTTP/1.1\r\n"), "{seen}");
    let lower = seen.to_lowercase();
    for header in [
        "content-type: application/json\r\n",
        "x-test: yes\r\n",
        "content-length: 16\r\n",
    ] {
        assert!(lower.contains(header), "{header}: {seen}");
    }
    assert!(seen.ends_with("\r\n\r\n{\"text\": \"milk\"}"), "{seen}");
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    let page = &result["structuredContent"];
    assert_eq!(page["status"], 201, "{result}");
    assert_eq!(page["body"], seen.as_str(), "{result}");
}
