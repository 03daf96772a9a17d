//! The suite's client scenarios for authorization (`auth/*`), run against `wasmgate
//! connect` (the gateway's remote client and its OAuth client, following the
//! authorization URL itself): every scored one of `--requirements 2026-07-28` and of
//! `--requirements 2025-11-25` (0.2.0-alpha.12), and 0.1.16's auth suite at 2025-11-25.
//! The suite's own authorization server redirects with a code, with no user to ask.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{SUITE_2025, SUITE_2026, cli, node};
use crate::harness::{TestDir, wasmgate};

/// Scored `auth/*` client scenarios of `--requirements 2026-07-28` (its frozen list).
const SCORED_AUTH_2026: usize = 25;
/// Scored `auth/*` client scenarios of `--requirements 2025-11-25`.
const SCORED_AUTH_2025: usize = 14;
/// The auth scenarios of 0.1.16 at 2025-11-25 (its `--suite auth`, extensions apart).
const AUTH_2025_SUITE: usize = 14;
/// The whole run.
const RUN_TIMEOUT: Duration = Duration::from_secs(600);
/// Each scenario's bound (the suite's default is 30 s): a run starts one `wasmgate` per
/// scenario at once, which a loaded 2-core machine takes a while to get through.
const SCENARIO_TIMEOUT_MS: &str = "120000";
/// One client run at a time: two at once (each scenario in parallel) time out on a small
/// machine.
static ONE_RUN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The client command the suite runs, the scenario's URL appended.
fn client_command(prefix: &Path) -> String {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/gateway/fixtures/conformance_auth_client.mjs");
    format!(
        "{} {} {}",
        node(prefix).display(),
        script.display(),
        wasmgate().display()
    )
}

/// One scenario's outcome from the summary: `✓ name: …` or `✗ name: …`.
#[derive(Debug)]
struct Outcome {
    name: String,
    passed: bool,
}

/// Runs the client suite with `args`; the scored scenarios' outcomes (those listed
/// under "Not scored" left out) and the output.
fn run_client(prefix: &Path, dir: &TestDir, label: &str, args: &[&str]) -> (Vec<Outcome>, String) {
    let _turn = ONE_RUN
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let log = dir.join(&format!("{label}.out"));
    let mut child = Command::new(node(prefix))
        .arg(cli(prefix))
        .args(["client", "--command", &client_command(prefix)])
        .args(args)
        .args(["--timeout", SCENARIO_TIMEOUT_MS])
        .current_dir(&dir.path)
        .env("WASMGATE_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the conformance suite");
    let deadline = Instant::now() + RUN_TIMEOUT;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!(
                "the client suite ran over {RUN_TIMEOUT:?}; see {}",
                log.display()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let output = std::fs::read_to_string(&log).unwrap();
    let summary = output
        .rsplit_once("SUMMARY ===")
        .map_or("", |(_, summary)| summary);
    let (scored, unscored) = summary.split_once("\nNot scored").unwrap_or((summary, ""));
    let outcomes = scored
        .lines()
        .filter_map(|line| {
            let (mark, rest) = line.trim_start().split_at_checked(4)?;
            let name = rest.split(':').next()?.trim().to_string();
            let passed = match mark.trim() {
                "✓" => true,
                "✗" => false,
                _ => return None,
            };
            Some(Outcome { name, passed })
        })
        .filter(|o| o.name.starts_with("auth/") && !unscored.contains(&format!(" {} (", o.name)))
        .collect();
    (outcomes, output)
}

fn assert_all_pass(outcomes: &[Outcome], expected: usize, label: &str, output: &str) {
    for outcome in outcomes {
        eprintln!(
            "  {label} {}: {}",
            outcome.name,
            if outcome.passed { "passed" } else { "FAILED" }
        );
    }
    let failed: Vec<&str> = outcomes
        .iter()
        .filter(|o| !o.passed)
        .map(|o| o.name.as_str())
        .collect();
    assert!(failed.is_empty(), "{label}: failed {failed:?}\n{output}");
    assert_eq!(
        outcomes.len(),
        expected,
        "{label}: the scored auth scenarios that ran: {outcomes:?}\n{output}"
    );
}

#[test]
fn conformance_auth_client_scenarios_of_2026_07_28_pass() {
    let Some(prefix) = SUITE_2026.prefix() else {
        return;
    };
    let dir = TestDir::new("conformance-auth-2026");
    let (outcomes, output) = run_client(&prefix, &dir, "2026", &["--requirements", "2026-07-28"]);
    assert_all_pass(&outcomes, SCORED_AUTH_2026, "2026-07-28", &output);
}

#[test]
fn conformance_auth_client_scenarios_of_2025_11_25_pass() {
    let (Some(prefix_2026), Some(prefix_2025)) = (SUITE_2026.prefix(), SUITE_2025.prefix()) else {
        return;
    };
    let dir = TestDir::new("conformance-auth-2025");
    let (outcomes, output) = run_client(
        &prefix_2026,
        &dir,
        "2025-req",
        &["--requirements", "2025-11-25"],
    );
    assert_all_pass(&outcomes, SCORED_AUTH_2025, "2025-11-25 (0.2)", &output);
    let (outcomes, output) = run_client(
        &prefix_2025,
        &dir,
        "2025-suite",
        &["--suite", "auth", "--spec-version", "2025-11-25"],
    );
    let outcomes: Vec<Outcome> = outcomes
        .into_iter()
        .filter(|o| !o.name.starts_with("auth/client-credentials"))
        .collect();
    assert_all_pass(&outcomes, AUTH_2025_SUITE, "2025-11-25 (0.1.16)", &output);
}
