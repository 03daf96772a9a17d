//! Limits that stop a plugin (time, memory, fuel, output) while the gateway keeps
//! serving, and a plugin flooded with slow calls leaving instances to the others.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{TIMEOUT, backend, call_failed, call_ok, fixture, has, setup, text};

// ---- 3. limits ----

#[test]
fn limits_stop_a_plugin_and_the_gateway_keeps_serving() {
    let (mut client, names) = setup()
        .file("echo.wasm", fixture("echo"))
        .file("faulty.wasm", fixture("faulty"))
        .plugins("[plugins.faulty]\ntimeout = \"300ms\"\nmemory = \"16MiB\"")
        .start_listed();
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
        .start_listed();
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
