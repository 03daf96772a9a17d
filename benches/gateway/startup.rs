//! Start-up: from spawning the gateway to its first `tools/list` answer that is
//! complete; and start-up and idle memory with ten plugins in a plugin directory
//! (copies of the bench's plugin), every one already in the compile cache.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use crate::component::{echo_plugin, with_custom_section};
use crate::pipe::{McpPipe, start_gateway, toml_string, write_config};
use crate::stats::{median, memory_kib, mib, verdict};
use crate::{Options, Paths, READ_TIMEOUT, Result};

/// Time from spawning the gateway to the end of its first `tools/list` listing (all
/// pages) that names every tool of `expect`, and the gateway, still running.
/// Initialize and the first tools/list are written at once, without waiting for any answer.
pub async fn startup_once(
    paths: &Paths,
    config: &Path,
    scratch: &Path,
    expect: &[String],
) -> Result<(Duration, McpPipe)> {
    let begun = Instant::now();
    let mut pipe = start_gateway("startup", paths, config, scratch).await?;
    pipe.initialize_unawaited().await?;
    loop {
        let listed = pipe.tool_names().await?;
        if expect.iter().all(|name| listed.contains(name)) {
            return Ok((begun.elapsed(), pipe));
        }
        if begun.elapsed() > READ_TIMEOUT {
            return Err(format!(
                "the gateway never listed all of {}",
                expect.join(", ")
            ));
        }
        // Not all there yet (the gateway answered before a backend was ready): list again.
    }
}

/// The median start-up of `runs` starts, in ms, and every run's.
pub async fn median_startup(
    paths: &Paths,
    config: &Path,
    scratch: &Path,
    expect: &[String],
    runs: usize,
) -> Result<(f64, Vec<f64>)> {
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let (elapsed, pipe) = startup_once(paths, config, scratch, expect).await?;
        pipe.close().await;
        times.push(elapsed.as_secs_f64() * 1_000.0);
    }
    let all = times.clone();
    Ok((median(&mut times), all))
}

const PLUGINS: usize = 10;
const STARTUP_TARGET_MS: f64 = 50.0;
const RSS_BASE_MIB: f64 = 30.0;
const RSS_PER_PLUGIN_MIB: f64 = 2.0;
/// Time an idle gateway is left alone before its RSS is read.
const SETTLE: Duration = Duration::from_millis(500);

/// Start-up with ten cached plugins vs none, and the RSS of each, idle.
pub async fn plugins(
    options: &Options,
    paths: &Paths,
    scratch: &Path,
) -> Result<Map<String, Value>> {
    let original = match echo_plugin(paths, "startup") {
        Ok(bytes) => bytes,
        Err(skipped) => return Ok(skipped),
    };
    let dir = scratch.join("startup");
    let (full, empty) = (dir.join("plugins"), dir.join("empty"));
    let mut expect = Vec::new();
    for folder in [&full, &empty] {
        std::fs::create_dir_all(folder).map_err(|e| format!("{}: {e}", folder.display()))?;
    }
    // Ten copies of echo that differ in a custom section: ten digests, ten cache entries.
    for n in 0..PLUGINS {
        let name = format!("p{n:02}");
        let bytes = with_custom_section(&original, "wasmgate-bench", name.as_bytes());
        let file = full.join(format!("{name}.wasm"));
        std::fs::write(&file, bytes).map_err(|e| format!("{}: {e}", file.display()))?;
        expect.push(format!("{name}__echo"));
    }
    // The same settings both ways but for the folder; the cache is this run's.
    let config = |name: &str, folder: &Path| -> Result<std::path::PathBuf> {
        let path = dir.join(name);
        write_config(
            &path,
            &format!(
                "[plugins]\ndir = {}\ncache_dir = {}\n",
                toml_string(folder),
                toml_string(&dir.join("cache"))
            ),
        )?;
        Ok(path)
    };
    let (with_plugins, without) = (config("full.toml", &full)?, config("empty.toml", &empty)?);

    // One start compiles the ten into the cache; every start after it must load them from there.
    let (first, pipe) = startup_once(paths, &with_plugins, scratch, &expect).await?;
    pipe.close().await;
    let (mut pipe, rss_full) = idle_rss(paths, &with_plugins, scratch, &expect).await?;
    let loads = pipe.events("plugin.loaded", PLUGINS).await?;
    let cached = loads.iter().filter(|e| e["cached"] == json!(true)).count();
    if cached < PLUGINS {
        return Err(format!(
            "after a warm-up start, only {cached} of {PLUGINS} plugins came from the cache: {loads:?}"
        ));
    }
    let mut per_load_ms: Vec<f64> = loads
        .iter()
        .filter_map(|e| e["total_ms"].as_f64())
        .collect();
    pipe.close().await;
    let (_, rss_none) = idle_rss(paths, &without, scratch, &[]).await?;
    let (full_ms, full_runs) =
        median_startup(paths, &with_plugins, scratch, &expect, options.startups).await?;
    let (none_ms, none_runs) =
        median_startup(paths, &without, scratch, &[], options.startups).await?;

    let rss_limit = RSS_BASE_MIB + RSS_PER_PLUGIN_MIB * PLUGINS as f64;
    let (full_mib, none_mib) = (mib(rss_full), mib(rss_none));
    let per_plugin = (full_mib - none_mib) / PLUGINS as f64;
    println!(
        "start-up to the first complete tools/list, median of {} starts (the first start, which compiled them: {:.0} ms)",
        full_runs.len(),
        first.as_secs_f64() * 1e3
    );
    println!(
        "  {PLUGINS} cached plugins: {full_ms:.1} ms (target <= {STARTUP_TARGET_MS} ms, {})   no plugin: {none_ms:.1} ms   one plugin's load (cache read + validation, in parallel): {:.0} ms median",
        verdict(full_ms <= STARTUP_TARGET_MS),
        median(&mut per_load_ms)
    );
    println!(
        "  RSS idle, {} ms after start-up: {PLUGINS} plugins {full_mib:.1} MiB (target <= {RSS_BASE_MIB} + {RSS_PER_PLUGIN_MIB} x {PLUGINS} = {rss_limit} MiB, {}), no plugin {none_mib:.1} MiB (target <= {RSS_BASE_MIB} MiB, {}); {per_plugin:.2} MiB more per plugin",
        SETTLE.as_millis(),
        verdict(full_mib <= rss_limit),
        verdict(none_mib <= RSS_BASE_MIB),
    );
    Ok(Map::from_iter([(
        "plugins_startup".into(),
        json!({
            "plugins": PLUGINS,
            "startup_ms": {"median": full_ms, "runs": full_runs, "target": STARTUP_TARGET_MS,
                           "ok": full_ms <= STARTUP_TARGET_MS, "first_start_compiling": first.as_secs_f64() * 1e3},
            "startup_ms_no_plugin": {"median": none_ms, "runs": none_runs},
            "plugin_load_ms": per_load_ms,
            "rss_kib": {"plugins": rss_full, "none": rss_none},
            "rss_mib_per_plugin": per_plugin,
            "rss_ok": full_mib <= rss_limit && none_mib <= RSS_BASE_MIB,
        }),
    )]))
}

/// A gateway started and left idle for [`SETTLE`] after its first complete list, and its RSS.
async fn idle_rss(
    paths: &Paths,
    config: &Path,
    scratch: &Path,
    expect: &[String],
) -> Result<(McpPipe, u64)> {
    let (_, pipe) = startup_once(paths, config, scratch, expect).await?;
    tokio::time::sleep(SETTLE).await;
    let (rss, _) = pipe
        .pid()
        .and_then(memory_kib)
        .ok_or("cannot read the gateway's memory from /proc")?;
    Ok((pipe, rss))
}
