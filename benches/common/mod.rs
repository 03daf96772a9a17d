//! Figures over runs or rounds, shared by the benches that include this file
//! (`ab_latency`, `session_cpu`; `#[path]`, since each bench is its own crate).

/// The median of one figure over runs, with its lowest and highest (sorts `values`).
pub fn median_and_range(values: &mut [f64]) -> (f64, f64, f64) {
    let median = percentile(values, 0.5);
    (median, values[0], values[values.len() - 1])
}

/// The value at `at` (0 to 1, nearest rank) of `values`, which it sorts.
pub fn percentile(values: &mut [f64], at: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    values[((values.len() - 1) as f64 * at).round() as usize]
}
