//! Hot reload with a client connected: plugins added, replaced, kept and removed, by
//! folder, path and `--plugin` flag; namespaces and filters; reloads under a steady
//! stream of calls.

use std::time::Instant;

use serde_json::{Value, json};

use super::{noise, replace_atomically, wait_list_change};
use crate::custom_section::with_custom_section;
use crate::harness::{
    Client, LIST_CHANGED, LOAD_TIMEOUT, TIMEOUT, TestDir, backend, call_ok, eventually, first_list,
    fixture, has, plugin_dir, setup, sha256_hex, shipped, shipped_path, text, toml_str, wait_event,
};

// ---- 6. hot reload ----

#[test]
fn hot_reload_adds_replaces_keeps_and_removes_a_plugin() {
    let (mut client, names) = setup().file("echo.wasm", fixture("echo")).start_listed();
    assert!(!names.iter().any(|n| n.starts_with("x__")), "{names:?}");
    client.drain_notifications(LIST_CHANGED);
    let x = plugin_dir(&client).join("x.wasm");

    // A new file: loaded, announced.
    std::fs::copy(shipped_path("hash"), &x).expect("copy hash.wasm");
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
        .start_listed();
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
        .start_listed();
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
    assert_eq!(backend(&mut client, "echo")["tool_count"], 16);
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
        .start_listed();
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
