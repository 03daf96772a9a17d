//! `tools/call echo` over HTTP, interleaved round by round: the floor (a minimal
//! Streamable HTTP echo server, examples/http_echo_server.rs), the gateway over HTTP to
//! a WASM plugin's echo and to the example server, and the gateway over stdio to the
//! same two as the reference; then the gateway's memory per idle session.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::pipe::{McpPipe, start_gateway, toml_string, write_config};
use crate::stats::{Row, Run, Tally, cpu_ticks, memory_kib, print_rows, verdict};
use crate::{ECHO_TEXT, Options, PROTOCOL_VERSION, Paths, Result};

/// Sessions at once for the throughput runs, each on its own keep-alive connection.
const SESSIONS: usize = 32;
/// Idle sessions opened to measure the memory one costs.
const IDLE_SESSIONS: usize = 10_000;

/// One keep-alive connection, speaking as an MCP client does.
pub(crate) struct Conn {
    reader: BufReader<tokio::net::tcp::OwnedReadHalf>,
    writer: tokio::net::tcp::OwnedWriteHalf,
    head: String,
    line: String,
    body: Vec<u8>,
}

impl Conn {
    async fn open(addr: SocketAddr) -> Result<Conn> {
        Conn::open_as(addr, PROTOCOL_VERSION).await
    }

    /// A connection whose requests name protocol `version` in `MCP-Protocol-Version`.
    pub(crate) async fn open_as(addr: SocketAddr, version: &str) -> Result<Conn> {
        Conn::open_at(addr, version, "/mcp").await
    }

    /// [`Self::open_as`] for an endpoint at `path` (a peer may serve MCP elsewhere).
    pub(crate) async fn open_at(addr: SocketAddr, version: &str, path: &str) -> Result<Conn> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect {addr}: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let (read, writer) = stream.into_split();
        Ok(Conn {
            reader: BufReader::new(read),
            writer,
            head: format!(
                "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nmcp-protocol-version: {version}\r\n"
            ),
            line: String::new(),
            body: Vec::new(),
        })
    }

    /// Sends `body`; the answer's status, session id and body.
    async fn post(
        &mut self,
        session: Option<&str>,
        body: &str,
    ) -> Result<(u16, Option<String>, &[u8])> {
        match session {
            Some(id) => self.post_with(&[("mcp-session-id", id)], body).await,
            None => self.post_with(&[], body).await,
        }
    }

    /// Sends `body` with `headers` besides the usual ones; as [`Self::post`].
    pub(crate) async fn post_with(
        &mut self,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Result<(u16, Option<String>, &[u8])> {
        let mut request = self.head.clone();
        for (key, value) in headers {
            request.push_str(key);
            request.push_str(": ");
            request.push_str(value);
            request.push_str("\r\n");
        }
        request.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
        self.writer
            .write_all(request.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        self.line.clear();
        self.reader
            .read_line(&mut self.line)
            .await
            .map_err(|e| e.to_string())?;
        let status: u16 = self
            .line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or("no status line")?;
        let (mut length, mut session_id) = (0, None);
        loop {
            self.line.clear();
            self.reader
                .read_line(&mut self.line)
                .await
                .map_err(|e| e.to_string())?;
            let line = self.line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((key, value)) = line.split_once(':') {
                if key.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().map_err(|_| "bad content-length")?;
                } else if key.eq_ignore_ascii_case("mcp-session-id") {
                    session_id = Some(value.trim().to_string());
                }
            }
        }
        self.body.resize(length, 0);
        self.reader
            .read_exact(&mut self.body)
            .await
            .map_err(|e| e.to_string())?;
        Ok((status, session_id, &self.body))
    }
}

/// A client session: its connection and, for the gateway, its id.
pub(crate) struct Session {
    conn: Conn,
    id: Option<String>,
}

impl Session {
    async fn open(addr: SocketAddr, path: &str) -> Result<Session> {
        let mut conn = Conn::open_at(addr, PROTOCOL_VERSION, path).await?;
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"}}});
        let (status, id, body) = conn.post(None, &init.to_string()).await?;
        if status != 200 {
            return Err(format!(
                "initialize: HTTP {status}: {}",
                String::from_utf8_lossy(body)
            ));
        }
        let mut session = Session { conn, id };
        let (status, _, _) = session
            .conn
            .post(
                session.id.as_deref(),
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            )
            .await?;
        if status != 202 {
            return Err(format!("initialized: HTTP {status}"));
        }
        Ok(session)
    }

    /// `calls` calls of `tool` one after another; each one's latency in ns.
    async fn calls(&mut self, tool: &str, calls: usize) -> Result<Vec<u64>> {
        let mut latencies = Vec::with_capacity(calls);
        for n in 0..calls {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":{n},"method":"tools/call","params":{{"name":"{tool}","arguments":{{"text":"{ECHO_TEXT}"}}}}}}"#
            );
            let started = Instant::now();
            let (status, _, answer) = self.conn.post(self.id.as_deref(), &body).await?;
            latencies.push(started.elapsed().as_nanos() as u64);
            if status != 200
                || !answer
                    .windows(ECHO_TEXT.len())
                    .any(|w| w == ECHO_TEXT.as_bytes())
            {
                return Err(format!(
                    "{tool}: HTTP {status}: {}",
                    String::from_utf8_lossy(answer)
                ));
            }
        }
        Ok(latencies)
    }
}

/// A process serving HTTP, and the tool to call on it.
pub(crate) struct HttpTarget {
    pub(crate) name: &'static str,
    tool: &'static str,
    pub(crate) addr: SocketAddr,
    /// Where it serves MCP: `/mcp`, or a peer's own path.
    path: &'static str,
    child: tokio::process::Child,
    one: Session,
}

impl HttpTarget {
    /// Starts `program` and reads the address it listens on from its stdout or stderr.
    pub(crate) async fn start(
        name: &'static str,
        tool: &'static str,
        program: &Path,
        args: &[&str],
        scratch: &Path,
    ) -> Result<HttpTarget> {
        let log = scratch.join(format!("{name}.log"));
        let file = || std::fs::File::create(&log).map_err(|e| e.to_string());
        let out = file()?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("{}: {e}", program.display()))?;
        let deadline = Instant::now() + Duration::from_secs(60);
        let addr = loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            // A whole line only: the file may be read while the line is being written.
            if let Some((rest, _)) = text
                .split("listening on http://")
                .nth(1)
                .and_then(|r| r.split_once('\n'))
            {
                break rest
                    .split('/')
                    .next()
                    .and_then(|a| a.parse().ok())
                    .ok_or("an address")?;
            }
            if Instant::now() > deadline || child.try_wait().ok().flatten().is_some() {
                return Err(format!("{name} did not listen: {text}"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        HttpTarget::ready(name, tool, addr, "/mcp", child).await
    }

    /// Starts `program`, which listens on `addr` at `path` (a peer that does not print
    /// the address it binds), and waits until it answers a call.
    pub(crate) async fn start_at(
        name: &'static str,
        tool: &'static str,
        program: &Path,
        args: &[&str],
        (addr, path): (SocketAddr, &'static str),
        scratch: &Path,
    ) -> Result<HttpTarget> {
        let log = std::fs::File::create(scratch.join(format!("{name}.log")))
            .map_err(|e| e.to_string())?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("{}: {e}", program.display()))?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(addr).await.is_err() {
            if Instant::now() > deadline || child.try_wait().ok().flatten().is_some() {
                return Err(format!("{name} did not listen on {addr}"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        HttpTarget::ready(name, tool, addr, path, child).await
    }

    async fn ready(
        name: &'static str,
        tool: &'static str,
        addr: SocketAddr,
        path: &'static str,
        child: tokio::process::Child,
    ) -> Result<HttpTarget> {
        // The plugin (or a peer's backend) may still be starting: the first call waits.
        let mut one = Session::open(addr, path).await?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while let Err(error) = one.calls(tool, 1).await {
            if Instant::now() > deadline {
                return Err(format!("{name}: {error}"));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(HttpTarget {
            name,
            tool,
            addr,
            path,
            child,
            one,
        })
    }

    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// One round at 1 in flight.
    pub(crate) async fn serial(&mut self, calls: usize) -> Result<Run> {
        let before = self.pid().and_then(cpu_ticks);
        let started = Instant::now();
        let latencies = self.one.calls(self.tool, calls).await?;
        Ok(Run {
            latencies,
            elapsed: started.elapsed(),
            cpu_ticks: self.cpu_since(before),
        })
    }

    /// One round with `count` sessions calling at once.
    pub(crate) async fn concurrent(
        &mut self,
        sessions: &mut Vec<Session>,
        count: usize,
        calls: usize,
    ) -> Result<Run> {
        while sessions.len() < count {
            sessions.push(Session::open(self.addr, self.path).await?);
        }
        let before = self.pid().and_then(cpu_ticks);
        let started = Instant::now();
        let tool: Arc<str> = Arc::from(self.tool);
        let tasks: Vec<_> = sessions
            .drain(..)
            .map(|mut session| {
                let tool = tool.clone();
                tokio::spawn(async move {
                    let latencies = session.calls(&tool, calls / count).await;
                    (session, latencies)
                })
            })
            .collect();
        let mut latencies = Vec::new();
        for task in tasks {
            let (session, run) = task.await.map_err(|e| e.to_string())?;
            latencies.extend(run?);
            sessions.push(session);
        }
        Ok(Run {
            latencies,
            elapsed: started.elapsed(),
            cpu_ticks: self.cpu_since(before),
        })
    }

    fn cpu_since(&self, before: Option<u64>) -> Option<u64> {
        Some(self.pid().and_then(cpu_ticks)? - before?)
    }
}

/// The gateway over stdio, for the same tool: the reference.
struct StdioTarget {
    name: &'static str,
    tool: &'static str,
    pipe: McpPipe,
}

pub async fn bench(
    options: &Options,
    paths: &Paths,
    scratch: &Path,
) -> Result<serde_json::Map<String, Value>> {
    let floor_server = paths
        .target
        .join(&paths.profile)
        .join("examples/http_echo_server");
    if !paths.plugin.is_file() || !floor_server.is_file() {
        return Ok(crate::skipped(
            "http",
            format!(
                "{} or {} is missing",
                paths.plugin.display(),
                floor_server.display()
            ),
        ));
    }
    let config = scratch.join("gw-http.toml");
    write_config(
        &config,
        &format!(
            "[http]\nmax_sessions = 20000\n\n[servers.ex]\ncommand = {}\n\n[plugins.wecho]\npath = {}\n",
            toml_string(&paths.server),
            toml_string(&paths.plugin)
        ),
    )?;
    let config_arg = config.to_str().ok_or("scratch is not UTF-8")?;
    let gateway_args = ["serve", "--http", "127.0.0.1:0", "--config", config_arg];
    let mut http = vec![
        HttpTarget::start("floor", "echo", &floor_server, &[], scratch).await?,
        HttpTarget::start(
            "http-wasm",
            "wecho__echo",
            &paths.gateway,
            &gateway_args,
            scratch,
        )
        .await?,
    ];
    // The same gateway process serves both tools: one target per tool, two processes, so
    // that each is measured alone.
    http.push(
        HttpTarget::start(
            "http-server",
            "ex__echo",
            &paths.gateway,
            &gateway_args,
            scratch,
        )
        .await?,
    );
    // The plugin with `instance = "shared"`: no instance made and reset per call.
    let shared = scratch.join("gw-http-shared.toml");
    let text = std::fs::read_to_string(&config).map_err(|e| e.to_string())?;
    write_config(&shared, &format!("{text}instance = \"shared\"\n"))?;
    let shared = shared.to_str().ok_or("scratch is not UTF-8")?;
    let args = ["serve", "--http", "127.0.0.1:0", "--config", shared];
    http.push(
        HttpTarget::start(
            "http-wasm-shared",
            "wecho__echo",
            &paths.gateway,
            &args,
            scratch,
        )
        .await?,
    );
    // Peers installed by scripts/peers.sh, measured beside the gateway when present.
    if let Some(peer) = crate::peers::mcp_proxy(paths, scratch).await? {
        http.push(peer);
    }
    // An A/B of the runtime: the same gateway on one thread (`[http] threads = 1`).
    if std::env::var_os("WASMGATE_BENCH_HTTP_1T").is_some() {
        let one = scratch.join("gw-http-1t.toml");
        let text = std::fs::read_to_string(&config).map_err(|e| e.to_string())?;
        write_config(&one, &text.replacen("[http]\n", "[http]\nthreads = 1\n", 1))?;
        let one = one.to_str().ok_or("scratch is not UTF-8")?;
        let args = ["serve", "--http", "127.0.0.1:0", "--config", one];
        for (name, tool) in [
            ("http-wasm-1t", "wecho__echo"),
            ("http-server-1t", "ex__echo"),
        ] {
            http.push(HttpTarget::start(name, tool, &paths.gateway, &args, scratch).await?);
        }
    }
    let mut stdio = Vec::new();
    for (name, tool) in [("stdio-wasm", "wecho__echo"), ("stdio-server", "ex__echo")] {
        let mut pipe = start_gateway(name, paths, &config, scratch).await?;
        pipe.wait_for_tool(tool, Duration::from_secs(30)).await?;
        pipe.check_echo(tool).await?;
        stdio.push(StdioTarget { name, tool, pipe });
    }

    let mut sessions: Vec<Vec<Session>> = http.iter().map(|_| Vec::new()).collect();
    // Warm-up.
    for (target, sessions) in http.iter_mut().zip(&mut sessions) {
        target.serial(options.warmup / 4).await?;
        target
            .concurrent(sessions, SESSIONS, options.warmup)
            .await?;
    }
    let mut rows = Vec::new();
    let mut serial: Vec<Tally> = (0..http.len() + stdio.len())
        .map(|_| Tally::default())
        .collect();
    let mut many: Vec<Tally> = http.iter().map(|_| Tally::default()).collect();
    for round in 0..options.rounds {
        for k in 0..http.len() + stdio.len() {
            let i = (round + k) % (http.len() + stdio.len());
            if i < http.len() {
                serial[i].add(http[i].serial(options.calls1).await?);
                many[i].add(
                    http[i]
                        .concurrent(&mut sessions[i], SESSIONS, options.calls16)
                        .await?,
                );
            } else {
                let target = &mut stdio[i - http.len()];
                let before = target.pipe.pid().and_then(cpu_ticks);
                let (latencies, elapsed) = target.pipe.load(target.tool, options.calls1, 1).await?;
                let cpu = target
                    .pipe
                    .pid()
                    .and_then(cpu_ticks)
                    .zip(before)
                    .map(|(a, b)| a - b);
                serial[i].add(Run {
                    latencies,
                    elapsed,
                    cpu_ticks: cpu,
                });
            }
        }
    }
    let names: Vec<&'static str> = http
        .iter()
        .map(|t| t.name)
        .chain(stdio.iter().map(|t| t.name))
        .collect();
    for (name, tally) in names.iter().zip(serial) {
        rows.push(tally.row(name, 1));
    }
    for (target, tally) in http.iter().zip(many) {
        rows.push(tally.row(target.name, SESSIONS));
    }
    let idle = idle_session_kib(&mut http[1]).await?;
    for target in stdio {
        target.pipe.close().await;
    }
    Ok(report(options, &rows, idle))
}

/// The gateway's resident memory per idle session: RSS after opening [`IDLE_SESSIONS`]
/// more, minus before, over their number.
async fn idle_session_kib(target: &mut HttpTarget) -> Result<f64> {
    let pid = target.pid().ok_or("the gateway has no pid")?;
    let before = memory_kib(pid).ok_or("no /proc")?.0;
    let mut conns = Vec::new();
    for _ in 0..8 {
        conns.push(Conn::open(target.addr).await?);
    }
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": PROTOCOL_VERSION, "capabilities": {},
        "clientInfo": {"name": "idle", "version": "1"}}})
    .to_string();
    for n in 0..IDLE_SESSIONS {
        let count = conns.len();
        let (status, _, _) = conns[n % count].post(None, &init).await?;
        if status != 200 {
            return Err(format!("idle session {n}: HTTP {status}"));
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = memory_kib(pid).ok_or("no /proc")?.0;
    Ok(after.saturating_sub(before) as f64 / IDLE_SESSIONS as f64)
}

fn report(options: &Options, rows: &[Row], idle_kib: f64) -> serde_json::Map<String, Value> {
    println!(
        "HTTP: {} rounds x {} calls at 1 in flight, {} rounds x {} calls over {SESSIONS} sessions at once, interleaved; load generator in this process",
        options.rounds, options.calls1, options.rounds, options.calls16
    );
    print_rows(rows);
    let find = |target: &str, inflight: usize| {
        rows.iter()
            .find(|r| r.target == target && r.inflight == inflight)
    };
    let mut ratios = serde_json::Map::new();
    for target in ["http-wasm", "http-wasm-shared"] {
        let (Some(f1), Some(w1), Some(f32), Some(w32)) = (
            find("floor", 1),
            find(target, 1),
            find("floor", SESSIONS),
            find(target, SESSIONS),
        ) else {
            continue;
        };
        let p50 = w1.p50_us / f1.p50_us;
        let rate = w32.calls_per_s / f32.calls_per_s;
        println!(
            "ratio {target}/floor  p50 @1: {p50:.2}x (target <= 1.3x, {})   throughput @{SESSIONS}: {rate:.2}x (target >= 0.6x, {}), {:.0} calls/s (target >= 28000, {})",
            verdict(p50 <= 1.3),
            verdict(rate >= 0.6),
            w32.calls_per_s,
            verdict(w32.calls_per_s >= 28_000.0)
        );
        ratios.insert(
            target.replace('-', "_"),
            json!({"p50_at_1": p50, "throughput_at_32": rate, "calls_per_s_at_32": w32.calls_per_s}),
        );
    }
    println!(
        "gateway memory per idle HTTP session: {idle_kib:.1} KiB (target <= 16 KiB, {}; {IDLE_SESSIONS} sessions)",
        verdict(idle_kib <= 16.0)
    );
    let results = json!({
        "http_rows": rows.iter().map(|r| json!({
            "target": r.target, "inflight": r.inflight, "p50_us": r.p50_us, "p99_us": r.p99_us,
            "calls_per_s": r.calls_per_s, "calls": r.calls, "cpu_us_per_call": r.cpu_us_per_call,
        })).collect::<Vec<_>>(),
        "http_ratios": ratios,
        "http_idle_session_kib": idle_kib,
    });
    match results {
        Value::Object(map) => map,
        _ => unreachable!("a JSON object literal"),
    }
}
