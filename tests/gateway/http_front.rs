//! The HTTP front through the real binary on 127.0.0.1:0: the official Python SDK client
//! over Streamable HTTP and over legacy SSE, the transport's session and header rules,
//! tokens, Origin and Host checks, profiles, resumption, keep-alive, and many sessions.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::config;
use crate::http_client::{ACCEPT_BOTH, Conn, HttpGateway, runtime, spawn};

const WAIT: Duration = Duration::from_secs(20);

/// A config with the example server as `ex` and `extra` appended.
pub(crate) fn with_example(extra: &str) -> String {
    let dir = std::path::Path::new("{dir}");
    format!("{}\n{extra}\n", config().example("ex", &[]).render(dir))
}

fn init_message() -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}})
}

/// The official Python SDK client over Streamable HTTP and over SSE sees the same whole
/// session as over stdio: lists, calls, progress, sampling, logging, errors, resources, prompts.
#[test]
fn the_python_sdk_client_sees_a_whole_session_over_http_and_sse() {
    let Some(python) = crate::third_party::sdk_python() else {
        return;
    };
    let gateway = HttpGateway::start(&with_example(""), &[]);
    for (kind, path) in [("http", "/mcp"), ("sse", "/sse")] {
        let seen = crate::third_party::run_sdk_client(&python, &[kind, &gateway.url(path)], &[]);
        crate::third_party::check_sdk_session(&seen);
    }
    let stderr = gateway.stderr();
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// HTTPS with `tls_cert` and `tls_key`: the SDK client's whole session, trusting the
/// gateway's certificate (a self-signed one made by openssl for the test).
#[test]
fn the_python_sdk_client_over_https() {
    let Some(python) = crate::third_party::sdk_python() else {
        return;
    };
    let certs = crate::harness::TestDir::new("tls");
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ])
        .args([
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ])
        .arg("-keyout")
        .arg(certs.join("key.pem"))
        .arg("-out")
        .arg(certs.join("cert.pem"))
        .output()
        .expect("openssl");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let extra = format!(
        "[http]\ntls_cert = {}\ntls_key = {}",
        crate::harness::toml_str(certs.join("cert.pem").to_str().unwrap()),
        crate::harness::toml_str(certs.join("key.pem").to_str().unwrap()),
    );
    let gateway = HttpGateway::start(&with_example(&extra), &[]);
    let url = format!("https://localhost:{}/mcp", gateway.addr.port());
    let cert = certs.join("cert.pem");
    let seen = crate::third_party::run_sdk_client(
        &python,
        &["http", &url],
        &[("SSL_CERT_FILE", cert.to_str().unwrap())],
    );
    crate::third_party::check_sdk_session(&seen);
}

/// The rules of Streamable HTTP: a session id after initialize (400 without, 404 for an
/// unknown or deleted one), MCP-Protocol-Version checked, Accept (406) and Content-Type
/// (415) checked, a body over max_body refused (413).
#[test]
fn streamable_http_session_and_header_rules() {
    let gateway = HttpGateway::start(&with_example("[http]\nmax_body = \"64KiB\""), &[]);
    runtime().block_on(async {
        let mut conn = gateway.connect().await;
        let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
        let reply = conn.post("/mcp", &[], &list).await;
        assert_eq!(reply.status, 400, "{}", reply.body);
        assert!(reply.body.contains("Mcp-Session-Id"), "{}", reply.body);
        let reply = conn
            .post("/mcp", &[("mcp-session-id", "not-a-session")], &list)
            .await;
        assert_eq!(reply.status, 404);

        let mut session = gateway.session("/mcp", &[]).await;
        let tools = session.request("tools/list", json!({})).await;
        assert!(tools["result"]["tools"].as_array().unwrap().len() > 2);
        let id = session.id.clone();
        // Unguessable: a UUID.
        assert_eq!(id.len(), 36, "{id}");

        let reply = conn
            .post(
                "/mcp",
                &[
                    ("mcp-session-id", &id),
                    ("mcp-protocol-version", "1999-01-01"),
                ],
                &list,
            )
            .await;
        assert_eq!(reply.status, 400);
        assert!(
            reply.body.contains("MCP-Protocol-Version"),
            "{}",
            reply.body
        );
        // Absent: taken as 2025-03-26 (the spec says so), which the gateway speaks.
        let reply = conn.post("/mcp", &[("mcp-session-id", &id)], &list).await;
        assert_eq!(reply.status, 200, "{}", reply.body);

        let body = list.to_string();
        let reply = conn
            .request(
                "POST",
                "/mcp",
                &[
                    ("accept", "application/json"),
                    ("content-type", "application/json"),
                    ("mcp-session-id", &id),
                ],
                &body,
            )
            .await;
        assert_eq!(reply.status, 406);
        let reply = conn
            .request(
                "POST",
                "/mcp",
                &[
                    ACCEPT_BOTH,
                    ("content-type", "text/plain"),
                    ("mcp-session-id", &id),
                ],
                &body,
            )
            .await;
        assert_eq!(reply.status, 415);
        let big = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "ex__echo", "arguments": {"text": "x".repeat(100_000)}}});
        let mut other = gateway.connect().await;
        let reply = other.post("/mcp", &[("mcp-session-id", &id)], &big).await;
        assert_eq!(reply.status, 413);

        // A JSON-RPC error in the body, and the session goes on.
        let reply = conn
            .post(
                "/mcp",
                &[("mcp-session-id", &id)],
                &json!({"jsonrpc": "2.0", "id": 3, "method": "no/such"}),
            )
            .await;
        assert_eq!(reply.json()["error"]["code"], -32601);
        let reply = conn
            .request(
                "POST",
                "/mcp",
                &[
                    ACCEPT_BOTH,
                    ("content-type", "application/json"),
                    ("mcp-session-id", &id),
                ],
                "{not json",
            )
            .await;
        assert_eq!(reply.status, 400);
        assert_eq!(reply.json()["error"]["code"], -32700);

        let reply = conn
            .request("DELETE", "/mcp", &[("mcp-session-id", &id)], "")
            .await;
        assert_eq!(reply.status, 200);
        let reply = conn.post("/mcp", &[("mcp-session-id", &id)], &list).await;
        assert_eq!(reply.status, 404);
    });
}

/// `max_sessions` answers 503 with Retry-After beyond it; an idle session expires (404).
#[test]
fn session_cap_and_idle_expiry() {
    let gateway = HttpGateway::start(
        &with_example("[http]\nmax_sessions = 2\nsession_idle_timeout = \"1s\""),
        &[],
    );
    runtime().block_on(async {
        let mut first = gateway.session("/mcp", &[]).await;
        let _second = gateway.session("/mcp", &[]).await;
        let mut conn = gateway.connect().await;
        let reply = conn.post("/mcp", &[], &init_message()).await;
        assert_eq!(reply.status, 503, "{}", reply.body);
        assert!(reply.headers.contains_key("retry-after"));
        tokio::time::sleep(Duration::from_millis(2500)).await;
        let reply = first
            .send(&json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}))
            .await;
        assert_eq!(reply.status, 404, "an idle session expires");
        // Room again.
        let reply = conn.post("/mcp", &[], &init_message()).await;
        assert_eq!(reply.status, 200);
    });
}

/// Bearer tokens (401 with WWW-Authenticate), Origin and Host allow-lists (403), a token
/// limited to a profile, and the token's name (never the token) on `tool.called` events.
#[test]
fn tokens_origin_and_host_are_checked() {
    let extra = r#"
[http]
tokens = [
  { name = "ci", token = "${CI_TOKEN}" },
  { name = "docs-only", token = "only-docs-token-0123456789", profiles = ["docs"] },
]

[profiles.docs]
tools = ["ex__echo"]
"#;
    let token = "a-long-secret-token-0123456789";
    let gateway = HttpGateway::start(&with_example(extra), &[("CI_TOKEN", token)]);
    runtime().block_on(async {
        let mut conn = gateway.connect().await;
        let bearer = format!("Bearer {token}");
        let auth = ("authorization", bearer.as_str());
        let wrong = ("authorization", "Bearer wrong-token-0123456789");
        // (headers, expected status) for an initialize.
        let cases: [(&[(&str, &str)], u16); 6] = [
            (&[], 401),
            (&[wrong], 401),
            (&[auth, ("origin", "https://evil.example")], 403),
            (&[auth, ("host", "evil.example:80")], 403),
            (&[auth, ("origin", "http://localhost:3000")], 200),
            (&[auth], 200),
        ];
        for (headers, status) in cases {
            let reply = conn.post("/mcp", headers, &init_message()).await;
            assert_eq!(reply.status, status, "{headers:?}: {}", reply.body);
            if status == 401 {
                assert!(reply.headers["www-authenticate"].starts_with("Bearer"));
            }
        }

        let mut session = gateway.session("/mcp", &[auth]).await;
        let echo = session.call("ex__echo", json!({"text": "hi"})).await;
        assert_eq!(echo["result"]["content"][0]["text"], "hi");
        let events = session
            .call("get_events", json!({"event_type": "tool.called"}))
            .await;
        let text = events["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_string();
        let events: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(events[0]["token"], "ci", "{text}");
        assert!(!text.contains(token));

        let docs = "Bearer only-docs-token-0123456789";
        let reply = conn
            .post("/mcp", &[("authorization", docs)], &init_message())
            .await;
        assert_eq!(
            reply.status, 403,
            "a token limited to a profile: {}",
            reply.body
        );
        let mut limited = gateway
            .session("/mcp/docs", &[("authorization", docs)])
            .await;
        let tools = limited.request("tools/list", json!({})).await;
        assert_eq!(tools["result"]["tools"].as_array().unwrap().len(), 1);
    });
    assert!(
        !gateway.stderr().contains(token),
        "the token is never logged"
    );
}

/// A profile's session sees its subset in every list; a call outside it is an unknown
/// tool; an unknown profile is 400 (a balancer sends a 404 on to another replica).
#[test]
fn profiles_serve_a_subset() {
    let extra = r#"
[profiles.math]
tools = ["ex__add", "gateway_status"]
prompts = []
"#;
    let gateway = HttpGateway::start(&with_example(extra), &[]);
    runtime().block_on(async {
        let mut math = gateway.session("/mcp/math", &[]).await;
        let tools = math.request("tools/list", json!({})).await;
        let names: Vec<&str> = tools["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["gateway_status", "ex__add"]);
        let prompts = math.request("prompts/list", json!({})).await;
        assert_eq!(prompts["result"]["prompts"], json!([]));
        let sum = math.call("ex__add", json!({"a": 2, "b": 3})).await;
        assert_eq!(sum["result"]["content"][0]["text"], "5");
        let hidden = math.call("ex__echo", json!({"text": "x"})).await;
        assert_eq!(hidden["error"]["code"], -32602);
        assert!(
            hidden["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("Unknown tool"),
            "{hidden}"
        );
        // The session belongs to its profile's path.
        let mut conn = gateway.connect().await;
        let reply = conn
            .post(
                "/mcp",
                &[("mcp-session-id", &math.id)],
                &json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
            )
            .await;
        assert_eq!(reply.status, 404);
        let reply = conn.post("/mcp/nope", &[], &init_message()).await;
        assert_eq!(reply.status, 400);
        assert!(reply.body.contains("no profile `nope`"), "{}", reply.body);
        let mut all = gateway.session("/mcp", &[]).await;
        let tools = all.request("tools/list", json!({})).await;
        assert!(tools["result"]["tools"].as_array().unwrap().len() > 10);
    });
}

/// `ex__slow` for `ms` with a progress token, answered on its own event stream, once its
/// first progress arrived: the call has reached the server. The stream and that event's id.
async fn slow_call_in_flight(
    gateway: &HttpGateway,
    session: &crate::http_client::McpSession,
    id: u64,
    ms: u64,
) -> (crate::http_client::EventStream, String) {
    let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "ex__slow", "arguments": {"ms": ms}, "_meta": {"progressToken": "t"}}});
    let post = [ACCEPT_BOTH, ("content-type", "application/json")];
    let mut stream = session
        .open_stream(gateway.connect().await, "POST", &post, &call.to_string())
        .await
        .unwrap_or_else(|r| panic!("a stream: {} {}", r.status, r.body));
    let (event, first) = stream.next_message(WAIT).await.expect("progress");
    assert_eq!(first["method"], "notifications/progress", "{first}");
    (stream, event.expect("events carry ids"))
}

/// A call that sends progress is answered on an event stream; a client that loses the
/// stream resumes it with Last-Event-ID and gets the rest, answer included.
#[test]
fn a_dropped_request_stream_resumes_with_last_event_id() {
    let gateway = HttpGateway::start(&with_example(""), &[]);
    runtime().block_on(async {
        let session = gateway.session("/mcp", &[]).await;
        let (stream, id) = slow_call_in_flight(&gateway, &session, 5, 600).await;
        drop(stream);

        let get = [("accept", "text/event-stream"), ("last-event-id", &id)];
        let mut resumed = session
            .open_stream(gateway.connect().await, "GET", &get, "")
            .await
            .unwrap_or_else(|r| panic!("resumed: {} {}", r.status, r.body));
        let mut rest = Vec::new();
        while let Some((_, message)) = resumed.next_message(WAIT).await {
            rest.push(message);
        }
        let answer = rest.pop().expect("the answer");
        assert_eq!(answer["id"], 5, "{answer}");
        assert_eq!(answer["result"]["content"][0]["text"], "slept 600 ms");
        assert!(
            rest.iter().all(|m| m["method"] == "notifications/progress"),
            "{rest:?}"
        );
        assert_eq!(
            rest.len(),
            2,
            "the progress not seen before the drop: {rest:?}"
        );
    });
}

/// The session's GET stream carries what belongs to no request (here `list_changed`)
/// and keep-alive comments while idle; a second GET is refused while one is open.
#[test]
fn the_session_stream_carries_notifications_and_keep_alives() {
    let gateway = HttpGateway::start(&with_example("[http]\nkeep_alive = \"200ms\""), &[]);
    runtime().block_on(async {
        let mut session = gateway.session("/mcp", &[]).await;
        session.request("tools/list", json!({})).await;
        let get = [("accept", "text/event-stream")];
        let mut stream = session
            .open_stream(gateway.connect().await, "GET", &get, "")
            .await
            .unwrap_or_else(|r| panic!("{} {}", r.status, r.body));
        let comment = stream
            .next(Duration::from_secs(3))
            .await
            .expect("a keep-alive");
        assert!(comment.comment, "{comment:?}");
        let refused = session
            .open_stream(gateway.connect().await, "GET", &get, "")
            .await;
        assert_eq!(refused.err().map(|r| r.status), Some(409));
        // The example server announces a change of its tools; the gateway passes it on.
        session.call("ex__notify_changed", json!({})).await;
        let (_, changed) = stream.next_message(WAIT).await.expect("list_changed");
        assert_eq!(changed["method"], "notifications/tools/list_changed");
    });
}

/// Serving a non-loopback address without a token refuses to start.
#[test]
fn a_public_address_without_a_token_is_refused() {
    let dir = crate::harness::TestDir::new("http-public");
    let path = dir.write("gateway.toml", "[gateway]\n");
    let (mut child, addr) = spawn(&path, &dir, "0.0.0.0:0", &[]);
    assert!(addr.is_none());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1));
    let stderr = std::fs::read_to_string(dir.join("gateway.stderr")).unwrap();
    assert!(stderr.contains("without a token"), "{stderr}");
}

/// Health, readiness and Prometheus metrics.
#[test]
fn health_readiness_and_metrics() {
    let gateway = HttpGateway::start(&with_example(""), &[]);
    runtime().block_on(async {
        let mut session = gateway.session("/mcp", &[]).await;
        session.call("ex__echo", json!({"text": "m"})).await;
        let mut conn = gateway.connect().await;
        let health = conn.request("GET", "/healthz", &[], "").await;
        assert_eq!(health.status, 200);
        let ready = conn.request("GET", "/readyz", &[], "").await;
        assert_eq!(ready.status, 200, "{}", ready.body);
        let metrics = conn.request("GET", "/metrics", &[], "").await;
        assert_eq!(metrics.status, 200);
        for needle in [
            r#"wasmgate_tool_calls_total{tool="ex__echo",backend="ex",outcome="success"} 1"#,
            "wasmgate_sessions_open 1",
            r#"wasmgate_http_requests_total{method="POST",path="/mcp",status="200"}"#,
            r#"wasmgate_backend_state{backend="ex",state="ready"} 1"#,
            "wasmgate_tool_call_seconds_bucket",
        ] {
            assert!(
                metrics.body.contains(needle),
                "{needle} in\n{}",
                metrics.body
            );
        }
        let status = session.call("gateway_status", json!({})).await;
        let status: Value =
            serde_json::from_str(status["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(status["http"]["sessions"], 1);
        assert_eq!(status["http"]["listen"], gateway.addr.to_string());
    });
}

/// 1,000 sessions at once, each calling a server tool and a plugin-free built-in: every
/// answer arrives and is its own.
#[test]
fn a_thousand_concurrent_sessions_each_get_their_answers() {
    let gateway = HttpGateway::start(&with_example("[http]\nmax_sessions = 2000"), &[]);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut tasks = Vec::new();
        for n in 0..1000 {
            let addr = gateway.addr;
            tasks.push(tokio::spawn(async move {
                let mut conn = Conn::open(addr).await;
                let reply = conn.post("/mcp", &[], &init_message()).await;
                assert_eq!(reply.status, 200, "{}", reply.body);
                let id = reply.headers["mcp-session-id"].clone();
                for i in 0..3 {
                    let text = format!("{n}-{i}");
                    let call = json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
                        "name": "ex__echo", "arguments": {"text": text}}});
                    let reply = conn.post("/mcp", &[("mcp-session-id", &id)], &call).await;
                    assert_eq!(reply.status, 200, "{}", reply.body);
                    assert_eq!(reply.answer()["result"]["content"][0]["text"], text);
                }
                conn
            }));
        }
        let mut open = Vec::new();
        for task in tasks {
            open.push(task.await.expect("a session's task"));
        }
        assert_eq!(open.len(), 1000);
    });
}

/// A client that opens its session's stream and never reads it does not slow others.
#[test]
fn a_client_that_never_reads_does_not_hold_up_others() {
    let gateway = HttpGateway::start(&with_example(""), &[]);
    runtime().block_on(async {
        let stalled = gateway.session("/mcp", &[]).await;
        let get = [("accept", "text/event-stream")];
        let _never_read = stalled
            .open_stream(gateway.connect().await, "GET", &get, "")
            .await
            .ok();
        let mut sender = gateway.session("/mcp", &[]).await;
        // The server's log messages go to every session, the stalled one's stream included:
        // 20 MB of them, more than its connection and its waiting events hold.
        let line = "x".repeat(20_000);
        for _ in 0..1_000 {
            let logged = sender
                .call(
                    "ex__log",
                    json!({"level": "error", "message": line, "ignore_level": true}),
                )
                .await;
            assert!(logged["result"].is_object(), "{logged}");
        }
        let mut other = gateway.session("/mcp", &[]).await;
        let started = std::time::Instant::now();
        let echo = other.call("ex__echo", json!({"text": "fine"})).await;
        assert_eq!(echo["result"]["content"][0]["text"], "fine");
        assert!(started.elapsed() < Duration::from_secs(5));
        // The stalled stream's backlog was bounded: what did not fit was dropped, and counted.
        let metrics = other.conn.request("GET", "/metrics", &[], "").await;
        let dropped = metrics
            .body
            .lines()
            .find_map(|l| l.strip_prefix("wasmgate_client_messages_dropped_total "))
            .and_then(|n| n.trim().parse::<u64>().ok())
            .unwrap_or(0);
        assert!(dropped > 0, "{}", metrics.body);
    });
}

/// SIGTERM: a call in flight still gets its answer (within `shutdown_grace`), an open
/// session stream ends, and the process exits 0.
#[test]
fn sigterm_lets_calls_in_flight_finish() {
    let mut gateway = HttpGateway::start(&with_example(""), &[]);
    let runtime = runtime();
    let (answer, stream_ended) = runtime.block_on(async {
        let session = gateway.session("/mcp", &[]).await;
        let get = [("accept", "text/event-stream")];
        let mut stream = session
            .open_stream(gateway.connect().await, "GET", &get, "")
            .await
            .unwrap_or_else(|r| panic!("{} {}", r.status, r.body));
        let (mut call, _) = slow_call_in_flight(&gateway, &session, 9, 900).await;
        let stopped = tokio::task::spawn_blocking(move || {
            let status = gateway.terminate(Duration::from_secs(10));
            (gateway, status)
        });
        let mut answer = Value::Null;
        while let Some((_, message)) = call.next_message(WAIT).await {
            answer = message;
        }
        let ended = stream.next_message(WAIT).await.is_none();
        let (returned, status) = stopped.await.unwrap();
        gateway = returned;
        assert_eq!(
            status.and_then(|s| s.code()),
            Some(0),
            "{}",
            gateway.stderr()
        );
        (answer, ended)
    });
    assert_eq!(
        answer["result"]["content"][0]["text"], "slept 900 ms",
        "{answer}"
    );
    assert!(stream_ended, "the session stream ends at shutdown");
}

/// A `GET /mcp` without a session id that accepts an event stream opens a legacy
/// HTTP+SSE session, as clients written against the gateway reference expect.
#[test]
fn a_get_on_mcp_without_a_session_opens_a_legacy_stream() {
    let gateway = HttpGateway::start(&with_example(""), &[]);
    runtime().block_on(async {
        let get = [("accept", "text/event-stream")];
        let mut stream =
            crate::http_client::EventStream::open(gateway.connect().await, "GET", "/mcp", &get, "")
                .await
                .unwrap_or_else(|r| panic!("{} {}", r.status, r.body));
        let endpoint = stream.next(WAIT).await.expect("the endpoint event");
        let path = endpoint.data.expect("a path");
        assert!(path.starts_with("/messages?sessionId="), "{path}");
        let mut conn = gateway.connect().await;
        let reply = conn.post(&path, &[], &init_message()).await;
        assert_eq!(reply.status, 202, "{}", reply.body);
        let (_, answer) = stream
            .next_message(WAIT)
            .await
            .expect("the answer on the stream");
        assert_eq!(
            answer["result"]["serverInfo"]["name"], "wasmgate",
            "{answer}"
        );
    });
}

/// A server's sampling request during a call reaches the client that made the call, on
/// that call's own stream, not the newest session; the client's answer, posted apart,
/// goes back to the server.
#[test]
fn sampling_goes_to_the_caller_on_its_calls_stream() {
    let gateway = HttpGateway::start(&with_example(""), &[]);
    runtime().block_on(async {
        let caller = gateway.session("/mcp", &[]).await;
        // A newer session that also declared sampling, reading its own stream.
        let bystander = gateway.session("/mcp", &[]).await;
        let get = [("accept", "text/event-stream")];
        let mut bystander_stream = bystander
            .open_stream(gateway.connect().await, "GET", &get, "")
            .await
            .unwrap_or_else(|r| panic!("{} {}", r.status, r.body));
        let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
            "name": "ex__sample", "arguments": {"prompt": "hi"}}});
        let post = [ACCEPT_BOTH, ("content-type", "application/json")];
        let mut stream = caller
            .open_stream(gateway.connect().await, "POST", &post, &call.to_string())
            .await
            .unwrap_or_else(|r| panic!("a stream: {} {}", r.status, r.body));
        let (_, request) = stream
            .next_message(WAIT)
            .await
            .expect("the sampling request");
        assert_eq!(request["method"], "sampling/createMessage", "{request}");
        let answer = json!({"jsonrpc": "2.0", "id": request["id"], "result": {
            "role": "assistant", "model": "m", "content": {"type": "text", "text": "sampled"}}});
        let mut other = gateway.connect().await;
        let headers = [
            ("mcp-session-id", caller.id.as_str()),
            ("mcp-protocol-version", "2025-11-25"),
        ];
        let reply = other.post("/mcp", &headers, &answer).await;
        assert_eq!(reply.status, 202, "{}", reply.body);
        let (_, result) = stream.next_message(WAIT).await.expect("the call's answer");
        assert_eq!(result["id"], 7, "{result}");
        assert!(
            result["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("sampled"),
            "{result}"
        );
        let stray = bystander_stream
            .next_message(Duration::from_millis(300))
            .await;
        assert!(stray.is_none(), "the other session got {stray:?}");
    });
}

/// A profile's session hears `list_changed` only when its own view changed: a tool
/// outside the profile appearing changes nothing it can see.
#[test]
fn list_changed_reaches_a_profile_only_when_its_view_changed() {
    let gateway = HttpGateway::start(&with_example("[profiles.math]\ntools = [\"ex__add\"]"), &[]);
    runtime().block_on(async {
        let mut all = gateway.session("/mcp", &[]).await;
        let mut math = gateway.session("/mcp/math", &[]).await;
        all.request("tools/list", json!({})).await;
        math.request("tools/list", json!({})).await;
        let get = [("accept", "text/event-stream")];
        let mut all_stream = all
            .open_stream(gateway.connect().await, "GET", &get, "")
            .await
            .unwrap_or_else(|r| panic!("{} {}", r.status, r.body));
        let mut math_stream = math
            .open_stream(gateway.connect().await, "GET", &get, "")
            .await
            .unwrap_or_else(|r| panic!("{} {}", r.status, r.body));
        // The example server adds `late_tool`: `ex__late_tool`, outside the profile.
        all.call("ex__notify_changed", json!({})).await;
        let (_, changed) = all_stream.next_message(WAIT).await.expect("list_changed");
        assert_eq!(changed["method"], "notifications/tools/list_changed");
        let heard = math_stream.next_message(Duration::from_millis(500)).await;
        assert!(
            heard.is_none(),
            "the profile's view did not change: {heard:?}"
        );
        let tools = math.request("tools/list", json!({})).await;
        assert_eq!(tools["result"]["tools"].as_array().unwrap().len(), 1);
    });
}

/// `DELETE` cancels the session's requests in flight: the server is told.
#[test]
fn delete_cancels_the_sessions_requests_in_flight() {
    let gateway = HttpGateway::start(&with_example(""), &[]);
    runtime().block_on(async {
        let session = gateway.session("/mcp", &[]).await;
        let id = session.id.clone();
        let (_call, _) = slow_call_in_flight(&gateway, &session, 3, 30_000).await;
        let mut conn = gateway.connect().await;
        let reply = conn
            .request("DELETE", "/mcp", &[("mcp-session-id", &id)], "")
            .await;
        assert_eq!(reply.status, 200);
        let deadline = std::time::Instant::now() + WAIT;
        while !gateway
            .stderr()
            .contains("received notifications/cancelled")
        {
            assert!(std::time::Instant::now() < deadline, "{}", gateway.stderr());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
}
