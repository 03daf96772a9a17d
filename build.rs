//! Builds the WebAssembly plugins before the host:
//!
//! - `plugins/` (shipped: hash, json, files, fetch, written with the SDK in
//!   `sdk/rust/`), whose components are embedded in the binary as
//!   `BUNDLED_PLUGINS` (`$OUT_DIR/bundled_plugins.rs`);
//! - `tests/plugins/` (fixtures for the host's tests), whose output directory
//!   is exported as `WASMGATE_TEST_PLUGINS`.
//!
//! Each is a workspace of its own, built by a nested `cargo build` with its
//! own target directory, so the outer build's lock on `target/` is not held
//! twice. A failure here never fails the host build: it prints a warning
//! saying how to fix it and bundles no plugins.
//! Set `WASMGATE_SKIP_PLUGIN_BUILD=1` to skip the nested builds entirely.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-wasip2";
/// The shipped plugins embedded in the binary, by crate (and file) name.
const BUNDLED: &[&str] = &["hash", "json", "files", "fetch"];
/// The shipped middleware (the `wasmgate:middleware` world), embedded the same way but
/// loaded only when a `[[middleware]]` entry uses one.
const BUNDLED_MIDDLEWARE: &[&str] = &["redact", "guard", "rename", "pin", "audit"];
const SKIP_VAR: &str = "WASMGATE_SKIP_PLUGIN_BUILD";

fn main() {
    let root = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    println!("cargo:rerun-if-changed={}", root.join("wit").display());
    // The guest SDK the plugins are written with: its sources, WIT and manifest (not its
    // folder, which holds a `target/` after a `cargo test` there).
    let sdk = root.join("sdk").join("rust");
    for part in ["src", "wit", "Cargo.toml"] {
        println!("cargo:rerun-if-changed={}", sdk.join(part).display());
    }
    println!("cargo:rerun-if-env-changed={SKIP_VAR}");

    let plugins = root.join("plugins");
    let fixtures = root.join("tests").join("plugins");
    for (var, workspace) in [
        ("WASMGATE_PLUGINS", &plugins),
        ("WASMGATE_TEST_PLUGINS", &fixtures),
    ] {
        watch_sources(workspace);
        println!("cargo:rustc-env={var}={}", wasm_dir(workspace).display());
    }

    let (bundled, middleware) = match build_all(&[&plugins, &fixtures]) {
        Ok(()) => (
            bundled_components(&plugins, BUNDLED),
            bundled_components(&plugins, BUNDLED_MIDDLEWARE),
        ),
        Err(why) => {
            warn(&why);
            warn("wasmgate is built without its bundled plugins");
            (Vec::new(), Vec::new())
        }
    };
    let mut code = bundle("BUNDLED_PLUGINS", "plugins", &bundled);
    code.push_str(&bundle("BUNDLED_MIDDLEWARE", "middleware", &middleware));
    fs::write(out_dir.join("bundled_plugins.rs"), code).expect("OUT_DIR is writable");
}

fn warn(text: &str) {
    for line in text.lines() {
        println!("cargo:warning={line}");
    }
}

/// The built components of `BUNDLED`; one that is missing is left out with a
/// warning rather than breaking `include_bytes!`.
fn bundled_components(plugins: &Path, names: &[&'static str]) -> Vec<(&'static str, PathBuf)> {
    let mut found = Vec::new();
    for name in names {
        let wasm = wasm_dir(plugins).join(format!("{name}.wasm"));
        if wasm.is_file() {
            found.push((*name, wasm));
        } else {
            warn(&format!(
                "{} was not built; the {name} plugin is not bundled",
                wasm.display()
            ));
        }
    }
    found
}

/// Where a workspace's release components land.
fn wasm_dir(workspace: &Path) -> PathBuf {
    workspace.join("target").join(TARGET).join("release")
}

/// Reruns the script when a workspace's manifests or a member's files change.
/// Members are named one by one, because watching the workspace directory
/// would watch its `target/`, which every build changes.
fn watch_sources(workspace: &Path) {
    for file in ["Cargo.toml", "Cargo.lock"] {
        let path = workspace.join(file);
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    let Ok(entries) = fs::read_dir(workspace) else {
        return;
    };
    for dir in entries.flatten().map(|e| e.path()) {
        if dir.join("Cargo.toml").is_file() {
            println!("cargo:rerun-if-changed={}", dir.display());
        }
    }
}

fn build_all(workspaces: &[&Path]) -> Result<(), String> {
    if env::var_os(SKIP_VAR).is_some_and(|v| !v.is_empty() && v != "0") {
        return Err(format!("{SKIP_VAR} is set: the plugins were not built"));
    }
    check_target_installed()?;
    workspaces.iter().try_for_each(|ws| build(ws))
}

/// Fails early, with the fix, when the toolchain has no wasm32-wasip2 std.
fn check_target_installed() -> Result<(), String> {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let output = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .map_err(|e| format!("cannot run {rustc}: {e}"))?;
    let sysroot = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if Path::new(&sysroot)
        .join("lib/rustlib")
        .join(TARGET)
        .is_dir()
    {
        Ok(())
    } else {
        Err(format!(
            "the {TARGET} target is not installed for {sysroot}: run `rustup target add {TARGET}`"
        ))
    }
}

fn build(workspace: &Path) -> Result<(), String> {
    if !workspace.join("Cargo.toml").is_file() {
        return Err(format!("no plugin workspace at {}", workspace.display()));
    }
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(&cargo);
    command
        .current_dir(workspace)
        .args(["build", "--release", "--target", TARGET, "--target-dir"])
        .arg(workspace.join("target"));
    scrub_env(&mut command);
    // Captured: a build script's stdout is read by cargo as directives.
    let output = command
        .output()
        .map_err(|e| format!("cannot run {cargo}: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Progress lines ("Compiling x") would crowd out the error.
    let progress = [
        "Compiling ",
        "Downloaded ",
        "Downloading ",
        "Locking ",
        "Updating ",
        "Adding ",
    ];
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| !progress.iter().any(|p| l.trim_start().starts_with(p)))
        .collect();
    let mut why = format!(
        "building the plugins in {} failed ({}); last lines of its output:\n",
        workspace.display(),
        output.status
    );
    for line in &lines[lines.len().saturating_sub(15)..] {
        let _ = writeln!(why, "  {line}");
    }
    let _ = write!(
        why,
        "to see it all: cd {} && cargo build --release --target {TARGET}",
        workspace.display()
    );
    Err(why)
}

/// Removes what the outer build puts in the environment for build scripts,
/// or what the user set for the host, that must not reach the nested build:
/// - the outer target's flags (`CARGO_ENCODED_RUSTFLAGS` is read by cargo as
///   input, and `-C target-cpu=native` or coverage flags break wasm builds);
/// - target and target-dir overrides and profile settings;
/// - `CARGO_CFG_*` and `CARGO_FEATURE_*`: the nested cargo sets these per
///   crate, but only those true for wasm32, so the host's (`CARGO_CFG_UNIX`)
///   would leak into dependencies' build scripts;
/// - clippy's `RUSTC_WORKSPACE_WRAPPER`, and cargo's internal `__CARGO_*`.
///
/// Kept: `CARGO_HOME`, registry, network (`--offline`) and terminal settings,
/// `CARGO_TARGET_WASM32_WASIP2_*` (meant for this very target),
/// `RUSTC`/`RUSTUP_TOOLCHAIN` (same toolchain), and the jobserver in
/// `CARGO_MAKEFLAGS`, so the nested build shares the outer build's job slots
/// instead of doubling the load.
fn scrub_env(command: &mut Command) {
    const KEEP: &[&str] = &[
        "CARGO_HOME",
        "CARGO_MAKEFLAGS",
        "CARGO_NET_",
        "CARGO_HTTP_",
        "CARGO_REGISTRIES_",
        "CARGO_REGISTRY_",
        "CARGO_TERM_",
        "CARGO_BUILD_JOBS",
        "CARGO_TARGET_WASM32_WASIP2_",
    ];
    const DROP: &[&str] = &[
        "RUSTFLAGS",
        "RUSTDOCFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_LINKER",
        "CLIPPY_ARGS",
        "TARGET",
        "HOST",
        "OUT_DIR",
        "OPT_LEVEL",
        "PROFILE",
        "DEBUG",
        "NUM_JOBS",
    ];
    for (key, _) in env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let cargo_var = key.starts_with("CARGO_") && !KEEP.iter().any(|k| key.starts_with(k));
        if cargo_var || key.starts_with("__CARGO") || DROP.contains(&key) {
            command.env_remove(key);
        }
    }
}

/// Writes `BUNDLED_PLUGINS`, each component embedded with `include_bytes!`.
fn bundle(constant: &str, what: &str, plugins: &[(&str, PathBuf)]) -> String {
    let mut code = format!(
        "/// The shipped {what} built into the binary: (name, component bytes).\n\
         pub static {constant}: &[(&str, &[u8])] = &[\n"
    );
    for (name, wasm) in plugins {
        // `{:?}` quotes and escapes the path as a Rust string literal.
        let _ = writeln!(
            code,
            "    ({name:?}, include_bytes!({:?})),",
            wasm.display().to_string()
        );
    }
    code.push_str("];\n");
    code
}
