//! Middleware in the plugin host, against the real `mwtest` fixture (tests/plugins/mwtest):
//! kinds and refusals, `describe`'s bounds, each hook's actions, failures, and versions.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use tokio::sync::mpsc;

use super::discovery::{desired_plugins_with, missing_bundled};
use super::tests::{ECHO, EVENT_WAIT, config, start};
use super::version::Source;
use super::{
    CallContext, Denial, Direction, Edit, HookCall, HookContext, HookError, ListContext, ListEntry,
    Middleware, Outcome, PluginEvent, PluginHost, PluginKind, RequestAction, ResultAction, limits,
    middleware_bindings,
};
use crate::config::{InstanceMode, PluginConfig, PluginLimits};
use crate::test_support::TempDir;

const MWTEST: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/plugins/target/wasm32-wasip2/release/mwtest.wasm"
);
/// A `[[middleware]]` entry for `path` with `settings` as its `config`, shared instances.
fn middleware(name: &str, path: &str, settings: &[(&str, &str)]) -> PluginConfig {
    let mut entry = PluginConfig::plain(
        name,
        Some(PathBuf::from(path)),
        name.into(),
        PluginLimits::default(),
    );
    entry.middleware = true;
    entry.instances.mode = InstanceMode::Shared;
    entry.config = settings
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    entry
}

/// The reasons of the `LoadFailed` events so far, by name.
fn load_failures(rx: &mut mpsc::UnboundedReceiver<PluginEvent>) -> BTreeMap<String, String> {
    let mut reasons = BTreeMap::new();
    while let Ok(event) = rx.try_recv() {
        if let PluginEvent::LoadFailed { name, reason } = event {
            reasons.insert(name, reason);
        }
    }
    reasons
}

/// The host with one middleware `mw` of `mwtest`, configured with `settings`.
async fn start_mw(settings: &[(&str, &str)]) -> Arc<PluginHost> {
    let (host, mut rx) = start(&config(vec![middleware("mw", MWTEST, settings)])).await;
    match rx.try_recv() {
        Ok(PluginEvent::Loaded { tools: 0, .. }) => host,
        other => panic!("expected Loaded with no tools, got {other:?}"),
    }
}

fn request_ctx(target: &str) -> HookContext {
    HookContext {
        method: "tools/call".into(),
        direction: Direction::ToServer,
        target: Some(target.into()),
        route: Some("github".into()),
        principal: None,
        profile: None,
        client_name: Some("test".into()),
        client_version: None,
        era: "2025-11-25".into(),
        trace_id: "t1".into(),
    }
}

const PARAMS: &str = r#"{"name":"github_search","arguments":{"q":"x"}}"#;

/// A hook call with 30 s, whose log lines land in the returned list.
fn logged() -> (HookCall, Arc<StdMutex<Vec<String>>>) {
    let lines = Arc::new(StdMutex::new(Vec::new()));
    let sink = lines.clone();
    let call = HookCall {
        timeout: Duration::from_secs(30),
        session: None,
        log: Some(Arc::new(move |_level, message: &str| {
            sink.lock().unwrap().push(message.to_string())
        })),
    };
    (call, lines)
}

fn call() -> HookCall {
    HookCall::new(Duration::from_secs(30))
}

async fn request(mw: &Middleware) -> Result<RequestAction, HookError> {
    mw.on_request(&request_ctx("github_search"), PARAMS, call())
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_middleware_loads_with_its_interest_and_passes() {
    let host = start_mw(&[
        ("interest.requests", "tools/call,prompts/get"),
        ("interest.names", "github_*"),
    ])
    .await;
    let info = &host.plugins()[0];
    assert_eq!(info.kind, PluginKind::Middleware);
    assert!(info.tools.is_empty());
    let interest = info.interest.as_ref().expect("a middleware's interest");
    assert_eq!(interest.requests, ["tools/call", "prompts/get"]);
    assert_eq!(interest.names, ["github_*"]);
    assert!(interest.results.is_empty() && interest.lists.is_empty());
    let mw = host.middleware("mw").unwrap();
    assert_eq!(mw.name(), "mw");
    assert_eq!(mw.digest(), info.digest);
    assert_eq!(mw.interest(), interest);
    assert_eq!(request(&mw).await.unwrap(), RequestAction::Pass);
    assert_eq!(host.plugins()[0].calls, 1);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kinds_must_match_their_config() {
    let mut as_plugin = middleware("asplugin", MWTEST, &[]);
    as_plugin.middleware = false;
    let entries = vec![
        as_plugin,
        middleware("asmw", ECHO, &[]),
        PluginConfig::plain(
            "echo",
            Some(ECHO.into()),
            "echo".into(),
            PluginLimits::default(),
        ),
    ];
    let (host, mut rx) = start(&config(entries)).await;
    let reasons = load_failures(&mut rx);
    assert!(
        reasons["asplugin"].contains(
            "is a middleware (exports wasmgate:middleware/hooks); use it in a [[middleware]] entry"
        ),
        "{}",
        reasons["asplugin"]
    );
    assert!(
        reasons["asmw"].contains("is a tool plugin, not a middleware"),
        "{}",
        reasons["asmw"]
    );
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    let echo = &host.plugins()[0];
    assert_eq!(
        (echo.kind, echo.interest.is_none()),
        (PluginKind::Tools, true)
    );
    assert!(matches!(
        host.middleware("echo"),
        Err(HookError::NotMiddleware(name)) if name == "echo"
    ));
    assert!(matches!(
        host.middleware("asplugin"),
        Err(HookError::NotLoaded(name)) if name == "asplugin"
    ));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moving_a_plugin_to_the_middleware_chain_is_refused_on_reload() {
    let plugin = PluginConfig::plain("x", Some(ECHO.into()), "x".into(), PluginLimits::default());
    let (host, mut rx) = start(&config(vec![plugin.clone()])).await;
    assert!(matches!(rx.try_recv(), Ok(PluginEvent::Loaded { .. })));
    // The same file, now a [[middleware]] entry: only the settings changed.
    let moved = PluginConfig {
        middleware: true,
        ..plugin
    };
    host.reconfigure(&config(vec![moved])).await;
    match tokio::time::timeout(EVENT_WAIT, rx.recv()).await.unwrap() {
        Some(PluginEvent::ReloadFailed { name, reason }) => {
            assert_eq!(name, "x");
            assert!(
                reason.starts_with("middleware `x` (")
                    && reason.contains("is a tool plugin, not a middleware"),
                "{reason}"
            );
        }
        other => panic!("expected ReloadFailed, got {other:?}"),
    }
    // The tool plugin keeps serving, and says why its new settings were refused.
    let info = &host.plugins()[0];
    assert_eq!(info.kind, PluginKind::Tools);
    assert!(info.reload_error.is_some());
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_is_bounded() {
    let many = vec!["tools/call"; 65].join(",");
    let long = "x".repeat(257);
    let entries = vec![
        middleware("many", MWTEST, &[("interest.requests", &many)]),
        middleware("long", MWTEST, &[("interest.names", &long)]),
        middleware(
            "enough",
            MWTEST,
            &[("interest.requests", &vec!["x"; 64].join(","))],
        ),
    ];
    let (host, mut rx) = start(&config(entries)).await;
    let reasons = load_failures(&mut rx);
    assert!(
        reasons["many"].contains("65 entries in `requests`; a middleware may list 64 at most"),
        "{}",
        reasons["many"]
    );
    assert!(
        reasons["long"].contains("257 bytes in `names`"),
        "{}",
        reasons["long"]
    );
    assert!(
        reasons["long"].starts_with("middleware `long`"),
        "{}",
        reasons["long"]
    );
    assert_eq!(reasons.len(), 2);
    assert_eq!(
        host.middleware("enough").unwrap().interest().requests.len(),
        64
    );
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_actions() {
    let deny = start_mw(&[
        ("request", "deny"),
        ("deny_message", "no secrets here"),
        ("deny_code", "-32042"),
    ])
    .await;
    let mw = deny.middleware("mw").unwrap();
    assert_eq!(
        request(&mw).await.unwrap(),
        RequestAction::Deny(Denial {
            message: "no secrets here".into(),
            code: Some(-32042),
            data: Some(r#"{"middleware":"mwtest"}"#.into()),
        })
    );
    deny.shutdown().await;

    let replace = start_mw(&[("request", "replace")]).await;
    let mw = replace.middleware("mw").unwrap();
    let RequestAction::Replace(params) = request(&mw).await.unwrap() else {
        panic!("not a replace");
    };
    let params: serde_json::Value = serde_json::from_str(&params).unwrap();
    assert_eq!(params["replaced"], 1);
    assert_eq!(params["target"], "github_search");
    assert_eq!(params["arguments"]["q"], "x");
    replace.shutdown().await;

    let answer = start_mw(&[("request", "answer")]).await;
    let mw = answer.middleware("mw").unwrap();
    let RequestAction::Answer(result) = request(&mw).await.unwrap() else {
        panic!("not an answer");
    };
    assert!(
        result.contains("answered by mwtest for tools/call"),
        "{result}"
    );
    answer.shutdown().await;

    // What is not a JSON object is refused, naming the middleware and the hook.
    let bad = start_mw(&[("request", "replace"), ("replace_with", "[1, 2]")]).await;
    let mw = bad.middleware("mw").unwrap();
    let error = request(&mw).await.unwrap_err();
    let said = error.to_string();
    assert!(matches!(error, HookError::Failed { .. }), "{error:?}");
    assert!(
        said.starts_with(
            "middleware `mw` on-request answered replace with text that is not a JSON object"
        ),
        "{said}"
    );
    assert_eq!(bad.plugins()[0].failures, 1);
    assert_eq!(bad.plugins()[0].last_error.as_deref(), Some(said.as_str()));
    bad.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn result_actions() {
    let outcome = Outcome::Success(r#"{"content":[]}"#.into());
    let ctx = request_ctx("github_search");
    for (setting, check) in [
        ("pass", "pass"),
        ("replace", "replaced by mwtest: success after 1234 us"),
        ("deny", "denied by mwtest"),
    ] {
        let host = start_mw(&[("result", setting)]).await;
        let mw = host.middleware("mw").unwrap();
        let action = mw
            .on_result(&ctx, PARAMS, &outcome, 1234, call())
            .await
            .unwrap();
        match action {
            ResultAction::Pass => assert_eq!(check, "pass"),
            ResultAction::Replace(text) => assert!(text.contains(check), "{text}"),
            ResultAction::Deny(denial) => assert_eq!(denial.message, check),
        }
        host.shutdown().await;
    }
    let host = start_mw(&[("result", "replace")]).await;
    let mw = host.middleware("mw").unwrap();
    let failure = Outcome::Failure(r#"{"code":-32603,"message":"x"}"#.into());
    let ResultAction::Replace(text) = mw
        .on_result(&ctx, PARAMS, &failure, 5, call())
        .await
        .unwrap()
    else {
        panic!("not a replace");
    };
    assert!(text.contains("failure after 5 us"), "{text}");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_edits() {
    let entries: Vec<ListEntry> = ["github_search", "github_issue"]
        .into_iter()
        .map(|name| ListEntry {
            name: name.into(),
            route: Some("github".into()),
            definition: format!(r#"{{"name":"{name}","inputSchema":{{"type":"object"}}}}"#),
        })
        .collect();
    let ctx = ListContext {
        method: "tools/list".into(),
        profile: None,
    };
    let cases = [
        (
            "hide:github_issue",
            Edit {
                name: "github_issue".into(),
                hide: true,
                ..Edit::default()
            },
        ),
        (
            "rename:github_search=search",
            Edit {
                name: "github_search".into(),
                rename: Some("search".into()),
                ..Edit::default()
            },
        ),
        (
            "describe:github_search=Searches code.",
            Edit {
                name: "github_search".into(),
                description: Some("Searches code.".into()),
                ..Edit::default()
            },
        ),
    ];
    for (rule, edit) in cases {
        let host = start_mw(&[("list", rule)]).await;
        let mw = host.middleware("mw").unwrap();
        let edits = mw.on_list(&ctx, &entries, call()).await.unwrap();
        assert_eq!(edits, [edit], "{rule}");
        host.shutdown().await;
    }
    let host = start_mw(&[("list", "none")]).await;
    let mw = host.middleware("mw").unwrap();
    assert!(mw.on_list(&ctx, &entries, call()).await.unwrap().is_empty());
    host.shutdown().await;
}

/// The counts a run of hooks logged (`mwtest HOOK call N`).
fn counts(lines: &StdMutex<Vec<String>>) -> Vec<u64> {
    lines
        .lock()
        .unwrap()
        .iter()
        .filter_map(|line| line.rsplit(' ').next()?.parse().ok())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trap_fails_and_the_next_hook_runs_on_a_new_instance() {
    let host = start_mw(&[("request", "trap"), ("result", "pass")]).await;
    let mw = host.middleware("mw").unwrap();
    let ctx = request_ctx("github_search");
    let outcome = Outcome::Success("{}".into());
    let (log, lines) = logged();
    // A shared instance keeps its state from hook to hook...
    for _ in 0..2 {
        let action = mw.on_result(&ctx, PARAMS, &outcome, 1, log.clone()).await;
        assert_eq!(action.unwrap(), ResultAction::Pass);
    }
    assert_eq!(counts(&lines), [1, 2]);
    // ...until it traps: that one is thrown away.
    let error = mw.on_request(&ctx, PARAMS, log.clone()).await.unwrap_err();
    let said = error.to_string();
    assert!(said.starts_with("middleware `mw` trapped"), "{said}");
    assert!(said.contains("on-request trapped on purpose"), "{said}");
    assert!(said.ends_with("(in on-request)"), "{said}");
    let action = mw.on_result(&ctx, PARAMS, &outcome, 1, log.clone()).await;
    assert_eq!(action.unwrap(), ResultAction::Pass);
    assert_eq!(counts(&lines), [1, 2, 3, 1]);
    let info = &host.plugins()[0];
    assert_eq!((info.calls, info.failures), (4, 1));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_call_gives_each_hook_a_fresh_instance() {
    let mut entry = middleware("mw", MWTEST, &[]);
    entry.instances.mode = InstanceMode::Call;
    let (host, _rx) = start(&config(vec![entry])).await;
    let mw = host.middleware("mw").unwrap();
    let (log, lines) = logged();
    for _ in 0..3 {
        let action = mw.on_request(&request_ctx("x"), PARAMS, log.clone()).await;
        assert_eq!(action.unwrap(), RequestAction::Pass);
    }
    assert_eq!(counts(&lines), [1, 1, 1]);
    assert_eq!(host.plugins()[0].instances, 0);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ready_middleware_instance_is_warmed_with_describe() {
    let host = start_mw(&[]).await;
    let version = host.calls.slots.load()["mw"].current.load_full();
    let mut store = host.calls.new_store(&version).unwrap();
    limits::arm(&mut store, Duration::from_secs(10), false, None).unwrap();
    let instance = version
        .code
        .pre
        .instantiate_async(&mut store)
        .await
        .unwrap();
    instance.warm_up(&mut store).await.unwrap();
    // The warmed instance serves its hooks, and is no tool plugin.
    let hooks = instance.middleware().unwrap().wasmgate_middleware_hooks();
    let action = hooks
        .call_on_request(&mut store, &request_ctx("x").to_wit(), "{}")
        .await
        .unwrap();
    assert!(matches!(action, middleware_bindings::RequestAction::Pass));
    assert!(instance.tools().is_err());
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundled_middleware_this_build_lacks_fails_to_load_saying_so() {
    let mut entry = PluginConfig::plain("secrets", None, "secrets".into(), PluginLimits::default());
    entry.middleware = true;
    entry.uses_bundled = Some("no-such-middleware".into());
    let (host, mut rx) = start(&config(vec![entry])).await;
    let reasons = load_failures(&mut rx);
    assert!(
        reasons["secrets"].starts_with("middleware `secrets` (bundled `no-such-middleware`): this build bundles no middleware `no-such-middleware`"),
        "{reasons:?}"
    );
    assert!(host.plugins().is_empty());
    assert_eq!(host.failed_plugins()[0].name, "secrets");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_or_a_hog_fails_with_its_limit() {
    let mut entry = middleware("mw", MWTEST, &[("request", "loop")]);
    entry.limits.timeout = Duration::from_millis(300);
    let mut hog = middleware("hog", MWTEST, &[("request", "memory")]);
    hog.limits.memory = 16 << 20;
    let (host, _rx) = start(&config(vec![entry, hog])).await;
    let error = request(&host.middleware("mw").unwrap()).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "middleware `mw` exceeded its time limit of 300ms (in on-request)"
    );
    let error = request(&host.middleware("hog").unwrap()).await.unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("middleware `hog` ran out of memory (limit 16 MiB)"),
        "{error}"
    );
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_keeps_its_version_across_a_reload() {
    let tmp = TempDir::new("wasmgate-middleware-test-");
    let first = tmp.path().join("first.wasm");
    let second = tmp.path().join("second.wasm");
    std::fs::copy(MWTEST, &first).unwrap();
    let mut bytes = std::fs::read(MWTEST).unwrap();
    // A custom section: other bytes and digest, the same behaviour.
    bytes.extend_from_slice(&[0, 5, 3, b'p', b'a', b'd', 1]);
    std::fs::write(&second, bytes).unwrap();
    let settings = |message: &str| {
        [
            ("request", "deny".to_string()),
            ("deny_message", message.into()),
        ]
    };
    let with = |path: &Path, message: &str| {
        let settings = settings(message);
        let pairs: Vec<(&str, &str)> = settings.iter().map(|(k, v)| (*k, v.as_str())).collect();
        config(vec![middleware("mw", path.to_str().unwrap(), &pairs)])
    };
    let (host, mut rx) = start(&with(&first, "old")).await;
    assert!(matches!(rx.try_recv(), Ok(PluginEvent::Loaded { .. })));
    let old = host.middleware("mw").unwrap();
    host.reconfigure(&with(&second, "new")).await;
    match tokio::time::timeout(EVENT_WAIT, rx.recv()).await.unwrap() {
        Some(PluginEvent::Reloaded { new_code: true, .. }) => {}
        other => panic!("expected a reload with new code, got {other:?}"),
    }
    let new = host.middleware("mw").unwrap();
    assert_ne!(old.digest(), new.digest());
    let message = |action| match action {
        RequestAction::Deny(denial) => denial.message,
        other => panic!("{other:?}"),
    };
    assert_eq!(message(request(&old).await.unwrap()), "old");
    assert_eq!(message(request(&new).await.unwrap()), "new");
    // Both count in the one slot's stats.
    assert_eq!(host.plugins()[0].calls, 2);
    host.shutdown().await;
}

#[test]
fn uses_bundled_loads_the_bundled_middleware() {
    static BUNDLED: &[(&str, &[u8])] = &[("redact", b"redact bytes")];
    static MIDDLEWARE: &[(&str, &[u8])] = &[("redact", b"redact middleware bytes")];
    let mut secrets =
        PluginConfig::plain("secrets", None, "secrets".into(), PluginLimits::default());
    secrets.middleware = true;
    secrets.uses_bundled = Some("redact".into());
    let mut missing = secrets.clone();
    missing.name = "missing".into();
    missing.uses_bundled = Some("nope".into());
    let mut cfg = config(vec![secrets, missing]);
    let desired = desired_plugins_with(&cfg, BUNDLED, MIDDLEWARE);
    match &desired.plugins["secrets"].0 {
        Source::Bundled(bytes) => assert_eq!(*bytes, b"redact middleware bytes"),
        Source::File(path) => panic!("from {path:?}"),
    }
    assert!(desired.plugins["secrets"].1.middleware);
    // `bundled = true` adds the bundled plugins, never a middleware by itself.
    assert!(!desired.plugins.contains_key("redact"));
    cfg.bundled = true;
    let desired = desired_plugins_with(&cfg, BUNDLED, MIDDLEWARE);
    match &desired.plugins["redact"].0 {
        Source::Bundled(bytes) => assert_eq!(*bytes, b"redact bytes"),
        Source::File(path) => panic!("from {path:?}"),
    }
    assert!(!desired.plugins.contains_key("missing"));
    assert_eq!(
        missing_bundled(&cfg, MIDDLEWARE),
        [("missing".to_string(), "nope".to_string())]
    );
}

/// CPU time of the calling thread (the gateway's I/O thread runs a hook's first poll)
/// and of the whole process.
fn cpu_times() -> (Duration, Duration) {
    let clock = |id| {
        // SAFETY: clock_gettime writes the timespec it is given.
        let mut t: libc::timespec = unsafe { std::mem::zeroed() };
        unsafe { libc::clock_gettime(id, &mut t) };
        Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
    };
    (
        clock(libc::CLOCK_THREAD_CPUTIME_ID),
        clock(libc::CLOCK_PROCESS_CPUTIME_ID),
    )
}

/// Per hook on a shared instance, pass-through: wall time, the calling thread's CPU and
/// the process's. `cargo test --release --lib measure_hooks -- --ignored --nocapture`.
#[tokio::test(flavor = "current_thread")]
#[ignore]
async fn measure_hooks() {
    const N: u32 = 20_000;
    let host = start_mw(&[("quiet", "true")]).await;
    let ctx = request_ctx("github_search");
    let outcome = Outcome::Success(r#"{"content":[{"type":"text","text":"ok"}]}"#.into());
    let mw = host.middleware("mw").unwrap();
    for _ in 0..1000 {
        request(&mw).await.unwrap();
    }
    let report = |what: &str,
                  started: std::time::Instant,
                  (thread, process): (Duration, Duration)| {
        let (thread_now, process_now) = cpu_times();
        println!(
            "{what}: {:.2} µs wall, {:.2} µs CPU of the calling thread, {:.2} µs CPU of the process",
            started.elapsed().as_secs_f64() * 1e6 / N as f64,
            (thread_now - thread).as_secs_f64() * 1e6 / N as f64,
            (process_now - process).as_secs_f64() * 1e6 / N as f64,
        );
    };
    let (started, cpu) = (std::time::Instant::now(), cpu_times());
    for _ in 0..N {
        let action = mw.on_request(&ctx, PARAMS, call()).await.unwrap();
        assert_eq!(action, RequestAction::Pass);
    }
    report("on-request (pass)", started, cpu);
    let (started, cpu) = (std::time::Instant::now(), cpu_times());
    for _ in 0..N {
        let action = mw.on_result(&ctx, PARAMS, &outcome, 10, call()).await;
        assert_eq!(action.unwrap(), ResultAction::Pass);
    }
    report("on-result (pass)", started, cpu);
    let (started, cpu) = (std::time::Instant::now(), cpu_times());
    for _ in 0..N {
        let mw = host.middleware("mw").unwrap();
        mw.on_request(&ctx, PARAMS, call()).await.unwrap();
    }
    report("handle + on-request (pass)", started, cpu);
    host.shutdown().await;
    // For comparison: a tool call (echo's `echo`) on a shared instance.
    let mut echo = PluginConfig::plain(
        "echo",
        Some(ECHO.into()),
        "echo".into(),
        PluginLimits::default(),
    );
    echo.instances.mode = InstanceMode::Shared;
    let (host, _rx) = start(&config(vec![echo])).await;
    let ctx = CallContext {
        timeout: Duration::from_secs(30),
        progress: None,
        log: None,
        trace_id: "t".into(),
        session: None,
        ask: None,
        ask_timeout: Duration::from_secs(30),
        principal: None,
        traceparent: None,
    };
    let arguments = serde_json::json!({"text": "x"});
    for _ in 0..1000 {
        host.call("echo", "echo", arguments.clone(), ctx.clone())
            .await
            .unwrap();
    }
    let (started, cpu) = (std::time::Instant::now(), cpu_times());
    for _ in 0..N {
        host.call("echo", "echo", arguments.clone(), ctx.clone())
            .await
            .unwrap();
    }
    report("tool call, shared instance (echo)", started, cpu);
    host.shutdown().await;
}
