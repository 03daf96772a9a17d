//! The middleware chain's cost on the server path: `tools/call echo` on the example server
//! through gateways that differ only in their `[[middleware]]`: none, one pass-through
//! request hook, one pass-through request and result hook, and a chain of three such
//! links, all on `instance = "shared"` (the test fixture `mwtest.wasm`, configured to pass).
//! Interleaved round by round; the figures are the gateway's CPU per call over the
//! no-middleware gateway's, and calls/s at 16 in flight over its, which issue 37 sets
//! targets for.

use std::path::Path;

use serde_json::{Value, json};

use crate::calls::{ready, warm_then_measure};
use crate::pipe::{start_gateway, toml_string, write_config};
use crate::stats::{Row, print_rows, verdict};
use crate::{Options, Paths, Result};

const TOOL: &str = "ex__echo";
/// Issue 37's bounds: extra gateway CPU per call, µs, of each target over `gateway`...
const CPU_BOUNDS: [(&str, f64); 3] = [("mw-request", 5.0), ("mw-both", 10.0), ("mw-chain3", 25.0)];
/// ...and the share of its calls/s at 16 in flight a target must keep.
const RATE_MIN: f64 = 0.80;

/// A `[[middleware]]` link of the fixture that passes what it hooks.
fn link(fixture: &Path, name: &str, results: bool) -> String {
    let results = if results { "tools/call" } else { "" };
    format!(
        "[[middleware]]\nname = \"{name}\"\npath = {}\nconfig = {{ \"interest.requests\" = \"tools/call\", \"interest.results\" = \"{results}\", request = \"pass\", result = \"pass\", quiet = \"true\" }}\n",
        toml_string(fixture)
    )
}

pub async fn bench(
    options: &Options,
    paths: &Paths,
    scratch: &Path,
) -> Result<serde_json::Map<String, Value>> {
    let fixture = paths
        .root
        .join("tests/plugins/target/wasm32-wasip2/release/mwtest.wasm");
    if !fixture.is_file() {
        let why = format!(
            "{} does not exist (build the test plugins)",
            fixture.display()
        );
        return Ok(crate::skipped("middleware", why));
    }
    let server = format!("[servers.ex]\ncommand = {}\n", toml_string(&paths.server));
    let variants = [
        ("gateway", String::new()),
        ("mw-request", link(&fixture, "one", false)),
        ("mw-both", link(&fixture, "one", true)),
        (
            "mw-chain3",
            ["one", "two", "three"]
                .map(|n| link(&fixture, n, true))
                .concat(),
        ),
    ];
    let mut targets = Vec::new();
    for (name, links) in variants {
        let config = scratch.join(format!("gw-{name}.toml"));
        write_config(&config, &format!("{server}{links}"))?;
        targets.push(
            ready(
                name,
                TOOL,
                start_gateway(name, paths, &config, scratch).await,
            )
            .await?,
        );
    }
    let rows = warm_then_measure(options, &mut targets).await?;
    for target in targets {
        target.pipe.close().await;
    }
    Ok(report(options, &rows))
}

fn report(options: &Options, rows: &[Row]) -> serde_json::Map<String, Value> {
    println!(
        "middleware: {} rounds x {} calls at 1 and {} at 16 in flight, interleaved; all on the example server",
        options.rounds, options.calls1, options.calls16
    );
    print_rows(rows);
    let find = |target: &str, inflight: usize| {
        rows.iter()
            .find(|r| r.target == target && r.inflight == inflight)
    };
    let mut ratios = serde_json::Map::new();
    for (target, cpu_max) in CPU_BOUNDS {
        let (Some(b1), Some(t1), Some(b16), Some(t16)) = (
            find("gateway", 1),
            find(target, 1),
            find("gateway", 16),
            find(target, 16),
        ) else {
            continue;
        };
        let extra = |t: &Row, b: &Row| Some(t.cpu_us_per_call? - b.cpu_us_per_call?);
        let (cpu1, cpu16) = (extra(t1, b1), extra(t16, b16));
        let rate = t16.calls_per_s / b16.calls_per_s;
        let shown = |cpu: Option<f64>| cpu.map_or("unknown".into(), |c| format!("{c:+.1} us"));
        let cpu_ok = cpu16.is_some_and(|c| c <= cpu_max);
        println!(
            "{target} over gateway: CPU/call @1 {}, @16 {} (target <= {cpu_max} us, {})   calls/s @16: {rate:.2}x (target >= {RATE_MIN}x, {})",
            shown(cpu1),
            shown(cpu16),
            verdict(cpu_ok),
            verdict(rate >= RATE_MIN)
        );
        ratios.insert(
            target.into(),
            json!({"extra_cpu_us_at_1": cpu1, "extra_cpu_us_at_16": cpu16, "extra_cpu_us_max": cpu_max,
                   "cpu_ok": cpu_ok, "throughput_at_16": rate, "throughput_at_16_min": RATE_MIN,
                   "throughput_ok": rate >= RATE_MIN}),
        );
    }
    let results = json!({
        "middleware_rows": rows.iter().map(|r| json!({
            "target": r.target, "inflight": r.inflight, "p50_us": r.p50_us, "p99_us": r.p99_us,
            "calls_per_s": r.calls_per_s, "calls": r.calls, "cpu_us_per_call": r.cpu_us_per_call,
        })).collect::<Vec<_>>(),
        "middleware_ratios": ratios,
    });
    match results {
        Value::Object(map) => map,
        _ => unreachable!("a JSON object literal"),
    }
}
