//! The Rust template's notes, end to end: a project `plugin new` writes, built, served by
//! the real binary with no instance mode in its config. Its `add` and `search` keep notes
//! in the gateway's store through the SDK, so they last across calls (each in a fresh
//! instance) and across a hot reload, and each note is a resource of its template.

use serde_json::{Value, json};

use crate::harness::{LOAD_TIMEOUT, TestDir, run_cli, run_cli_with_env, setup, wait_tools};
use crate::plugin_cli::{BUILD_LIMIT, LIMIT, shared_target};

/// The template's component, built as an author builds it.
fn build_template() -> Vec<u8> {
    let dir = TestDir::new("sdk-template");
    let target = shared_target();
    let env = [("CARGO_TARGET_DIR", target.to_str().unwrap())];
    run_cli(
        &["plugin", "new", "notes", "--dir", "notes"],
        &dir.path,
        LIMIT,
    )
    .assert_exit(0);
    run_cli_with_env(&["plugin", "build", "notes"], &dir.path, &env, BUILD_LIMIT).assert_exit(0);
    std::fs::read(target.join("wasm32-wasip2/release/notes.wasm")).expect("the built component")
}

fn structured(answer: &Value) -> &Value {
    assert_ne!(answer["isError"], true, "{answer}");
    &answer["structuredContent"]
}

#[test]
fn the_template_s_notes_last_across_calls_and_a_reload() {
    let wasm = build_template();
    let mut client = setup()
        .file("notes.wasm", wasm.clone())
        .plugins("[plugins.notes]\n")
        .start();
    client.initialize_with("2025-11-25", json!({}));
    wait_tools(&mut client, "the template's tools", |names| {
        names.iter().any(|n| n == "notes__search")
    });

    let first = client.call("notes__add", json!({"text": "Buy milk"}));
    assert_eq!(structured(&first), &json!({"id": 1, "count": 1}));
    let second = client.call("notes__add", json!({"text": "Call Ada"}));
    assert_eq!(structured(&second), &json!({"id": 2, "count": 2}));
    let found = client.call("notes__search", json!({"query": "MILK"}));
    assert_eq!(
        structured(&found),
        &json!({"notes": [{"id": 1, "text": "Buy milk"}]})
    );

    let read = client.result("resources/read", json!({"uri": "notes://2"}));
    assert_eq!(read["contents"][0]["text"], "Call Ada", "{read}");
    assert_eq!(read["contents"][0]["mimeType"], "text/plain", "{read}");
    let templates = client.result("resources/templates/list", json!({}));
    assert_eq!(
        templates["resourceTemplates"][0]["uriTemplate"], "notes://{id}",
        "{templates}"
    );

    // A new version of the plugin (another file) serves the notes the old one kept.
    let folder = crate::harness::plugin_dir(&client);
    let variant = crate::custom_section::with_custom_section(&wasm, "wasmgate-test-variant", b"b");
    let digest = crate::harness::sha256_hex(&variant);
    let partial = folder.join("notes.wasm.partial");
    std::fs::write(&partial, &variant).unwrap();
    std::fs::rename(&partial, folder.join("notes.wasm")).unwrap();
    crate::harness::eventually(LOAD_TIMEOUT, "the new version to serve", || {
        (crate::harness::backend(&mut client, "notes")["digest"] == digest.as_str()).then_some(())
    });
    let found = client.call("notes__search", json!({"query": ""}));
    assert_eq!(
        structured(&found)["notes"].as_array().map(Vec::len),
        Some(2)
    );
}
