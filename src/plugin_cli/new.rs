//! `plugin new NAME`: a project from the templates in `templates/plugin/`, with the WIT
//! this binary loads vendored in, so that it builds as it is and loads here.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::Lang;

/// The wit-bindgen the repository's own plugins are built with (plugins/Cargo.toml).
pub const WIT_BINDGEN: &str = "0.61";
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

pub fn run(name: &str, lang: Lang, dir: Option<PathBuf>) -> ExitCode {
    let dir = dir.unwrap_or_else(|| PathBuf::from(name));
    match create(name, lang, &dir) {
        Ok(()) => {
            println!("created {} ({lang:?} plugin `{name}`)", dir.display());
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

pub fn create(name: &str, lang: Lang, dir: &Path) -> Result<(), String> {
    check_name(name)?;
    if dir.exists() && std::fs::read_dir(dir).map_or(true, |mut entries| entries.next().is_some()) {
        return Err(format!(
            "{} already exists and is not empty (choose another NAME or --dir)",
            dir.display()
        ));
    }
    let files = match lang {
        Lang::Rust => RUST,
        Lang::Python => PYTHON,
        Lang::Js => JS,
    };
    let fill = |text: &str| {
        text.replace("{{name}}", name)
            .replace("{{crate}}", &name.replace('-', "_"))
            .replace("{{wit_bindgen}}", WIT_BINDGEN)
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
    write("wit/plugin.wit", super::PLUGIN_WIT)
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
    fn the_pinned_wit_bindgen_is_the_repository_plugins_one() {
        let workspace = include_str!("../../plugins/Cargo.toml");
        assert!(
            workspace.contains(&format!("wit-bindgen = \"{WIT_BINDGEN}\"")),
            "plugins/Cargo.toml and WIT_BINDGEN disagree"
        );
        let build = include_str!("../../plugins/python/text/build.sh");
        assert!(build.contains(&format!("version=\"{COMPONENTIZE_PY}\"")));
    }

    #[test]
    fn the_pinned_componentize_js_is_the_one_ci_installs() {
        let script = include_str!("../../scripts/test.sh");
        assert!(script.contains(&format!("componentize_js_version={COMPONENTIZE_JS}")));
        let dir = std::env::temp_dir().join(format!("wasmgate-new-js-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        create("my-tool", Lang::Js, &dir).unwrap();
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

    #[test]
    fn a_project_is_written_with_the_wit_and_no_placeholder_left() {
        let dir = std::env::temp_dir().join(format!("wasmgate-new-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        create("my-tool", Lang::Rust, &dir).unwrap();
        let cargo = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        assert!(cargo.contains("name = \"my-tool\"") && !cargo.contains("{{"));
        let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
        assert!(readme.contains("release/my_tool.wasm"), "{readme}");
        assert_eq!(
            std::fs::read_to_string(dir.join("wit/plugin.wit")).unwrap(),
            crate::plugin_cli::PLUGIN_WIT
        );
        assert!(
            create("my-tool", Lang::Rust, &dir)
                .unwrap_err()
                .contains("not empty")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
