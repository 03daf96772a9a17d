//! A stdio client that keeps more requests in flight than the gateway takes: past the
//! bound (64), the gateway reads no more of its input until a request ends, so that
//! large requests to a server that never answers cannot grow its memory without end.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};

use crate::harness::{TIMEOUT, config, text};

/// Requests the gateway keeps in flight for one stdio client (src/transport/stdio.rs).
const BOUND: usize = 64;

/// 150 requests of 1 MiB each to a tool that never answers (each ends at the server's 4 s
/// timeout), written as fast as the gateway reads them: while the first ones wait, it has
/// read at most the bound of them (once they end, the bound again), its memory stays far
/// below what holding all of them takes, every request is answered in the end, and the
/// gateway serves on.
#[test]
fn a_stdio_client_gets_no_more_requests_read_past_the_bound() {
    const REQUESTS: usize = 150;
    let mut client = config()
        .example_with("ex", &[], &["timeout = \"4s\""])
        .start_initialized();
    let base = client.rss();
    let mut stdin = client.take_stdin();
    let written = Arc::new(AtomicUsize::new(0));
    let counter = written.clone();
    let writer = std::thread::spawn(move || {
        let pad = "p".repeat(1 << 20);
        for n in 0..REQUESTS {
            let call = json!({"name": "ex__hang", "arguments": {"pad": pad}});
            let request = json!({"jsonrpc": "2.0", "id": format!("big-{n}"), "method": "tools/call", "params": call});
            writeln!(stdin, "{request}").unwrap();
            stdin.flush().unwrap();
            // A pipe holds 64 KiB: a line of 1 MiB is written once the gateway read most of it.
            counter.fetch_add(1, Ordering::SeqCst);
        }
        stdin
    });
    let first = client.wait_response(&json!("big-0"), TIMEOUT);
    let read_by_then = written.load(Ordering::SeqCst);
    eprintln!("{read_by_then} requests read when the first was answered");
    assert_eq!(first["error"]["code"], -32001, "{first}");
    // The first ones have ended by now, and the next ones may have been read: twice the
    // bound at most (and the line each wait holds), against every one without a bound.
    assert!(
        read_by_then <= 2 * BOUND + 2,
        "{read_by_then} requests of 1 MiB were read while the first {BOUND} were in flight"
    );
    for n in 1..REQUESTS {
        let timed_out = client.wait_response(&json!(format!("big-{n}")), TIMEOUT);
        assert_eq!(timed_out["error"]["code"], -32001, "{timed_out}");
    }
    let grown = client.peak_rss().saturating_sub(base);
    eprintln!("the gateway grew by {} MiB", grown >> 20);
    assert!(
        grown < 220 << 20,
        "the gateway grew by {} MiB for {REQUESTS} requests of 1 MiB",
        grown >> 20
    );
    client.give_stdin(writer.join().unwrap());
    assert_eq!(
        text(&client.call("ex__echo", json!({"text": "after"}))),
        "after"
    );
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
