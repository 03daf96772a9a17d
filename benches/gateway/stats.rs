//! Figures from the runs (percentiles, rates, medians) and from /proc (CPU time,
//! memory, priority) of the processes measured.

use std::time::Duration;

/// One round of one target.
pub struct Run {
    pub latencies: Vec<u64>,
    pub elapsed: Duration,
    /// CPU time the target process (all its threads, not its children) used meanwhile.
    pub cpu_ticks: Option<u64>,
}

/// What one target did at one window size, over all rounds.
#[derive(Default)]
pub struct Tally {
    latencies: Vec<u64>,
    elapsed: Duration,
    round_rates: Vec<f64>,
    cpu_ticks: Option<u64>,
}

pub struct Row {
    pub target: &'static str,
    pub inflight: usize,
    pub p50_us: f64,
    pub p99_us: f64,
    pub calls_per_s: f64,
    pub calls: usize,
    pub round_rates: Vec<f64>,
    /// CPU of the process called (the gateway's own, without its server), per call.
    pub cpu_us_per_call: Option<f64>,
}

impl Tally {
    pub fn add(&mut self, mut run: Run) {
        self.round_rates
            .push(run.latencies.len() as f64 / run.elapsed.as_secs_f64());
        self.latencies.append(&mut run.latencies);
        self.elapsed += run.elapsed;
        // Unknown once any round's is unknown.
        let first = self.round_rates.len() == 1;
        self.cpu_ticks = match (first, self.cpu_ticks, run.cpu_ticks) {
            (true, _, ticks) => ticks,
            (false, Some(total), Some(ticks)) => Some(total + ticks),
            _ => None,
        };
    }

    pub fn row(mut self, target: &'static str, inflight: usize) -> Row {
        self.latencies.sort_unstable();
        Row {
            target,
            inflight,
            p50_us: quantile(&self.latencies, 0.50) / 1_000.0,
            p99_us: quantile(&self.latencies, 0.99) / 1_000.0,
            calls_per_s: self.latencies.len() as f64 / self.elapsed.as_secs_f64(),
            calls: self.latencies.len(),
            round_rates: self.round_rates,
            cpu_us_per_call: self
                .cpu_ticks
                .map(|t| t as f64 * 1e6 / clock_ticks_per_second() / self.latencies.len() as f64),
        }
    }
}

/// The value at quantile `q` (nearest rank) of sorted, non-empty `values`.
pub fn quantile(sorted: &[u64], q: f64) -> f64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1] as f64
}

/// p50, p99 and max of a set of latencies, in µs.
pub struct Spread {
    pub count: usize,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

impl Spread {
    /// From latencies in ns; `None` when there are none.
    pub fn of(mut latencies_ns: Vec<u64>) -> Option<Spread> {
        latencies_ns.sort_unstable();
        let max = *latencies_ns.last()?;
        Some(Spread {
            count: latencies_ns.len(),
            p50_us: quantile(&latencies_ns, 0.50) / 1_000.0,
            p99_us: quantile(&latencies_ns, 0.99) / 1_000.0,
            max_us: max as f64 / 1_000.0,
        })
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({"count": self.count, "p50_us": self.p50_us,
                           "p99_us": self.p99_us, "max_us": self.max_us})
    }
}

/// CPU time a process used between two readings of [`cpu_ticks`], in µs per call.
pub fn cpu_us_per_call(before: Option<u64>, after: Option<u64>, calls: usize) -> Option<f64> {
    let ticks = after? - before?;
    Some(ticks as f64 * 1e6 / clock_ticks_per_second() / calls as f64)
}

/// User plus system CPU time of a process so far, threads that ended included, in clock ticks.
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name, which is in parentheses and may hold spaces:
    // state is field 3, utime 14 and stime 15.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// This process's nice value (field 19 of its stat); the targets inherit it.
pub fn own_nice() -> Option<i64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(16)?
        .parse()
        .ok()
}

pub fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf only reads a system constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

/// VmRSS and VmHWM of a process, in KiB.
pub fn memory_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// The median of `values`, which it sorts; NaN when there are none.
pub fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

pub fn verdict(ok: bool) -> &'static str {
    if ok { "ok" } else { "MISSED" }
}

/// The rows as a table.
pub fn print_rows(rows: &[Row]) {
    println!(
        "{:<20}{:>8}{:>10}{:>10}{:>12}{:>14}",
        "target", "inflight", "p50_us", "p99_us", "calls/s", "cpu_us/call"
    );
    for row in rows {
        let cpu = row
            .cpu_us_per_call
            .map_or("-".to_string(), |c| format!("{c:.1}"));
        println!(
            "{:<20}{:>8}{:>10.1}{:>10.1}{:>12.0}{:>14}",
            row.target, row.inflight, row.p50_us, row.p99_us, row.calls_per_s, cpu
        );
    }
}
