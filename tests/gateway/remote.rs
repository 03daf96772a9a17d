//! Remote servers over Streamable HTTP, through the real binary on loopback: a wasmgate
//! fronting a second wasmgate (`serve --http`) that fronts the example server, so that
//! every message crosses both hops; faults of the remote end; headers and `check`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{Client, TIMEOUT, TestDir, config, eventually, run_cli_with_env, text};
use crate::http_client::{HttpGateway, spawn};
use crate::http_front::with_example;

const TOKEN: &str = "an-upstream-token-0123456789";

/// The inner gateway: the example server as `ex`, behind a bearer token named `outer`.
fn inner_config() -> String {
    with_example("[http]\ntokens = [{ name = \"outer\", token = \"${INNER_TOKEN}\" }]\n")
}

fn inner() -> HttpGateway {
    HttpGateway::start(&inner_config(), &[("INNER_TOKEN", TOKEN)])
}

/// The outer gateway over stdio, with the inner one as the remote server `up`.
fn outer(url: &str, extra: &[&str]) -> Client {
    let mut lines = vec![r#"headers = { Authorization = "Bearer ${UP_TOKEN}" }"#];
    lines.extend_from_slice(extra);
    outer_in(TestDir::new("outer"), url, &lines)
}

/// The outer gateway in `dir`, its `up` entry's lines after `url` being `lines`.
fn outer_in(dir: TestDir, url: &str, lines: &[&str]) -> Client {
    let config = config().remote("up", url, lines).render(&dir.path);
    let path = dir.write("gateway.toml", &config);
    let path = path.to_str().unwrap().to_string();
    let mut client =
        Client::spawn_with_env(&["serve", "--config", &path], dir, &[("UP_TOKEN", TOKEN)]);
    client.initialize();
    client
}

/// The `up` server's `last_error` in `gateway_status`, once it has one.
fn last_error(client: &mut Client) -> String {
    eventually(TIMEOUT, "a last_error for `up` in gateway_status", || {
        let status = client.status();
        status["backends"]["up"]["last_error"]
            .as_str()
            .map(str::to_string)
    })
}

/// The inner gateway fronting a WASM plugin as well: its names, progress (with messages),
/// error results and `isError` results survive both hops.
#[test]
fn a_wasm_plugin_behind_a_remote_gateway() {
    let plugins = TestDir::new("plugins");
    std::fs::write(plugins.join("echo.wasm"), crate::harness::fixture("echo")).unwrap();
    let path = |name: &str| crate::harness::toml_str(plugins.join(name).to_str().unwrap());
    let extra = format!(
        "[http]\ntokens = [{{ name = \"outer\", token = \"${{INNER_TOKEN}}\" }}]\n\n[plugins]\ndir = {}\ncache_dir = {}\n",
        crate::harness::toml_str(plugins.path.to_str().unwrap()),
        path("cache"),
    );
    let inner = HttpGateway::start(&with_example(&extra), &[("INNER_TOKEN", TOKEN)]);
    let mut client = outer(&inner.url("/mcp"), &[]);
    client.wait_ready();
    // The plugin may load after the outer gateway's first look: list_changed brings it.
    eventually(crate::harness::LOAD_TIMEOUT, "up__echo__progress", || {
        client.try_notification(
            "notifications/tools/list_changed",
            Duration::from_millis(200),
        );
        client
            .tool_names()
            .contains(&"up__echo__progress".to_string())
            .then_some(())
    });
    let echo = client.call("up__echo__echo", json!({"text": "through two hops"}));
    assert_eq!(text(&echo), "through two hops", "{echo}");

    let id = client.send_request(
        "tools/call",
        json!({"name": "up__echo__progress", "arguments": {"steps": 3}, "_meta": {"progressToken": "w"}}),
    );
    let (before, response) = client.until_response(&id, TIMEOUT);
    let progress: Vec<&Value> = before
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| &m["params"])
        .collect();
    assert_eq!(progress.len(), 3, "{before:?}");
    for (i, step) in progress.iter().enumerate() {
        assert_eq!(step["progressToken"], "w", "{step}");
        assert_eq!(step["progress"], i as f64 + 1.0, "{step}");
        assert_eq!(step["total"], 3.0, "{step}");
        assert_eq!(step["message"], format!("step {} of 3", i + 1), "{step}");
    }
    assert_eq!(text(&response["result"]), "done 3", "{response}");

    let failed = crate::harness::call_failed(&mut client, "up__echo__fail", json!({}));
    assert!(failed.contains("fail: requested failure"), "{failed}");
    let reported = crate::harness::call_failed(&mut client, "up__echo__is_error", json!({}));
    assert_eq!(reported, "is_error: reported error");
    // Worded by the inner gateway, with the name it knows the tool by.
    let invalid = crate::harness::call_failed(&mut client, "up__echo__bad_args", json!({}));
    assert!(
        invalid.starts_with("Invalid arguments for tool echo__bad_args: bad_args: rejected"),
        "{invalid}"
    );
    // Arguments against the plugin's schema: refused by the outer gateway already.
    let refused = client.call_invalid("up__echo__echo", json!({"text": 5}));
    assert!(refused.contains("text"), "{refused}");
}

/// Names, calls, `isError` results, JSON-RPC errors, progress and sampling survive both
/// hops; the header with `${UP_TOKEN}` reached the inner gateway (its event names the token).
#[test]
fn a_remote_gateway_serves_through_both_hops() {
    let inner = inner();
    let mut client = outer(&inner.url("/mcp"), &[]);
    client.wait_ready();
    let names = client.tool_names();
    assert!(names.contains(&"up__ex__echo".to_string()), "{names:?}");
    assert!(
        names.contains(&"up__gateway_status".to_string()),
        "{names:?}"
    );

    let echo = client.call("up__ex__echo", json!({"text": "hi"}));
    assert_eq!(text(&echo), "hi", "{echo}");
    let failed = client.call("up__ex__fail", json!({}));
    assert_eq!(failed["isError"], true, "{failed}");
    let error = client.error(
        "tools/call",
        json!({"name": "up__ex__error", "arguments": {"code": -32042, "message": "boom"}}),
    );
    assert_eq!(error["code"], -32042, "{error}");
    assert!(
        error["message"].as_str().unwrap().contains("boom"),
        "{error}"
    );

    let id = client.send_request(
        "tools/call",
        json!({"name": "up__ex__slow", "arguments": {"ms": 150}, "_meta": {"progressToken": "p-1"}}),
    );
    let (before, response) = client.until_response(&id, TIMEOUT);
    let steps: Vec<u64> = before
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| {
            assert_eq!(m["params"]["progressToken"], "p-1", "{m}");
            m["params"]["progress"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(steps, [1, 2, 3], "{before:?}");
    assert_eq!(text(&response["result"]), "slept 150 ms");

    let id = client.send_request(
        "tools/call",
        json!({"name": "up__ex__sample", "arguments": {"prompt": "say hi"}}),
    );
    let asked = client.next_client_request(TIMEOUT);
    assert_eq!(asked["method"], "sampling/createMessage", "{asked}");
    assert_eq!(asked["params"]["messages"][0]["content"]["text"], "say hi");
    client.respond(
        asked["id"].clone(),
        json!({"role": "assistant", "content": {"type": "text", "text": "sampled"}, "model": "m", "stopReason": "endTurn"}),
    );
    let sampled = client.wait_response(&id, TIMEOUT);
    assert_eq!(text(&sampled["result"]), "sampled", "{sampled}");

    let events = client.call("up__get_events", json!({"event_type": "tool.called"}));
    let events: Value = serde_json::from_str(text(&events)).unwrap();
    assert_eq!(events[0]["token"], "outer", "{events}");

    // A list change of the example server crosses both hops (the inner gateway sends it on
    // the outer one's `subscriptions/listen`); the outer gateway fetches the list again.
    assert_eq!(
        text(&client.call("up__ex__notify_changed", json!({}))),
        "changed"
    );
    eventually(TIMEOUT, "up__ex__late_tool to be listed", || {
        client.try_notification(
            "notifications/tools/list_changed",
            Duration::from_millis(200),
        );
        client
            .tool_names()
            .contains(&"up__ex__late_tool".to_string())
            .then_some(())
    });

    let status = client.status();
    assert_eq!(status["backends"]["up"]["kind"], "remote", "{status}");
    assert_eq!(status["backends"]["up"]["status"], "ready", "{status}");
    assert!(
        !client.stderr().contains(TOKEN),
        "the token is never logged"
    );
}

/// A disabled remote server is listed as what it is, as an enabled one is.
#[test]
fn a_disabled_remote_server_shows_as_remote() {
    let mut client = outer_in(
        TestDir::new("disabled-remote"),
        "http://127.0.0.1:9/mcp",
        &["disabled = true"],
    );
    let status = client.status();
    assert_eq!(status["backends"]["up"]["status"], "disabled", "{status}");
    assert_eq!(status["backends"]["up"]["kind"], "remote", "{status}");
}

/// With one connection for requests, a call that waits on the client's sampling answer
/// still gets it: the answer goes to the server aside from the connection the call holds.
#[test]
fn a_clients_answer_reaches_the_server_with_one_connection() {
    let inner = inner();
    let mut client = outer(&inner.url("/mcp"), &["max_connections = 1"]);
    client.wait_ready();
    let id = client.send_request(
        "tools/call",
        json!({"name": "up__ex__sample", "arguments": {"prompt": "one"}}),
    );
    let asked = client.next_client_request(TIMEOUT);
    client.respond(
        asked["id"].clone(),
        json!({"role": "assistant", "content": {"type": "text", "text": "through"}, "model": "m"}),
    );
    let sampled = client.wait_response(&id, TIMEOUT);
    assert_eq!(text(&sampled["result"]), "through", "{sampled}");
}

/// Over the legacy HTTP+SSE transport, named or found by `auto` after the server refused
/// a Streamable HTTP `initialize`: calls, progress and sampling survive both hops.
#[test]
fn a_remote_gateway_over_the_legacy_sse_transport() {
    let inner = inner();
    for transport in ["sse", "auto"] {
        let line = format!("transport = \"{transport}\"");
        let mut client = outer(&inner.url("/sse"), &[&line]);
        client.wait_ready();
        let echo = client.call("up__ex__echo", json!({"text": transport}));
        assert_eq!(text(&echo), transport, "{echo}");
        let id = client.send_request(
            "tools/call",
            json!({"name": "up__ex__slow", "arguments": {"ms": 100}, "_meta": {"progressToken": 7}}),
        );
        let (before, response) = client.until_response(&id, TIMEOUT);
        assert!(
            before
                .iter()
                .any(|m| m["method"] == "notifications/progress"),
            "{transport}: {before:?}"
        );
        assert_eq!(text(&response["result"]), "slept 100 ms");
        let id = client.send_request(
            "tools/call",
            json!({"name": "up__ex__sample", "arguments": {"prompt": "legacy"}}),
        );
        let asked = client.next_client_request(TIMEOUT);
        client.respond(
            asked["id"].clone(),
            json!({"role": "assistant", "content": {"type": "text", "text": "old"}, "model": "m"}),
        );
        let sampled = client.wait_response(&id, TIMEOUT);
        assert_eq!(text(&sampled["result"]), "old", "{transport}: {sampled}");
        if transport == "auto" {
            assert!(
                client.stderr().contains("trying the legacy SSE transport"),
                "{}",
                client.stderr()
            );
        }
    }
}

/// Killed mid-call, the call fails at once naming the server; restarted on the same
/// port, the gateway opens a new session and the next call succeeds.
#[test]
fn a_remote_server_killed_and_restarted() {
    let mut inner = inner();
    let addr = inner.addr;
    let mut client = outer(&inner.url("/mcp"), &[r#"timeout = "20s""#]);
    client.wait_ready();
    // Its first progress (after a third of the time) says the call reached the server.
    let id = client.send_request(
        "tools/call",
        json!({"name": "up__ex__slow", "arguments": {"ms": 6000}, "_meta": {"progressToken": "k"}}),
    );
    client.next_notification("notifications/progress", TIMEOUT);
    let killed = Instant::now();
    inner.kill();
    let response = client.wait_response(&id, TIMEOUT);
    assert!(
        killed.elapsed() < Duration::from_secs(3),
        "at once, not at the timeout"
    );
    assert_eq!(response["error"]["code"], -32000, "{response}");
    assert!(
        response["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`up`"),
        "{response}"
    );

    // While it is away: at once, naming it, and its tools still listed.
    let error = client.error(
        "tools/call",
        json!({"name": "up__ex__echo", "arguments": {"text": "x"}}),
    );
    assert_eq!(error["code"], -32000, "{error}");
    assert!(client.tool_names().contains(&"up__ex__echo".to_string()));
    let status = client.status();
    assert!(
        status["backends"]["up"]["last_error"]
            .as_str()
            .is_some_and(|e| e.starts_with("reconnecting")),
        "{status}"
    );

    let path = inner.dir.join("gateway.toml");
    let (child, bound) = spawn(
        &path,
        &inner.dir,
        &addr.to_string(),
        &[("INNER_TOKEN", TOKEN)],
    );
    assert_eq!(bound, Some(addr), "{}", inner.stderr());
    let _restarted = Restarted(child);
    eventually(Duration::from_secs(30), "a call after the restart", || {
        let id = client.send_request(
            "tools/call",
            json!({"name": "up__ex__echo", "arguments": {"text": "back"}}),
        );
        let response = client.wait_response(&id, TIMEOUT);
        (response["result"]["content"][0]["text"] == "back").then_some(())
    });
    for event in ["backend.disconnected", "backend.reconnected"] {
        let events = client.call("get_events", json!({"event_type": event}));
        assert!(text(&events).contains("\"up\""), "{event}: {events}");
    }
}

/// A call past its timeout fails with the timeout error, and the remote server is told
/// with `notifications/cancelled` (the inner gateway records the call as cancelled).
#[test]
fn a_timed_out_call_is_cancelled_on_the_remote_server() {
    let inner = inner();
    let mut client = outer(
        &inner.url("/mcp"),
        &[r#"tool_timeouts = { "ex__slow" = "300ms" }"#],
    );
    client.wait_ready();
    let started = Instant::now();
    let error = client.error(
        "tools/call",
        json!({"name": "up__ex__slow", "arguments": {"ms": 5000}}),
    );
    assert_eq!(error["code"], -32001, "{error}");
    assert!(started.elapsed() < Duration::from_secs(3));
    eventually(
        TIMEOUT,
        "the inner gateway to record the cancellation",
        || {
            let events = client.call("up__get_events", json!({"event_type": "tool.called"}));
            let events: Value = serde_json::from_str(text(&events)).ok()?;
            let slow = events
                .as_array()?
                .iter()
                .find(|e| e["tool"] == "ex__slow")?
                .clone();
            (slow["cancelled"] == true).then_some(())
        },
    );
    let echo = client.call("up__ex__echo", json!({"text": "still here"}));
    assert_eq!(text(&echo), "still here", "{echo}");
}

/// HTTPS to a server whose certificate a private CA signed: refused with the webpki and
/// the machine's roots alone, served once `ca_file` trusts it, or the platform's store.
#[test]
fn https_with_a_private_ca() {
    let certs = TestDir::new("tls");
    make_ca_and_certificate(&certs);
    let cert = certs.join("cert.pem");
    let extra = format!(
        "[http]\ntls_cert = {}\ntls_key = {}",
        crate::harness::toml_str(cert.to_str().unwrap()),
        crate::harness::toml_str(certs.join("key.pem").to_str().unwrap()),
    );
    let inner = HttpGateway::start(&with_example(&extra), &[]);
    let url = format!("https://localhost:{}/mcp", inner.addr.port());

    let mut refused = outer_in(TestDir::new("outer"), &url, &[]);
    let last_error = last_error(&mut refused);
    assert!(last_error.contains("TLS"), "{last_error}");

    let line = format!(
        "ca_file = {}",
        crate::harness::toml_str(certs.join("ca.pem").to_str().unwrap())
    );
    let mut client = outer_in(TestDir::new("outer"), &url, &[&line]);
    client.wait_ready();
    let echo = client.call("up__ex__echo", json!({"text": "over tls"}));
    assert_eq!(text(&echo), "over tls", "{echo}");

    // The platform's store, here the file `SSL_CERT_FILE` names, is trusted as well.
    let dir = TestDir::new("outer");
    let config = config().remote("up", &url, &[]).render(&dir.path);
    let path = dir.write("gateway.toml", &config);
    let store = certs.join("ca.pem");
    let env = [("SSL_CERT_FILE", store.to_str().unwrap())];
    let mut client =
        Client::spawn_with_env(&["serve", "--config", path.to_str().unwrap()], dir, &env);
    client.initialize();
    client.wait_ready();
    let echo = client.call("up__ex__echo", json!({"text": "platform roots"}));
    assert_eq!(text(&echo), "platform roots", "{echo}");
}

/// A private CA (`ca.pem`) and a certificate it signed for `localhost` and 127.0.0.1
/// (`cert.pem`, `key.pem`), made by openssl in `certs`.
pub(crate) fn make_ca_and_certificate(certs: &TestDir) {
    let openssl = |args: &[&str]| {
        let status = std::process::Command::new("openssl")
            .args(args)
            .current_dir(&certs.path)
            .stdout(std::process::Stdio::null())
            .status();
        assert!(status.is_ok_and(|s| s.success()), "openssl {args:?}");
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    openssl(
        &[
            &["req", "-x509"],
            &ec[..],
            &[
                "-days",
                "1",
                "-subj",
                "/CN=wasmgate test CA",
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
            ],
        ]
        .concat(),
    );
    openssl(
        &[
            &["req", "-new"],
            &ec[..],
            &[
                "-subj",
                "/CN=localhost",
                "-keyout",
                "key.pem",
                "-out",
                "cert.csr",
            ],
        ]
        .concat(),
    );
    certs.write(
        "ext.cnf",
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
    );
    openssl(&[
        "x509",
        "-req",
        "-in",
        "cert.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        "ext.cnf",
        "-out",
        "cert.pem",
    ]);
}

/// A token in `bearer_token_file` is read again when the file changes: refused at first
/// (401 named in `gateway_status`), the session opens once the right token is written.
#[test]
fn a_bearer_token_file_is_read_again_when_it_changes() {
    let inner = inner();
    let dir = TestDir::new("outer");
    let file = dir.write("token", "a-wrong-token-0123456789\n");
    // Readable by its owner alone, as the gateway requires of a file holding a secret.
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let mut client = outer_in(
        dir,
        &inner.url("/mcp"),
        &[r#"bearer_token_file = "{dir}/token""#],
    );
    let last_error = last_error(&mut client);
    assert!(last_error.contains("401"), "{last_error}");
    std::fs::write(&file, format!("{TOKEN}\n")).unwrap();
    client.wait_ready();
    let echo = client.call("up__ex__echo", json!({"text": "in"}));
    assert_eq!(text(&echo), "in", "{echo}");
}

/// Kills the restarted inner gateway at the end of the test.
struct Restarted(std::process::Child);

impl Drop for Restarted {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An HTML error page where the MCP endpoint should be: a clear error naming the server
/// in `gateway_status`.
#[test]
fn an_html_error_page_is_a_clear_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut buffer = [0u8; 4096];
            let _ = stream.read(&mut buffer);
            let body = "<html><body><h1>502 Bad Gateway</h1></body></html>";
            let _ = write!(
                stream,
                "HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    let mut client = outer(&format!("http://{addr}/mcp"), &[]);
    let last_error = last_error(&mut client);
    assert!(
        last_error.contains("502") && last_error.contains("Bad Gateway"),
        "{last_error}"
    );
    let error = client.error(
        "tools/call",
        json!({"name": "up__anything", "arguments": {}}),
    );
    assert!(error["message"].is_string(), "{error}");
}

/// `check` shows the URL and header names, never a header's value.
#[test]
fn check_does_not_print_header_values() {
    let dir = TestDir::new("check");
    let config = config()
        .remote(
            "up",
            "http://127.0.0.1:9/mcp",
            &[r#"headers = { Authorization = "Bearer ${UP_TOKEN}", X-Static = "plain-secret-value" }"#],
        )
        .render(&dir.path);
    let path = dir.write("gateway.toml", &config);
    let out = run_cli_with_env(
        &["check", "--config", path.to_str().unwrap()],
        &dir.path,
        &[("UP_TOKEN", TOKEN)],
        TIMEOUT,
    );
    let shown = format!("{}{}", out.stdout, out.stderr);
    assert!(out.status.success(), "{shown}");
    assert!(shown.contains("http://127.0.0.1:9/mcp"), "{shown}");
    assert!(shown.contains("Authorization"), "{shown}");
    assert!(
        !shown.contains(TOKEN) && !shown.contains("plain-secret-value"),
        "{shown}"
    );
}

/// The reference "everything" server in its Streamable HTTP mode, killed when dropped.
pub(crate) struct Everything(std::process::Child);

impl Drop for Everything {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `mcp-server-everything MODE` (`streamableHttp`, `sse`) on a free port; its URL.
pub(crate) fn everything_over_http(dir: &TestDir, mode: &str) -> Option<(Everything, String)> {
    let command = crate::third_party::everything_server()?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let log = dir.join("everything.stderr");
    let child = std::process::Command::new(command)
        .arg(mode)
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start the everything server");
    let server = Everything(child);
    eventually(TIMEOUT, "the everything server to listen", || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        (text.contains("listening") || text.contains("running")).then_some(())
    });
    let path = if mode == "sse" { "sse" } else { "mcp" };
    Some((server, format!("http://127.0.0.1:{port}/{path}")))
}

/// The reference server over Streamable HTTP: its lists (tools it adds after seeing the
/// gateway's capabilities arrive with list_changed), calls, progress and sampling.
#[test]
fn the_everything_server_over_streamable_http() {
    everything_through_the_gateway("streamableHttp", "streamable-http");
}

/// The same over its legacy SSE mode, found by `auto`.
#[test]
fn the_everything_server_over_sse() {
    everything_through_the_gateway("sse", "auto");
}

fn everything_through_the_gateway(mode: &str, transport: &str) {
    let dir = TestDir::new("everything");
    let Some((_server, url)) = everything_over_http(&dir, mode) else {
        return;
    };
    let line = format!("transport = \"{transport}\"");
    let mut client = outer_in(TestDir::new("outer"), &url, &[&line]);
    client.wait_ready();
    let echo = client.call("up__echo", json!({"message": "over http"}));
    assert_eq!(text(&echo), "Echo: over http", "{echo}");

    crate::third_party::wait_for_tool(&mut client, "up__trigger-long-running-operation");
    let result = client.result(
        "tools/call",
        json!({"name": "up__trigger-long-running-operation", "arguments": {"duration": 1, "steps": 3},
               "_meta": {"progressToken": "every-progress"}}),
    );
    assert!(text(&result).contains("completed"), "{result}");
    let progress = client.next_notification("notifications/progress", Duration::from_secs(5));
    assert_eq!(
        progress["params"]["progressToken"], "every-progress",
        "{progress}"
    );

    crate::third_party::wait_for_tool(&mut client, "up__trigger-sampling-request");
    let id = client.send_request(
        "tools/call",
        json!({"name": "up__trigger-sampling-request", "arguments": {"prompt": "what is 2+2", "maxTokens": 20}}),
    );
    // It asks for the client's roots (on its GET stream) as well.
    let request = loop {
        let request = client.next_client_request(TIMEOUT);
        if request["method"] != "roots/list" {
            break request;
        }
        client.respond(request["id"].clone(), json!({"roots": []}));
    };
    assert_eq!(request["method"], "sampling/createMessage", "{request}");
    client.respond(
        request["id"].clone(),
        json!({"role": "assistant", "content": {"type": "text", "text": "four"}, "model": "test", "stopReason": "endTurn"}),
    );
    let response = client.wait_response(&id, TIMEOUT);
    assert!(text(&response["result"]).contains("four"), "{response}");
}
