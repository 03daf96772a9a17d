//! The sandbox: only what the config grants (folders, variables, hosts), and large
//! structured output passed on without being built.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::json;

use crate::harness::{
    TIMEOUT, TestDir, call_failed, call_ok, eventually, first_list, fixture, has, setup, text,
};

// ---- 4. sandbox ----

/// A one-page HTTP/1.1 server on 127.0.0.1 that counts its connections.
pub(crate) struct HttpServer {
    pub port: u16,
    pub hits: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

pub(crate) const PAGE: &str = "hello from the test server";

impl HttpServer {
    pub(crate) fn start() -> HttpServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        let hits = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (counted, stopped) = (hits.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(mut stream) = stream else { continue };
                counted.fetch_add(1, Ordering::SeqCst);
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let mut request = Vec::new();
                let mut chunk = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => request.extend_from_slice(&chunk[..n]),
                    }
                }
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{PAGE}",
                    PAGE.len()
                );
                let _ = stream.write_all(response.as_bytes());
            }
        });
        HttpServer {
            port,
            hits,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so that it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[test]
fn big_structured_output_is_passed_on_without_being_built() {
    // Built in memory, each JSON value takes 80 bytes or more: 16 MiB of zeros took 837 MB,
    // 6.3 GB for 8 calls at once. Without an output schema, structured output is read
    // through as text and passed on as it is; one a schema checks may hold 250,000 values.
    let (mut client, _) = setup()
        .file("faulty.wasm", fixture("faulty"))
        .start_listed();
    let before = client.peak_rss();
    let result = call_ok(&mut client, "faulty__numbers", json!({"n": 3_000_000}));
    let grown = client.peak_rss().saturating_sub(before);
    assert_eq!(text(&result), "numbers");
    let zeros = result["structuredContent"]["a"]
        .as_array()
        .expect("the zeros");
    assert!(zeros.len() == 3_000_000 && zeros.iter().all(|z| z == 0));
    assert!(
        grown < 150 << 20,
        "6 MB of structured output took the gateway's peak memory up {} MiB",
        grown >> 20
    );

    let checked = call_ok(&mut client, "faulty__checked_numbers", json!({"n": 1000}));
    assert_eq!(
        checked["structuredContent"]["a"].as_array().map(Vec::len),
        Some(1000)
    );
    let message = call_failed(
        &mut client,
        "faulty__checked_numbers",
        json!({"n": 300_000}),
    );
    assert_eq!(
        message,
        "plugin `faulty` tool `checked_numbers` returned structured output too costly to \
         check: up to 300003 JSON values, each built in memory to be checked against its \
         output schema (at most 250000)"
    );
}

#[test]
fn the_sandbox_grants_only_what_the_config_names() {
    let server = HttpServer::start();
    let echo = fixture("echo");
    // `echo` has grants; `bare` (the same component) has none.
    let setup = setup()
        .file("echo.wasm", echo.clone())
        .file("bare.wasm", echo)
        .folder("data")
        .folder("out")
        .plugins(&format!(
            "[plugins.echo]\n\
             allow_dirs = [{{ host = \"{{dir}}/data\", guest = \"/data\", mode = \"ro\" }},\n\
                           {{ host = \"{{dir}}/out\", guest = \"/out\", mode = \"rw\" }}]\n\
             allow_env = [\"WASMGATE_TEST_GRANTED\"]\n\
             allow_hosts = [\"127.0.0.1:{}\"]",
            server.port
        ))
        .env("WASMGATE_TEST_GRANTED", "granted value")
        .env("WASMGATE_TEST_SECRET", "secret value");
    let dir = TestDir::new("sandbox");
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::write(dir.join("data/notes.txt"), "granted notes").unwrap();
    std::fs::write(dir.join("outside.txt"), "outside the grant").unwrap();
    std::os::unix::fs::symlink(dir.join("outside.txt"), dir.join("data/link.txt")).unwrap();
    let config = setup.write(&dir.path);
    let outside = dir.join("outside.txt").to_str().unwrap().to_string();
    let mut client = setup.spawn(&config, dir);
    let names = first_list(&mut client);
    assert!(
        has(&names, "echo__read") && has(&names, "bare__read"),
        "{names:?}"
    );

    // Files: nothing without a grant.
    for path in ["/data/notes.txt", outside.as_str(), "/etc/passwd", "/"] {
        let message = call_failed(&mut client, "bare__read", json!({"path": path}));
        assert!(message.contains(&format!("read {path}")), "{message}");
    }
    // A read-only grant: reads work, writes and escapes do not.
    assert_eq!(
        text(&call_ok(
            &mut client,
            "echo__read",
            json!({"path": "/data/notes.txt"})
        )),
        "granted notes"
    );
    call_failed(
        &mut client,
        "echo__write",
        json!({"path": "/data/new.txt", "text": "x"}),
    );
    call_failed(
        &mut client,
        "echo__write",
        json!({"path": "/data/notes.txt", "text": "overwritten"}),
    );
    for path in [
        "/data/../outside.txt",
        "/data/../../etc/passwd",
        "/data/link.txt",
        outside.as_str(),
    ] {
        let message = call_failed(&mut client, "echo__read", json!({"path": path}));
        assert!(!message.contains("outside the grant"), "{path}: {message}");
    }
    // A read-write grant: the file lands in the host folder.
    assert_eq!(
        text(&call_ok(
            &mut client,
            "echo__write",
            json!({"path": "/out/result.txt", "text": "written"})
        )),
        "wrote 7"
    );
    let data = client.dir.join("data");
    assert_eq!(
        std::fs::read_to_string(data.join("notes.txt")).unwrap(),
        "granted notes"
    );
    assert!(!data.join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(client.dir.join("out/result.txt")).unwrap(),
        "written"
    );
    call_failed(
        &mut client,
        "echo__write",
        json!({"path": "/out/../escaped.txt", "text": "x"}),
    );
    assert!(!client.dir.join("escaped.txt").exists());

    // Environment: only the granted variable, with the gateway's value.
    assert_eq!(
        text(&call_ok(
            &mut client,
            "echo__env",
            json!({"name": "WASMGATE_TEST_GRANTED"})
        )),
        "granted value"
    );
    for name in ["WASMGATE_TEST_SECRET", "PATH", "HOME"] {
        assert_eq!(
            text(&call_ok(&mut client, "echo__env", json!({"name": name}))),
            "unset",
            "{name}"
        );
    }
    assert_eq!(
        text(&call_ok(
            &mut client,
            "bare__env",
            json!({"name": "WASMGATE_TEST_GRANTED"})
        )),
        "unset"
    );

    // Network: refused before any connection without the grant, served with it.
    let url = format!("http://127.0.0.1:{}/page", server.port);
    let message = call_failed(&mut client, "bare__http", json!({"url": url}));
    assert!(message.to_lowercase().contains("denied"), "{message}");
    assert!(message.contains("allow_hosts"), "{message}");
    assert_eq!(
        server.hits.load(Ordering::SeqCst),
        0,
        "the denied request reached the server"
    );
    let result = call_ok(&mut client, "echo__http", json!({"url": url}));
    assert_eq!(result["structuredContent"]["status"], 200, "{result}");
    assert_eq!(result["structuredContent"]["body"], PAGE, "{result}");
    assert_eq!(server.hits.load(Ordering::SeqCst), 1);
    // Another port of the same host is not granted.
    let message = call_failed(
        &mut client,
        "echo__http",
        json!({"url": format!("http://127.0.0.1:{}/", server.port.checked_add(1).unwrap_or(1))}),
    );
    assert!(message.to_lowercase().contains("denied"), "{message}");

    // A plugin's stdout and stderr go to the gateway's log, never to the MCP stream
    // (the client checks that every stdout line is JSON-RPC); `host.log` too.
    let marker = "plugin-stdout-marker-5d1e";
    assert_eq!(
        text(&call_ok(
            &mut client,
            "echo__stdout",
            json!({"text": marker})
        )),
        "printed"
    );
    assert_eq!(
        text(&call_ok(
            &mut client,
            "echo__log",
            json!({"message": "plugin-log-marker-77a0"})
        )),
        "logged"
    );
    client.result("ping", json!({}));
    let (out_lines, log_lines) = eventually(
        TIMEOUT,
        "the plugin's output in the gateway's stderr",
        || {
            let stderr = client.stderr();
            let out: Vec<String> = stderr
                .lines()
                .filter(|l| l.contains(marker))
                .map(str::to_string)
                .collect();
            let log: Vec<String> = stderr
                .lines()
                .filter(|l| l.contains("plugin-log-marker-77a0"))
                .map(str::to_string)
                .collect();
            (out.len() >= 2 && log.len() >= 3).then_some((out, log))
        },
    );
    assert!(
        out_lines.iter().all(|l| l.contains("echo")),
        "{out_lines:?}"
    );
    assert!(
        log_lines.iter().all(|l| l.contains("echo")),
        "{log_lines:?}"
    );
}
