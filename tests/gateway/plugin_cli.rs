//! `wasmgate plugin new / build / inspect / call`: a plugin author's commands, on the
//! test fixtures and on projects `plugin new` writes and `plugin build` builds.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::{TestDir, fixture, fixture_path, on_path, run_cli, run_cli_with_env};

pub(crate) const LIMIT: Duration = Duration::from_secs(60);
/// A fresh crate's first build compiles wit-bindgen and its dependencies.
pub(crate) const BUILD_LIMIT: Duration = Duration::from_secs(900);

/// A fixture component's path, as a command-line argument.
fn fixture_arg(name: &str) -> String {
    fixture_path(name).to_str().unwrap().to_owned()
}

/// `list[*][key]`, each a string.
fn field_of_each<'a>(list: &'a Value, key: &str) -> Vec<&'a str> {
    let items = list.as_array().expect("a list");
    items
        .iter()
        .map(|item| item[key].as_str().unwrap())
        .collect()
}

#[test]
fn inspect_names_the_world_the_tools_and_the_grants_of_a_plugin() {
    let dir = TestDir::new("inspect");
    let out = run_cli(
        &["plugin", "inspect", &fixture_arg("echo"), "--json"],
        &dir.path,
        LIMIT,
    );
    out.assert_exit(0);
    let report: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(report["component"], true);
    assert_eq!(report["world"], "wasmgate:plugin/plugin@0.1.0");
    assert!(report["compile_ms"].as_u64().is_some(), "{report:#}");
    let tools = field_of_each(&report["tools"], "name");
    assert!(
        tools.contains(&"echo") && tools.contains(&"read"),
        "{tools:?}"
    );
    assert!(report["tools"][0]["inputSchema"].is_object(), "{report:#}");
    // echo reads files, the environment and sends HTTP requests: each grant is named.
    let grants = field_of_each(&report["grants"], "grant");
    for grant in ["env", "files", "outbound HTTP"] {
        assert!(grants.contains(&grant), "{grant} missing from {grants:?}");
    }

    let text = run_cli(
        &["plugin", "inspect", &fixture_arg("minimal")],
        &dir.path,
        LIMIT,
    );
    text.assert_exit(0);
    assert!(text.stdout.contains("tools (1):"), "{}", text.stdout);
    // `minimal` is built with the SDK, which speaks 0.2.
    assert!(
        text.stdout
            .contains("world:   wasmgate:plugin/plugin@0.2.0"),
        "{}",
        text.stdout
    );
}

/// `minimal`, as if built against another version of the plugin WIT: every name the
/// package gives (`wasmgate:plugin/tool@0.2.0`, its types and other imports) carries the
/// other version. The version strings have the same length, so the sizes that frame the
/// names still hold and the file stays a valid component.
fn minimal_at_wit_version(dir: &TestDir, version: &str) -> PathBuf {
    let ours = b"wasmgate:plugin";
    let bytes = fixture("minimal");
    let (from, to) = (b"@0.2.0".as_slice(), format!("@{version}"));
    assert_eq!(from.len(), to.len(), "the version must keep its length");
    let mut out = bytes.clone();
    let mut replaced = 0;
    for at in 0..bytes.len().saturating_sub(ours.len() + 16) {
        if bytes[at..].starts_with(ours) {
            // `wasmgate:plugin/NAME@0.2.0` or `wasmgate:plugin@0.2.0`: the version comes next.
            let tail = at + ours.len();
            let end = tail
                + bytes[tail..]
                    .iter()
                    .take(16)
                    .position(|b| *b == b'@')
                    .unwrap_or(16);
            if bytes[end..].starts_with(from) {
                out[end..end + from.len()].copy_from_slice(to.as_bytes());
                replaced += 1;
            }
        }
    }
    assert!(
        replaced >= 2,
        "{replaced} names of the plugin package in minimal.wasm"
    );
    let file = dir.join(&format!("wit-{version}.wasm"));
    std::fs::write(&file, out).unwrap();
    file
}

#[test]
fn inspect_says_precisely_why_a_file_is_no_plugin() {
    let dir = TestDir::new("inspect-bad");
    let core = dir.join("core.wasm");
    std::fs::write(&core, b"\0asm\x01\0\0\0").unwrap();
    let text = dir.write("notes.wasm", "not wasm at all");
    let older = minimal_at_wit_version(&dir, "0.0.9");
    let newer = minimal_at_wit_version(&dir, "0.3.0");
    let cases = [
        (
            older.to_str().unwrap().to_owned(),
            "targets wasmgate:plugin@0.0.9, older than the @0.1.0 and @0.2.0 this gateway loads: \
             rebuild it against the WIT `wasmgate wit` prints",
        ),
        (
            newer.to_str().unwrap().to_owned(),
            "targets wasmgate:plugin@0.3.0, newer than the @0.1.0 and @0.2.0 this gateway loads: \
             use a wasmgate that loads it",
        ),
        (
            core.to_str().unwrap().to_owned(),
            "is a core WebAssembly module, not a component",
        ),
        (
            text.to_str().unwrap().to_owned(),
            "is not a WebAssembly file",
        ),
        (
            fixture_arg("wrongworld"),
            "is a component of another world: it exports run",
        ),
        (
            dir.join("absent.wasm").to_str().unwrap().to_owned(),
            "cannot read the file",
        ),
    ];
    for (file, expected) in cases {
        let out = run_cli(&["plugin", "inspect", &file], &dir.path, LIMIT);
        out.assert_exit(1);
        assert!(out.stderr.contains(expected), "{file}: {}", out.stderr);
        let json = run_cli(&["plugin", "inspect", &file, "--json"], &dir.path, LIMIT);
        json.assert_exit(1);
        let report: Value = serde_json::from_str(&json.stdout).unwrap();
        assert!(
            report["error"].as_str().unwrap().contains(expected),
            "{report:#}"
        );
    }
    // The other-version files were read as components, their imports named: the message
    // comes from the version, not from a file the rewrite broke.
    for file in [&older, &newer] {
        let out = run_cli(
            &["plugin", "inspect", file.to_str().unwrap(), "--json"],
            &dir.path,
            LIMIT,
        );
        let report: Value = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!(report["component"], true, "{report:#}");
        assert!(
            report["imports"].as_array().is_some_and(|i| !i.is_empty()),
            "{report:#}"
        );
    }
}

#[test]
fn call_runs_in_the_sandbox_with_only_the_grants_given() {
    let dir = TestDir::new("call");
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("a.txt"), "hello from the host").unwrap();
    let echo = fixture_arg("echo");
    let grant = format!("{}:/data", data.display());
    let read = r#"{"path": "/data/a.txt"}"#;

    let allowed = run_cli(
        &["plugin", "call", &echo, "read", read, "--allow-dir", &grant],
        &dir.path,
        LIMIT,
    );
    allowed.assert_exit(0);
    let result: Value = serde_json::from_str(&allowed.stdout).unwrap();
    assert_eq!(result["content"][0]["text"], "hello from the host");
    assert!(allowed.stderr.contains("time: call"), "{}", allowed.stderr);

    // No grant: the plugin sees no /data; the tool's failure is an error result, exit 1.
    let denied = run_cli(&["plugin", "call", &echo, "read", read], &dir.path, LIMIT);
    denied.assert_exit(1);
    let result: Value = serde_json::from_str(&denied.stdout).unwrap();
    assert_eq!(result["isError"], true, "{result}");

    // Read-only by default: a write is refused, and allowed with :rw.
    let write = r#"{"path": "/data/b.txt", "text": "x"}"#;
    run_cli(
        &[
            "plugin",
            "call",
            &echo,
            "write",
            write,
            "--allow-dir",
            &grant,
        ],
        &dir.path,
        LIMIT,
    )
    .assert_exit(1);
    assert!(!data.join("b.txt").exists());
    let rw = format!("{grant}:rw");
    run_cli(
        &["plugin", "call", &echo, "write", write, "--allow-dir", &rw],
        &dir.path,
        LIMIT,
    )
    .assert_exit(0);
    assert_eq!(std::fs::read_to_string(data.join("b.txt")).unwrap(), "x");

    // The environment: only the variables named.
    let env = [("PLUGIN_CLI_SECRET", "s3cret")];
    let name = r#"{"name": "PLUGIN_CLI_SECRET"}"#;
    let out = run_cli_with_env(
        &["plugin", "call", &echo, "env", name],
        &dir.path,
        &env,
        LIMIT,
    );
    assert!(!out.stdout.contains("s3cret"), "{}", out.stdout);
    let out = run_cli_with_env(
        &[
            "plugin",
            "call",
            &echo,
            "env",
            name,
            "--allow-env",
            "PLUGIN_CLI_SECRET",
        ],
        &dir.path,
        &env,
        LIMIT,
    );
    out.assert_exit(0);
    assert!(out.stdout.contains("s3cret"), "{}", out.stdout);

    // Log lines at every level, on stderr.
    let out = run_cli(
        &["plugin", "call", &echo, "log", r#"{"message": "hi"}"#],
        &dir.path,
        LIMIT,
    );
    out.assert_exit(0);
    for level in ["debug", "info", "warning", "error"] {
        assert!(
            out.stderr.contains(&format!("log {level}: hi")),
            "{}",
            out.stderr
        );
    }

    let out = run_cli(
        &["plugin", "call", &echo, "progress", r#"{"steps": 2}"#],
        &dir.path,
        LIMIT,
    );
    out.assert_exit(0);
    assert!(out.stderr.contains("progress 1"), "{}", out.stderr);

    // The limits are the gateway's: a call past --timeout is stopped.
    let out = run_cli(
        &[
            "plugin",
            "call",
            &echo,
            "sleep",
            r#"{"ms": 5000}"#,
            "--timeout",
            "200ms",
        ],
        &dir.path,
        LIMIT,
    );
    assert_ne!(out.status.code(), Some(0), "{}", out.stdout);

    // What cannot be called says so, with exit 2.
    let out = run_cli(&["plugin", "call", &echo, "nope"], &dir.path, LIMIT);
    out.assert_exit(2);
    assert!(
        out.stderr.contains("no tool `nope`; it has: "),
        "{}",
        out.stderr
    );
    let out = run_cli(
        &["plugin", "call", &fixture_arg("wrongworld"), "run"],
        &dir.path,
        LIMIT,
    );
    out.assert_exit(2);
    let out = run_cli(
        &["plugin", "call", &echo, "echo", "--allow-dir", "/data"],
        &dir.path,
        LIMIT,
    );
    out.assert_exit(2);
    assert!(out.stderr.contains("HOST:GUEST"), "{}", out.stderr);
}

/// A target folder shared by every run of the template tests (under the one cargo uses),
/// so that wit-bindgen and its dependencies are compiled once, not at each run.
pub(crate) fn shared_target() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/debug/deps/gateway-HASH
    let target = exe.ancestors().nth(3).unwrap().to_path_buf();
    target.join("plugin-templates")
}

#[test]
fn a_new_rust_plugin_builds_as_it_is_and_answers_a_call() {
    let dir = TestDir::new("new-rust");
    let target = shared_target();
    let env = [("CARGO_TARGET_DIR", target.to_str().unwrap())];
    let started = Instant::now();
    run_cli(
        &["plugin", "new", "hello_plugin", "--dir", "hello"],
        &dir.path,
        LIMIT,
    )
    .assert_exit(0);
    let build = run_cli_with_env(&["plugin", "build", "hello"], &dir.path, &env, BUILD_LIMIT);
    build.assert_exit(0);
    let built = started.elapsed();
    assert!(build.stdout.contains("greet"), "{}", build.stdout);
    let wasm = target.join("wasm32-wasip2/release/hello_plugin.wasm");
    let call = run_cli(
        &[
            "plugin",
            "call",
            wasm.to_str().unwrap(),
            "greet",
            r#"{"name": "CI", "times": 2}"#,
        ],
        &dir.path,
        LIMIT,
    );
    call.assert_exit(0);
    let result: Value = serde_json::from_str(&call.stdout).unwrap();
    assert_eq!(result["content"][0]["text"], "Hello, CI!\nHello, CI!");
    assert!(
        call.stderr.contains("log info: greet called"),
        "{}",
        call.stderr
    );
    eprintln!(
        "plugin new → build {:.1} s, → call {:.1} s",
        built.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );

    // The template's unit test runs on the host.
    let started = Instant::now();
    let test = std::process::Command::new("cargo")
        .arg("test")
        .current_dir(dir.join("hello"))
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .unwrap();
    assert!(
        test.status.success(),
        "{}",
        String::from_utf8_lossy(&test.stderr)
    );
    assert!(
        String::from_utf8_lossy(&test.stdout).contains("greets_as_often_as_asked ... ok"),
        "{}",
        String::from_utf8_lossy(&test.stdout)
    );
    eprintln!(
        "cargo test of the template {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // A crate that lost its cdylib builds an .rlib only, and the .wasm of the build above
    // is still in target/: the build is refused, saying what to change, not served stale.
    assert!(wasm.is_file());
    let manifest = dir.join("hello/Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.replace("crate-type = [\"cdylib\"]", "")).unwrap();
    let out = run_cli_with_env(&["plugin", "build", "hello"], &dir.path, &env, LIMIT);
    out.assert_exit(1);
    for said in ["builds no component", "crate-type = [\"cdylib\"]", "stale"] {
        assert!(out.stderr.contains(said), "{said}: {}", out.stderr);
    }
    assert!(!out.stdout.contains("greet"), "{}", out.stdout);

    // A src/main.rs beside the cdylib: both would write hello_plugin.wasm.
    std::fs::write(&manifest, &text).unwrap();
    std::fs::write(dir.join("hello/src/main.rs"), "fn main() {}\n").unwrap();
    let out = run_cli_with_env(&["plugin", "build", "hello"], &dir.path, &env, LIMIT);
    out.assert_exit(1);
    assert!(
        out.stderr
            .contains("src/main.rs and the cdylib would both write hello_plugin.wasm to one path")
            && out.stderr.contains("[[bin]] name = \"hello_plugin-cli\""),
        "{}",
        out.stderr
    );
}

/// A template's component served by the gateway with no operator config: `greet`, and
/// the notes kept in the store across calls (each in a fresh instance, by default).
fn serve_the_template(dir: TestDir, wasm: &str, prefix: &str) {
    // The store's default home (`$XDG_DATA_HOME/wasmgate`) in the test's folder: each run
    // starts with no notes, and none are left in the user's home.
    let data = dir.path.to_str().unwrap().to_owned();
    let env = [("XDG_DATA_HOME", data.as_str())];
    let mut client = crate::harness::Client::spawn_with_env(&["--plugin", wasm], dir, &env);
    client.initialize();
    // The first load compiles a language runtime: a client that listed the tools while
    // it compiles hears when they are there.
    let greet = format!("{prefix}__greet");
    let listed = client.result("tools/list", serde_json::json!({}));
    if !listed.to_string().contains(&greet) {
        client.next_notification("notifications/tools/list_changed", BUILD_LIMIT);
    }
    let result = client.call(&greet, serde_json::json!({"name": "CI", "times": 2}));
    assert_eq!(
        result["content"][0]["text"], "Hello, CI!\nHello, CI!",
        "{result}"
    );
    // Arguments off the schema the SDK derived are refused before the plugin runs.
    let refused = client.call_invalid(&greet, serde_json::json!({"times": 2}));
    assert!(refused.contains("name"), "{refused}");

    let add = format!("{prefix}__notes_add");
    for (text, count) in [("buy milk", 1), ("call Bob", 2)] {
        let added = client.call(&add, serde_json::json!({ "text": text }));
        assert_eq!(
            added["structuredContent"],
            serde_json::json!({"id": count, "count": count}),
            "{added}"
        );
    }
    let found = client.call(
        &format!("{prefix}__notes_search"),
        serde_json::json!({"query": "MILK"}),
    );
    assert_eq!(found["content"][0]["text"], r#"["buy milk"]"#, "{found}");

    // The template `notes://{id}` reads the same store; an unknown note is not found.
    let templates = client.result("resources/templates/list", serde_json::json!({}));
    assert_eq!(
        templates["resourceTemplates"][0]["uriTemplate"], "notes://{id}",
        "{templates}"
    );
    let note = client.result("resources/read", serde_json::json!({"uri": "notes://2"}));
    assert_eq!(note["contents"][0]["text"], "call Bob", "{note}");
    let missing = client.error("resources/read", serde_json::json!({"uri": "notes://9"}));
    assert_eq!(missing["code"], -32002, "{missing}");
}

/// componentize-py is in CI's test tools (target/test-tools/py/bin on PATH); without it
/// the test says so and passes.
#[test]
fn a_new_python_plugin_builds_with_componentize_py_and_keeps_notes_in_the_store() {
    if on_path("componentize-py").is_none() {
        eprintln!("skipped: componentize-py is not on PATH");
        return;
    }
    let dir = TestDir::new("new-python");
    run_cli(
        &["plugin", "new", "hello_py", "--lang", "python"],
        &dir.path,
        LIMIT,
    )
    .assert_exit(0);
    let build = run_cli(&["plugin", "build", "hello_py"], &dir.path, BUILD_LIMIT);
    build.assert_exit(0);
    for said in ["greet", "notes_add", "wasmgate:plugin/plugin@0.2.0"] {
        assert!(build.stdout.contains(said), "{said}: {}", build.stdout);
    }
    let call = run_cli(
        &[
            "plugin",
            "call",
            "hello_py/hello_py.wasm",
            "greet",
            r#"{"name": "CI"}"#,
        ],
        &dir.path,
        BUILD_LIMIT,
    );
    call.assert_exit(0);
    assert!(call.stdout.contains("Hello, CI!"), "{}", call.stdout);
    serve_the_template(dir, "hello_py/hello_py.wasm", "hello_py");
}

/// componentize-js is in CI's test tools (target/test-tools/js/node_modules/.bin on PATH);
/// without it the test says so and passes. The component is served by the gateway and
/// called by a client, as a plugin author's would be.
#[test]
fn a_new_js_plugin_builds_with_componentize_js_and_keeps_notes_in_the_store() {
    if on_path("componentize-js").is_none() {
        eprintln!("skipped: componentize-js is not on PATH");
        return;
    }
    let dir = TestDir::new("new-js");
    run_cli(
        &["plugin", "new", "hello-js", "--lang", "js"],
        &dir.path,
        LIMIT,
    )
    .assert_exit(0);
    let package: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("hello-js/package.json")).unwrap())
            .unwrap();
    assert!(
        package["devDependencies"]["@bytecodealliance/componentize-js"].is_string(),
        "{package}"
    );
    let build = run_cli(&["plugin", "build", "hello-js"], &dir.path, BUILD_LIMIT);
    build.assert_exit(0);
    for said in [
        "greet",
        "notes_add",
        "world:   wasmgate:plugin/plugin@0.2.0",
    ] {
        assert!(build.stdout.contains(said), "{said}: {}", build.stdout);
    }
    serve_the_template(dir, "hello-js/hello_js.wasm", "hello_js");
}

/// `wasmgate dev SOURCE`: a plugin project built and served; an edit of its source is
/// rebuilt and the new version served; an edit that does not compile leaves the previous
/// version serving and tells the client why, at level `error`.
#[test]
fn dev_rebuilds_an_edited_plugin_and_keeps_serving_after_a_broken_edit() {
    let dir = TestDir::new("dev");
    let target = shared_target();
    let env = [("CARGO_TARGET_DIR", target.to_str().unwrap())];
    run_cli(
        &["plugin", "new", "dev_plugin", "--dir", "devsrc"],
        &dir.path,
        LIMIT,
    )
    .assert_exit(0);
    // Built once ahead, so that the gateway's start is not a cold build.
    run_cli_with_env(&["plugin", "build", "devsrc"], &dir.path, &env, BUILD_LIMIT).assert_exit(0);
    let source = dir.join("devsrc/src/lib.rs");
    let mut client = crate::harness::Client::spawn_with_env(&["dev", "devsrc"], dir, &env);
    client.initialize();
    let greet = |client: &mut crate::harness::Client| greet_text(client, "dev_plugin__greet", "A");
    assert_eq!(greet(&mut client), "Hello, A!");
    client.result("tools/list", serde_json::json!({}));

    let text = std::fs::read_to_string(&source).unwrap();
    std::fs::write(
        &source,
        text.replace("format!(\"Hello, {name}!\")", "format!(\"Howdy, {name}!\")"),
    )
    .unwrap();
    client.next_notification("notifications/tools/list_changed", BUILD_LIMIT);
    assert_eq!(greet(&mut client), "Howdy, A!");

    std::fs::write(&source, "this is not Rust").unwrap();
    let told = client
        .take(BUILD_LIMIT, |m| {
            m["method"] == "notifications/message" && m["params"]["logger"] == "wasmgate dev"
        })
        .expect("the failed build is told to the client");
    assert_eq!(told["params"]["level"], "error", "{told}");
    assert!(
        told["params"]["data"]
            .as_str()
            .unwrap()
            .contains("keeps serving"),
        "{told}"
    );
    assert_eq!(greet(&mut client), "Howdy, A!");

    // The fix is the version serving, rebuilt: the client hears the plugin is healthy again.
    let howdy = text.replace("format!(\"Hello, {name}!\")", "format!(\"Howdy, {name}!\")");
    std::fs::write(&source, howdy).unwrap();
    let healthy = client
        .take(BUILD_LIMIT, |m| {
            m["method"] == "notifications/message"
                && m["params"]["data"]
                    .as_str()
                    .is_some_and(|d| d.contains("healthy again"))
        })
        .expect("told the plugin is healthy again");
    assert_eq!(healthy["params"]["level"], "notice", "{healthy}");
    assert_eq!(greet(&mut client), "Howdy, A!");
    // One line per rebuild, with its timings.
    let timed = stderr_line(&client, "wasmgate dev: dev_plugin: build ");
    for part in [", compile ", ", swap ", "; saved → served "] {
        assert!(timed.contains(part), "{timed}");
    }
    assert!(
        client
            .stderr()
            .contains("the component is unchanged, nothing to swap"),
        "{}",
        client.stderr()
    );

    // The mistakes `plugin build` catches, `dev` catches too, and the old version serves.
    let manifest = dir_of(&client).join("devsrc/Cargo.toml");
    let cargo = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, cargo.replace("crate-type = [\"cdylib\"]", "")).unwrap();
    let told = client
        .take(BUILD_LIMIT, |m| {
            m["method"] == "notifications/message"
                && m["params"]["data"]
                    .as_str()
                    .is_some_and(|d| d.contains("builds no component"))
        })
        .expect("the lost cdylib is told to the client");
    assert!(
        told["params"]["data"]
            .as_str()
            .unwrap()
            .contains("crate-type = [\"cdylib\"]"),
        "{told}"
    );
    std::fs::write(&manifest, &cargo).unwrap();
    std::fs::write(dir_of(&client).join("devsrc/src/main.rs"), "fn main() {}\n").unwrap();
    client
        .take(BUILD_LIMIT, |m| {
            m["method"] == "notifications/message"
                && m["params"]["data"]
                    .as_str()
                    .is_some_and(|d| d.contains("would both write dev_plugin.wasm"))
        })
        .expect("the binary beside the cdylib is told to the client");
    assert_eq!(greet(&mut client), "Howdy, A!");
}

/// The text `greet` answers `name` through the gateway.
fn greet_text(client: &mut crate::harness::Client, tool: &str, name: &str) -> String {
    let result = client.call(tool, serde_json::json!({ "name": name }));
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn dir_of(client: &crate::harness::Client) -> PathBuf {
    client.dir.path.clone()
}

/// `[plugins.NAME] source = "DIR"`: `wasmgate dev --config` builds that project, serves it
/// as NAME (whatever file name its build writes) and rebuilds it on an edit.
#[test]
fn dev_builds_and_watches_the_source_folders_a_config_names() {
    let dir = TestDir::new("dev-config");
    let target = shared_target();
    let env = [("CARGO_TARGET_DIR", target.to_str().unwrap())];
    run_cli(
        &["plugin", "new", "hello-src", "--dir", "greeter_src"],
        &dir.path,
        LIMIT,
    )
    .assert_exit(0);
    run_cli_with_env(
        &["plugin", "build", "greeter_src"],
        &dir.path,
        &env,
        BUILD_LIMIT,
    )
    .assert_exit(0);

    // A source that is not there, or not a plugin project, is a config error.
    dir.write("absent.toml", "[plugins.greeter]\nsource = \"nope\"\n");
    let out = run_cli(&["check", "--config", "absent.toml"], &dir.path, LIMIT);
    out.assert_exit(1);
    assert!(out.stderr.contains("source folder"), "{}", out.stderr);
    std::fs::create_dir_all(dir.join("empty")).unwrap();
    dir.write("empty.toml", "[plugins.greeter]\nsource = \"empty\"\n");
    let out = run_cli(&["check", "--config", "empty.toml"], &dir.path, LIMIT);
    out.assert_exit(1);
    assert!(
        out.stderr.contains("is not a plugin project"),
        "{}",
        out.stderr
    );

    dir.write("gw.toml", "[plugins.greeter]\nsource = \"greeter_src\"\n");
    let source = dir.join("greeter_src/src/lib.rs");
    let mut client =
        crate::harness::Client::spawn_with_env(&["dev", "--config", "gw.toml"], dir, &env);
    client.initialize();
    let greet = |client: &mut crate::harness::Client| greet_text(client, "greeter__greet", "B");
    assert_eq!(greet(&mut client), "Hello, B!");
    // A client that has listed the tools hears that they changed.
    client.result("tools/list", serde_json::json!({}));
    let text = std::fs::read_to_string(&source).unwrap();
    std::fs::write(
        &source,
        text.replace("format!(\"Hello, {name}!\")", "format!(\"Hi, {name}!\")"),
    )
    .unwrap();
    client.next_notification("notifications/tools/list_changed", BUILD_LIMIT);
    assert_eq!(greet(&mut client), "Hi, B!");
    stderr_line(&client, "wasmgate dev: greeter: build ");
}

/// The first line of the gateway's stderr that starts with `start`, waiting for it a
/// while: `dev` prints a rebuild's line once the swap is done, as clients hear of it.
fn stderr_line(client: &crate::harness::Client, start: &str) -> String {
    let until = Instant::now() + LIMIT;
    loop {
        let stderr = client.stderr();
        if let Some(line) = stderr.lines().find(|l| l.starts_with(start)) {
            return line.to_owned();
        }
        assert!(Instant::now() < until, "no line `{start}…` in:\n{stderr}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A refused build, then a file with the bytes of the version still serving (the fix that
/// undoes the mistake): nothing is reloaded, and the client, whose last word was the
/// refusal, hears that the plugin is healthy again; `get_events` has `plugin.recovered`.
#[test]
fn a_fix_identical_to_the_served_version_ends_with_healthy_again() {
    let dir = TestDir::new("recovered");
    let good = fixture("minimal");
    let file = dir.join("mini.wasm");
    std::fs::write(&file, &good).unwrap();
    let mut client = crate::harness::Client::spawn(&["--plugin", "mini.wasm"], dir);
    client.initialize();
    client.wait_ready();
    client.result("tools/list", serde_json::json!({}));
    let said = |client: &mut crate::harness::Client, level: &'static str| {
        client
            .take(LIMIT, |m| {
                m["method"] == "notifications/message" && m["params"]["level"] == level
            })
            .unwrap_or_else(|| panic!("no {level} message"))["params"]["data"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    std::fs::write(&file, b"\0asm\x01\0\0\0").unwrap();
    let refused = said(&mut client, "error");
    assert!(refused.contains("keeps serving"), "{refused}");
    std::fs::write(&file, &good).unwrap();
    let healthy = said(&mut client, "notice");
    assert!(healthy.contains("is healthy again"), "{healthy}");
    assert_eq!(
        echo_text(&mut client),
        "still here",
        "the version served throughout answers"
    );
    let events = client.call(
        "get_events",
        serde_json::json!({"event_type": "plugin.recovered"}),
    );
    let listed = events["structuredContent"]["events"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{events}");
    assert_eq!(listed[0]["source"], "mini", "{events}");
}

fn echo_text(client: &mut crate::harness::Client) -> String {
    let result = client.call("mini__echo", serde_json::json!({"text": "still here"}));
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn inspect_says_middleware_and_shows_its_interest() {
    let dir = TestDir::new("inspect-middleware");
    let out = run_cli(
        &["plugin", "inspect", &fixture_arg("mwtest"), "--json"],
        &dir.path,
        LIMIT,
    );
    out.assert_exit(0);
    let report: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(report["kind"], "middleware", "{report:#}");
    assert_eq!(report["world"], "wasmgate:middleware/middleware@0.1.0");
    assert_eq!(report["instance"], "shared");
    // Without config, mwtest's describe asks for nothing.
    for list in ["requests", "results", "lists", "names"] {
        assert_eq!(
            report["interest"][list],
            serde_json::json!([]),
            "{report:#}"
        );
    }
    assert!(report.get("tools").is_none(), "{report:#}");

    let text = run_cli(
        &["plugin", "inspect", &fixture_arg("mwtest")],
        &dir.path,
        LIMIT,
    );
    text.assert_exit(0);
    for line in [
        "world:   wasmgate:middleware/middleware@0.1.0",
        "kind:    middleware (use it in a [[middleware]] entry; instance: shared)",
        "  names     targets: every target",
    ] {
        assert!(text.stdout.contains(line), "{line} in:\n{}", text.stdout);
    }
}

/// `plugin call mwtest --hook ...` with these extra arguments: its stdout as JSON.
fn hook(dir: &TestDir, args: &[&str], exit: i32) -> (Value, String) {
    let mwtest = fixture_arg("mwtest");
    let mut all = vec!["plugin", "call", mwtest.as_str()];
    all.extend_from_slice(args);
    let out = run_cli(&all, &dir.path, LIMIT);
    out.assert_exit(exit);
    let json = serde_json::from_str(&out.stdout).unwrap_or(Value::Null);
    (json, out.stderr)
}

#[test]
fn call_runs_one_hook_of_a_middleware_and_prints_its_action() {
    let dir = TestDir::new("call-hook");
    let (action, stderr) = hook(&dir, &["--hook", "request", "--target", "github_search"], 0);
    assert_eq!(action, serde_json::json!({"action": "pass"}));
    assert!(
        stderr.contains("log info: mwtest on-request call 1"),
        "{stderr}"
    );
    assert!(stderr.contains("time: hook"), "{stderr}");

    let (action, _) = hook(
        &dir,
        &[
            "--hook",
            "request",
            "--target",
            "github_search",
            "--set",
            "request=replace",
        ],
        0,
    );
    assert_eq!(action["action"], "replace");
    assert_eq!(action["params"]["name"], "github_search");
    assert_eq!(action["params"]["target"], "github_search");

    let (action, _) = hook(
        &dir,
        &[
            "--hook",
            "request",
            "--params",
            "{}",
            "--set",
            "request=deny",
            "--set",
            "deny_message=not today",
        ],
        0,
    );
    assert_eq!(action["action"], "deny");
    assert_eq!(action["message"], "not today");
    assert_eq!(action["data"]["middleware"], "mwtest");

    let (action, _) = hook(
        &dir,
        &[
            "--hook",
            "result",
            "--error",
            r#"{"code": -32603, "message": "boom"}"#,
            "--set",
            "result=replace",
        ],
        0,
    );
    assert_eq!(action["action"], "replace");
    let text = action["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("replaced by mwtest: failure"), "{text}");

    let (action, _) = hook(
        &dir,
        &[
            "--hook",
            "list",
            "--entries",
            r#"[{"name": "a"}, {"name": "b"}]"#,
            "--set",
            "list=rename:b=bee",
        ],
        0,
    );
    assert_eq!(
        action,
        serde_json::json!({"edits": [{"name": "b", "rename": "bee"}]})
    );

    // A trap is the hook's failure (exit 1); bad input and a tool plugin are refused (2).
    let (_, stderr) = hook(&dir, &["--hook", "request", "--set", "request=trap"], 1);
    assert!(
        stderr.contains("middleware `mwtest` trapped") && stderr.contains("(in on-request)"),
        "{stderr}"
    );
    let (_, stderr) = hook(&dir, &["--hook", "request", "--params", "[1]"], 2);
    assert!(
        stderr.contains("--params must be a JSON object"),
        "{stderr}"
    );
    let echo = fixture_arg("echo");
    let out = run_cli(
        &["plugin", "call", &echo, "--hook", "request"],
        &dir.path,
        LIMIT,
    );
    out.assert_exit(2);
    assert!(
        out.stderr.contains("is a tool plugin, not a middleware"),
        "{}",
        out.stderr
    );
}
