//! Config hot reload while a client is connected.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::{config, eventually, text};

#[test]
fn adding_a_server_to_the_config_file_announces_its_tools() {
    let first = config().example("one", &["--name", "one"]);
    let mut client = first.start_initialized();
    assert!(client.tool_names().contains(&"one__echo".to_string()));
    let pid_before = text(&client.call("one__pid", json!({}))).to_string();
    client.drain_notifications("notifications/tools/list_changed");

    let second = first.example("two", &["--name", "two"]);
    std::fs::write(client.config_path(), second.render(&client.dir.path)).unwrap();

    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        client.next_notification("notifications/tools/list_changed", left);
        if client.tool_names().contains(&"two__echo".to_string()) {
            break;
        }
    }
    assert_eq!(
        text(&client.call("two__echo", json!({"text": "new"}))),
        "new"
    );
    // The unchanged server kept running.
    assert_eq!(text(&client.call("one__pid", json!({}))), pid_before);
    let reloaded = client.events(json!({"event_type": "config.reloaded"}));
    assert!(!reloaded.is_empty());
}

#[test]
fn reading_the_config_file_is_not_a_change() {
    let first = config().example("one", &["--name", "one"]);
    let mut client = first.start_initialized();
    let reloads = |client: &mut crate::harness::Client| {
        client
            .events(json!({"event_type": "config.reloaded"}))
            .len()
    };
    // An editor or a backup tool reads the file; so does the gateway, after each change.
    for _ in 0..3 {
        std::fs::read_to_string(client.config_path()).unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(reloads(&mut client), 0, "a read reloaded the config");

    let second = first.example("two", &["--name", "two"]);
    std::fs::write(client.config_path(), second.render(&client.dir.path)).unwrap();
    let after_write = eventually(Duration::from_secs(15), "a config.reloaded event", || {
        let n = reloads(&mut client);
        (n > 0).then_some(n)
    });
    // The gateway's own read of the new file must not start another reload (the
    // debounce is 150 ms: a loop would have reloaded several times by now).
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        reloads(&mut client),
        after_write,
        "the config reloaded again without a change"
    );
}

#[test]
fn removing_a_server_drops_its_tools() {
    let both = config()
        .example("one", &[])
        .example("two", &["--name", "two"]);
    let mut client = both.start_initialized();
    let names = client.tool_names();
    assert!(names.contains(&"two__echo".to_string()), "{names:?}");
    let pid_two: u32 = text(&client.call("two__pid", json!({}))).parse().unwrap();
    client.drain_notifications("notifications/tools/list_changed");

    std::fs::write(
        client.config_path(),
        config().example("one", &[]).render(&client.dir.path),
    )
    .unwrap();
    client.next_notification("notifications/tools/list_changed", Duration::from_secs(15));
    eventually(Duration::from_secs(5), "two__echo to disappear", || {
        (!client.tool_names().contains(&"two__echo".to_string())).then_some(())
    });
    eventually(
        Duration::from_secs(5),
        "the removed server's process to end",
        || crate::harness::process_gone(pid_two).then_some(()),
    );
    assert_eq!(
        text(&client.call("one__echo", json!({"text": "kept"}))),
        "kept"
    );
}

#[test]
fn an_invalid_edit_is_recorded_and_the_old_config_stays() {
    let mut client = config().example("one", &[]).start_initialized();
    assert!(client.tool_names().contains(&"one__echo".to_string()));
    std::fs::write(client.config_path(), "[gateway\nthis is not toml").unwrap();
    let invalid = eventually(Duration::from_secs(10), "a config.invalid event", || {
        let events = client.events(json!({"event_type": "config.invalid"}));
        events.into_iter().next()
    });
    assert_eq!(invalid["status"], "failure", "{invalid}");
    assert!(
        invalid["error"]
            .as_str()
            .is_some_and(|e| e.contains("gateway.toml")),
        "the error names the file: {invalid}"
    );
    assert_eq!(
        text(&client.call("one__echo", json!({"text": "still here"}))),
        "still here"
    );
    assert!(client.tool_names().contains(&"one__echo".to_string()));
}

#[test]
fn changing_one_servers_args_restarts_only_that_server() {
    let before = config()
        .example("stay", &["--name", "stay"])
        .example("change", &["--name", "v1"]);
    let mut client = before.start_initialized();
    let stay_pid = text(&client.call("stay__pid", json!({}))).to_string();
    let old_pid: u32 = text(&client.call("change__pid", json!({})))
        .parse()
        .unwrap();

    let after = config()
        .example("stay", &["--name", "stay"])
        .example("change", &["--name", "v2", "--tools", "1"]);
    std::fs::write(client.config_path(), after.render(&client.dir.path)).unwrap();
    client.next_notification("notifications/tools/list_changed", Duration::from_secs(15));
    eventually(
        Duration::from_secs(10),
        "change__gen_0 to be listed",
        || {
            client
                .tool_names()
                .contains(&"change__gen_0".to_string())
                .then_some(())
        },
    );
    let new_pid: u32 = text(&client.call("change__pid", json!({})))
        .parse()
        .unwrap();
    assert_ne!(new_pid, old_pid, "the changed server was restarted");
    eventually(Duration::from_secs(5), "the old process to end", || {
        crate::harness::process_gone(old_pid).then_some(())
    });
    assert_eq!(
        text(&client.call("stay__pid", json!({}))),
        stay_pid,
        "the unchanged server kept running"
    );
    let status = client.status();
    assert_eq!(
        status["backends"]["change"]["server_info"]["name"], "v2",
        "{status}"
    );
}

#[test]
fn changing_tool_filters_and_timeouts_applies_live_without_a_restart() {
    let mut client = config().example("ex", &[]).start_initialized();
    let pid = text(&client.call("ex__pid", json!({}))).to_string();
    assert!(client.tool_names().contains(&"ex__add".to_string()));
    client.drain_notifications("notifications/tools/list_changed");
    // In flight across the reload: a restart would fail it.
    let slow = client.send_request(
        "tools/call",
        json!({"name": "ex__slow", "arguments": {"ms": 2500}}),
    );

    let after = config().example_with(
        "ex",
        &[],
        &[
            r#"disabled_tools = ["add", "longRunning*"]"#,
            r#"timeout = "700ms""#,
        ],
    );
    std::fs::write(client.config_path(), after.render(&client.dir.path)).unwrap();
    client.next_notification("notifications/tools/list_changed", Duration::from_secs(15));
    let names = client.tool_names();
    assert!(!names.contains(&"ex__add".to_string()), "{names:?}");
    assert!(names.contains(&"ex__echo".to_string()), "{names:?}");
    // A pattern that hides nothing is named in the log (a typo, or a renamed tool).
    let stderr = client.stderr();
    assert!(
        stderr.lines().any(
            |l| l.contains("tool filter patterns that match none of its")
                && l.contains(" tools: longRunning* (")
        ),
        "{stderr}"
    );

    let response = client.wait_response(&slow, crate::harness::TIMEOUT);
    assert_eq!(
        response["result"]["content"][0]["text"], "slept 2500 ms",
        "the call in flight was cut: {response}"
    );
    assert_eq!(text(&client.call("ex__pid", json!({}))), pid, "restarted");
    let error = client.call_error("ex__slow", json!({"ms": 3000}));
    assert_eq!(error["code"], -32001, "{error}");
    assert_eq!(error["data"]["timeoutMs"], 700, "{error}");
    assert_eq!(client.status()["backends"]["ex"]["restarts"], 0);
}

/// `events` and `log_level` follow the file: an events file whose folder is missing is
/// created once the folder appears, an edit moves the events to another file, and a
/// new `log_level` applies at once (when neither `RUST_LOG` nor `--log-level` set one).
#[test]
fn the_events_file_and_log_level_follow_the_config() {
    let first = config()
        .config_log_level()
        .gateway(r#"events = "{dir}/later/events.jsonl""#)
        .example("ex", &[]);
    let mut client = first.start_initialized();
    let calls_in = |client: &mut crate::harness::Client, file: &str| {
        let path = client.dir.join(file);
        eventually(
            Duration::from_secs(10),
            &format!("tool.called in {file}"),
            || {
                client.call("ex__echo", json!({"text": "x"}));
                let text = std::fs::read_to_string(&path).ok()?;
                text.contains(r#""event_type":"tool.called""#).then_some(())
            },
        );
    };
    std::fs::create_dir(client.dir.join("later")).unwrap();
    calls_in(&mut client, "later/events.jsonl");
    assert_eq!(client.status()["gateway"]["config"]["log_level"], "info");

    let second = config()
        .config_log_level()
        .gateway(r#"events = "{dir}/second.jsonl""#)
        .gateway(r#"log_level = "debug""#)
        .example("ex", &[]);
    std::fs::write(client.config_path(), second.render(&client.dir.path)).unwrap();
    eventually(Duration::from_secs(10), "log_level debug in effect", || {
        (client.status()["gateway"]["config"]["log_level"] == "debug").then_some(())
    });
    calls_in(&mut client, "second.jsonl");
    assert!(
        client.stderr().contains("DEBUG"),
        "no debug line after the level changed"
    );
}

/// Capabilities are fixed for a session, and an edit of the config file may add a server
/// with prompts or resources: with a config file they are offered from the start.
#[test]
fn a_config_file_without_servers_still_offers_prompts_and_resources() {
    let first = config();
    let mut client = first.start();
    let result = client.initialize_with("2025-11-25", json!({}));
    let capabilities = &result["capabilities"];
    assert!(capabilities["prompts"].is_object(), "{result}");
    assert!(capabilities["resources"].is_object(), "{result}");
    assert_eq!(
        client.result("prompts/list", json!({})),
        json!({"prompts": []})
    );

    let second = first.example("ex", &[]);
    std::fs::write(client.config_path(), second.render(&client.dir.path)).unwrap();
    client.next_notification(
        "notifications/prompts/list_changed",
        Duration::from_secs(15),
    );
    eventually(Duration::from_secs(15), "the server's prompts", || {
        let prompts = client.result("prompts/list", json!({}));
        prompts["prompts"]
            .as_array()
            .is_some_and(|p| !p.is_empty())
            .then_some(())
    });
}
