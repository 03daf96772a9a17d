//! Loading plugins: components that must be refused, the compilation cache, the bundled
//! plugins of the embedded default, a plugin in Python, and start-up with plugins that
//! are slow to load.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{noise, wait_list_change};
use crate::harness::{
    Client, LIST_CHANGED, LOAD_TIMEOUT, TIMEOUT, TestDir, backend, call_failed, call_ok,
    eventually, first_list, fixture, has, plugin_dir, setup, shipped, text, wait_event, wait_tools,
};

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
        .start_listed();
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
        .start_listed();
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

#[test]
fn a_tool_name_over_64_characters_is_served_with_a_warning() {
    let stem = "p".repeat(60);
    let (client, names) = setup()
        .file(&format!("{stem}.wasm"), fixture("minimal"))
        .start_listed();
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
        .start_listed();
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
