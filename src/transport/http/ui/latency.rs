//! Per-tool latency percentiles over the recent calls that the event log keeps.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::gateway::Gateway;
use crate::telemetry::events::Query;

/// The window the percentiles cover.
pub const WINDOW: chrono::TimeDelta = chrono::TimeDelta::minutes(5);

/// `[{tool, server, calls, errors, p50_ms, p95_ms, p99_ms}]` over the `tool.called`
/// events of the last [`WINDOW`] that the log still holds, slowest p95 first.
pub fn percentiles(gateway: &Gateway) -> Value {
    let calls = gateway.events.query(&Query {
        event_type: Some("tool.called".into()),
        since: Some(chrono::Utc::now() - WINDOW),
        limit: usize::MAX,
        ..Query::default()
    });
    let mut by_tool: BTreeMap<(String, String), (Vec<f64>, usize)> = BTreeMap::new();
    for call in &calls {
        let key = (
            call["tool"].as_str().unwrap_or_default().to_string(),
            call["server"].as_str().unwrap_or_default().to_string(),
        );
        let entry = by_tool.entry(key).or_default();
        entry.0.push(call["duration_ms"].as_f64().unwrap_or(0.0));
        entry.1 += usize::from(call["status"] != "success");
    }
    let mut rows: Vec<Value> = by_tool
        .into_iter()
        .map(|((tool, server), (mut durations, errors))| {
            durations.sort_by(f64::total_cmp);
            json!({
                "tool": tool,
                "server": server,
                "calls": durations.len(),
                "errors": errors,
                "p50_ms": rank(&durations, 0.50),
                "p95_ms": rank(&durations, 0.95),
                "p99_ms": rank(&durations, 0.99),
            })
        })
        .collect();
    rows.sort_by(|a, b| {
        f64::total_cmp(
            &b["p95_ms"].as_f64().unwrap_or(0.0),
            &a["p95_ms"].as_f64().unwrap_or(0.0),
        )
    });
    Value::Array(rows)
}

/// The nearest-rank percentile `q` of sorted, non-empty `sorted`.
fn rank(sorted: &[f64], q: f64) -> f64 {
    let index = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[index]
}

#[cfg(test)]
mod tests {
    use super::rank;

    #[test]
    fn nearest_rank_percentiles() {
        let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(rank(&hundred, 0.50), 50.0);
        assert_eq!(rank(&hundred, 0.95), 95.0);
        assert_eq!(rank(&hundred, 0.99), 99.0);
        assert_eq!(rank(&[7.0], 0.99), 7.0);
    }
}
