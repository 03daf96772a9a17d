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
