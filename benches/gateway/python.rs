//! The Python plugin `text` (componentize-py, a whole CPython in the component)
//! behind `wasmgate serve`, `text__reverse` called at 1 in flight, two ways:
//! - paced: a pause between calls, as an agent calls tools; the gateway's pool of
//!   ready instances (see src/plugin/pool.rs) has refilled in the background by
//!   the next call, so instantiation stays off the critical path;
//! - back to back: the next call is written as soon as the answer is read; the
//!   refill (about 4 ms of CPU per Python instance, made and reset) then competes
//!   with the calls.
//!
//! And both again with `instance = "shared"`, where a call reuses a warm instance.

use std::path::Path;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::pipe::{McpPipe, start_gateway, toml_string, write_config};
use crate::stats::{Spread, cpu_ticks, cpu_us_per_call, verdict};
use crate::{ECHO_TEXT, Options, Paths, Result};

const TOOL: &str = "text__reverse";
/// The pause between paced calls: long enough for the pool to make the next
/// instance (an agent's calls are seconds apart; at 2 ms the refill fell behind).
const PAUSE: Duration = Duration::from_millis(10);
/// The first load compiles 18 MB of CPython: a minute or more on a small, busy machine.
const LOAD_WITHIN: Duration = Duration::from_secs(600);
const P50_TARGET_US: f64 = 100.0;

/// Latencies of one way of calling, and the gateway's CPU per call meanwhile
/// (which includes the background instantiations).
struct Way {
    spread: Spread,
    cpu_us_per_call: Option<f64>,
}

pub async fn bench(options: &Options, paths: &Paths, scratch: &Path) -> Result<Map<String, Value>> {
    if !paths.python.is_file() {
        return Ok(crate::skipped(
            "python",
            format!(
                "{} does not exist (build it with `bash plugins/python/text/build.sh`)",
                paths.python.display()
            ),
        ));
    }
    let (paced, back_to_back, load) = measure(options, paths, scratch, "call").await?;
    let (shared_paced, shared_back_to_back, _) = measure(options, paths, scratch, "shared").await?;
    let calls = options.py_calls;
    let load_note = match load.as_ref().and_then(|e| e["compile_ms"].as_u64()) {
        Some(ms) => format!("compiled in {:.1} s, not cached yet", ms as f64 / 1e3),
        None => "from the compile cache".to_string(),
    };
    println!(
        "python plugin ({TOOL}, {} MB component, {load_note}), 1 in flight, {calls} calls each; latency = write to answer",
        std::fs::metadata(&paths.python).map_or(0, |m| m.len()) / 1_000_000
    );
    println!(
        "{:<32}{:>10}{:>10}{:>10}{:>14}",
        "calls", "p50_us", "p99_us", "max_us", "cpu_us/call"
    );
    let pause_ms = PAUSE.as_millis();
    let mut json_ways = Map::new();
    for (label, key, way) in [
        (format!("paced ({pause_ms} ms pause)"), "paced", &paced),
        ("back to back".to_string(), "back_to_back", &back_to_back),
        ("shared, paced".to_string(), "shared_paced", &shared_paced),
        (
            "shared, back to back".to_string(),
            "shared_back_to_back",
            &shared_back_to_back,
        ),
    ] {
        let Spread {
            p50_us,
            p99_us,
            max_us,
            ..
        } = way.spread;
        let cpu = way
            .cpu_us_per_call
            .map_or("-".into(), |c| format!("{c:.1}"));
        println!("{label:<32}{p50_us:>10.1}{p99_us:>10.1}{max_us:>10.1}{cpu:>14}");
        let mut entry = way.spread.json();
        entry["cpu_us_per_call"] = json!(way.cpu_us_per_call);
        entry["p50_ok"] = json!(p50_us <= P50_TARGET_US);
        json_ways.insert(key.into(), entry);
    }
    println!(
        "  p50 target <= {P50_TARGET_US} us: paced {}, back to back {}; with instance = \"shared\": paced {}, back to back {}   (cpu_us/call: the gateway's, background instantiation included)",
        verdict(paced.spread.p50_us <= P50_TARGET_US),
        verdict(back_to_back.spread.p50_us <= P50_TARGET_US),
        verdict(shared_paced.spread.p50_us <= P50_TARGET_US),
        verdict(shared_back_to_back.spread.p50_us <= P50_TARGET_US),
    );
    json_ways.insert("pause_ms".into(), json!(pause_ms));
    json_ways.insert("p50_target_us".into(), json!(P50_TARGET_US));
    json_ways.insert("load".into(), load.unwrap_or(Value::Null));
    Ok(Map::from_iter([(
        "python".into(),
        Value::Object(json_ways),
    )]))
}

/// The plugin behind a gateway with `instance = "{mode}"`: paced and back to back, after a
/// warm-up of both; and the load event.
async fn measure(
    options: &Options,
    paths: &Paths,
    scratch: &Path,
    mode: &str,
) -> Result<(Way, Way, Option<Value>)> {
    let config = scratch.join(format!("gw-python-{mode}.toml"));
    // No cache_dir: the user's compile cache keeps the compiled CPython across runs.
    write_config(
        &config,
        &format!(
            "[plugins.text]\npath = {}\ninstance = \"{mode}\"\n",
            toml_string(&paths.python)
        ),
    )?;
    let mut pipe = start_gateway("python", paths, &config, scratch).await?;
    pipe.wait_for_tool(TOOL, LOAD_WITHIN).await?;
    let load = pipe.events("plugin.loaded", 1).await?.pop();
    let reversed: String = ECHO_TEXT.chars().rev().collect();
    pipe.check_text(TOOL, &reversed).await?;
    let calls = options.py_calls;
    // Warm-up, both ways: the JIT code's pages, the allocator, the pool itself.
    paced(&mut pipe, calls / 10).await?;
    back_to_back(&mut pipe, calls / 10).await?;
    let paced = paced(&mut pipe, calls).await?;
    let back_to_back = back_to_back(&mut pipe, calls).await?;
    pipe.close().await;
    Ok((paced, back_to_back, load))
}

/// `calls` single calls, each after a pause of [`PAUSE`].
async fn paced(pipe: &mut McpPipe, calls: usize) -> Result<Way> {
    let before = pipe.pid().and_then(cpu_ticks);
    let mut latencies = Vec::with_capacity(calls);
    for _ in 0..calls {
        tokio::time::sleep(PAUSE).await;
        latencies.extend(pipe.load(TOOL, 1, 1).await?.0);
    }
    way(pipe, before, latencies)
}

/// `calls` calls, each written as soon as the previous answer is read.
async fn back_to_back(pipe: &mut McpPipe, calls: usize) -> Result<Way> {
    let before = pipe.pid().and_then(cpu_ticks);
    let (latencies, _) = pipe.load(TOOL, calls, 1).await?;
    way(pipe, before, latencies)
}

fn way(pipe: &McpPipe, cpu_before: Option<u64>, latencies: Vec<u64>) -> Result<Way> {
    let count = latencies.len();
    Ok(Way {
        cpu_us_per_call: cpu_us_per_call(cpu_before, pipe.pid().and_then(cpu_ticks), count),
        spread: Spread::of(latencies).ok_or("python plugin: no calls were made")?,
    })
}
