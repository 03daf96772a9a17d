//! The MCP lifecycle: what works before `initialize`, its params, version negotiation,
//! a second `initialize`, the `initialized` notification in both spellings.

use serde_json::json;

use crate::harness::{Client, TIMEOUT, TestDir, config};

#[test]
fn ping_works_before_initialize() {
    let mut client = config().start();
    assert_eq!(client.result("ping", json!({})), json!({}));
}

#[test]
fn requests_before_initialize_are_refused_then_served() {
    let mut client = config().start();
    for method in ["tools/list", "resources/list", "prompts/list"] {
        let error = client.error(method, json!({}));
        let code = error["code"].as_i64().unwrap();
        assert!(
            code == -32002 || code == -32600,
            "{method} before initialize: {error}"
        );
    }
    let error = client.error(
        "tools/call",
        json!({"name": "gateway_status", "arguments": {}}),
    );
    assert!(
        [-32002, -32600].contains(&error["code"].as_i64().unwrap()),
        "{error}"
    );
    // The session survived and works once initialized.
    client.initialize();
    let names = client.tool_names();
    assert!(names.contains(&"gateway_status".to_string()), "{names:?}");
}

#[test]
fn negotiates_each_supported_version_and_falls_back_to_the_latest() {
    let cases = [
        ("2024-11-05", "2024-11-05"),
        ("2025-03-26", "2025-03-26"),
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("1999-01-01", "2025-11-25"),
    ];
    // All gateways at once: they start in parallel.
    let mut clients: Vec<(Client, &str, &str)> = cases
        .iter()
        .map(|(asked, want)| (config().start(), *asked, *want))
        .collect();
    for (client, asked, want) in &mut clients {
        let result = client.initialize_with(asked, json!({}));
        assert_eq!(
            result["protocolVersion"], *want,
            "asked for {asked}: {result}"
        );
        assert_eq!(result["serverInfo"]["name"], "wasmgate", "{result}");
        assert!(result["capabilities"]["tools"].is_object(), "{result}");
        // The session is usable at the negotiated version.
        assert!(client.tool_names().contains(&"get_events".to_string()));
    }
}

#[test]
fn initialized_is_accepted_in_both_spellings() {
    let mut client = config().start();
    client.result(
        "initialize",
        json!({"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}),
    );
    // The old spelling, then the current one: neither gets an answer nor breaks anything.
    client.notify("initialized", json!({}));
    client.notify("notifications/initialized", json!({}));
    let id = client.send_request("ping", json!({}));
    let next = client.read_message(TIMEOUT).expect("an answer to ping");
    assert_eq!(next["id"], id, "a notification was answered: {next}");
    assert_eq!(next["result"], json!({}));
    assert!(client.call("gateway_status", json!({}))["structuredContent"]["gateway"].is_object());
}

#[test]
fn without_any_config_the_builtin_tools_are_served() {
    let mut client = Client::spawn(&[], TestDir::new("noconfig"));
    client.initialize();
    let names = client.tool_names();
    for builtin in ["gateway_status", "get_events"] {
        assert!(names.contains(&builtin.to_string()), "{names:?}");
    }
    let status = client.status();
    assert_eq!(status["gateway"]["name"], "wasmgate", "{status}");
    let events = client.events(json!({"event_type": "gateway.started"}));
    assert_eq!(events.len(), 1, "{events:?}");
}

#[test]
fn status_shows_the_log_level_in_effect() {
    // The config says warn; `--log-level` (here its variable WASMGATE_LOG) wins.
    let dir = TestDir::new("loglevel");
    let config = dir.write("gateway.toml", "[gateway]\nlog_level = \"warn\"\n");
    let mut client = Client::spawn_with_env(
        &["serve", "--config", config.to_str().unwrap()],
        dir,
        &[("WASMGATE_LOG", "debug")],
    );
    client.initialize();
    let status = client.status();
    assert_eq!(
        status["gateway"]["config"]["log_level"], "debug",
        "{status}"
    );
}

#[test]
fn the_first_lists_include_every_server() {
    // Straight after initialize, while the servers may still be starting: the first
    // answers wait for them rather than show a partial catalog.
    let mut client = crate::harness::config()
        .example("one", &[])
        .example("two", &["--name", "two"])
        .start();
    client.initialize();
    let names = client.tool_names();
    for tool in ["one__echo", "two__echo"] {
        assert!(
            names.contains(&tool.to_string()),
            "{tool} missing from the first tools/list: {names:?}"
        );
    }
    let prompts = client.list_all("prompts/list", "prompts");
    assert_eq!(prompts.len(), 2, "{prompts:?}");
    let templates = client.list_all("resources/templates/list", "resourceTemplates");
    assert_eq!(templates.len(), 2, "{templates:?}");
}

#[test]
fn client_and_server_versions_are_negotiated_independently() {
    // An old server behind a new client, and a new server behind an old client.
    let mut client = crate::harness::config()
        .example("old", &["--protocol", "2024-11-05"])
        .example("new", &["--name", "new"])
        .start();
    let result = client.initialize_with("2024-11-05", json!({}));
    assert_eq!(result["protocolVersion"], "2024-11-05");
    client.wait_ready();
    let status = client.status();
    assert_eq!(
        status["backends"]["old"]["protocol_version"], "2024-11-05",
        "{status}"
    );
    assert_eq!(
        status["backends"]["new"]["protocol_version"], "2025-11-25",
        "{status}"
    );
    for server in ["old", "new"] {
        let result = client.call(&format!("{server}__echo"), json!({"text": server}));
        assert_eq!(crate::harness::text(&result), server);
    }
    assert!(
        !client
            .stderr()
            .contains("a protocol version the gateway does not speak"),
        "{}",
        client.stderr()
    );
}

#[test]
fn a_server_that_answers_with_an_unknown_version_is_served_with_a_warning() {
    let mut client = crate::harness::config()
        .example("odd", &["--protocol", "1999-01-01"])
        .start_initialized();
    let result = client.call("odd__echo", json!({"text": "still"}));
    assert_eq!(crate::harness::text(&result), "still");
    assert!(
        client.stderr().contains(
            "the server answered initialize with a protocol version the gateway does not speak"
        ),
        "{}",
        client.stderr()
    );
}

#[test]
fn initialize_does_not_wait_for_a_slow_server_but_the_first_list_does() {
    // The gateway answers `initialize` at once (a client must not hang on a slow server);
    // the first tools/list waits for it (bounded by startup_timeout), so it is complete.
    let mut client = crate::harness::config()
        .example(
            "slow",
            &[
                "--instructions",
                "Call slow__echo.",
                "--start-delay-ms",
                "4000",
            ],
        )
        .start();
    let result = client.initialize_with("2025-11-25", json!({}));
    // Had it waited, the server would be up by now.
    let status = client.status();
    assert_eq!(
        status["backends"]["slow"]["status"], "starting",
        "initialize waited for the server: {status}"
    );
    assert!(result["capabilities"]["tools"].is_object(), "{result}");
    let tools = client.request("tools/list", json!({}));
    let names: Vec<_> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].clone())
        .collect();
    assert!(names.contains(&json!("slow__echo")), "{names:?}");
}

#[test]
fn a_call_straight_after_initialize_reaches_a_fast_server() {
    // No tools/list first, as a client does that remembers the tools from its last session.
    // A server becomes ready a moment before the catalog shows it; a call in that moment
    // must still be routed. Several rounds, since the moment is short.
    // Several rounds, four gateways at a time, since the moment is short.
    for round in 0..4 {
        let clients: Vec<Client> = (0..4)
            .map(|_| crate::harness::config().example("ex", &[]).start())
            .collect();
        let threads: Vec<_> = clients
            .into_iter()
            .map(|mut client| {
                std::thread::spawn(move || {
                    client.initialize();
                    client.request(
                        "tools/call",
                        json!({"name": "ex__echo", "arguments": {"text": "quick"}}),
                    )
                })
            })
            .collect();
        for thread in threads {
            let response = thread.join().expect("client thread");
            assert_eq!(
                response["result"]["content"][0]["text"], "quick",
                "round {round}: {response}"
            );
        }
    }
}

#[test]
fn initialize_params_are_checked() {
    let mut client = config().start();
    let info = json!({"name": "me", "version": "1"});
    let cases = [
        (None, "params"),
        (
            Some(json!({"capabilities": {}, "clientInfo": info})),
            "protocolVersion",
        ),
        (
            Some(json!({"protocolVersion": 5, "capabilities": {}, "clientInfo": info})),
            "protocolVersion",
        ),
        (
            Some(json!({"protocolVersion": "2025-06-18", "clientInfo": info})),
            "capabilities",
        ),
        (
            Some(json!({"protocolVersion": "2025-06-18", "capabilities": [], "clientInfo": info})),
            "capabilities",
        ),
        (
            Some(json!({"protocolVersion": "2025-06-18", "capabilities": {}})),
            "clientInfo",
        ),
        (
            Some(
                json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "me"}}),
            ),
            "clientInfo",
        ),
    ];
    for (params, field) in cases {
        let mut request = json!({"jsonrpc": "2.0", "id": "init", "method": "initialize"});
        if let Some(params) = &params {
            request["params"] = params.clone();
        }
        client.send(&request);
        let answer = client.wait_response(&json!("init"), TIMEOUT);
        assert_eq!(answer["error"]["code"], -32602, "{params:?}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(field), "{params:?}: {message}");
    }
    // None of them initialized the session.
    assert_eq!(client.error("tools/list", json!({}))["code"], -32002);
    client.initialize_with("2025-06-18", json!({}));
    assert!(client.tool_names().contains(&"gateway_status".to_string()));
}

#[test]
fn a_second_initialize_is_refused_and_changes_nothing() {
    let mut client = config().start();
    client.initialize_with("2025-06-18", json!({}));
    let error = client.error(
        "initialize",
        json!({"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "again", "version": "1"}}),
    );
    assert_eq!(error["code"], -32600, "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("already initialized"),
        "{error}"
    );
    // Still at 2025-06-18, which has no batches.
    client.send(&json!([{"jsonrpc": "2.0", "id": "b", "method": "ping"}]));
    let answer = client
        .read_message(TIMEOUT)
        .expect("an answer to the batch");
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
}
