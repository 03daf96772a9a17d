//! `tools/call echo` under load, interleaved round by round: the example server
//! direct (twice: its pipes through the reactor as the gateway's are, and through tokio's
//! stdin()/stdout() as servers on the official Rust SDK do), behind the gateway, and a WASM
//! plugin's `echo` behind the gateway; then the gateway's start-up with that server and
//! the memory of each target.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::pipe::{McpPipe, start_gateway, toml_string, write_config};
use crate::startup::median_startup;
use crate::stats::{Row, Run, Tally, cpu_ticks, memory_kib, mib, print_rows, verdict};
use crate::{Options, Paths, Result};

/// A process under test and the tool to call on it.
pub(crate) struct Target {
    pub(crate) name: &'static str,
    tool: &'static str,
    pub(crate) pipe: McpPipe,
    /// Why an optional target (the plugin) stopped being measured.
    failure: Option<String>,
}

impl Target {
    /// One run; a failure of the optional plugin target is noted and the bench goes on.
    pub(crate) async fn load(&mut self, calls: usize, inflight: usize) -> Result<Option<Run>> {
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

/// Starts, initialises and checks one target; `None` (with the reason printed) if it cannot serve.
pub(crate) async fn ready(
    name: &'static str,
    tool: &'static str,
    pipe: Result<McpPipe>,
) -> Result<Target> {
    let mut pipe = pipe?;
    pipe.wait_for_tool(tool, Duration::from_secs(10)).await?;
    pipe.check_echo(tool).await?;
    Ok(Target {
        name,
        tool,
        pipe,
        failure: None,
    })
}

/// Warms `targets` up, then measures them at 1 and 16 in flight, interleaved round by round:
/// one row per target that did not drop out and window size.
pub(crate) async fn warm_then_measure(
    options: &Options,
    targets: &mut [Target],
) -> Result<Vec<Row>> {
    // Warm-up: caches, allocator pools, branch predictors, the JIT code of the plugin.
    for target in targets.iter_mut() {
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
    Ok(rows)
}

/// Measures and prints; returns the figures for `bench-results.json`.
pub async fn bench(
    options: &Options,
    paths: &Paths,
    scratch: &Path,
) -> Result<serde_json::Map<String, Value>> {
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
    // The same server on tokio's stdin()/stdout(), as servers on the official Rust SDK
    // read and write: a second baseline, so the ratios can be read against either.
    targets.push(
        ready(
            "direct-sdk-io",
            "echo",
            McpPipe::spawn("direct-sdk-io", &paths.server, &["--tokio-stdio"], scratch),
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

    let rows = warm_then_measure(options, &mut targets).await?;

    if let Some(why) = targets.iter().find_map(|t| t.failure.clone()) {
        wasm_note = Some(why);
    }
    let memory: Vec<(&str, Option<(u64, u64)>)> = targets
        .iter()
        .filter(|t| t.failure.is_none())
        .map(|t| (t.name, t.pipe.pid().and_then(memory_kib)))
        .collect();
    let (startup_ms, startup_runs) = median_startup(
        paths,
        &gw_config,
        scratch,
        &["ex__echo".to_string()],
        options.startups,
    )
    .await?;
    for target in targets {
        target.pipe.close().await;
    }

    Ok(report(
        options,
        &rows,
        &memory,
        startup_ms,
        &startup_runs,
        wasm_note,
    ))
}

fn report(
    options: &Options,
    rows: &[Row],
    memory: &[(&str, Option<(u64, u64)>)],
    startup_ms: f64,
    startup_runs: &[f64],
    wasm_note: Option<String>,
) -> serde_json::Map<String, Value> {
    println!(
        "{} rounds x {} calls at 1 in flight, {} rounds x {} calls at 16 in flight, interleaved; latency = write to answer",
        options.rounds, options.calls1, options.rounds, options.calls16
    );
    print_rows(rows);
    println!(
        "(cpu_us/call: CPU time of the process called, per call; for the gateways, without the server behind them)"
    );
    let find = |target: &str, inflight: usize| {
        rows.iter()
            .find(|r| r.target == target && r.inflight == inflight)
    };
    let mut ratios = serde_json::Map::new();
    for baseline in ["direct", "direct-sdk-io"] {
        for (target, p50_max, rate_min) in [("gateway", 1.5, 0.6), ("wasm", 1.3, 0.8)] {
            let (Some(d1), Some(t1), Some(d16), Some(t16)) = (
                find(baseline, 1),
                find(target, 1),
                find(baseline, 16),
                find(target, 16),
            ) else {
                continue;
            };
            let p50 = t1.p50_us / d1.p50_us;
            let rate = t16.calls_per_s / d16.calls_per_s;
            println!(
                "ratio {target}/{baseline}  p50 @1: {p50:.2}x (target <= {p50_max}x, {})   throughput @16: {rate:.2}x (target >= {rate_min}x, {})",
                verdict(p50 <= p50_max),
                verdict(rate >= rate_min)
            );
            let key = match baseline {
                "direct" => target.to_string(),
                _ => format!("{target}_vs_{baseline}"),
            };
            ratios.insert(
                key,
                json!({"p50_at_1": p50, "p50_at_1_max": p50_max, "p50_ok": p50 <= p50_max,
                       "throughput_at_16": rate, "throughput_at_16_min": rate_min, "throughput_ok": rate >= rate_min}),
            );
        }
    }
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
    match results {
        Value::Object(map) => map,
        _ => unreachable!("a JSON object literal"),
    }
}
