//! Both eras toward servers: a dual-era stdio server (the Python SDK's, fixtures/
//! dual_era_server.py) is probed once for its era, remembered in the cache folder, or
//! set by `protocol`; then called statelessly by 2025 and 2026 clients, its
//! `input_required` rounds relayed to a 2026 client and turned into real requests to a
//! 2025 one.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::harness::{Client, TIMEOUT, TestDir, config, eventually};

const MODERN: &str = "2026-07-28";

/// The fixture server: a dual-era server on the Python SDK, writing a line per process
/// started to `marker`.
pub(crate) fn dual_era(
    python: &Path,
    cache: &Path,
    marker: &Path,
    extra: &[&str],
) -> crate::harness::Config {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gateway/fixtures/dual_era_server.py");
    let env = format!(
        "env = {{ DUAL_ERA_MARKER = {} }}",
        crate::harness::toml_str(marker.to_str().unwrap())
    );
    let mut lines = vec![env.as_str()];
    lines.extend_from_slice(extra);
    // The first list waits for the probe and the start, however slow the machine.
    config()
        .gateway(r#"startup_timeout = "60s""#)
        .cache(cache.to_path_buf())
        .plugins("bundled = false")
        .server(
            "dual",
            python.to_str().unwrap(),
            &[script.to_str().unwrap()],
            &lines,
        )
}

/// How many processes of the fixture have started.
fn starts(marker: &Path) -> usize {
    std::fs::read_to_string(marker)
        .unwrap_or_default()
        .lines()
        .count()
}

/// The era `gateway_status` shows for the server.
fn era_of(client: &mut Client) -> Value {
    client.status()["backends"]["dual"]["protocol_version"].clone()
}

/// A 2025 client's gateway, ready.
fn start_2025(config: &crate::harness::Config) -> Client {
    config.start_initialized()
}

struct Fixture {
    python: PathBuf,
    dir: TestDir,
}

impl Fixture {
    fn new() -> Option<Fixture> {
        let python = crate::third_party::sdk_python()?;
        Some(Fixture {
            python,
            dir: TestDir::new("eras"),
        })
    }

    fn config(&self, extra: &[&str]) -> crate::harness::Config {
        dual_era(&self.python, &self.dir.join("cache"), &self.marker(), extra)
    }

    fn marker(&self) -> PathBuf {
        self.dir.join("marker")
    }
}

#[test]
fn a_stdio_server_is_probed_once_and_its_era_remembered() {
    let Some(fixture) = Fixture::new() else {
        return;
    };
    let config = fixture.config(&[]);
    let mut client = start_2025(&config);
    assert_eq!(era_of(&mut client), MODERN);
    // The probe's process, then the serving one.
    assert_eq!(starts(&fixture.marker()), 2);
    drop(client);
    let mut client = start_2025(&config);
    assert_eq!(era_of(&mut client), MODERN);
    assert_eq!(
        starts(&fixture.marker()),
        3,
        "the second start probed again"
    );
    let ready = client.events(json!({"event_type": "backend.ready"}));
    assert_eq!(ready[0]["protocol_source"], "cached", "{ready:?}");
    assert_eq!(ready[0]["protocol_version"], MODERN, "{ready:?}");
}

#[test]
fn protocol_in_config_skips_the_probe() {
    let Some(fixture) = Fixture::new() else {
        return;
    };
    let mut client = start_2025(&fixture.config(&[r#"protocol = "2026-07-28""#]));
    assert_eq!(era_of(&mut client), MODERN);
    assert_eq!(starts(&fixture.marker()), 1);
    drop(client);
    // The old era, when set, whatever the server could speak: as before, mid-call requests.
    let mut client = start_2025(&fixture.config(&[r#"protocol = "2025-11-25""#]));
    assert_eq!(era_of(&mut client), "2025-11-25");
    assert_eq!(starts(&fixture.marker()), 2);
    assert_eq!(ask_as_2025(&mut client), "Hello, Ada!");
}

#[test]
fn check_shows_a_set_protocol_and_refuses_an_unknown_one() {
    let dir = TestDir::new("eras-check");
    let path = dir.write(
        "gateway.toml",
        "[servers.s]\ncommand = \"true\"\nprotocol = \"2027-01-01\"\n",
    );
    let args = ["check", "--config", path.to_str().unwrap()];
    let output = crate::harness::run_cli(&args, &dir.path, TIMEOUT);
    assert!(!output.status.success(), "{}", output.stdout);
    assert!(
        output.stderr.contains("unknown protocol \"2027-01-01\""),
        "{}",
        output.stderr
    );
    let path = dir.write(
        "gateway.toml",
        "[servers.s]\ncommand = \"true\"\nprotocol = \"2026-07-28\"\n",
    );
    let args = ["check", "--config", path.to_str().unwrap()];
    let output = crate::harness::run_cli(&args, &dir.path, TIMEOUT);
    assert!(output.status.success(), "{}", output.stderr);
    assert!(
        output.stdout.contains("    protocol 2026-07-28"),
        "{}",
        output.stdout
    );
}

/// Calls `ask_name` as a 2025 client and answers the elicitation it gets with "Ada".
fn ask_as_2025(client: &mut Client) -> String {
    let id = client.send_request(
        "tools/call",
        json!({"name": "dual__ask_name", "arguments": {}}),
    );
    let asked = client.next_client_request(TIMEOUT);
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    assert_eq!(asked["params"]["message"], "What is your name?", "{asked}");
    client.respond(
        asked["id"].clone(),
        json!({"action": "accept", "content": {"name": "Ada"}}),
    );
    let answer = client.wait_response(&id, TIMEOUT);
    let result = &answer["result"];
    assert_ne!(result["resultType"], "input_required", "{answer}");
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_2025_client_gets_the_rounds_of_a_2026_server_as_requests() {
    let Some(fixture) = Fixture::new() else {
        return;
    };
    let mut client = start_2025(&fixture.config(&[]));
    assert_eq!(era_of(&mut client), MODERN);
    let tools = client.tool_names();
    for tool in ["dual__greet", "dual__ask_name", "dual__count"] {
        assert!(tools.contains(&tool.to_string()), "{tools:?}");
    }
    assert_eq!(ask_as_2025(&mut client), "Hello, Ada!");
    // Progress of a stateless call reaches the client under its own token.
    let id = client.send_request(
        "tools/call",
        json!({"name": "dual__count", "arguments": {"steps": 3}, "_meta": {"progressToken": "p1"}}),
    );
    let (before, answer) = client.until_response(&id, TIMEOUT);
    assert_eq!(
        answer["result"]["content"][0]["text"], "counted to 3",
        "{answer}"
    );
    let progress: Vec<&Value> = before
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| &m["params"]["progress"])
        .collect();
    assert_eq!(progress, [&json!(1), &json!(2), &json!(3)], "{before:?}");
}

#[test]
fn a_2025_client_without_elicitation_gets_an_error_not_a_round() {
    let Some(fixture) = Fixture::new() else {
        return;
    };
    let config = fixture.config(&[r#"protocol = "2026-07-28""#]);
    let mut client = config.start();
    client.initialize_with("2025-11-25", json!({}));
    client.wait_ready();
    let answer = client.request(
        "tools/call",
        json!({"name": "dual__ask_name", "arguments": {}}),
    );
    assert!(answer.get("error").is_some(), "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("elicitation"),
        "{answer}"
    );
}

/// A stateless (2026-07-28) request's params: `params` with the `_meta` of a client that
/// declared elicitation.
fn stateless(mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    });
    params
}

/// Calls `ask_name` as a 2026 client of a gateway just started: the `input_required`
/// round comes back as the server wrote it, and the retry answering it with `name`
/// completes; the call's text.
fn ask_as_2026(client: &mut Client, name: &str) -> String {
    eventually(TIMEOUT, "the server's tools", || {
        let listed = client.result("tools/list", stateless(json!({})));
        let found = listed["tools"]
            .as_array()?
            .iter()
            .any(|t| t["name"] == "dual__ask_name");
        found.then_some(())
    });
    let call = stateless(json!({"name": "dual__ask_name", "arguments": {}}));
    let round = client.result("tools/call", call.clone());
    assert_eq!(round["resultType"], "input_required", "{round}");
    let (key, asked) = round["inputRequests"]
        .as_object()
        .and_then(|r| r.iter().next())
        .expect("one input request");
    assert_eq!(asked["method"], "elicitation/create", "{round}");
    let mut retry = call;
    retry["inputResponses"] =
        json!({key.as_str(): {"action": "accept", "content": {"name": name}}});
    retry["requestState"] = round["requestState"].clone();
    let done = client.result("tools/call", retry);
    assert_eq!(done["resultType"], "complete", "{done}");
    done["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_2026_client_gets_the_input_required_round_and_its_retry_completes() {
    let Some(fixture) = Fixture::new() else {
        return;
    };
    let mut client = fixture.config(&[]).start();
    assert_eq!(ask_as_2026(&mut client, "Ada"), "Hello, Ada!");
    // The server sees what this client declared, not what the gateway could forward: with
    // no elicitation declared, it refuses with -32021 naming it.
    let mut call = stateless(json!({"name": "dual__ask_name", "arguments": {}}));
    call["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({});
    let refused = client.error("tools/call", call);
    assert_eq!(refused["code"], -32021, "{refused}");
    assert!(
        refused["data"]["requiredCapabilities"]["elicitation"].is_object(),
        "{refused}"
    );
}

/// The fixture over Streamable HTTP on a free port, killed when dropped.
pub(crate) struct HttpFixture(std::process::Child);

impl Drop for HttpFixture {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the fixture with `http`; its URL, once it listens.
pub(crate) fn dual_era_over_http(python: &Path, dir: &TestDir) -> (HttpFixture, String) {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gateway/fixtures/dual_era_server.py");
    let out = dir.join("http.stdout");
    let child = std::process::Command::new(python)
        .arg(&script)
        .arg("http")
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(dir.join("http.stderr")).unwrap())
        .spawn()
        .expect("start the fixture over HTTP");
    let server = HttpFixture(child);
    let port = eventually(TIMEOUT, "the fixture to listen", || {
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        text.lines()
            .find_map(|l| l.strip_prefix("listening on "))
            .map(str::to_string)
    });
    (server, format!("http://127.0.0.1:{port}/mcp"))
}

#[test]
fn a_remote_server_is_found_to_speak_2026_and_called_in_both_cells() {
    let Some(python) = crate::third_party::sdk_python() else {
        return;
    };
    let dir = TestDir::new("eras-http");
    let (_server, url) = dual_era_over_http(&python, &dir);
    let config = config().remote("dual", &url, &[]);
    let mut client = start_2025(&config);
    assert_eq!(era_of(&mut client), MODERN);
    // The server checks Mcp-Name against the body: the gateway's renaming is undone in both.
    assert_eq!(ask_as_2025(&mut client), "Hello, Ada!");
    let id = client.send_request(
        "tools/call",
        json!({"name": "dual__count", "arguments": {"steps": 2}, "_meta": {"progressToken": 7}}),
    );
    let (before, answer) = client.until_response(&id, TIMEOUT);
    assert_eq!(
        answer["result"]["content"][0]["text"], "counted to 2",
        "{answer}"
    );
    let progress = before
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .count();
    assert_eq!(progress, 2, "{before:?}");
    drop(client);

    // A 2026 client through the same kind of gateway: the round relayed, the retry done.
    let mut client = config.start();
    assert_eq!(ask_as_2026(&mut client, "Bo"), "Hello, Bo!");
}

/// A remembered era that no longer holds (the server was replaced by one of the other
/// era under the same command line) fails one start; the next start probes again, and
/// the server serves. The example server speaks the session era only.
#[test]
fn a_stale_remembered_era_is_probed_again() {
    let dir = TestDir::new("eras-stale");
    let cache = dir.join("cache");
    let config = config()
        .cache(cache.clone())
        .plugins("bundled = false")
        .example("ex", &[]);
    let mut client = start_2025(&config);
    assert_eq!(
        client.status()["backends"]["ex"]["protocol_version"],
        "2025-11-25"
    );
    drop(client);
    let eras = cache.join("upstream-eras");
    let remembered: Vec<PathBuf> = std::fs::read_dir(&eras)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(remembered.len(), 1, "{remembered:?}");
    std::fs::write(&remembered[0], MODERN).unwrap();

    let mut client = start_2025(&config);
    let ex = client.status()["backends"]["ex"].clone();
    assert_eq!(ex["protocol_version"], "2025-11-25", "{ex}");
    assert_eq!(ex["restarts"], 1, "{ex}");
    assert_eq!(
        std::fs::read_to_string(&remembered[0]).unwrap(),
        "2025-11-25"
    );
}

/// Answers every request the gateway sends to the 2025 `client` until the answer to `id`
/// comes; the questions asked, and that answer.
fn answer_rounds(client: &mut Client, id: &Value) -> (Vec<String>, Value) {
    let short = std::time::Duration::from_millis(100);
    let deadline = std::time::Instant::now() + TIMEOUT;
    let mut asked = Vec::new();
    while std::time::Instant::now() < deadline {
        if let Some(answer) = client.try_response(id, short) {
            return (asked, answer);
        }
        let Some(request) = client.take(short, crate::harness::is_server_request) else {
            continue;
        };
        asked.push(request["params"]["message"].as_str().unwrap().to_string());
        let name = format!("N{}", asked.len());
        client.respond(
            request["id"].clone(),
            json!({"action": "accept", "content": {"name": name}}),
        );
    }
    panic!("no answer to {id} within {TIMEOUT:?}; asked {asked:?}");
}

/// A call of several rounds asks the 2025 client each round's question in turn; past 8
/// rounds the gateway gives the call up with an error rather than hold it open.
#[test]
fn a_2025_client_answers_round_after_round_within_a_bound() {
    let Some(fixture) = Fixture::new() else {
        return;
    };
    let mut client = start_2025(&fixture.config(&[r#"protocol = "2026-07-28""#]));
    let id = client.send_request(
        "tools/call",
        json!({"name": "dual__ask_twice", "arguments": {}}),
    );
    let (asked, answer) = answer_rounds(&mut client, &id);
    assert_eq!(
        asked,
        ["What is your name?", "Round 2, after N1?"],
        "{answer}"
    );
    assert_eq!(
        answer["result"]["content"][0]["text"], "Hello, N2!",
        "{answer}"
    );

    let id = client.send_request(
        "tools/call",
        json!({"name": "dual__ask_nine_times", "arguments": {}}),
    );
    let (asked, answer) = answer_rounds(&mut client, &id);
    assert_eq!(asked.len(), 8, "{asked:?}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("after 8 rounds"), "{answer}");
}

/// A server that answers nothing before `initialize` (as servers on some SDKs do) costs its
/// first start the probe's wait, once: the silence is remembered as the session era, and
/// the next start does not probe.
#[test]
fn a_server_silent_before_initialize_is_probed_once() {
    let dir = TestDir::new("eras-silent");
    let config = config()
        // The probe waits at most this long (or 10 s).
        .gateway(r#"init_timeout = "1s""#)
        .cache(dir.join("cache"))
        .plugins("bundled = false")
        .example("ex", &["--silent-before-init"]);
    for source in ["probed", "cached"] {
        let mut client = start_2025(&config);
        let ready = client.events(json!({"event_type": "backend.ready"}));
        assert_eq!(ready[0]["protocol_source"], source, "{ready:?}");
        assert_eq!(ready[0]["protocol_version"], "2025-11-25", "{ready:?}");
        let echo = client.call("ex__echo", json!({"text": "hi"}));
        assert_eq!(echo["content"][0]["text"], "hi", "{echo}");
    }
}

/// A resource a stateless server does not have is -32602 in its era; a session-era client
/// reading it through the gateway gets the -32002 of its own era, and a stateless client
/// the server's -32602.
#[test]
fn a_missing_resource_is_not_found_in_each_clients_era() {
    let Some(fixture) = Fixture::new() else {
        return;
    };
    let config = fixture.config(&[r#"protocol = "2026-07-28""#]);
    let mut client = start_2025(&config);
    let note = client.result("resources/read", json!({"uri": "dual://note"}));
    assert_eq!(note["contents"][0]["text"], "a note", "{note}");
    let missing = client.error("resources/read", json!({"uri": "dual://missing"}));
    assert_eq!(missing["code"], -32002, "{missing}");
    assert_eq!(missing["data"]["uri"], "dual://missing", "{missing}");

    let missing = client.error(
        "resources/read",
        stateless(json!({"uri": "dual://missing"})),
    );
    assert_eq!(missing["code"], -32602, "{missing}");
}

/// The first message of a listen stream, and the `_meta` key of its tag.
const ACK: &str = "notifications/subscriptions/acknowledged";
const TAG: &str = "io.modelcontextprotocol/subscriptionId";

/// A 2025 client of a gateway just ready hears of a tool the server adds and lists it;
/// subscribed to the fixture's note (answered once the server took it on the gateway's
/// listen upstream), it hears the note's update, without the upstream listen's tag.
fn hear_changes_as_2025(client: &mut Client) {
    assert!(client.tool_names().contains(&"dual__greet".to_string()));
    let added = client.call("dual__add_tool", json!({"name": "extra"}));
    assert_eq!(added["content"][0]["text"], "added extra", "{added}");
    client.next_notification("notifications/tools/list_changed", TIMEOUT);
    let tools = client.tool_names();
    assert!(tools.contains(&"dual__extra".to_string()), "{tools:?}");
    let extra = client.call("dual__extra", json!({}));
    assert_eq!(extra["content"][0]["text"], "I am extra", "{extra}");
    let subscribed = client.request("resources/subscribe", json!({"uri": "note://a"}));
    assert!(subscribed.get("result").is_some(), "{subscribed}");
    client.call("dual__touch", json!({"uri": "note://a"}));
    let updated = client.next_notification("notifications/resources/updated", TIMEOUT);
    assert_eq!(updated["params"], json!({"uri": "note://a"}), "{updated}");
    // Unsubscribed, the next update does not come.
    let gone = client.request("resources/unsubscribe", json!({"uri": "note://a"}));
    assert!(gone.get("result").is_some(), "{gone}");
    client.call("dual__touch", json!({"uri": "note://a"}));
    let probe = client.call("dual__greet", json!({"name": "x"}));
    assert_eq!(probe["content"][0]["text"], "Hello, x!", "{probe}");
    assert!(
        client
            .drain_notifications("notifications/resources/updated")
            .is_empty(),
        "an update after unsubscribing"
    );
}

/// A 2026 stdio server sends its changes only on `subscriptions/listen`: the gateway keeps
/// one open to it, and a 2025 client hears of them as of any server's.
#[test]
fn a_2025_client_hears_a_2026_servers_changes() {
    let Some(fixture) = Fixture::new() else {
        return;
    };
    let mut client = start_2025(&fixture.config(&[]));
    assert_eq!(era_of(&mut client), MODERN);
    hear_changes_as_2025(&mut client);
}

/// The same over HTTP: the upstream listen is a POST whose event stream stays open.
#[test]
fn a_2025_client_hears_a_remote_2026_servers_changes() {
    let Some(python) = crate::third_party::sdk_python() else {
        return;
    };
    let dir = TestDir::new("eras-http-listen");
    let (_server, url) = dual_era_over_http(&python, &dir);
    let mut client = start_2025(&config().remote("dual", &url, &[]));
    assert_eq!(era_of(&mut client), MODERN);
    hear_changes_as_2025(&mut client);
}

/// A 2026 client's own listen on the gateway hears a 2026 server's changes, tagged with
/// its own id: the URI it names becomes the upstream listen's filter.
#[test]
fn a_2026_clients_listen_hears_a_2026_servers_changes() {
    let Some(fixture) = Fixture::new() else {
        return;
    };
    let mut client = fixture.config(&[]).start();
    eventually(TIMEOUT, "the server's tools", || {
        let listed = client.result("tools/list", stateless(json!({})));
        let tools = listed["tools"].as_array()?;
        tools
            .iter()
            .any(|t| t["name"] == "dual__touch")
            .then_some(())
    });
    let filter = json!({"toolsListChanged": true, "resourceSubscriptions": ["note://a"]});
    client.send(
        &json!({"jsonrpc": "2.0", "id": "l1", "method": "subscriptions/listen",
        "params": stateless(json!({"notifications": filter}))}),
    );
    let ack = client
        .take(TIMEOUT, |m| m["method"] == ACK)
        .expect("an acknowledgement");
    assert_eq!(ack["params"]["notifications"], filter, "{ack}");
    let added = client.result(
        "tools/call",
        stateless(json!({"name": "dual__add_tool", "arguments": {"name": "extra"}})),
    );
    assert_eq!(added["content"][0]["text"], "added extra", "{added}");
    let changed = client
        .take(TIMEOUT, |m| {
            m["method"] == "notifications/tools/list_changed"
        })
        .expect("a tools change");
    assert_eq!(changed["params"]["_meta"][TAG], "l1", "{changed}");
    client.result(
        "tools/call",
        stateless(json!({"name": "dual__touch", "arguments": {"uri": "note://a"}})),
    );
    let updated = client
        .take(TIMEOUT, |m| {
            m["method"] == "notifications/resources/updated"
        })
        .expect("an update");
    assert_eq!(updated["params"]["uri"], "note://a", "{updated}");
    assert_eq!(
        updated["params"]["_meta"],
        json!({ TAG: "l1" }),
        "{updated}"
    );
}

/// `auto` speaks 2026-07-28 to a server that offers both eras (here another wasmgate over
/// HTTP, fronting the example server), and what the session era gave still crosses both
/// hops: a sampling request asked of a 2025 client inside its call, and a list change.
#[test]
fn auto_speaks_2026_to_a_server_offering_both_eras() {
    let inner_config = crate::http_front::with_example("");
    let inner = crate::http_client::HttpGateway::start(&inner_config, &[]);
    let mut client = start_2025(&config().remote("up", &inner.url("/mcp"), &[]));
    let up = client.status()["backends"]["up"].clone();
    assert_eq!(up["protocol_version"], MODERN, "{up}");
    let id = client.send_request(
        "tools/call",
        json!({"name": "up__ex__sample", "arguments": {"prompt": "say hi"}}),
    );
    let asked = client.next_client_request(TIMEOUT);
    assert_eq!(asked["method"], "sampling/createMessage", "{asked}");
    client.respond(
        asked["id"].clone(),
        json!({"role": "assistant", "content": {"type": "text", "text": "sampled"}, "model": "m"}),
    );
    let sampled = client.wait_response(&id, TIMEOUT);
    assert_eq!(
        sampled["result"]["content"][0]["text"], "sampled",
        "{sampled}"
    );
    assert!(
        !client
            .tool_names()
            .contains(&"up__ex__late_tool".to_string())
    );
    let changed = client.call("up__ex__notify_changed", json!({}));
    assert_eq!(changed["content"][0]["text"], "changed", "{changed}");
    client.next_notification("notifications/tools/list_changed", TIMEOUT);
    eventually(TIMEOUT, "up__ex__late_tool to be listed", || {
        let tools = client.tool_names();
        tools
            .contains(&"up__ex__late_tool".to_string())
            .then_some(())
    });
}

/// A listen the server ends is opened again, and a change made while none was open is not
/// lost: the lists are fetched again once it is.
#[test]
fn a_listen_the_server_ends_is_opened_again() {
    let Some(fixture) = Fixture::new() else {
        return;
    };
    let mut client = start_2025(&fixture.config(&[]));
    assert!(client.tool_names().contains(&"dual__greet".to_string()));
    let ended = client.call("dual__end_listens", json!({}));
    assert_eq!(
        ended["content"][0]["text"], "ended the listens of 1 handlers",
        "{ended}"
    );
    client.call("dual__add_tool", json!({"name": "after"}));
    client.next_notification("notifications/tools/list_changed", TIMEOUT);
    eventually(TIMEOUT, "dual__after to be listed", || {
        let tools = client.tool_names();
        tools.contains(&"dual__after".to_string()).then_some(())
    });
}

/// A server that crashed is started again with a listen asking for the URIs clients
/// subscribed to before: their updates still come.
#[test]
fn a_restarted_2026_server_is_listened_to_for_the_same_uris() {
    let Some(fixture) = Fixture::new() else {
        return;
    };
    let mut client = start_2025(&fixture.config(&[]));
    let subscribed = client.request("resources/subscribe", json!({"uri": "note://a"}));
    assert!(subscribed.get("result").is_some(), "{subscribed}");
    let pid = client.status()["backends"]["dual"]["pid"].as_u64().unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    eventually(TIMEOUT, "the server to be ready again", || {
        let dual = client.status()["backends"]["dual"].clone();
        (dual["restarts"] == 1 && dual["status"] == "ready").then_some(())
    });
    client.call("dual__touch", json!({"uri": "note://a"}));
    let updated = client.next_notification("notifications/resources/updated", TIMEOUT);
    assert_eq!(updated["params"], json!({"uri": "note://a"}), "{updated}");
}
