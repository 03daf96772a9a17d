//! A remote server's cost: `tools/call echo` to the Streamable HTTP echo server
//! (examples/http_echo_server.rs) called directly over HTTP by this process, against the
//! same server as a remote backend of the gateway, called over the gateway's stdio;
//! interleaved round by round, at 1 and at 16 in flight.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::http::{HttpTarget, Session};
use crate::pipe::{start_gateway, write_config};
use crate::stats::{Row, Run, Tally, cpu_ticks, print_rows, verdict};
use crate::{Options, Paths, Result};

/// Requests in flight for the throughput runs: direct, that many sessions calling at once.
const INFLIGHT: usize = 16;
/// The targets of the issue: at most this much added at p50 at 1 in flight...
const ADDED_P50_US: f64 = 40.0;
/// ...and at least this share of the direct throughput at 16 in flight.
const THROUGHPUT_SHARE: f64 = 0.7;

pub async fn bench(
    options: &Options,
    paths: &Paths,
    scratch: &Path,
) -> Result<serde_json::Map<String, Value>> {
    let server = paths
        .target
        .join(&paths.profile)
        .join("examples/http_echo_server");
    if !server.is_file() {
        return Ok(crate::skipped(
            "remote",
            format!("{} is missing", server.display()),
        ));
    }
    let mut direct = HttpTarget::start("direct-http", "echo", &server, &[], scratch).await?;
    let config = scratch.join("gw-remote.toml");
    write_config(
        &config,
        &format!(
            "[servers.echo]\nurl = \"http://{}/mcp\"\ntransport = \"streamable-http\"\n",
            direct.addr
        ),
    )?;
    let tool = "echo__echo";
    let mut gateway = start_gateway("gateway-remote", paths, &config, scratch).await?;
    gateway.wait_for_tool(tool, Duration::from_secs(30)).await?;
    gateway.check_echo(tool).await?;

    let mut sessions: Vec<Session> = Vec::new();
    direct.serial(options.warmup / 4).await?;
    direct
        .concurrent(&mut sessions, INFLIGHT, options.warmup)
        .await?;
    gateway.load(tool, options.warmup / 4, 1).await?;
    gateway.load(tool, options.warmup, INFLIGHT).await?;

    let (mut direct1, mut direct16) = (Tally::default(), Tally::default());
    let (mut gateway1, mut gateway16) = (Tally::default(), Tally::default());
    for round in 0..options.rounds {
        for k in 0..2 {
            if (round + k) % 2 == 0 {
                direct1.add(direct.serial(options.calls1).await?);
                direct16.add(
                    direct
                        .concurrent(&mut sessions, INFLIGHT, options.calls16)
                        .await?,
                );
            } else {
                for (tally, calls, inflight) in [
                    (&mut gateway1, options.calls1, 1),
                    (&mut gateway16, options.calls16, INFLIGHT),
                ] {
                    let before = gateway.pid().and_then(cpu_ticks);
                    let (latencies, elapsed) = gateway.load(tool, calls, inflight).await?;
                    let after = gateway.pid().and_then(cpu_ticks);
                    tally.add(Run {
                        latencies,
                        elapsed,
                        cpu_ticks: after.zip(before).map(|(a, b)| a - b),
                    });
                }
            }
        }
    }
    gateway.close().await;
    let rows = [
        direct1.row("direct-http", 1),
        gateway1.row("gateway-remote", 1),
        direct16.row("direct-http", INFLIGHT),
        gateway16.row("gateway-remote", INFLIGHT),
    ];
    Ok(report(options, &rows))
}

fn report(options: &Options, rows: &[Row]) -> serde_json::Map<String, Value> {
    println!(
        "remote: {} rounds x {} calls at 1 in flight, {} rounds x {} calls at {INFLIGHT} in flight, interleaved; \
         direct = this process over HTTP, gateway-remote = over the gateway's stdio to the same server",
        options.rounds, options.calls1, options.rounds, options.calls16
    );
    print_rows(rows);
    let (d1, g1, d16, g16) = (&rows[0], &rows[1], &rows[2], &rows[3]);
    let added = g1.p50_us - d1.p50_us;
    let share = g16.calls_per_s / d16.calls_per_s;
    println!(
        "gateway-remote vs direct-http: added p50 @1: {added:.1} us (target <= {ADDED_P50_US} us, {})   \
         throughput @{INFLIGHT}: {share:.2}x (target >= {THROUGHPUT_SHARE}x, {})",
        verdict(added <= ADDED_P50_US),
        verdict(share >= THROUGHPUT_SHARE)
    );
    serde_json::Map::from_iter([
        (
            "remote_rows".to_string(),
            rows.iter()
                .map(|r| {
                    json!({"target": r.target, "inflight": r.inflight, "p50_us": r.p50_us, "p99_us": r.p99_us,
                           "calls_per_s": r.calls_per_s, "calls": r.calls, "cpu_us_per_call": r.cpu_us_per_call})
                })
                .collect(),
        ),
        (
            "remote_ratios".to_string(),
            json!({"added_p50_us_at_1": added, "throughput_at_16": share}),
        ),
    ])
}
