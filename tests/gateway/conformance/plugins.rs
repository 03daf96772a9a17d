//! The conformance fixture as one `wasmgate:plugin@0.2.0` component (tests/plugins/
//! conformance2) and no stdio server: every tool, those that ask the client mid-call too,
//! the resources and their template, the prompts and the completions come from the
//! plugin, through the host's 0.2 imports and exports, in both eras of the suite.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{SCORED_SCENARIOS_2026, check_both_eras, mock_answer};
use crate::harness::{LOAD_TIMEOUT, TestDir, fixture, fixture_path, setup, toml_str, wait_tools};
use crate::http_client::{HttpGateway, runtime};

/// Scored 2026-07-28 scenarios that pass with the plugin: all (the three questions of
/// `input-required-result-multiple-input-requests` go in one round through `ask-all`).
const SCORED_PASSES_2026_PLUGIN_FLOOR: usize = SCORED_SCENARIOS_2026;
/// What must pass whole, as with the stdio fixture.
const WHOLE_2026_PLUGIN: &[(&str, usize)] = &[
    ("server-stateless", 30),
    ("http-custom-header-server-validation", 10),
    ("json-schema-2020-12", 8),
];

/// The plugin alone, unprefixed as the suite calls it; `/state` (where its trigger tools
/// keep what they added: its lists are read in a fresh instance) is `state`.
fn plugin_config(state: &TestDir) -> String {
    let plugin = fixture_path("conformance2");
    format!(
        "[gateway]\n\n[plugins]\ncache_dir = \"{{dir}}/cache\"\n\n\
         [plugins.conformance2]\npath = {}\nnamespace = \"\"\n\
         allow_dirs = [{{ host = {}, guest = \"/state\", mode = \"rw\" }}]\n",
        toml_str(plugin.to_str().unwrap()),
        toml_str(state.path.to_str().unwrap()),
    )
}

/// Waits until the plugin's lists are served (it compiles after the gateway listens),
/// and sees that the plugin answers.
fn wait_for_the_plugin(gateway: &HttpGateway) {
    runtime().block_on(async {
        let mut session = gateway.session("/mcp", &[]).await;
        let deadline = Instant::now() + LOAD_TIMEOUT;
        loop {
            let tools = session.request("tools/list", json!({})).await;
            let prompts = session.request("prompts/list", json!({})).await;
            let listed = |answer: &Value, list: &str, name: &str| {
                (answer["result"][list].as_array().into_iter().flatten())
                    .any(|item| item["name"] == name)
            };
            if listed(&tools, "tools", "test_sampling")
                && listed(&prompts, "prompts", "test_simple_prompt")
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the plugin's lists never came: {tools} {prompts}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let answer = session.call("test_tool_with_progress", json!({})).await;
        let text = answer["result"]["content"][0]["text"].as_str();
        assert_eq!(
            text,
            Some("Progress reported by the 0.2 plugin"),
            "{answer}"
        );
    });
}

/// The 2026-07-28 suite (`--requirements`), then the 2025-11-25 suite, against one
/// gateway serving the fixture as one 0.2 plugin.
#[test]
fn conformance_suites_pass_with_the_fixture_as_one_0_2_plugin() {
    let state = TestDir::new("conformance2-state");
    check_both_eras(
        "the fixture as one 0.2 plugin",
        &plugin_config(&state),
        SCORED_PASSES_2026_PLUGIN_FLOOR,
        WHOLE_2026_PLUGIN,
        wait_for_the_plugin,
    );
}

/// The three questions of one round reach a 2025 client together (`ask-all`): all are
/// asked before the first is answered, and the call ends with every answer.
#[test]
fn a_round_of_questions_reaches_a_2025_client_together() {
    let mut client = setup()
        .file("conformance2.wasm", fixture("conformance2"))
        .plugins("[plugins.conformance2]\nnamespace = \"\"")
        .start();
    let capabilities = json!({"sampling": {}, "elicitation": {}, "roots": {}});
    client.initialize_with("2025-11-25", capabilities);
    wait_tools(&mut client, "the plugin's tools", |names| {
        names
            .iter()
            .any(|n| n == "test_input_required_result_multiple_inputs")
    });
    let params = json!({"name": "test_input_required_result_multiple_inputs", "arguments": {}});
    let id = client.send_request("tools/call", params);
    let asked: Vec<Value> = (0..3)
        .map(|_| client.next_client_request(LOAD_TIMEOUT))
        .collect();
    let mut methods: Vec<&str> = asked.iter().filter_map(|r| r["method"].as_str()).collect();
    methods.sort_unstable();
    assert_eq!(
        methods,
        ["elicitation/create", "roots/list", "sampling/createMessage"]
    );
    for request in &asked {
        client.respond(request["id"].clone(), mock_answer(request));
    }
    let response = client.wait_response(&id, LOAD_TIMEOUT);
    assert_eq!(
        response["result"]["content"][0]["text"], "Name: Alice; Greeting: Hello there!; Roots: 1",
        "{response}"
    );
}
