//! The official Python SDK client through the gateway, over its stdio and its HTTP front,
//! to the reference "everything" server served over HTTP (Streamable HTTP and legacy SSE).

use serde_json::{Value, json};

use crate::harness::{TestDir, config, wasmgate};
use crate::http_client::HttpGateway;
use crate::remote::everything_over_http;
use crate::third_party::{run_sdk_client, sdk_python};

/// Lists, calls, progress, sampling and elicitation answered by the SDK's callbacks, logs,
/// resources and templates read, a subscription and its `resources/updated`: each server
/// mode, each gateway front (tests/gateway/fixtures/sdk_client.py, mode `everything`).
#[test]
fn the_python_sdk_client_to_the_everything_server_over_http() {
    let Some(python) = sdk_python() else { return };
    for (mode, transport) in [("streamableHttp", "streamable-http"), ("sse", "auto")] {
        let dir = TestDir::new("everything");
        let Some((_server, url)) = everything_over_http(&dir, mode) else {
            return;
        };
        let line = format!("transport = \"{transport}\"");
        let gateway_config =
            config()
                .gateway(r#"startup_timeout = "30s""#)
                .remote("up", &url, &[&line]);

        let config = dir.write("gateway.toml", &gateway_config.render(&dir.path));
        let binary = wasmgate();
        let over_stdio = [
            "everything",
            "up__",
            "stdio",
            binary.to_str().unwrap(),
            config.to_str().unwrap(),
        ];
        check(mode, &run_sdk_client(&python, &over_stdio, &[]));

        let front = HttpGateway::start(&gateway_config.render(std::path::Path::new("{dir}")), &[]);
        let over_http = ["everything", "up__", "http", &front.url("/mcp")];
        check(mode, &run_sdk_client(&python, &over_http, &[]));
        let stderr = front.stderr();
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

fn check(mode: &str, seen: &Value) {
    let tools = seen["tools"].as_array().unwrap();
    for tool in ["up__echo", "up__trigger-sampling-request", "gateway_status"] {
        assert!(
            tools.contains(&json!(tool)),
            "{mode}: {tool} missing: {seen}"
        );
    }
    assert_eq!(seen["echo"], "Echo: via the sdk", "{mode}: {seen}");
    let long = seen["long"].as_str().unwrap_or_default();
    assert!(long.contains("completed"), "{mode}: {seen}");
    assert_eq!(seen["progress"], json!([1.0, 2.0, 3.0]), "{mode}: {seen}");
    assert!(
        seen["sampled"][0]
            .as_str()
            .is_some_and(|p| p.contains("2+2?")),
        "{mode}: {seen}"
    );
    let sample = seen["sample"].as_str().unwrap_or_default();
    assert!(sample.contains("sampled: "), "{mode}: {seen}");
    let elicit = seen["elicit"].as_str().unwrap_or_default();
    assert!(elicit.contains("Ada Lovelace"), "{mode}: {seen}");
    assert_eq!(seen["read"], seen["first"], "{mode}: {seen}");
    let templates = seen["templates"].as_array().unwrap();
    assert!(
        templates.contains(&json!("demo://resource/dynamic/text/{resourceId}")),
        "{mode}: {seen}"
    );
    let read = seen["template_read"].as_str().unwrap_or_default();
    assert!(read.contains('7'), "{mode}: {seen}");
    assert!(
        seen["updated"].as_array().unwrap().contains(&seen["first"]),
        "{mode}: {seen}"
    );
    let logs = seen["logs"].as_array().unwrap();
    assert!(
        logs.iter()
            .any(|l| l.as_str().is_some_and(|l| l.contains("Subscribe"))),
        "{mode}: {seen}"
    );
}
