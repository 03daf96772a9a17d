//! The HTTP front's connection bounds through the real binary: a client that sends its
//! request head slowly or not at all, or stalls its TLS handshake, is cut at `header_timeout`;
//! a kept-alive connection without a request at `idle_timeout`; past `max_connections`, idle
//! connections are closed first while sessions, their streams and `/healthz` go on.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::harness::TestDir;
use crate::http_client::{HttpGateway, runtime};
use crate::http_front::with_example;

/// Connections the gateway told to close for room that may still be open: a 64th of the
/// cap, at least one.
const CLOSING: usize = 1;

/// How late past its bound a connection may be closed on a busy machine.
const SLACK: Duration = Duration::from_secs(4);

/// Reads `stream` until the gateway closes it; whether it did within `limit`.
async fn closed_within(stream: &mut (impl AsyncReadExt + Unpin), limit: Duration) -> bool {
    let mut buf = [0u8; 4096];
    tokio::time::timeout(limit, async {
        while let Ok(1..) = stream.read(&mut buf).await {}
    })
    .await
    .is_ok()
}

/// Asserts that a connection was closed `took` after its bound started: no sooner than the
/// bound, at most [`SLACK`] later.
fn assert_cut_at(what: &str, took: Duration, bound: Duration) {
    assert!(
        took >= bound.mul_f32(0.9) && took <= bound + SLACK,
        "{what}: closed after {took:?}, the bound is {bound:?}"
    );
}

/// Sends `head` a byte every 100 ms until the gateway closes the connection; when it did.
async fn trickle(stream: TcpStream, head: &str) -> Option<Instant> {
    let (mut read, mut write) = stream.into_split();
    let send = async {
        for byte in head.bytes() {
            if write.write_all(&[byte]).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        std::future::pending::<()>().await;
    };
    tokio::select! {
        () = send => None,
        closed = closed_within(&mut read, Duration::from_secs(30)) => closed.then(Instant::now),
    }
}

/// A connection that sent a whole `POST /mcp` head and 10 bytes of its 1,000-byte body.
async fn stalled_body(addr: std::net::SocketAddr) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\ncontent-length: 1000\r\n\r\n{{\"jsonrpc\""
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
}

/// Slowloris: a connection that sends nothing, one that sends its first head a byte at a
/// time, and a kept-alive one that does so with its second head, are each closed
/// `header_timeout` after the head was due, long before `idle_timeout`; so is one whose
/// request body stops coming.
#[test]
fn a_request_head_sent_slowly_or_never_is_cut_at_header_timeout() {
    let bound = Duration::from_secs(1);
    let config = "[http]\nheader_timeout = \"1s\"\nidle_timeout = \"60s\"";
    let gateway = HttpGateway::start(&with_example(config), &[]);
    let head = format!(
        "GET /healthz HTTP/1.1\r\nhost: {}\r\nx-slow: {}\r\n\r\n",
        gateway.addr,
        "a".repeat(600)
    );
    runtime().block_on(async {
        let opened = Instant::now();
        let mut silent = TcpStream::connect(gateway.addr).await.unwrap();
        let slow = TcpStream::connect(gateway.addr).await.unwrap();
        let mut stalled = stalled_body(gateway.addr).await;
        let stalled_at = Instant::now();
        let mut kept = gateway.connect().await;
        let health = kept.request("GET", "/healthz", &[], "").await;
        assert_eq!(health.status, 200);
        let kept_started = Instant::now();
        let (silent_closed, stalled_closed, slow_closed, kept_closed) = tokio::join!(
            async {
                closed_within(&mut silent, bound + SLACK * 2)
                    .await
                    .then(Instant::now)
            },
            async {
                closed_within(&mut stalled, bound + SLACK * 2)
                    .await
                    .then(Instant::now)
            },
            trickle(slow, &head),
            trickle(kept.into_stream(), &head),
        );
        for (what, from, closed) in [
            ("silent", opened, silent_closed),
            ("stalled body", stalled_at, stalled_closed),
            ("slow first head", opened, slow_closed),
            ("slow second head", kept_started, kept_closed),
        ] {
            let closed = closed.unwrap_or_else(|| panic!("{what}: still open"));
            assert_cut_at(what, closed - from, bound);
        }
    });
}

/// A kept-alive connection is reused within `idle_timeout` and closed after it without a
/// request; a session's event stream on a connection is not idle, however long it runs.
#[test]
fn an_idle_kept_alive_connection_is_closed_at_idle_timeout() {
    let bound = Duration::from_secs(1);
    let config = "[http]\nidle_timeout = \"1s\"\nkeep_alive = \"300ms\"";
    let gateway = HttpGateway::start(&with_example(config), &[]);
    runtime().block_on(async {
        let session = gateway.session("/mcp", &[]).await;
        let get = [("accept", "text/event-stream")];
        let mut stream = session
            .open_stream(gateway.connect().await, "GET", &get, "")
            .await
            .unwrap_or_else(|r| panic!("{}: {}", r.status, r.body));
        let mut conn = gateway.connect().await;
        for i in 0..3 {
            if i > 0 {
                tokio::time::sleep(bound / 2).await;
            }
            let health = conn.request("GET", "/healthz", &[], "").await;
            assert_eq!(health.status, 200, "kept alive within idle_timeout");
        }
        let answered = Instant::now();
        assert!(
            closed_within(conn.reader(), bound + SLACK).await,
            "a connection idle past idle_timeout is still open"
        );
        assert_cut_at("idle", answered.elapsed(), bound);
        // Its stream has run three idle_timeouts by now and still carries keep-alives.
        let streamed = Instant::now();
        while streamed.elapsed() < bound {
            let event = stream.next(Duration::from_secs(5)).await;
            assert!(event.is_some(), "the session's stream was cut");
        }
    });
}

/// Connections that send nothing, opened against a cap of 8.
const IDLE: usize = 60;

/// Opens `n` connections that send nothing.
async fn open_idle(addr: std::net::SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut idle = Vec::new();
    for _ in 0..n {
        idle.push(TcpStream::connect(addr).await.unwrap());
    }
    idle
}

/// The gateway's open descriptors.
fn descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// Samples the gateway's descriptors every few ms on a thread; the most seen, when stopped.
struct FdSampler {
    stop: Arc<AtomicBool>,
    most: Arc<AtomicUsize>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FdSampler {
    fn start(pid: u32) -> FdSampler {
        let (stop, most) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicUsize::new(0)),
        );
        let thread = std::thread::spawn({
            let (stop, most) = (stop.clone(), most.clone());
            move || {
                while !stop.load(Ordering::Relaxed) {
                    most.fetch_max(descriptors(pid), Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
        });
        FdSampler {
            stop,
            most,
            thread: Some(thread),
        }
    }

    fn most(mut self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap();
        self.most.load(Ordering::Relaxed)
    }
}

/// At `max_connections`, [`IDLE`] connections that send nothing: the header-less ones are closed
/// to make room, `/healthz` answers, a session's calls on its kept-alive connection and its
/// event stream go on, and the gateway never holds more than the cap in connections.
#[test]
fn past_max_connections_idle_connections_go_first() {
    let cap = 8;
    let config = format!(
        "[http]\nmax_connections = {cap}\nheader_timeout = \"60s\"\nkeep_alive = \"300ms\""
    );
    let gateway = HttpGateway::start(&with_example(&config), &[]);
    let pid = gateway.pid();
    runtime().block_on(async {
        let mut session = gateway.session("/mcp", &[]).await;
        let echo = session.call("ex__echo", json!({"text": "up"})).await;
        assert_eq!(echo["result"]["content"][0]["text"], "up", "{echo}");
        // Everything but connections, with the server started: the session's one less.
        let others = descriptors(pid) - 1;
        let get = [("accept", "text/event-stream")];
        let mut stream = session
            .open_stream(gateway.connect().await, "GET", &get, "")
            .await
            .unwrap_or_else(|r| panic!("{}: {}", r.status, r.body));
        let sampler = FdSampler::start(pid);
        let mut idle = open_idle(gateway.addr, IDLE).await;
        let mut health = gateway.connect().await;
        let answer = tokio::time::timeout(
            Duration::from_secs(10),
            health.request("GET", "/healthz", &[], ""),
        )
        .await
        .expect("/healthz answers at the cap");
        assert_eq!(answer.status, 200);
        for i in 0..3 {
            let text = format!("call {i}");
            let echo = session.call("ex__echo", json!({"text": text})).await;
            assert_eq!(echo["result"]["content"][0]["text"], text, "{echo}");
        }
        assert!(
            stream.next(Duration::from_secs(5)).await.is_some(),
            "the session's stream was closed to make room"
        );
        let most = sampler.most();
        assert!(
            // Two more for what the gateway opens for a moment (a file it reads).
            most <= others + cap + CLOSING + 2,
            "{most} descriptors open: {others} besides connections, at most {cap} + {CLOSING} connections"
        );
        let mut closed = 0;
        for conn in &mut idle {
            closed += usize::from(closed_within(conn, Duration::from_millis(20)).await);
        }
        assert!(
            closed >= IDLE - cap,
            "only {closed} of {IDLE} idle connections closed"
        );
    });
}

/// A client that opens a TLS connection and stalls its handshake is cut at `header_timeout`.
#[test]
fn a_stalled_tls_handshake_is_cut_at_header_timeout() {
    let certs = TestDir::new("tls");
    crate::remote::make_ca_and_certificate(&certs);
    let config = format!(
        "[http]\nheader_timeout = \"1s\"\ntls_cert = {}\ntls_key = {}",
        crate::harness::toml_str(certs.join("cert.pem").to_str().unwrap()),
        crate::harness::toml_str(certs.join("key.pem").to_str().unwrap()),
    );
    let gateway = HttpGateway::start(&with_example(&config), &[]);
    runtime().block_on(async {
        let opened = Instant::now();
        let mut silent = TcpStream::connect(gateway.addr).await.unwrap();
        // The first bytes of a ClientHello record, and no more.
        let mut partial = TcpStream::connect(gateway.addr).await.unwrap();
        partial.write_all(&[0x16, 0x03, 0x01, 0x02]).await.unwrap();
        let (silent_closed, partial_closed) = tokio::join!(
            closed_within(&mut silent, Duration::from_secs(1) + SLACK),
            closed_within(&mut partial, Duration::from_secs(1) + SLACK),
        );
        assert!(
            silent_closed && partial_closed,
            "a stalled handshake is still open"
        );
        assert_cut_at(
            "stalled handshakes",
            opened.elapsed(),
            Duration::from_secs(1),
        );
    });
}

/// Connections whose request bodies stall give way at `max_connections` too: `/healthz`
/// answers and the gateway holds no more than the cap.
#[test]
fn stalled_request_bodies_give_way_at_max_connections() {
    let cap = 4;
    let config = format!("[http]\nmax_connections = {cap}\nheader_timeout = \"60s\"");
    let gateway = HttpGateway::start(&with_example(&config), &[]);
    let pid = gateway.pid();
    runtime().block_on(async {
        let mut health = gateway.connect().await;
        assert_eq!(health.request("GET", "/healthz", &[], "").await.status, 200);
        let others = descriptors(pid) - 1;
        let sampler = FdSampler::start(pid);
        let mut stalled = Vec::new();
        for _ in 0..40 {
            stalled.push(stalled_body(gateway.addr).await);
        }
        let mut health = gateway.connect().await;
        let answer = tokio::time::timeout(
            Duration::from_secs(10),
            health.request("GET", "/healthz", &[], ""),
        )
        .await
        .expect("/healthz answers while stalled bodies fill the cap");
        assert_eq!(answer.status, 200);
        let most = sampler.most();
        assert!(
            most <= others + cap + CLOSING + 2,
            "{most} descriptors open: {others} besides connections, at most {cap} + {CLOSING} connections"
        );
    });
}
