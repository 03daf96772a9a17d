//! The bundled `pin` and `audit` middleware in the plugin host, as built by build.rs
//! (plugins/pin, plugins/audit), each with a read-write grant: the files they keep in it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::tests::{config, start};
use super::{Direction, HookCall, HookContext, ListContext, ListEntry, Outcome, ResultAction};
use crate::config::{DirGrant, InstanceMode, PluginConfig, PluginLimits};
use crate::test_support::TempDir;

fn component(name: &str) -> String {
    format!(
        "{}/plugins/target/wasm32-wasip2/release/{name}.wasm",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// A shared-instance middleware entry of the bundled `name`, granted `dir` at `guest`.
fn entry(name: &str, dir: &Path, guest: &str, settings: &[(&str, &str)]) -> PluginConfig {
    let mut entry = PluginConfig::plain(
        name,
        Some(PathBuf::from(component(name))),
        name.into(),
        PluginLimits::default(),
    );
    entry.middleware = true;
    entry.instances.mode = InstanceMode::Shared;
    entry.allow_dirs = vec![DirGrant {
        host: dir.canonicalize().unwrap(),
        guest: guest.into(),
        read_only: false,
        expose_gateway_files: false,
    }];
    entry.config = settings
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    entry
}

fn call() -> HookCall {
    HookCall::new(Duration::from_secs(30))
}

fn tools(description: &str) -> Vec<ListEntry> {
    let definition = json!({"name": "drift", "description": description, "inputSchema": {}});
    vec![ListEntry {
        name: "mw__drift".into(),
        route: Some("mw".into()),
        definition: definition.to_string(),
    }]
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pin_pins_then_hides_a_changed_tool_in_its_granted_folder() {
    let dir = TempDir::new("wasmgate-pin-");
    let settings = [("block", "true")];
    let (host, _rx) = start(&config(vec![entry("pin", dir.path(), "/pins", &settings)])).await;
    let pin = host.middleware("pin").expect("pin loads");
    assert_eq!(pin.interest().lists, ["tools/list", "prompts/list"]);
    let ctx = ListContext {
        method: "tools/list".into(),
        profile: None,
    };
    let first = pin.on_list(&ctx, &tools("a"), call()).await.unwrap();
    assert!(first.is_empty(), "{first:?}");
    let pinned = read_json(&dir.join("pins.json"))["tools"]["mw__drift"].clone();
    assert_eq!(pinned.as_str().map(str::len), Some(64), "{pinned}");

    let changed = pin.on_list(&ctx, &tools("b"), call()).await.unwrap();
    assert_eq!(changed.len(), 1);
    assert!(changed[0].hide && changed[0].name == "mw__drift");
    let pending = read_json(&dir.join("pending.json"));
    assert_eq!(pending["tools"]["mw__drift"]["pinned"], pinned);
    assert_eq!(
        pending["tools"]["mw__drift"]["definition"]["description"],
        "b"
    );
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_appends_a_line_per_result_to_its_granted_file() {
    let dir = TempDir::new("wasmgate-audit-");
    let settings = [("arguments", "true")];
    let (host, _rx) = start(&config(vec![entry(
        "audit",
        dir.path(),
        "/audit",
        &settings,
    )]))
    .await;
    let audit = host.middleware("audit").expect("audit loads");
    assert_eq!(audit.interest().results, ["*"]);
    let ctx = HookContext {
        method: "tools/call".into(),
        direction: Direction::ToServer,
        target: Some("mw__echo".into()),
        route: Some("mw".into()),
        principal: Some("ci".into()),
        profile: None,
        client_name: Some("test".into()),
        client_version: None,
        era: "2025-11-25".into(),
        trace_id: "t1".into(),
    };
    let params = r#"{"name":"mw__echo","arguments":{"text":"hi"}}"#;
    let ok = Outcome::Success(r#"{"content":[]}"#.into());
    let denial = r#"{"code":-32001,"message":"no","data":{"middleware":"guard"}}"#;
    for (outcome, elapsed) in [(ok, 1500), (Outcome::Failure(denial.into()), 20)] {
        let action = audit
            .on_result(&ctx, params, &outcome, elapsed, call())
            .await;
        assert_eq!(action.unwrap(), ResultAction::Pass);
    }
    let text = std::fs::read_to_string(dir.join("audit.jsonl")).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(lines[0]["outcome"], "ok");
    assert_eq!(lines[0]["duration_ms"], 1.5);
    assert_eq!(lines[0]["principal"], "ci");
    assert_eq!(lines[0]["arguments"], json!({"text": "hi"}));
    assert_eq!(lines[1]["outcome"], "denied");
    assert_eq!(lines[1]["code"], -32001);
    host.shutdown().await;
}
