//! What a misbehaving server can do to clients and to the gateway, through the real binary:
//! progress for another server's call, log messages below a client's level, secrets in its
//! arguments and environment, and a stderr full of bytes that are not text.

use std::time::Duration;

use serde_json::json;

use crate::harness::{TIMEOUT, TestDir, config, example_server, run_cli_with_env, text};

/// One server cannot send progress for another server's call: the token it would need is
/// unguessable and, even when learnt, bound to the server it was given to. A server's own
/// progress must increase.
#[test]
fn a_server_cannot_send_progress_for_another_servers_call() {
    let mut client = config()
        .example("a", &["--name", "a"])
        .example("b", &["--name", "b"])
        .start_initialized();
    let id = client.send_request(
        "tools/call",
        json!({"name": "a__slow", "arguments": {"ms": 1500, "announce": true},
               "_meta": {"progressToken": "mine"}}),
    );
    // `a` says which gateway token it got (as a log message the client sees).
    let said = client.next_notification("notifications/message", TIMEOUT);
    let announced = said["params"]["data"].as_str().unwrap().to_string();
    let token: String = serde_json::from_str(announced.trim_start_matches("token ")).unwrap();
    assert!(token.starts_with("wg-") && token.len() > 30, "{token}");
    // `b` uses it, as a server that learnt it would.
    let spoof = client.call(
        "b__log",
        json!({"level": "info", "message": "spoofed", "progress_token": token}),
    );
    assert_eq!(text(&spoof), "logged");
    let (before, response) = client.until_response(&id, TIMEOUT);
    assert_eq!(text(&response["result"]), "slept 1500 ms");
    let progress: Vec<u64> = before
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| {
            assert_eq!(m["params"]["progressToken"], "mine", "{m}");
            m["params"]["progress"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(progress, [1, 2, 3], "b's progress reached a's caller");
    // The token ended with the call: not even `a` can use it now.
    let late = client.call(
        "a__log",
        json!({"level": "info", "message": "late", "progress_token": token}),
    );
    assert_eq!(text(&late), "logged");
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        client
            .drain_notifications("notifications/progress")
            .is_empty()
    );
}

/// A server's log messages reach a client only at or above the level that client set,
/// even from a server that ignores `logging/setLevel`.
#[test]
fn a_servers_log_messages_honour_the_clients_level() {
    let mut client = config().example("ex", &[]).start_initialized();
    client.result("logging/setLevel", json!({"level": "error"}));
    client.drain_notifications("notifications/message");
    for (level, message) in [("info", "below"), ("error", "at")] {
        client.call(
            "ex__log",
            json!({"level": level, "message": message, "ignore_level": true}),
        );
    }
    let message = client.next_notification("notifications/message", TIMEOUT);
    assert_eq!(message["params"]["data"], "at", "{message}");
    std::thread::sleep(Duration::from_millis(200));
    let rest = client.drain_notifications("notifications/message");
    assert!(rest.is_empty(), "{rest:?}");
}

/// `check` prints arguments as written, not with a secret expanded into them; a server gets
/// the base variables and its own `env`, not the gateway's whole environment, unless
/// `inherit_env = true`.
#[test]
fn secrets_stay_with_the_server_they_are_for() {
    let dir = TestDir::new("secrets");
    let server = example_server();
    let env_dump = dir.join("env.txt");
    let script = dir.write(
        "dump-env.sh",
        &format!(
            "#!/bin/sh\nenv > {}\nexec {} \"$@\"\n",
            env_dump.display(),
            server.display()
        ),
    );
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let toml = |inherit: bool| {
        format!(
            "[servers.s]\ncommand = \"{}\"\nargs = [\"--name\", \"${{TOKEN_FOR_S}}\"]\n\
             env = {{ MINE = \"${{TOKEN_FOR_S}}\" }}\ninherit_env = {inherit}\n",
            script.display()
        )
    };
    let path = dir.write("gateway.toml", &toml(false));
    let env = [
        ("TOKEN_FOR_S", "s3cr3t-s"),
        ("TOKEN_FOR_OTHERS", "s3cr3t-o"),
    ];
    let check = run_cli_with_env(
        &["check", "--config", path.to_str().unwrap()],
        &dir.path,
        &env,
        TIMEOUT,
    );
    assert!(check.status.success(), "{}{}", check.stdout, check.stderr);
    assert!(!check.stdout.contains("s3cr3t"), "{}", check.stdout);
    assert!(check.stdout.contains("${TOKEN_FOR_S}"), "{}", check.stdout);

    for inherit in [false, true] {
        let _ = std::fs::remove_file(&env_dump);
        dir.write("gateway.toml", &toml(inherit));
        let call = run_cli_with_env(
            &[
                "call",
                "--config",
                path.to_str().unwrap(),
                "s__echo",
                r#"{"text":"x"}"#,
            ],
            &dir.path,
            &env,
            Duration::from_secs(60),
        );
        assert!(call.status.success(), "{}{}", call.stdout, call.stderr);
        let seen = std::fs::read_to_string(&env_dump).unwrap();
        assert!(seen.contains("MINE=s3cr3t-s"), "{seen}");
        assert!(seen.lines().any(|l| l.starts_with("PATH=")), "{seen}");
        assert_eq!(
            seen.contains("TOKEN_FOR_OTHERS"),
            inherit,
            "inherit_env = {inherit}: {seen}"
        );
    }
}

/// A server that writes bytes that are not UTF-8, megabyte lines and terminal escapes to
/// stderr keeps being read (it would die of SIGPIPE otherwise) and keeps answering; the log
/// gets one escaped, cut line for each.
#[test]
fn a_server_writing_junk_to_stderr_keeps_serving() {
    let mut client = config()
        .example("ex", &["--stderr-junk"])
        .start_initialized();
    let pid = text(&client.call("ex__pid", json!({}))).to_string();
    for i in 0..5 {
        let echoed = client.call("ex__echo", json!({"text": format!("call {i}")}));
        assert_eq!(text(&echoed), format!("call {i}"));
    }
    assert_eq!(
        text(&client.call("ex__pid", json!({}))),
        pid,
        "the server restarted"
    );
    let stderr = client.stderr();
    assert!(
        stderr.contains("junk call 7"),
        "{}",
        &stderr[stderr.len().saturating_sub(2000)..]
    );
    assert!(stderr.contains("\\u{1b}[31mred"), "escapes are not escaped");
    assert!(stderr.contains("more bytes cut"), "a long line was not cut");
    assert!(
        stderr.lines().all(|l| l.len() < 10_000),
        "a line of the log is longer than the cut"
    );
}

/// A server that stops reading its stdin: what the gateway queues for it is bounded, calls
/// past that fail at once saying why (not at their timeout), and another server goes on.
#[test]
fn a_server_that_stops_reading_its_stdin_is_not_fed_without_end() {
    let mut client = config()
        .example_with(
            "deaf",
            &["--stop-reading-after", "1"],
            &["timeout = \"60s\""],
        )
        .example("ex", &[])
        .start_initialized();
    assert_eq!(
        text(&client.call("deaf__echo", json!({"text": "heard"}))),
        "heard"
    );
    // 1 MiB a call: the pipe holds 64 KiB, the gateway's queue 16 MiB, then it refuses.
    let big = "b".repeat(1 << 20);
    let mut ids = Vec::new();
    for _ in 0..24 {
        ids.push(client.send_request(
            "tools/call",
            json!({"name": "deaf__echo", "arguments": {"text": big}}),
        ));
    }
    let refused = crate::harness::eventually(TIMEOUT, "a call refused at once", || {
        ids.iter()
            .find_map(|id| client.try_response(id, Duration::from_millis(10)))
    });
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("is not reading its stdin"), "{refused}");
    assert_eq!(refused["error"]["code"], -32000, "{refused}");
    assert_eq!(
        text(&client.call("ex__echo", json!({"text": "other"}))),
        "other"
    );
    let rss = client.rss();
    assert!(rss < 400 << 20, "the gateway holds {} MiB", rss >> 20);
}

/// A client that never answers a server's sampling request: the request times out (the
/// client is told it is cancelled) and the server gets an error, not a wait without end.
#[test]
fn a_client_that_never_answers_a_server_request_times_it_out() {
    let mut client = config()
        .gateway(r#"timeout = "1s""#)
        .example_with("ex", &[], &["timeout = \"30s\""])
        .start_initialized();
    let id = client.send_request(
        "tools/call",
        json!({"name": "ex__sample", "arguments": {"prompt": "hi"}}),
    );
    let asked = client.next_client_request(TIMEOUT);
    assert_eq!(asked["method"], "sampling/createMessage", "{asked}");
    // Not answered.
    let cancelled = client.next_notification("notifications/cancelled", TIMEOUT);
    assert_eq!(cancelled["params"]["requestId"], asked["id"], "{cancelled}");
    let response = client.wait_response(&id, TIMEOUT);
    let result = &response["result"];
    assert_eq!(result["isError"], true, "{response}");
    assert!(
        text(result).contains("did not answer sampling/createMessage"),
        "{response}"
    );
}

/// A client that stops reading its stdout: once 16 MiB of answers wait for it, the gateway
/// reads no more of its requests (instead of making every answer it is asked for); when the
/// client reads again, every answer arrives. Each request is sent once the one before it is
/// answered (the events file says when), so the count does not depend on the machine's load.
#[test]
fn a_client_that_stops_reading_is_not_answered_without_end() {
    client_that_stops_reading(false);
}

/// A client that stopped reading and then goes away, its answers still queued: the gateway
/// sees the end of its input and exits, instead of waiting for room that never comes.
#[test]
fn a_client_that_stops_reading_and_leaves_ends_the_gateway() {
    client_that_stops_reading(true);
}

fn client_that_stops_reading(leave: bool) {
    use std::io::{BufRead, Write};
    use std::process::{Command, Stdio};
    let dir = TestDir::new("deaf-client");
    let events = dir.join("events.jsonl");
    let gateway = format!("events = {:?}", events.to_str().unwrap());
    let path = dir.write(
        "gateway.toml",
        &config()
            .gateway(&gateway)
            .example("ex", &[])
            .render(&dir.path),
    );
    let mut child = KillOnDrop(
        Command::new(crate::harness::wasmgate())
            .args(["serve", "--config", path.to_str().unwrap()])
            .env("WASMGATE_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.join("stderr.txt")).unwrap())
            .spawn()
            .unwrap(),
    );
    let mut stdin = child.0.stdin.take().unwrap();
    let send = |stdin: &mut std::process::ChildStdin, message: serde_json::Value| {
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    };
    let answered = || {
        std::fs::read_to_string(&events)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("\"tool.called\"") && l.contains("ex__big"))
            .count()
    };
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}),
    );
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    const CALLS: usize = 48;
    let mut stalled_at = None;
    for id in 0..CALLS {
        let big = json!({"name": "ex__big", "arguments": {"bytes": 1 << 20}});
        send(
            &mut stdin,
            json!({"jsonrpc": "2.0", "id": 100 + id, "method": "tools/call", "params": big}),
        );
        if stalled_at.is_none() {
            let deadline = std::time::Instant::now() + Duration::from_secs(3);
            while answered() <= id && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if answered() <= id {
                stalled_at = Some(answered());
            }
        }
    }
    let stalled_at = stalled_at.expect("every request was read and answered: nothing held back");
    // 16 MiB of 1 MiB answers, and the one that crossed the line.
    assert!(
        stalled_at <= 20,
        "{stalled_at} answers made for a client that reads none"
    );

    let stdout = child.0.stdout.take().unwrap();
    if leave {
        // The client goes away with its answers still queued: the gateway exits.
        drop(stdout);
        drop(stdin);
        let exited = crate::harness::eventually(TIMEOUT, "the gateway to exit", || {
            child.0.try_wait().ok().flatten()
        });
        assert!(exited.code().is_some(), "{exited}");
        return;
    }
    let mut ids = std::collections::BTreeSet::new();
    for line in std::io::BufReader::new(stdout).lines() {
        let message: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        if let Some(id) = message["id"].as_u64().filter(|id| *id >= 100) {
            assert!(message["result"]["content"][0]["text"].is_string(), "{id}");
            ids.insert(id);
            if ids.len() == CALLS {
                break;
            }
        }
    }
    assert_eq!(ids.len(), CALLS);
    drop(stdin);
    let _ = child.0.wait();
}

/// The gateway's process, killed if a test ends before it exits.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
