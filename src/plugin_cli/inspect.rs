//! `plugin inspect FILE`: what a file is as a plugin or middleware. Its imports and
//! exports are read from the binary (no compile), its tools (a middleware's interest) by
//! loading it as the gateway does.

use std::path::Path;
use std::process::ExitCode;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::setup::{self, Grants};

/// The interface a plugin exports, without its version.
const TOOL_EXPORT: &str = "wasmgate:plugin/tool";

/// The interface a middleware exports, without its version.
const HOOKS_EXPORT: &str = "wasmgate:middleware/hooks";

/// The middleware contract this binary was built with.
const MIDDLEWARE_WIT: &str = include_str!("../../wit/middleware/middleware.wit");

/// The middleware WIT version this binary loads, from its `package` line.
pub fn middleware_wit_version() -> &'static str {
    MIDDLEWARE_WIT
        .lines()
        .find_map(|line| line.trim().strip_prefix("package wasmgate:middleware@"))
        .map_or("?", |rest| rest.trim_end_matches(';'))
}

/// Whether `shape` is a middleware: `Some` with the version of the world it implements
/// (or why this gateway cannot load it) when it exports `wasmgate:middleware/hooks`.
pub fn middleware_world(shape: &Shape) -> Option<Result<String, String>> {
    let ours = middleware_wit_version();
    let version = shape.exports.iter().find_map(|export| {
        let (interface, version) = export.split_once('@').unwrap_or((export, ""));
        (interface == HOOKS_EXPORT).then_some(version)
    })?;
    Some(if version == ours {
        Ok(version.to_owned())
    } else {
        Err(format!(
            "is a middleware of wasmgate:middleware@{version}, not the @{ours} this gateway \
             loads: rebuild it against wit/middleware/middleware.wit"
        ))
    })
}

/// The newest plugin WIT version this binary loads, from its `package wasmgate:plugin@X;`
/// line; it loads every version of [`LOADED_VERSIONS`].
pub fn wit_version() -> &'static str {
    super::PLUGIN_WIT_V2
        .lines()
        .find_map(|line| line.trim().strip_prefix("package wasmgate:plugin@"))
        .map_or("?", |rest| rest.trim_end_matches(';'))
}

/// The plugin WIT versions this binary loads, side by side.
pub const LOADED_VERSIONS: [&str; 2] = ["0.1.0", "0.2.0"];

/// A component's top-level imports and exports, by name.
#[derive(Debug, Default)]
pub struct Shape {
    pub imports: Vec<String>,
    pub exports: Vec<String>,
}

/// Reads the shape of `bytes`, or says why they are no component.
pub fn shape(bytes: &[u8]) -> Result<Shape, String> {
    crate::plugin::check_header(bytes)?;
    let mut shape = Shape::default();
    // Nested modules and components have imports of their own: only depth 0 counts.
    let mut depth = 0usize;
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        let bad = |e: wasmparser::BinaryReaderError| format!("is not a valid component: {e}");
        match payload.map_err(bad)? {
            wasmparser::Payload::ModuleSection { .. }
            | wasmparser::Payload::ComponentSection { .. } => depth += 1,
            wasmparser::Payload::End(_) if depth == 0 => break,
            wasmparser::Payload::End(_) => depth -= 1,
            wasmparser::Payload::ComponentImportSection(reader) if depth == 0 => {
                for import in reader {
                    shape
                        .imports
                        .push(import.map_err(bad)?.name.name.to_owned());
                }
            }
            wasmparser::Payload::ComponentExportSection(reader) if depth == 0 => {
                for export in reader {
                    shape
                        .exports
                        .push(export.map_err(bad)?.name.name.to_owned());
                }
            }
            _ => {}
        }
    }
    Ok(shape)
}

/// The WIT version of `wasmgate:plugin/tool` that `shape` exports, or why it is not a
/// plugin of this gateway's world.
pub fn world(shape: &Shape) -> Result<String, String> {
    let ours = wit_version();
    let version = shape.exports.iter().find_map(|export| {
        let (interface, version) = export.split_once('@').unwrap_or((export, ""));
        (interface == TOOL_EXPORT).then_some(version)
    });
    match version {
        Some(version) if LOADED_VERSIONS.contains(&version) => Ok(version.to_owned()),
        Some("") => Err(format!(
            "exports {TOOL_EXPORT} without a version; this gateway loads \
             wasmgate:plugin@{ours}: build it against the WIT `wasmgate wit` prints"
        )),
        Some(version) => {
            let newer = numbers(version) > numbers(ours);
            Err(format!(
                "targets wasmgate:plugin@{version}, {} than the @{} this gateway loads: {}",
                if newer { "newer" } else { "older" },
                LOADED_VERSIONS.join(" and @"),
                if newer {
                    "use a wasmgate that loads it, or build the plugin against `wasmgate wit`"
                } else {
                    "rebuild it against the WIT `wasmgate wit` prints (wit/plugin-0.2/plugin.wit)"
                }
            ))
        }
        None if shape.exports.is_empty() => Err(format!(
            "is a component that exports nothing; a plugin exports {TOOL_EXPORT}@{ours} \
             (does the crate call `export!` on its Guest?)"
        )),
        None => Err(format!(
            "is a component of another world: it exports {}, not {TOOL_EXPORT}@{ours}; \
             build it against the world `plugin` of `wasmgate wit`",
            shape.exports.join(", ")
        )),
    }
}

fn numbers(version: &str) -> Vec<u64> {
    version
        .split(['.', '-'])
        .map(|part| part.parse().unwrap_or(0))
        .collect()
}

/// The grant an import lets a plugin use, with the config key and the `plugin call` flag.
pub fn grant_of(import: &str) -> Option<(&'static str, &'static str)> {
    let interface = import.split('@').next().unwrap_or(import);
    match interface {
        "wasi:filesystem/preopens" | "wasi:filesystem/types" => {
            Some(("files", "allow_dirs, --allow-dir HOST:GUEST[:ro|rw]"))
        }
        "wasi:cli/environment" => Some(("env", "allow_env, --allow-env NAME")),
        "wasi:http/outgoing-handler" => Some(("outbound HTTP", "allow_hosts, --allow-host HOST")),
        _ if interface.starts_with("wasi:sockets/") => Some((
            "sockets",
            "none: sockets are off for plugins (HTTP goes through allow_hosts)",
        )),
        _ => None,
    }
}

/// The grants `imports` can use, each once, in a stable order.
pub fn grants(imports: &[String]) -> Vec<(&'static str, &'static str)> {
    let mut grants: Vec<_> = imports.iter().filter_map(|i| grant_of(i)).collect();
    grants.sort();
    grants.dedup();
    grants
}

/// Everything `inspect` reports; `error` set when the file is no loadable plugin.
pub struct Report {
    pub json: Value,
    pub error: Option<String>,
}

pub async fn report(file: &Path) -> Report {
    let mut out = json!({"file": file.display().to_string()});
    let fail = |mut out: Value, error: String| {
        out["error"] = json!(error);
        Report {
            json: out,
            error: Some(error),
        }
    };
    let bytes = match std::fs::read(file) {
        Ok(bytes) => bytes,
        Err(e) => return fail(out, format!("cannot read the file: {e}")),
    };
    out["size"] = json!(bytes.len());
    out["sha256"] = json!(crate::plugin::hex(&Sha256::digest(&bytes)));
    let shape = match shape(&bytes) {
        Ok(shape) => shape,
        Err(e) => {
            out["component"] = json!(false);
            return fail(out, e);
        }
    };
    out["component"] = json!(true);
    out["imports"] = shape
        .imports
        .iter()
        .map(|name| json!({"name": name, "grant": grant_of(name).map(|g| g.0)}))
        .collect();
    out["exports"] = json!(shape.exports);
    out["grants"] = grants(&shape.imports)
        .iter()
        .map(|(grant, how)| json!({"grant": grant, "how": how}))
        .collect();
    // As the loader does: a tool plugin first, then a middleware.
    let found = match (world(&shape), middleware_world(&shape)) {
        (Ok(v), _) => Ok(("tools", format!("plugin/plugin@{v}"))),
        (Err(_), Some(version)) => {
            version.map(|v| ("middleware", format!("middleware/middleware@{v}")))
        }
        (Err(e), None) => Err(e),
    };
    let is_middleware = match found {
        Ok((kind, world)) => {
            out["kind"] = json!(kind);
            out["world"] = json!(format!("wasmgate:{world}"));
            kind == "middleware"
        }
        Err(e) => return fail(out, e),
    };
    // No cache: the compile time reported is this machine's, not a cache read's.
    let loaded = match setup::config_for(file, &Grants::default()) {
        Ok((name, mut config)) => {
            config.plugins.cache_dir = None;
            if is_middleware {
                setup::as_middleware(&mut config, &name);
            }
            setup::load(&config).await
        }
        Err(e) => Err(e),
    };
    match loaded {
        Ok(loaded) => {
            out["compile_ms"] = json!(loaded.compile_ms);
            match loaded.interest {
                Some(interest) => {
                    out["interest"] = json!({
                        "requests": interest.requests,
                        "results": interest.results,
                        "lists": interest.lists,
                        "names": interest.names,
                    });
                    out["instance"] = json!(loaded.instance.as_str());
                }
                None => {
                    out["tools"] = json!(loaded.tools);
                    if world(&shape).is_ok_and(|v| v != "0.1.0") {
                        out["resources"] = json!(loaded.resources);
                        out["resource_templates"] = json!(loaded.templates);
                        out["prompts"] = json!(loaded.prompts);
                        out["completions"] = json!(loaded.completes);
                        out["declared_instance"] =
                            json!(loaded.declared_instance.map(|m| m.as_str()));
                    }
                }
            }
            Report {
                json: out,
                error: None,
            }
        }
        Err(e) => fail(out, e),
    }
}

pub async fn run(file: &Path, as_json: bool) -> ExitCode {
    let report = report(file).await;
    if as_json {
        match serde_json::to_string_pretty(&report.json) {
            Ok(text) => println!("{text}"),
            Err(e) => eprintln!("wasmgate: {e}"),
        }
    } else {
        print!("{}", render(&report.json));
    }
    match report.error {
        Some(error) => {
            eprintln!("{}: {error}", file.display());
            ExitCode::from(1)
        }
        None => ExitCode::SUCCESS,
    }
}

/// The report as text: what a person reads first (is it a plugin, which tools) on top.
pub fn render(report: &Value) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let file = report["file"].as_str().unwrap_or_default();
    let Some(size) = report["size"].as_u64() else {
        return out;
    };
    let kind = match report["component"].as_bool() {
        Some(true) => "a WebAssembly component",
        _ => "not a component",
    };
    let _ = writeln!(out, "{file}: {kind}, {} KiB", size.div_ceil(1024));
    let _ = writeln!(
        out,
        "sha256:  {}",
        report["sha256"].as_str().unwrap_or_default()
    );
    if let Some(world) = report["world"].as_str() {
        let _ = writeln!(out, "world:   {world}");
    }
    if let Some(declared) = report["declared_instance"].as_str() {
        let _ = writeln!(
            out,
            "instance: declares \"{declared}\" (see instance in the plugin guide)"
        );
    }
    if report["kind"] == "middleware" {
        let _ = writeln!(
            out,
            "kind:    middleware (use it in a [[middleware]] entry; instance: {})",
            report["instance"].as_str().unwrap_or("shared")
        );
    }
    if let Some(ms) = report["compile_ms"].as_u64() {
        let _ = writeln!(out, "compile: {ms} ms");
    }
    if let Some(imports) = report["imports"].as_array() {
        let _ = writeln!(out, "imports ({}):", imports.len());
        for import in imports {
            let name = import["name"].as_str().unwrap_or_default();
            match import["grant"].as_str() {
                Some(grant) => {
                    let _ = writeln!(out, "  {name:<40} {grant}");
                }
                None => {
                    let _ = writeln!(out, "  {name}");
                }
            }
        }
    }
    if let Some(grants) = report["grants"].as_array() {
        if grants.is_empty() {
            let _ = writeln!(
                out,
                "grants:  none needed (it can reach no files, variables or hosts)"
            );
        } else {
            let _ = writeln!(out, "grants it can use (it gets none unless granted):");
            for grant in grants {
                let _ = writeln!(
                    out,
                    "  {:<14} {}",
                    grant["grant"].as_str().unwrap_or_default(),
                    grant["how"].as_str().unwrap_or_default()
                );
            }
        }
    }
    if let Some(interest) = report["interest"].as_object() {
        let _ = writeln!(out, "interest:");
        for (what, of) in [
            ("requests", "on-request for"),
            ("results", "on-result for"),
            ("lists", "on-list for"),
            ("names", "targets"),
        ] {
            let listed: Vec<&str> = (interest.get(what).and_then(Value::as_array))
                .map(|v| v.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let shown = match (listed.is_empty(), what) {
                (true, "names") => "every target".to_string(),
                (true, _) => "nothing".to_string(),
                (false, _) => listed.join(", "),
            };
            let _ = writeln!(out, "  {what:<9} {of}: {shown}");
        }
    }
    if let Some(tools) = report["tools"].as_array() {
        let _ = writeln!(out, "tools ({}):", tools.len());
        for tool in tools {
            let description = tool["description"].as_str().unwrap_or_default();
            let _ = writeln!(
                out,
                "  {}  {}",
                tool["name"].as_str().unwrap_or_default(),
                description.lines().next().unwrap_or_default()
            );
            let _ = writeln!(out, "    input:  {}", tool["inputSchema"]);
            if let Some(output) = tool.get("outputSchema") {
                let _ = writeln!(out, "    output: {output}");
            }
        }
    }
    for (key, what, id) in [
        ("resources", "resources", "uri"),
        ("resource_templates", "resource templates", "uriTemplate"),
        ("prompts", "prompts", "name"),
    ] {
        let Some(items) = report[key].as_array().filter(|items| !items.is_empty()) else {
            continue;
        };
        let _ = writeln!(out, "{what} ({}):", items.len());
        for item in items {
            let description = item["description"].as_str().unwrap_or_default();
            let _ = writeln!(
                out,
                "  {}  {}",
                item[id].as_str().unwrap_or_default(),
                description.lines().next().unwrap_or_default()
            );
        }
    }
    if report["completions"] == true {
        let _ = writeln!(out, "completions: yes (its export `completion`)");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_exports(exports: &[&str]) -> Shape {
        Shape {
            imports: Vec::new(),
            exports: exports.iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn the_world_and_its_version_are_named() {
        let ours = wit_version();
        assert_eq!(ours, "0.2.0");
        let good = with_exports(&["wasmgate:plugin/tool@0.1.0"]);
        assert_eq!(world(&good).unwrap(), "0.1.0");
        let good = with_exports(&["wasmgate:plugin/tool@0.2.0"]);
        assert_eq!(world(&good).unwrap(), "0.2.0");
        let newer = world(&with_exports(&["wasmgate:plugin/tool@0.3.0"])).unwrap_err();
        assert!(
            newer.contains("newer than the @0.1.0 and @0.2.0"),
            "{newer}"
        );
        let older = world(&with_exports(&["wasmgate:plugin/tool@0.0.9"])).unwrap_err();
        assert!(older.contains("older"), "{older}");
        let other = world(&with_exports(&["run"])).unwrap_err();
        assert!(other.contains("another world: it exports run"), "{other}");
        assert!(
            world(&with_exports(&[]))
                .unwrap_err()
                .contains("exports nothing")
        );
    }

    #[test]
    fn a_middleware_is_told_by_its_hooks_export() {
        assert_eq!(middleware_wit_version(), "0.1.0");
        let hooks = with_exports(&["wasmgate:middleware/hooks@0.1.0"]);
        assert_eq!(middleware_world(&hooks), Some(Ok("0.1.0".into())));
        let other = middleware_world(&with_exports(&["wasmgate:middleware/hooks@0.2.0"]));
        assert!(
            other
                .unwrap()
                .unwrap_err()
                .contains("@0.2.0, not the @0.1.0")
        );
        assert!(middleware_world(&with_exports(&["wasmgate:plugin/tool@0.1.0"])).is_none());
    }

    #[test]
    fn files_and_modules_that_are_not_components_are_told_apart() {
        assert!(
            shape(b"hello world")
                .unwrap_err()
                .contains("not a WebAssembly file")
        );
        assert!(
            shape(b"\0asm\x01\0\0\0")
                .unwrap_err()
                .contains("core WebAssembly module")
        );
    }

    #[test]
    fn imports_map_to_grants() {
        let imports = [
            "wasi:cli/environment@0.2.6",
            "wasi:filesystem/types@0.2.6",
            "wasi:filesystem/preopens@0.2.6",
            "wasi:io/streams@0.2.6",
            "wasmgate:plugin/host@0.1.0",
        ]
        .map(String::from);
        let names: Vec<_> = grants(&imports).iter().map(|g| g.0).collect();
        assert_eq!(names, ["env", "files"]);
    }
}
