//! Latency and throughput of `tools/call` through wasmgate, against the example
//! MCP server called directly: the gateway's cost per call, in one process; then
//! the plugin figures: a Python plugin's calls, hot-reload latency, start-up and
//! memory with ten plugins. Every figure is taken end to end against the real
//! binary over stdio pipes.
//!
//! Run it with `scripts/bench.sh` (builds the release binaries, starts a
//! low-priority spin loop on every core, then runs `cargo bench --bench gateway`).
//! Run directly, it expects `target/release/wasmgate` and
//! `target/release/examples/mcp_example_server` to be built already.
//!
//! Targets, each one child process spoken to over stdio by the same client code:
//! - `direct`: the example server (`echo`), its pipes on the async reactor, as the gateway's;
//! - `direct-sdk-io`: the same server with `--tokio-stdio`: tokio's stdin()/stdout(), as
//!   servers on the official Rust SDK read and write (a blocking thread per read and flush);
//! - `gateway`: `wasmgate serve` with the example server configured (`ex__echo`);
//! - `wasm`: `wasmgate serve` with the test plugin `minimal.wasm` (`wecho__echo`: one
//!   `echo` tool, nothing else), when `tests/plugins/target/wasm32-wasip2/release/minimal.wasm`
//!   exists. `WASMGATE_BENCH_PLUGIN=tests/plugins/target/wasm32-wasip2/release/echo.wasm`
//!   measures the bigger test fixture instead (its other tools import wasi:http and more).
//!
//! Sections: `calls` (the targets above, interleaved, then start-up with the example
//! server and each target's RSS: `calls.rs`), `python` (the componentize-py plugin
//! `plugins/python/text/text.wasm`, when built: `python.rs`), `reload` (hot reload of
//! a plugin file: `reload.rs`), `startup` (ten cached plugins: `startup.rs`), `http` (the
//! HTTP front: `http.rs`), `eras` (a `tools/call` of protocol 2025-11-25, in a session, against
//! the same call of 2026-07-28, stateless, through one gateway over HTTP: `eras.rs`), `instances` (`instance = "shared"` against `"call"`:
//! `instances.rs`), `middleware` (no middleware against a pass-through chain of one and
//! three links on the server path: `middleware.rs`), `remote` (a remote server over Streamable HTTP, through the
//! gateway and direct: `remote.rs`), `scale` (100 example servers of 114 tools each: time
//! to ready, the whole paginated `tools/list`, a call, RSS and shutdown: `scale.rs`), and,
//! only with `--only author`, `author` (`plugin new` to a first call, cold and warm, and
//! `wasmgate dev` from a save to the new version served: `author.rs`).
//!
//! Rounds are interleaved (direct, gateway, wasm, direct, ...), so that machine
//! noise hits every target alike. Each call's latency is the time from writing its
//! request to reading its answer. With N in flight, the client keeps N requests
//! outstanding: every answer read is replaced at once by a new request. Besides
//! latency and calls/s, each row shows the CPU time the called process spent per
//! call (from /proc/PID/stat; for the gateways, their own, not their server's):
//! less noisy than latency on a shared machine, and the cost to cut.
//!
//! Flags (after `--`): `--rounds N`, `--calls1 N` (calls a round at 1 in flight),
//! `--calls16 N` (calls a round at 16 in flight), `--startups N`, `--py-calls N`
//! (Python plugin calls each way), `--reloads N`, `--quick`, `--only SECTION` (one of
//! the sections, or `plugins` for python, reload and startup; repeatable).
//! Results also go to `target/bench-results.json`. Environment:
//! `WASMGATE_BENCH_GATEWAY=PATH` measures that gateway binary instead (to compare a change),
//! `WASMGATE_BENCH_PROFILE=debug` uses the dev binaries (to try the bench itself quickly),
//! `WASMGATE_BENCH_PLUGIN=PATH` another component exporting `echo` {text} (the `wasm` target),
//! `WASMGATE_BENCH_ERA=2025-11-25` or `2026-07-28` runs that era on both sides of `eras`
//! (to profile the gateway under one era alone).

mod author;
mod calls;
mod component;
mod eras;
mod http;
mod instances;
mod middleware;
mod peers;
mod pipe;
mod python;
mod reload;
mod remote;
mod scale;
mod startup;
mod stats;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use serde_json::{Value, json};

/// How long any one answer may take before the bench gives up on a target.
const READ_TIMEOUT: Duration = Duration::from_secs(30);
const ECHO_TEXT: &str = "hello from the wasmgate bench";
const PROTOCOL_VERSION: &str = "2025-06-18";
/// Spin loops started by `scripts/bench.sh`, by count.
const SPIN_VAR: &str = "WASMGATE_BENCH_SPIN";

type Result<T> = std::result::Result<T, String>;

struct Options {
    rounds: usize,
    calls1: usize,
    calls16: usize,
    warmup: usize,
    startups: usize,
    py_calls: usize,
    reloads: usize,
    /// The sections to run; all when empty.
    only: Vec<String>,
}

const SECTIONS: [&str; 11] = [
    "calls",
    "python",
    "reload",
    "startup",
    "http",
    "eras",
    "instances",
    "middleware",
    "remote",
    "scale",
    "author",
];
/// Sections run only when asked for with `--only`: `author` builds crates for minutes.
const ON_REQUEST: [&str; 1] = ["author"];

impl Options {
    fn from_args() -> Result<Options> {
        // Many short rounds rather than a few long ones: noise from other processes on the
        // machine comes in bursts, and short interleaved rounds spread a burst over every target.
        let mut options = Options {
            rounds: 20,
            calls1: 500,
            calls16: 5_000,
            warmup: 2_000,
            startups: 10,
            py_calls: 1_000,
            reloads: 20,
            only: Vec::new(),
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut number = |flag: &str| -> Result<usize> {
                let value = args
                    .next()
                    .ok_or_else(|| format!("{flag} needs a number"))?;
                value
                    .parse()
                    .map_err(|_| format!("{flag}: `{value}` is not a number"))
            };
            match arg.as_str() {
                // `cargo bench` passes `--bench`; a filter argument is accepted and ignored.
                "--bench" => {}
                "--rounds" => options.rounds = number(&arg)?.max(1),
                "--calls1" => options.calls1 = number(&arg)?.max(1),
                "--calls16" => options.calls16 = number(&arg)?.max(16),
                "--startups" => options.startups = number(&arg)?.max(1),
                "--py-calls" => options.py_calls = number(&arg)?.max(10),
                "--reloads" => options.reloads = number(&arg)?.max(1),
                "--only" => {
                    let section = args.next().ok_or("--only needs a section")?;
                    match section.as_str() {
                        "plugins" => options
                            .only
                            .extend(SECTIONS[1..4].iter().map(|s| s.to_string())),
                        s if SECTIONS.contains(&s) => options.only.push(section),
                        _ => {
                            return Err(format!(
                                "--only {section}: want plugins or one of {}",
                                SECTIONS.join(", ")
                            ));
                        }
                    }
                }
                "--quick" => {
                    options.rounds = 2;
                    options.calls1 = 300;
                    options.calls16 = 2_000;
                    options.warmup = 300;
                    options.startups = 3;
                    options.py_calls = 200;
                    options.reloads = 5;
                }
                other if !other.starts_with('-') => {}
                other => return Err(format!("unknown flag {other}")),
            }
        }
        Ok(options)
    }

    fn runs(&self, section: &str) -> bool {
        (self.only.is_empty() && !ON_REQUEST.contains(&section))
            || self.only.iter().any(|s| s == section)
    }
}

/// Where `cargo build --release` puts things.
struct Paths {
    profile: String,
    root: PathBuf,
    target: PathBuf,
    gateway: PathBuf,
    server: PathBuf,
    /// A component exporting `echo` {text}: the `wasm` target, and the reload and start-up plugin.
    plugin: PathBuf,
    /// The Python plugin `text`, if built.
    python: PathBuf,
}

impl Paths {
    fn find() -> Result<Paths> {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("target"));
        let target = if target.is_relative() {
            root.join(target)
        } else {
            target
        };
        // `WASMGATE_BENCH_PROFILE=debug` tries the bench logic on the dev binaries.
        let profile = std::env::var("WASMGATE_BENCH_PROFILE").unwrap_or_else(|_| "release".into());
        // `WASMGATE_BENCH_GATEWAY=path` measures another gateway binary (an A/B of a change).
        let gateway = std::env::var_os("WASMGATE_BENCH_GATEWAY").map(PathBuf::from);
        let paths = Paths {
            gateway: gateway.unwrap_or_else(|| target.join(&profile).join("wasmgate")),
            server: target.join(&profile).join("examples/mcp_example_server"),
            profile,
            plugin: std::env::var_os("WASMGATE_BENCH_PLUGIN")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    root.join("tests/plugins/target/wasm32-wasip2/release/minimal.wasm")
                }),
            python: root.join("plugins/python/text/text.wasm"),
            root,
            target,
        };
        for binary in [&paths.gateway, &paths.server] {
            if !binary.is_file() {
                return Err(format!(
                    "{} is missing: run scripts/bench.sh, or first `cargo build --release --bin wasmgate --example mcp_example_server`",
                    binary.display()
                ));
            }
        }
        paths.warn_if_stale();
        Ok(paths)
    }

    /// A release binary older than the sources measures code that is gone.
    fn warn_if_stale(&self) {
        let newest_source = newest_mtime(&self.root.join("src"));
        let gateway_built = std::fs::metadata(&self.gateway)
            .and_then(|m| m.modified())
            .ok();
        if let (Some(source), Some(built)) = (newest_source, gateway_built)
            && source > built
        {
            eprintln!(
                "warning: {} is older than src/: rebuild it (scripts/bench.sh does)",
                self.gateway.display()
            );
        }
    }
}

fn newest_mtime(dir: &Path) -> Option<std::time::SystemTime> {
    let mut newest = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let time = if path.is_dir() {
            newest_mtime(&path)
        } else {
            entry.metadata().and_then(|m| m.modified()).ok()
        };
        newest = newest.max(time);
    }
    newest
}

async fn run() -> Result<()> {
    let options = Options::from_args()?;
    let paths = Paths::find()?;
    let scratch = std::env::temp_dir().join(format!("wasmgate-bench-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    let outcome = bench(&options, &paths, &scratch).await;
    let _ = std::fs::remove_dir_all(&scratch);
    outcome
}

async fn bench(options: &Options, paths: &Paths, scratch: &Path) -> Result<()> {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let spin = std::env::var(SPIN_VAR)
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|n| *n > 0);
    let noise = match spin {
        Some(n) if n >= cores => "low-priority spin loop on each core".to_string(),
        Some(n) => format!("low-priority spin loop on {n} of {cores} cores"),
        None => {
            "NO spin loop: idle cores add wake-up latency; scripts/bench.sh starts one".to_string()
        }
    };
    let priority = match stats::own_nice() {
        Some(n) if n != 0 => format!(", bench and targets at nice {n}"),
        _ => String::new(),
    };
    println!(
        "wasmgate bench ({}, {cores} cores, {noise}{priority})",
        paths.profile
    );
    if std::env::var_os("WASMGATE_BENCH_GATEWAY").is_some() {
        println!("gateway binary: {}", paths.gateway.display());
    }
    if std::env::var_os("WASMGATE_BENCH_PLUGIN").is_some() {
        println!("wasm plugin: {}", paths.plugin.display());
    }

    let mut results = serde_json::Map::new();
    results.insert(
        "machine".into(),
        json!({"cores": cores, "spin_loops": spin.unwrap_or(0)}),
    );
    results.insert(
        "options".into(),
        json!({"rounds": options.rounds, "calls_at_1": options.calls1, "calls_at_16": options.calls16,
               "warmup": options.warmup, "startups": options.startups,
               "python_calls": options.py_calls, "reloads": options.reloads, "only": options.only}),
    );
    if options.runs("calls") {
        results.extend(calls::bench(options, paths, scratch).await?);
    }
    if options.runs("python") {
        results.extend(python::bench(options, paths, scratch).await?);
    }
    if options.runs("reload") {
        results.extend(reload::bench(options, paths, scratch).await?);
    }
    if options.runs("startup") {
        results.extend(startup::plugins(options, paths, scratch).await?);
    }
    if options.runs("http") {
        results.extend(http::bench(options, paths, scratch).await?);
    }
    if options.runs("eras") {
        results.extend(eras::bench(options, paths, scratch).await?);
    }
    if options.runs("instances") {
        results.extend(instances::bench(options, paths, scratch).await?);
    }
    if options.runs("middleware") {
        results.extend(middleware::bench(options, paths, scratch).await?);
    }
    if options.runs("remote") {
        results.extend(remote::bench(options, paths, scratch).await?);
    }
    if options.runs("scale") {
        results.extend(scale::bench(options, paths, scratch).await?);
    }
    if options.runs("author") {
        results.extend(author::bench(options, paths, scratch).await?);
    }

    let out = paths.target.join("bench-results.json");
    let text = serde_json::to_string_pretty(&Value::Object(results)).expect("JSON serialises");
    std::fs::write(&out, text + "\n").map_err(|e| format!("{}: {e}", out.display()))?;
    println!("results written to {}", out.display());
    Ok(())
}

/// The results of a section that cannot run here: why, printed and noted as `{section}_skipped`.
fn skipped(section: &str, why: String) -> serde_json::Map<String, Value> {
    println!("{section}: skipped: {why}");
    serde_json::Map::from_iter([(format!("{section}_skipped"), Value::from(why))])
}

fn main() -> ExitCode {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    match runtime.block_on(run()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("bench failed: {why}");
            ExitCode::FAILURE
        }
    }
}
