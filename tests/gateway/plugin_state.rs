//! A 0.2 plugin's key-value store end to end: the real binary with the `v2demo` fixture
//! (tests/plugins/v2demo), its notes kept in `[plugins] data_dir` across gateway
//! restarts, bounded by `store_size`, and one file for all principals with
//! `store = "shared"`; and two tokens of the HTTP front, whose notes never meet.

use serde_json::{Value, json};

use crate::harness::{Client, Config, TestDir, fixture, setup, wait_tools};
use crate::http_client::{HttpGateway, runtime};

/// `v2demo` with `plugins` text (keys, then its table), its store in `store`.
fn gateway(store: &TestDir, plugins: &str) -> Config {
    setup()
        .file("v2demo.wasm", fixture("v2demo"))
        .data_dir(&store.path)
        .plugins(plugins)
}

fn started(config: &Config) -> Client {
    let mut client = config.start();
    client.initialize();
    wait_tools(&mut client, "v2demo's tools", |names| {
        names.iter().any(|n| n == "v2demo__note_add")
    });
    client
}

fn text_of(answer: &Value) -> String {
    answer["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {answer}"))
        .to_string()
}

fn note_get(client: &mut Client, key: &str) -> String {
    text_of(&client.call("v2demo__note_get", json!({"key": key})))
}

#[test]
fn notes_outlive_the_gateway_in_data_dir() {
    let store = TestDir::new("store");
    let config = gateway(&store, "");
    let mut first = started(&config);
    let kept = first.call("v2demo__note_add", json!({"key": "k", "text": "remember"}));
    assert_eq!(text_of(&kept), "kept");
    drop(first);

    let file = store.join("v2demo").join("local.json");
    let text = std::fs::read_to_string(&file).expect("the store's file");
    assert!(text.contains("remember"), "{text}");
    let mut second = started(&config);
    assert_eq!(note_get(&mut second, "k"), "remember");
    assert_eq!(note_get(&mut second, "other"), "(none)");
}

#[test]
fn a_note_past_store_size_is_refused_and_the_store_unchanged() {
    let store = TestDir::new("store");
    let mut client = started(&gateway(&store, "store_size = \"32B\""));
    let small = client.call("v2demo__note_add", json!({"key": "a", "text": "short"}));
    assert_eq!(text_of(&small), "kept");
    let big = client.call(
        "v2demo__note_add",
        json!({"key": "b", "text": "far too long for a store of 32 bytes"}),
    );
    assert_eq!(big["isError"], true, "{big}");
    let said = text_of(&big);
    assert!(said.contains("6 of 32 bytes used"), "{said}");
    assert_eq!(note_get(&mut client, "b"), "(none)");
    assert_eq!(note_get(&mut client, "a"), "short");
}

#[test]
fn a_shared_store_is_one_file_for_every_principal() {
    let store = TestDir::new("store");
    let config = gateway(&store, "[plugins.v2demo]\nstore = \"shared\"\n");
    let mut client = started(&config);
    let kept = client.call("v2demo__note_add", json!({"key": "k", "text": "for all"}));
    assert_eq!(text_of(&kept), "kept");
    assert!(store.join("v2demo").join("shared.json").is_file());
    assert!(!store.join("v2demo").join("local.json").exists());
    assert_eq!(note_get(&mut client, "k"), "for all");
}

/// Two tokens over the HTTP front: each one's notes stay in its own store, whose file
/// name shows neither the token nor its name.
#[test]
fn tokens_never_see_each_others_notes() {
    const ALICE: &str = "token-of-alice-0123456789";
    const BOB: &str = "token-of-bob-0123456789";
    let dir = TestDir::new("state-http");
    std::fs::create_dir_all(dir.join("plugins")).unwrap();
    std::fs::write(dir.join("plugins/v2demo.wasm"), fixture("v2demo")).unwrap();
    let config = format!(
        r#"[gateway]
startup_timeout = "120s"

[http]
tokens = [
  {{ name = "alice", token = "{ALICE}" }},
  {{ name = "bob", token = "{BOB}" }},
]

[plugins]
dir = "{{dir}}/plugins"
cache_dir = "{{dir}}/cache"
data_dir = "{{dir}}/store"
"#
    );
    let gateway = HttpGateway::start_in(dir, &config, &[]);
    let text = |answer: &Value| text_of(&answer["result"]);
    runtime().block_on(async {
        let bearer = |token: &str| format!("Bearer {token}");
        let (alice_auth, bob_auth) = (bearer(ALICE), bearer(BOB));
        let mut alice = gateway
            .session("/mcp", &[("authorization", &alice_auth)])
            .await;
        let mut bob = gateway
            .session("/mcp", &[("authorization", &bob_auth)])
            .await;
        // The first list waits for the plugins to load.
        alice.request("tools/list", json!({})).await;
        let add = |text: &str| json!({"key": "k", "text": text});
        let get = json!({"key": "k"});
        assert_eq!(
            text(&alice.call("v2demo__note_add", add("alice's")).await),
            "kept"
        );
        assert_eq!(
            text(&bob.call("v2demo__note_get", get.clone()).await),
            "(none)"
        );
        assert_eq!(
            text(&bob.call("v2demo__note_add", add("bob's")).await),
            "kept"
        );
        assert_eq!(
            text(&alice.call("v2demo__note_get", get.clone()).await),
            "alice's"
        );
        assert_eq!(text(&bob.call("v2demo__note_get", get).await), "bob's");
    });
    let files: Vec<String> = std::fs::read_dir(gateway.dir.join("store/v2demo"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".json"))
        .collect();
    assert_eq!(files.len(), 2, "{files:?}");
    for name in &files {
        for secret in ["alice", "bob", ALICE, BOB, "local"] {
            assert!(!name.contains(secret), "{name}");
        }
    }
}
