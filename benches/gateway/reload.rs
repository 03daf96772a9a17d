//! Hot reload: `wasmgate serve` on a plugin directory holding the bench's plugin
//! (`minimal`, or `WASMGATE_BENCH_PLUGIN`) as `echo.wasm`, a client connected; each round replaces the file with a new version (temporary
//! file, then a rename over it, as cargo and editors do) and measures from the
//! rename to the client reading `notifications/tools/list_changed`; a call must
//! then be answered. Every version has other bytes (a custom section), so each
//! reload compiles: the cache directory is this run's, and it never holds them.

use std::path::Path;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::component::{echo_plugin, replace_file, with_custom_section};
use crate::pipe::{start_gateway, toml_string, write_config};
use crate::stats::{Spread, median, verdict};
use crate::{Options, Paths, Result};

const TOOL: &str = "echo__echo";
const P50_TARGET_MS: f64 = 300.0;
/// How long one reload may take before the bench gives up.
const RELOAD_WITHIN: Duration = Duration::from_secs(30);
/// Quiet time between rounds, so that one reload's aftermath is not in the next.
const BETWEEN: Duration = Duration::from_millis(200);

pub async fn bench(options: &Options, paths: &Paths, scratch: &Path) -> Result<Map<String, Value>> {
    let original = match echo_plugin(paths, "reload") {
        Ok(bytes) => bytes,
        Err(skipped) => return Ok(skipped),
    };
    let dir = scratch.join("reload");
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins).map_err(|e| format!("{}: {e}", plugins.display()))?;
    let version = |n: usize| {
        with_custom_section(
            &original,
            "wasmgate-bench",
            format!("reload {n}").as_bytes(),
        )
    };
    let file = plugins.join("echo.wasm");
    std::fs::write(&file, version(0)).map_err(|e| format!("{}: {e}", file.display()))?;
    let config = dir.join("gw.toml");
    write_config(
        &config,
        &format!(
            "[plugins]\ndir = {}\ncache_dir = {}\n",
            toml_string(&plugins),
            toml_string(&dir.join("cache"))
        ),
    )?;

    let mut pipe = start_gateway("reload", paths, &config, scratch).await?;
    pipe.wait_for_tool(TOOL, Duration::from_secs(30)).await?;
    pipe.check_echo(TOOL).await?;
    let mut latencies = Vec::with_capacity(options.reloads);
    let (mut compile_ms, mut load_ms) = (Vec::new(), Vec::new());
    for n in 1..=options.reloads {
        tokio::time::sleep(BETWEEN).await;
        let renamed = replace_file(&file, &version(n))?;
        pipe.wait_for_notification("notifications/tools/list_changed", RELOAD_WITHIN)
            .await
            .map_err(|e| format!("reload {n}: {e}"))?;
        latencies.push(renamed.elapsed().as_nanos() as u64);
        pipe.check_echo(TOOL)
            .await
            .map_err(|e| format!("after reload {n}: {e}"))?;
        // The gateway's own account of the reload: how long compiling and loading took.
        let event = pipe
            .events("plugin.reloaded", 1)
            .await?
            .pop()
            .unwrap_or_default();
        match event["compile_ms"].as_f64() {
            Some(ms) => compile_ms.push(ms),
            None => {
                return Err(format!(
                    "reload {n} was not compiled (a cache hit?): {event}"
                ));
            }
        }
        load_ms.extend(event["total_ms"].as_f64());
    }
    pipe.close().await;

    let spread = Spread::of(latencies).ok_or("hot reload: no rounds")?;
    let (p50_ms, max_ms) = (spread.p50_us / 1e3, spread.max_us / 1e3);
    let debounce_ms = debounce_ms();
    let (compile_p50, load_p50) = (median(&mut compile_ms), median(&mut load_ms));
    println!(
        "hot reload of {} as echo.wasm ({} KB, new bytes each time), {} rounds; latency = rename over the file to notifications/tools/list_changed read",
        paths.plugin.file_name().map_or_else(
            || paths.plugin.display().to_string(),
            |f| f.to_string_lossy().into_owned()
        ),
        original.len() / 1024,
        spread.count
    );
    println!(
        "  p50 {p50_ms:.1} ms, max {max_ms:.1} ms (target p50 <= {P50_TARGET_MS} ms, {})",
        verdict(p50_ms <= P50_TARGET_MS)
    );
    let debounce_note = debounce_ms.map_or("the watcher's debounce (unknown)".to_string(), |d| {
        format!(
            "the watcher's debounce {d} ms ({:.0}% of p50)",
            100.0 * d / p50_ms
        )
    });
    println!(
        "  of which: {debounce_note}; read + compile + validate {load_p50:.0} ms median (compile alone {compile_p50:.0} ms, the gateway's plugin.reloaded events); the rest is file events, catalog swap and pipes"
    );
    Ok(Map::from_iter([(
        "reload".into(),
        json!({"rounds": spread.count, "latency": spread.json(), "p50_ms": p50_ms, "max_ms": max_ms,
               "p50_target_ms": P50_TARGET_MS, "p50_ok": p50_ms <= P50_TARGET_MS,
               "debounce_ms": debounce_ms, "load_ms_median": load_p50, "compile_ms_median": compile_p50}),
    )]))
}

/// The watcher's debounce, read from the source (`pub const DEBOUNCE: Duration =
/// Duration::from_millis(N);` in src/plugin/watch.rs), which is private to the crate:
/// read here so that the report cannot go stale when it changes.
fn debounce_ms() -> Option<f64> {
    let source = include_str!("../../src/plugin/watch.rs");
    let line = source
        .lines()
        .find(|l| l.contains("const DEBOUNCE: Duration"))?;
    let millis = line.split("from_millis(").nth(1)?.split(')').next()?;
    millis.trim().replace('_', "").parse().ok()
}
