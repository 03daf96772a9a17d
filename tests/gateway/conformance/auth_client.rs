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

/// The client command the suite runs (the scenario's URL appended): the node script
/// `script` of tests/gateway/fixtures with the binary and `more` as arguments.
fn client_command(prefix: &Path, script: &str, more: &[&str]) -> String {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/gateway/fixtures")
        .join(script);
    let mut command = format!(
        "{} {} {}",
        node(prefix).display(),
        script.display(),
        wasmgate().display()
    );
    for arg in more {
        command.push(' ');
        command.push_str(arg);
    }
    command
}

/// `wasmgate connect` as the conformance client.
fn connect_command(prefix: &Path) -> String {
    client_command(prefix, "conformance_auth_client.mjs", &[])
}

/// One scenario's outcome from the summary: `✓ name: …` or `✗ name: …`.
#[derive(Debug)]
struct Outcome {
    name: String,
    passed: bool,
}

/// Runs the client suite with `args`; the scored scenarios' outcomes (those listed
/// under "Not scored" left out) and the output.
fn run_client(
    prefix: &Path,
    dir: &TestDir,
    label: &str,
    command: &str,
    args: &[&str],
) -> (Vec<Outcome>, String) {
    let _turn = ONE_RUN
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let log = dir.join(&format!("{label}.out"));
    let mut child = Command::new(node(prefix))
        .arg(cli(prefix))
        .args(["client", "--command", command])
        .args(args)
        .args(["--timeout", SCENARIO_TIMEOUT_MS])
        .current_dir(&dir.path)
        .env("WASMGATE_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::create(dir.join(&format!("{label}.err"))).unwrap())
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
    // A run of one scenario prints its verdict on stderr.
    let output = std::fs::read_to_string(&log).unwrap()
        + &std::fs::read_to_string(dir.join(&format!("{label}.err"))).unwrap_or_default();
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
    let (outcomes, output) = run_client(
        &prefix,
        &dir,
        "2026",
        &connect_command(&prefix),
        &["--requirements", "2026-07-28"],
    );
    assert_all_pass(&outcomes, SCORED_AUTH_2026, "2026-07-28", &output);
    // Not scored (an extension), but the client credentials grant of a pre-registered
    // client with a secret: machine to machine, no user.
    assert!(
        output.contains("✓ auth/client-credentials-basic"),
        "the client credentials grant failed:\n{output}"
    );
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
        &connect_command(&prefix_2026),
        &["--requirements", "2025-11-25"],
    );
    assert_all_pass(&outcomes, SCORED_AUTH_2025, "2025-11-25 (0.2)", &output);
    let (outcomes, output) = run_client(
        &prefix_2025,
        &dir,
        "2025-suite",
        &connect_command(&prefix_2025),
        &["--suite", "auth", "--spec-version", "2025-11-25"],
    );
    let outcomes: Vec<Outcome> = outcomes
        .into_iter()
        .filter(|o| !o.name.starts_with("auth/client-credentials"))
        .collect();
    assert_all_pass(&outcomes, AUTH_2025_SUITE, "2025-11-25 (0.1.16)", &output);
}

/// A user's way through a server behind the suite's authorization server: a gateway
/// without a login says so (`gateway_status`, `server.auth_required`), `wasmgate auth
/// login --no-browser` gets and keeps the tokens (0600, folder 0700), `auth status` shows
/// the login and a gateway then calls through with the kept tokens. No token shows in any
/// output, log or event.
#[test]
fn a_login_is_asked_for_then_kept_and_used_by_the_gateway() {
    let Some(prefix) = SUITE_2026.prefix() else {
        return;
    };
    let dir = TestDir::new("oauth-login-flow");
    let out = dir.join("flow");
    std::fs::create_dir_all(&out).unwrap();
    let command = client_command(&prefix, "oauth_login_flow.mjs", &[out.to_str().unwrap()]);
    let (_, output) = run_client(
        &prefix,
        &dir,
        "flow",
        &command,
        &["--scenario", "auth/metadata-default"],
    );
    let read = |name: &str| std::fs::read_to_string(out.join(name)).unwrap_or_default();
    let steps = ["before", "login", "status", "call"].map(|step| {
        format!(
            "{step}: exit {} {}",
            read(&format!("{step}.code")),
            read(&format!("{step}.err"))
        )
    });
    // One scenario run alone prints its verdict, not a summary.
    assert!(output.contains("OVERALL: PASSED"), "{output}\n{steps:#?}");
    assert!(
        read("before.out").contains("needs a login: run `wasmgate auth login remote`"),
        "{}",
        read("before.out")
    );
    let events = read("events.jsonl");
    let required = events
        .lines()
        .find(|line| line.contains("\"server.auth_required\""))
        .unwrap_or_else(|| panic!("no server.auth_required event: {events}"));
    assert!(
        required.contains("wasmgate auth login remote"),
        "{required}"
    );
    assert!(
        read("status.out").contains("logged in at http://"),
        "{}",
        read("status.out")
    );
    assert_eq!(read("call.code"), "0", "{steps:#?}");
    assert!(
        read("call.out").contains("\"test\""),
        "{}",
        read("call.out")
    );

    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let file = out.join("auth/remote.json");
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(&out.join("auth")), 0o700);
    let kept: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let token = kept["tokens"]["access_token"].as_str().unwrap();
    assert!(!token.is_empty());
    for name in ["before", "login", "status", "call"] {
        for ext in ["out", "err"] {
            let text = read(&format!("{name}.{ext}"));
            assert!(
                !text.contains(token),
                "{name}.{ext} shows the token: {text}"
            );
        }
    }
    assert!(!events.contains(token), "the events show the token");
}
