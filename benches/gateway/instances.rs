//! `instance = "shared"` against the default `"call"`: the test plugin `minimal.wasm`'s
//! `echo` behind two gateways that differ only in that setting, interleaved round by round
//! at 1 and 16 in flight. A shared instance skips what a fresh one costs each call (an
//! instantiation made ahead on a plugin thread, and the store's reset after it).

use std::path::Path;

use serde_json::{Map, Value, json};

use crate::calls::{Target, ready, warm_then_measure};
use crate::pipe::{start_gateway, toml_string, write_config};
use crate::stats::print_rows;
use crate::{Options, Paths, Result};

pub async fn bench(options: &Options, paths: &Paths, scratch: &Path) -> Result<Map<String, Value>> {
    if !paths.plugin.is_file() {
        let why = format!(
            "{} does not exist (build the test plugins)",
            paths.plugin.display()
        );
        return Ok(crate::skipped("instances", why));
    }
    let mut targets: Vec<Target> = Vec::new();
    for (name, mode) in [("wasm-call", "call"), ("wasm-shared", "shared")] {
        let config = scratch.join(format!("gw-{name}.toml"));
        write_config(
            &config,
            &format!(
                "[plugins.wecho]\npath = {}\ninstance = \"{mode}\"\n",
                toml_string(&paths.plugin)
            ),
        )?;
        let pipe = start_gateway(name, paths, &config, scratch).await;
        targets.push(ready(name, "wecho__echo", pipe).await?);
    }
    let rows = warm_then_measure(options, &mut targets).await?;
    for target in targets {
        target.pipe.close().await;
    }

    println!(
        "plugin instance modes ({}, `echo`): {} rounds x {} calls at 1 in flight, {} x {} at 16, interleaved",
        paths.plugin.display(),
        options.rounds,
        options.calls1,
        options.rounds,
        options.calls16
    );
    print_rows(&rows);
    let find = |target: &str, inflight: usize| {
        rows.iter()
            .find(|r| r.target == target && r.inflight == inflight)
            .ok_or_else(|| format!("instances: no {target} row at {inflight}"))
    };
    let mut results = Map::new();
    for inflight in [1, 16] {
        let (call, shared) = (find("wasm-call", inflight)?, find("wasm-shared", inflight)?);
        let cpu = call.cpu_us_per_call.zip(shared.cpu_us_per_call);
        println!(
            "shared/call @{inflight}: p50 {:.2}x, throughput {:.2}x, cpu/call {}",
            shared.p50_us / call.p50_us,
            shared.calls_per_s / call.calls_per_s,
            cpu.map_or("-".into(), |(c, s)| format!("{:.2}x", s / c)),
        );
        for row in [call, shared] {
            results.insert(
                format!("{}_at_{inflight}", row.target),
                json!({"p50_us": row.p50_us, "p99_us": row.p99_us, "calls_per_s": row.calls_per_s,
                       "cpu_us_per_call": row.cpu_us_per_call, "round_rates": row.round_rates}),
            );
        }
    }
    Ok(Map::from_iter([(
        "instances".into(),
        Value::Object(results),
    )]))
}
