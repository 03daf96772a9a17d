//! The HTTP front's bounds and rules around a request, through the real binary, each
//! test performing the attack it guards against: batches and legacy posts past the
//! request bounds, one token taking every session, a session kept alive or its stream
//! taken by another caller, cross-site stream loads, token scopes, and what one client's
//! `logging/setLevel` and `roots/list_changed` reach.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{config, eventually};
use crate::http_client::{ACCEPT_BOTH, EventStream, HttpGateway, runtime};
use crate::http_front::with_example;

const WAIT: Duration = Duration::from_secs(20);

fn init(version: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {},
        "clientInfo": {"name": "bounds", "version": "1"}}})
}

/// A batch longer than `max_requests_per_session` is refused whole, on Streamable HTTP
/// and on legacy `/messages`; legacy posts beyond it are refused one by one.
#[test]
fn batches_and_legacy_posts_count_against_the_session() {
    let gateway = HttpGateway::start(&with_example("[http]\nmax_requests_per_session = 4"), &[]);
    runtime().block_on(async {
        // Streamable HTTP at a version that still has batches.
        let mut conn = gateway.connect().await;
        let reply = conn.post("/mcp", &[], &init("2025-03-26")).await;
        let id = reply.headers["mcp-session-id"].clone();
        let headers = [
            ("mcp-session-id", id.as_str()),
            ("mcp-protocol-version", "2025-03-26"),
        ];
        let batch: Vec<Value> = (1..=1000)
            .map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "tools/list"}))
            .collect();
        let reply = conn.post("/mcp", &headers, &Value::Array(batch)).await;
        assert_eq!(
            reply.status,
            400,
            "{}",
            &reply.body[..reply.body.len().min(300)]
        );
        assert!(
            reply.body.contains("max_requests_per_session"),
            "{}",
            reply.body
        );

        // Legacy: slow calls posted one by one; past the bound, each is refused.
        let get = [("accept", "text/event-stream")];
        let mut stream = EventStream::open(gateway.connect().await, "GET", "/sse", &get, "")
            .await
            .unwrap_or_else(|r| panic!("{} {}", r.status, r.body));
        let endpoint = stream.next(WAIT).await.and_then(|e| e.data).unwrap();
        let mut post = gateway.connect().await;
        let reply = post.post(&endpoint, &[], &init("2024-11-05")).await;
        assert_eq!(reply.status, 202);
        stream
            .next_message(WAIT)
            .await
            .expect("the initialize answer");
        for i in 1..=10 {
            let call = json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                              "params": {"name": "ex__slow", "arguments": {"ms": 1000}}});
            assert_eq!(post.post(&endpoint, &[], &call).await.status, 202);
        }
        let mut refused = 0;
        let mut answered = 0;
        while answered + refused < 10 {
            let (_, message) = stream.next_message(WAIT).await.expect("an answer");
            match message.get("error") {
                Some(error) => {
                    assert!(
                        error["message"]
                            .as_str()
                            .unwrap()
                            .contains("max_requests_per_session"),
                        "{message}"
                    );
                    refused += 1;
                }
                None => answered += 1,
            }
        }
        assert_eq!((answered, refused), (4, 6));
        // A legacy batch past the bound: one error.
        let batch: Vec<Value> = (100..200)
            .map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "ping"}))
            .collect();
        assert_eq!(
            post.post(&endpoint, &[], &Value::Array(batch)).await.status,
            202
        );
        let (_, message) = stream.next_message(WAIT).await.expect("the batch's error");
        assert_eq!(message["id"], Value::Null, "{message}");
        assert!(
            message["error"]["message"]
                .as_str()
                .unwrap()
                .contains("batch of 100"),
            "{message}"
        );
    });
}

/// `max_requests` bounds the calls in flight over every session together.
#[test]
fn requests_in_flight_are_bounded_over_all_sessions() {
    let gateway = HttpGateway::start(&with_example("[http]\nmax_requests = 3"), &[]);
    runtime().block_on(async {
        let slow = |id: u64| {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": "ex__slow", "arguments": {"ms": 6000}, "_meta": {"progressToken": id}}})
        };
        let post = [ACCEPT_BOTH, ("content-type", "application/json")];
        let first = gateway.session("/mcp", &[]).await;
        let second = gateway.session("/mcp", &[]).await;
        let mut opening = Vec::new();
        for (session, id) in [(&first, 1), (&first, 2), (&second, 3)] {
            let conn = gateway.connect().await;
            let body = slow(id).to_string();
            // The first progress event opens the answer: the call is then in flight.
            opening.push(async move { session.open_stream(conn, "POST", &post, &body).await });
        }
        let mut held = Vec::new();
        for opened in futures_util::future::join_all(opening).await {
            held.push(opened.unwrap_or_else(|r| panic!("{} {}", r.status, r.body)));
        }
        let mut late = gateway.session("/mcp", &[]).await;
        let refused = late.call("ex__echo", json!({"text": "x"})).await;
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("max_requests"), "{refused}");
        for stream in &mut held {
            while stream.next_message(WAIT).await.is_some() {}
        }
        let echo = late.call("ex__echo", json!({"text": "x"})).await;
        assert_eq!(echo["result"]["content"][0]["text"], "x", "room again: {echo}");
    });
}

/// One token cannot take every session slot: past `max_sessions_per_token` it gets 503
/// naming the bound, and other tokens still open sessions.
#[test]
fn one_token_cannot_take_every_session() {
    let extra = r#"
[http]
max_sessions_per_token = 2
tokens = [
  { name = "team", token = "shared-team-token-0123456789" },
  { name = "alice", token = "alice-own-token-0123456789" },
]
"#;
    let gateway = HttpGateway::start(&with_example(extra), &[]);
    runtime().block_on(async {
        let team = [("authorization", "Bearer shared-team-token-0123456789")];
        let _one = gateway.session("/mcp", &team).await;
        let _two = gateway.session("/mcp", &team).await;
        let mut conn = gateway.connect().await;
        let reply = conn.post("/mcp", &team, &init("2025-11-25")).await;
        assert_eq!(reply.status, 503, "{}", reply.body);
        assert!(
            reply.body.contains("max_sessions_per_token"),
            "{}",
            reply.body
        );
        let alice = [("authorization", "Bearer alice-own-token-0123456789")];
        let reply = conn.post("/mcp", &alice, &init("2025-11-25")).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
    });
}

/// Events never carry a session id (which would let whoever reads them use the session),
/// and a `Last-Event-ID` resume does not take a stream another connection still reads.
#[test]
fn a_session_cannot_be_taken_over() {
    let extra = r#"
[http]
tokens = [{ name = "ops", token = "operator-token-0123456789", scopes = ["mcp", "operator"] }]
"#;
    let gateway = HttpGateway::start(&with_example(extra), &[]);
    runtime().block_on(async {
        let auth = [("authorization", "Bearer operator-token-0123456789")];
        let mut victim = gateway.session("/mcp", &auth).await;
        let events = victim.call("get_events", json!({"limit": 1000})).await;
        let text = events["result"]["content"][0]["text"].as_str().unwrap();
        assert!(
            text.contains("session.opened"),
            "the operator reads them: {text}"
        );
        assert!(
            !text.contains(&victim.id),
            "a session id in the events: {text}"
        );

        let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
            "name": "ex__slow", "arguments": {"ms": 4500}, "_meta": {"progressToken": "t"}}});
        let post = [ACCEPT_BOTH, ("content-type", "application/json")];
        let mut reading = victim
            .open_stream(gateway.connect().await, "POST", &post, &call.to_string())
            .await
            .unwrap_or_else(|r| panic!("{} {}", r.status, r.body));
        let (event_id, _) = reading.next_message(WAIT).await.expect("progress");
        let event_id = event_id.expect("an event id");
        let resume = [
            ("accept", "text/event-stream"),
            ("last-event-id", event_id.as_str()),
        ];
        let taken = victim
            .open_stream(gateway.connect().await, "GET", &resume, "")
            .await;
        match taken {
            Err(reply) => assert_eq!(reply.status, 409, "{}", reply.body),
            Ok(_) => panic!("a resume took the stream its reader still reads"),
        }
        let mut answer = None;
        while let Some((_, message)) = reading.next_message(WAIT).await {
            if message["id"] == 5 {
                answer = Some(message);
            }
        }
        let answer = answer.expect("the reader keeps its answer");
        assert_eq!(
            answer["result"]["content"][0]["text"], "slept 4500 ms",
            "{answer}"
        );
    });
}

/// A caller that is not the session's owner gets 404 for it and does not keep it alive.
#[test]
fn another_caller_does_not_keep_a_session_alive() {
    let extra = r#"
[http]
session_idle_timeout = "1s"
tokens = [
  { name = "alice", token = "alice-own-token-0123456789" },
  { name = "mallory", token = "mallory-own-token-012345678" },
]
"#;
    let gateway = HttpGateway::start(&with_example(extra), &[]);
    runtime().block_on(async {
        let alice = [("authorization", "Bearer alice-own-token-0123456789")];
        let mut session = gateway.session("/mcp", &alice).await;
        let mut conn = gateway.connect().await;
        let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
        let headers = [
            ("authorization", "Bearer mallory-own-token-012345678"),
            ("mcp-session-id", session.id.as_str()),
        ];
        let until = tokio::time::Instant::now() + Duration::from_millis(2500);
        while tokio::time::Instant::now() < until {
            assert_eq!(conn.post("/mcp", &headers, &ping).await.status, 404);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let reply = session.send(&ping).await;
        assert_eq!(
            reply.status, 404,
            "kept alive by another caller: {}",
            reply.body
        );
    });
}

/// A `GET` that would open an event stream needs `Accept: text/event-stream`, and a
/// cross-site one its `Origin`: a page elsewhere that merely loads the URL opens nothing.
#[test]
fn cross_site_loads_open_no_session() {
    let gateway = HttpGateway::start(&with_example(""), &[]);
    runtime().block_on(async {
        let image = [("accept", "image/avif,image/webp,*/*")];
        let cross = [
            ("accept", "text/event-stream"),
            ("sec-fetch-site", "cross-site"),
        ];
        for (path, headers) in [
            ("/sse", &image[..]),
            ("/sse", &cross[..]),
            ("/mcp", &cross[..]),
        ] {
            let opened = EventStream::open(gateway.connect().await, "GET", path, headers, "").await;
            match opened {
                Ok(_) => panic!("{path} {headers:?} opened a stream"),
                Err(reply) => assert_eq!(reply.status, 403, "{}", reply.body),
            }
        }
        let ok = [("accept", "text/event-stream")];
        let stream = EventStream::open(gateway.connect().await, "GET", "/sse", &ok, "").await;
        assert!(stream.is_ok(), "a client asking for a stream gets one");
    });
}

/// A token limited to a profile opens a legacy session on `/sse/NAME` and posts its
/// messages to `/messages`; an operator-only token reads `/metrics` and nothing else; a
/// profile-limited token does not read `/metrics`; the operator's `gateway_status` shows
/// what the gateway runs.
#[test]
fn token_scopes_and_legacy_profiles() {
    let extra = r#"
[http]
tokens = [
  { name = "docs", token = "docs-only-token-0123456789", profiles = ["docs"] },
  { name = "ops", token = "operator-only-token-0123456", scopes = ["operator"] },
  { name = "admin", token = "admin-token-0123456789abc", scopes = ["mcp", "operator"] },
]

[profiles.docs]
tools = ["ex__echo"]
"#;
    let gateway = HttpGateway::start(&with_example(extra), &[]);
    runtime().block_on(async {
        let docs = ("authorization", "Bearer docs-only-token-0123456789");
        let get = [docs, ("accept", "text/event-stream")];
        let mut stream = EventStream::open(gateway.connect().await, "GET", "/sse/docs", &get, "")
            .await
            .unwrap_or_else(|r| panic!("{} {}", r.status, r.body));
        let endpoint = stream.next(WAIT).await.and_then(|e| e.data).unwrap();
        let mut conn = gateway.connect().await;
        let reply = conn.post(&endpoint, &[docs], &init("2024-11-05")).await;
        assert_eq!(reply.status, 202, "{}", reply.body);
        let (_, answer) = stream.next_message(WAIT).await.unwrap();
        assert!(answer.get("result").is_some(), "{answer}");

        let ops = ("authorization", "Bearer operator-only-token-0123456");
        let metrics = gateway
            .connect()
            .await
            .request("GET", "/metrics", &[ops], "")
            .await;
        assert_eq!(metrics.status, 200, "{}", metrics.body);
        let reply = gateway
            .connect()
            .await
            .post("/mcp", &[ops], &init("2025-11-25"))
            .await;
        assert_eq!(reply.status, 403, "{}", reply.body);
        let metrics = gateway
            .connect()
            .await
            .request("GET", "/metrics", &[docs], "")
            .await;
        assert_eq!(metrics.status, 403, "{}", metrics.body);

        let admin = [("authorization", "Bearer admin-token-0123456789abc")];
        let mut session = gateway.session("/mcp", &admin).await;
        let status = session.call("gateway_status", json!({})).await;
        let ex = &status["result"]["structuredContent"]["backends"]["ex"];
        assert!(ex["pid"].is_u64() && ex["command"].is_string(), "{status}");
        let mut plain = gateway.session("/mcp/docs", &[docs]).await;
        let status = plain.call("gateway_status", json!({})).await;
        let ex = &status["result"]["structuredContent"]["backends"]["ex"];
        assert!(
            ex.get("pid").is_none() && ex.get("command").is_none(),
            "{status}"
        );
    });
}

/// Servers `a` and `b`, profile `A` seeing only `a`.
fn a_and_b(extra: &str) -> String {
    let dir = std::path::Path::new("{dir}");
    let servers = config()
        .example("a", &["--name", "a"])
        .example("b", &["--name", "b"])
        .render(dir);
    format!("{servers}\n[profiles.A]\nservers = [\"a\"]\n{extra}\n")
}

/// A client's `logging/setLevel` sets the level of the servers it sees, not of the
/// others; its `roots/list_changed` reaches only the servers it sees.
#[test]
fn a_clients_level_and_roots_reach_only_its_servers() {
    let gateway = HttpGateway::start(&a_and_b(""), &[]);
    runtime().block_on(async {
        let mut a = gateway.session("/mcp/A", &[]).await;
        // Lists wait for the servers to start: from here on both take notifications.
        a.request("tools/list", json!({})).await;
        let set = a
            .request("logging/setLevel", json!({"level": "emergency"}))
            .await;
        assert!(set.get("result").is_some(), "{set}");
        let changed = json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"});
        assert_eq!(a.send(&changed).await.status, 202);

        // A client that sees b, reading its stream, where b's log lines come.
        let mut everyone = gateway.session("/mcp", &[]).await;
        let get = [("accept", "text/event-stream")];
        let mut stream = everyone
            .open_stream(gateway.connect().await, "GET", &get, "")
            .await
            .unwrap_or_else(|r| panic!("{} {}", r.status, r.body));
        let said = everyone
            .call(
                "b__log",
                json!({"level": "warning", "message": "b still logs"}),
            )
            .await;
        assert_eq!(said["result"]["content"][0]["text"], "logged", "{said}");
        let mut seen = Vec::new();
        while let Some((_, message)) = stream.next_message(Duration::from_secs(5)).await {
            let found = message["params"]["data"] == "b still logs";
            seen.push(message);
            if found {
                break;
            }
        }
        let text = serde_json::to_string(&seen).unwrap();
        assert!(
            text.contains("b still logs"),
            "b's level was changed by A: {text}"
        );
    });
    let stderr = eventually(WAIT, "a's roots/list_changed", || {
        let stderr = gateway.stderr();
        stderr
            .contains("mcp_example_server a: received notifications/roots/list_changed")
            .then_some(stderr)
    });
    assert!(
        !stderr.contains("mcp_example_server b: received notifications/roots/list_changed"),
        "{stderr}"
    );
}

/// A profile's resource glob `*` does not cross `/`, and `..` does not walk out of it.
#[test]
fn resource_globs_do_not_walk_out() {
    let extra = "[profiles.items]\nresources = [\"example://item/*\"]";
    let gateway = HttpGateway::start(&with_example(extra), &[]);
    runtime().block_on(async {
        let mut items = gateway.session("/mcp/items", &[]).await;
        let read = items
            .request("resources/read", json!({"uri": "example://item/7"}))
            .await;
        assert_eq!(read["result"]["contents"][0]["text"], "item 7", "{read}");
        for uri in [
            "example://item/../static/hello",
            "example://item/%2e%2e/static/hello",
        ] {
            let read = items.request("resources/read", json!({"uri": uri})).await;
            assert_eq!(read["error"]["code"], -32002, "{uri}: {read}");
            assert!(!read.to_string().contains("hello from"), "{uri}: {read}");
        }
    });
}

/// Answers nobody read are kept for a resume within a bound per session, however large
/// each is: of twenty 3 MiB answers whose streams were dropped, only the last few stay.
#[test]
fn answers_kept_for_resumption_are_bounded() {
    let gateway = HttpGateway::start(&with_example(""), &[]);
    runtime().block_on(async {
        let session = gateway.session("/mcp", &[]).await;
        let big = "x".repeat(3 << 20);
        let post = [ACCEPT_BOTH, ("content-type", "application/json")];
        let mut streams = Vec::new();
        for i in 0..20 {
            let call = json!({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call", "params": {
                "name": "ex__sample", "arguments": {"prompt": "p"}}});
            let mut stream = session
                .open_stream(gateway.connect().await, "POST", &post, &call.to_string())
                .await
                .unwrap_or_else(|r| panic!("{} {}", r.status, r.body));
            let (event_id, request) = stream.next_message(WAIT).await.expect("sampling");
            // The client goes away before the answer; its answer to the sampling request
            // makes the tool's result as large.
            drop(stream);
            let answer = json!({"jsonrpc": "2.0", "id": request["id"], "result": {
                "role": "assistant", "model": "m", "content": {"type": "text", "text": big}}});
            let mut other = session.on(gateway.connect().await);
            assert_eq!(other.send(&answer).await.status, 202);
            streams.push(event_id.expect("an event id"));
        }
        // Each call's answer is in (or dropped) once a later request has been answered.
        let mut last = session.on(gateway.connect().await);
        last.request("ping", json!({})).await;
        let mut kept = 0;
        for event_id in &streams {
            let resume = [
                ("accept", "text/event-stream"),
                ("last-event-id", event_id.as_str()),
            ];
            let Ok(mut stream) = session
                .open_stream(gateway.connect().await, "GET", &resume, "")
                .await
            else {
                continue;
            };
            if let Some((_, message)) = stream.next_message(Duration::from_secs(1)).await
                && message["result"]["content"][0]["text"]
                    .as_str()
                    .is_some_and(|t| t.len() == big.len())
            {
                kept += 1;
            }
        }
        assert!(kept >= 1, "the newest answer is kept for a resume");
        assert!(kept <= 3, "{kept} answers of 3 MiB kept for one session");
    });
}
