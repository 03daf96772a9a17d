//! What the SDK's middleware layer builds: the project `wasmgate plugin new --kind
//! middleware` writes (a component of the middleware world, whose unit tests pass on the
//! host), and the bundled middleware in the binary.

use std::time::Duration;

use crate::harness::{TestDir, run_cli, run_cli_with_env};
use crate::plugin_cli::shared_target;

const LIMIT: Duration = Duration::from_secs(60);
/// A fresh crate's first build compiles wit-bindgen and its dependencies.
const BUILD_LIMIT: Duration = Duration::from_secs(900);

/// The names a component exports, at every level of nesting.
fn component_exports(bytes: &[u8]) -> Vec<String> {
    let mut names = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        if let wasmparser::Payload::ComponentExportSection(exports) = payload.unwrap() {
            for export in exports {
                names.push(export.unwrap().name.name.to_owned());
            }
        }
    }
    names
}

#[test]
fn a_new_rust_middleware_builds_to_a_hooks_component_and_its_tests_pass() {
    let dir = TestDir::new("new-middleware");
    let target = shared_target();
    let env = [("CARGO_TARGET_DIR", target.to_str().unwrap())];
    let new = run_cli(
        &[
            "plugin",
            "new",
            "pass-mw",
            "--kind",
            "middleware",
            "--dir",
            "mw",
        ],
        &dir.path,
        LIMIT,
    );
    new.assert_exit(0);
    assert!(
        new.stdout.contains("(Rust middleware `pass-mw`)"),
        "{}",
        new.stdout
    );

    // What `plugin build` says of the component is the loader's (inspect); the build is
    // this template's.
    let build = run_cli_with_env(&["plugin", "build", "mw"], &dir.path, &env, BUILD_LIMIT);
    let wasm = target.join("wasm32-wasip2/release/pass_mw.wasm");
    assert!(
        build.stderr.contains(&format!("built {}", wasm.display())),
        "{}",
        build.stderr
    );
    let exports = component_exports(&std::fs::read(&wasm).unwrap());
    assert!(
        exports
            .iter()
            .any(|e| e == "wasmgate:middleware/hooks@0.1.0"),
        "{exports:?}"
    );
    assert!(
        !exports
            .iter()
            .any(|e| e.starts_with("wasmgate:plugin/tool")),
        "{exports:?}"
    );

    let test = std::process::Command::new("cargo")
        .arg("test")
        .current_dir(dir.join("mw"))
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&test.stdout);
    assert!(
        test.status.success(),
        "{}",
        String::from_utf8_lossy(&test.stderr)
    );
    for name in [
        "passes_calls_and_refuses_the_configured_tool ... ok",
        "results_pass_and_are_logged ... ok",
    ] {
        assert!(stdout.contains(name), "{name}: {stdout}");
    }
}

#[test]
fn a_middleware_project_in_python_or_js_is_refused_with_what_to_use() {
    let dir = TestDir::new("new-middleware-py");
    for lang in ["python", "js"] {
        let out = run_cli(
            &[
                "plugin",
                "new",
                "mw",
                "--kind",
                "middleware",
                "--lang",
                lang,
            ],
            &dir.path,
            LIMIT,
        );
        out.assert_exit(1);
        assert!(
            out.stderr
                .contains("a middleware project is not yet available")
                && out.stderr.contains("--lang rust"),
            "{}",
            out.stderr
        );
        assert!(!dir.join("mw").exists());
    }
}

/// redact, guard and rename are in the binary, each a component of the middleware world
/// (the plugins' bundle stays tool plugins only).
#[test]
fn the_bundled_middleware_are_hooks_components() {
    let bundled = wasmgate::bundled::BUNDLED_MIDDLEWARE;
    for name in ["redact", "guard", "rename"] {
        let (_, bytes) = bundled
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("{name} is not bundled"));
        let exports = component_exports(bytes);
        assert!(
            exports
                .iter()
                .any(|e| e.starts_with("wasmgate:middleware/hooks")),
            "{name}: {exports:?}"
        );
        assert!(
            !exports
                .iter()
                .any(|e| e.starts_with("wasmgate:plugin/tool")),
            "{name}"
        );
    }
    for (name, _) in wasmgate::bundled::BUNDLED_PLUGINS {
        assert!(
            !bundled.iter().any(|(n, _)| n == name),
            "{name} is bundled twice"
        );
    }
}
