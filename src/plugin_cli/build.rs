//! `plugin build [DIR]`: builds a plugin project for wasm32-wasip2 with its language's
//! tools, then checks the new component as `inspect` does (its compiled code kept in the
//! cache, for the first load) and prints its tools. A failed build ends with its first
//! errors (`build_errors`), which `dev` tells its clients.

use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::Instant;

use serde_json::Value;

use super::build_errors::{self, FirstErrors};

const TARGET: &str = "wasm32-wasip2";

/// What `dev` changes in a project's release profile for a rebuild on each save: no LTO,
/// many codegen units, incremental, less optimisation. The component is bigger and a
/// little slower, which a loop of edits does not notice. Environment overrides of the
/// release profile (not a profile of their own), so the file is where `plugin build`
/// writes it, and the dependencies of both builds stay side by side in target/.
pub(super) const DEV_OVERRIDES: [(&str, &str); 4] = [
    ("CARGO_PROFILE_RELEASE_LTO", "false"),
    ("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "16"),
    ("CARGO_PROFILE_RELEASE_OPT_LEVEL", "1"),
    ("CARGO_PROFILE_RELEASE_INCREMENTAL", "true"),
];

/// How a Rust project is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// Its release profile: the small component `plugin build` makes, to ship.
    Release,
    /// The release profile with [`DEV_OVERRIDES`]: the fast rebuild `dev` makes.
    Dev,
}

/// Builds the project in `dir` with its language's tools; the component's path.
pub fn build_project(dir: &Path, profile: Profile) -> Result<PathBuf, String> {
    if dir.join("Cargo.toml").is_file() {
        build_rust(dir, profile)
    } else if dir.join("app.py").is_file() || dir.join("pyproject.toml").is_file() {
        build_python(dir)
    } else if dir.join("package.json").is_file() {
        build_js(dir)
    } else {
        Err(format!(
            "{}: no Cargo.toml (Rust), app.py / pyproject.toml (Python) or package.json \
             (JavaScript) here; `wasmgate plugin new NAME` makes a project",
            dir.display()
        ))
    }
}

pub async fn run(dir: PathBuf) -> ExitCode {
    let started = Instant::now();
    let built = build_project(&dir, Profile::Release);
    let wasm = match built {
        Ok(wasm) => wasm,
        Err(e) => {
            eprintln!("wasmgate: {e}");
            return ExitCode::from(1);
        }
    };
    eprintln!(
        "built {} in {:.1} s",
        wasm.display(),
        started.elapsed().as_secs_f64()
    );
    // The check's compile goes into the cache: the first call or `serve` of this build
    // loads it instead of compiling again.
    let report = super::inspect::report(&wasm, super::inspect::Cache::Keep).await;
    print!("{}", super::inspect::render(&report.json));
    match report.error {
        Some(error) => {
            eprintln!("{}: {error}", wasm.display());
            ExitCode::from(1)
        }
        None => {
            println!(
                "try: wasmgate plugin call {} TOOL '{{...}}'",
                wasm.display()
            );
            ExitCode::SUCCESS
        }
    }
}

/// What in a Cargo.toml keeps it from building one component, and what to change.
fn check_manifest(manifest: &toml::Table, dir: &Path) -> Result<(), String> {
    let package = manifest
        .get("package")
        .and_then(|p| p.get("name"))
        .and_then(toml::Value::as_str);
    let crate_types: Vec<&str> = manifest
        .get("lib")
        .and_then(|lib| lib.get("crate-type"))
        .and_then(toml::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(toml::Value::as_str)
        .collect();
    if package.is_some() && !crate_types.contains(&"cdylib") {
        return Err(
            "Cargo.toml builds no component: a plugin is a cdylib; add\n\n  [lib]\n  \
             crate-type = [\"cdylib\"]\n\n(without it cargo writes an .rlib, and a .wasm \
             left in target/ from before would be stale)"
                .into(),
        );
    }
    // A binary and the cdylib write `{name}.wasm` both when their names meet: the lib's
    // is the package's with `-` as `_`, a binary's the package's (src/main.rs) or its own.
    let Some(package) = package else {
        return Ok(());
    };
    let lib = manifest
        .get("lib")
        .and_then(|lib| lib.get("name"))
        .and_then(toml::Value::as_str)
        .map_or_else(|| package.replace('-', "_"), str::to_owned);
    let bins = manifest
        .get("bin")
        .and_then(toml::Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let listed: Vec<&str> = bins
        .iter()
        .filter_map(|bin| bin.get("name").and_then(toml::Value::as_str))
        .collect();
    // A [[bin]] at src/main.rs takes the place of the binary cargo would infer there.
    let main_listed = bins
        .iter()
        .any(|bin| bin.get("path").and_then(toml::Value::as_str) == Some("src/main.rs"));
    let autobins = manifest
        .get("package")
        .and_then(|p| p.get("autobins"))
        .and_then(toml::Value::as_bool)
        .unwrap_or(true);
    let main_rs =
        autobins && !main_listed && !listed.contains(&package) && dir.join("src/main.rs").is_file();
    let clash = listed
        .iter()
        .copied()
        .chain(main_rs.then_some(package))
        .find(|bin| *bin == lib);
    if let Some(bin) = clash {
        let from = if listed.contains(&bin) {
            format!("the binary `{bin}` ([[bin]])")
        } else {
            "src/main.rs".to_owned()
        };
        return Err(format!(
            "{from} and the cdylib would both write {lib}.wasm to one path, and whichever \
             cargo writes last is the file served: remove src/main.rs if the crate is only a \
             plugin, or give the binary another name ([[bin]] name = \"{lib}-cli\", path = \"src/main.rs\")"
        ));
    }
    Ok(())
}

fn build_rust(dir: &Path, profile: Profile) -> Result<PathBuf, String> {
    let text = std::fs::read_to_string(dir.join("Cargo.toml"))
        .map_err(|e| format!("cannot read Cargo.toml: {e}"))?;
    let manifest: toml::Table = text
        .parse()
        .map_err(|e| format!("Cargo.toml is not valid TOML: {e}"))?;
    check_manifest(&manifest, dir)?;
    add_target()?;
    let overrides: &[(&str, &str)] = match profile {
        Profile::Release => &[],
        Profile::Dev => &DEV_OVERRIDES,
    };
    let shown: Vec<String> = overrides.iter().map(|(k, v)| format!("{k}={v} ")).collect();
    eprintln!("{}cargo build --release --target {TARGET}", shown.concat());
    // Rendered with colours when a person reads stderr; the JSON gives the errors' places.
    let format = if std::io::stderr().is_terminal() {
        "--message-format=json-diagnostic-rendered-ansi"
    } else {
        "--message-format=json"
    };
    let mut child = Command::new("cargo")
        .args(["build", "--release", "--target", TARGET])
        .envs(overrides.iter().copied())
        .arg(format)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    let (stdout, cargo_stderr) = outputs(&mut child);
    let cargo_errors = std::thread::spawn(move || {
        build_errors::tee_cargo_stderr(cargo_stderr, &mut std::io::stderr())
    });
    let (messages, compiler_errors) = build_errors::read_cargo_json(stdout, &mut std::io::stderr());
    let status = child.wait().map_err(|e| format!("cargo: {e}"))?;
    let cargo_errors = cargo_errors.join().unwrap_or_default();
    if !status.success() {
        let errors = if compiler_errors.is_empty() {
            cargo_errors
        } else {
            compiler_errors
        };
        return Err(errors.summary("the build failed"));
    }
    // The artifacts cargo reports for this build, not whatever target/ holds from before.
    let wasm: Vec<PathBuf> = messages
        .iter()
        .filter(|m| m["reason"] == "compiler-artifact")
        .filter(|m| {
            m["target"]["crate_types"]
                .as_array()
                .is_some_and(|types| types.iter().any(|t| t == "cdylib"))
        })
        .flat_map(|m| {
            m["filenames"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|f| f.as_str().map(PathBuf::from))
        })
        .filter(|f| f.extension().is_some_and(|e| e == "wasm"))
        .collect();
    match wasm.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err("cargo built no .wasm: is there a [lib] with crate-type = [\"cdylib\"]?".into()),
        many => Err(format!(
            "cargo built {} components; build one crate at a time (cd into it)",
            many.len()
        )),
    }
}

/// Whether the Rust project in `dir` has its component built already in the release
/// profile (by `plugin build`, or an earlier `dev`). `dev` then starts with a release
/// build, which has little left to do, and the first save compiles the dependencies for
/// [`Profile::Dev`] once: a client waits for no cold build before its first answer.
pub fn has_release_build(dir: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(dir.join("Cargo.toml")) else {
        return false;
    };
    let Ok(manifest) = text.parse::<toml::Table>() else {
        return false;
    };
    let lib = manifest
        .get("lib")
        .and_then(|lib| lib.get("name"))
        .or_else(|| manifest.get("package").and_then(|p| p.get("name")))
        .and_then(toml::Value::as_str)
        .map(|name| name.replace('-', "_"));
    let metadata = Command::new("cargo")
        .args([
            "metadata",
            "--no-deps",
            "--offline",
            "--format-version",
            "1",
        ])
        .current_dir(dir)
        .stderr(Stdio::null())
        .output();
    let target = metadata
        .ok()
        .and_then(|out| serde_json::from_slice::<Value>(&out.stdout).ok())
        .and_then(|m| m["target_directory"].as_str().map(PathBuf::from));
    match (lib, target) {
        (Some(lib), Some(target)) => target
            .join(TARGET)
            .join("release")
            .join(format!("{lib}.wasm"))
            .is_file(),
        _ => false,
    }
}

/// The child's piped stdout and stderr, as readers.
fn outputs(child: &mut Child) -> (Box<dyn Read + Send>, Box<dyn Read + Send>) {
    fn or_empty<R: Read + Send + 'static>(pipe: Option<R>) -> Box<dyn Read + Send> {
        match pipe {
            Some(pipe) => Box::new(pipe),
            None => Box::new(std::io::empty()),
        }
    }
    (or_empty(child.stdout.take()), or_empty(child.stderr.take()))
}

/// Runs a componentize tool with both its outputs copied to stderr (never to stdout,
/// which `dev` serves MCP on), keeping its first error lines.
fn run_tool(command: &mut Command) -> std::io::Result<(std::process::ExitStatus, FirstErrors)> {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let (stdout, stderr) = outputs(&mut child);
    let from_stdout =
        std::thread::spawn(move || build_errors::tee_errors(stdout, &mut std::io::stderr()));
    let mut errors = build_errors::tee_errors(stderr, &mut std::io::stderr());
    let status = child.wait()?;
    errors.append(from_stdout.join().unwrap_or_default());
    Ok((status, errors))
}

/// Adds the Rust target when rustup is there and lacks it, saying so.
fn add_target() -> Result<(), String> {
    let Ok(installed) = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
    else {
        // Without rustup the toolchain is managed otherwise: cargo says if the target is missing.
        return Ok(());
    };
    if String::from_utf8_lossy(&installed.stdout)
        .lines()
        .any(|l| l.trim() == TARGET)
    {
        return Ok(());
    }
    eprintln!("the Rust target {TARGET} is missing: rustup target add {TARGET}");
    let status = Command::new("rustup")
        .args(["target", "add", TARGET])
        .status()
        .map_err(|e| format!("cannot run rustup: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`rustup target add {TARGET}` failed"))
    }
}

fn build_python(dir: &Path) -> Result<PathBuf, String> {
    let name = dir
        .canonicalize()
        .ok()
        .and_then(|d| d.file_name().and_then(|n| n.to_str()).map(str::to_owned))
        .unwrap_or_else(|| "plugin".into())
        .replace('-', "_");
    has_wit(dir)?;
    let output = format!("{name}.wasm");
    eprintln!("componentize-py -d wit -w plugin componentize app -o {output}");
    let status = run_tool(
        Command::new("componentize-py")
            .args([
                "-d",
                "wit",
                "-w",
                "plugin",
                "componentize",
                "app",
                "-o",
                &output,
            ])
            .current_dir(dir),
    );
    match status {
        Ok((status, _)) if status.success() => Ok(dir.join(output)),
        Ok((_, errors)) => Err(errors.summary("componentize-py failed")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(format!(
            "componentize-py is not on PATH: pip install componentize-py=={}",
            super::new::COMPONENTIZE_PY
        )),
        Err(e) => Err(format!("cannot run componentize-py: {e}")),
    }
}

/// The WIT folder componentize-py and componentize-js read the world from.
fn has_wit(dir: &Path) -> Result<(), String> {
    if dir.join("wit").is_dir() {
        Ok(())
    } else {
        Err(format!(
            "{}: no wit/ folder; `wasmgate wit > wit/plugin.wit` writes the one this gateway loads",
            dir.display()
        ))
    }
}

/// componentize-js from the project's node_modules, else from PATH; the component is
/// `{name}.wasm` (package.json's name, `-` as `_`), as the template's README says.
fn build_js(dir: &Path) -> Result<PathBuf, String> {
    let text = std::fs::read_to_string(dir.join("package.json"))
        .map_err(|e| format!("cannot read package.json: {e}"))?;
    let package: Value =
        serde_json::from_str(&text).map_err(|e| format!("package.json is not valid JSON: {e}"))?;
    let name = package["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .ok_or("package.json has no \"name\"; it names the component (NAME.wasm)")?
        .replace('-', "_");
    has_wit(dir)?;
    let entry = ["app.js", "index.js"]
        .into_iter()
        .find(|f| dir.join(f).is_file())
        .ok_or("no app.js (or index.js): the module that exports `tool`")?;
    let local = dir.join("node_modules/.bin/componentize-js");
    let program = if local.is_file() {
        // Absolute: a relative one would be looked up from the project folder, where the
        // tool runs, not from here.
        std::path::absolute(&local).unwrap_or(local)
    } else {
        PathBuf::from("componentize-js")
    };
    let output = format!("{name}.wasm");
    eprintln!("componentize-js --wit wit --world-name plugin --out {output} {entry}");
    let status = run_tool(
        Command::new(&program)
            .args([
                "--wit",
                "wit",
                "--world-name",
                "plugin",
                "--out",
                &output,
                entry,
            ])
            .current_dir(dir),
    );
    match status {
        Ok((status, _)) if status.success() => Ok(dir.join(output)),
        Ok((_, errors)) => Err(errors.summary("componentize-js failed")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(format!(
            "componentize-js is neither in node_modules nor on PATH: `npm install` in {} \
             (package.json pins it), or npm install --save-dev @bytecodealliance/componentize-js@{}",
            dir.display(),
            super::new::COMPONENTIZE_JS
        )),
        Err(e) => Err(format!("cannot run componentize-js: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crate_that_builds_no_component_is_told_what_to_change() {
        let dir = Path::new("/nonexistent");
        let rlib: toml::Table = "[package]\nname = \"x\"\n".parse().unwrap();
        assert!(
            check_manifest(&rlib, dir)
                .unwrap_err()
                .contains("crate-type = [\"cdylib\"]")
        );
        let good: toml::Table = "[package]\nname = \"x\"\n[lib]\ncrate-type = [\"cdylib\"]\n"
            .parse()
            .unwrap();
        assert!(check_manifest(&good, dir).is_ok());
        // A main.rs beside the cdylib: both would write x.wasm.
        let crate_dir = std::env::temp_dir().join(format!("wasmgate-build-{}", std::process::id()));
        std::fs::create_dir_all(crate_dir.join("src")).unwrap();
        std::fs::write(crate_dir.join("src/main.rs"), "fn main() {}").unwrap();
        let both = check_manifest(&good, &crate_dir).unwrap_err();
        assert!(
            both.contains("src/main.rs and the cdylib would both write x.wasm to one path"),
            "{both}"
        );
        // Renamed, the binary writes x-cli.wasm: no clash. A dash in the package name
        // parts the files too (my-x.wasm against my_x.wasm).
        let renamed: toml::Table = "[package]\nname = \"x\"\n[lib]\ncrate-type = [\"cdylib\"]\n\
             [[bin]]\nname = \"x-cli\"\npath = \"src/main.rs\"\n"
            .parse()
            .unwrap();
        assert!(check_manifest(&renamed, &crate_dir).is_ok());
        let dashed: toml::Table = "[package]\nname = \"my-x\"\n[lib]\ncrate-type = [\"cdylib\"]\n"
            .parse()
            .unwrap();
        assert!(check_manifest(&dashed, &crate_dir).is_ok());
        let named_bin: toml::Table =
            "[package]\nname = \"my-x\"\n[lib]\ncrate-type = [\"cdylib\"]\n\
             [[bin]]\nname = \"my_x\"\n"
                .parse()
                .unwrap();
        let clash = check_manifest(&named_bin, &crate_dir).unwrap_err();
        assert!(clash.contains("the binary `my_x` ([[bin]])"), "{clash}");
        std::fs::remove_dir_all(&crate_dir).unwrap();
    }
}
