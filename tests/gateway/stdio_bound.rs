//! A stdio client that keeps more requests in flight than the gateway takes: past the
//! bound (64), the gateway reads no more of its input until a request ends, so that
//! large requests to a server that never answers cannot grow its memory without end.

use std::io::Write;
use std::process::ChildStdin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};

use crate::harness::{Client, TIMEOUT, config, text};

/// Requests the gateway keeps in flight for one stdio client (src/transport/stdio.rs).
const BOUND: usize = 64;

/// Requests of `pad` bytes each to a tool that never answers (each ends at the server's
/// timeout), written by a thread as fast as the gateway reads them; waits for the first
/// answer. How many requests had been read by then, and the writer, which hands the
/// gateway's stdin back once it wrote them all.
fn flood(
    client: &mut Client,
    requests: usize,
    pad: usize,
) -> (usize, std::thread::JoinHandle<ChildStdin>) {
    let mut stdin = client.take_stdin();
    let written = Arc::new(AtomicUsize::new(0));
    let counter = written.clone();
    let writer = std::thread::spawn(move || {
        let pad = "p".repeat(pad);
        for n in 0..requests {
            let call = json!({"name": "ex__hang", "arguments": {"pad": pad}});
            let request = json!({"jsonrpc": "2.0", "id": format!("big-{n}"), "method": "tools/call", "params": call});
            writeln!(stdin, "{request}").unwrap();
            stdin.flush().unwrap();
            counter.fetch_add(1, Ordering::SeqCst);
        }
        stdin
    });
    let first = client.wait_response(&json!("big-0"), TIMEOUT);
    assert_eq!(first["error"]["code"], -32001, "{first}");
    (written.load(Ordering::SeqCst), writer)
}

/// The answers to the requests of [`flood`] after the first: the server's timeout each.
fn all_time_out(client: &mut Client, requests: usize) {
    for n in 1..requests {
        let timed_out = client.wait_response(&json!(format!("big-{n}")), TIMEOUT);
        assert_eq!(timed_out["error"]["code"], -32001, "{timed_out}");
    }
}

/// 300 requests to a tool that never answers (each ends at the server's 3 s timeout):
/// until the first ones end, the gateway has read the bound of them (once they end, the
/// bound again), against every one without a bound; each is answered in the end, and the
/// gateway serves on. Small requests (16 KiB), so that without the bound all are read
/// well within the timeout, however busy the machine.
#[test]
fn a_stdio_client_gets_no_more_requests_read_past_the_bound() {
    const REQUESTS: usize = 300;
    let mut client = config()
        .example_with("ex", &[], &["timeout = \"3s\""])
        .start_initialized();
    let (read_by_then, writer) = flood(&mut client, REQUESTS, 16 << 10);
    // Twice the bound, the line each wait holds, and what the pipe (64 KiB) and the
    // gateway's read buffer (64 KiB) take of the lines after it.
    assert!(
        read_by_then <= 2 * BOUND + 2 + 8,
        "{read_by_then} requests were read while the first {BOUND} were in flight"
    );
    all_time_out(&mut client, REQUESTS);
    client.give_stdin(writer.join().unwrap());
    assert_eq!(
        text(&client.call("ex__echo", json!({"text": "after"}))),
        "after"
    );
}

/// 150 requests of 1 MiB to a tool that never answers: the gateway holds the bound of
/// them at once, not all (each costs it about 2 MiB while in flight).
#[test]
fn large_requests_past_the_bound_do_not_grow_memory() {
    const REQUESTS: usize = 150;
    let mut client = config()
        .example_with("ex", &[], &["timeout = \"4s\""])
        .start_initialized();
    let base = client.rss();
    let (_, writer) = flood(&mut client, REQUESTS, 1 << 20);
    all_time_out(&mut client, REQUESTS);
    let grown = client.peak_rss().saturating_sub(base);
    assert!(
        grown < 220 << 20,
        "the gateway grew by {} MiB for {REQUESTS} requests of 1 MiB",
        grown >> 20
    );
    client.give_stdin(writer.join().unwrap());
}

/// At the bound, what is not a request is still read: a cancel of one of the requests in
/// flight (as a client's answer to a sampling request would) goes through, which makes
/// room, and the next request is answered at once, not at the others' timeout.
#[test]
fn at_the_bound_a_cancel_is_still_read() {
    let mut client = config()
        .example_with("ex", &[], &["timeout = \"60s\""])
        .start_initialized();
    let ids: Vec<Value> = (0..BOUND)
        .map(|_| client.send_request("tools/call", json!({"name": "ex__hang", "arguments": {}})))
        .collect();
    client.notify(
        "notifications/cancelled",
        json!({"requestId": ids[0], "reason": "enough"}),
    );
    let pong = client.request("ping", json!({}));
    assert_eq!(pong["result"], json!({}), "{pong}");
}
