//! When things go wrong: servers that crash, never start, hang, start slowly or print
//! noise; load; and shutdown without orphans.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{Client, TIMEOUT, config, eventually, example_server, process_gone, text};

#[test]
fn crash_mid_call_fails_fast_then_the_server_restarts() {
    let mut client = config()
        .example_with("ex", &["--crash-after", "2"], &[r#"timeout = "30s""#])
        .start_initialized();
    assert_eq!(
        text(&client.call("ex__echo", json!({"text": "one"}))),
        "one"
    );
    let started = Instant::now();
    let error = client.call_error("ex__echo", json!({"text": "two"}));
    let elapsed = started.elapsed();
    assert_eq!(error["code"], -32000, "{error}");
    assert_eq!(error["data"]["server"], "ex", "{error}");
    assert!(
        elapsed < Duration::from_secs(1),
        "the crash was reported after {elapsed:?}, not at once"
    );

    let ex = restarted(&mut client, "ex");
    assert!(ex["last_error"].is_string(), "{ex}");
    assert_eq!(
        text(&client.call("ex__echo", json!({"text": "three"}))),
        "three"
    );
    let crashed = client.events(json!({"event_type": "backend.crashed"}));
    assert!(crashed.iter().any(|e| e["source"] == "ex"), "{crashed:?}");
}

#[test]
fn server_that_exits_at_start_ends_failed_and_others_are_unaffected() {
    let mut client = config()
        .gateway("max_restarts = 2")
        .example("bad", &["--exit-at-start"])
        .example("good", &["--name", "good"])
        .start_initialized();
    let status = eventually(
        Duration::from_secs(15),
        "the bad server to be marked failed",
        || {
            let status = client.status();
            (status["backends"]["bad"]["status"] == "failed").then_some(status)
        },
    );
    assert_eq!(status["backends"]["bad"]["restarts"], 2, "{status}");
    assert_eq!(status["backends"]["good"]["status"], "ready", "{status}");
    // Its tools are gone; a call to one says why.
    let error = client.call_error("bad__echo", json!({"text": "x"}));
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Unknown tool: bad__echo (server `bad` is failed (no more restarts): "),
        "{error}"
    );
    let failed = client.events(json!({"event_type": "backend.failed"}));
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0]["source"], "bad");
    assert_eq!(failed[0]["status"], "failure");

    let names = client.tool_names();
    assert!(!names.iter().any(|n| n.starts_with("bad__")), "{names:?}");
    assert!(names.contains(&"good__echo".to_string()), "{names:?}");
    assert_eq!(
        text(&client.call("good__echo", json!({"text": "fine"}))),
        "fine"
    );
    let error = client.call_error("bad__echo", json!({"text": "x"}));
    assert_eq!(error["code"], -32602, "{error}");
}

#[test]
fn hanging_call_times_out_with_the_timeout_in_the_error() {
    let mut client = config()
        .example_with("ex", &[], &[r#"timeout = "500ms""#])
        .example_with(
            "per_tool",
            &[],
            &[
                r#"timeout = "30s""#,
                r#"tool_timeouts = { hang = "300ms" }"#,
            ],
        )
        .start_initialized();
    for (tool, server, timeout_ms) in [
        ("ex__hang", "ex", 500u64),
        ("per_tool__hang", "per_tool", 300),
    ] {
        let started = Instant::now();
        let error = client.call_error(tool, json!({}));
        let elapsed = started.elapsed();
        assert_eq!(error["code"], -32001, "{error}");
        assert_eq!(error["data"]["timeoutMs"], timeout_ms, "{error}");
        assert_eq!(error["data"]["server"], server, "{error}");
        assert!(
            elapsed >= Duration::from_millis(timeout_ms - 20),
            "{tool} timed out early: {elapsed:?}"
        );
        assert!(
            elapsed < Duration::from_millis(timeout_ms) + Duration::from_secs(3),
            "{tool} timed out late: {elapsed:?}"
        );
    }
    // The server is still there for other calls.
    assert_eq!(
        text(&client.call("ex__echo", json!({"text": "after"}))),
        "after"
    );
    let events = client.events(json!({"event_type": "tool.called", "status": "failure"}));
    assert!(events.iter().any(|e| e["tool"] == "ex__hang"), "{events:?}");
}

#[test]
fn slow_starter_is_in_the_first_list() {
    // The first tools/list waits (bounded by startup_timeout) for servers still starting.
    let mut client = config()
        .example("slowpoke", &["--start-delay-ms", "1500"])
        .start();
    client.initialize();
    let names = client.tool_names();
    assert!(
        names.contains(&"slowpoke__echo".to_string()),
        "the first tools/list missed the slow server: {names:?}"
    );
    assert_eq!(
        text(&client.call("slowpoke__echo", json!({"text": "late but there"}))),
        "late but there"
    );
}

#[test]
fn a_server_slower_than_startup_timeout_joins_later_without_a_restart() {
    // The first list gives up on it after startup_timeout; it is not killed for that (its
    // start may be a first `npx -y` download): it has init_timeout, and joins when ready.
    let mut client = config()
        .gateway(r#"startup_timeout = "200ms""#)
        .example("slowpoke", &["--start-delay-ms", "1500"])
        .start();
    client.initialize();
    let names = client.tool_names();
    assert!(
        !names.contains(&"slowpoke__echo".to_string()),
        "the first list waited past startup_timeout: {names:?}"
    );
    client.next_notification("notifications/tools/list_changed", TIMEOUT);
    assert!(client.tool_names().contains(&"slowpoke__echo".to_string()));
    let slowpoke = client.status()["backends"]["slowpoke"].clone();
    assert_eq!(slowpoke["restarts"], 0, "{slowpoke}");
    assert_eq!(slowpoke["status"], "ready", "{slowpoke}");
}

#[test]
fn slow_starter_first_call_is_served() {
    // A call (not a list) straight after initialize, while the server still starts.
    let mut client = config()
        .example("slowpoke", &["--start-delay-ms", "800"])
        .start();
    client.initialize();
    let result = client.call("slowpoke__pid", json!({}));
    assert!(text(&result).parse::<u32>().is_ok(), "{result}");
}

#[test]
fn garbage_output_from_a_server_is_skipped() {
    let mut client = config()
        .example("noisy", &["--garbage"])
        .start_initialized();
    for i in 0..20 {
        let message = format!("message {i}");
        assert_eq!(
            text(&client.call("noisy__echo", json!({"text": message}))),
            message
        );
    }
    assert_eq!(
        client.call("noisy__add", json!({"a": 1, "b": 2}))["structuredContent"]["sum"],
        3
    );
}

#[test]
fn a_thousand_calls_in_flight() {
    let mut client = config().example("ex", &[]).start_initialized();
    let started = Instant::now();
    let mut lines = String::new();
    for i in 0..1000 {
        let request = json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                             "params": {"name": "ex__echo", "arguments": {"text": format!("msg-{i}")}}});
        lines.push_str(&request.to_string());
        lines.push('\n');
    }
    client.send_bytes(lines.as_bytes());
    let mut answered = vec![false; 1000];
    for _ in 0..1000 {
        let response = client
            .take(TIMEOUT, |m| m.get("method").is_none())
            .expect("an answer");
        let id = response["id"]
            .as_u64()
            .unwrap_or_else(|| panic!("unexpected id: {response}")) as usize;
        assert!(!answered[id], "id {id} answered twice");
        answered[id] = true;
        assert_eq!(
            text(&response["result"]),
            format!("msg-{id}"),
            "answer {id} carries another call's text"
        );
    }
    assert!(answered.iter().all(|a| *a));
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "1000 calls took {:?}",
        started.elapsed()
    );
}

/// The example servers' pids, asked through the gateway.
pub(crate) fn server_pids(client: &mut Client, servers: &[&str]) -> Vec<u32> {
    servers
        .iter()
        .map(|s| {
            text(&client.call(&format!("{s}__pid"), json!({})))
                .parse()
                .expect("a pid")
        })
        .collect()
}

/// A restarted server knows nothing of the session before: the gateway subscribes it to
/// the resources clients follow and sets their log level again. A second subscribe to one
/// URI still gets one update per change.
#[test]
fn a_restarted_server_gets_the_subscriptions_and_log_level_again() {
    let mut client = config()
        .example_with("ex", &["--crash-after", "3"], &[r#"timeout = "30s""#])
        .start_initialized();
    let uri = "example://static/hello";
    for _ in 0..2 {
        assert_eq!(
            client.result("resources/subscribe", json!({"uri": uri})),
            json!({})
        );
    }
    assert_eq!(
        client.result("logging/setLevel", json!({"level": "error"})),
        json!({})
    );
    // Every change gives one update, then the server's info messages are held back by it.
    let updates_and_quiet_info = |client: &mut Client, message: &str| {
        client.call("ex__update_resource", json!({"uri": uri}));
        client.call("ex__log", json!({"level": "info", "message": message}));
        let updated =
            client.next_notification("notifications/resources/updated", Duration::from_secs(5));
        assert_eq!(updated["params"]["uri"], uri, "{updated}");
        let messages = client.drain_notifications("notifications/message");
        assert!(
            messages.iter().all(|m| m["params"]["data"] != message),
            "an info message past the level the client set: {messages:?}"
        );
        let more = client.drain_notifications("notifications/resources/updated");
        assert!(more.is_empty(), "one change, more updates: {more:?}");
    };
    updates_and_quiet_info(&mut client, "before the crash");
    assert_eq!(
        client.call_error("ex__echo", json!({"text": "crash"}))["code"],
        -32000
    );
    restarted(&mut client, "ex");
    updates_and_quiet_info(&mut client, "after the restart");
}

/// Waits until `server` has been restarted at least once and is ready; its status entry.
fn restarted(client: &mut Client, server: &str) -> Value {
    eventually(TIMEOUT, &format!("{server} to restart"), || {
        let backend = client.status()["backends"][server].clone();
        (backend["restarts"].as_u64() >= Some(1) && backend["status"] == "ready").then_some(backend)
    })
}

pub(crate) fn assert_gone(pids: &[u32]) {
    for pid in pids {
        eventually(
            Duration::from_secs(5),
            &format!("server process {pid} to be gone"),
            || process_gone(*pid).then_some(()),
        );
    }
}

#[test]
fn stdin_close_exits_and_leaves_no_server_behind() {
    let mut client = config()
        .example("one", &[])
        .example("two", &["--name", "two"])
        .start_initialized();
    let pids = server_pids(&mut client, &["one", "two"]);
    assert!(pids.iter().all(|p| !process_gone(*p)));
    let started = Instant::now();
    client.close_stdin();
    let status = client
        .wait_exit(Duration::from_secs(5))
        .expect("the gateway exits within 5 s of stdin closing");
    assert!(status.success(), "exit status {status}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_gone(&pids);
}

#[test]
fn stdin_close_still_delivers_answers_in_flight_then_exits() {
    // `printf '...' | wasmgate`: the requests come, stdin closes, the answers must still come.
    let mut client = config().example("ex", &[]).start_initialized();
    let pids = server_pids(&mut client, &["ex"]);
    let slow = client.send_request(
        "tools/call",
        json!({"name": "ex__slow", "arguments": {"ms": 700}}),
    );
    let echo = client.send_request(
        "tools/call",
        json!({"name": "ex__echo", "arguments": {"text": "last words"}}),
    );
    client.close_stdin();
    assert_eq!(
        text(&client.wait_response(&echo, TIMEOUT)["result"]),
        "last words"
    );
    assert_eq!(
        text(&client.wait_response(&slow, TIMEOUT)["result"]),
        "slept 700 ms"
    );
    let status = client
        .wait_exit(Duration::from_secs(5))
        .expect("the gateway exits once the answers are out");
    assert!(status.success(), "exit status {status}");
    assert_gone(&pids);
}

#[test]
fn sigterm_exits_and_leaves_no_server_behind() {
    let mut client = config()
        .example("one", &[])
        .example("two", &["--name", "two"])
        .start_initialized();
    let pids = server_pids(&mut client, &["one", "two"]);
    client.signal(libc::SIGTERM);
    let status = client
        .wait_exit(Duration::from_secs(5))
        .expect("the gateway exits within 5 s of SIGTERM");
    assert!(
        status.success() || status.code().is_some(),
        "exit status {status}"
    );
    assert_gone(&pids);
}

#[test]
fn failures_of_one_server_do_not_disturb_calls_to_another() {
    let mut client = config()
        .example_with("flaky", &["--crash-after", "1"], &[])
        .example_with("steady", &["--name", "steady"], &[r#"timeout = "300ms""#])
        .start_initialized();
    // In flight together: a crash, a timeout and good calls.
    let crash = client.send_request(
        "tools/call",
        json!({"name": "flaky__echo", "arguments": {"text": "x"}}),
    );
    let hang = client.send_request(
        "tools/call",
        json!({"name": "steady__hang", "arguments": {}}),
    );
    let goods: Vec<(Value, String)> = (0..20)
        .map(|i| {
            let text = format!("good-{i}");
            (
                client.send_request(
                    "tools/call",
                    json!({"name": "steady__echo", "arguments": {"text": text}}),
                ),
                text,
            )
        })
        .collect();
    for (id, want) in &goods {
        let response = client.wait_response(id, TIMEOUT);
        assert_eq!(text(&response["result"]), want);
    }
    assert_eq!(
        client.wait_response(&crash, TIMEOUT)["error"]["code"],
        -32000
    );
    assert_eq!(
        client.wait_response(&hang, TIMEOUT)["error"]["code"],
        -32001
    );
}

#[test]
fn crashes_soon_after_good_starts_count_and_a_failed_server_lists_nothing() {
    // Each life starts well and crashes at its first call: a crash loop all the same.
    let mut client = config()
        .gateway("max_restarts = 1")
        .example("ex", &["--crash-after", "1"])
        .example("good", &["--name", "good"])
        .start_initialized();
    assert!(client.status()["backends"]["ex"]["tool_count"].as_u64() > Some(0));
    assert_eq!(
        client.call_error("ex__echo", json!({"text": "1"}))["code"],
        -32000
    );
    // Back after the first crash (the crash is seen a moment after the failed call).
    restarted(&mut client, "ex");
    client.wait_ready();
    assert_eq!(
        client.call_error("ex__echo", json!({"text": "2"}))["code"],
        -32000
    );
    let status = eventually(Duration::from_secs(15), "ex to be marked failed", || {
        let status = client.status();
        (status["backends"]["ex"]["status"] == "failed").then_some(status)
    });
    let ex = &status["backends"]["ex"];
    for count in [
        "tool_count",
        "prompt_count",
        "resource_count",
        "resource_template_count",
    ] {
        assert_eq!(ex[count], 0, "{count} of a failed server: {status}");
    }
    let names = client.tool_names();
    assert!(!names.iter().any(|n| n.starts_with("ex__")), "{names:?}");
    assert!(
        client.stderr().contains(
            "2 crashes or failed starts in a row, each within 30 s of starting (max_restarts = 1)"
        ),
        "the log says what it counted:\n{}",
        client.stderr()
    );
}

/// A server entry that runs this gateway again with the same config, through a wrapper
/// the config check cannot see through: the gateway it starts refuses to start, so the
/// entry fails like any server that cannot start, instead of starting gateways without end.
#[test]
fn a_gateway_started_by_itself_with_the_same_config_refuses_to_start() {
    let wasmgate = crate::harness::wasmgate();
    let again = format!(
        "exec '{}' serve --config \"$WASMGATE_CONFIG_UNDER_TEST\"",
        wasmgate.display()
    );
    let mut client = config()
        .gateway("max_restarts = 1")
        .example("good", &["--name", "good"])
        .server(
            "again",
            "sh",
            &["-c", &again],
            &[r#"env = { WASMGATE_CONFIG_UNDER_TEST = "{dir}/gateway.toml" }"#],
        )
        .start_initialized();
    let status = eventually(TIMEOUT, "`again` to be marked failed", || {
        let status = client.status();
        (status["backends"]["again"]["status"] == "failed").then_some(status)
    });
    let error = status["backends"]["again"]["last_error"]
        .as_str()
        .unwrap_or_default();
    assert!(
        error.contains("not starting: a wasmgate that serves this same config")
            && error.contains("gateway.toml"),
        "{status}"
    );
    assert_eq!(
        text(&client.call("good__echo", json!({"text": "still here"}))),
        "still here"
    );
}

/// The same loop through a wrapper that clears the environment (`env -i`), which the
/// chain of configs does not survive: the gateway counts the gateways among its ancestor
/// processes, and the 8th refuses to start.
#[test]
fn a_gateway_loop_through_env_i_stops_at_8_deep() {
    let wasmgate = crate::harness::wasmgate();
    let again = format!("exec '{}' serve --config \"$0\"", wasmgate.display());
    let mut client = config()
        .gateway("max_restarts = 1")
        .server(
            "again",
            "env",
            &[
                "-i",
                "PATH=/usr/bin:/bin",
                "sh",
                "-c",
                &again,
                "{dir}/gateway.toml",
            ],
            &[],
        )
        .start();
    client.initialize();
    let root = client.pid();
    let mut most = 0;
    let deadline = Instant::now() + Duration::from_secs(6);
    while Instant::now() < deadline {
        most = most.max(descendants_running(root, &wasmgate));
        std::thread::sleep(Duration::from_millis(50));
    }
    // The loop did run (7 below the first when measured), and stopped.
    assert!(
        (5..=10).contains(&most),
        "{most} gateways ran below the first at once"
    );
    assert!(client.status()["backends"]["again"].is_object());
}

/// Processes below `root` running `exe`, from /proc.
fn descendants_running(root: u32, exe: &std::path::Path) -> usize {
    let mut parents = std::collections::HashMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Some(ppid) = wasmgate::nesting::parent_of(&pid.to_string()) {
            parents.insert(pid, ppid);
        }
    }
    let below = |mut pid: u32| {
        while let Some(&parent) = parents.get(&pid) {
            if parent == root {
                return true;
            }
            pid = parent;
        }
        false
    };
    parents
        .keys()
        .filter(|&&pid| below(pid))
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|p| p == exe))
        .count()
}

/// A burst of big messages does not stay resident: once the messages stop for a moment,
/// the gateway gives the memory they took back to the system. (Through a server, whose
/// answers the gateway passes on as text: a plugin's instance slots keep some of what its
/// calls wrote, which is not the gateway's heap.)
#[test]
fn memory_a_burst_took_is_given_back_when_the_gateway_goes_idle() {
    let mut client = config().example("ex", &[]).start_initialized();
    let before = client.rss();
    let big = "x".repeat(4 << 20);
    let ids: Vec<Value> = (0..16)
        .map(|_| {
            client.send_request(
                "tools/call",
                json!({"name": "ex__echo", "arguments": {"text": big}}),
            )
        })
        .collect();
    for id in &ids {
        let answer = client.wait_response(id, TIMEOUT);
        assert_eq!(
            answer["result"]["content"][0]["text"]
                .as_str()
                .map(str::len),
            Some(4 << 20)
        );
    }
    // The high-water mark: by the time a slow reader has all the answers, the gateway may
    // have been idle long enough to give some back already.
    let peak = client.peak_rss();
    assert!(
        peak > before + (32 << 20),
        "the burst took {} MiB",
        (peak - before) >> 20
    );
    // Given back ~2 s after the last message.
    let settled = eventually(Duration::from_secs(15), "memory given back", || {
        let now = client.rss();
        (now < before + (peak - before) / 2).then_some(now)
    });
    assert!(settled < peak, "{} MiB", settled >> 20);
}

#[test]
fn stdin_close_with_a_stuck_call_exits_after_shutdown_grace() {
    // The harness config has shutdown_grace = "1s": the drain of answers in flight gets that long.
    let mut client = config().example("ex", &[]).start_initialized();
    let pids = server_pids(&mut client, &["ex"]);
    client.send_request("tools/call", json!({"name": "ex__hang", "arguments": {}}));
    client.close_stdin();
    let started = Instant::now();
    let status = client
        .wait_exit(Duration::from_secs(15))
        .expect("the gateway exits once shutdown_grace has passed");
    assert!(status.success(), "exit status {status}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "exit took {:?}",
        started.elapsed()
    );
    assert_gone(&pids);
}

#[test]
fn stdin_close_waits_for_a_batch_in_flight() {
    let mut client = config().example("ex", &[]).start();
    client.initialize_with("2025-03-26", json!({}));
    client.wait_ready();
    client.send(&json!([
        {"jsonrpc": "2.0", "id": "b1", "method": "tools/call",
         "params": {"name": "ex__slow", "arguments": {"ms": 400}}},
        {"jsonrpc": "2.0", "id": "b2", "method": "ping"},
    ]));
    client.close_stdin();
    let answer = client
        .take(TIMEOUT, Value::is_array)
        .expect("the batch is answered before the gateway exits");
    assert!(answer[0]["result"]["content"].is_array(), "{answer}");
    assert_eq!(answer[1]["result"], json!({}), "{answer}");
    let status = client
        .wait_exit(Duration::from_secs(10))
        .expect("the gateway exits after the answer");
    assert!(status.success(), "exit status {status}");
}

#[test]
fn processes_a_server_left_holding_its_output_are_killed_and_the_gateway_exits() {
    // A wrapper whose child outlives it, holding the server's stdout: the gateway waited
    // for that pipe to close, for ever.
    let script = format!(
        "sleep 1000 & echo $! > '{{dir}}/sleep.pid'; exec '{}'",
        example_server().display()
    );
    let mut client = config()
        .server("wrapped", "sh", &["-c", &script], &[])
        .start_initialized();
    let pid_file = client.config_path().with_file_name("sleep.pid");
    let sleep: u32 = std::fs::read_to_string(&pid_file)
        .expect("the wrapper wrote its child's pid")
        .trim()
        .parse()
        .expect("a pid");
    assert_eq!(
        text(&client.call("wrapped__echo", json!({"text": "hi"}))),
        "hi"
    );
    client.close_stdin();
    let status = client
        .wait_exit(Duration::from_secs(15))
        .expect("the gateway exits although a child holds the server's stdout");
    assert!(status.success(), "exit status {status}");
    assert_gone(&[sleep]);
}

#[test]
fn a_server_that_closes_its_stdout_is_restarted() {
    let mut client = config()
        .example("ex", &["--close-stdout-after", "2"])
        .start_initialized();
    assert_eq!(
        text(&client.call("ex__echo", json!({"text": "one"}))),
        "one"
    );
    let error = client.call_error("ex__echo", json!({"text": "two"}));
    assert_eq!(error["code"], -32000, "{error}");
    // Nothing it says could reach the gateway: it is stopped and started again.
    let backend = restarted(&mut client, "ex");
    assert!(
        backend["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("closed its stdout while running")),
        "{backend}"
    );
    assert_eq!(
        text(&client.call("ex__echo", json!({"text": "three"}))),
        "three"
    );
}

#[test]
fn a_result_that_is_not_an_object_is_an_internal_error_naming_the_server() {
    let mut client = config()
        .example("ex", &["--non-object-results"])
        .start_initialized();
    let error = client.call_error("ex__echo", json!({"text": "x"}));
    assert_eq!(error["code"], -32603, "{error}");
    assert!(
        error["message"].as_str().is_some_and(
            |m| m.contains("server `ex` answered with a result that is not a JSON object: 42")
        ),
        "{error}"
    );
}

#[test]
fn a_tool_without_an_input_schema_is_left_out_and_the_others_are_served() {
    let mut client = config()
        .example("ex", &["--schemaless-tool"])
        .start_initialized();
    let names = client.tool_names();
    assert!(names.contains(&"ex__echo".to_string()), "{names:?}");
    assert!(!names.contains(&"ex__loose".to_string()), "{names:?}");
    assert!(
        client
            .stderr()
            .contains("tool left out: it has no inputSchema"),
        "{}",
        client.stderr()
    );
    // A name the specification only advises against is served, with a warning.
    assert!(names.contains(&"ex__odd name".to_string()), "{names:?}");
    assert!(
        client
            .stderr()
            .contains("tool `odd name` has a name some clients refuse"),
        "{}",
        client.stderr()
    );
}

#[test]
fn a_server_that_repeats_a_cursor_is_listed_once() {
    // Its every page ends with the same cursor: the listing stops at the repeat instead of
    // taking the same page a thousand times.
    let mut client = config()
        .example("loop", &["--endless-cursor"])
        .start_initialized();
    let names = client.tool_names();
    let echoes = names.iter().filter(|n| *n == "loop__echo").count();
    assert_eq!(echoes, 1, "{names:?}");
    // Two pages were taken (the first, and the one its cursor named), not a thousand, and
    // the tools the second repeated are counted once.
    let served = names.iter().filter(|n| n.starts_with("loop__")).count() as u64;
    let status = client.status();
    assert_eq!(
        status["backends"]["loop"]["tool_count"].as_u64(),
        Some(served),
        "{status}"
    );
    assert!(
        client
            .stderr()
            .contains("the server gave a cursor it gave before; stopping there"),
        "{}",
        client.stderr()
    );
}
