//! The two protocol eras over HTTP, side by side in one gateway: `tools/call echo` on the
//! example server as a 2025-11-25 client makes it (a session: `initialize`, then POSTs
//! with `Mcp-Session-Id`) and as a 2026-07-28 client does (stateless POSTs with
//! `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name` and `_meta`, no session), interleaved
//! round by round, at 1 and at 32 clients; the gateway's CPU per call and calls/s, and the
//! ratios new/old that issue 36 sets targets for.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Instant;

use serde_json::{Value, json};

use crate::http::{Conn, HttpTarget};
use crate::pipe::{toml_string, write_config};
use crate::stats::{Row, Run, Tally, cpu_ticks, median, print_rows, verdict};
use crate::{ECHO_TEXT, Options, Paths, Result};

/// Clients at once for the throughput runs, each on its own keep-alive connection.
const CLIENTS: usize = 32;
const TOOL: &str = "ex__echo";
const LEGACY: &str = "2025-11-25";
const MODERN: &str = "2026-07-28";
/// `WASMGATE_BENCH_ERA=2025-11-25` (or `2026-07-28`) runs that era on both sides: a
/// profile of the gateway under one era alone (the ratios are then of an era to itself).
const ONE_ERA_VAR: &str = "WASMGATE_BENCH_ERA";
/// Issue 36: a new-era call costs at most this much of an old one's gateway CPU...
const CPU_RATIO: f64 = 1.10;
/// ...and serves at least this share of its calls/s at [`CLIENTS`].
const RATE_RATIO: f64 = 0.90;

#[derive(Clone, Copy, PartialEq)]
enum Era {
    Legacy,
    Modern,
}

impl Era {
    fn name(self) -> &'static str {
        match self {
            Era::Legacy => "http-2025-11-25",
            Era::Modern => "http-2026-07-28",
        }
    }
}

/// One client on its own connection: a session of the old era, or none in the new.
struct Client {
    conn: Conn,
    session: Option<String>,
    era: Era,
}

impl Client {
    async fn open(addr: SocketAddr, era: Era) -> Result<Client> {
        if era == Era::Modern {
            return Ok(Client {
                conn: Conn::open_as(addr, MODERN).await?,
                session: None,
                era,
            });
        }
        let mut conn = Conn::open_as(addr, LEGACY).await?;
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"}}});
        let (status, session, body) = conn.post_with(&[], &init.to_string()).await?;
        if status != 200 || session.is_none() {
            return Err(format!(
                "initialize: HTTP {status}: {}",
                String::from_utf8_lossy(body)
            ));
        }
        let session = session.expect("checked above");
        let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        let (status, _, _) = conn
            .post_with(&[("mcp-session-id", &session)], initialized)
            .await?;
        if status != 202 {
            return Err(format!("initialized: HTTP {status}"));
        }
        Ok(Client {
            conn,
            session: Some(session),
            era,
        })
    }

    /// `calls` calls one after another; each one's latency in ns.
    async fn calls(&mut self, calls: usize) -> Result<Vec<u64>> {
        let mut latencies = Vec::with_capacity(calls);
        // The same call in both eras; the new one says in `_meta` what `initialize` said.
        let meta = match self.era {
            Era::Legacy => String::new(),
            Era::Modern => format!(
                r#","_meta":{{"io.modelcontextprotocol/protocolVersion":"{MODERN}","io.modelcontextprotocol/clientCapabilities":{{}},"io.modelcontextprotocol/clientInfo":{{"name":"bench","version":"1"}}}}"#
            ),
        };
        let session;
        let headers: &[(&str, &str)] = match &self.session {
            Some(id) => {
                session = [("mcp-session-id", id.as_str())];
                &session
            }
            None => &[("mcp-method", "tools/call"), ("mcp-name", TOOL)],
        };
        for n in 0..calls {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":{n},"method":"tools/call","params":{{"name":"{TOOL}","arguments":{{"text":"{ECHO_TEXT}"}}{meta}}}}}"#
            );
            let started = Instant::now();
            let (status, _, answer) = self.conn.post_with(headers, &body).await?;
            latencies.push(started.elapsed().as_nanos() as u64);
            if status != 200
                || !answer
                    .windows(ECHO_TEXT.len())
                    .any(|w| w == ECHO_TEXT.as_bytes())
            {
                return Err(format!(
                    "{}: HTTP {status}: {}",
                    self.era.name(),
                    String::from_utf8_lossy(answer)
                ));
            }
        }
        Ok(latencies)
    }
}

/// `clients` calling at once, `calls` in all; the gateway's CPU over the round.
async fn round(pid: Option<u32>, clients: &mut Vec<Client>, calls: usize) -> Result<Run> {
    let count = clients.len();
    let before = pid.and_then(cpu_ticks);
    let started = Instant::now();
    let tasks: Vec<_> = clients
        .drain(..)
        .map(|mut client| {
            tokio::spawn(async move {
                let latencies = client.calls(calls / count).await;
                (client, latencies)
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for task in tasks {
        let (client, run) = task.await.map_err(|e| e.to_string())?;
        latencies.extend(run?);
        clients.push(client);
    }
    Ok(Run {
        latencies,
        elapsed: started.elapsed(),
        cpu_ticks: pid.and_then(cpu_ticks).zip(before).map(|(a, b)| a - b),
    })
}

pub async fn bench(
    options: &Options,
    paths: &Paths,
    scratch: &Path,
) -> Result<serde_json::Map<String, Value>> {
    let config = scratch.join("gw-eras.toml");
    write_config(
        &config,
        &format!(
            "[http]\nmax_sessions = 20000\n\n[servers.ex]\ncommand = {}\n",
            toml_string(&paths.server)
        ),
    )?;
    let config = config.to_str().ok_or("scratch is not UTF-8")?;
    let args = ["serve", "--http", "127.0.0.1:0", "--config", config];
    let gateway = HttpTarget::start("eras", TOOL, &paths.gateway, &args, scratch).await?;
    let pid = gateway.pid();
    let eras = match std::env::var(ONE_ERA_VAR).as_deref() {
        Ok(LEGACY) => [Era::Legacy; 2],
        Ok(MODERN) => [Era::Modern; 2],
        _ => [Era::Legacy, Era::Modern],
    };
    // Per era: one client for the serial rounds, then the clients of the concurrent ones.
    let mut one = Vec::new();
    let mut many = Vec::new();
    for era in eras {
        one.push(vec![Client::open(gateway.addr, era).await?]);
        let mut clients = Vec::with_capacity(CLIENTS);
        for _ in 0..CLIENTS {
            clients.push(Client::open(gateway.addr, era).await?);
        }
        many.push(clients);
    }
    for k in 0..eras.len() {
        round(pid, &mut one[k], options.warmup / 4).await?;
        round(pid, &mut many[k], options.warmup).await?;
    }
    let mut serial: Vec<Tally> = eras.iter().map(|_| Tally::default()).collect();
    let mut wide: Vec<Tally> = eras.iter().map(|_| Tally::default()).collect();
    // Each round's new/old CPU per call at 32: its median is steadier than the totals'.
    let mut cpu_pairs = Vec::new();
    for r in 0..options.rounds {
        let mut cpu = [0.0; 2];
        for j in 0..eras.len() {
            // Alternate which era goes first, so that a drift in the machine hits both.
            let k = (r + j) % eras.len();
            serial[k].add(round(pid, &mut one[k], options.calls1).await?);
            let run = round(pid, &mut many[k], options.calls16).await?;
            cpu[k] = run.cpu_ticks.unwrap_or(0) as f64 / run.latencies.len().max(1) as f64;
            wide[k].add(run);
        }
        if cpu[0] > 0.0 {
            cpu_pairs.push(cpu[1] / cpu[0]);
        }
    }
    let mut rows: Vec<Row> = Vec::new();
    for (k, tally) in serial.into_iter().enumerate() {
        rows.push(tally.row(eras[k].name(), 1));
    }
    for (k, tally) in wide.into_iter().enumerate() {
        rows.push(tally.row(eras[k].name(), CLIENTS));
    }
    Ok(report(options, &rows, median(&mut cpu_pairs)))
}

fn report(options: &Options, rows: &[Row], cpu_median: f64) -> serde_json::Map<String, Value> {
    println!(
        "eras: {} rounds x {} calls at 1 client, {} rounds x {} calls over {CLIENTS} clients, \
         interleaved; one gateway over HTTP, {TOOL} (the example server over stdio); \
         cpu_us/call = the gateway's own",
        options.rounds, options.calls1, options.rounds, options.calls16
    );
    print_rows(rows);
    let (old1, new1, old32, new32) = (&rows[0], &rows[1], &rows[2], &rows[3]);
    let ratio = |new: Option<f64>, old: Option<f64>| Some(new? / old?);
    let cpu1 = ratio(new1.cpu_us_per_call, old1.cpu_us_per_call);
    let cpu32 = ratio(new32.cpu_us_per_call, old32.cpu_us_per_call);
    let rate1 = new1.calls_per_s / old1.calls_per_s;
    let rate32 = new32.calls_per_s / old32.calls_per_s;
    let shown = |r: Option<f64>| r.map_or("-".to_string(), |r| format!("{r:.2}x"));
    println!(
        "ratio new/old  CPU per call @1: {}  @{CLIENTS}: {} (median of rounds {cpu_median:.2}x; \
         target <= {CPU_RATIO}x, {})   calls/s @1: {rate1:.2}x  @{CLIENTS}: {rate32:.2}x \
         (target >= {RATE_RATIO}x, {})",
        shown(cpu1),
        shown(cpu32),
        verdict(cpu32.is_some_and(|r| r <= CPU_RATIO)),
        verdict(rate32 >= RATE_RATIO)
    );
    serde_json::Map::from_iter([
        (
            "eras_rows".to_string(),
            rows.iter()
                .map(|r| {
                    json!({"target": r.target, "inflight": r.inflight, "p50_us": r.p50_us,
                           "p99_us": r.p99_us, "calls_per_s": r.calls_per_s, "calls": r.calls,
                           "cpu_us_per_call": r.cpu_us_per_call})
                })
                .collect(),
        ),
        (
            "eras_ratios".to_string(),
            json!({"cpu_per_call_at_1": cpu1, "cpu_per_call_at_32": cpu32,
                   "cpu_per_call_at_32_median_of_rounds": cpu_median,
                   "calls_per_s_at_1": rate1, "calls_per_s_at_32": rate32}),
        ),
    ])
}
