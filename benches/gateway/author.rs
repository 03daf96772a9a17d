//! A plugin author's loop, timed as an author lives it. `new → call`: `wasmgate plugin
//! new` (Rust), `plugin build`, the gateway started with the component and a client's
//! first `tools/call` answered; once with an empty cargo target folder (cold: every
//! dependency compiles; crates already downloaded) and then with that folder warm, a
//! fresh project each time. `dev`: `wasmgate dev` on the template, a source file
//! saved, until the client reads `list_changed` and the new text; the split (build,
//! compile, swap) is `dev`'s own line for each rebuild. First `dev --release` (the
//! template's release profile: the baseline), then `dev` (its fast rebuilds, the target).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use crate::pipe::{McpPipe, toml_string, write_config};
use crate::stats::{median, verdict};
use crate::{Options, Paths, Result};

const NEW_TO_CALL_TARGET_S: f64 = 60.0;
const SAVE_TO_SERVED_TARGET_S: f64 = 1.5;
/// A cold build compiles wit-bindgen, serde and their dependencies on a busy machine.
const BUILD_WITHIN: Duration = Duration::from_secs(900);
const GREETING: &str = "format!(\"Hello, {name}!\")";

pub async fn bench(options: &Options, paths: &Paths, scratch: &Path) -> Result<Map<String, Value>> {
    let dir = scratch.join("author");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // This run's own target folder: empty for the cold run, then warm.
    let target = dir.join("cargo-target");
    let warm_runs = if options.rounds <= 2 { 1 } else { 3 };
    let cold = new_to_call(paths, &dir, &target, 0).await?;
    let mut warm = Vec::new();
    for n in 1..=warm_runs {
        warm.push(new_to_call(paths, &dir, &target, n).await?);
    }
    println!(
        "plugin new → build → gateway → first call answered (Rust template, {} warm runs)",
        warm.len()
    );
    println!("  cold cargo target: {}", cold.line());
    let warm_total = median(&mut warm.iter().map(|r| r.total_s()).collect::<Vec<_>>());
    for run in &warm {
        println!("  warm:              {}", run.line());
    }
    println!(
        "  warm median {warm_total:.1} s (target <= {NEW_TO_CALL_TARGET_S} s, {}); cold {:.1} s",
        verdict(warm_total <= NEW_TO_CALL_TARGET_S),
        cold.total_s()
    );

    let rounds = options.reloads.clamp(3, 10);
    let baseline = save_to_served(paths, &dir, &target, rounds, true).await?;
    let dev = save_to_served(paths, &dir, &target, rounds, false).await?;
    Ok(Map::from_iter([(
        "author".into(),
        json!({
            "new_to_call_cold": cold.json(),
            "new_to_call_warm": warm.iter().map(Run::json).collect::<Vec<_>>(),
            "new_to_call_warm_median_s": warm_total,
            "new_to_call_target_s": NEW_TO_CALL_TARGET_S,
            "new_to_call_ok": warm_total <= NEW_TO_CALL_TARGET_S,
            "dev": dev,
            "dev_release_profile": baseline,
        }),
    )]))
}

/// One `new → call`, its parts in seconds.
struct Run {
    new: f64,
    build: f64,
    /// Gateway start, compile, initialize and the first call's answer.
    serve: f64,
}

impl Run {
    fn total_s(&self) -> f64 {
        self.new + self.build + self.serve
    }

    fn line(&self) -> String {
        format!(
            "{:.1} s (new {:.2} s, build {:.1} s, start + compile + call {:.2} s)",
            self.total_s(),
            self.new,
            self.build,
            self.serve
        )
    }

    fn json(&self) -> Value {
        json!({"total_s": self.total_s(), "new_s": self.new, "build_s": self.build, "serve_s": self.serve})
    }
}

fn run_wasmgate(paths: &Paths, cwd: &Path, args: &[&str], target: &Path) -> Result<()> {
    let out = Command::new(&paths.gateway)
        .args(args)
        .current_dir(cwd)
        .env("CARGO_TARGET_DIR", target)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", paths.gateway.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "wasmgate {} failed: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

async fn new_to_call(paths: &Paths, dir: &Path, target: &Path, n: usize) -> Result<Run> {
    let name = format!("author{n}");
    let started = Instant::now();
    run_wasmgate(paths, dir, &["plugin", "new", &name], target)?;
    let new = started.elapsed();
    run_wasmgate(paths, dir, &["plugin", "build", &name], target)?;
    let built = started.elapsed();
    let wasm = target.join(format!("wasm32-wasip2/release/{name}.wasm"));
    // A cache folder of this run's: the first call waits for a real compile.
    let config = dir.join(format!("{name}.toml"));
    write_config(
        &config,
        &format!(
            "[plugins]\ncache_dir = {}\n",
            toml_string(&dir.join(format!("cache{n}")))
        ),
    )?;
    let (config, wasm) = (utf8(&config)?, utf8(&wasm)?);
    let mut pipe = McpPipe::spawn(
        &name,
        &paths.gateway,
        &["serve", "--config", config, "--plugin", wasm],
        dir,
    )?;
    pipe.initialize().await?;
    let result = pipe
        .call_tool(&format!("{name}__greet"), json!({"name": "bench"}))
        .await?;
    let answered = started.elapsed();
    pipe.close().await;
    if result.pointer("/content/0/text") != Some(&json!("Hello, bench!")) {
        return Err(format!("{name}__greet answered {result}"));
    }
    Ok(Run {
        new: new.as_secs_f64(),
        build: (built - new).as_secs_f64(),
        serve: (answered - built).as_secs_f64(),
    })
}

fn utf8(path: &Path) -> Result<&str> {
    path.to_str()
        .ok_or_else(|| format!("{} is not UTF-8", path.display()))
}

/// `wasmgate dev` (with `--release`: `dev --release`) on a template project; `rounds`
/// saves, each with a new greeting, after one untimed save (the first rebuild of `dev`
/// compiles the dependencies for its profile when a release build was there).
async fn save_to_served(
    paths: &Paths,
    dir: &Path,
    target: &Path,
    rounds: usize,
    release: bool,
) -> Result<Value> {
    let name = if release { "devrelease" } else { "devloop" };
    let project = dir.join(name);
    run_wasmgate(paths, dir, &["plugin", "new", name], target)?;
    let source = project.join("src/lib.rs");
    let original = std::fs::read_to_string(&source).map_err(|e| e.to_string())?;
    let mut args = vec!["dev", utf8(&project)?];
    if release {
        args.push("--release");
    }
    // `dev` runs cargo itself, in the warm target folder.
    let mut pipe = McpPipe::spawn_with_env(
        "dev",
        &paths.gateway,
        &args,
        &[("CARGO_TARGET_DIR", target)],
        dir,
    )?;
    let tool = format!("{name}__greet");
    pipe.wait_for_tool(&tool, BUILD_WITHIN).await?;
    std::fs::write(
        &source,
        original.replace(GREETING, "format!(\"Hello 0, {name}!\")"),
    )
    .map_err(|e| e.to_string())?;
    pipe.wait_for_notification("notifications/tools/list_changed", BUILD_WITHIN)
        .await
        .map_err(|e| format!("dev warm-up save: {e}"))?;
    let mut served = Vec::new();
    let mut splits: Vec<[f64; 3]> = Vec::new();
    for n in 1..=rounds {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let greeting = format!("format!(\"Hello {n}, {{name}}!\")");
        let saved = Instant::now();
        std::fs::write(&source, original.replace(GREETING, &greeting))
            .map_err(|e| e.to_string())?;
        pipe.wait_for_notification("notifications/tools/list_changed", BUILD_WITHIN)
            .await
            .map_err(|e| format!("dev round {n}: {e}"))?;
        served.push(saved.elapsed().as_secs_f64());
        let result = pipe.call_tool(&tool, json!({"name": "bench"})).await?;
        let expected = format!("Hello {n}, bench!");
        if result.pointer("/content/0/text") != Some(&json!(expected)) {
            return Err(format!("dev round {n}: greet answered {result}"));
        }
        // The warm-up save printed the first line.
        splits.push(wait_split(&pipe, name, n + 1).await?);
    }
    pipe.close().await;
    let p50 = median(&mut served.clone());
    let part = |i: usize| median(&mut splits.iter().map(|s| s[i]).collect::<Vec<_>>());
    let (build, compile, swap) = (part(0), part(1), part(2));
    let max = served.iter().copied().fold(0.0, f64::max);
    let split = format!(
        "medians of dev's own split: build {build:.2} s, compile {compile:.2} s, swap {swap:.2} s"
    );
    if release {
        println!(
            "wasmgate dev --release (baseline: the template's release profile), {rounds} saves"
        );
        println!("  p50 {p50:.2} s, max {max:.2} s; {split}");
        return Ok(
            json!({"rounds": rounds, "save_to_served_s": served, "p50_s": p50,
                  "build_s_median": build, "compile_s_median": compile, "swap_s_median": swap}),
        );
    }
    println!(
        "wasmgate dev, template plugin, {rounds} saves; save → list_changed read (a call then answers the new text)"
    );
    println!(
        "  p50 {p50:.2} s, max {max:.2} s (target <= {SAVE_TO_SERVED_TARGET_S} s, {}); {split}",
        verdict(p50 <= SAVE_TO_SERVED_TARGET_S)
    );
    Ok(
        json!({"rounds": rounds, "save_to_served_s": served, "p50_s": p50,
              "target_s": SAVE_TO_SERVED_TARGET_S, "ok": p50 <= SAVE_TO_SERVED_TARGET_S,
              "build_s_median": build, "compile_s_median": compile, "swap_s_median": swap}),
    )
}

/// Build, compile and swap seconds from `dev`'s `n`th timings line on stderr for plugin
/// `name` (`wasmgate dev: NAME: build 1.2 s, compile 0.30 s, swap 0.05 s; saved → served 1.7 s`).
async fn wait_split(pipe: &McpPipe, name: &str, n: usize) -> Result<[f64; 3]> {
    let start = format!("wasmgate dev: {name}: build ");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(pipe.stderr_log()).unwrap_or_default();
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with(&start) && l.contains(", swap "))
            .collect();
        if let Some(line) = lines.get(n - 1) {
            let seconds = |key: &str| -> Option<f64> {
                let rest = line.split(key).nth(1)?;
                rest.split(" s").next()?.trim().parse().ok()
            };
            return match (seconds("build "), seconds("compile "), seconds("swap ")) {
                (Some(b), Some(c), Some(s)) => Ok([b, c, s]),
                _ => Err(format!("cannot read the timings in: {line}")),
            };
        }
        if Instant::now() > deadline {
            return Err(format!(
                "dev printed no timings line for save {n}{}",
                pipe.stderr_tail()
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
