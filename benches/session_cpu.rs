//! The gateway's own work per request, in process: a session is handed request lines on a
//! current-thread runtime, as the stdio transport hands them, and the answers are taken
//! from its queue. No pipes, no client, no wake-ups: what is left is what the I/O thread
//! spends on a request in user space (parse, route, call, convert, record, answer), the part
//! of a call's latency that the gateway's code decides. Steadier than end-to-end latency on a
//! shared machine, so a change to that path shows here first.
//!
//! `cargo bench --bench session_cpu [-- --rounds N --calls N --only KIND]` (defaults 15 and
//! 20,000; KIND: a part of a label below, e.g. `wasm`). Needs
//! tests/plugins/target/wasm32-wasip2/release/minimal.wasm (built by the test fixtures' build,
//! `cargo build` of this crate). Reports, per request kind, the median over rounds of the
//! mean µs per request; rounds of the kinds alternate.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use wasmgate::gateway::Gateway;
use wasmgate::session::Session;
use wasmgate::transport::stdio::handle_line;

#[path = "common/mod.rs"]
mod common;

// As the binary (src/main.rs): allocation is a good part of a request's cost.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const DEFAULT_ROUNDS: usize = 15;
const DEFAULT_CALLS: usize = 20_000;
/// A call's round trip over pipes at 1 in flight, outside the gateway's own work (see
/// `measure`): the p50 at 1 in flight less this bench's figure, ~20 - 9 µs here.
const ROUND_TRIP: Duration = Duration::from_micros(12);

/// What is measured: a label and the request line (`ID` is replaced by a fresh id).
const KINDS: [(&str, &str); 3] = [
    ("ping", r#"{"jsonrpc":"2.0","id":ID,"method":"ping"}"#),
    (
        "gateway_status",
        r#"{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"gateway_status","arguments":{}}}"#,
    ),
    (
        "wasm echo",
        r#"{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"minimal__echo","arguments":{"text":"hello"}}}"#,
    ),
];

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let (mut rounds, mut calls, mut only) = (DEFAULT_ROUNDS, DEFAULT_CALLS, None);
    while let Some(flag) = args.next() {
        let value = args.next();
        let number = value.as_deref().and_then(|v| v.parse().ok());
        match (flag.as_str(), number) {
            ("--rounds", Some(n)) => rounds = n,
            ("--calls", Some(n)) => calls = n,
            ("--only", _) if value.is_some() => only = value,
            _ => {
                eprintln!(
                    "session_cpu: flags are --rounds N, --calls N and --only KIND, not {flag}"
                );
                std::process::exit(2);
            }
        }
    }
    let plugin = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/plugins/target/wasm32-wasip2/release/minimal.wasm");
    if !plugin.exists() {
        println!(
            "session_cpu: {} is missing (build the test fixtures: cargo build)",
            plugin.display()
        );
        return;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let kinds: Vec<_> = KINDS
        .into_iter()
        .filter(|(label, _)| only.as_deref().is_none_or(|o| label.contains(o)))
        .collect();
    runtime.block_on(measure(plugin, &kinds, rounds, calls));
}

async fn measure(plugin: PathBuf, kinds: &[(&str, &str)], rounds: usize, calls: usize) {
    let config = wasmgate::config::load_with_plugin_files(None, &[plugin]).expect("config");
    let gateway = Gateway::start(config);
    gateway.wait_for_start(true).await;
    let (out, mut answers) = wasmgate::pipe::outbox::outbox("the bench");
    let session = Session::new(gateway.clone(), out);
    handle_line(
        &session,
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"session_cpu","version":"0"}}}"#,
    );
    answers.recv().await.expect("initialize answered");
    handle_line(
        &session,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );

    let mut id = 1u64;
    let mut per_kind: Vec<Vec<f64>> = vec![Vec::new(); kinds.len()];
    // One warm-up round first.
    for round in 0..=rounds {
        for (kind, (label, template)) in kinds.iter().enumerate() {
            let lines: Vec<String> = (0..calls)
                .map(|i| template.replace("ID", &(id + i as u64).to_string()))
                .collect();
            id += calls as u64;
            let mut spent = Duration::ZERO;
            for line in &lines {
                // The time a reply takes to reach a client over a pipe and the next request
                // to come back: the plugin threads refill the ready instances meanwhile, as
                // they do at 1 in flight. Spun, not slept, so that the thread stays awake.
                let gap = Instant::now();
                while gap.elapsed() < ROUND_TRIP {
                    std::hint::spin_loop();
                }
                let started = Instant::now();
                handle_line(&session, line);
                // An answer not queued in the request's first poll comes from a task (a
                // plugin call that made its own instance, say): wait for it.
                let answer = match answers.try_recv() {
                    Some(answer) => answer.line,
                    None => answers.recv().await.expect("an answer").line,
                };
                spent += started.elapsed();
                if !answer.contains(r#""result""#) || answer.contains(r#""isError":true"#) {
                    panic!("{label}: the request failed: {answer}");
                }
            }
            let micros = spent.as_secs_f64() * 1e6 / calls as f64;
            if round > 0 {
                per_kind[kind].push(micros);
            }
            // Lets the plugin threads reset the round's stores and refill, as between bursts.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    println!(
        "session_cpu: µs of the I/O thread per request, in process ({rounds} rounds of {calls}; median, range)"
    );
    for (kind, (label, _)) in kinds.iter().enumerate() {
        let (median, low, high) = common::median_and_range(&mut per_kind[kind]);
        println!("  {label:16} {median:6.2}   ({low:.2}-{high:.2})");
    }
    gateway.shutdown().await;
}
