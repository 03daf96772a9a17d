//! The `[[middleware]]` chain through the real binary over stdio, with the `mwtest` fixture
//! (what each hook does is set in its config): denials that never reach the server,
//! replaced params and results, answers, the onion's order, list edits (renames both
//! ways, hidden tools), requests a server sends the client, failures under each
//! `on_error`, the chain in `gateway_status` and `get_events`, and reloads under load.

use std::time::Duration;

use serde_json::{Value, json};

use crate::custom_section::with_custom_section;
use crate::harness::{Client, Config, call_ok, config, fixture, fixture_path, text, wait_event};

const WAIT: Duration = Duration::from_secs(60);

/// One `[[middleware]]` link running the fixture, with `lines` added to its table.
fn link(name: &str, lines: &[&str]) -> String {
    let path = fixture_path("mwtest");
    let mut table = format!(
        "[[middleware]]\nname = \"{name}\"\npath = {:?}\n",
        path.to_str().expect("utf-8 path")
    );
    for line in lines {
        table.push_str(line);
        table.push('\n');
    }
    table
}

/// The example server as `ex` and the `echo` plugin, behind `links`.
fn gateway(links: &[String]) -> Config {
    let mut config = config()
        .gateway(r#"startup_timeout = "120s""#)
        .file("echo.wasm", fixture("echo"))
        .example("ex", &[]);
    for link in links {
        config = config.plugins(link);
    }
    config
}

fn start(links: &[String]) -> Client {
    gateway(links).start_initialized()
}

/// A tools/call that must end with a JSON-RPC error; the error.
fn call_error(client: &mut Client, tool: &str, arguments: Value) -> Value {
    let answer = client.request("tools/call", json!({"name": tool, "arguments": arguments}));
    answer
        .get("error")
        .cloned()
        .unwrap_or_else(|| panic!("{tool}: expected an error, got {answer}"))
}

fn tool_called(client: &mut Client, server: &str) -> usize {
    (client
        .events(json!({"event_type": "tool.called", "limit": 10000}))
        .iter())
    .filter(|e| e["source"] == server)
    .count()
}

#[test]
fn a_denied_call_gets_the_message_and_never_reaches_the_server() {
    let guard = link(
        "guard",
        &[
            "servers = [\"ex\"]",
            r#"config = { "interest.requests" = "tools/call", request = "deny", deny_message = "echo is closed today" }"#,
        ],
    );
    let mut client = start(&[guard]);
    let before = tool_called(&mut client, "ex");
    let error = call_error(&mut client, "ex__echo", json!({"text": "hi"}));
    assert_eq!(error["code"], -32003, "{error}");
    assert_eq!(error["message"], "echo is closed today", "{error}");
    assert_eq!(error["data"]["middleware"], "guard", "{error}");
    assert_eq!(
        tool_called(&mut client, "ex"),
        before,
        "the call reached the server"
    );
    let denied = wait_event(&mut client, "middleware.denied", "guard");
    assert_eq!(denied["target"], "ex__echo", "{denied}");
    // Out of its scope: the plugin's tools, and the gateway's own.
    let result = call_ok(&mut client, "echo__echo", json!({"text": "plugin"}));
    assert_eq!(text(&result), "plugin");
    client.status();
}

#[test]
fn params_and_results_are_replaced_and_requests_answered() {
    let replace = link(
        "replace",
        &[
            "tools = [\"ex__echo\"]",
            r#"config = { "interest.requests" = "tools/call", request = "replace", replace_with = '{"name":"ex__echo","arguments":{"text":"changed on the way"}}' }"#,
        ],
    );
    let answer = link(
        "answer",
        &[
            "plugins = [\"echo\"]",
            r#"config = { "interest.requests" = "tools/call", request = "answer" }"#,
        ],
    );
    let mut client = start(&[replace, answer]);
    let result = call_ok(&mut client, "ex__echo", json!({"text": "original"}));
    assert_eq!(text(&result), "changed on the way");
    let result = call_ok(&mut client, "echo__echo", json!({"text": "never run"}));
    assert_eq!(text(&result), "answered by mwtest for tools/call");
    // Neither applies to a tool outside both scopes.
    let result = call_ok(&mut client, "ex__add", json!({"a": 2, "b": 3}));
    assert_eq!(text(&result), "5");
}

#[test]
fn result_hooks_run_in_reverse_and_see_a_later_links_denial() {
    let outer = link(
        "outer",
        &[
            "servers = [\"ex\"]",
            r#"config = { "interest.results" = "tools/call", result = "replace" }"#,
        ],
    );
    let inner = link(
        "inner",
        &[
            "servers = [\"ex\"]",
            r#"config = { "interest.requests" = "tools/call", request = "deny" }"#,
        ],
    );
    let mut client = start(&[outer, inner]);
    let result = call_ok(&mut client, "ex__echo", json!({"text": "hi"}));
    let said = text(&result);
    assert!(
        said.starts_with("replaced by mwtest: failure after"),
        "{said}"
    );
}

#[test]
fn a_failing_middleware_denies_under_deny_and_is_passed_over_under_pass() {
    for (request, why) in [("trap", "trapped on purpose"), ("loop", "time limit")] {
        let closed = link(
            "closed",
            &[
                "timeout = \"1s\"",
                &format!(
                    r#"config = {{ "interest.requests" = "tools/call", request = "{request}" }}"#
                ),
            ],
        );
        let open = link(
            "open",
            &[
                "on_error = \"pass\"",
                "timeout = \"1s\"",
                "tools = [\"echo__*\"]",
                &format!(
                    r#"config = {{ "interest.requests" = "tools/call", request = "{request}" }}"#
                ),
            ],
        );
        let mut client = start(&[
            open,
            closed.replace("[[middleware]]\n", "[[middleware]]\ntools = [\"ex__*\"]\n"),
        ]);
        let error = call_error(&mut client, "ex__echo", json!({"text": "hi"}));
        let message = error["message"].as_str().unwrap_or_default();
        assert!(message.contains("middleware `closed` failed"), "{error}");
        assert!(message.contains(why), "{request}: {error}");
        let result = call_ok(&mut client, "echo__echo", json!({"text": "still here"}));
        assert_eq!(text(&result), "still here");
        // The gateway keeps serving, and the failed instance is replaced.
        let again = call_error(&mut client, "ex__echo", json!({"text": "hi"}));
        assert!(
            again["message"].as_str().unwrap_or_default().contains(why),
            "{again}"
        );
        assert!(client.status()["backends"]["closed"]["failures"].as_u64() >= Some(2));
    }
}

#[test]
fn a_middleware_that_is_not_loaded_fails_closed_or_is_passed_over() {
    let missing = |name: &str, on_error: &str, tools: &str| {
        format!(
            "[[middleware]]\nname = \"{name}\"\npath = \"{{dir}}/nowhere.wasm\"\non_error = \"{on_error}\"\ntools = [\"{tools}\"]\n"
        )
    };
    // Not `start`: its wait for the servers' tools would not see them, hidden.
    let links = [
        missing("strict", "deny", "ex__*"),
        missing("lax", "pass", "echo__*"),
    ];
    let mut client = gateway(&links).start();
    client.initialize();
    let error = call_error(&mut client, "ex__echo", json!({"text": "hi"}));
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .contains("middleware `strict` failed"),
        "{error}"
    );
    call_ok(&mut client, "echo__echo", json!({"text": "hi"}));
    let chain = &client.status()["middleware"];
    assert_eq!(chain[0]["name"], "strict", "{chain}");
    assert_eq!(chain[0]["state"], "not loaded", "{chain}");
}

#[test]
fn a_rename_holds_both_ways_and_a_hidden_tool_cannot_be_called() {
    let rename = link(
        "rename",
        &[r#"config = { "interest.lists" = "tools/list", list = "rename:ex__echo=speak" }"#],
    );
    let hide = link(
        "hide",
        &[r#"config = { "interest.lists" = "tools/list", list = "hide:echo__echo" }"#],
    );
    let mut client = start(&[rename, hide]);
    let names = client.tool_names();
    assert!(names.iter().any(|n| n == "speak"), "{names:?}");
    assert!(
        !names.iter().any(|n| n == "ex__echo" || n == "echo__echo"),
        "{names:?}"
    );
    assert!(names.iter().any(|n| n == "ex__add"), "{names:?}");
    let result = call_ok(&mut client, "speak", json!({"text": "by the new name"}));
    assert_eq!(text(&result), "by the new name");
    for gone in ["ex__echo", "echo__echo"] {
        let error = call_error(&mut client, gone, json!({"text": "hi"}));
        assert_eq!(error["code"], -32602, "{gone}: {error}");
    }
}

#[test]
fn a_servers_request_to_the_client_goes_through_the_chain() {
    let no_sampling = link(
        "no-sampling",
        &[
            r#"config = { "interest.requests" = "sampling/createMessage", request = "deny", deny_message = "no sampling here" }"#,
        ],
    );
    let mut client = start(&[no_sampling]);
    // The client would answer; the chain refuses before it is asked.
    let id = client.send_request(
        "tools/call",
        json!({"name": "ex__sample", "arguments": {"prompt": "hi"}}),
    );
    let answer = client.wait_response(&id, WAIT);
    assert!(
        !client.has_buffered_client_request(),
        "the client was asked"
    );
    assert!(answer.to_string().contains("no sampling here"), "{answer}");
}

#[test]
fn the_chain_is_in_the_status_and_the_events() {
    let one = link(
        "one",
        &[
            "servers = [\"ex\"]",
            r#"config = { "interest.requests" = "tools/call" }"#,
        ],
    );
    let mut client = start(&[one]);
    let chain = client.status()["middleware"].clone();
    assert_eq!(chain[0]["name"], "one", "{chain}");
    assert_eq!(chain[0]["state"], "loaded", "{chain}");
    assert_eq!(chain[0]["on_error"], "deny", "{chain}");
    assert_eq!(chain[0]["scope"]["servers"], json!(["ex"]), "{chain}");
    assert_eq!(
        chain[0]["interest"]["requests"],
        json!(["tools/call"]),
        "{chain}"
    );
    let event = wait_event(&mut client, "middleware.chain", "wasmgate");
    assert_eq!(event["links"][0]["name"], "one", "{event}");
}

#[test]
fn twenty_reloads_under_calls_lose_no_call() {
    let config = gateway(&[]).plugins(&format!(
        "[[middleware]]\nname = \"live\"\npath = \"{{dir}}/live.wasm\"\n{}",
        r#"config = { "interest.requests" = "tools/call", "interest.results" = "tools/call" }"#
    ));
    let bytes = fixture("mwtest");
    let dir = crate::harness::TestDir::new("chain-reload");
    std::fs::write(dir.join("live.wasm"), &bytes).unwrap();
    let path = config.write(&dir.path);
    let mut client = config.spawn(&path, dir);
    client.wait_ready();
    call_ok(&mut client, "ex__echo", json!({"text": "warm"}));
    let mut answered = 0;
    for n in 0..20u32 {
        let ids: Vec<Value> = (0..10)
            .map(|k| {
                let text = format!("call {n}.{k}");
                client.send_request(
                    "tools/call",
                    json!({"name": "ex__echo", "arguments": {"text": text}}),
                )
            })
            .collect();
        let next = with_custom_section(&bytes, "reload", &n.to_le_bytes());
        let live = client.dir.join("live.wasm");
        std::fs::write(live.with_extension("tmp"), next).unwrap();
        std::fs::rename(live.with_extension("tmp"), &live).unwrap();
        for (k, id) in ids.iter().enumerate() {
            let answer = client.wait_response(id, WAIT);
            assert_eq!(
                text(&answer["result"]),
                format!("call {n}.{k}"),
                "reload {n}: {answer}"
            );
            answered += 1;
        }
        // The next round starts on the new version.
        crate::harness::eventually(WAIT, "the reload", || {
            let events = client.events(json!({"event_type": "plugin.reloaded", "limit": 10000}));
            (events.iter().filter(|e| e["source"] == "live").count() > n as usize).then_some(())
        });
    }
    assert_eq!(answered, 200);
}

/// A 2026-07-28 client's stateless requests (here as lines over stdio, beside the session)
/// go through the same chain: denials, renames both ways, hidden tools.
#[test]
fn stateless_requests_of_the_2026_era_go_through_the_chain() {
    let meta = || crate::modern_front::meta(json!({}));
    let rename = link(
        "rename",
        &[r#"config = { "interest.lists" = "tools/list", list = "rename:ex__echo=speak" }"#],
    );
    let guard = link(
        "guard",
        &[
            "tools = [\"ex__add\"]",
            r#"config = { "interest.requests" = "tools/call", request = "deny", deny_message = "no sums" }"#,
        ],
    );
    let mut client = start(&[rename, guard]);
    let list = client.result("tools/list", json!({"_meta": meta()}));
    let names: Vec<&str> = (list["tools"].as_array().unwrap().iter())
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"speak") && !names.contains(&"ex__echo"),
        "{names:?}"
    );
    let call = client.result(
        "tools/call",
        json!({"name": "speak", "arguments": {"text": "new era"}, "_meta": meta()}),
    );
    assert_eq!(call["content"][0]["text"], "new era", "{call}");
    assert_eq!(call["resultType"], "complete", "{call}");
    let old = client.request(
        "tools/call",
        json!({"name": "ex__echo", "arguments": {"text": "x"}, "_meta": meta()}),
    );
    assert_eq!(old["error"]["code"], -32602, "{old}");
    let denied = client.request(
        "tools/call",
        json!({"name": "ex__add", "arguments": {"a": 1, "b": 2}, "_meta": meta()}),
    );
    assert_eq!(denied["error"]["message"], "no sums", "{denied}");
    assert_eq!(denied["error"]["data"]["middleware"], "guard", "{denied}");
}
