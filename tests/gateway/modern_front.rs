//! The 2026-07-28 (stateless) era on the HTTP front's `/mcp`, beside the 2025 sessions:
//! raw HTTP requests with per-request `_meta`, checked in the specification's order, and
//! answered without a session.

use std::time::Instant;

use serde_json::{Value, json};

use crate::harness::{LOAD_TIMEOUT, fixture_path, toml_str};
use crate::http_client::{Conn, EventStream, HttpGateway, Reply, runtime};
use crate::http_front::with_example;

const VERSION: &str = "2026-07-28";
const WAIT: std::time::Duration = std::time::Duration::from_secs(20);

/// The `_meta` a stateless request carries, with `extra` keys added.
pub(crate) fn meta(extra: Value) -> Value {
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    });
    meta.as_object_mut()
        .unwrap()
        .extend(extra.as_object().cloned().unwrap_or_default());
    meta
}

/// A request whose params get the stateless `_meta` (unless they hold one already).
pub(crate) fn request(id: u64, method: &str, mut params: Value) -> Value {
    if params.get("_meta").is_none() {
        params["_meta"] = meta(json!({}));
    }
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// The headers a conformant client sends for `body`: version, method, and name if any.
fn mirrors(body: &Value) -> Vec<(String, String)> {
    let method = body["method"].as_str().unwrap().to_string();
    let mut headers = vec![
        ("mcp-protocol-version".into(), VERSION.into()),
        ("mcp-method".into(), method),
    ];
    let name = body["params"]["name"]
        .as_str()
        .or(body["params"]["uri"].as_str());
    if let Some(name) = name {
        headers.push(("mcp-name".into(), name.into()));
    }
    headers
}

/// POSTs `body` with `headers` (pairs replace the conformant ones of the same name).
pub(crate) async fn post(
    conn: &mut Conn,
    path: &str,
    body: &Value,
    replace: &[(&str, &str)],
) -> Reply {
    let mut headers = mirrors(body);
    headers.retain(|(name, _)| !replace.iter().any(|(r, _)| r == name));
    headers.extend(replace.iter().map(|(n, v)| (n.to_string(), v.to_string())));
    let headers: Vec<(&str, &str)> = headers
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    conn.post(path, &headers, body).await
}

/// Asserts an HTTP `status` with a JSON-RPC error `code` that echoes the request's id.
fn assert_refused(reply: &Reply, status: u16, code: i64, id: u64) -> Value {
    assert_eq!(reply.status, status, "{}", reply.body);
    let answer = reply.json();
    assert_eq!(answer["error"]["code"], code, "{answer}");
    assert_eq!(answer["id"], id, "{answer}");
    answer
}

#[test]
fn stateless_requests_are_refused_in_the_specs_order() {
    let gateway = HttpGateway::start(&with_example(""), &[]);
    runtime().block_on(async {
        let mut conn = gateway.connect().await;
        let discover = request(1, "server/discover", json!({}));
        let supported =
            post(&mut conn, "/mcp", &discover, &[]).await.json()["result"]["supportedVersions"]
                .clone();

        // An unsupported header version comes first, with the versions discover lists.
        let mut odd = request(2, "server/discover", json!({}));
        odd["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("v999.0.0");
        let reply = post(
            &mut conn,
            "/mcp",
            &odd,
            &[("mcp-protocol-version", "v999.0.0")],
        )
        .await;
        let answer = assert_refused(&reply, 400, -32022, 2);
        assert_eq!(answer["error"]["data"]["supported"], supported);
        assert_eq!(answer["error"]["data"]["requested"], "v999.0.0");
        // A supported header over another body version is a mismatch.
        let reply = post(&mut conn, "/mcp", &odd, &[]).await;
        assert_refused(&reply, 400, -32020, 2);

        // Each required `_meta` field, missing.
        let no_meta = json!({"jsonrpc": "2.0", "id": 3, "method": "server/discover", "params": {}});
        assert_refused(
            &post(&mut conn, "/mcp", &no_meta, &[]).await,
            400,
            -32602,
            3,
        );
        for key in ["protocolVersion", "clientCapabilities"] {
            let mut partial = request(4, "server/discover", json!({}));
            let meta = partial["params"]["_meta"].as_object_mut().unwrap();
            meta.remove(&format!("io.modelcontextprotocol/{key}"));
            let reply = post(&mut conn, "/mcp", &partial, &[]).await;
            assert_refused(&reply, 400, -32602, 4);
        }

        // The headers that mirror the body must match it.
        let list = request(5, "tools/list", json!({}));
        let reply = post(&mut conn, "/mcp", &list, &[("mcp-method", "prompts/list")]).await;
        assert_refused(&reply, 400, -32020, 5);
        let call = request(
            6,
            "tools/call",
            json!({"name": "ex__echo", "arguments": {"text": "hi"}}),
        );
        let reply = post(&mut conn, "/mcp", &call, &[("mcp-name", "ex__add")]).await;
        assert_refused(&reply, 400, -32020, 6);
        let reply = post(&mut conn, "/mcp", &call, &[("mcp-name", "")]).await;
        assert_refused(&reply, 400, -32020, 6);
        // The base64 sentinel is decoded before comparing: "ex__echo", then "ex__add".
        let reply = post(
            &mut conn,
            "/mcp",
            &call,
            &[("mcp-name", "=?base64?ZXhfX2VjaG8=?=")],
        )
        .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        assert_eq!(reply.answer()["result"]["content"][0]["text"], "hi");
        let reply = post(
            &mut conn,
            "/mcp",
            &call,
            &[("mcp-name", "=?base64?ZXhfX2FkZA==?=")],
        )
        .await;
        assert_refused(&reply, 400, -32020, 6);
        let read = request(
            7,
            "resources/read",
            json!({"uri": "example://static/hello"}),
        );
        let reply = post(&mut conn, "/mcp", &read, &[("mcp-name", "example://other")]).await;
        assert_refused(&reply, 400, -32020, 7);

        // Methods the era removed, and unknown ones, are 404.
        for method in [
            "initialize",
            "ping",
            "logging/setLevel",
            "resources/subscribe",
            "resources/unsubscribe",
            "unknown/method",
        ] {
            let body = request(
                8,
                method,
                json!({"uri": "example://static/hello", "level": "info"}),
            );
            let reply = post(&mut conn, "/mcp", &body, &[("mcp-name", "")]).await;
            assert_refused(&reply, 404, -32601, 8);
        }

        // GET and DELETE have no meaning in the era.
        for method in ["GET", "DELETE"] {
            let headers = [
                ("accept", "text/event-stream"),
                ("mcp-protocol-version", VERSION),
            ];
            let reply = conn.request(method, "/mcp", &headers, "").await;
            assert_eq!(reply.status, 405, "{method}: {}", reply.body);
        }
    });
    let stderr = gateway.stderr();
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn stateless_discover_lists_and_calls_beside_a_session() {
    let extra = "[profiles.math]\ntools = [\"ex__add\"]\n";
    let gateway = HttpGateway::start(&with_example(extra), &[]);
    runtime().block_on(async {
        // A 2025 client with its session, open the whole time.
        let mut session = gateway.session("/mcp", &[]).await;
        let mut conn = gateway.connect().await;

        let reply = post(
            &mut conn,
            "/mcp",
            &request(1, "server/discover", json!({})),
            &[],
        )
        .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        assert!(
            !reply.headers.contains_key("mcp-session-id"),
            "{:?}",
            reply.headers
        );
        let discover = &reply.json()["result"];
        assert_eq!(discover["supportedVersions"][0], VERSION);
        assert!(discover["capabilities"]["tools"].is_object(), "{discover}");
        assert_eq!(
            discover["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
            "wasmgate"
        );
        assert_eq!(discover["resultType"], "complete");
        assert_eq!(
            (discover["ttlMs"].clone(), discover["cacheScope"].clone()),
            (json!(0), json!("public"))
        );

        // A session id sent along is ignored: the request stands on its own.
        let list = request(2, "tools/list", json!({}));
        let reply = post(
            &mut conn,
            "/mcp",
            &list,
            &[("mcp-session-id", "no-such-session")],
        )
        .await;
        let tools = &reply.answer()["result"];
        assert!(
            tools["tools"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["name"] == "ex__echo")
        );
        assert_eq!(tools["resultType"], "complete");
        assert_eq!(tools["cacheScope"], "public");
        assert!(
            tools["_meta"]["io.modelcontextprotocol/serverInfo"].is_object(),
            "{tools}"
        );

        // A profile's view: its list only, and private.
        let reply = post(&mut conn, "/mcp/math", &list, &[]).await;
        let tools = &reply.answer()["result"];
        let names: Vec<&str> = tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["ex__add"]);
        assert_eq!(tools["cacheScope"], "private");

        let call = request(
            3,
            "tools/call",
            json!({"name": "ex__add", "arguments": {"a": 2, "b": 3}}),
        );
        let answer = post(&mut conn, "/mcp/math", &call, &[]).await.answer();
        assert_eq!(answer["result"]["content"][0]["text"], "5", "{answer}");
        assert_eq!(answer["result"]["resultType"], "complete");
        // Written into the server's result text: the gateway's identity, no cache hints.
        assert_eq!(
            answer["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "wasmgate",
            "{answer}"
        );
        assert!(answer["result"].get("ttlMs").is_none(), "{answer}");

        let read = request(
            4,
            "resources/read",
            json!({"uri": "example://static/hello"}),
        );
        let answer = post(&mut conn, "/mcp", &read, &[]).await.answer();
        assert!(answer["result"]["contents"].is_array(), "{answer}");
        assert_eq!(answer["result"]["cacheScope"], "public");
        // Not found is -32602 naming the URI in this era (-32002 in the session's).
        let missing = request(5, "resources/read", json!({"uri": "nowhere://x"}));
        let answer = post(&mut conn, "/mcp", &missing, &[]).await.answer();
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        assert_eq!(answer["error"]["data"]["uri"], "nowhere://x");
        let old = session
            .request("resources/read", json!({"uri": "nowhere://x"}))
            .await;
        assert_eq!(old["error"]["code"], -32002, "{old}");

        // The session is untouched, and the stateless requests opened none.
        let echo = session
            .call("ex__echo", json!({"text": "still here"}))
            .await;
        assert_eq!(echo["result"]["content"][0]["text"], "still here");
        assert!(echo["result"].get("resultType").is_none(), "{echo}");
        let status = session.call("gateway_status", json!({})).await;
        let status: Value =
            serde_json::from_str(status["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(status["http"]["sessions"], 1, "{status}");
    });
    let stderr = gateway.stderr();
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// Log lines reach a stateless request only when its `_meta` sets a level, at or above
/// it; its progress goes on its own response stream.
#[test]
fn stateless_log_lines_follow_the_requests_level() {
    let plugin = fixture_path("conformance");
    let config = format!(
        "[plugins]\ncache_dir = \"{{dir}}/cache\"\n\n[plugins.conformance]\npath = {}\nnamespace = \"\"\n",
        toml_str(plugin.to_str().unwrap())
    );
    let gateway = HttpGateway::start(&with_example(&config), &[]);
    runtime().block_on(async {
        let mut conn = gateway.connect().await;
        // The plugin compiles after the gateway listens.
        let deadline = Instant::now() + LOAD_TIMEOUT;
        loop {
            let list = post(&mut conn, "/mcp", &request(1, "tools/list", json!({})), &[]).await;
            let tools = list.answer()["result"]["tools"].clone();
            if tools
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["name"] == "test_tool_with_logging")
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the plugin did not load: {tools}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let cases = [(None, 0), (Some("info"), 3), (Some("error"), 0)];
        assert_logs(&mut conn, "test_tool_with_logging", &cases).await;
        let progress = request(
            3,
            "tools/call",
            json!({"name": "test_tool_with_progress", "arguments": {},
            "_meta": meta(json!({"progressToken": "p1"}))}),
        );
        let reply = post(&mut conn, "/mcp", &progress, &[]).await;
        let events = reply.events();
        let tokens: Vec<&Value> = events
            .iter()
            .filter(|e| e["method"] == "notifications/progress")
            .map(|e| &e["params"]["progressToken"])
            .collect();
        assert_eq!(tokens, [&json!("p1"); 3], "{}", reply.body);
        assert_eq!(events.last().unwrap()["result"]["resultType"], "complete");
    });
    let stderr = gateway.stderr();
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// Over stdio, a line whose `_meta` claims 2026-07-28 is answered on its own, before and
/// after the same process's client initialized its session, which stays as it was.
#[test]
fn stateless_lines_over_stdio_beside_the_session() {
    let mut client = crate::harness::config().example("ex", &[]).start();
    let ping = client.request("ping", json!({"_meta": meta(json!({}))}));
    assert_eq!(ping["error"]["code"], -32601, "{ping}");
    let mut partial = meta(json!({}));
    partial
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientCapabilities");
    let refused = client.request("server/discover", json!({"_meta": partial}));
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let discover = client.result("server/discover", json!({"_meta": meta(json!({}))}));
    assert_eq!(discover["supportedVersions"][0], VERSION, "{discover}");
    assert_eq!(discover["resultType"], "complete");

    client.initialize();
    client.wait_ready();
    let call = client.result(
        "tools/call",
        json!({"name": "ex__echo", "arguments": {"text": "both"}, "_meta": meta(json!({}))}),
    );
    assert_eq!(call["content"][0]["text"], "both", "{call}");
    assert_eq!(call["resultType"], "complete");
    let list = client.result("tools/list", json!({"_meta": meta(json!({}))}));
    assert_eq!(
        (list["ttlMs"].clone(), list["cacheScope"].clone()),
        (json!(0), json!("public"))
    );
    // The session's own requests are answered as before.
    let old = client.result("tools/list", json!({}));
    assert!(
        old.get("resultType").is_none() && old.get("ttlMs").is_none(),
        "{old}"
    );
    assert_eq!(old["tools"], list["tools"]);
}

/// Closing a stateless request's response is its cancellation: the server is told.
#[test]
fn closing_a_stateless_response_cancels_the_call() {
    let gateway = HttpGateway::start(&with_example(""), &[]);
    runtime().block_on(async {
        let call = request(
            1,
            "tools/call",
            json!({"name": "ex__slow", "arguments": {"ms": 6000},
                   "_meta": meta(json!({"progressToken": "t"}))}),
        );
        let mut headers = mirrors(&call);
        headers.push((
            "accept".into(),
            "application/json, text/event-stream".into(),
        ));
        headers.push(("content-type".into(), "application/json".into()));
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        let conn = gateway.connect().await;
        let mut stream = EventStream::open(conn, "POST", "/mcp", &headers, &call.to_string())
            .await
            .unwrap_or_else(|r| panic!("a stream: {} {}", r.status, r.body));
        let (_, first) = stream.next_message(WAIT).await.expect("progress");
        assert_eq!(first["method"], "notifications/progress", "{first}");
        drop(stream);
        let deadline = Instant::now() + WAIT;
        while !gateway
            .stderr()
            .contains("received notifications/cancelled")
        {
            assert!(Instant::now() < deadline, "{}", gateway.stderr());
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    });
}

/// A server's request for a capability the stateless request did not declare ends the
/// request with -32021 naming it (HTTP 400), whatever the server made of the refusal.
#[test]
fn an_undeclared_capability_ends_the_request_with_32021() {
    let gateway = HttpGateway::start(&with_example(""), &[]);
    runtime().block_on(async {
        let mut conn = gateway.connect().await;
        let call = request(
            9,
            "tools/call",
            json!({"name": "ex__sample", "arguments": {"prompt": "hi"}}),
        );
        let reply = post(&mut conn, "/mcp", &call, &[]).await;
        let answer = assert_refused(&reply, 400, -32021, 9);
        assert_eq!(
            answer["error"]["data"]["requiredCapabilities"],
            json!({"sampling": {}})
        );
        // The next request is not marked by it.
        let echo = request(
            10,
            "tools/call",
            json!({"name": "ex__echo", "arguments": {"text": "ok"}}),
        );
        let reply = post(&mut conn, "/mcp", &echo, &[]).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        assert_eq!(reply.answer()["result"]["content"][0]["text"], "ok");
    });
}

/// Over stdio, `notifications/cancelled` ends a stateless request: the server is told,
/// and the request gets no answer.
#[test]
fn a_stateless_request_over_stdio_is_cancelled_by_notification() {
    let mut client = crate::harness::config().example("ex", &[]).start();
    client.initialize();
    client.wait_ready();
    let id = client.send_request(
        "tools/call",
        json!({"name": "ex__slow", "arguments": {"ms": 30000},
               "_meta": meta(json!({"progressToken": "t"}))}),
    );
    let progress = client.next_notification("notifications/progress", WAIT);
    assert_eq!(progress["params"]["progressToken"], "t", "{progress}");
    client.notify("notifications/cancelled", json!({"requestId": id}));
    let deadline = Instant::now() + WAIT;
    while !client.stderr().contains("received notifications/cancelled") {
        assert!(Instant::now() < deadline, "{}", client.stderr());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        client
            .try_response(&id, std::time::Duration::from_millis(200))
            .is_none()
    );
}

/// The official Python SDK's `Client` through the HTTP front to a stdio server that speaks
/// only the session era: `auto` (which asks `server/discover` first) and a pin to
/// 2026-07-28 speak the stateless era to the gateway, `legacy` the session era, and each
/// sees the same lists, call, read, prompt and progress, and has the server's questions
/// (elicitation, sampling, roots, two rounds, a prompt's) answered by its callbacks.
#[test]
fn the_python_sdk_client_speaks_either_era_through_the_gateway() {
    let Some(python) = crate::third_party::sdk_python() else {
        return;
    };
    let gateway = HttpGateway::start(&crate::conformance::fixture_config(&[]), &[]);
    let url = gateway.url("/mcp");
    let mut args = vec!["eras", url.as_str()];
    args.extend(SDK_MODES.iter().map(|(mode, _)| *mode));
    assert_sdk_eras(&crate::third_party::run_sdk_client(&python, &args, &[]));
    assert!(!gateway.stderr().contains("panicked"));
}

/// The same over stdio: the SDK starts `wasmgate serve` itself.
#[test]
fn the_python_sdk_client_speaks_either_era_over_stdio() {
    let Some(python) = crate::third_party::sdk_python() else {
        return;
    };
    let dir = crate::harness::TestDir::new("sdk-eras-stdio");
    let config =
        crate::conformance::fixture_config(&[]).replace("{dir}", dir.path.to_str().unwrap());
    let config = dir.write("gateway.toml", &config);
    let wasmgate = crate::harness::wasmgate();
    let mut args = vec![
        "eras-stdio",
        wasmgate.to_str().unwrap(),
        config.to_str().unwrap(),
    ];
    args.extend(SDK_MODES.iter().map(|(mode, _)| *mode));
    assert_sdk_eras(&crate::third_party::run_sdk_client(&python, &args, &[]));
}

/// The SDK `Client` modes tried, with the version each must end up speaking.
const SDK_MODES: [(&str, &str); 3] = [
    ("auto", VERSION),
    (VERSION, VERSION),
    ("legacy", "2025-11-25"),
];

/// What `sdk_client.py eras` saw, one object per mode of [`SDK_MODES`].
fn assert_sdk_eras(seen: &Value) {
    let seen = seen.as_array().expect("one object per mode");
    assert_eq!(seen.len(), SDK_MODES.len(), "{seen:?}");
    for (got, (mode, version)) in seen.iter().zip(SDK_MODES) {
        assert_eq!(got["mode"], mode, "{got}");
        assert_eq!(got["version"], version, "{got}");
        let tools = got["tools"].as_array().unwrap();
        assert!(tools.contains(&json!("test_simple_text")), "{got}");
        assert_eq!(got["call"], "This is a simple text response for testing.");
        assert_eq!(
            got["read"],
            "This is the content of the static text resource."
        );
        assert_eq!(got["prompt"], "This is a simple prompt for testing.");
        let progress: Vec<f64> = (got["progress"].as_array().unwrap().iter())
            .filter_map(Value::as_f64)
            .collect();
        assert_eq!(progress, [0.0, 50.0, 100.0], "{got}");
        assert_eq!(got["slow_is_error"], false, "{got}");
        assert_eq!(
            got["asking"],
            json!({
                "elicitation": format!("Hello, name-from-{mode}!"),
                "sampling": format!("Sampling result: sampled-in-{mode}"),
                "roots": "Found 1 root(s)",
                "multi_round": format!("Multi-round complete for name-from-{mode} who likes color-from-{mode}"),
                "prompt": format!("Prompt with context: context-from-{mode}"),
            }),
            "{got}"
        );
        let asked = [
            "elicitation",
            "sampling",
            "roots",
            "elicitation",
            "elicitation",
            "elicitation",
        ];
        assert_eq!(got["asked"], json!(asked), "{got}");
    }
}

/// A stdio server's log line names no call; a stateless request that set `logLevel` hears
/// it by the rule a server's requests go by (its call is the one in flight), one that set
/// none does not.
#[test]
fn a_stdio_servers_log_lines_reach_the_stateless_request_that_asked() {
    let gateway = HttpGateway::start(&crate::conformance::fixture_config(&[]), &[]);
    runtime().block_on(async {
        let mut conn = gateway.connect().await;
        let cases = [(Some("info"), 1), (Some("error"), 0), (None, 0)];
        assert_logs(&mut conn, "test_logging_tool", &cases).await;
    });
}

/// Calls `tool` statelessly at each `logLevel` of `cases` (none: no level), and checks how
/// many log lines its response carried.
async fn assert_logs(conn: &mut Conn, tool: &str, cases: &[(Option<&str>, usize)]) {
    for &(level, expected) in cases {
        let extra = level.map_or(
            json!({}),
            |l| json!({"io.modelcontextprotocol/logLevel": l}),
        );
        let call = request(
            2,
            "tools/call",
            json!({"name": tool, "arguments": {}, "_meta": meta(extra)}),
        );
        let reply = post(conn, "/mcp", &call, &[]).await;
        assert_eq!(
            reply.answer()["result"]["resultType"],
            "complete",
            "{}",
            reply.body
        );
        let streamed =
            (reply.headers.get("content-type")).is_some_and(|t| t.starts_with("text/event-stream"));
        let logged = match streamed {
            true => (reply.events().iter())
                .filter(|e| e["method"] == "notifications/message")
                .count(),
            false => 0,
        };
        assert_eq!(logged, expected, "logLevel {level:?}: {}", reply.body);
    }
}
