//! Scale: the gateway over stdio in front of [`SERVERS`] example servers of
//! [`TOOLS_PER_SERVER`] tools each (11,400 tools). Time to ready (`initialize` answered
//! and every tool listed), the whole paginated `tools/list` at the default page size (per
//! page and whole), a call, RSS, and shutdown: the gateway's exit after its client closes
//! stdin, against the same servers' own exit when their stdin is closed directly, in the
//! same run; the difference is the gateway's own part.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use crate::pipe::{McpPipe, toml_string, write_config};
use crate::startup::startup_once;
use crate::stats::{Spread, cpu_ticks, median, memory_kib, mib, verdict};
use crate::{Options, Paths, Result};

const SERVERS: usize = 100;
/// The example server's 14 tools and `--tools 100` generated ones.
const TOOLS_PER_SERVER: usize = 114;
const GENERATED: &str = "100";
/// Passes over the whole list, per gateway started.
const LIST_PASSES: usize = 10;
const CALLS: usize = 200;
/// What a stuck exit is given before the bench kills it and says so.
const EXIT_LIMIT: Duration = Duration::from_secs(30);
const SHUTDOWN_TARGET_MS: f64 = 200.0;
const PAGE_TARGET_MS: f64 = 0.15;
const LIST_TARGET_MS: f64 = 20.0;

/// One gateway's life: start, lists, a call, memory, exit; then the servers alone.
struct Round {
    ready_ms: f64,
    page_ns: Vec<u64>,
    list_ms: Vec<f64>,
    pages: usize,
    cpu_ms_per_list: Option<f64>,
    call_ns: Vec<u64>,
    rss_kib: u64,
    gateway_exit_ms: f64,
    servers_exit_ms: f64,
}

pub async fn bench(options: &Options, paths: &Paths, scratch: &Path) -> Result<Map<String, Value>> {
    let dir = scratch.join("scale");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let config = dir.join("scale.toml");
    let mut body = String::new();
    for n in 0..SERVERS {
        body += &format!(
            "[servers.s{n:02}]\ncommand = {}\nargs = [\"--tools\", \"{GENERATED}\"]\n",
            toml_string(&paths.server)
        );
    }
    write_config(&config, &body)?;
    // Each server's last tool: the list names every server's whole list.
    let expect: Vec<String> = (0..SERVERS).map(|n| format!("s{n:02}__gen_99")).collect();
    let rounds = if options.startups <= 3 { 1 } else { 3 };
    let mut runs = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        runs.push(round(paths, &config, scratch, &expect).await?);
    }
    report(&runs)
}

async fn round(paths: &Paths, config: &Path, scratch: &Path, expect: &[String]) -> Result<Round> {
    let (ready, mut pipe) = startup_once(paths, config, scratch, expect).await?;
    let (mut page_ns, mut list_ms) = (Vec::new(), Vec::new());
    let mut pages = 0;
    let cpu_before = pipe.pid().and_then(cpu_ticks);
    for _ in 0..LIST_PASSES {
        let begun = Instant::now();
        let lines = pipe.list_lines("tools/list", &mut page_ns).await?;
        list_ms.push(begun.elapsed().as_secs_f64() * 1e3);
        pages = lines.len();
        check_listing(&lines)?;
    }
    let cpu_ms_per_list = cpu_ms(cpu_before, pipe.pid().and_then(cpu_ticks), LIST_PASSES);
    pipe.check_echo("s50__echo").await?;
    let (call_ns, _) = pipe.load("s50__echo", CALLS, 1).await?;
    let (rss_kib, _) = pipe
        .pid()
        .and_then(memory_kib)
        .ok_or("cannot read the gateway's memory from /proc")?;
    let gateway_exit = pipe.close_timed(EXIT_LIMIT).await?;
    let servers_exit = servers_alone(paths, scratch).await?;
    Ok(Round {
        ready_ms: ready.as_secs_f64() * 1e3,
        page_ns,
        list_ms,
        pages,
        cpu_ms_per_list,
        call_ns,
        rss_kib,
        gateway_exit_ms: gateway_exit.as_secs_f64() * 1e3,
        servers_exit_ms: servers_exit.as_secs_f64() * 1e3,
    })
}

/// Every page parsed (outside the timing): all tools are there, each once.
fn check_listing(lines: &[String]) -> Result<()> {
    let mut names = std::collections::HashSet::new();
    for line in lines {
        let page: Value = serde_json::from_str(line).map_err(|e| format!("a page: {e}"))?;
        let tools = page.pointer("/result/tools").and_then(Value::as_array);
        for tool in tools.ok_or_else(|| format!("a page without tools: {line:.200}"))? {
            let name = tool["name"].as_str().unwrap_or_default();
            if !names.insert(name.to_string()) {
                return Err(format!("tool {name} listed twice"));
            }
        }
    }
    let servers = names.iter().filter(|n| n.contains("__")).count();
    if servers != SERVERS * TOOLS_PER_SERVER {
        return Err(format!(
            "{servers} server tools listed, not {}",
            SERVERS * TOOLS_PER_SERVER
        ));
    }
    Ok(())
}

/// The same servers started directly, initialised and listed, then all their stdins
/// closed at once: how long until the last has exited.
async fn servers_alone(paths: &Paths, scratch: &Path) -> Result<Duration> {
    let mut servers = Vec::with_capacity(SERVERS);
    for n in 0..SERVERS {
        let name = format!("scale-server-{n:02}");
        servers.push(McpPipe::spawn(
            &name,
            &paths.server,
            &["--tools", GENERATED],
            scratch,
        )?);
    }
    for server in &mut servers {
        server.initialize().await?;
        server.tool_names().await?;
    }
    let begun = Instant::now();
    let mut exits = tokio::task::JoinSet::new();
    for server in servers {
        exits.spawn(server.close_timed(EXIT_LIMIT));
    }
    while let Some(exit) = exits.join_next().await {
        exit.map_err(|e| format!("a server's close: {e}"))??;
    }
    Ok(begun.elapsed())
}

fn cpu_ms(before: Option<u64>, after: Option<u64>, passes: usize) -> Option<f64> {
    let ticks = after? - before?;
    Some(ticks as f64 * 1e3 / crate::stats::clock_ticks_per_second() / passes as f64)
}

fn report(runs: &[Round]) -> Result<Map<String, Value>> {
    let medians = |f: &dyn Fn(&Round) -> f64| median(&mut runs.iter().map(f).collect::<Vec<_>>());
    let ready_ms = medians(&|r| r.ready_ms);
    let gateway_exit_ms = medians(&|r| r.gateway_exit_ms);
    let servers_exit_ms = medians(&|r| r.servers_exit_ms);
    let own_ms = medians(&|r| r.gateway_exit_ms - r.servers_exit_ms);
    let rss_kib = runs.iter().map(|r| r.rss_kib).max().unwrap_or(0);
    let page = Spread::of(runs.iter().flat_map(|r| r.page_ns.clone()).collect())
        .ok_or("no page was listed")?;
    let mut lists: Vec<f64> = runs.iter().flat_map(|r| r.list_ms.clone()).collect();
    let list_ms = median(&mut lists);
    let call = Spread::of(runs.iter().flat_map(|r| r.call_ns.clone()).collect())
        .ok_or("no call was made")?;
    let cpu_list = runs
        .iter()
        .filter_map(|r| r.cpu_ms_per_list)
        .collect::<Vec<_>>();
    let cpu_list_ms = median(&mut cpu_list.clone());
    let pages = runs[0].pages;
    let (page_ms, own_ok) = (page.p50_us / 1e3, own_ms <= SHUTDOWN_TARGET_MS);
    println!(
        "scale: {SERVERS} stdio servers x {TOOLS_PER_SERVER} tools, the gateway over stdio (median of {} gateway starts)",
        runs.len()
    );
    println!("  ready (initialize answered, every tool listed): {ready_ms:.0} ms");
    println!(
        "  tools/list, {pages} pages: p50 {page_ms:.3} ms a page (target <= {PAGE_TARGET_MS}, {}), p99 {:.3} ms; the whole list {list_ms:.1} ms (target <= {LIST_TARGET_MS}, {}); gateway CPU {cpu_list_ms:.1} ms a whole list",
        verdict(page_ms <= PAGE_TARGET_MS),
        page.p99_us / 1e3,
        verdict(list_ms <= LIST_TARGET_MS),
    );
    println!(
        "  a call (s50__echo, 1 in flight): p50 {:.1} us, p99 {:.1} us",
        call.p50_us, call.p99_us
    );
    println!("  RSS after the lists: {:.1} MiB", mib(rss_kib));
    println!(
        "  shutdown after stdin closes: gateway {gateway_exit_ms:.0} ms, the same servers alone {servers_exit_ms:.0} ms: the gateway's own part {own_ms:.0} ms (target <= {SHUTDOWN_TARGET_MS}, {})",
        verdict(own_ok)
    );
    let each = |f: &dyn Fn(&Round) -> f64| runs.iter().map(f).collect::<Vec<_>>();
    Ok(Map::from_iter([(
        "scale".into(),
        json!({
            "servers": SERVERS, "tools": SERVERS * TOOLS_PER_SERVER, "pages": pages,
            "ready_ms": {"median": ready_ms, "runs": each(&|r| r.ready_ms)},
            "page": page.json(),
            "page_target_ms": PAGE_TARGET_MS, "page_ok": page_ms <= PAGE_TARGET_MS,
            "list_ms": {"median": list_ms, "runs": lists, "target": LIST_TARGET_MS,
                        "ok": list_ms <= LIST_TARGET_MS},
            "cpu_ms_per_list": cpu_list,
            "call": call.json(),
            "rss_kib": rss_kib,
            "shutdown_ms": {"gateway": each(&|r| r.gateway_exit_ms),
                            "servers_alone": each(&|r| r.servers_exit_ms),
                            "own_median": own_ms, "target": SHUTDOWN_TARGET_MS, "ok": own_ok},
        }),
    )]))
}
