//! A 2026-07-28 client and a server of the session era: the server's requests during a call
//! (elicitation, sampling, roots) reach the client as an `input_required` result, and its
//! retry, with the gateway's `requestState` handle, answers them and carries the same call
//! on. What the retry must prove (its handle, its principal, its request) is checked before
//! anything of it reaches the server.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::http_client::{Conn, HttpGateway, runtime};
use crate::http_front::with_example;
use crate::modern_front::{meta, post, request};

const WAIT: Duration = Duration::from_secs(20);
const TOKEN_A: &str = "token-of-alice-0123456789";
const TOKEN_B: &str = "token-of-bob-0123456789ab";

/// `_meta` declaring `capabilities`.
fn declaring(capabilities: Value) -> Value {
    meta(json!({"io.modelcontextprotocol/clientCapabilities": capabilities}))
}

/// A `tools/call` of the example server's `tool` by a client that declares `capabilities`,
/// with `extra` params (`inputResponses`, `requestState`).
fn call(id: u64, tool: &str, arguments: Value, capabilities: Value, extra: Value) -> Value {
    let mut params = json!({"name": format!("ex__{tool}"), "arguments": arguments,
        "_meta": declaring(capabilities)});
    params
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().cloned().unwrap_or_default());
    request(id, "tools/call", params)
}

/// POSTs `body` with `token` (if any) and returns its JSON-RPC answer.
async fn answer(conn: &mut Conn, body: &Value, token: Option<&str>) -> Value {
    let bearer = token.map(|t| format!("Bearer {t}"));
    let auth: Vec<(&str, &str)> = bearer
        .iter()
        .map(|b| ("authorization", b.as_str()))
        .collect();
    let reply = post(conn, "/mcp", body, &auth).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.answer()
}

/// The `input_required` result in `answer`, checked for its shape: one request, of
/// `method`, under `key`, and a handle of the gateway's.
fn input_required(answer: &Value, key: &str, method: &str) -> (Value, String) {
    let result = &answer["result"];
    assert_eq!(result["resultType"], "input_required", "{answer}");
    let requests = result["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(requests.keys().collect::<Vec<_>>(), [key], "{answer}");
    assert_eq!(requests[key]["method"], method, "{answer}");
    // What the gateway keyed it by is not passed on.
    assert!(
        requests[key]["params"]["_meta"]
            .get("dev.wasmgate/inputKey")
            .is_none()
    );
    assert!(result.get("ttlMs").is_none() && result.get("cacheScope").is_none());
    let state = result["requestState"].as_str().expect("requestState");
    assert!(state.starts_with("wg1."), "{state}");
    (requests[key]["params"].clone(), state.to_string())
}

/// `[http]` tokens for alice and bob, who see the same servers.
fn two_tokens() -> String {
    format!(
        "[http]\ntokens = [\n  {{ name = \"alice\", token = \"{TOKEN_A}\" }},\n  \
         {{ name = \"bob\", token = \"{TOKEN_B}\" }},\n]\n"
    )
}

/// The calls waiting for their client's retry, as `gateway_status` tells the operator.
async fn waiting(conn: &mut Conn) -> u64 {
    let status = request(
        90,
        "tools/call",
        json!({"name": "gateway_status", "arguments": {}}),
    );
    let status = answer(conn, &status, None).await;
    status["result"]["structuredContent"]["relay"]["calls_waiting_for_input"]
        .as_u64()
        .unwrap_or_else(|| panic!("{status}"))
}

fn accept(name: &str) -> Value {
    json!({"action": "accept", "content": {"name": name}})
}

#[test]
fn a_servers_requests_come_as_input_required_and_the_retry_answers_them() {
    let gateway = HttpGateway::start(&with_example(""), &[]);
    runtime().block_on(async {
        let mut conn = gateway.connect().await;
        let caps = json!({"elicitation": {}, "sampling": {}, "roots": {}});
        let first = call(
            1,
            "elicit",
            json!({"message": "Your name?"}),
            caps.clone(),
            json!({}),
        );
        let (asked, state) = input_required(
            &answer(&mut conn, &first, None).await,
            "elicitation-1",
            "elicitation/create",
        );
        assert_eq!(asked["message"], "Your name?");
        let retry = call(
            2,
            "elicit",
            json!({"message": "Your name?"}),
            caps.clone(),
            json!({"inputResponses": {"elicitation-1": accept("Ada")}, "requestState": state}),
        );
        let done = answer(&mut conn, &retry, None).await;
        assert_eq!(done["id"], 2, "{done}");
        assert_eq!(done["result"]["resultType"], "complete", "{done}");
        let text = done["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("\"Ada\""), "{done}");

        // Answers given up front answer the server at once: no round trip.
        let up_front = call(
            3,
            "sample",
            json!({"prompt": "hi"}),
            caps.clone(),
            json!({
            "inputResponses": {"sampling-1": {"role": "assistant", "model": "m",
                "content": {"type": "text", "text": "sampled"}}}}),
        );
        let done = answer(&mut conn, &up_front, None).await;
        assert_eq!(done["result"]["content"][0]["text"], "sampled", "{done}");

        // A malformed answer is asked for again, under the same key.
        let first = call(4, "roots", json!({}), caps.clone(), json!({}));
        let (_, state) = input_required(
            &answer(&mut conn, &first, None).await,
            "roots-1",
            "roots/list",
        );
        let wrong = call(
            5,
            "roots",
            json!({}),
            caps.clone(),
            json!({"inputResponses": {"roots-1": {"roots": "none"}}, "requestState": state}),
        );
        let (_, state) = input_required(
            &answer(&mut conn, &wrong, None).await,
            "roots-1",
            "roots/list",
        );
        let roots = json!({"roots": [{"uri": "file:///r", "name": "r"}]});
        let right = call(
            6,
            "roots",
            json!({}),
            caps,
            json!({"inputResponses": {"roots-1": roots}, "requestState": state}),
        );
        let done = answer(&mut conn, &right, None).await;
        let text = done["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("file:///r"), "{done}");
    });
}

/// A forged, altered, borrowed, mismatched or replayed `requestState` is refused with
/// -32602 and answers nothing: the server's question is still open for the genuine retry,
/// whose answer is the one the server gets.
#[test]
fn only_the_genuine_retry_carries_a_call_on() {
    let gateway = HttpGateway::start(&with_example(&two_tokens()), &[]);
    runtime().block_on(async {
        let mut conn = gateway.connect().await;
        let caps = json!({"elicitation": {}});
        let args = json!({"message": "Who?"});
        let first = call(1, "elicit", args.clone(), caps.clone(), json!({}));
        let (_, state) = input_required(
            &answer(&mut conn, &first, Some(TOKEN_A)).await,
            "elicitation-1",
            "elicitation/create",
        );
        let retry = |id: u64, args: &Value, state: &str, name: &str| {
            call(
                id,
                "elicit",
                args.clone(),
                caps.clone(),
                json!({
                "inputResponses": {"elicitation-1": accept(name)}, "requestState": state}),
            )
        };
        let refusals = [
            (
                retry(2, &args, &format!("{state}-TAMPERED"), "Mallory"),
                TOKEN_A,
                "altered",
            ),
            (
                retry(3, &args, &state.replace("wg1.", "wg1.x"), "Mallory"),
                TOKEN_A,
                "altered",
            ),
            (retry(4, &args, &state, "Mallory"), TOKEN_B, "other caller"),
            (
                retry(5, &json!({"message": "Other?"}), &state, "Mallory"),
                TOKEN_A,
                "other request",
            ),
        ];
        for (body, token, why) in refusals {
            let refused = answer(&mut conn, &body, Some(token)).await;
            assert_eq!(refused["error"]["code"], -32602, "{why}: {refused}");
            assert_eq!(refused["id"], body["id"], "{why}: {refused}");
        }
        let null = call(
            6,
            "elicit",
            args.clone(),
            caps.clone(),
            json!({"inputResponses": null}),
        );
        let refused = answer(&mut conn, &null, Some(TOKEN_A)).await;
        assert_eq!(refused["error"]["code"], -32602, "{refused}");

        let done = answer(&mut conn, &retry(7, &args, &state, "Ada"), Some(TOKEN_A)).await;
        let text = done["result"]["content"][0]["text"].as_str().unwrap();
        assert!(
            text.contains("\"Ada\"") && !text.contains("Mallory"),
            "{done}"
        );
        // Used once: the same handle again carries nothing on.
        let replayed = answer(&mut conn, &retry(8, &args, &state, "Ada"), Some(TOKEN_A)).await;
        assert_eq!(replayed["error"]["code"], -32602, "{replayed}");
    });
}

/// A client that never retries: its call is given up when its handle expires (the
/// gateway's `timeout`), and the server is told.
#[test]
fn an_abandoned_call_is_cancelled_at_its_expiry() {
    let config = crate::harness::config()
        .gateway(r#"timeout = "1s""#)
        .example_with("ex", &[], &[r#"timeout = "30s""#])
        .render(std::path::Path::new("{dir}"));
    let gateway = HttpGateway::start(&config, &[]);
    runtime().block_on(async {
        let mut conn = gateway.connect().await;
        let caps = json!({"elicitation": {}});
        let args = json!({"message": "Anyone?"});
        let first = call(1, "elicit", args.clone(), caps.clone(), json!({}));
        let (_, state) = input_required(
            &answer(&mut conn, &first, None).await,
            "elicitation-1",
            "elicitation/create",
        );
        assert_eq!(waiting(&mut conn).await, 1);
        let deadline = Instant::now() + WAIT;
        while !gateway
            .stderr()
            .contains("received notifications/cancelled")
        {
            assert!(Instant::now() < deadline, "{}", gateway.stderr());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(waiting(&mut conn).await, 0);
        let late = call(
            2,
            "elicit",
            args,
            caps,
            json!({"inputResponses": {"elicitation-1": accept("Ada")}, "requestState": state}),
        );
        let refused = answer(&mut conn, &late, None).await;
        assert_eq!(refused["error"]["code"], -32602, "{refused}");
    });
}

/// Over stdio too; and a call parked for its client's retry does not stand in the way of
/// the next request's call to the same server (its question is that call's own).
#[test]
fn input_required_over_stdio_beside_a_parked_call() {
    let mut client = crate::harness::config().example("ex", &[]).start();
    let caps = json!({"elicitation": {}});
    let params = |message: &str, extra: Value| {
        let mut params = json!({"name": "ex__elicit", "arguments": {"message": message},
            "_meta": declaring(caps.clone())});
        params
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().cloned().unwrap_or_default());
        params
    };
    let abandoned = client.result("tools/call", params("First?", json!({})));
    assert_eq!(abandoned["resultType"], "input_required", "{abandoned}");
    let second = json!({"result": client.result("tools/call", params("Second?", json!({})))});
    let (asked, state) = input_required(&second, "elicitation-1", "elicitation/create");
    assert_eq!(asked["message"], "Second?");
    let done = client.result(
        "tools/call",
        params(
            "Second?",
            json!({"inputResponses": {"elicitation-1": accept("Bo")}, "requestState": state}),
        ),
    );
    assert_eq!(done["resultType"], "complete", "{done}");
    let text = done["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("\"Bo\""), "{done}");
}

/// The parked call's server asking again while another principal's call is in flight to
/// it: the question cannot be told to be the parked call's, so it reaches nobody.
#[test]
fn a_question_is_never_put_to_another_principals_request() {
    let gateway = HttpGateway::start(&with_example(&two_tokens()), &[]);
    runtime().block_on(async {
        let mut conn = gateway.connect().await;
        let caps = json!({"elicitation": {}});
        let first = call(
            1,
            "elicit",
            json!({"message": "Alice?"}),
            caps.clone(),
            json!({}),
        );
        let parked = answer(&mut conn, &first, Some(TOKEN_A)).await;
        assert_eq!(parked["result"]["resultType"], "input_required", "{parked}");
        // Bob's call asks too: with Alice's call in flight to the same stdio server, whose
        // question it is cannot be told, so the server gets an error and Bob a tool error.
        let bobs = call(2, "elicit", json!({"message": "Bob?"}), caps, json!({}));
        let done = answer(&mut conn, &bobs, Some(TOKEN_B)).await;
        assert_eq!(done["result"]["isError"], true, "{done}");
        let text: &str = done["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("several clients"), "{done}");
    });
}

/// A session-era server's -32042 ("open these URLs, then retry"; the reference "everything"
/// server's `trigger-url-elicitation` with `errorPath`) reaches a 2026-07-28 client as an
/// `input_required` round of URL elicitations; its retry is the call again, which the
/// server lets by and then asks, mid-call, for its own URL: a round of the gateway's. A
/// client that did not declare `elicitation.url` gets -32021 naming it.
#[test]
fn a_url_elicitation_error_becomes_an_input_required_round() {
    let Some(everything) = crate::third_party::everything_server() else {
        return;
    };
    let config = crate::harness::config()
        .gateway(r#"startup_timeout = "30s""#)
        .server("every", everything.to_str().unwrap(), &["stdio"], &[])
        .render(std::path::Path::new("{dir}"));
    let gateway = HttpGateway::start(&config, &[]);
    let tool = "every__trigger-url-elicitation";
    let url_call = |id: u64, url: &str, capabilities: Value, extra: Value| {
        let mut params = json!({"name": tool, "arguments": {"url": url, "errorPath": true},
            "_meta": declaring(capabilities)});
        let extra = extra.as_object().cloned().unwrap_or_default();
        params.as_object_mut().unwrap().extend(extra);
        request(id, "tools/call", params)
    };
    runtime().block_on(async {
        let mut conn = gateway.connect().await;
        // The server offers the tool once it saw that the gateway takes URL elicitations.
        let deadline = Instant::now() + WAIT;
        loop {
            let list = request(1, "tools/list", json!({"_meta": meta(json!({}))}));
            let listed = answer(&mut conn, &list, None).await.to_string();
            if listed.contains(tool) {
                break;
            }
            assert!(Instant::now() < deadline, "{tool} never listed: {listed}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }

        let caps = json!({"elicitation": {"form": {}, "url": {}}});
        let first = url_call(2, "https://example.com/a", caps.clone(), json!({}));
        let round = answer(&mut conn, &first, None).await;
        let result = &round["result"];
        assert_eq!(result["resultType"], "input_required", "{round}");
        assert!(result.get("requestState").is_none(), "{round}");
        let requests = result["inputRequests"].as_object().unwrap();
        assert_eq!(requests.len(), 1, "{round}");
        let (key, asked) = requests.iter().next().unwrap();
        assert_eq!(asked["method"], "elicitation/create", "{round}");
        assert_eq!(asked["params"]["mode"], "url", "{round}");
        assert_eq!(asked["params"]["url"], "https://modelcontextprotocol.io");

        let opened = json!({"inputResponses": {key: {"action": "accept"}}});
        let retry = url_call(3, "https://example.com/a", caps.clone(), opened);
        let (asked, state) = input_required(
            &answer(&mut conn, &retry, None).await,
            "elicitation-1",
            "elicitation/create",
        );
        assert_eq!(asked["url"], "https://example.com/a", "{asked}");
        let done = json!({"inputResponses": {"elicitation-1": {"action": "accept"}},
            "requestState": state});
        let done = answer(&mut conn, &url_call(4, "https://example.com/a", caps, done), None).await;
        assert_eq!(done["result"]["resultType"], "complete", "{done}");
        assert_eq!(done["result"]["isError"], json!(null), "{done}");

        // A client of the session era gets the -32042 itself, its URLs where it looks.
        let mut legacy = gateway.session("/mcp", &[]).await;
        let error = legacy
            .request(
                "tools/call",
                json!({"name": tool, "arguments": {"url": "https://example.com/c", "errorPath": true}}),
            )
            .await["error"]
            .clone();
        assert_eq!(error["code"], -32042, "{error}");
        let listed = &error["data"]["elicitations"][0];
        assert_eq!(listed["url"], "https://modelcontextprotocol.io", "{error}");

        let forms_only = json!({"elicitation": {}});
        let refused = url_call(5, "https://example.com/b", forms_only, json!({}));
        let reply = post(&mut conn, "/mcp", &refused, &[]).await;
        let error = reply.answer()["error"].clone();
        assert_eq!(error["code"], -32021, "{error}");
        assert_eq!(
            error["data"]["requiredCapabilities"],
            json!({"elicitation": {"url": {}}})
        );
    });
}
