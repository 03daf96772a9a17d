//! What an operator following the docs finds: a `# HELP` line for every metric, the token
//! names in the request counts, the built-in tools counted like any other, every plugin
//! (bundled middleware too) in the backend-state metric, and start-up and shutdown logs
//! that say what is served.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::http_client::{HttpGateway, runtime};
use crate::http_front::with_example;

const ADMIN: (&str, &str) = ("authorization", "Bearer admin-token-0123456789abc");

/// The metric names of a Prometheus text body, without the histograms' suffixes.
fn metric_names(body: &str) -> BTreeSet<String> {
    body.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| {
            let name = line.split(['{', ' ']).next().unwrap_or_default();
            ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| name.strip_suffix(suffix))
                .unwrap_or(name)
                .to_string()
        })
        .collect()
}

/// Waits for `needle` in the gateway's log (written by the gateway as it goes).
fn log_line(gateway: &HttpGateway, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stderr = gateway.stderr();
        if let Some(line) = stderr.lines().find(|l| l.contains(needle)) {
            return line.to_string();
        }
        assert!(Instant::now() < deadline, "no `{needle}` in\n{stderr}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn metrics_and_logs_tell_an_operator_what_is_served() {
    let extra = r#"
[http]
tokens = [{ name = "admin", token = "admin-token-0123456789abc", scopes = ["mcp", "operator"] }]

[[middleware]]
use = "redact"
"#;
    let mut gateway = HttpGateway::start(&with_example(extra), &[]);
    runtime().block_on(async {
        let mut session = gateway.session("/mcp", &[ADMIN]).await;
        let echo = session.call("ex__echo", json!({"text": "m"})).await;
        assert_eq!(echo["result"]["content"][0]["text"], "m", "{echo}");
        let status = session.call("gateway_status", json!({})).await;
        assert!(status["result"]["structuredContent"].is_object(), "{status}");
        let metrics = gateway
            .connect()
            .await
            .request("GET", "/metrics", &[ADMIN], "")
            .await;
        assert_eq!(metrics.status, 200, "{}", metrics.body);
        let body = &metrics.body;
        for name in metric_names(body) {
            assert!(
                body.contains(&format!("# HELP {name} ")),
                "no HELP line for {name} in\n{body}"
            );
        }
        for needle in [
            r#"wasmgate_tool_calls_total{tool="gateway_status",backend="gateway",outcome="success"} 1"#,
            r#"wasmgate_tool_calls_total{tool="ex__echo",backend="ex",outcome="success"} 1"#,
            r#"wasmgate_http_requests_total{method="POST",path="/mcp",status="200",token="admin"}"#,
            r#"wasmgate_backend_state{backend="ex",state="ready"} 1"#,
            r#"wasmgate_backend_state{backend="redact",state="ready"} 1"#,
        ] {
            assert!(body.contains(needle), "{needle} in\n{body}");
        }
        assert!(!body.contains("admin-token-0123456789abc"), "{body}");
    });
    let served = log_line(&gateway, " serving servers=");
    for needle in ["servers=ex (ready)", "plugins=redact", "tokens=admin"] {
        assert!(served.contains(needle), "{needle} in {served}");
    }
    assert!(!gateway.stderr().contains("admin-token-0123456789abc"));
    let status = gateway.terminate(Duration::from_secs(10));
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "{}",
        gateway.stderr()
    );
    log_line(&gateway, "shutdown finished");
}

/// The official Python SDK's client in `auto` mode probes the protocol version first
/// (`server/discover`): the gateway answers it, so the metrics show no client error for
/// it, and count it under its own method.
#[test]
fn an_sdk_version_probe_is_not_a_client_error() {
    let Some(python) = crate::third_party::sdk_python() else {
        return;
    };
    let gateway = HttpGateway::start(&with_example(""), &[]);
    let script = r#"
import asyncio, sys
from mcp.client.client import Client
async def main():
    async with Client(sys.argv[1], mode="auto") as client:
        tools = await client.list_tools()
        print(len(tools.tools))
asyncio.run(main())
"#;
    let out = std::process::Command::new(python)
        .args(["-c", script, &gateway.url("/mcp")])
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metrics = runtime().block_on(async {
        gateway
            .connect()
            .await
            .request("GET", "/metrics", &[], "")
            .await
    });
    let body = &metrics.body;
    assert!(
        body.contains(r#"wasmgate_mcp_requests_total{method="server/discover"}"#),
        "{body}"
    );
    let client_errors: Vec<&str> = body
        .lines()
        .filter(|l| l.starts_with("wasmgate_http_requests_total") && l.contains("status=\"4"))
        .collect();
    assert!(client_errors.is_empty(), "{client_errors:?}");
}
