//! The four cells of client era × server era, with the official Python SDK's `Client`
//! (`mcp` 2.x) pinned to 2026-07-28 and to legacy, through both fronts of the gateway
//! (HTTP and stdio) to three servers at once: the dual-era fixture (Python SDK server)
//! over stdio and over HTTP, spoken to in 2026-07-28, and the reference "everything"
//! server, 2025-11-25 only, over stdio. Lists, a plain call, a call whose argument the
//! HTTP server wants mirrored in an `Mcp-Param-*` header, progress, sampling and
//! elicitation answered by the SDK's callbacks (fixtures/dual_era_client.py).

use std::path::Path;

use serde_json::{Value, json};

use crate::harness::{TestDir, wasmgate};
use crate::http_client::HttpGateway;
use crate::upstream_eras::{HttpFixture, dual_era, dual_era_over_http};

const MODES: [(&str, &str); 2] = [("2026-07-28", "2026-07-28"), ("legacy", "2025-11-25")];
/// The namespaces and what serves them, as the client script takes them.
const SERVERS: &str = "dual=dual,web=dual,every=everything";

/// The gateway's config, and the HTTP server it names (kept alive as long as it is).
fn servers(python: &Path, dir: &TestDir) -> Option<(String, HttpFixture)> {
    let everything = crate::third_party::everything_server()?;
    let (web, url) = dual_era_over_http(python, dir);
    let modern = r#"protocol = "2026-07-28""#;
    let config = dual_era(python, &dir.join("cache"), &dir.join("marker"), &[modern])
        .remote("web", &url, &[modern])
        .server("every", everything.to_str().unwrap(), &["stdio"], &[]);
    Some((config.render(&dir.path), web))
}

fn run_client(python: &Path, gateway: &str) -> Value {
    let mut args = vec![gateway, SERVERS];
    args.extend(MODES.iter().map(|(mode, _)| *mode));
    crate::third_party::run_fixture_script(python, "dual_era_client.py", &args, &[])
}

fn check(seen: &Value) {
    let seen = seen.as_array().expect("one object per mode");
    assert_eq!(seen.len(), MODES.len(), "{seen:?}");
    for (got, (mode, version)) in seen.iter().zip(MODES) {
        assert_eq!(got["mode"], mode, "{got}");
        assert_eq!(got["version"], version, "{got}");
        let tools = got["tools"].as_array().unwrap();
        for tool in [
            "dual__greet",
            "web__ask_model",
            "every__echo",
            "gateway_status",
        ] {
            assert!(tools.contains(&json!(tool)), "{mode}: {tool}: {got}");
        }
        for name in ["dual", "web"] {
            let server = &got[name];
            assert_eq!(server["greet"], "Hello, Cy!", "{mode} {name}: {got}");
            assert_eq!(server["locate"], "in eu-west", "{mode} {name}: {got}");
            assert_eq!(server["count"], "counted to 2", "{mode} {name}: {got}");
            assert_eq!(
                server["progress"],
                json!([1.0, 2.0]),
                "{mode} {name}: {got}"
            );
            assert_eq!(server["sample"], format!("Sampled: model-{mode}"), "{got}");
            assert_eq!(server["ask"], format!("Hello, Ada-{mode}!"), "{got}");
        }
        let every = &got["every"];
        assert_eq!(every["echo"], "Echo: hi", "{mode}: {got}");
        assert!(
            every["long"].as_str().unwrap().contains("completed"),
            "{got}"
        );
        assert_eq!(every["progress"], json!([1.0, 2.0, 3.0]), "{mode}: {got}");
        let sample = every["sample"].as_str().unwrap();
        assert!(sample.contains(&format!("model-{mode}")), "{mode}: {got}");
        let ask = every["ask"].as_str().unwrap();
        assert!(ask.contains(&format!("Ada-{mode}")), "{mode}: {got}");
        // Each server asked once of each kind, in order: no question lost or asked twice.
        let name = "What is your name?";
        let asked = got["asked"].as_array().unwrap();
        assert_eq!(asked[..2], [name, name], "{mode}: {got}");
        assert_eq!(asked.len(), 3, "{mode}: {got}");
        let model = "Which model are you?";
        let sampled = got["sampled"].as_array().unwrap();
        assert_eq!(sampled[..2], [model, model], "{mode}: {got}");
        assert_eq!(sampled.len(), 3, "{mode}: {got}");
    }
}

#[test]
fn the_sdk_client_in_either_era_through_the_http_front() {
    let Some(python) = crate::third_party::sdk_python() else {
        return;
    };
    let dir = TestDir::new("cells-http");
    let Some((config, _web)) = servers(&python, &dir) else {
        return;
    };
    let gateway = HttpGateway::start(&config, &[]);
    check(&run_client(&python, &gateway.url("/mcp")));
    assert!(!gateway.stderr().contains("panicked"));
}

#[test]
fn the_sdk_client_in_either_era_through_the_stdio_front() {
    let Some(python) = crate::third_party::sdk_python() else {
        return;
    };
    let dir = TestDir::new("cells-stdio");
    let Some((config, _web)) = servers(&python, &dir) else {
        return;
    };
    let config = dir.write("gateway.toml", &config);
    let gateway = format!("stdio:{}:{}", wasmgate().display(), config.display());
    check(&run_client(&python, &gateway));
}
