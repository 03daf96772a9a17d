//! `plugin new NAME`: a project from the templates in `templates/plugin/` (or, with
//! `--kind middleware`, `templates/middleware/`, Rust only), with the WIT
//! this binary loads vendored in (for Rust, inside the plugin SDK `sdk/rust/`, vendored
//! whole), so that it builds as it is, offline but for crates.io, and loads here.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::{Kind, Lang};

/// The componentize-py the repository's Python plugin is built with (its build.sh).
pub const COMPONENTIZE_PY: &str = "0.25.1";
/// The componentize-js a JavaScript project pins (its package.json) and CI installs.
pub const COMPONENTIZE_JS: &str = "0.23.0";

const RUST: &[(&str, &str)] = &[
    (
        "Cargo.toml",
        include_str!("../../templates/plugin/rust/Cargo.toml"),
    ),
    (
        "src/lib.rs",
        include_str!("../../templates/plugin/rust/lib.rs"),
    ),
    (
        "README.md",
        include_str!("../../templates/plugin/rust/README.md"),
    ),
    (
        ".gitignore",
        include_str!("../../templates/plugin/rust/gitignore"),
    ),
];

const RUST_MIDDLEWARE: &[(&str, &str)] = &[
    (
        "Cargo.toml",
        include_str!("../../templates/middleware/rust/Cargo.toml"),
    ),
    (
        "src/lib.rs",
        include_str!("../../templates/middleware/rust/lib.rs"),
    ),
    (
        "README.md",
        include_str!("../../templates/middleware/rust/README.md"),
    ),
    (
        ".gitignore",
        include_str!("../../templates/middleware/rust/gitignore"),
    ),
];

/// Where a Rust project gets its copy of the SDK crate, which its Cargo.toml names by path.
const SDK_DIR: &str = "wasmgate-plugin";

/// The SDK crate's files, but its WITs (`PLUGIN_WIT`, `PLUGIN_WIT_V2` and
/// `MIDDLEWARE_WIT`, the same text by tests below).
const SDK: &[(&str, &str)] = &[
    ("Cargo.toml", include_str!("../../sdk/rust/Cargo.toml")),
    ("README.md", include_str!("../../sdk/rust/README.md")),
    ("src/lib.rs", include_str!("../../sdk/rust/src/lib.rs")),
    ("src/error.rs", include_str!("../../sdk/rust/src/error.rs")),
    ("src/host.rs", include_str!("../../sdk/rust/src/host.rs")),
    ("src/http.rs", include_str!("../../sdk/rust/src/http.rs")),
    (
        "src/output.rs",
        include_str!("../../sdk/rust/src/output.rs"),
    ),
    (
        "src/plugin.rs",
        include_str!("../../sdk/rust/src/plugin.rs"),
    ),
    (
        "src/schema.rs",
        include_str!("../../sdk/rust/src/schema.rs"),
    ),
    (
        "src/testing.rs",
        include_str!("../../sdk/rust/src/testing.rs"),
    ),
    ("src/tool.rs", include_str!("../../sdk/rust/src/tool.rs")),
    ("src/wit.rs", include_str!("../../sdk/rust/src/wit.rs")),
    (
        "src/client.rs",
        include_str!("../../sdk/rust/src/client.rs"),
    ),
    (
        "src/complete.rs",
        include_str!("../../sdk/rust/src/complete.rs"),
    ),
    (
        "src/notify.rs",
        include_str!("../../sdk/rust/src/notify.rs"),
    ),
    (
        "src/prompt.rs",
        include_str!("../../sdk/rust/src/prompt.rs"),
    ),
    ("src/reply.rs", include_str!("../../sdk/rust/src/reply.rs")),
    (
        "src/request_error.rs",
        include_str!("../../sdk/rust/src/request_error.rs"),
    ),
    (
        "src/resource.rs",
        include_str!("../../sdk/rust/src/resource.rs"),
    ),
    ("src/store.rs", include_str!("../../sdk/rust/src/store.rs")),
    (
        "src/tests_capabilities.rs",
        include_str!("../../sdk/rust/src/tests_capabilities.rs"),
    ),
    (
        "src/uri_template.rs",
        include_str!("../../sdk/rust/src/uri_template.rs"),
    ),
    (
        "src/middleware/mod.rs",
        include_str!("../../sdk/rust/src/middleware/mod.rs"),
    ),
    (
        "src/middleware/host.rs",
        include_str!("../../sdk/rust/src/middleware/host.rs"),
    ),
    (
        "src/middleware/interest.rs",
        include_str!("../../sdk/rust/src/middleware/interest.rs"),
    ),
    (
        "src/middleware/list.rs",
        include_str!("../../sdk/rust/src/middleware/list.rs"),
    ),
    (
        "src/middleware/request.rs",
        include_str!("../../sdk/rust/src/middleware/request.rs"),
    ),
    (
        "src/middleware/response.rs",
        include_str!("../../sdk/rust/src/middleware/response.rs"),
    ),
    (
        "src/middleware/wit.rs",
        include_str!("../../sdk/rust/src/middleware/wit.rs"),
    ),
];

/// The SDK's version, as its manifest says, for the line that replaces the vendored copy
/// once the crate is published.
fn sdk_version() -> &'static str {
    SDK[0]
        .1
        .lines()
        .find_map(|line| line.strip_prefix("version = \""))
        .and_then(|rest| rest.strip_suffix('"'))
        .expect("sdk/rust/Cargo.toml has a version")
}

/// The middleware world, which the SDK carries beside the plugin one.
const MIDDLEWARE_WIT: &str = include_str!("../../wit/middleware/middleware.wit");

/// The SDK module written beside a Python project's app.py, and a JavaScript one's app.js:
/// copied as they are (no placeholders), so that a project carries the SDK it was made with.
const PYTHON_SDK: (&str, &str) = (
    "wasmgate_sdk.py",
    include_str!("../../templates/plugin/python/wasmgate_sdk.py"),
);
const JS_SDK: (&str, &str) = (
    "wasmgate.js",
    include_str!("../../templates/plugin/js/wasmgate.js"),
);

const PYTHON: &[(&str, &str)] = &[
    (
        "app.py",
        include_str!("../../templates/plugin/python/app.py"),
    ),
    (
        "README.md",
        include_str!("../../templates/plugin/python/README.md"),
    ),
    (
        ".gitignore",
        include_str!("../../templates/plugin/python/gitignore"),
    ),
];

const JS: &[(&str, &str)] = &[
    ("app.js", include_str!("../../templates/plugin/js/app.js")),
    (
        "package.json",
        include_str!("../../templates/plugin/js/package.json"),
    ),
    (
        "README.md",
        include_str!("../../templates/plugin/js/README.md"),
    ),
    (
        ".gitignore",
        include_str!("../../templates/plugin/js/gitignore"),
    ),
];

pub fn run(name: &str, lang: Lang, kind: Kind, dir: Option<PathBuf>) -> ExitCode {
    let dir = dir.unwrap_or_else(|| PathBuf::from(name));
    match create(name, lang, kind, &dir) {
        Ok(()) => {
            let what = format!("{kind:?}").to_lowercase();
            println!("created {} ({lang:?} {what} `{name}`)", dir.display());
            println!("next: cd {} && wasmgate plugin build", dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("wasmgate: {e}");
            ExitCode::from(1)
        }
    }
}

/// A plugin name is a crate name and, underscored, a tool prefix.
fn check_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "\"{name}\" cannot name a plugin: use a letter, then letters, digits, _ or -"
        ))
    }
}

/// `my-guard_2` → `MyGuard2`: the middleware's type in the template.
fn type_name(name: &str) -> String {
    name.split(['-', '_'])
        .flat_map(|word| {
            let mut chars = word.chars();
            chars
                .next()
                .map(|first| first.to_ascii_uppercase())
                .into_iter()
                .chain(chars)
        })
        .collect()
}

pub fn create(name: &str, lang: Lang, kind: Kind, dir: &Path) -> Result<(), String> {
    check_name(name)?;
    if kind == Kind::Middleware && lang != Lang::Rust {
        return Err(format!(
            "a middleware project is not yet available for {lang:?}: use --lang rust \
             (the SDK's `middleware` module)"
        ));
    }
    if dir.exists() && std::fs::read_dir(dir).map_or(true, |mut entries| entries.next().is_some()) {
        return Err(format!(
            "{} already exists and is not empty (choose another NAME or --dir)",
            dir.display()
        ));
    }
    let files = match lang {
        Lang::Rust if kind == Kind::Middleware => RUST_MIDDLEWARE,
        Lang::Rust => RUST,
        Lang::Python => PYTHON,
        Lang::Js => JS,
    };
    let fill = |text: &str| {
        text.replace("{{name}}", name)
            .replace("{{crate}}", &name.replace('-', "_"))
            .replace("{{type}}", &type_name(name))
            .replace("{{sdk_version}}", sdk_version())
            .replace("{{componentize_py}}", COMPONENTIZE_PY)
            .replace("{{componentize_js}}", COMPONENTIZE_JS)
    };
    let write = |path: &str, text: &str| {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
    };
    for (path, text) in files {
        write(path, &fill(text))?;
    }
    match lang {
        Lang::Rust => {
            for (path, text) in SDK {
                write(&format!("{SDK_DIR}/{path}"), text)?;
            }
            write(&format!("{SDK_DIR}/wit/plugin.wit"), super::PLUGIN_WIT)?;
            write(
                &format!("{SDK_DIR}/wit/plugin-0.2/plugin.wit"),
                super::PLUGIN_WIT_V2,
            )?;
            write(
                &format!("{SDK_DIR}/wit/middleware/middleware.wit"),
                MIDDLEWARE_WIT,
            )
        }
        Lang::Python | Lang::Js => {
            let (path, text) = if lang == Lang::Python {
                PYTHON_SDK
            } else {
                JS_SDK
            };
            write(path, text)?;
            // Their SDKs speak 0.2.
            write("wit/plugin.wit", super::PLUGIN_WIT_V2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(check_name("my-tool_2").is_ok());
        for bad in ["", "2x", "a b", "a/b", "../x"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_middleware_project_is_rust_with_both_wits_and_its_type_named() {
        assert_eq!(type_name("my-guard_2"), "MyGuard2");
        let dir = std::env::temp_dir().join(format!("wasmgate-new-mw-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        create("my-guard", Lang::Rust, Kind::Middleware, &dir).unwrap();
        let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
        assert!(lib.contains("impl Middleware for MyGuard {"), "{lib}");
        assert!(lib.contains("export_middleware!(MyGuard)") && !lib.contains("{{"));
        assert_eq!(
            std::fs::read_to_string(dir.join("wasmgate-plugin/wit/middleware/middleware.wit"))
                .unwrap(),
            MIDDLEWARE_WIT
        );
        assert!(
            dir.join("wasmgate-plugin/src/middleware/request.rs")
                .is_file()
        );
        std::fs::remove_dir_all(&dir).unwrap();
        for lang in [Lang::Python, Lang::Js] {
            let err = create("my-guard", lang, Kind::Middleware, &dir).unwrap_err();
            assert!(
                err.contains("not yet available") && err.contains("--lang rust"),
                "{err}"
            );
            assert!(!dir.exists());
        }
    }

    #[test]
    fn the_pinned_componentize_py_is_the_repository_plugins_one() {
        let build = include_str!("../../plugins/python/text/build.sh");
        assert!(build.contains(&format!("version=\"{COMPONENTIZE_PY}\"")));
    }

    /// The SDK must carry the WIT in its own folder to be published; `wit/plugin.wit` is
    /// the one source, and this keeps the copy from drifting.
    #[test]
    fn the_sdk_carries_the_wit_this_binary_loads() {
        assert!(
            include_str!("../../sdk/rust/wit/plugin.wit") == crate::plugin_cli::PLUGIN_WIT,
            "sdk/rust/wit/plugin.wit differs from wit/plugin.wit: cp wit/plugin.wit sdk/rust/wit/"
        );
    }

    #[test]
    fn the_sdk_carries_the_0_2_wit_this_binary_loads() {
        assert!(
            include_str!("../../sdk/rust/wit/plugin-0.2/plugin.wit")
                == crate::plugin_cli::PLUGIN_WIT_V2,
            "sdk/rust/wit/plugin-0.2/plugin.wit differs from wit/plugin-0.2/plugin.wit: \
             cp wit/plugin-0.2/plugin.wit sdk/rust/wit/plugin-0.2/"
        );
    }

    #[test]
    fn the_sdk_carries_the_middleware_wit_this_binary_loads() {
        assert!(
            include_str!("../../sdk/rust/wit/middleware/middleware.wit") == MIDDLEWARE_WIT,
            "sdk/rust/wit/middleware/middleware.wit differs from wit/middleware/middleware.wit: \
             cp wit/middleware/middleware.wit sdk/rust/wit/middleware/"
        );
    }

    /// The `.rs` files under `dir`, as paths from `root` with `/`.
    fn sources(root: &Path, dir: &Path, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                sources(root, &path, found);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path.strip_prefix(root).unwrap();
                let parts: Vec<_> = relative.iter().map(|p| p.to_string_lossy()).collect();
                found.push(parts.join("/"));
            }
        }
    }

    /// A file added to the SDK and not to `SDK` would be missing from new projects.
    #[test]
    fn every_source_file_of_the_sdk_is_vendored() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("sdk/rust");
        let mut on_disk = Vec::new();
        sources(&root, &root.join("src"), &mut on_disk);
        on_disk.sort();
        let mut vendored: Vec<String> = SDK
            .iter()
            .map(|(path, _)| path.to_string())
            .filter(|path| path.starts_with("src/"))
            .collect();
        vendored.sort();
        assert_eq!(on_disk, vendored);
        assert_eq!(sdk_version().split('.').count(), 3, "{}", sdk_version());
    }

    #[test]
    fn the_pinned_componentize_js_is_the_one_ci_installs() {
        let script = include_str!("../../scripts/test.sh");
        assert!(script.contains(&format!("componentize_js_version={COMPONENTIZE_JS}")));
        let dir = std::env::temp_dir().join(format!("wasmgate-new-js-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        create("my-tool", Lang::Js, Kind::Plugin, &dir).unwrap();
        let package: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("package.json")).unwrap())
                .unwrap();
        assert_eq!(
            package["devDependencies"]["@bytecodealliance/componentize-js"],
            COMPONENTIZE_JS
        );
        assert!(
            package["scripts"]["build"]
                .as_str()
                .unwrap()
                .contains("--out my_tool.wasm")
        );
        assert!(
            !std::fs::read_to_string(dir.join("app.js"))
                .unwrap()
                .contains("{{")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Traps name the function only if the names stay: `strip = "debuginfo"`, not `true`.
    #[test]
    fn the_template_keeps_the_names_traps_show() {
        let cargo: toml::Table = include_str!("../../templates/plugin/rust/Cargo.toml")
            .replace("{{name}}", "x")
            .parse()
            .unwrap();
        let release = &cargo["profile"]["release"];
        assert_eq!(release["strip"].as_str(), Some("debuginfo"));
        // What `dev` overrides is what the template sets, so its rebuilds are the faster.
        assert_eq!(release["lto"].as_bool(), Some(true));
        assert_eq!(release["codegen-units"].as_integer(), Some(1));
    }

    /// Python and JavaScript projects carry their SDK and the 0.2 world it speaks.
    #[test]
    fn a_python_or_js_project_carries_its_sdk_and_the_0_2_wit() {
        for (lang, app, sdk) in [
            (Lang::Python, "app.py", PYTHON_SDK),
            (Lang::Js, "app.js", JS_SDK),
        ] {
            let dir = std::env::temp_dir()
                .join(format!("wasmgate-new-{lang:?}-sdk-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            create("my-notes", lang, Kind::Plugin, &dir).unwrap();
            let wit = std::fs::read_to_string(dir.join("wit/plugin.wit")).unwrap();
            assert!(wit.contains("package wasmgate:plugin@0.2.0;"), "{lang:?}");
            assert_eq!(std::fs::read_to_string(dir.join(sdk.0)).unwrap(), sdk.1);
            let app = std::fs::read_to_string(dir.join(app)).unwrap();
            assert!(app.contains("`my-notes`") && !app.contains("{{"), "{app}");
            assert!(
                app.contains("notes_add") && app.contains("plugin.store"),
                "{app}"
            );
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }

    #[test]
    fn a_project_is_written_with_the_wit_and_no_placeholder_left() {
        let dir = std::env::temp_dir().join(format!("wasmgate-new-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        create("my-tool", Lang::Rust, Kind::Plugin, &dir).unwrap();
        let cargo = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        assert!(cargo.contains("name = \"my-tool\"") && !cargo.contains("{{"));
        assert!(cargo.contains(&format!("wasmgate-plugin = \"{}\"", sdk_version())));
        let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
        assert!(readme.contains("release/my_tool.wasm"), "{readme}");
        assert_eq!(
            std::fs::read_to_string(dir.join("wasmgate-plugin/wit/plugin.wit")).unwrap(),
            crate::plugin_cli::PLUGIN_WIT
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("wasmgate-plugin/wit/plugin-0.2/plugin.wit")).unwrap(),
            crate::plugin_cli::PLUGIN_WIT_V2
        );
        assert!(dir.join("wasmgate-plugin/src/tool.rs").is_file());
        assert!(
            create("my-tool", Lang::Rust, Kind::Plugin, &dir)
                .unwrap_err()
                .contains("not empty")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
