//! OpenTelemetry traces: the real binary over HTTP exports its spans over OTLP/HTTP to a
//! receiver in this test, which decodes the official protobuf messages. One `tools/call`
//! goes through a middleware to a remote server (an MCP server in this test that records
//! the trace context it is given), another to a 0.2 plugin that reads its own.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message;
use serde_json::{Value, json};

use crate::harness::{TestDir, config, eventually, fixture_path, toml_str};
use crate::http_client::{HttpGateway, McpSession};

/// The client's trace, continued from the HTTP `traceparent` header.
const HEADER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const HEADER_PARENT: &str = "00f067aa0ba902b7";
/// The client's trace, continued from `params._meta.traceparent` (SEP-414).
const META_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const META_PARENT: &str = "b7ad6b7169203331";
/// The trace of a batch's `traceparent` header (a 2025-03-26 session).
const BATCH_TRACE: &str = "5c0bd5a4a1e04d2f9a4c1f3e2d7b6a90";
const BATCH_PARENT: &str = "3a1b2c3d4e5f6071";

const WAIT: Duration = Duration::from_secs(30);

/// What the receiver and the recording server got.
#[derive(Default)]
struct Seen {
    spans: Mutex<Vec<Span>>,
    /// Per `tools/call` the MCP server got: its `traceparent` header and
    /// `_meta.traceparent`.
    calls: Mutex<Vec<(Option<String>, Option<String>)>>,
}

async fn receive_traces(State(seen): State<Arc<Seen>>, body: Bytes) -> Response {
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let spans = request
        .resource_spans
        .into_iter()
        .flat_map(|r| r.scope_spans)
        .flat_map(|s| s.spans);
    seen.spans.lock().unwrap().extend(spans);
    // An empty ExportTraceServiceResponse.
    (
        [(header::CONTENT_TYPE, "application/x-protobuf")],
        Vec::new(),
    )
        .into_response()
}

/// A Streamable HTTP MCP server with one tool, `echo`, that writes down the trace
/// context of each call.
async fn mcp_server(State(seen): State<Arc<Seen>>, headers: HeaderMap, body: Bytes) -> Response {
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let Some(id) = message.get("id").cloned() else {
        return StatusCode::ACCEPTED.into_response();
    };
    let params = &message["params"];
    let result = match message["method"].as_str() {
        Some("initialize") => json!({
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "recorder", "version": "1"},
        }),
        Some("tools/list") => {
            json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]})
        }
        Some("tools/call") => {
            let header = headers
                .get("traceparent")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let meta = params["_meta"]["traceparent"].as_str().map(str::to_string);
            seen.calls.lock().unwrap().push((header, meta));
            json!({"content": [{"type": "text", "text": params["arguments"]["text"]}]})
        }
        _ => json!({}),
    };
    let answer = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
    ([(header::CONTENT_TYPE, "application/json")], answer).into_response()
}

/// The receiver (`/v1/traces`) and the MCP server (`/mcp`) on one loopback port.
async fn serve(seen: Arc<Seen>) -> SocketAddr {
    let app = Router::new()
        .route("/v1/traces", post(receive_traces))
        .route("/mcp", post(mcp_server))
        .with_state(seen);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// A gateway with the recording server as `up`, the `redact` middleware and the
/// `v2demo` plugin; traced to `addr` when `traced`.
fn gateway(addr: SocketAddr, traced: bool) -> HttpGateway {
    let dir = TestDir::new("tracing");
    let config = config().remote("up", &format!("http://{addr}/mcp"), &[]);
    let mut text = config.render(&dir.path);
    // The plugin by its path: with a `[plugins] dir`, `use = "redact"` would look there.
    let plugin = toml_str(fixture_path("v2demo").to_str().unwrap());
    let cache = toml_str(dir.join("cache").to_str().unwrap());
    text.push_str(&format!(
        "\n[plugins]\ncache_dir = {cache}\n\n[plugins.v2demo]\npath = {plugin}\n"
    ));
    text.push_str("\n[[middleware]]\nuse = \"redact\"\n");
    if traced {
        text.push_str(&format!(
            "\n[telemetry]\notlp_endpoint = \"http://{addr}\"\n"
        ));
    }
    // Exports every 50 ms, not every 5 s.
    HttpGateway::start_in(dir, &text, &[("OTEL_BSP_SCHEDULE_DELAY", "50")])
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attribute(span: &Span, key: &str) -> Option<String> {
    let value = span.attributes.iter().find(|a| a.key == key)?;
    match value.value.as_ref()?.value.as_ref()? {
        any_value::Value::StringValue(s) => Some(s.clone()),
        any_value::Value::IntValue(i) => Some(i.to_string()),
        other => Some(format!("{other:?}")),
    }
}

/// The spans of `trace` once the request `name` has ended well: its span ends after its
/// children's, so theirs are there too.
fn trace_with(seen: &Seen, trace: &str, name: &str) -> Vec<Span> {
    eventually(WAIT, &format!("the span `{name}` in trace {trace}"), || {
        let spans = seen.spans.lock().unwrap();
        let of_trace: Vec<Span> = (spans.iter())
            .filter(|s| hex(&s.trace_id) == trace)
            .cloned()
            .collect();
        let ended =
            |s: &Span| s.name == name && attribute(s, "outcome").as_deref() == Some("success");
        of_trace.iter().any(ended).then_some(of_trace)
    })
}

fn named<'s>(spans: &'s [Span], name: &str) -> &'s Span {
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    (spans.iter().find(|s| s.name == name))
        .unwrap_or_else(|| panic!("no span `{name}` among {names:?}"))
}

/// The span named `name` whose parent is `parent`.
fn child<'s>(spans: &'s [Span], parent: &Span, name: &str) -> &'s Span {
    (spans
        .iter()
        .find(|s| s.name == name && s.parent_span_id == parent.span_id))
    .unwrap_or_else(|| panic!("no span `{name}` under `{}`", parent.name))
}

/// A `tools/call` with `params`, once the middleware has loaded (a call before is refused).
async fn call_once_loaded(session: &mut McpSession, params: Value) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let answer = session.request("tools/call", params.clone()).await;
        let loading = answer["error"]["data"]["middleware"] == "redact";
        if !loading || tokio::time::Instant::now() > deadline {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The span that is `span`'s parent.
fn parent<'s>(spans: &'s [Span], span: &Span) -> &'s Span {
    (spans.iter().find(|s| s.span_id == span.parent_span_id))
        .unwrap_or_else(|| panic!("no parent of `{}`", span.name))
}

fn echo() -> Value {
    json!({"name": "up__echo", "arguments": {"text": "hi"}})
}

fn text(answer: &Value) -> String {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {answer}"))
        .to_string()
}

/// The receiver and recording server, and a gateway (traced when `traced`) in front.
fn start(traced: bool) -> (tokio::runtime::Runtime, Arc<Seen>, HttpGateway) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let seen = Arc::new(Seen::default());
    let addr = runtime.block_on(serve(seen.clone()));
    (runtime, seen, gateway(addr, traced))
}

/// A session whose requests carry the client's `traceparent` header, after `up__echo`.
async fn echoed(gateway: &HttpGateway) -> McpSession {
    let traceparent = format!("00-{HEADER_TRACE}-{HEADER_PARENT}-01");
    let mut session = gateway
        .session("/mcp", &[("traceparent", &traceparent)])
        .await;
    let listed = session.request("tools/list", json!({})).await;
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    let echoed = call_once_loaded(&mut session, echo()).await;
    assert_eq!(text(&echoed), "hi", "{echoed}");
    session
}

#[test]
fn a_call_is_traced_through_middleware_to_a_server_and_a_plugin() {
    let (runtime, seen, gateway) = start(true);
    runtime.block_on(async {
        let mut session = echoed(&gateway).await;

        // A trace named in `_meta` wins over the header.
        let meta = json!({"traceparent": format!("00-{META_TRACE}-{META_PARENT}-01")});
        let params = json!({"name": "v2demo__traceparent", "arguments": {}, "_meta": meta});
        let plugin = call_once_loaded(&mut session, params).await;
        let plugin_saw = text(&plugin);

        // The event of the call carries the trace's id.
        let events = session
            .call("get_events", json!({"trace_id": HEADER_TRACE}))
            .await;
        assert!(text(&events).contains("up__echo"), "{events}");

        // Through the middleware to the remote server.
        let spans = trace_with(&seen, HEADER_TRACE, "tools/call up__echo");
        // Found from the backend's span up: calls refused while the middleware loaded
        // have spans of their own in this trace.
        let backend = named(&spans, "tools/call up");
        assert_eq!(backend.kind, SpanKind::Client as i32);
        assert_eq!(attribute(backend, "wasmgate.server").as_deref(), Some("up"));
        let route = parent(&spans, backend);
        assert_eq!(route.name, "route");
        let request = parent(&spans, route);
        assert_eq!(request.name, "tools/call up__echo");
        assert_eq!(request.kind, SpanKind::Server as i32);
        assert_eq!(hex(&request.parent_span_id), HEADER_PARENT);
        // The session's `initialize` came with the header too.
        let initialize = named(&spans, "initialize");
        assert_eq!(hex(&initialize.parent_span_id), HEADER_PARENT);
        assert_eq!(attribute(initialize, "outcome").as_deref(), Some("success"));
        assert_eq!(
            attribute(request, "mcp.method.name").as_deref(),
            Some("tools/call")
        );
        assert_eq!(
            attribute(request, "gen_ai.tool.name").as_deref(),
            Some("up__echo")
        );
        assert_eq!(attribute(request, "outcome").as_deref(), Some("success"));
        assert!(attribute(request, "mcp.protocol.version").is_some());
        let hooks: Vec<&Span> = (spans.iter())
            .filter(|s| s.name.starts_with("middleware redact "))
            .filter(|s| s.parent_span_id == route.span_id)
            .collect();
        assert!(
            !hooks.is_empty(),
            "no middleware span under the call's route"
        );

        // The server got the backend span as its parent, in `_meta` and in the header.
        let passed = format!("00-{HEADER_TRACE}-{}-01", hex(&backend.span_id));
        let calls = seen.calls.lock().unwrap().clone();
        assert_eq!(calls, vec![(Some(passed.clone()), Some(passed))]);

        // The plugin's call, continuing `_meta.traceparent`.
        let spans = trace_with(&seen, META_TRACE, "tools/call v2demo__traceparent");
        let request = named(&spans, "tools/call v2demo__traceparent");
        assert_eq!(hex(&request.parent_span_id), META_PARENT);
        let route = child(&spans, request, "route");
        let call = child(&spans, route, "plugin v2demo traceparent");
        // What the plugin read through `host.traceparent`: its call's span.
        assert_eq!(
            plugin_saw,
            format!("00-{META_TRACE}-{}-01", hex(&call.span_id))
        );
        // The instance made for it (the plugin keeps one per session) is a span of its
        // own, linked to the call.
        let made = eventually(WAIT, "an instantiation span linked to the call", || {
            let spans = seen.spans.lock().unwrap();
            (spans.iter())
                .find(|s| {
                    s.name == "plugin instantiate"
                        && s.links.iter().any(|l| l.span_id == call.span_id)
                })
                .cloned()
        });
        assert_ne!(hex(&made.trace_id), META_TRACE);

        // Each member of a batch continues the batch's header, on its own task.
        let members = batch_of_two_echoes(&gateway, &seen).await;
        assert_eq!(members.len(), 2, "{members:?}");
        for member in &members {
            assert_eq!(hex(&member.parent_span_id), BATCH_PARENT);
        }
    });
}

/// Sends a batch of two `up__echo` calls in a 2025-03-26 session, the batch's POST
/// carrying a `traceparent` header; the calls' spans once both have ended.
async fn batch_of_two_echoes(gateway: &HttpGateway, seen: &Seen) -> Vec<Span> {
    let traceparent = format!("00-{BATCH_TRACE}-{BATCH_PARENT}-01");
    let mut conn = gateway.connect().await;
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {},
        "clientInfo": {"name": "batching", "version": "1"}}});
    let reply = conn.post("/mcp", &[], &init).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let id = reply.headers["mcp-session-id"].clone();
    let headers = [
        ("mcp-session-id", id.as_str()),
        ("mcp-protocol-version", "2025-03-26"),
    ];
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(conn.post("/mcp", &headers, &initialized).await.status, 202);
    let call =
        |id: u64| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": echo()});
    let traced = [
        headers[0],
        headers[1],
        ("traceparent", traceparent.as_str()),
    ];
    let reply = conn.post("/mcp", &traced, &json!([call(1), call(2)])).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let answers = reply.json();
    assert_eq!(answers.as_array().map(Vec::len), Some(2), "{answers}");
    eventually(WAIT, "both members' spans in the batch's trace", || {
        let spans = seen.spans.lock().unwrap();
        let members: Vec<Span> = (spans.iter())
            .filter(|s| hex(&s.trace_id) == BATCH_TRACE && s.name == "tools/call up__echo")
            .cloned()
            .collect();
        (members.len() == 2).then_some(members)
    })
}

/// Without `[telemetry]`, nothing is added to what a server gets.
#[test]
fn untraced_calls_pass_no_trace_context() {
    let (runtime, seen, gateway) = start(false);
    runtime.block_on(async {
        let mut session = echoed(&gateway).await;
        let params = json!({"name": "v2demo__traceparent", "arguments": {}});
        let plugin = call_once_loaded(&mut session, params).await;
        assert_eq!(text(&plugin), "none");
    });
    assert_eq!(*seen.calls.lock().unwrap(), vec![(None, None)]);
    assert!(seen.spans.lock().unwrap().is_empty());
}
