//! `wasmgate pins list|approve`, on a config whose `pin` middleware has a granted folder
//! holding the files the middleware writes (`pins.json`, `pending.json`).

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{TestDir, run_cli};

const LIMIT: Duration = Duration::from_secs(30);
const OLD: &str = "1111111111111111111111111111111111111111111111111111111111111111";
const NEW: &str = "2222222222222222222222222222222222222222222222222222222222222222";

/// A folder with a config whose pin middleware keeps its files in `state/` (guest
/// `/state/pins`, under the grant of `/state`), and those files: `mw__drift` pinned and
/// changed, `mw__echo` pinned.
fn pinned() -> (TestDir, String) {
    let dir = TestDir::new("pins");
    std::fs::create_dir_all(dir.join("state/pins")).unwrap();
    let config = r#"
[[middleware]]
use = "audit"
allow_dirs = [{ host = "elsewhere", guest = "/pins", mode = "rw" }]

[[middleware]]
name = "pinning"
use = "pin"
config = { dir = "/state/pins", block = "true" }
allow_dirs = [{ host = "state", guest = "/state", mode = "rw" }]
"#;
    let path = dir.write("gateway.toml", config);
    dir.write(
        "state/pins/pins.json",
        &json!({"tools": {"mw__drift": OLD, "mw__echo": OLD}}).to_string(),
    );
    let change = json!({"hash": NEW, "pinned": OLD, "definition": {"name": "mw__drift"}});
    dir.write(
        "state/pins/pending.json",
        &json!({"tools": {"mw__drift": change}}).to_string(),
    );
    (dir, path.to_str().unwrap().to_owned())
}

fn read(dir: &TestDir, name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join(name)).unwrap()).unwrap()
}

#[test]
fn pins_list_shows_pinned_and_pending_definitions() {
    let (dir, config) = pinned();
    let out = run_cli(&["pins", "list", "--config", &config], &dir.path, LIMIT);
    out.assert_exit(0);
    assert!(out.stdout.contains("`pinning`"), "{}", out.stdout);
    assert!(out.stdout.contains("pinned: 2"), "{}", out.stdout);
    assert!(
        out.stdout.contains(&format!("tools mw__echo sha256 {OLD}")),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("pending: 1"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains(&format!("tools mw__drift sha256 {NEW} (pinned {OLD})")),
        "{}",
        out.stdout
    );
}

#[test]
fn pins_approve_moves_the_pending_hash_into_the_pins() {
    let (dir, config) = pinned();
    let out = run_cli(
        &["pins", "approve", "mw__drift", "--config", &config],
        &dir.path,
        LIMIT,
    );
    out.assert_exit(0);
    assert!(
        out.stdout.contains(&format!(
            "approved tools `mw__drift`: sha256 {NEW} (was {OLD})"
        )),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("next catalog change"), "{}", out.stdout);
    let pins = read(&dir, "state/pins/pins.json");
    assert_eq!(pins, json!({"tools": {"mw__drift": NEW, "mw__echo": OLD}}));
    assert_eq!(read(&dir, "state/pins/pending.json"), json!({"tools": {}}));
    let leftovers: Vec<_> = std::fs::read_dir(dir.join("state/pins"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.contains("tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // Approved once: a second approval has nothing to move and says what is pinned.
    let again = run_cli(
        &["pins", "approve", "mw__drift", "--config", &config],
        &dir.path,
        LIMIT,
    );
    again.assert_exit(1);
    assert!(
        again.stderr.contains(&format!(
            "nothing of `mw__drift` waits for approval in {}",
            dir.join("state/pins/pending.json").display()
        )) && again
            .stderr
            .contains(&format!("(pinned: tools sha256 {NEW})")),
        "{}",
        again.stderr
    );
}

#[test]
fn pins_names_the_middleware_or_says_why_it_cannot() {
    let (dir, config) = pinned();
    let named = run_cli(
        &[
            "pins",
            "list",
            "--middleware",
            "pinning",
            "--config",
            &config,
        ],
        &dir.path,
        LIMIT,
    );
    named.assert_exit(0);
    let other = run_cli(
        &["pins", "list", "--middleware", "nope", "--config", &config],
        &dir.path,
        LIMIT,
    );
    other.assert_exit(1);
    assert!(
        other
            .stderr
            .contains("has no [[middleware]] entry named `nope`"),
        "{}",
        other.stderr
    );

    let ungranted = dir.write(
        "ungranted.toml",
        "[[middleware]]\nuse = \"pin\"\nallow_dirs = [{ host = \"state\", guest = \"/state\" }]\n",
    );
    let out = run_cli(
        &["pins", "list", "--config", ungranted.to_str().unwrap()],
        &dir.path,
        LIMIT,
    );
    out.assert_exit(1);
    assert!(
        out.stderr
            .contains("middleware `pin` grants no folder for its dir \"/pins\""),
        "{}",
        out.stderr
    );

    let two = dir.write(
        "two.toml",
        "[[middleware]]\nuse = \"pin\"\n[[middleware]]\nname = \"pin2\"\nuse = \"pin\"\n",
    );
    let out = run_cli(
        &["pins", "list", "--config", two.to_str().unwrap()],
        &dir.path,
        LIMIT,
    );
    out.assert_exit(1);
    assert!(
        out.stderr.contains("several pin middleware (pin, pin2)"),
        "{}",
        out.stderr
    );

    let out = run_cli(&["pins", "list"], &dir.path, LIMIT);
    out.assert_exit(1);
    assert!(out.stderr.contains("pass --config FILE"), "{}", out.stderr);
}
