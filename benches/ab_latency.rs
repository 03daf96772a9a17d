//! An A/B of `tools/call` latency at 1 in flight, across fresh processes: each run starts
//! every target anew, then alternates rounds of calls between them. Where a process's
//! threads land differs from one start to the next, and moves its p50 far more than the
//! round-to-round noise, so a change is judged on the median over runs, never on one run.
//!
//! Run it through `scripts/bench.sh ab`, which builds the release binaries and starts the
//! low-priority spin loops (`WASMGATE_BENCH_SPIN_LOOPS=0`: none, as on a client's machine):
//!
//! ```sh
//! cp target/release/wasmgate /tmp/wasmgate-a   # build the other version into /tmp/wasmgate-b
//! bash scripts/bench.sh ab --runs 12 \
//!     direct echo target/release/examples/mcp_example_server -- \
//!     a minimal__echo /tmp/wasmgate-a --plugin tests/plugins/target/wasm32-wasip2/release/minimal.wasm -- \
//!     b minimal__echo /tmp/wasmgate-b --plugin tests/plugins/target/wasm32-wasip2/release/minimal.wasm
//! ```
//!
//! Each target is `NAME TOOL COMMAND [ARGS...]`, targets separated by `--`; the tool is
//! called with `{"text": "hello"}`. Flags before the targets: `--runs N` (12), `--rounds N`
//! (20 measured rounds a run, after 2 of warm-up), `--calls N` (200 calls a round),
//! `--pause-ms N` (a pause before each call, as an agent's calls come: 0), and first `--otlp` (an
//! OTLP/HTTP receiver in this process, whose URL replaces `{otlp}` in the targets' commands:
//! the A/B of tracing, e.g. a target `env OTEL_EXPORTER_OTLP_ENDPOINT={otlp} wasmgate ...`).
//! Plain blocking pipes, no async runtime: the client adds as little as it can.
//! Beside the latency it reports each target's CPU per call over the measured rounds
//! (Linux: /proc's schedstat), of its main thread (the I/O thread, in the gateway and
//! the example server) and of all its threads: steadier than latency on a noisy machine.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

#[path = "common/mod.rs"]
mod common;
#[path = "common/otlp_sink.rs"]
mod otlp_sink;
use common::{median_and_range, percentile};

const WARMUP_ROUNDS: usize = 2;

struct Spec {
    name: String,
    tool: String,
    command: Vec<String>,
}

struct Target<'a> {
    spec: &'a Spec,
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    micros: Vec<f64>,
    /// CPU time on the measured rounds, ns: the main thread (the gateway's and the
    /// example server's I/O thread), and all threads.
    main_cpu_ns: u64,
    all_cpu_ns: u64,
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("ab_latency: {why}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let mut args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let mut runs = 12;
    let mut rounds = 20;
    let mut calls = 200;
    let mut pause_ms = 0;
    let mut otlp = None;
    if args.first().is_some_and(|a| a == "--otlp") {
        otlp = Some(otlp_sink::start().map_err(|e| format!("the OTLP receiver: {e}"))?);
        args.remove(0);
    }
    while let Some(flag) = args
        .first()
        .filter(|a| a.starts_with("--") && *a != "--")
        .cloned()
    {
        let value = args
            .get(1)
            .and_then(|v| v.parse().ok())
            .ok_or(format!("{flag} needs a number"))?;
        match flag.as_str() {
            "--runs" => runs = value,
            "--rounds" => rounds = value,
            "--calls" => calls = value,
            "--pause-ms" => pause_ms = value,
            _ => return Err(format!("unknown flag {flag}")),
        }
        args.drain(..2);
    }
    let specs = args
        .split(|a| a == "--")
        .filter(|part| !part.is_empty())
        .map(|part| match part {
            [name, tool, command @ ..] if !command.is_empty() => Ok(Spec {
                name: name.clone(),
                tool: tool.clone(),
                command: (command.iter())
                    .map(|a| match &otlp {
                        Some((url, _)) => a.replace("{otlp}", url),
                        None => a.clone(),
                    })
                    .collect(),
            }),
            _ => Err(format!(
                "a target is NAME TOOL COMMAND [ARGS...], not {part:?}"
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    if specs.is_empty() {
        // `cargo bench` runs every bench: without targets this one has nothing to compare.
        println!("ab_latency: no targets given, nothing to compare (see benches/ab_latency.rs)");
        return Ok(());
    }

    // Set by scripts/bench.sh, which starts them.
    let spin_loops = std::env::var("WASMGATE_BENCH_SPIN").unwrap_or_else(|_| "0".into());
    println!("{spin_loops} spin loops running (scripts/bench.sh starts one per core)");
    // Per target, each run's p50 and p99.
    let mut p50s: Vec<Vec<f64>> = vec![Vec::new(); specs.len()];
    let mut p99s: Vec<Vec<f64>> = vec![Vec::new(); specs.len()];
    // Per target, each run's CPU µs per call: main thread, all threads.
    let mut main_cpus: Vec<Vec<f64>> = vec![Vec::new(); specs.len()];
    let mut all_cpus: Vec<Vec<f64>> = vec![Vec::new(); specs.len()];
    for run in 1..=runs {
        let mut targets = specs
            .iter()
            .map(Target::start)
            .collect::<Result<Vec<_>, _>>()?;
        // Plugins compile or load from the cache; servers start.
        std::thread::sleep(Duration::from_millis(1500));
        let mut id = 1;
        for round in 0..WARMUP_ROUNDS + rounds {
            for target in &mut targets {
                let before = target.cpu_ns();
                for _ in 0..calls {
                    if pause_ms > 0 {
                        std::thread::sleep(Duration::from_millis(pause_ms as u64));
                    }
                    id += 1;
                    let took = target.call(id)?;
                    if round >= WARMUP_ROUNDS {
                        target.micros.push(took);
                    }
                }
                if round >= WARMUP_ROUNDS {
                    let after = target.cpu_ns();
                    target.main_cpu_ns += after.0.saturating_sub(before.0);
                    target.all_cpu_ns += after.1.saturating_sub(before.1);
                }
            }
        }
        let line: Vec<String> = targets
            .iter_mut()
            .enumerate()
            .map(|(i, target)| {
                let p50 = percentile(&mut target.micros, 0.5);
                let p99 = percentile(&mut target.micros, 0.99);
                let per_call = |ns: u64| ns as f64 / 1e3 / target.micros.len() as f64;
                let (main, all) = (per_call(target.main_cpu_ns), per_call(target.all_cpu_ns));
                p50s[i].push(p50);
                p99s[i].push(p99);
                main_cpus[i].push(main);
                all_cpus[i].push(all);
                format!(
                    "{} {p50:.1}/{p99:.1} cpu {main:.1}/{all:.1}",
                    target.spec.name
                )
            })
            .collect();
        println!(
            "run {run}: p50/p99 µs, cpu µs/call main thread/all {}",
            line.join(", ")
        );
    }
    println!("over {runs} runs ({rounds} rounds of {calls} calls each), µs:");
    for (i, spec) in specs.iter().enumerate() {
        let (p50, p50_low, p50_high) = median_and_range(&mut p50s[i]);
        let (p99, p99_low, p99_high) = median_and_range(&mut p99s[i]);
        let (main, main_low, main_high) = median_and_range(&mut main_cpus[i]);
        let (all, ..) = median_and_range(&mut all_cpus[i]);
        println!(
            "  {:12} p50 median {p50:7.1} (range {p50_low:.1}-{p50_high:.1})   p99 median {p99:7.1} (range {p99_low:.1}-{p99_high:.1})   CPU/call main thread {main:.1} ({main_low:.1}-{main_high:.1}), all threads {all:.1}",
            spec.name
        );
    }
    if let Some((_, counts)) = &otlp {
        let exports = counts.exports.load(std::sync::atomic::Ordering::Relaxed);
        let bytes = counts.bytes.load(std::sync::atomic::Ordering::Relaxed);
        println!("OTLP receiver: {exports} exports, {bytes} bytes");
    }
    Ok(())
}

impl<'a> Target<'a> {
    fn start(spec: &'a Spec) -> Result<Target<'a>, String> {
        let mut child = Command::new(&spec.command[0])
            .args(&spec.command[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("{}: cannot start {}: {e}", spec.name, spec.command[0]))?;
        let input = child.stdin.take().expect("piped");
        let output = BufReader::new(child.stdout.take().expect("piped"));
        let mut target = Target {
            spec,
            child,
            input,
            output,
            micros: Vec::new(),
            main_cpu_ns: 0,
            all_cpu_ns: 0,
        };
        target.send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"ab_latency","version":"0"}}}"#)?;
        target.answer_to(1)?;
        target.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)?;
        Ok(target)
    }

    fn send(&mut self, line: &str) -> Result<(), String> {
        writeln!(self.input, "{line}")
            .and_then(|()| self.input.flush())
            .map_err(|e| format!("{}: cannot write: {e}", self.spec.name))
    }

    /// Reads lines up to the answer to `id` (notifications are skipped) and returns it.
    fn answer_to(&mut self, id: u64) -> Result<String, String> {
        let wanted = format!("\"id\":{id},");
        loop {
            let mut line = String::new();
            match self.output.read_line(&mut line) {
                Ok(0) | Err(_) => return Err(format!("{}: its stdout closed", self.spec.name)),
                Ok(_) if line.contains(&wanted) => return Ok(line),
                Ok(_) => {}
            }
        }
    }

    /// CPU time so far, ns, from /proc's schedstat: the main thread's, all threads'.
    /// Zeros where /proc is missing (not Linux).
    fn cpu_ns(&self) -> (u64, u64) {
        let pid = self.child.id();
        let read = |path: std::path::PathBuf| -> u64 {
            std::fs::read_to_string(path)
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse().ok())
                .unwrap_or(0)
        };
        let main = read(format!("/proc/{pid}/task/{pid}/schedstat").into());
        let all = std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|tasks| {
                tasks
                    .flatten()
                    .map(|task| read(task.path().join("schedstat")))
                    .sum()
            })
            .unwrap_or(0);
        (main, all)
    }

    /// One call; its latency in µs, from writing the request to reading the answer.
    fn call(&mut self, id: u64) -> Result<f64, String> {
        let request = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{}","arguments":{{"text":"hello"}}}}}}"#,
            self.spec.tool
        );
        let started = Instant::now();
        self.send(&request)?;
        let answer = self.answer_to(id)?;
        let took = started.elapsed().as_secs_f64() * 1e6;
        if !answer.contains(r#""result""#) || answer.contains(r#""isError":true"#) {
            return Err(format!("{}: the call failed: {answer}", self.spec.name));
        }
        Ok(took)
    }
}

impl Drop for Target<'_> {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
