//! What travels besides request and answer: progress, logging, list changes, resource
//! updates, the server's requests to the client (sampling, elicitation, roots), and
//! cancellation.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{Client, TIMEOUT, config, text};

fn example() -> Client {
    config().example("ex", &[]).start_initialized()
}

#[test]
fn progress_comes_back_with_the_clients_token() {
    let mut client = example();
    for token in [json!("tok-1"), json!(42)] {
        let id = client.send_request(
            "tools/call",
            json!({"name": "ex__slow", "arguments": {"ms": 150}, "_meta": {"progressToken": token}}),
        );
        // In order: the server's three notifications, then its answer (progress must not
        // come after the request is complete).
        let (before, response) = client.until_response(&id, TIMEOUT);
        let mut steps = Vec::new();
        // Others (list_changed from start-up, say) are not this call's.
        for message in before
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
        {
            assert_eq!(message["params"]["progressToken"], token, "{message}");
            assert_eq!(message["params"]["total"], 3, "{message}");
            steps.push(message["params"]["progress"].as_u64().unwrap());
        }
        assert_eq!(text(&response["result"]), "slept 150 ms");
        assert_eq!(
            steps,
            [1, 2, 3],
            "every progress notification, before the answer"
        );
    }
    // No progress without a token.
    client.call("ex__slow", json!({"ms": 30}));
    client.call("ex__echo", json!({"text": "x"}));
    assert!(
        client
            .drain_notifications("notifications/progress")
            .is_empty()
    );
}

#[test]
fn logging_is_forwarded_and_set_level_reaches_the_server() {
    let mut client = example();
    client.call("ex__log", json!({"level": "info", "message": "first-info"}));
    let message = client.next_notification("notifications/message", Duration::from_secs(5));
    assert_eq!(message["params"]["level"], "info", "{message}");
    assert_eq!(message["params"]["data"], "first-info", "{message}");

    assert_eq!(
        client.result("logging/setLevel", json!({"level": "error"})),
        json!({})
    );
    client.call(
        "ex__log",
        json!({"level": "info", "message": "dropped-info"}),
    );
    client.call(
        "ex__log",
        json!({"level": "warning", "message": "dropped-warning"}),
    );
    client.call(
        "ex__log",
        json!({"level": "critical", "message": "kept-critical"}),
    );
    // The server sends in order: by the time the critical one arrives, any lower one would have.
    let kept = client.take(Duration::from_secs(5), |m| {
        m["method"] == "notifications/message" && m["params"]["data"] == "kept-critical"
    });
    assert!(kept.is_some(), "the critical message did not arrive");
    let others = client.drain_notifications("notifications/message");
    assert!(
        others.is_empty(),
        "messages below the level were not dropped: {others:?}"
    );

    let error = client.error("logging/setLevel", json!({"level": "loud"}));
    assert_eq!(error["code"], -32602, "{error}");
    for params in [json!({}), json!({"level": 5})] {
        let error = client.error("logging/setLevel", params);
        assert_eq!(error["code"], -32602, "{error}");
        assert_eq!(
            error["message"], "logging/setLevel needs a string `level`",
            "{error}"
        );
    }
}

#[test]
fn a_progress_token_that_is_not_a_string_or_a_number_is_refused() {
    let mut client = example();
    for token in [json!(true), json!({"o": 1}), json!([1])] {
        let error = client.error(
            "tools/call",
            json!({"name": "ex__echo", "arguments": {"text": "x"}, "_meta": {"progressToken": token}}),
        );
        assert_eq!(error["code"], -32602, "{token}: {error}");
        assert!(
            error["message"]
                .as_str()
                .is_some_and(|m| m.contains("progressToken must be a string or a number")),
            "{error}"
        );
    }
}

#[test]
fn list_changed_is_forwarded_and_the_new_tool_appears() {
    let mut client = example();
    // The first list waits for the server; changes announced during start-up are not the point here.
    assert!(!client.tool_names().contains(&"ex__late_tool".to_string()));
    client.drain_notifications("notifications/tools/list_changed");
    assert_eq!(
        text(&client.call("ex__notify_changed", json!({}))),
        "changed"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        client.next_notification("notifications/tools/list_changed", left);
        if client.tool_names().contains(&"ex__late_tool".to_string()) {
            break;
        }
    }
    assert_eq!(
        text(&client.call("ex__late_tool", json!({"text": "late"}))),
        "late"
    );
}

#[test]
fn resource_updates_reach_subscribers_until_they_unsubscribe() {
    let mut client = example();
    let uri = "example://static/hello";
    assert_eq!(
        client.result("resources/subscribe", json!({"uri": uri})),
        json!({})
    );
    client.call("ex__update_resource", json!({"uri": uri}));
    let updated =
        client.next_notification("notifications/resources/updated", Duration::from_secs(5));
    assert_eq!(updated["params"]["uri"], uri, "{updated}");

    assert_eq!(
        client.result("resources/unsubscribe", json!({"uri": uri})),
        json!({})
    );
    client.call("ex__update_resource", json!({"uri": uri}));
    // A marker from the same server, sent after: any update would have come before it.
    client.call("ex__log", json!({"level": "error", "message": "marker"}));
    client
        .take(Duration::from_secs(5), |m| m["params"]["data"] == "marker")
        .expect("the marker log message");
    let late = client.drain_notifications("notifications/resources/updated");
    assert!(late.is_empty(), "updates after unsubscribe: {late:?}");
}

/// Starts `tool` without waiting for its answer, serves the one request the gateway then
/// sends to the client with `answer`, and returns (that request, the tool's result).
fn serve_client_request(
    client: &mut Client,
    tool: &str,
    arguments: Value,
    answer: impl FnOnce(&Value) -> Value,
) -> (Value, Value) {
    let id = client.send_request("tools/call", json!({"name": tool, "arguments": arguments}));
    let request = client.next_client_request(TIMEOUT);
    let reply = answer(&request);
    client.respond(request["id"].clone(), reply);
    let response = client.wait_response(&id, TIMEOUT);
    let result = response
        .get("result")
        .unwrap_or_else(|| panic!("{tool} failed: {response}"))
        .clone();
    (request, result)
}

#[test]
fn sampling_request_goes_to_the_client_and_its_answer_back() {
    let mut client = example();
    let (request, result) = serve_client_request(
        &mut client,
        "ex__sample",
        json!({"prompt": "say hi"}),
        |_| json!({"role": "assistant", "content": {"type": "text", "text": "sampled-text"}, "model": "test-model", "stopReason": "endTurn"}),
    );
    assert_eq!(request["method"], "sampling/createMessage", "{request}");
    assert_eq!(
        request["params"]["messages"][0]["content"]["text"], "say hi",
        "{request}"
    );
    assert_eq!(request["params"]["maxTokens"], 100);
    assert_eq!(text(&result), "sampled-text", "{result}");
    assert!(result.get("isError").is_none_or(|e| e == false), "{result}");
}

#[test]
fn sampling_error_from_the_client_reaches_the_server() {
    let mut client = example();
    let id = client.send_request(
        "tools/call",
        json!({"name": "ex__sample", "arguments": {"prompt": "p"}}),
    );
    let request = client.next_client_request(TIMEOUT);
    client.respond_error(request["id"].clone(), -1, "user rejected sampling");
    let response = client.wait_response(&id, TIMEOUT);
    assert_eq!(response["result"]["isError"], true, "{response}");
    assert_eq!(text(&response["result"]), "user rejected sampling");
}

#[test]
fn elicitation_request_goes_to_the_client_and_its_answer_back() {
    let mut client = example();
    let (request, result) = serve_client_request(
        &mut client,
        "ex__elicit",
        json!({"message": "who are you?"}),
        |_| json!({"action": "accept", "content": {"name": "Ada"}}),
    );
    assert_eq!(request["method"], "elicitation/create", "{request}");
    assert_eq!(request["params"]["message"], "who are you?");
    assert!(
        request["params"]["requestedSchema"].is_object(),
        "{request}"
    );
    let answer: Value =
        serde_json::from_str(text(&result)).expect("the server echoes the answer as JSON");
    assert_eq!(
        answer,
        json!({"action": "accept", "content": {"name": "Ada"}})
    );
}

#[test]
fn roots_request_goes_to_the_client_and_its_answer_back() {
    let mut client = example();
    let roots = json!([{"uri": "file:///tmp/project", "name": "project"}]);
    let (request, result) = serve_client_request(
        &mut client,
        "ex__roots",
        json!({}),
        |_| json!({"roots": roots}),
    );
    assert_eq!(request["method"], "roots/list", "{request}");
    let answer: Value = serde_json::from_str(text(&result)).expect("roots as JSON");
    assert_eq!(answer, roots);
    // The client's roots change: the gateway passes the notification on (and nothing breaks).
    client.notify("notifications/roots/list_changed", json!({}));
    assert_eq!(
        text(&client.call("ex__echo", json!({"text": "still"}))),
        "still"
    );
}

#[test]
fn without_the_capability_the_server_gets_an_error() {
    let mut client = config().example("ex", &[]).start();
    client.initialize_with("2025-11-25", json!({}));
    client.wait_ready();
    for (tool, arguments) in [
        ("ex__sample", json!({"prompt": "p"})),
        ("ex__elicit", json!({"message": "m"})),
        ("ex__roots", json!({})),
    ] {
        let result = client.call(tool, arguments);
        assert_eq!(result["isError"], true, "{tool}: {result}");
    }
    assert!(
        !client.has_buffered_client_request(),
        "the client was asked without having the capability"
    );
}

#[test]
fn cancelled_request_gets_no_answer_and_the_gateway_goes_on() {
    // A server that goes on with a cancelled call, and answers it in the end.
    let mut client = config()
        .example("ex", &["--ignore-cancel"])
        .start_initialized();
    client.send(
        &json!({"jsonrpc": "2.0", "id": "slow-1", "method": "tools/call",
                        "params": {"name": "ex__slow", "arguments": {"ms": 1500},
                                   "_meta": {"progressToken": "p-slow"}}}),
    );
    // Cancelled once the server is at it: its first progress (after 500 ms) shows it is.
    let first = client.next_notification("notifications/progress", Duration::from_secs(5));
    assert_eq!(first["params"]["progressToken"], "p-slow", "{first}");
    client.notify(
        "notifications/cancelled",
        json!({"requestId": "slow-1", "reason": "test"}),
    );
    assert_eq!(
        text(&client.call("ex__echo", json!({"text": "alive"}))),
        "alive"
    );
    // The call would have finished after 1.5 s: wait past that for an answer that must not come.
    let answer = client.try_response(&json!("slow-1"), Duration::from_millis(2500));
    assert!(
        answer.is_none(),
        "a cancelled request was answered: {answer:?}"
    );
    // The server reported its next two steps and answered: the client, who cancelled,
    // hears nothing more of the call.
    let progress = client.drain_notifications("notifications/progress");
    assert!(
        progress.is_empty(),
        "progress after the cancel: {progress:?}"
    );
    assert_eq!(
        text(&client.call("ex__echo", json!({"text": "still alive"}))),
        "still alive"
    );
    // The event log has the cancelled call, as the call counts do.
    let slow: Vec<Value> = client
        .events(json!({"event_type": "tool.called", "limit": 100}))
        .into_iter()
        .filter(|e| e["tool"] == "ex__slow")
        .collect();
    assert_eq!(slow.len(), 1, "{slow:?}");
    assert_eq!(slow[0]["cancelled"], true, "{slow:?}");
    assert_eq!(slow[0]["status"], "failure", "{slow:?}");
}

#[test]
fn concurrent_sampling_requests_are_answered_to_the_right_call() {
    let mut client = example();
    let first = client.send_request(
        "tools/call",
        json!({"name": "ex__sample", "arguments": {"prompt": "first"}}),
    );
    let second = client.send_request(
        "tools/call",
        json!({"name": "ex__sample", "arguments": {"prompt": "second"}}),
    );
    let a = client.next_client_request(TIMEOUT);
    let b = client.next_client_request(TIMEOUT);
    assert_ne!(a["id"], b["id"], "two requests to the client need two ids");
    // Answer in the reverse order, each with its own prompt in upper case.
    for request in [&b, &a] {
        let prompt = request["params"]["messages"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .to_uppercase();
        client.respond(
            request["id"].clone(),
            json!({"role": "assistant", "content": {"type": "text", "text": prompt}, "model": "m"}),
        );
    }
    assert_eq!(
        text(&client.wait_response(&first, TIMEOUT)["result"]),
        "FIRST"
    );
    assert_eq!(
        text(&client.wait_response(&second, TIMEOUT)["result"]),
        "SECOND"
    );
}
