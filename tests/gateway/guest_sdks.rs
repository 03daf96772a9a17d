//! The Python and JavaScript plugin SDKs (templates/plugin/{python,js}), unit-tested with
//! plain CPython and Node: schema derivation and dispatch of every 0.2 export, against
//! fakes of the bindings (tests/sdk/). The built components are tested in plugin_cli.rs.

use std::path::Path;
use std::process::Command;

use crate::harness::on_path;

/// Runs `program args` in the repository and gives its combined output, or fails the test
/// with it when the command fails.
fn run_in_repo(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")))
        // No __pycache__ left in templates/.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{program} {args:?} failed:\n{text}");
    text
}

/// python3 is CI's test-tools venv (scripts/test.sh puts it first on PATH).
#[test]
fn the_python_sdk_passes_its_unit_tests() {
    let Some(_) = on_path("python3") else {
        eprintln!("skipped: python3 is not on PATH");
        return;
    };
    let out = run_in_repo(
        "python3",
        &[
            "-W",
            "error",
            "-m",
            "unittest",
            "-v",
            "tests/sdk/test_wasmgate_sdk.py",
        ],
    );
    assert!(
        out.contains("test_a_tool_from_its_hints_and_docstring") && out.ends_with("\nOK\n"),
        "{out}"
    );
}

/// node is the one npm runs under in scripts/test.sh; the test needs `module.register`
/// (Node 18.19 or newer).
#[test]
fn the_javascript_sdk_passes_its_unit_tests() {
    let Some(_) = on_path("node") else {
        eprintln!("skipped: node is not on PATH");
        return;
    };
    let out = run_in_repo("node", &["--test", "tests/sdk/wasmgate.test.mjs"]);
    assert!(
        out.contains("ok 1 - schemas from builders") && out.contains("# fail 0\n"),
        "{out}"
    );
}
