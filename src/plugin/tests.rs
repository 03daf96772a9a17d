//! The plugin host against the real fixture components (tests/plugins) and
//! shipped plugins (plugins/), built for wasm32-wasip2.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use wasmtime::Store;

use super::discovery::{Desired, desired_plugins};
use super::sandbox::StoreState;
use super::version::Version;
use super::*;
use crate::config::{DirGrant, PluginConfig, PluginLimits, PluginsConfig, ToolFilter};
use crate::test_support::TempDir;

impl PluginHost {
    /// `call`, its reply as a JSON value.
    async fn call_value(
        &self,
        plugin: &str,
        tool: &str,
        arguments: Value,
        ctx: CallContext,
    ) -> Result<Value, PluginError> {
        self.call(plugin, tool, arguments, ctx)
            .await
            .map(convert::Reply::into_value)
    }
}

pub(super) const ECHO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/plugins/target/wasm32-wasip2/release/echo.wasm"
);
const MINIMAL: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/plugins/target/wasm32-wasip2/release/minimal.wasm"
);
const FAULTY: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/plugins/target/wasm32-wasip2/release/faulty.wasm"
);
const WRONGWORLD: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/plugins/target/wasm32-wasip2/release/wrongworld.wasm"
);
const HASH: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/plugins/target/wasm32-wasip2/release/hash.wasm"
);
const JSON: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/plugins/target/wasm32-wasip2/release/json.wasm"
);

/// How long a test waits for an event before it fails.
pub(super) const EVENT_WAIT: Duration = Duration::from_secs(60);

fn entry(name: &str, path: Option<&str>) -> PluginConfig {
    PluginConfig::plain(
        name,
        path.map(PathBuf::from),
        name.into(),
        PluginLimits::default(),
    )
}

pub(super) fn config(entries: Vec<PluginConfig>) -> PluginsConfig {
    PluginsConfig {
        dir: None,
        watch: false,
        cache_dir: None,
        data_dir: None,
        store_size: crate::config::DEFAULT_STORE_SIZE,
        bundled: false,
        limits: PluginLimits::default(),
        compile_timeout: crate::config::DEFAULT_COMPILE_TIMEOUT,
        total_memory: 8 << 30,
        oci_insecure: Vec::new(),
        plugins: entries.into_iter().map(|e| (e.name.clone(), e)).collect(),
    }
}

pub(super) async fn start(
    config: &PluginsConfig,
) -> (Arc<PluginHost>, mpsc::UnboundedReceiver<PluginEvent>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let host = PluginHost::start(config, &[], tx)
        .await
        .expect("host starts");
    (host, rx)
}

/// The `faulty` fixture (spin, hog, trap) beside `echo`, with default limits.
async fn start_faulty_and_echo() -> (Arc<PluginHost>, mpsc::UnboundedReceiver<PluginEvent>) {
    start(&config(vec![
        entry("faulty", Some(FAULTY)),
        entry("echo", Some(ECHO)),
    ]))
    .await
}

async fn start_one(entry: PluginConfig) -> Arc<PluginHost> {
    let (host, mut rx) = start(&config(vec![entry])).await;
    match rx.try_recv() {
        Ok(PluginEvent::Loaded { .. }) => {}
        other => panic!("expected Loaded, got {other:?}"),
    }
    host
}

fn ctx() -> CallContext {
    CallContext {
        timeout: Duration::from_secs(30),
        progress: None,
        log: None,
        trace_id: "test".into(),
        session: None,
        ask: None,
        ask_timeout: Duration::from_secs(30),
        principal: None,
        traceparent: None,
    }
}

fn ctx_timeout(timeout: Duration) -> CallContext {
    CallContext { timeout, ..ctx() }
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {result}"))
}

fn is_error(result: &Value) -> bool {
    result["isError"] == true
}

async fn next_event(rx: &mut mpsc::UnboundedReceiver<PluginEvent>) -> PluginEvent {
    tokio::time::timeout(EVENT_WAIT, rx.recv())
        .await
        .expect("event in time")
        .expect("event channel open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loads_lists_and_calls_echo() {
    let (host, mut rx) = start(&config(vec![entry("echo", Some(ECHO))])).await;
    match rx.try_recv().unwrap() {
        PluginEvent::Loaded {
            name,
            tools,
            compile_ms,
            ..
        } => {
            assert_eq!(name, "echo");
            assert_eq!(tools, 18);
            assert!(compile_ms.is_some(), "no cache configured: compiled");
        }
        other => panic!("{other:?}"),
    }
    let plugins = host.plugins();
    assert_eq!(plugins.len(), 1);
    let info = &plugins[0];
    assert_eq!(info.namespace, "echo");
    assert_eq!(info.path.as_deref(), Some(Path::new(ECHO)));
    assert_eq!(info.digest.len(), 64);
    let echo = info.tools.iter().find(|t| t["name"] == "echo").unwrap();
    assert!(echo["inputSchema"].is_object());
    assert_eq!(echo["annotations"]["readOnlyHint"], true);
    let kinds = info.tools.iter().find(|t| t["name"] == "kinds").unwrap();
    assert!(kinds["outputSchema"].is_object());

    let result = host
        .call_value("echo", "echo", json!({"text": "hello"}), ctx())
        .await
        .unwrap();
    assert_eq!(text(&result), "hello");
    assert!(!is_error(&result));
    assert_eq!(host.plugins()[0].calls, 1);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_content_kind_and_structured_output() {
    let host = start_one(entry("echo", Some(ECHO))).await;
    let result = host
        .call_value("echo", "kinds", json!({}), ctx())
        .await
        .unwrap();
    let content = result["content"].as_array().unwrap();
    assert_eq!(content.len(), 5);
    assert_eq!(content[0], json!({"type": "text", "text": "text item"}));
    assert_eq!(content[1]["type"], "image");
    assert_eq!(content[1]["mimeType"], "image/png");
    let png = base64::engine::general_purpose::STANDARD
        .decode(content[1]["data"].as_str().unwrap())
        .unwrap();
    assert_eq!(&png[1..4], b"PNG");
    assert_eq!(content[2]["type"], "audio");
    assert_eq!(content[2]["mimeType"], "audio/wav");
    assert_eq!(
        content[3],
        json!({"type": "resource", "resource": {"uri": "test://echo/text", "mimeType": "text/plain", "text": "resource text"}})
    );
    assert_eq!(
        content[4],
        json!({"type": "resource", "resource": {"uri": "test://echo/blob", "mimeType": "application/octet-stream", "blob": "AAECA/8="}})
    );
    assert_eq!(result["structuredContent"]["count"], 5);
    assert!(!is_error(&result));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_errors_map_to_the_gateway() {
    let host = start_one(entry("echo", Some(ECHO))).await;
    match host.call_value("echo", "bad_args", json!({}), ctx()).await {
        Err(PluginError::InvalidArguments { message, .. }) => {
            assert_eq!(message, "bad_args: rejected")
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        host.call_value("echo", "nope", json!({}), ctx()).await,
        Err(PluginError::UnknownTool { .. })
    ));
    assert!(matches!(
        host.call_value("none", "echo", json!({}), ctx()).await,
        Err(PluginError::NotFound(_))
    ));
    let failed = host
        .call_value("echo", "fail", json!({}), ctx())
        .await
        .unwrap();
    assert!(is_error(&failed));
    assert_eq!(text(&failed), "fail: requested failure");
    let reported = host
        .call_value("echo", "is_error", json!({}), ctx())
        .await
        .unwrap();
    assert!(is_error(&reported));
    assert_eq!(text(&reported), "is_error: reported error");
    let printed = host
        .call_value("echo", "stdout", json!({"text": "to the log"}), ctx())
        .await
        .unwrap();
    assert_eq!(text(&printed), "printed");
    let logged = host
        .call_value("echo", "log", json!({"message": "to the log"}), ctx())
        .await
        .unwrap();
    assert_eq!(text(&logged), "logged");
}

/// What a progress sink was given: progress, total, message.
type Reports = Arc<StdMutex<Vec<(f64, Option<f64>, Option<String>)>>>;

/// A call context whose progress sink records what it is given.
fn recording_progress() -> (CallContext, Reports) {
    let seen = Reports::default();
    let sink_seen = seen.clone();
    let sink: ProgressSink = Arc::new(move |p, t, m| sink_seen.lock().unwrap().push((p, t, m)));
    let ctx = CallContext {
        progress: Some(sink),
        ..ctx()
    };
    (ctx, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reaches_the_sink() {
    let host = start_one(entry("echo", Some(ECHO))).await;
    let (ctx, seen) = recording_progress();
    let result = host
        .call_value("echo", "progress", json!({"steps": 3}), ctx)
        .await
        .unwrap();
    assert_eq!(text(&result), "done 3");
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[2], (3.0, Some(3.0), Some("step 3 of 3".into())));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_values() {
    let mut e = entry("echo", Some(ECHO));
    e.config.insert("greeting".into(), "hi there".into());
    let host = start_one(e).await;
    let set = host
        .call_value("echo", "config", json!({"key": "greeting"}), ctx())
        .await
        .unwrap();
    assert_eq!(text(&set), "hi there");
    let unset = host
        .call_value("echo", "config", json!({"key": "other"}), ctx())
        .await
        .unwrap();
    assert_eq!(text(&unset), "unset");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_only_as_granted() {
    let mut e = entry("echo", Some(ECHO));
    e.allow_env = vec!["PATH".into()];
    let host = start_one(e).await;
    let path = host
        .call_value("echo", "env", json!({"name": "PATH"}), ctx())
        .await
        .unwrap();
    assert_eq!(text(&path), std::env::var("PATH").unwrap());
    assert!(std::env::var("HOME").is_ok());
    let home = host
        .call_value("echo", "env", json!({"name": "HOME"}), ctx())
        .await
        .unwrap();
    assert_eq!(text(&home), "unset");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directory_grants() {
    let tmp = TempDir::new("wasmgate-plugin-test-");
    let ro = tmp.path().join("ro");
    let rw = tmp.path().join("rw");
    std::fs::create_dir_all(&ro).unwrap();
    std::fs::create_dir_all(&rw).unwrap();
    std::fs::write(ro.join("hello.txt"), "hello from ro").unwrap();
    std::fs::write(tmp.path().join("secret.txt"), "secret").unwrap();
    std::os::unix::fs::symlink(tmp.path().join("secret.txt"), ro.join("link")).unwrap();
    std::os::unix::fs::symlink("../secret.txt", ro.join("rel-link")).unwrap();

    let mut e = entry("echo", Some(ECHO));
    e.allow_dirs = vec![
        DirGrant {
            host: ro.clone(),
            guest: "/data".into(),
            read_only: true,
            expose_gateway_files: false,
        },
        DirGrant {
            host: rw.clone(),
            guest: "/out".into(),
            read_only: false,
            expose_gateway_files: false,
        },
    ];
    let host = start_one(e).await;
    let call = |tool: &'static str, args: Value| {
        let host = host.clone();
        async move { host.call_value("echo", tool, args, ctx()).await.unwrap() }
    };

    let read = call("read", json!({"path": "/data/hello.txt"})).await;
    assert_eq!(text(&read), "hello from ro");
    for path in [
        "/secret.txt",
        "/data/../secret.txt",
        "/data/link",
        "/data/rel-link",
        "/etc/passwd",
    ] {
        let denied = call("read", json!({"path": path})).await;
        assert!(is_error(&denied), "read {path} must fail: {denied}");
    }
    let write_ro = call("write", json!({"path": "/data/new.txt", "text": "x"})).await;
    assert!(is_error(&write_ro), "{write_ro}");
    assert!(!ro.join("new.txt").exists());
    let write_escape = call("write", json!({"path": "/out/../ro/new.txt", "text": "x"})).await;
    assert!(is_error(&write_escape), "{write_escape}");

    let written = call("write", json!({"path": "/out/new.txt", "text": "fresh"})).await;
    assert_eq!(text(&written), "wrote 5");
    assert_eq!(
        std::fs::read_to_string(rw.join("new.txt")).unwrap(),
        "fresh"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_to_a_host_not_allowed_is_denied() {
    let mut e = entry("echo", Some(ECHO));
    e.allow_hosts = vec!["allowed.example.test".into()];
    let host = start_one(e).await;
    for url in [
        "http://example.com/",
        "http://127.0.0.1:9/",
        "https://evil.allowed.example.test/",
    ] {
        let result = host
            .call_value("echo", "http", json!({"url": url}), ctx())
            .await
            .unwrap();
        assert!(is_error(&result), "{result}");
        assert!(text(&result).to_lowercase().contains("denied"), "{result}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_to_an_allowed_host() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 1024];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = socket.read(&mut buf).await.unwrap();
            assert!(n > 0);
            request.extend_from_slice(&buf[..n]);
        }
        socket
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
            .await
            .unwrap();
        String::from_utf8_lossy(&request).into_owned()
    });
    let mut e = entry("echo", Some(ECHO));
    e.allow_hosts = vec![format!("127.0.0.1:{port}")];
    let host = start_one(e).await;
    let result = host
        .call_value(
            "echo",
            "http",
            json!({"url": format!("http://127.0.0.1:{port}/path")}),
            ctx(),
        )
        .await
        .unwrap();
    assert!(!is_error(&result), "{result}");
    assert_eq!(result["structuredContent"]["status"], 200);
    assert_eq!(result["structuredContent"]["body"], "hello");
    let request = server.await.unwrap();
    assert!(request.starts_with("GET /path HTTP/1.1"), "{request}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spin_times_out_while_other_calls_are_served() {
    let (host, _rx) = start_faulty_and_echo().await;
    let started = Instant::now();
    let spinner = {
        let host = host.clone();
        tokio::spawn(async move {
            host.call_value(
                "faulty",
                "spin",
                json!({}),
                ctx_timeout(Duration::from_secs(2)),
            )
            .await
        })
    };
    // Both workers may be running guests: the spinner must yield, so these
    // calls finish long before its deadline.
    for i in 0..5 {
        let echoed = host
            .call_value("echo", "echo", json!({"text": format!("n{i}")}), ctx())
            .await
            .unwrap();
        assert_eq!(text(&echoed), format!("n{i}"));
        let ok = host
            .call_value("faulty", "ok", json!({}), ctx())
            .await
            .unwrap();
        assert_eq!(text(&ok), "ok");
    }
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "served while spinning: {:?}",
        started.elapsed()
    );
    let result = spinner.await.unwrap().unwrap();
    let elapsed = started.elapsed();
    assert!(is_error(&result));
    assert_eq!(
        text(&result),
        "plugin `faulty` exceeded its time limit of 2s"
    );
    assert!(
        elapsed >= Duration::from_secs(2) && elapsed < Duration::from_secs(4),
        "{elapsed:?}"
    );
    let info = host
        .plugins()
        .into_iter()
        .find(|p| p.name == "faulty")
        .unwrap();
    assert_eq!(info.failures, 1);
    assert!(info.last_error.unwrap().contains("time limit"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_computes_past_a_tick_starts_its_calls_on_the_plugin_threads() {
    let (host, _rx) = start_faulty_and_echo().await;
    let version = |name: &str| host.calls.slots.load()[name].current.load_full();
    assert!(version("faulty").may_run_inline(false));
    // A spinning call starts here and is stopped by the next tick, up to a tick later;
    // one stopped within half a tick does not count, and it takes two that ran longer.
    let mut calls = 0;
    while version("faulty").may_run_inline(false) {
        calls += 1;
        assert!(
            calls <= 30,
            "a spinning plugin still starts its calls inline"
        );
        let result = host
            .call_value(
                "faulty",
                "spin",
                json!({}),
                ctx_timeout(Duration::from_millis(20)),
            )
            .await
            .unwrap();
        assert!(is_error(&result), "{result}");
    }
    assert!(!version("faulty").may_run_inline(true));
    // Its calls still work, from the plugin threads; other plugins are not affected.
    still_answers(&host).await;
    for _ in 0..3 {
        let echoed = host
            .call_value("echo", "echo", json!({"text": "x"}), ctx())
            .await
            .unwrap();
        assert_eq!(text(&echoed), "x");
    }
    assert!(version("echo").may_run_inline(false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_time_limit_bounds_the_call_timeout() {
    let mut e = entry("faulty", Some(FAULTY));
    e.limits.timeout = Duration::from_millis(300);
    let host = start_one(e).await;
    let result = host
        .call_value("faulty", "spin", json!({}), ctx())
        .await
        .unwrap();
    assert_eq!(
        text(&result),
        "plugin `faulty` exceeded its time limit of 300ms"
    );
}

/// A faulty call leaves nothing behind: the next call, on a fresh instance, answers.
async fn still_answers(host: &PluginHost) {
    let ok = host
        .call_value("faulty", "ok", json!({}), ctx())
        .await
        .unwrap();
    assert_eq!(text(&ok), "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hog_is_stopped_by_the_plugin_memory_limit() {
    let host = start_one(entry("faulty", Some(FAULTY))).await;
    let result = host
        .call_value("faulty", "hog", json!({}), ctx())
        .await
        .unwrap();
    assert!(is_error(&result));
    assert_eq!(
        text(&result),
        "plugin `faulty` ran out of memory (limit 64 MiB)"
    );
    still_answers(&host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trap_then_the_plugin_still_works() {
    let host = start_one(entry("faulty", Some(FAULTY))).await;
    let result = host
        .call_value("faulty", "trap", json!({}), ctx())
        .await
        .unwrap();
    assert!(is_error(&result));
    let message = text(&result);
    // The panic is in `call_tool`, which the build inlined into the bindings' export: the
    // export is named (not a closure of the standard library's panic path on the way).
    assert!(
        message.starts_with(
            "plugin `faulty` trapped: wasm `unreachable` instruction executed in its \
             `call-tool` export (its stderr: "
        ),
        "{message}"
    );
    assert!(
        message.contains("faulty.trap: requested panic"),
        "the panic message, from stderr: {message}"
    );
    still_answers(&host).await;
}

/// Rust's stack lives in linear memory: running off it is an out-of-bounds access, which
/// the message explains, naming the function (the fixture keeps its `name` section).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_recursion_is_a_trap_that_names_the_function() {
    let host = start_one(entry("faulty", Some(FAULTY))).await;
    let result = host
        .call_value("faulty", "recurse", json!({}), ctx())
        .await
        .unwrap();
    assert!(is_error(&result));
    assert_eq!(
        text(&result),
        "plugin `faulty` trapped: out of bounds memory access in `faulty::recurse` (deep \
         recursion ends this way too: a Rust or C plugin's stack is in its linear memory)"
    );
    still_answers(&host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fuel_limit() {
    let mut e = entry("faulty", Some(FAULTY));
    e.limits.fuel = Some(50_000_000);
    let host = start_one(e).await;
    still_answers(&host).await;
    let result = host
        .call_value("faulty", "spin", json!({}), ctx())
        .await
        .unwrap();
    assert_eq!(
        text(&result),
        "plugin `faulty` ran out of fuel (limit 50000000)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_tools_that_never_returns_is_refused() {
    let mut e = entry("faulty", Some(FAULTY));
    e.limits.timeout = Duration::from_millis(300);
    e.config.insert("spin_in_list_tools".into(), "true".into());
    let (host, mut rx) = start(&config(vec![e])).await;
    match rx.try_recv().unwrap() {
        PluginEvent::LoadFailed { name, reason } => {
            assert_eq!(name, "faulty");
            assert!(
                reason.contains("list-tools failed") && reason.contains("time limit"),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(host.plugins().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuses_what_is_not_a_plugin() {
    let tmp = TempDir::new("wasmgate-plugin-test-");
    let random = tmp.path().join("random.wasm");
    std::fs::write(&random, b"certainly not wasm at all").unwrap();
    let core = tmp.path().join("core.wasm");
    std::fs::write(&core, b"\0asm\x01\0\0\0").unwrap();
    let truncated = tmp.path().join("truncated.wasm");
    let echo = std::fs::read(ECHO).unwrap();
    std::fs::write(&truncated, &echo[..echo.len() / 2]).unwrap();
    let entries = vec![
        entry("random", Some(random.to_str().unwrap())),
        entry("core", Some(core.to_str().unwrap())),
        entry("truncated", Some(truncated.to_str().unwrap())),
        entry("wrongworld", Some(WRONGWORLD)),
    ];
    let (host, mut rx) = start(&config(entries)).await;
    let mut reasons = BTreeMap::new();
    while let Ok(event) = rx.try_recv() {
        match event {
            PluginEvent::LoadFailed { name, reason } => {
                reasons.insert(name, reason);
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(host.plugins().is_empty());
    assert_eq!(reasons.len(), 4, "{reasons:?}");
    assert!(
        reasons["random"].contains("random.wasm")
            && reasons["random"].contains("not a WebAssembly file")
    );
    assert!(reasons["core"].contains("core.wasm") && reasons["core"].contains("not a component"));
    assert!(
        reasons["truncated"].contains("truncated.wasm")
            && reasons["truncated"].contains("not a valid component")
    );
    assert!(
        reasons["wrongworld"].contains("wrongworld.wasm"),
        "{}",
        reasons["wrongworld"]
    );
    assert!(
        reasons["wrongworld"].contains("wasmgate:plugin"),
        "{}",
        reasons["wrongworld"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_skips_compilation_and_survives_damage() {
    let tmp = TempDir::new("wasmgate-plugin-test-");
    let mut cfg = config(vec![entry("echo", Some(ECHO))]);
    cfg.cache_dir = Some(tmp.path().join("cache"));
    let compile_ms = |event: PluginEvent| match event {
        PluginEvent::Loaded { compile_ms, .. } => compile_ms,
        other => panic!("{other:?}"),
    };

    let (first, mut rx) = start(&cfg).await;
    assert!(compile_ms(rx.try_recv().unwrap()).is_some());
    first.shutdown().await;
    drop(first);

    let (second, mut rx) = start(&cfg).await;
    assert_eq!(
        compile_ms(rx.try_recv().unwrap()),
        None,
        "second start loads from the cache"
    );
    let result = second
        .call_value("echo", "echo", json!({"text": "cached"}), ctx())
        .await
        .unwrap();
    assert_eq!(text(&result), "cached");
    second.shutdown().await;

    // Damage every entry: it is recompiled and rewritten, never loaded.
    let entries: Vec<PathBuf> = std::fs::read_dir(tmp.path().join("cache"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let mut bytes = std::fs::read(&entries[0]).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&entries[0], &bytes).unwrap();
    let (third, mut rx) = start(&cfg).await;
    assert!(
        compile_ms(rx.try_recv().unwrap()).is_some(),
        "damaged entry recompiled"
    );
    assert_eq!(
        text(
            &third
                .call_value("echo", "echo", json!({"text": "again"}), ctx())
                .await
                .unwrap()
        ),
        "again"
    );
    third.shutdown().await;

    std::fs::write(&entries[0], b"short").unwrap();
    let (fourth, mut rx) = start(&cfg).await;
    assert!(
        compile_ms(rx.try_recv().unwrap()).is_some(),
        "truncated entry recompiled"
    );
    fourth.shutdown().await;
    let (fifth, mut rx) = start(&cfg).await;
    assert_eq!(
        compile_ms(rx.try_recv().unwrap()),
        None,
        "rewritten entry used"
    );
    fifth.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconfigure_applies_only_what_changed() {
    let mut cfg = config(vec![
        entry("echo", Some(ECHO)),
        entry("faulty", Some(FAULTY)),
    ]);
    let (host, mut rx) = start(&cfg).await;
    assert!(matches!(rx.try_recv().unwrap(), PluginEvent::Loaded { .. }));
    assert!(matches!(rx.try_recv().unwrap(), PluginEvent::Loaded { .. }));

    host.reconfigure(&cfg).await;
    assert!(rx.try_recv().is_err(), "nothing changed, nothing happens");

    cfg.plugins
        .get_mut("echo")
        .unwrap()
        .config
        .insert("greeting".into(), "new".into());
    cfg.plugins.get_mut("echo").unwrap().tool_filter = ToolFilter {
        deny: Some(
            globset::GlobSetBuilder::new()
                .add(globset::Glob::new("k*").unwrap())
                .build()
                .unwrap(),
        ),
        deny_patterns: vec!["k*".into()],
        ..ToolFilter::default()
    };
    cfg.plugins.remove("faulty");
    host.reconfigure(&cfg).await;
    let mut events = [rx.try_recv().unwrap(), rx.try_recv().unwrap()];
    events.sort_by_key(|e| format!("{e:?}"));
    assert_eq!(
        events[0],
        PluginEvent::Reloaded {
            name: "echo".into(),
            tools: 17,
            compile_ms: None,
            total_ms: match &events[0] {
                PluginEvent::Reloaded { total_ms, .. } => *total_ms,
                _ => 0,
            },
            new_code: false,
        }
    );
    assert_eq!(
        events[1],
        PluginEvent::Unloaded {
            name: "faulty".into()
        }
    );
    let greeting = host
        .call_value("echo", "config", json!({"key": "greeting"}), ctx())
        .await
        .unwrap();
    assert_eq!(text(&greeting), "new");
    assert!(matches!(
        host.call_value("echo", "kinds", json!({}), ctx()).await,
        Err(PluginError::UnknownTool { .. })
    ));
}

/// A copy of a component with a custom section appended: other bytes, same behaviour.
fn variant_of(path: &str, tag: u8) -> Vec<u8> {
    let mut bytes = std::fs::read(path).unwrap();
    // custom section: id 0, size, name "pad" (len 3), one payload byte
    bytes.extend_from_slice(&[0, 5, 3, b'p', b'a', b'd', tag]);
    bytes
}

/// Writes `bytes` to `path` the way build tools do: a temp file renamed over it.
fn replace(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("part");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_reload_of_a_plugin_directory() {
    let tmp = TempDir::new("wasmgate-plugin-test-");
    let mut cfg = config(Vec::new());
    cfg.dir = Some(tmp.path().to_path_buf());
    cfg.watch = true;
    let (host, mut rx) = start(&cfg).await;
    assert!(host.plugins().is_empty());

    let plugin = tmp.path().join("tools.wasm");
    std::fs::copy(HASH, &plugin).unwrap();
    match next_event(&mut rx).await {
        PluginEvent::Loaded { name, tools, .. } => assert_eq!((name.as_str(), tools), ("tools", 4)),
        other => panic!("{other:?}"),
    }
    let sha = host
        .call_value("tools", "sha256", json!({"text": "abc"}), ctx())
        .await
        .unwrap();
    assert_eq!(
        sha["structuredContent"]["sha256"],
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );

    replace(&plugin, &std::fs::read(JSON).unwrap());
    match next_event(&mut rx).await {
        PluginEvent::Reloaded { name, .. } => assert_eq!(name, "tools"),
        other => panic!("{other:?}"),
    }
    let info = host.plugins().into_iter().next().unwrap();
    assert!(
        info.tools.iter().all(|t| t["name"] != "sha256"),
        "new tools: {:?}",
        info.tools
    );
    assert!(matches!(
        host.call_value("tools", "sha256", json!({"text": "abc"}), ctx())
            .await,
        Err(PluginError::UnknownTool { .. })
    ));

    // The same bytes again: no reload. A broken build: the old version stays.
    replace(&plugin, &std::fs::read(JSON).unwrap());
    std::fs::write(tmp.path().join("notes.txt"), "not a plugin").unwrap();
    replace(&plugin, b"\0asm\x0d\0\x01\0garbage");
    match next_event(&mut rx).await {
        PluginEvent::ReloadFailed { name, reason } => {
            assert_eq!(name, "tools");
            assert!(reason.contains("tools.wasm"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        host.plugins()[0].digest,
        info.digest,
        "old version still serves"
    );

    std::fs::remove_file(&plugin).unwrap();
    assert_eq!(
        next_event(&mut rx).await,
        PluginEvent::Unloaded {
            name: "tools".into()
        }
    );
    assert!(host.plugins().is_empty());
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_during_reloads_never_fail() {
    let tmp = TempDir::new("wasmgate-plugin-test-");
    let plugin = tmp.path().join("echo.wasm");
    std::fs::copy(ECHO, &plugin).unwrap();
    let mut cfg = config(vec![entry("echo", Some(plugin.to_str().unwrap()))]);
    cfg.watch = true;
    let (host, mut rx) = start(&cfg).await;
    assert!(matches!(rx.try_recv().unwrap(), PluginEvent::Loaded { .. }));

    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut callers = Vec::new();
    for c in 0..3 {
        let host = host.clone();
        let stop = stop.clone();
        callers.push(tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let t = format!("c{c} n{n}");
                let result = host
                    .call_value("echo", "echo", json!({"text": t}), ctx())
                    .await
                    .unwrap();
                assert_eq!(text(&result), t);
                n += 1;
            }
            n
        }));
    }
    let mut digests = std::collections::BTreeSet::new();
    let mut replaced = Vec::new();
    for round in 0..3u8 {
        replaced.push(host.calls.slots.load()["echo"].current.load_full());
        replace(&plugin, &variant_of(ECHO, round));
        match next_event(&mut rx).await {
            PluginEvent::Reloaded { name, tools, .. } => {
                assert_eq!((name.as_str(), tools), ("echo", 18))
            }
            other => panic!("{other:?}"),
        }
        digests.insert(host.plugins()[0].digest.clone());
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut calls = 0;
    for caller in callers {
        calls += caller.await.unwrap();
    }
    assert_eq!(digests.len(), 3);
    assert!(calls > 0);
    assert_eq!(host.plugins()[0].failures, 0);
    // A refill that ran across a reload leaves no instance in the replaced version's pool.
    for version in replaced {
        let deadline = Instant::now() + Duration::from_secs(5);
        while version.pool.is_filling() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(!version.pool.is_filling());
        assert!(
            version.pool.take().is_none(),
            "a replaced version kept a ready instance"
        );
    }
    host.shutdown().await;
}

/// Numbers for the design: compile, cache load, fresh instance per call vs a
/// ready instance. `cargo test measure -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn measure() {
    let tmp = TempDir::new("wasmgate-plugin-test-");
    let mut cfg = config(vec![entry("echo", Some(ECHO))]);
    cfg.cache_dir = Some(tmp.path().to_path_buf());
    let (first, mut rx) = start(&cfg).await;
    println!(
        "echo.wasm: {} KB",
        std::fs::metadata(ECHO).unwrap().len() / 1024
    );
    println!("first load: {:?}", rx.try_recv().unwrap());
    first.shutdown().await;
    drop(first);
    let (host, mut rx) = start(&cfg).await;
    println!("cached load: {:?}", rx.try_recv().unwrap());

    const N: u32 = 500;
    for _ in 0..20 {
        host.call_value("echo", "echo", json!({"text": "warm"}), ctx())
            .await
            .unwrap();
    }
    let started = Instant::now();
    for _ in 0..N {
        host.call_value("echo", "echo", json!({"text": "x"}), ctx())
            .await
            .unwrap();
    }
    let per_call = started.elapsed() / N;
    println!("host.call (fresh store + instantiate + call): {per_call:?}");

    let version = host.calls.slots.load()["echo"].current.load_full();
    let new_store = || {
        let mut store = Store::new(
            &host.calls.engine,
            StoreState::new(&version.name, &version.settings, &host.calls.memory).unwrap(),
        );
        store.limiter(|s| &mut s.memory);
        limits::arm(&mut store, Duration::from_secs(10), false, None).unwrap();
        store
    };
    let started = Instant::now();
    for _ in 0..N {
        let _store = new_store();
    }
    println!(
        "  of which Store::new + WASI ctx: {:?}",
        started.elapsed() / N
    );
    let started = Instant::now();
    let mut ready = Vec::new();
    for _ in 0..100 {
        let mut store = new_store();
        let instance = version
            .code
            .pre
            .tools()
            .instantiate_async(&mut store)
            .await
            .unwrap();
        ready.push((store, instance));
    }
    println!(
        "  of which instantiate_async: {:?}",
        started.elapsed() / 100
    );
    let started = Instant::now();
    for (mut store, instance) in ready {
        instance
            .wasmgate_plugin_tool()
            .call_call_tool(&mut store, "echo", r#"{"text":"x"}"#)
            .await
            .unwrap()
            .unwrap();
    }
    println!("call on a ready instance: {:?}", started.elapsed() / 100);

    // Sequential calls through the pool: each takes a ready instance while
    // the refill runs beside it.
    let started = Instant::now();
    for _ in 0..N {
        host.call_value("echo", "echo", json!({"text": "x"}), ctx())
            .await
            .unwrap();
    }
    println!(
        "host.call with the ready pool (sequential): {:?}",
        started.elapsed() / N
    );
    // Bursts that outrun the refill fall back to instantiating on the spot.
    let started = Instant::now();
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..N {
        let host = host.clone();
        calls.spawn(async move {
            host.call_value("echo", "echo", json!({"text": "x"}), ctx())
                .await
                .unwrap()
        });
    }
    while calls.join_next().await.is_some() {}
    println!(
        "host.call, {N} concurrent: {:?} per call",
        started.elapsed() / N
    );
}

/// Latency of sparse calls (the usual case: a model calls a tool now and
/// then), with and without ready instances.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn measure_pool_latency() {
    let host = start_one(entry("echo", Some(ECHO))).await;
    for pool in [false, true, false, true] {
        host.calls.ready_pool.store(pool, Ordering::Relaxed);
        let mut samples = Vec::new();
        for _ in 0..300 {
            let started = Instant::now();
            host.call_value("echo", "echo", json!({"text": "x"}), ctx())
                .await
                .unwrap();
            samples.push(started.elapsed());
            // Idle time between calls, in which the pool refills.
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        samples.sort();
        println!(
            "pool {pool}: median {:?}, p90 {:?}",
            samples[samples.len() / 2],
            samples[samples.len() * 9 / 10]
        );
    }
}

/// The cost of enabling fuel for every plugin (`consume_fuel` is engine-wide).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn measure_fuel() {
    for fuel in [None, Some(u64::MAX / 2)] {
        let mut e = entry("json", Some(JSON));
        e.limits.fuel = fuel;
        let host = start_one(e).await;
        let doc = json!({"a": (0..2000).map(|i| json!({"k": i, "v": format!("value {i}")})).collect::<Vec<_>>()});
        let tools: Vec<String> = host.plugins()[0]
            .tools
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect();
        let tool = tools
            .iter()
            .find(|t| t.contains("format") || t.contains("pretty"))
            .cloned()
            .unwrap_or(tools[0].clone());
        let args = json!({"json": doc.to_string(), "text": doc.to_string()});
        for _ in 0..5 {
            host.call_value("json", &tool, args.clone(), ctx())
                .await
                .unwrap();
        }
        let started = Instant::now();
        for _ in 0..50 {
            host.call_value("json", &tool, args.clone(), ctx())
                .await
                .unwrap();
        }
        println!(
            "fuel {:?}: json.{tool} on a {} KB document: {:?}",
            fuel.is_some(),
            doc.to_string().len() / 1024,
            started.elapsed() / 50
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_instances_report_to_their_own_call() {
    let host = start_one(entry("echo", Some(ECHO))).await;
    for call in 0..6u32 {
        let (ctx, seen) = recording_progress();
        let steps = call + 1;
        let result = host
            .call_value("echo", "progress", json!({"steps": steps}), ctx)
            .await
            .unwrap();
        assert_eq!(text(&result), format!("done {steps}"));
        assert_eq!(seen.lock().unwrap().len(), steps as usize, "call {call}");
        // No progress sink: reports are dropped, not sent to an earlier call's sink.
        host.call_value("echo", "progress", json!({"steps": 2}), super::tests::ctx())
            .await
            .unwrap();
        assert_eq!(seen.lock().unwrap().len(), steps as usize, "call {call}");
    }
}

/// Ready instances of a big component are warmed with `list-tools`; those of a small
/// one are not; either way each call gets an instance of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_components_get_warmed_ready_instances() {
    async fn listings_seen(host: &PluginHost) -> Vec<String> {
        let mut seen = Vec::new();
        for _ in 0..6 {
            let result = host
                .call_value("echo", "listings", json!({}), ctx())
                .await
                .unwrap();
            seen.push(text(&result).to_string());
            // The next call must find a ready instance: wait until the refill is done.
            let version = host.calls.slots.load()["echo"].current.load_full();
            let deadline = Instant::now() + EVENT_WAIT;
            while version.pool.missing() > 0 {
                assert!(Instant::now() < deadline, "the pool did not refill");
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        seen
    }
    // Small: every call, ready or not, runs on an instance list-tools never ran in.
    let host = start_one(entry("echo", Some(ECHO))).await;
    assert_eq!(listings_seen(&host).await, ["0"; 6]);
    host.shutdown().await;
    // Big (the bar lowered under echo's size for a while; only this test changes it,
    // and the warming is invisible to other tests): the first call instantiates on the
    // spot, the next ones take warmed ready instances, each warmed once.
    pool::BIG_RUNTIME.store(1, Ordering::Relaxed);
    let host = start_one(entry("echo", Some(ECHO))).await;
    assert_eq!(listings_seen(&host).await, ["0", "1", "1", "1", "1", "1"]);
    assert_eq!(host.plugins()[0].failures, 0);
    host.shutdown().await;
    pool::BIG_RUNTIME.store(pool::BIG_RUNTIME_DEFAULT, Ordering::Relaxed);
}

/// Numbers for the ready-instance pool: the first call on a fresh instance against a
/// second call on the same one, after a warming `list-tools`, and after that warming and
/// 10 ms asleep (as a ready instance waits for its call: the caches and TLB go cold on these
/// VMs), for minimal, echo and (when built) the Python plugin.
/// `cargo test --release measure_first_call -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn measure_first_call() {
    let python = concat!(env!("CARGO_MANIFEST_DIR"), "/plugins/python/text/text.wasm");
    let cache = TempDir::new("wasmgate-plugin-test-");
    for (path, tool, args) in [
        (MINIMAL, "echo", r#"{"text":"x"}"#),
        (ECHO, "echo", r#"{"text":"x"}"#),
        (python, "reverse", r#"{"text":"hello"}"#),
    ] {
        if !Path::new(path).is_file() {
            println!("{path}: not built, skipped");
            continue;
        }
        let mut cfg = config(vec![entry("p", Some(path))]);
        cfg.cache_dir = Some(cache.path().to_path_buf());
        let (host, _events) = start(&cfg).await;
        let version = host.calls.slots.load()["p"].current.load_full();
        // Each way of making the first call gets a third of the rounds.
        const N: u32 = 99;
        let (mut instantiate, mut first, mut warmed_first, mut idle_first, mut second) =
            Default::default();
        for i in 0..N {
            let mut store = armed_store(&host, &version);
            let started = Instant::now();
            let instance = version
                .code
                .pre
                .tools()
                .instantiate_async(&mut store)
                .await
                .unwrap();
            instantiate += started.elapsed();
            let way = i % 3;
            if way > 0 {
                instance
                    .wasmgate_plugin_tool()
                    .call_list_tools(&mut store)
                    .await
                    .unwrap();
            }
            if way == 2 {
                // Blocks the thread on purpose: a ready instance's wait, not a task's.
                std::thread::sleep(Duration::from_millis(10));
            }
            let first_total = match way {
                0 => &mut first,
                1 => &mut warmed_first,
                _ => &mut idle_first,
            };
            for (n, total) in [(0, first_total), (1, &mut second)] {
                let started = Instant::now();
                instance
                    .wasmgate_plugin_tool()
                    .call_call_tool(&mut store, tool, args)
                    .await
                    .unwrap()
                    .unwrap();
                *total += started.elapsed() * if n == 0 { 3 } else { 1 };
            }
        }
        let [instantiate, first, warmed_first, idle_first, second]: [Duration; 5] =
            [instantiate, first, warmed_first, idle_first, second].map(|d: Duration| d / N);
        println!(
            "{}: instantiate {instantiate:?}; first call {first:?}, after list-tools {warmed_first:?}, \
             after list-tools and 10 ms idle {idle_first:?}; second call {second:?}",
            Path::new(path).file_name().unwrap().to_string_lossy()
        );
        host.shutdown().await;
    }
}

/// Turning `watch` on reads every file again (one may have changed while nobody watched);
/// a fuel limit added by a reload to a host started without fuel metering is not
/// shown as if it applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_turns_watch_on_rereads_files_and_fuel_waits_for_a_restart() {
    let tmp = TempDir::new("wasmgate-plugin-test-");
    let plugin = tmp.path().join("tools.wasm");
    std::fs::copy(HASH, &plugin).unwrap();
    let mut cfg = config(vec![entry("tools", plugin.to_str())]);
    let (host, mut rx) = start(&cfg).await;
    assert!(matches!(
        next_event(&mut rx).await,
        PluginEvent::Loaded { .. }
    ));

    // Unwatched: the new bytes go unnoticed until watch is turned on.
    replace(&plugin, &std::fs::read(JSON).unwrap());
    cfg.watch = true;
    cfg.plugins.get_mut("tools").unwrap().limits.fuel = Some(1_000);
    host.reconfigure(&cfg).await;
    match next_event(&mut rx).await {
        PluginEvent::Reloaded { new_code, .. } => assert!(new_code),
        other => panic!("{other:?}"),
    }
    let info = host.plugins().into_iter().next().unwrap();
    assert!(
        info.tools.iter().any(|t| t["name"] == "query"),
        "{:?}",
        info.tools
    );
    assert_eq!(info.limits.fuel, None, "no fuel metering in this engine");
    host.shutdown().await;
}

/// A call dropped while its guest computes (the client cancelled it) stops at the next
/// epoch tick and gives its instance back, long before its time limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_call_stops_its_guest() {
    let (host, _rx) = start_faulty_and_echo().await;
    host.calls.ready_pool.store(false, Ordering::Relaxed);
    let all = host.calls.instances.available_permits();
    let spinner = {
        let host = host.clone();
        tokio::spawn(async move { host.call_value("faulty", "spin", json!({}), ctx()).await })
    };
    let deadline = Instant::now() + EVENT_WAIT;
    while host.calls.instances.available_permits() == all {
        assert!(Instant::now() < deadline, "the spinning call never started");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Dropped during its first poll or after it moved to a plugin thread, it stops all the same.
    spinner.abort();
    let dropped = Instant::now();
    while host.calls.instances.available_permits() < all {
        assert!(
            dropped.elapsed() < Duration::from_secs(2),
            "the guest still runs {:?} after its call was dropped (time limit: 10 s)",
            dropped.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    host.shutdown().await;
}

/// Waits for the first event that `wanted` accepts, passing over others.
async fn event_where(
    rx: &mut mpsc::UnboundedReceiver<PluginEvent>,
    wanted: impl Fn(&PluginEvent) -> bool,
) -> PluginEvent {
    loop {
        let event = next_event(rx).await;
        if wanted(&event) {
            return event;
        }
    }
}

/// The watcher loses a folder that is removed or renamed: the host polls for it and
/// watches it again when it is back, as for a folder missing at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watched_folder_removed_or_renamed_is_watched_again_when_it_returns() {
    let tmp = TempDir::new("wasmgate-plugin-test-");
    let dir = tmp.path().join("plugins");
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy(HASH, dir.join("a.wasm")).unwrap();
    let mut cfg = config(Vec::new());
    cfg.dir = Some(dir.clone());
    cfg.watch = true;
    let (host, mut rx) = start(&cfg).await;
    let loaded = |want: &'static str| move |e: &PluginEvent| matches!(e, PluginEvent::Loaded { name, .. } if name == want);
    let unloaded = |want: &'static str| move |e: &PluginEvent| matches!(e, PluginEvent::Unloaded { name } if name == want);
    event_where(&mut rx, loaded("a")).await;

    // Removed (cargo clean, rm -rf) and made again with another plugin in it.
    std::fs::remove_dir_all(&dir).unwrap();
    event_where(&mut rx, unloaded("a")).await;
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy(JSON, dir.join("b.wasm")).unwrap();
    event_where(&mut rx, loaded("b")).await;

    // Renamed away: its plugins go; renamed back: they return.
    let away = tmp.path().join("away");
    std::fs::rename(&dir, &away).unwrap();
    event_where(&mut rx, unloaded("b")).await;
    std::fs::rename(&away, &dir).unwrap();
    event_where(&mut rx, loaded("b")).await;
    assert_eq!(host.plugins().len(), 1);
    host.shutdown().await;
}

/// A reload that changes a plugin's calls-at-once limit takes turns out of use as their
/// calls give them back, and adds them at once.
#[tokio::test]
async fn turns_are_resized_for_a_new_version() {
    let turns = Arc::new(tokio::sync::Semaphore::new(32));
    let held = turns.clone().acquire_many_owned(10).await.unwrap();
    super::version::resize_turns(&turns, 32, 8);
    assert_eq!(
        turns.available_permits(),
        0,
        "22 free ones are gone at once"
    );
    drop(held);
    tokio::time::timeout(EVENT_WAIT, async {
        while turns.available_permits() != 8 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("8 turns once the calls gave theirs back");
    super::version::resize_turns(&turns, 8, 32);
    assert_eq!(turns.available_permits(), 32);
}

/// A guest that reports progress in a loop cannot flood its client: a call passes on
/// 1,000 notifications at once, then 100 a second, and its last progress before the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_forwards_a_burst_of_notifications_then_its_last_progress() {
    let (host, _rx) = start(&config(vec![entry("echo", Some(ECHO))])).await;
    let (ctx, seen) = recording_progress();
    let started = Instant::now();
    let result = host
        .call_value("echo", "progress", json!({"steps": 5000}), ctx)
        .await
        .unwrap();
    let elapsed = started.elapsed().as_secs_f64();
    assert_eq!(text(&result), "done 5000");
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    let most = 1001 + (elapsed * 100.0).ceil() as usize;
    assert!(
        (1001..=most).contains(&seen.len()),
        "{} sent in {elapsed:.3} s",
        seen.len()
    );
    assert_eq!(
        seen.last().unwrap().0,
        5000.0,
        "the last progress is the plugin's last"
    );
    assert!(
        seen.windows(2).all(|w| w[0].0 < w[1].0),
        "progress increases"
    );
    host.shutdown().await;
}

/// Progress MCP clients would refuse is not sent: not a finite number, or not above
/// the last one sent.
#[test]
fn progress_that_is_not_finite_or_goes_back_is_not_sent() {
    let seen = Reports::default();
    let sink_seen = seen.clone();
    let mut ctx = host_impl::HostCtx::new("p".into(), Default::default(), Default::default());
    ctx.sinks.progress = Some(Arc::new(move |p, t, m| {
        sink_seen.lock().unwrap().push((p, t, m))
    }));
    use super::bindings::wasmgate::plugin::host::Host;
    for (progress, total) in [
        (1.0, Some(f64::INFINITY)),
        (f64::NAN, None),
        (5.0, Some(10.0)),
        (2.0, Some(10.0)),
        (f64::INFINITY, None),
        (6.0, None),
    ] {
        ctx.progress(progress, total, None);
    }
    let sent: Vec<(f64, Option<f64>)> = seen.lock().unwrap().iter().map(|r| (r.0, r.1)).collect();
    assert_eq!(sent, [(1.0, None), (5.0, Some(10.0)), (6.0, None)]);
}

/// The floor of a call's CPU on the host side: making a store and an instance, the
/// warming `list-tools` a big runtime's ready instance gets, the call, and the drop that
/// resets its pool slot, one after another on one thread, in steady state (slots reused, as
/// in the gateway under load). The gateway pays all of them per call, partly on the plugin
/// threads. Also for the Python plugin when it is built (fewer rounds).
/// `cargo test --release measure_make_call_drop -- --ignored --nocapture`.
#[tokio::test(flavor = "current_thread")]
#[ignore]
async fn measure_make_call_drop() {
    let python = concat!(env!("CARGO_MANIFEST_DIR"), "/plugins/python/text/text.wasm");
    for (path, tool, args, warm_up, n) in [
        (MINIMAL, "echo", r#"{"text":"x"}"#, 2000, 20000),
        (ECHO, "echo", r#"{"text":"x"}"#, 2000, 20000),
        (python, "reverse", r#"{"text":"hello"}"#, 20, 200),
    ] {
        if !Path::new(path).is_file() {
            println!("{path}: not built, skipped");
            continue;
        }
        let host = start_one(entry("p", Some(path))).await;
        let version = host.calls.slots.load()["p"].current.load_full();
        let mut phases = [Duration::ZERO; 5];
        for round in 0..warm_up + n {
            let t0 = Instant::now();
            let mut store = armed_store(&host, &version);
            let t1 = Instant::now();
            let instance = version
                .code
                .pre
                .tools()
                .instantiate_async(&mut store)
                .await
                .unwrap();
            let t2 = Instant::now();
            if version.code.big_runtime {
                instance
                    .wasmgate_plugin_tool()
                    .call_list_tools(&mut store)
                    .await
                    .unwrap();
            }
            let t3 = Instant::now();
            instance
                .wasmgate_plugin_tool()
                .call_call_tool(&mut store, tool, args)
                .await
                .unwrap()
                .unwrap();
            let t4 = Instant::now();
            drop(store);
            let t5 = Instant::now();
            if round >= warm_up {
                let took = [t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4];
                for (total, d) in phases.iter_mut().zip(took) {
                    *total += d;
                }
            }
        }
        let [store, instantiate, warm, call, drop] = phases.map(|d| d / n);
        println!(
            "{}: store {store:?}, instantiate {instantiate:?}, warming list-tools {warm:?}, \
             call {call:?}, drop {drop:?}, in all {:?}",
            Path::new(path).file_name().unwrap().to_string_lossy(),
            store + instantiate + warm + call + drop
        );
        host.shutdown().await;
    }
}

#[test]
fn an_unknown_tool_error_keeps_what_the_plugin_said() {
    let error = |said: Option<&str>| {
        PluginError::UnknownTool {
            plugin: "walker".into(),
            tool: "fail".into(),
            said: said.map(String::from),
        }
        .to_string()
    };
    assert_eq!(
        error(Some("no_such_tool")),
        "plugin `walker` has no tool `fail`: it answered unknown-tool(\"no_such_tool\")"
    );
    assert_eq!(error(Some("fail")), "plugin `walker` has no tool `fail`");
    assert_eq!(error(None), "plugin `walker` has no tool `fail`");
}

/// Log messages past the budget are dropped, and the client is told how many, before
/// the call's answer; the gateway's log gets as many lines.
#[test]
fn log_messages_past_the_budget_are_counted_for_the_client() {
    let seen: Arc<StdMutex<Vec<(String, String)>>> = Arc::default();
    let sink_seen = seen.clone();
    let log_budget: Arc<StdMutex<crate::telemetry::budget::Budget>> = Arc::default();
    let mut ctx = host_impl::HostCtx::new("p".into(), Default::default(), log_budget.clone());
    ctx.sinks.log = Some(Arc::new(move |level, message| {
        sink_seen
            .lock()
            .unwrap()
            .push((level.to_string(), message.to_string()))
    }));
    use super::bindings::wasmgate::plugin::host::Host;
    for i in 0..1500 {
        ctx.log(super::bindings::Level::Info, format!("line {i}"));
    }
    // The gateway's own log has a budget of the same size.
    let unlogged = log_budget.lock().unwrap().take_dropped();
    assert!((400..=500).contains(&unlogged), "{unlogged}");
    ctx.call_ended();
    let seen = seen.lock().unwrap();
    let (level, note) = seen.last().unwrap();
    assert_eq!(level, "warning");
    let dropped = 1500 - (seen.len() - 1);
    assert!(
        note.contains(&format!(
            "{dropped} log messages of this call were not sent"
        )),
        "{note}"
    );
    assert!(dropped > 400, "{dropped}");
}

/// A fresh store for `version`, armed with a 10 s limit, as the measurements use it.
fn armed_store(host: &PluginHost, version: &Version) -> Store<StoreState> {
    let mut store = host.calls.new_store(version).unwrap();
    limits::arm(&mut store, Duration::from_secs(10), false, None).unwrap();
    store
}

/// The plugin folder's files that are not loaded are named, with why: a name that a
/// configured plugin has, a name with a control character. The others are not.
#[test]
fn passed_over_folder_files_are_named_with_why() {
    let tmp = TempDir::new("wasmgate-plugin-test-");
    let dir = tmp.join("plugins");
    std::fs::create_dir(&dir).unwrap();
    for name in [
        "taken.wasm",
        "free.wasm",
        "line\nbreak.wasm",
        "off.wasm",
        "same.wasm",
    ] {
        std::fs::write(dir.join(name), b"\0asm").unwrap();
    }
    std::fs::create_dir(dir.join("folder.wasm")).unwrap();
    let elsewhere = tmp.join("taken.wasm");
    let mut off = entry("off", Some("/elsewhere/off.wasm"));
    off.disabled = true;
    let same = dir.join("same.wasm");
    let mut cfg = config(vec![
        entry("taken", elsewhere.to_str()),
        off,
        entry("same", same.to_str()),
    ]);
    cfg.dir = Some(dir.clone());
    let Desired {
        plugins,
        passed_over: said,
    } = desired_plugins(&cfg, &[]);
    assert_eq!(
        said,
        vec![
            (
                dir.join("line\nbreak.wasm"),
                "its name holds control characters; rename it".to_string()
            ),
            (
                dir.join("taken.wasm"),
                format!(
                    "plugin `taken` is served from {}, set as its path or by --plugin; rename \
                     this file to serve it as well",
                    elsewhere.display()
                )
            ),
        ]
    );
    // Nor is the line-break name a plugin of the folder.
    assert!(!plugins.contains_key("line\nbreak"));
}
