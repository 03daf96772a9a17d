//! The JSON-RPC envelope as the client sees it: parse errors, invalid requests, ids,
//! notifications, batches, bytes that are not UTF-8, and very large messages.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{Client, TIMEOUT, config, text};

fn initialized() -> Client {
    config().start_initialized()
}

/// Sends `line` and returns the next message, which must be its answer.
fn answer_to(client: &mut Client, line: &str) -> Value {
    client.send_line(line);
    client
        .read_message(TIMEOUT)
        .unwrap_or_else(|| panic!("no answer to {line}"))
}

fn assert_still_serving(client: &mut Client) {
    assert_eq!(client.result("ping", json!({})), json!({}));
    assert!(client.tool_names().contains(&"gateway_status".to_string()));
}

#[test]
fn invalid_json_is_a_parse_error_with_null_id_and_the_session_goes_on() {
    let mut client = initialized();
    for line in [
        "{oops",
        r#"{"jsonrpc":"2.0","id":1,"method":"ping""#,
        "not json at all",
        "[1,",
    ] {
        let answer = answer_to(&mut client, line);
        assert_eq!(answer["error"]["code"], -32700, "{line}: {answer}");
        assert!(answer["id"].is_null(), "{line}: {answer}");
    }
    assert_still_serving(&mut client);
}

#[test]
fn messages_that_are_not_json_rpc_are_invalid_requests_answered_with_their_id() {
    let mut client = initialized();
    // JSON-RPC 2.0: the error carries the request's id, null only when it cannot be read.
    let cases = [
        ("missing jsonrpc", r#"{"id":1,"method":"ping"}"#, json!(1)),
        (
            "wrong version",
            r#"{"jsonrpc":"1.0","id":2,"method":"ping"}"#,
            json!(2),
        ),
        (
            "numeric version",
            r#"{"jsonrpc":2.0,"id":"three","method":"ping"}"#,
            json!("three"),
        ),
        (
            "object id",
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
            Value::Null,
        ),
        (
            "boolean id",
            r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#,
            Value::Null,
        ),
        (
            "array id",
            r#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#,
            Value::Null,
        ),
        (
            "null id (MCP: a request id must not be null)",
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            Value::Null,
        ),
        (
            "number params",
            r#"{"jsonrpc":"2.0","id":4,"method":"ping","params":3}"#,
            json!(4),
        ),
        (
            "string params",
            r#"{"jsonrpc":"2.0","id":5,"method":"ping","params":"x"}"#,
            json!(5),
        ),
        (
            "method not a string",
            r#"{"jsonrpc":"2.0","id":7,"method":42}"#,
            json!(7),
        ),
        ("not an object", "42", Value::Null),
        ("a string", r#""ping""#, Value::Null),
    ];
    let mut failures = Vec::new();
    for (what, line, id) in cases {
        let answer = answer_to(&mut client, line);
        if answer["error"]["code"] != -32600 || answer["id"] != id {
            failures.push(format!("{what}: {line} -> {answer}"));
        }
    }
    assert!(
        failures.is_empty(),
        "expected -32600 with the id for:\n{}",
        failures.join("\n")
    );
    assert_still_serving(&mut client);
}

#[test]
fn array_params_are_invalid_params_with_the_id() {
    // Valid JSON-RPC (by-position params), but MCP methods take named params.
    let mut client = initialized();
    for (line, id) in [
        (
            r#"{"jsonrpc":"2.0","id":6,"method":"tools/list","params":[]}"#,
            json!(6),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"p","method":"ping","params":[1]}"#,
            json!("p"),
        ),
    ] {
        let answer = answer_to(&mut client, line);
        assert_eq!(answer["error"]["code"], -32602, "{line}: {answer}");
        assert_eq!(answer["id"], id, "{line}: {answer}");
    }
    assert_still_serving(&mut client);
}

#[test]
fn a_request_with_a_null_id_is_not_run() {
    let mut client = config().example("ex", &[]).start_initialized();
    client.send_line(
        r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"ex__echo","arguments":{"text":"ran"}}}"#,
    );
    let answer = client
        .take(TIMEOUT, crate::harness::is_response)
        .expect("an answer");
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert!(answer["id"].is_null(), "{answer}");
    let calls = client.events(json!({"event_type": "tool.called"}));
    assert!(
        !calls.iter().any(|e| e.to_string().contains("ex__echo")),
        "the request ran: {calls:?}"
    );
}

#[test]
fn unknown_method_is_method_not_found() {
    let mut client = initialized();
    let response = client.request("tools/frobnicate", json!({}));
    assert_eq!(response["error"]["code"], -32601, "{response}");
    assert!(
        response["error"]["message"]
            .as_str()
            .unwrap()
            .contains("tools/frobnicate"),
        "{response}"
    );
}

#[test]
fn notifications_get_no_answer() {
    let mut client = initialized();
    client.notify("notifications/unknown_thing", json!({"x": 1}));
    client.notify("notifications/initialized", json!({}));
    client.notify("notifications/roots/list_changed", json!({}));
    client.notify("notifications/cancelled", json!({"requestId": 12345}));
    client.send_line(r#"{"jsonrpc":"2.0","method":"ping"}"#);
    let id = client.send_request("ping", json!({}));
    let next = client.read_message(TIMEOUT).expect("an answer to ping");
    assert_eq!(next["id"], id, "a notification got an answer: {next}");
}

#[test]
fn string_and_number_ids_are_echoed_exactly() {
    let mut client = initialized();
    let ids = [
        json!("abc"),
        json!("7"),
        json!(7),
        json!(0),
        json!(-3),
        json!(9007199254740993u64),
        json!(""),
        json!("ü-ñ 🙂"),
    ];
    // All in flight at once: "7" and 7 must not be confused.
    for id in &ids {
        client.send(&json!({"jsonrpc": "2.0", "id": id, "method": "ping"}));
    }
    for id in &ids {
        let response = client.wait_response(id, TIMEOUT);
        assert_eq!(response["result"], json!({}), "{response}");
    }
    // Through a backend call too.
    client.send(&json!({"jsonrpc": "2.0", "id": "call-1", "method": "tools/call", "params": {"name": "gateway_status"}}));
    let response = client.wait_response(&json!("call-1"), TIMEOUT);
    assert!(
        response["result"]["structuredContent"].is_object(),
        "{response}"
    );
}

#[test]
fn batch_in_array_out_without_notifications() {
    // Batches are part of 2025-03-26 only.
    let mut client = config().start();
    client.initialize_with("2025-03-26", json!({}));
    let batch = json!([
        {"jsonrpc": "2.0", "id": "b1", "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
        {"jsonrpc": "2.0", "id": 3, "method": "no/such/method"},
        {"id": 4, "method": "ping"},
    ]);
    client.send(&batch);
    let answer = client.read_message(TIMEOUT).expect("a batch answer");
    let answers = answer
        .as_array()
        .unwrap_or_else(|| panic!("a batch is answered with an array: {answer}"));
    assert_eq!(
        answers.len(),
        4,
        "one answer per request, none for the notification: {answer}"
    );
    let by_id = |id: Value| {
        answers
            .iter()
            .find(|a| a["id"] == id)
            .unwrap_or_else(|| panic!("no answer for {id} in {answer}"))
    };
    assert_eq!(by_id(json!("b1"))["result"], json!({}));
    assert!(by_id(json!(2))["result"]["tools"].is_array());
    assert_eq!(by_id(json!(3))["error"]["code"], -32601);
    assert_eq!(by_id(json!(4))["error"]["code"], -32600);

    // A batch of notifications only: nothing comes back.
    client.send(&json!([{"jsonrpc": "2.0", "method": "notifications/initialized"}]));
    let id = client.send_request("ping", json!({}));
    assert_eq!(client.read_message(TIMEOUT).expect("ping answer")["id"], id);
}

#[test]
fn batches_are_refused_from_2025_06_18_on() {
    for version in ["2025-06-18", "2025-11-25"] {
        let mut client = config().start();
        client.initialize_with(version, json!({}));
        client.send(&json!([
            {"jsonrpc": "2.0", "id": "b1", "method": "ping"},
            {"jsonrpc": "2.0", "id": "b2", "method": "tools/list"},
        ]));
        let answer = client
            .read_message(TIMEOUT)
            .expect("an answer to the batch");
        assert_eq!(answer["error"]["code"], -32600, "{version}: {answer}");
        assert!(answer["id"].is_null(), "{version}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains("2025-06-18"), "{message}");
        // Nothing of the batch ran: the next message is the answer to the next request.
        let id = client.send_request("ping", json!({}));
        let next = client.read_message(TIMEOUT).expect("an answer to ping");
        assert_eq!(next["id"], id, "{version}: {next}");
    }
}

#[test]
fn initialize_in_a_batch_is_refused() {
    let mut client = config().start();
    client.send(&json!([
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-03-26",
            "capabilities": {}, "clientInfo": {"name": "batcher", "version": "1"}}},
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
    ]));
    let answer = client
        .read_message(TIMEOUT)
        .expect("an answer to the batch");
    let answers = answer.as_array().unwrap_or_else(|| panic!("{answer}"));
    assert_eq!(answers[0]["id"], 1, "{answer}");
    assert_eq!(answers[0]["error"]["code"], -32600, "{answer}");
    assert_eq!(answers[1]["result"], json!({}), "{answer}");
    // Not initialized by it.
    assert_eq!(client.error("tools/list", json!({}))["code"], -32002);
    client.initialize_with("2025-03-26", json!({}));
    assert!(client.tool_names().contains(&"gateway_status".to_string()));
}

#[test]
fn empty_batch_is_an_invalid_request() {
    let mut client = initialized();
    let answer = answer_to(&mut client, "[]");
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert!(answer["id"].is_null(), "{answer}");
    assert_still_serving(&mut client);
}

#[test]
fn bytes_that_are_not_utf8_are_a_parse_error_and_the_session_goes_on() {
    let mut client = initialized();
    client.send_bytes(b"\xff\xfe\xfd\n");
    let answer = client.read_message(TIMEOUT).expect("an answer");
    assert_eq!(answer["error"]["code"], -32700, "{answer}");
    assert!(answer["id"].is_null());

    // Invalid UTF-8 inside a JSON string: JSON text must be UTF-8 (RFC 8259 §8.1), so the
    // message is not JSON, however readable the rest of it is.
    client.send_bytes(b"{\"jsonrpc\":\"2.0\",\"id\":\"bad-bytes\",\"method\":\"ping\",\"params\":{\"x\":\"\xc3\x28\"}}\n");
    let answer = client.read_message(TIMEOUT).expect("an answer");
    assert_eq!(
        answer["error"]["code"], -32700,
        "invalid UTF-8 was accepted: {answer}"
    );
    assert_still_serving(&mut client);
}

#[test]
fn ten_megabyte_result_passes() {
    let mut client = config().example("ex", &[]).start_initialized();
    let result = client.call("ex__big", json!({"bytes": 10_000_000}));
    let body = text(&result);
    assert_eq!(body.len(), 10_000_000);
    assert!(body.bytes().all(|b| b == b'x'));
    // And the session is still in order.
    assert_eq!(
        text(&client.call("ex__echo", json!({"text": "after"}))),
        "after"
    );
}

#[test]
fn ten_megabyte_argument_passes() {
    let mut client = config().example("ex", &[]).start_initialized();
    let big: String = (0..10_000_000u32)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let result = client.call("ex__echo", json!({"text": big}));
    assert!(
        text(&result) == big,
        "the 10 MB argument came back changed ({} bytes)",
        text(&result).len()
    );
    assert_eq!(
        text(&client.call("ex__echo", json!({"text": "after"}))),
        "after"
    );
}

#[test]
fn a_request_with_many_fields_of_a_future_version_passes() {
    // Unknown fields in params and _meta travel to the server untouched; the call works.
    let mut client = config().example("ex", &[]).start_initialized();
    let response = client.request(
        "tools/call",
        json!({"name": "ex__echo", "arguments": {"text": "hi"}, "_meta": {"future/field": [1, 2]}, "futureParam": true}),
    );
    assert_eq!(text(&response["result"]), "hi", "{response}");
}

#[test]
fn a_second_request_with_an_id_still_in_flight_is_refused_and_the_first_is_answered() {
    let mut client = config().example("ex", &[]).start_initialized();
    let slow = json!({"jsonrpc": "2.0", "id": "d", "method": "tools/call",
                      "params": {"name": "ex__slow", "arguments": {"ms": 300}}});
    client.send(&slow);
    client.send(&slow);
    // Both would be lost otherwise: the second's answer could not be told from the first's.
    let refused = client
        .take(TIMEOUT, |m| m.get("error").is_some())
        .expect("the second is refused");
    assert_eq!(refused["id"], "d", "{refused}");
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("still in flight")),
        "{refused}"
    );
    let answer = client.wait_response(&json!("d"), TIMEOUT);
    assert!(answer["result"]["content"].is_array(), "{answer}");
    // Once answered, the id may be used again.
    client.send(&json!({"jsonrpc": "2.0", "id": "d", "method": "ping"}));
    assert_eq!(
        client.wait_response(&json!("d"), TIMEOUT)["result"],
        json!({})
    );
}

#[test]
fn ids_that_could_not_be_echoed_exactly_are_refused() {
    let mut client = initialized();
    // Beyond 64 bits, a number is read as a float that has lost digits.
    for id in ["123456789012345678901234567890", "18446744073709551616"] {
        let answer = answer_to(
            &mut client,
            &format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#),
        );
        assert_eq!(answer["error"]["code"], -32600, "{id}: {answer}");
        assert!(answer["id"].is_null(), "{id}: {answer}");
    }
    // The largest 64-bit integers are fine.
    for id in ["18446744073709551615", "-9223372036854775808"] {
        let line = answer_to(
            &mut client,
            &format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#),
        );
        assert_eq!(line["id"].to_string(), id, "{line}");
    }
    assert_still_serving(&mut client);
}

#[test]
fn a_line_past_the_message_limit_is_refused_and_the_session_goes_on() {
    let mut client = initialized();
    let limit = 64 << 20;
    let mut line = br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":""#.to_vec();
    line.resize(limit + 10, b'x');
    line.extend_from_slice(b"\"}}\n");
    client.send_bytes(&line);
    let answer = client
        .read_message(TIMEOUT)
        .expect("an answer to the long line");
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert!(answer["id"].is_null(), "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("the limit is 64 MiB")),
        "{answer}"
    );
    assert_still_serving(&mut client);
}

#[test]
fn batch_members_run_concurrently_and_can_be_cancelled() {
    let mut client = config().example("ex", &[]).start();
    client.initialize_with("2025-03-26", json!({"sampling": {}}));
    client.wait_ready();
    // Two calls that each wait for the client: one after the other, the second request
    // would only come once the first was answered.
    client.send(&json!([
        {"jsonrpc": "2.0", "id": "s1", "method": "tools/call",
         "params": {"name": "ex__sample", "arguments": {"prompt": "one"}}},
        {"jsonrpc": "2.0", "id": "s2", "method": "tools/call",
         "params": {"name": "ex__sample", "arguments": {"prompt": "two"}}},
        {"jsonrpc": "2.0", "id": "h", "method": "tools/call",
         "params": {"name": "ex__hang", "arguments": {}}},
        {"jsonrpc": "2.0", "id": "p", "method": "ping"},
    ]));
    let first = client.next_client_request(TIMEOUT);
    let second = client.next_client_request(TIMEOUT);
    for request in [&first, &second] {
        assert_eq!(request["method"], "sampling/createMessage", "{request}");
        client.respond(
            request["id"].clone(),
            json!({"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "m"}),
        );
    }
    // A cancelled member gets no entry in the answer, which then comes without waiting for it.
    client.notify("notifications/cancelled", json!({"requestId": "h"}));
    let answer = client
        .take(TIMEOUT, Value::is_array)
        .expect("the batch is answered");
    let ids: Vec<&Value> = answer
        .as_array()
        .unwrap()
        .iter()
        .map(|a| &a["id"])
        .collect();
    assert_eq!(ids, [&json!("s1"), &json!("s2"), &json!("p")], "{answer}");
}

#[test]
fn a_cancel_finds_its_request_by_the_value_of_the_id() {
    let mut client = config().example("ex", &[]).start_initialized();
    client.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                        "params": {"name": "ex__slow", "arguments": {"ms": 1000}}}));
    client.result("ping", json!({}));
    // 7.0 and 7 are the same JSON number.
    client.notify("notifications/cancelled", json!({"requestId": 7.0}));
    let answer = client.try_response(&json!(7), Duration::from_millis(2000));
    assert!(
        answer.is_none(),
        "a cancelled request was answered: {answer:?}"
    );
    // A string id "7" is another id.
    client.send(&json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                        "params": {"name": "ex__slow", "arguments": {"ms": 300}}}));
    client.notify("notifications/cancelled", json!({"requestId": "8"}));
    assert!(client.wait_response(&json!(8), TIMEOUT)["result"].is_object());
}
