//! The status page at `/ui`: in headless Chromium (Debian's, driven by playwright-core
//! from tests/gateway/fixtures/ui_check.cjs) against a gateway serving HTTP, and the admin
//! listener of a stdio gateway (`serve --admin`) over plain HTTP.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::{
    Client, TestDir, config, eventually, fixture, sha256_hex, shipped, shipped_path,
};
use crate::http_client::HttpGateway;

const OPERATOR_TOKEN: &str = "ops-0123456789abcdef-secret";
const MCP_TOKEN: &str = "ci-0123456789abcdef-secret";

/// Where scripts/test.sh installs playwright-core.
fn playwright_modules() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-tools/ui/node_modules")
}

#[test]
fn the_status_page_in_chromium_follows_the_gateway_live() {
    let Ok(chromium) = std::env::var("WASMGATE_CHROMIUM") else {
        eprintln!(
            "skipping the Chromium test of /ui: WASMGATE_CHROMIUM is unset (scripts/test.sh \
             installs Debian's chromium and sets it)"
        );
        return;
    };
    let modules = playwright_modules();
    assert!(
        modules.join("playwright-core").is_dir(),
        "{} has no playwright-core: scripts/test.sh installs it",
        modules.display()
    );
    let dir = TestDir::new("ui");
    let gateway_config = config()
        .example("ex", &[])
        .file("echo.wasm", fixture("echo"));
    gateway_config.write(&dir.path);
    let text = format!(
        "{}\n[http]\ntokens = [\n  {{ name = \"ops\", token = \"{OPERATOR_TOKEN}\", scopes = [\"operator\"] }},\n  \
         {{ name = \"ci\", token = \"{MCP_TOKEN}\" }},\n]\n",
        gateway_config.render(&dir.path)
    );
    let plugin_file = dir.join("plugins/echo.wasm");
    let gateway = HttpGateway::start_in(dir, &text, &[]);
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ui-shots");
    let args = json!({
        "base": gateway.url(""),
        "token": OPERATOR_TOKEN,
        "mcp_token": MCP_TOKEN,
        "server": "ex",
        "tool": "ex__echo",
        "plugin": "echo",
        "plugin_file": plugin_file,
        "replacement": shipped_path("hash"),
        "new_digest": sha256_hex(&shipped("hash")),
        "shots": shots,
    });
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gateway/fixtures/ui_check.cjs");
    let mut child = Command::new("node")
        .arg(&script)
        .arg(args.to_string())
        .env("NODE_PATH", &modules)
        .env("WASMGATE_CHROMIUM", &chromium)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run node (scripts/test.sh needs it for npm too)");
    let deadline = Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for node") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the Chromium check took over 300 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut out = String::new();
    let mut err = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(
        status.success() && out.contains("all checks passed"),
        "{out}\n{err}\ngateway:\n{}",
        gateway.stderr()
    );
    for check in [
        "GET /ui/status.json without a login is refused",
        "GET /ui/events without a login is refused",
        "a cross-origin login POST is refused",
        "the page shows the server and the plugin",
        "a call by another client shows within a second",
        "the plugin's new version shows after a hot reload",
        "no console errors",
        "after logout the old cookie is refused",
    ] {
        assert!(
            out.contains(&format!("ok: {check}")),
            "missing `{check}`:\n{out}"
        );
    }
    for shot in ["ui-1280.png", "ui-390.png"] {
        assert!(shots.join(shot).is_file(), "no screenshot {shot}");
    }
    let stderr = gateway.stderr();
    assert!(
        !stderr.contains(OPERATOR_TOKEN),
        "the token reached the log:\n{stderr}"
    );
}

/// A raw HTTP/1.1 exchange: the status, the head, the body.
fn exchange(addr: SocketAddr, request: &str) -> (u16, String, String) {
    let mut stream = TcpStream::connect(addr).expect("connect to the admin listener");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

/// `POST /ui/login` with `token`, from `origin`.
fn post_login(addr: SocketAddr, origin: &str, token: &str) -> (u16, String, String) {
    let form = format!("token={token}");
    exchange(
        addr,
        &format!(
            "POST /ui/login HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nOrigin: {origin}\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{form}",
            form.len()
        ),
    )
}

/// Logs in with `token` from the page's own origin; the `NAME=VALUE` of the cookie set.
fn login(addr: SocketAddr, token: &str) -> String {
    let (status, head, _) = post_login(addr, &format!("http://{addr}"), token);
    assert_eq!(status, 303, "{head}");
    head.lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .expect("a cookie")
        .split(';')
        .next()
        .unwrap()
        .to_string()
}

/// An open live feed does not hold the gateway past its stop: the stream ends with it
/// (else the front would wait `shutdown_grace` for the connection).
#[test]
fn an_open_feed_ends_when_the_gateway_stops() {
    let text = format!(
        "{}\n[http]\ntokens = [{{ name = \"ops\", token = \"{OPERATOR_TOKEN}\", scopes = [\"operator\"] }}]\n",
        crate::harness::Config::default()
            .gateway("shutdown_grace = \"30s\"")
            .example("ex", &[])
            .render(Path::new("{dir}"))
    );
    let mut gateway = HttpGateway::start(&text, &[]);
    let cookie = login(gateway.addr, OPERATOR_TOKEN);
    let mut feed = TcpStream::connect(gateway.addr).unwrap();
    feed.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let addr = gateway.addr;
    feed.write_all(
        format!("GET /ui/events HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\nCookie: {cookie}\r\n\r\n")
            .as_bytes(),
    )
    .unwrap();
    let mut head = [0u8; 12];
    feed.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200", "the feed opens");
    let stopped = Instant::now();
    let status = gateway.terminate(Duration::from_secs(15));
    assert!(
        status.is_some(),
        "the gateway still runs {:?} after SIGTERM with a feed open:\n{}",
        stopped.elapsed(),
        gateway.stderr()
    );
}

#[test]
fn the_admin_listener_serves_the_page_and_metrics_for_a_stdio_gateway() {
    let dir = TestDir::new("admin");
    let path = config().example("ex", &[]).write(&dir.path);
    let path = path.to_str().unwrap().to_string();
    let mut client = Client::spawn(&["serve", "--config", &path, "--admin", "127.0.0.1:0"], dir);
    client.initialize();
    let (addr, token) = eventually(Duration::from_secs(30), "the admin listener's line", || {
        let stderr = client.stderr();
        let line = stderr
            .lines()
            .find(|l| l.contains("status page at http://"))?;
        let rest = line.split("http://").nth(1)?;
        let addr: SocketAddr = rest.split('/').next()?.parse().ok()?;
        let token = rest
            .split("log in with token ")
            .nth(1)?
            .trim_end_matches(')')
            .to_string();
        Some((addr, token))
    });
    let host = format!("Host: {addr}\r\nConnection: close\r\n");
    let (status, _, _) = exchange(addr, &format!("GET /ui/status.json HTTP/1.1\r\n{host}\r\n"));
    assert_eq!(status, 401, "no login");
    let (status, head, _) = post_login(addr, "http://evil.example", &token);
    assert_eq!(status, 403, "cross-origin: {head}");
    let cookie = login(addr, &token);
    assert!(!cookie.contains(&token), "{cookie}");
    // A page of another site cannot read it with the cookie, were the browser to send it.
    let (status, _, _) = exchange(
        addr,
        &format!(
            "GET /ui/status.json HTTP/1.1\r\n{host}Cookie: {cookie}\r\nSec-Fetch-Site: cross-site\r\n\r\n"
        ),
    );
    assert_eq!(status, 403, "cross-site");
    let (status, head, body) = exchange(
        addr,
        &format!("GET /ui/status.json HTTP/1.1\r\n{host}Cookie: {cookie}\r\n\r\n"),
    );
    assert_eq!(status, 200, "{head}");
    let status_json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(status_json["backends"]["ex"]["kind"], "process", "{body}");
    assert_eq!(status_json["ui"]["principal"], "admin", "{body}");
    // The stdio client, by the name it gave: the one client of this gateway.
    let sessions = &status_json["ui"]["sessions"];
    assert_eq!(
        *sessions,
        serde_json::json!([{"token": null, "profile": null, "client": "wasmgate-tests", "count": 1}]),
        "{body}"
    );
    let (status, _, body) = exchange(
        addr,
        &format!("GET /metrics HTTP/1.1\r\n{host}Authorization: Bearer {token}\r\n\r\n"),
    );
    assert_eq!(status, 200, "{body}");
    // The MCP endpoints are not on it.
    let (status, _, _) = exchange(addr, &format!("GET /mcp HTTP/1.1\r\n{host}\r\n"));
    assert_eq!(status, 404);
}

#[test]
fn the_admin_listener_refuses_an_address_beyond_loopback() {
    let dir = TestDir::new("admin-wide");
    let path = config().example("ex", &[]).write(&dir.path);
    let output = crate::harness::run_cli(
        &[
            "serve",
            "--config",
            path.to_str().unwrap(),
            "--admin",
            "0.0.0.0:0",
        ],
        &dir.path,
        Duration::from_secs(30),
    );
    output.assert_exit(1);
    let stderr = &output.stderr;
    assert!(stderr.contains("refusing --admin 0.0.0.0:0"), "{stderr}");
}
