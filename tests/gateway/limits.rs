//! Limits through the real binary: rate limits per principal, profile and tool (429 with
//! `Retry-After` over HTTP, -32000 with `data.retryAfterMs` over JSON-RPC), the cap on
//! calls at once per server, the retry budget of list calls, and the circuit breaker of
//! a failing remote server; each refusal in `/metrics` or the events, then the recovery.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{TIMEOUT, TestDir, config};
use crate::http_client::{HttpGateway, McpSession, runtime};
use crate::http_front::with_example;
use crate::remote_faults::Scripted;

/// `/metrics` as read by a request that no rate limit counts (a `GET`).
async fn metrics(gateway: &HttpGateway, headers: &[(&str, &str)]) -> String {
    let reply = (gateway.connect().await)
        .request("GET", "/metrics", headers, "")
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.body
}

fn has_metric(body: &str, needle: &str) {
    assert!(body.contains(needle), "{needle} in\n{body}");
}

/// The events of `event_type`, newest first, as `get_events` gives them.
async fn events(session: &mut McpSession, event_type: &str) -> Vec<Value> {
    let answer = session
        .call(
            "get_events",
            json!({"event_type": event_type, "limit": 1000}),
        )
        .await;
    answer["result"]["structuredContent"]["events"]
        .as_array()
        .unwrap_or_else(|| panic!("no events in {answer}"))
        .clone()
}

/// A `POST` of a `tools/call` on `session`, its reply whole (status, headers, body).
async fn post_call(session: &mut McpSession, id: u64, tool: &str) -> crate::http_client::Reply {
    let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                      "params": {"name": tool, "arguments": {"text": "hi"}}});
    session.send(&call).await
}

/// Calls `ex__echo` until a call is refused with 429 (within ten: the rates tested are
/// slower than calls); the refusal.
async fn first_429(session: &mut McpSession) -> crate::http_client::Reply {
    for id in 1..=10 {
        let reply = post_call(session, id, "ex__echo").await;
        if reply.status == 429 {
            return reply;
        }
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    panic!("no 429 within 10 calls");
}

/// The wait a refusal asks for, from its `Retry-After` header.
fn retry_after(reply: &crate::http_client::Reply) -> Duration {
    let seconds: u64 = (reply.headers.get("retry-after"))
        .unwrap_or_else(|| panic!("a Retry-After header: {:?}", reply.headers))
        .parse()
        .unwrap();
    assert!((1..=2).contains(&seconds), "Retry-After {seconds}");
    Duration::from_secs(seconds)
}

/// A token over its rate gets 429 with `Retry-After` before its message reaches a
/// session; another token is not counted with it; after the wait it is served again.
#[test]
fn a_principal_over_its_rate_gets_429_with_retry_after_then_is_served() {
    let extra = r#"
[http]
tokens = [
  { name = "alice", token = "alice-token-0123456789abcdef", scopes = ["mcp", "operator"] },
  { name = "bob", token = "bob-token-0123456789abcdefgh" },
]

[[limits.rate]]
per = "principal"
match = "alice"
rate = "2/s"
burst = 3
"#;
    let gateway = HttpGateway::start(&with_example(extra), &[]);
    runtime().block_on(async {
        let alice = [("authorization", "Bearer alice-token-0123456789abcdef")];
        let bob = [("authorization", "Bearer bob-token-0123456789abcdefgh")];
        // `initialize` and `notifications/initialized` take two of the three.
        let mut session = gateway.session("/mcp", &alice).await;
        let refused = first_429(&mut session).await;
        let wait = retry_after(&refused);
        let error = &refused.json()["error"];
        assert_eq!(error["code"], -32000, "{error}");
        assert_eq!(error["data"]["limit"], "principal:alice", "{error}");
        assert!(
            error["data"]["retryAfterMs"].as_u64().unwrap() > 0,
            "{error}"
        );

        // Bob's bucket is his own (and no rule matches him).
        let mut other = gateway.session("/mcp", &bob).await;
        for _ in 0..5 {
            let answer = other.call("ex__echo", json!({"text": "b"})).await;
            assert!(answer.get("result").is_some(), "{answer}");
        }

        let body = metrics(&gateway, &alice).await;
        has_metric(
            &body,
            r#"wasmgate_limited_total{limit="principal:alice",kind="rate"} 1"#,
        );
        has_metric(&body, "# HELP wasmgate_limited_total");
        has_metric(
            &body,
            r#"wasmgate_http_requests_total{method="POST",path="/mcp",status="429",token="alice"} 1"#,
        );

        tokio::time::sleep(wait).await;
        let answer = session.call("ex__echo", json!({"text": "again"})).await;
        assert_eq!(answer["result"]["content"][0]["text"], "again", "{answer}");
    });
}

/// A profile's rate counts every request on its path, whoever sends it; the gateway's
/// other paths are not counted with it.
#[test]
fn a_profile_over_its_rate_gets_429_then_is_served() {
    let extra = r#"
[profiles.ro]
tools = ["ex__echo"]

[[limits.rate]]
per = "profile"
match = "ro"
rate = "1/s"
burst = 3
"#;
    let gateway = HttpGateway::start(&with_example(extra), &[]);
    runtime().block_on(async {
        let mut session = gateway.session("/mcp/ro", &[]).await;
        let refused = first_429(&mut session).await;
        let wait = retry_after(&refused);
        assert_eq!(refused.json()["error"]["data"]["limit"], "profile:ro");

        let mut whole = gateway.session("/mcp", &[]).await;
        for _ in 0..5 {
            let answer = whole.call("ex__echo", json!({"text": "w"})).await;
            assert!(answer.get("result").is_some(), "{answer}");
        }
        let body = metrics(&gateway, &[]).await;
        has_metric(
            &body,
            r#"wasmgate_limited_total{limit="profile:ro",kind="rate"} 1"#,
        );

        tokio::time::sleep(wait).await;
        let answer = session.call("ex__echo", json!({"text": "again"})).await;
        assert_eq!(answer["result"]["content"][0]["text"], "again", "{answer}");
    });
}

/// A tool over its rate is refused inside the JSON-RPC answer (-32000, `retryAfterMs`,
/// `limit`), other tools are not; a flood of refusals is one `limit.refused` event a
/// second, while `/metrics` counts each; after `retryAfterMs` the tool answers again.
#[test]
fn a_tool_over_its_rate_gets_a_json_rpc_error_then_answers_again() {
    let extra = r#"
[[limits.rate]]
per = "tool"
match = "ex__ec*"
rate = "2/s"
burst = 2
"#;
    let gateway = HttpGateway::start(&with_example(extra), &[]);
    runtime().block_on(async {
        let mut session = gateway.session("/mcp", &[]).await;
        let mut error = None;
        for _ in 0..10 {
            let answer = session.call("ex__echo", json!({"text": "e"})).await;
            if let Some(e) = answer.get("error") {
                error = Some(e.clone());
                break;
            }
        }
        let error = error.expect("a refusal within 10 calls at 2/s");
        assert_eq!(error["code"], -32000, "{error}");
        assert_eq!(error["data"]["limit"], "tool:ex__ec*", "{error}");
        let wait = error["data"]["retryAfterMs"]
            .as_u64()
            .expect("retryAfterMs");
        assert!((1..=1000).contains(&wait), "{error}");
        for _ in 0..3 {
            let answer = session.call("ex__add", json!({"a": 1, "b": 2})).await;
            assert!(answer.get("result").is_some(), "{answer}");
        }
        // A flood: each refusal counted, at most one told a second.
        let started = Instant::now();
        let (mut flood, mut wait) = (0, wait);
        for _ in 0..30 {
            let answer = session.call("ex__echo", json!({"text": "f"})).await;
            if let Some(ms) = answer["error"]["data"]["retryAfterMs"].as_u64() {
                (flood, wait) = (flood + 1, ms);
            }
        }
        let seconds = started.elapsed().as_secs() as usize;
        assert!(flood >= 10, "the bucket refills at 2/s: {flood}");
        let told = events(&mut session, "limit.refused").await;
        assert!(
            !told.is_empty() && told.len() <= seconds + 2,
            "{} events for {flood} refusals in {seconds} s",
            told.len()
        );
        assert_eq!(told[0]["limit"], "tool:ex__ec*", "{told:?}");
        let body = metrics(&gateway, &[]).await;
        has_metric(
            &body,
            &format!(
                r#"wasmgate_limited_total{{limit="tool:ex__ec*",kind="rate"}} {}"#,
                flood + 1
            ),
        );

        tokio::time::sleep(Duration::from_millis(wait)).await;
        let answer = session.call("ex__echo", json!({"text": "again"})).await;
        assert_eq!(answer["result"]["content"][0]["text"], "again", "{answer}");
    });
}

/// Over stdio the local user is principal "local": a request over its rate gets
/// -32000 with `data.retryAfterMs` (stdout stays protocol), and after that wait it is served.
#[test]
fn over_stdio_the_local_principal_gets_a_json_rpc_error_then_is_served() {
    let dir = TestDir::new("limits");
    let limit =
        "\n[[limits.rate]]\nper = \"principal\"\nmatch = \"local\"\nrate = \"2/s\"\nburst = 3\n";
    let text = config().example("ex", &[]).render(&dir.path) + limit;
    let path = dir.write("gateway.toml", &text);
    let mut client = config().spawn(&path, dir);
    let mut error = None;
    for _ in 0..10 {
        let answer = client.request(
            "tools/call",
            json!({"name": "ex__echo", "arguments": {"text": "s"}}),
        );
        if let Some(e) = answer.get("error") {
            error = Some(e.clone());
            break;
        }
    }
    let error = error.expect("a refusal within 10 requests at 2/s");
    assert_eq!(error["code"], -32000, "{error}");
    assert_eq!(error["data"]["limit"], "principal:local", "{error}");
    let wait = error["data"]["retryAfterMs"]
        .as_u64()
        .expect("retryAfterMs");
    std::thread::sleep(Duration::from_millis(wait));
    let answer = client.request(
        "tools/call",
        json!({"name": "ex__echo", "arguments": {"text": "back"}}),
    );
    assert_eq!(answer["result"]["content"][0]["text"], "back", "{answer}");
    let told = when_allowed(
        &mut client,
        "get_events",
        json!({"event_type": "limit.refused"}),
    );
    assert_eq!(told["events"][0]["limit"], "principal:local", "{told}");
    let status = when_allowed(&mut client, "gateway_status", json!({}));
    assert_eq!(
        status["limits"]["rate"][0]["limit"], "principal:local",
        "{status}"
    );
}

/// A call's structured result, made again after the wait a rate limit asks for.
fn when_allowed(client: &mut crate::harness::Client, tool: &str, arguments: Value) -> Value {
    loop {
        let answer = client.request("tools/call", json!({"name": tool, "arguments": arguments}));
        match answer["error"]["data"]["retryAfterMs"].as_u64() {
            Some(ms) => std::thread::sleep(Duration::from_millis(ms)),
            None => return answer["result"]["structuredContent"].clone(),
        }
    }
}

/// `max_concurrent = 1`: a second call waits for the first, up to its own timeout, then
/// gets -32000 with `retryAfterMs`; once the first ends, calls go through again.
#[test]
fn a_call_beyond_max_concurrent_waits_its_timeout_then_is_refused() {
    let extra = [
        "max_concurrent = 1",
        "timeout = \"1s\"",
        "tool_timeouts = { slow = \"20s\" }",
    ];
    let mut client = config().example_with("ex", &[], &extra).start_initialized();
    let slow = client.send_request(
        "tools/call",
        json!({"name": "ex__slow", "arguments": {"ms": 3000}, "_meta": {"progressToken": "p"}}),
    );
    // Its first progress: the slow call holds the server's one place.
    client.next_notification("notifications/progress", TIMEOUT);
    let started = Instant::now();
    let answer = client.request(
        "tools/call",
        json!({"name": "ex__echo", "arguments": {"text": "x"}}),
    );
    let error = &answer["error"];
    assert_eq!(error["code"], -32000, "{answer}");
    assert_eq!(
        (
            error["data"]["kind"].as_str(),
            error["data"]["limit"].as_str()
        ),
        (Some("concurrency"), Some("server:ex")),
        "{answer}"
    );
    assert!(error["data"]["retryAfterMs"].as_u64().is_some(), "{answer}");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "it waited its timeout"
    );
    let done = client.wait_response(&slow, TIMEOUT);
    assert!(done.get("result").is_some(), "{done}");
    let answer = client.call("ex__echo", json!({"text": "after"}));
    assert_eq!(answer["content"][0]["text"], "after", "{answer}");
    let told = client.events(json!({"event_type": "limit.refused"}));
    assert_eq!(told[0]["kind"], "concurrency", "{told:?}");
}

/// A remote server that answers 500 opens its breaker after `failures` failures: calls
/// to it are refused at once while the example server keeps serving; after `open_for`
/// one probe goes, and its success closes the breaker. Events and `/metrics` tell each step.
#[test]
fn a_failing_remote_server_opens_its_breaker_half_opens_and_closes() {
    let failing = Arc::new(AtomicBool::new(true));
    let fails = failing.clone();
    let server = Scripted::start(move |seen, reply| {
        if seen.method() == "tools/call" && fails.load(Ordering::SeqCst) {
            reply.json("500 Internal Server Error", "", None);
            return true;
        }
        false
    });
    let remote = format!(
        "[servers.up]\nurl = \"{}\"\nbreaker = {{ failures = 2, open_for = \"1s\" }}\n",
        server.url()
    );
    let gateway = HttpGateway::start(&with_example(&remote), &[]);
    runtime().block_on(async {
        let mut session = gateway.session("/mcp", &[]).await;
        wait_for_tool(&mut session, "up__who").await;
        for _ in 0..2 {
            let answer = session.call("up__who", json!({})).await;
            assert_eq!(answer["error"]["code"], -32000, "{answer}");
            assert!(answer["error"]["data"].get("limit").is_none(), "{answer}");
        }
        let started = Instant::now();
        let answer = session.call("up__who", json!({})).await;
        let error = &answer["error"];
        assert_eq!(
            (
                error["data"]["kind"].as_str(),
                error["data"]["limit"].as_str()
            ),
            (Some("breaker"), Some("server:up")),
            "{answer}"
        );
        let wait = error["data"]["retryAfterMs"]
            .as_u64()
            .expect("retryAfterMs");
        assert!(
            started.elapsed() < Duration::from_millis(500),
            "refused at once"
        );
        let calls = server.count(|s| s.method() == "tools/call");
        assert_eq!(calls, 2, "the refused call did not reach the server");
        let answer = session.call("ex__echo", json!({"text": "other"})).await;
        assert_eq!(answer["result"]["content"][0]["text"], "other", "{answer}");
        assert_eq!(
            events(&mut session, "breaker.opened").await[0]["source"],
            "up"
        );
        let body = metrics(&gateway, &[]).await;
        has_metric(&body, r#"wasmgate_breaker_state{server="up"} 2"#);
        has_metric(&body, r#"wasmgate_breaker_state{server="ex"} 0"#);
        has_metric(
            &body,
            r#"wasmgate_limited_total{limit="server:up",kind="breaker"} 1"#,
        );

        failing.store(false, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(wait)).await;
        let answer = session.call("up__who", json!({})).await;
        assert!(answer.get("result").is_some(), "the probe: {answer}");
        assert_eq!(
            events(&mut session, "breaker.half_open").await[0]["source"],
            "up"
        );
        assert_eq!(
            events(&mut session, "breaker.closed").await[0]["source"],
            "up"
        );
        let body = metrics(&gateway, &[]).await;
        has_metric(&body, r#"wasmgate_breaker_state{server="up"} 0"#);
        let status = session.call("gateway_status", json!({})).await;
        let status = &status["result"]["structuredContent"];
        assert_eq!(
            status["backends"]["up"]["breaker"]["state"], "closed",
            "{status}"
        );
    });
}

/// A list call that fails on its way (a 5xx) is retried once, within the retry budget:
/// the server's tools are listed, and `/metrics` counts the retry.
#[test]
fn a_list_call_failing_with_5xx_is_retried_within_the_budget() {
    let lists = Arc::new(AtomicUsize::new(0));
    let seen_lists = lists.clone();
    let server = Scripted::start(move |seen, reply| {
        if seen.method() == "tools/list" && seen_lists.fetch_add(1, Ordering::SeqCst) == 0 {
            reply.json("503 Service Unavailable", "", None);
            return true;
        }
        false
    });
    let remote = format!("[servers.up]\nurl = \"{}\"\n", server.url());
    let gateway = HttpGateway::start(&with_example(&remote), &[]);
    runtime().block_on(async {
        let mut session = gateway.session("/mcp", &[]).await;
        wait_for_tool(&mut session, "up__who").await;
        assert_eq!(lists.load(Ordering::SeqCst), 2, "one failure, one retry");
        let body = metrics(&gateway, &[]).await;
        has_metric(&body, "wasmgate_retries_total 1");
    });
}

/// Waits until `tool` is listed (the remote server has started), polling the list.
async fn wait_for_tool(session: &mut McpSession, tool: &str) {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let list = session.request("tools/list", json!({})).await;
        let names: Vec<&str> = (list["result"]["tools"].as_array().into_iter().flatten())
            .filter_map(|t| t["name"].as_str())
            .collect();
        if names.contains(&tool) {
            return;
        }
        assert!(Instant::now() < deadline, "{tool} not listed: {names:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A server the gateway runs gets a breaker when its `breaker` is written: calls that time
/// out open it, a call is then refused at once over stdio, and after `open_for` a probe
/// that succeeds closes it.
#[test]
fn a_process_servers_written_breaker_opens_on_timeouts_and_closes_after_a_probe() {
    let extra = [
        "timeout = \"300ms\"",
        "breaker = { failures = 2, open_for = \"1s\" }",
    ];
    let mut client = config().example_with("ex", &[], &extra).start_initialized();
    for _ in 0..2 {
        let answer = client.request("tools/call", json!({"name": "ex__hang", "arguments": {}}));
        assert_eq!(answer["error"]["code"], -32001, "{answer}");
    }
    let started = Instant::now();
    let answer = client.request(
        "tools/call",
        json!({"name": "ex__echo", "arguments": {"text": "x"}}),
    );
    let error = &answer["error"];
    assert_eq!(error["data"]["kind"], "breaker", "{answer}");
    assert!(
        started.elapsed() < Duration::from_millis(300),
        "refused at once"
    );
    let wait = error["data"]["retryAfterMs"]
        .as_u64()
        .expect("retryAfterMs");
    assert_eq!(
        client.status()["backends"]["ex"]["breaker"]["state"],
        "open"
    );
    std::thread::sleep(Duration::from_millis(wait));
    let answer = client.call("ex__echo", json!({"text": "probe"}));
    assert_eq!(answer["content"][0]["text"], "probe", "{answer}");
    let closed = client.events(json!({"event_type": "breaker.closed"}));
    assert_eq!(closed[0]["source"], "ex", "{closed:?}");
    assert_eq!(
        client.status()["backends"]["ex"]["breaker"]["state"],
        "closed"
    );
}
