//! Latency and throughput of `tools/call` through wasmgate, against the example
//! MCP server called directly: the gateway's cost per call, in one process.
//!
//! Run it with `scripts/bench.sh` (builds the release binaries, starts a
//! low-priority spin loop on every core, then runs `cargo bench --bench gateway`).
//! Run directly, it expects `target/release/wasmgate` and
//! `target/release/examples/mcp_example_server` to be built already.
//!
//! Targets, each one child process spoken to over stdio by the same client code:
//! - `direct`: the example server (`echo`);
//! - `gateway`: `wasmgate serve` with the example server configured (`ex__echo`);
//! - `wasm`: `wasmgate serve` with the test plugin `echo.wasm` (`wecho__echo`),
//!   when `tests/plugins/target/wasm32-wasip2/release/echo.wasm` exists.
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
//! `--calls16 N` (calls a round at 16 in flight), `--startups N`, `--quick`.
//! Results also go to `target/bench-results.json`. Environment:
//! `WASMGATE_BENCH_GATEWAY=PATH` measures that gateway binary instead (to compare a change),
//! `WASMGATE_BENCH_PROFILE=debug` uses the dev binaries (to try the bench itself quickly),
//! `WASMGATE_BENCH_PLUGIN=PATH` another component exporting `echo` {text} (the `wasm` target).

use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

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
}

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
                "--quick" => {
                    options = Options {
                        rounds: 2,
                        calls1: 300,
                        calls16: 2_000,
                        warmup: 300,
                        startups: 3,
                    };
                }
                other if !other.starts_with('-') => {}
                other => return Err(format!("unknown flag {other}")),
            }
        }
        Ok(options)
    }
}

/// Where `cargo build --release` puts things.
struct Paths {
    profile: String,
    root: PathBuf,
    target: PathBuf,
    gateway: PathBuf,
    server: PathBuf,
    plugin: PathBuf,
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
                    root.join("tests/plugins/target/wasm32-wasip2/release/echo.wasm")
                }),
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

/// What the client reads of an answer: its id, and whether it is an error.
#[derive(Deserialize)]
struct Answer {
    id: Option<Value>,
    result: Option<Value>,
    error: Option<Value>,
}

/// One MCP peer on the other end of a child's stdin and stdout. The same code
/// speaks to every target.
struct McpPipe {
    name: String,
    child: Child,
    input: BufWriter<ChildStdin>,
    output: BufReader<ChildStdout>,
    line: String,
    next_id: u64,
    stderr_log: PathBuf,
}

impl McpPipe {
    fn spawn(name: &str, program: &Path, args: &[&str], scratch: &Path) -> Result<McpPipe> {
        let stderr_log = scratch.join(format!("{name}.stderr.log"));
        let stderr = std::fs::File::create(&stderr_log)
            .map_err(|e| format!("{}: {e}", stderr_log.display()))?;
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", program.display()))?;
        let input = BufWriter::with_capacity(64 * 1024, child.stdin.take().expect("piped"));
        let output = BufReader::with_capacity(64 * 1024, child.stdout.take().expect("piped"));
        Ok(McpPipe {
            name: name.to_string(),
            child,
            input,
            output,
            line: String::new(),
            next_id: 1,
            stderr_log,
        })
    }

    fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    fn fresh_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    async fn write(&mut self, message: &Value) -> Result<()> {
        let mut bytes = message.to_string().into_bytes();
        bytes.push(b'\n');
        self.input
            .write_all(&bytes)
            .await
            .map_err(|e| self.broken(e))?;
        self.input.flush().await.map_err(|e| self.broken(e))
    }

    fn broken(&self, error: std::io::Error) -> String {
        format!(
            "{}: writing to it failed ({error}){}",
            self.name,
            self.stderr_tail()
        )
    }

    /// The last lines the child wrote to stderr, to explain a failure.
    fn stderr_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.stderr_log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = &lines[lines.len().saturating_sub(8)..];
        if tail.is_empty() {
            String::new()
        } else {
            format!("; its stderr ends with:\n  {}", tail.join("\n  "))
        }
    }

    /// Reads the next message with an id (notifications are skipped).
    async fn read_answer(&mut self) -> Result<Answer> {
        loop {
            self.line.clear();
            let read =
                tokio::time::timeout(READ_TIMEOUT, self.output.read_line(&mut self.line)).await;
            match read {
                Err(_) => {
                    return Err(format!(
                        "{}: no answer within {READ_TIMEOUT:?}{}",
                        self.name,
                        self.stderr_tail()
                    ));
                }
                Ok(Err(e)) => return Err(format!("{}: reading failed ({e})", self.name)),
                Ok(Ok(0)) => {
                    return Err(format!(
                        "{}: closed its stdout{}",
                        self.name,
                        self.stderr_tail()
                    ));
                }
                Ok(Ok(_)) => {}
            }
            let answer: Answer = serde_json::from_str(&self.line)
                .map_err(|e| format!("{}: not JSON ({e}): {}", self.name, self.line.trim_end()))?;
            if answer.id.is_some() {
                return Ok(answer);
            }
        }
    }

    /// One request, waited for; answers to other ids are an error here.
    async fn request(&mut self, method: &str, params: Value) -> Result<Value> {
        let id = self.fresh_id();
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        let answer = self.read_answer().await?;
        if answer.id != Some(json!(id)) {
            return Err(format!(
                "{}: answer to id {:?} while waiting for {id}",
                self.name, answer.id
            ));
        }
        match (answer.result, answer.error) {
            (Some(result), None) => Ok(result),
            (_, Some(error)) => Err(format!("{}: {method} failed: {error}", self.name)),
            (None, None) => Err(format!(
                "{}: {method}: an answer with neither result nor error",
                self.name
            )),
        }
    }

    async fn initialize(&mut self) -> Result<()> {
        let params = json!({"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                            "clientInfo": {"name": "wasmgate-bench", "version": "0"}});
        self.request("initialize", params).await?;
        self.write(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await
    }

    /// Every tool name, over all pages.
    async fn tool_names(&mut self) -> Result<Vec<String>> {
        let mut names = Vec::new();
        let mut cursor = Value::Null;
        loop {
            let params = if cursor.is_null() {
                json!({})
            } else {
                json!({"cursor": cursor})
            };
            let page = self.request("tools/list", params).await?;
            let tools = page
                .get("tools")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            names.extend(
                tools
                    .iter()
                    .filter_map(|t| t.get("name")?.as_str().map(str::to_string)),
            );
            cursor = page.get("nextCursor").cloned().unwrap_or(Value::Null);
            if cursor.is_null() {
                return Ok(names);
            }
        }
    }

    /// Calls `tool` once and checks that it echoed.
    async fn check_echo(&mut self, tool: &str) -> Result<()> {
        let result = self
            .request(
                "tools/call",
                json!({"name": tool, "arguments": {"text": ECHO_TEXT}}),
            )
            .await?;
        let text = result.pointer("/content/0/text").and_then(Value::as_str);
        if text != Some(ECHO_TEXT) || result.get("isError") == Some(&json!(true)) {
            return Err(format!("{}: {tool} did not echo: {result}", self.name));
        }
        Ok(())
    }

    /// `calls` calls of `tool`, keeping `inflight` requests outstanding. Returns each
    /// call's latency (ns) and the time the whole run took.
    async fn load(
        &mut self,
        tool: &str,
        calls: usize,
        inflight: usize,
    ) -> Result<(Vec<u64>, Duration)> {
        // Every request line is the same but for its id.
        let head = br#"{"jsonrpc":"2.0","id":"#;
        let tail = format!(
            r#","method":"tools/call","params":{{"name":"{tool}","arguments":{{"text":"{ECHO_TEXT}"}}}}}}"#
        );
        let first = self.next_id;
        self.next_id += calls as u64;
        let mut sent_at: Vec<Option<Instant>> = vec![None; calls];
        let mut latencies = Vec::with_capacity(calls);
        let mut buffer = Vec::with_capacity(256);
        let (mut sent, mut done) = (0usize, 0usize);
        let begun = Instant::now();
        while done < calls {
            // Fill the window, then one flush for all that was written.
            if sent < calls && sent - done < inflight {
                while sent < calls && sent - done < inflight {
                    buffer.clear();
                    buffer.extend_from_slice(head);
                    buffer.extend_from_slice((first + sent as u64).to_string().as_bytes());
                    buffer.extend_from_slice(tail.as_bytes());
                    buffer.push(b'\n');
                    self.input
                        .write_all(&buffer)
                        .await
                        .map_err(|e| self.broken(e))?;
                    sent_at[sent] = Some(Instant::now());
                    sent += 1;
                }
                self.input.flush().await.map_err(|e| self.broken(e))?;
            }
            let answer = self.read_answer().await?;
            let now = Instant::now();
            let index = answer
                .id
                .as_ref()
                .and_then(Value::as_u64)
                .and_then(|id| id.checked_sub(first))
                .map(|i| i as usize)
                .filter(|i| *i < calls)
                .ok_or_else(|| {
                    format!(
                        "{}: answer with an unexpected id {:?}",
                        self.name, answer.id
                    )
                })?;
            let Some(start) = sent_at[index].take() else {
                return Err(format!(
                    "{}: a second answer to id {}",
                    self.name,
                    first + index as u64
                ));
            };
            if let Some(error) = answer.error {
                return Err(format!("{}: {tool} failed under load: {error}", self.name));
            }
            latencies.push(now.duration_since(start).as_nanos() as u64);
            done += 1;
        }
        Ok((latencies, begun.elapsed()))
    }

    /// Closes stdin and waits for the child to leave; kills it after a grace period.
    async fn close(mut self) {
        let _ = self.input.shutdown().await;
        drop(self.input);
        if tokio::time::timeout(Duration::from_secs(3), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

/// A process under test and the tool to call on it.
struct Target {
    name: &'static str,
    tool: &'static str,
    pipe: McpPipe,
    /// Why an optional target (the plugin) stopped being measured.
    failure: Option<String>,
}

impl Target {
    /// One run; a failure of the optional plugin target is noted and the bench goes on.
    async fn load(&mut self, calls: usize, inflight: usize) -> Result<Option<Run>> {
        if self.failure.is_some() {
            return Ok(None);
        }
        let cpu_before = self.pipe.pid().and_then(cpu_ticks);
        match self.pipe.load(self.tool, calls, inflight).await {
            Ok((latencies, elapsed)) => {
                let cpu_after = self.pipe.pid().and_then(cpu_ticks);
                let cpu_ticks = cpu_before
                    .zip(cpu_after)
                    .map(|(before, after)| after - before);
                Ok(Some(Run {
                    latencies,
                    elapsed,
                    cpu_ticks,
                }))
            }
            Err(why) if self.name == "wasm" => {
                println!("wasm plugin target dropped: {why}");
                self.failure = Some(why);
                Ok(None)
            }
            Err(why) => Err(why),
        }
    }
}

/// One round of one target.
struct Run {
    latencies: Vec<u64>,
    elapsed: Duration,
    /// CPU time the target process (all its threads, not its children) used meanwhile.
    cpu_ticks: Option<u64>,
}

/// What one target did at one window size, over all rounds.
#[derive(Default)]
struct Tally {
    latencies: Vec<u64>,
    elapsed: Duration,
    round_rates: Vec<f64>,
    cpu_ticks: Option<u64>,
}

struct Row {
    target: &'static str,
    inflight: usize,
    p50_us: f64,
    p99_us: f64,
    calls_per_s: f64,
    calls: usize,
    round_rates: Vec<f64>,
    /// CPU of the process called (the gateway's own, without its server), per call.
    cpu_us_per_call: Option<f64>,
}

impl Tally {
    fn add(&mut self, mut run: Run) {
        self.round_rates
            .push(run.latencies.len() as f64 / run.elapsed.as_secs_f64());
        self.latencies.append(&mut run.latencies);
        self.elapsed += run.elapsed;
        // Unknown once any round's is unknown.
        let first = self.round_rates.len() == 1;
        self.cpu_ticks = match (first, self.cpu_ticks, run.cpu_ticks) {
            (true, _, ticks) => ticks,
            (false, Some(total), Some(ticks)) => Some(total + ticks),
            _ => None,
        };
    }

    fn row(mut self, target: &'static str, inflight: usize) -> Row {
        self.latencies.sort_unstable();
        let at = |q: f64| {
            let rank =
                ((q * self.latencies.len() as f64).ceil() as usize).clamp(1, self.latencies.len());
            self.latencies[rank - 1] as f64 / 1_000.0
        };
        Row {
            target,
            inflight,
            p50_us: at(0.50),
            p99_us: at(0.99),
            calls_per_s: self.latencies.len() as f64 / self.elapsed.as_secs_f64(),
            calls: self.latencies.len(),
            round_rates: self.round_rates,
            cpu_us_per_call: self
                .cpu_ticks
                .map(|t| t as f64 * 1e6 / clock_ticks_per_second() / self.latencies.len() as f64),
        }
    }
}

fn write_config(path: &Path, body: &str) -> Result<()> {
    std::fs::write(path, body).map_err(|e| format!("{}: {e}", path.display()))
}

/// A TOML basic string (paths with quotes or backslashes included).
fn toml_string(path: &Path) -> String {
    serde_json::to_string(&path.display().to_string()).expect("a string serialises")
}

async fn start_gateway(
    name: &str,
    paths: &Paths,
    config: &Path,
    scratch: &Path,
) -> Result<McpPipe> {
    let config = config
        .to_str()
        .ok_or("the scratch directory is not UTF-8")?;
    McpPipe::spawn(
        name,
        &paths.gateway,
        &["serve", "--config", config],
        scratch,
    )
}

/// Starts, initialises and checks one target; `None` (with the reason printed) if it cannot serve.
async fn ready(name: &'static str, tool: &'static str, pipe: Result<McpPipe>) -> Result<Target> {
    let mut pipe = pipe?;
    pipe.initialize().await?;
    // A plugin may still be compiling when the first list is answered: ask again for a while.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let names = pipe.tool_names().await?;
        if names.iter().any(|n| n == tool) {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{name}: tools/list has no {tool} (it has: {}){}",
                names.join(", "),
                pipe.stderr_tail()
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    pipe.check_echo(tool).await?;
    Ok(Target {
        name,
        tool,
        pipe,
        failure: None,
    })
}

/// Time from spawning the gateway to its first `tools/list` answer that names `ex__echo`.
/// Initialize and tools/list are written at once, without waiting for any answer.
async fn startup_once(paths: &Paths, config: &Path, scratch: &Path) -> Result<Duration> {
    let begun = Instant::now();
    let mut pipe = start_gateway("startup", paths, config, scratch).await?;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                      "params": {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                                 "clientInfo": {"name": "wasmgate-bench", "version": "0"}}});
    pipe.write(&init).await?;
    pipe.write(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await?;
    let mut id = 2;
    pipe.write(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}))
        .await?;
    loop {
        let answer = pipe.read_answer().await?;
        if answer.id != Some(json!(id)) {
            continue;
        }
        let listed = answer
            .result
            .as_ref()
            .and_then(|r| r.get("tools"))
            .and_then(Value::as_array);
        if listed.is_some_and(|tools| {
            tools
                .iter()
                .any(|t| t.get("name") == Some(&json!("ex__echo")))
        }) {
            let elapsed = begun.elapsed();
            pipe.close().await;
            return Ok(elapsed);
        }
        if begun.elapsed() > READ_TIMEOUT {
            return Err("the gateway never listed ex__echo".into());
        }
        // Not there yet (the gateway answered before the server was ready): ask again.
        id += 1;
        pipe.write(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}))
            .await?;
    }
}

/// User plus system CPU time of a process so far, threads that ended included, in clock ticks.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name, which is in parentheses and may hold spaces:
    // state is field 3, utime 14 and stime 15.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// This process's nice value (field 19 of its stat); the targets inherit it.
fn own_nice() -> Option<i64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(16)?
        .parse()
        .ok()
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf only reads a system constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

/// VmRSS and VmHWM of a process, in KiB.
fn memory_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok { "ok" } else { "MISSED" }
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
    let priority = match own_nice() {
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

    let gw_config = scratch.join("gw.toml");
    write_config(
        &gw_config,
        &format!("[servers.ex]\ncommand = {}\n", toml_string(&paths.server)),
    )?;

    let mut targets = Vec::new();
    targets.push(
        ready(
            "direct",
            "echo",
            McpPipe::spawn("direct", &paths.server, &[], scratch),
        )
        .await?,
    );
    targets.push(
        ready(
            "gateway",
            "ex__echo",
            start_gateway("gateway", paths, &gw_config, scratch).await,
        )
        .await?,
    );
    let mut wasm_note = None;
    if paths.plugin.is_file() {
        let config = scratch.join("gw-wasm.toml");
        write_config(
            &config,
            &format!("[plugins.wecho]\npath = {}\n", toml_string(&paths.plugin)),
        )?;
        match ready(
            "wasm",
            "wecho__echo",
            start_gateway("wasm", paths, &config, scratch).await,
        )
        .await
        {
            Ok(target) => targets.push(target),
            Err(why) => {
                println!("wasm plugin target skipped: {why}");
                wasm_note = Some(why);
            }
        }
    } else {
        let why = format!(
            "{} does not exist (build the test plugins)",
            paths.plugin.display()
        );
        println!("wasm plugin target skipped: {why}");
        wasm_note = Some(why);
    }

    // Warm-up: caches, allocator pools, branch predictors, the JIT code of the plugin.
    for target in &mut targets {
        target.load(options.warmup, 16).await?;
        target.load(options.warmup / 2, 1).await?;
    }

    let mut rows = Vec::new();
    for (inflight, calls) in [(1, options.calls1), (16, options.calls16)] {
        let mut tallies: Vec<Tally> = targets.iter().map(|_| Tally::default()).collect();
        for round in 0..options.rounds {
            // Interleaved, and each round starts with the next target, so no target is always first.
            for k in 0..targets.len() {
                let i = (round + k) % targets.len();
                if let Some(run) = targets[i].load(calls, inflight).await? {
                    tallies[i].add(run);
                }
            }
        }
        for (target, tally) in targets.iter().zip(tallies) {
            if target.failure.is_none() {
                rows.push(tally.row(target.name, inflight));
            }
        }
    }

    if let Some(why) = targets.iter().find_map(|t| t.failure.clone()) {
        wasm_note = Some(why);
    }
    let memory: Vec<(&str, Option<(u64, u64)>)> = targets
        .iter()
        .filter(|t| t.failure.is_none())
        .map(|t| (t.name, t.pipe.pid().and_then(memory_kib)))
        .collect();
    let mut startups = Vec::new();
    for _ in 0..options.startups {
        startups.push(
            startup_once(paths, &gw_config, scratch)
                .await?
                .as_secs_f64()
                * 1_000.0,
        );
    }
    let startup_runs = startups.clone();
    let startup_ms = median(&mut startups);
    for target in targets {
        target.pipe.close().await;
    }

    report(
        options,
        cores,
        spin,
        &rows,
        &memory,
        startup_ms,
        &startup_runs,
        wasm_note,
        paths,
    )
}

#[allow(clippy::too_many_arguments)]
fn report(
    options: &Options,
    cores: usize,
    spin: Option<usize>,
    rows: &[Row],
    memory: &[(&str, Option<(u64, u64)>)],
    startup_ms: f64,
    startup_runs: &[f64],
    wasm_note: Option<String>,
    paths: &Paths,
) -> Result<()> {
    println!(
        "{} rounds x {} calls at 1 in flight, {} rounds x {} calls at 16 in flight, interleaved; latency = write to answer",
        options.rounds, options.calls1, options.rounds, options.calls16
    );
    println!(
        "{:<20}{:>8}{:>10}{:>10}{:>12}{:>14}",
        "target", "inflight", "p50_us", "p99_us", "calls/s", "cpu_us/call"
    );
    for row in rows {
        let cpu = row
            .cpu_us_per_call
            .map_or("-".to_string(), |c| format!("{c:.1}"));
        println!(
            "{:<20}{:>8}{:>10.1}{:>10.1}{:>12.0}{:>14}",
            row.target, row.inflight, row.p50_us, row.p99_us, row.calls_per_s, cpu
        );
    }
    println!(
        "(cpu_us/call: CPU time of the process called, per call; for the gateways, without the server behind them)"
    );
    let find = |target: &str, inflight: usize| {
        rows.iter()
            .find(|r| r.target == target && r.inflight == inflight)
    };
    let mut ratios = serde_json::Map::new();
    for (target, p50_max, rate_min) in [("gateway", 1.5, 0.6), ("wasm", 1.3, 0.8)] {
        let (Some(d1), Some(t1), Some(d16), Some(t16)) = (
            find("direct", 1),
            find(target, 1),
            find("direct", 16),
            find(target, 16),
        ) else {
            continue;
        };
        let p50 = t1.p50_us / d1.p50_us;
        let rate = t16.calls_per_s / d16.calls_per_s;
        println!(
            "ratio {target}/direct  p50 @1: {p50:.2}x (target <= {p50_max}x, {})   throughput @16: {rate:.2}x (target >= {rate_min}x, {})",
            verdict(p50 <= p50_max),
            verdict(rate >= rate_min)
        );
        ratios.insert(
            target.to_string(),
            json!({"p50_at_1": p50, "p50_at_1_max": p50_max, "p50_ok": p50 <= p50_max,
                   "throughput_at_16": rate, "throughput_at_16_min": rate_min, "throughput_ok": rate >= rate_min}),
        );
    }
    let mib = |kib: u64| kib as f64 / 1024.0;
    let gateway_memory = memory
        .iter()
        .find(|(name, _)| *name == "gateway")
        .and_then(|(_, m)| *m);
    let rss = gateway_memory.map_or("unknown".to_string(), |(rss, hwm)| {
        format!("{:.1} MiB (peak {:.1} MiB)", mib(rss), mib(hwm))
    });
    println!(
        "startup to first tools/list: {startup_ms:.1} ms (median of {})    gateway RSS after the load: {rss}",
        startup_runs.len()
    );
    for (name, m) in memory.iter().filter(|(name, _)| *name != "gateway") {
        if let Some((rss, hwm)) = m {
            println!(
                "  {name} RSS after the load: {:.1} MiB (peak {:.1} MiB)",
                mib(*rss),
                mib(*hwm)
            );
        }
    }

    let results = json!({
        "machine": {"cores": cores, "spin_loops": spin.unwrap_or(0)},
        "options": {"rounds": options.rounds, "calls_at_1": options.calls1, "calls_at_16": options.calls16,
                    "warmup": options.warmup, "startups": options.startups},
        "rows": rows.iter().map(|r| json!({
            "target": r.target, "inflight": r.inflight, "p50_us": r.p50_us, "p99_us": r.p99_us,
            "calls_per_s": r.calls_per_s, "calls": r.calls, "round_calls_per_s": r.round_rates,
            "cpu_us_per_call": r.cpu_us_per_call,
        })).collect::<Vec<_>>(),
        "ratios": ratios,
        "startup_ms": {"median": startup_ms, "runs": startup_runs},
        "memory_kib": memory.iter().map(|(name, m)| (name.to_string(), match m {
            Some((rss, hwm)) => json!({"rss": rss, "peak": hwm}),
            None => Value::Null,
        })).collect::<serde_json::Map<_, _>>(),
        "wasm_skipped": wasm_note,
    });
    let out = paths.target.join("bench-results.json");
    let text = serde_json::to_string_pretty(&results).expect("JSON serialises");
    std::fs::write(&out, text + "\n").map_err(|e| format!("{}: {e}", out.display()))?;
    println!("results written to {}", out.display());
    Ok(())
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
