//! Counters and histograms for `/metrics` (Prometheus text format), through the `metrics`
//! facade: until the HTTP front installs the recorder, every call here is a no-op.

use std::sync::OnceLock;

use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Latency buckets, in seconds: from a plugin call on a ready instance to a slow server.
const BUCKETS: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// Installs the process's recorder, once; `false` when another was installed first.
pub fn install() -> bool {
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets(BUCKETS)
                .ok()?
                .build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder).ok()?;
            describe();
            describe_limits();
            Some(handle)
        })
        .is_some()
}

/// The `# HELP` line of every metric (a scraper shows it beside the name).
fn describe() {
    describe_counter!(
        "wasmgate_http_requests_total",
        "HTTP requests to the front, by method, path, status and the name of the token presented"
    );
    describe_gauge!(
        "wasmgate_sessions_open",
        "MCP sessions open on the HTTP front"
    );
    describe_counter!(
        "wasmgate_mcp_requests_total",
        "MCP requests from clients over HTTP, by method (\"other\" for any method not in the MCP specification)"
    );
    describe_counter!(
        "wasmgate_tool_calls_total",
        "Tool calls, by tool, backend (\"gateway\" for the built-in tools) and outcome"
    );
    describe_histogram!(
        "wasmgate_tool_call_seconds",
        metrics::Unit::Seconds,
        "Time from a tool call's arrival to its result, by backend"
    );
    describe_counter!(
        "wasmgate_events_total",
        "Events recorded (see get_events), by kind"
    );
    describe_counter!(
        "wasmgate_events_dropped_total",
        "Events not written to the event file because its writer fell behind"
    );
    describe_counter!(
        "wasmgate_client_messages_dropped_total",
        "Messages to a client dropped because it did not read its stream"
    );
    describe_gauge!(
        "wasmgate_backend_state",
        "1 for the state each server and plugin is in (starting, ready, restarting, failed, stopped), 0 for the others"
    );
    describe_gauge!(
        "wasmgate_backend_restarts",
        "Restarts of each server since the gateway started"
    );
    describe_counter!(
        "wasmgate_server_notifications_dropped_total",
        "Notifications to a remote server dropped because its queue was full"
    );
}

/// Folds the histograms' recent samples into their buckets: without it, samples pile up
/// between scrapes (and for ever when nothing scrapes). Run every few seconds.
pub fn upkeep() {
    if let Some(handle) = HANDLE.get().and_then(Option::as_ref) {
        handle.run_upkeep();
    }
}

/// Everything recorded, in the Prometheus text format.
pub fn render() -> String {
    HANDLE
        .get()
        .and_then(Option::as_ref)
        .map(PrometheusHandle::render)
        .unwrap_or_default()
}

/// By the name of the token presented, when one was: a configured name, so the label's
/// values are as few as the tokens.
pub fn http_request(method: &'static str, path: &'static str, status: &'static str, token: &str) {
    if token.is_empty() {
        counter!("wasmgate_http_requests_total", "method" => method, "path" => path, "status" => status)
            .increment(1);
    } else {
        counter!("wasmgate_http_requests_total", "method" => method, "path" => path, "status" => status, "token" => token.to_string())
            .increment(1);
    }
}

pub fn sessions_open(count: usize) {
    gauge!("wasmgate_sessions_open").set(count as f64);
}

/// By method, as named in `protocol::methods` (others count as "other").
pub fn mcp_request(method: &str) {
    use crate::protocol::methods::*;
    let known = [
        INITIALIZE,
        PING,
        TOOLS_LIST,
        TOOLS_CALL,
        PROMPTS_LIST,
        PROMPTS_GET,
        RESOURCES_LIST,
        RESOURCE_TEMPLATES_LIST,
        RESOURCES_READ,
        RESOURCES_SUBSCRIBE,
        RESOURCES_UNSUBSCRIBE,
        COMPLETION_COMPLETE,
        LOGGING_SET_LEVEL,
        crate::protocol::modern::DISCOVER,
        crate::protocol::modern::LISTEN,
    ];
    let label = known.into_iter().find(|m| *m == method).unwrap_or("other");
    counter!("wasmgate_mcp_requests_total", "method" => label).increment(1);
}

pub fn tool_call(tool: &str, backend: &str, outcome: &'static str, seconds: f64) {
    counter!("wasmgate_tool_calls_total", "tool" => tool.to_string(), "backend" => backend.to_string(), "outcome" => outcome)
        .increment(1);
    histogram!("wasmgate_tool_call_seconds", "backend" => backend.to_string()).record(seconds);
}

pub fn event(kind: &'static str) {
    counter!("wasmgate_events_total", "kind" => kind).increment(1);
}

pub fn events_dropped() {
    counter!("wasmgate_events_dropped_total").increment(1);
}

pub fn messages_dropped() {
    counter!("wasmgate_client_messages_dropped_total").increment(1);
}

/// A server's or plugin's state (1 for the one it is in), set when `/metrics` is read.
pub fn backend(name: &str, state: &'static str) {
    for each in ["starting", "ready", "restarting", "failed", "stopped"] {
        gauge!("wasmgate_backend_state", "backend" => name.to_string(), "state" => each)
            .set(if each == state { 1.0 } else { 0.0 });
    }
}

/// A server's restarts, set when `/metrics` is read.
pub fn backend_restarts(name: &str, restarts: u32) {
    gauge!("wasmgate_backend_restarts", "backend" => name.to_string()).set(restarts as f64);
}

/// A notification to a remote server dropped: its queue was full.
pub fn server_notifications_dropped(backend: &str) {
    counter!("wasmgate_server_notifications_dropped_total", "backend" => backend.to_string())
        .increment(1);
}

/// A request or call refused by a limit: `limit` names it (`tool:time__*`, `server:NAME`),
/// `kind` is "rate", "concurrency" or "breaker".
pub fn limited(limit: &str, kind: &'static str) {
    counter!("wasmgate_limited_total", "limit" => limit.to_string(), "kind" => kind).increment(1);
}

/// A server's circuit breaker: 0 closed, 1 half-open, 2 open.
pub fn breaker_state(server: &str, state: f64) {
    gauge!("wasmgate_breaker_state", "server" => server.to_string()).set(state);
}

/// A list call to a server retried within the retry budget.
pub fn retried() {
    counter!("wasmgate_retries_total").increment(1);
}

/// HELP text of the limits' series.
pub fn describe_limits() {
    describe_counter!(
        "wasmgate_limited_total",
        "Requests and calls refused by a limit (kind: rate, concurrency, breaker)"
    );
    describe_gauge!(
        "wasmgate_breaker_state",
        "Circuit breaker of each server: 0 closed, 1 half-open, 2 open"
    );
    describe_counter!(
        "wasmgate_retries_total",
        "List calls to servers retried after a transport failure, within the retry budget"
    );
}
