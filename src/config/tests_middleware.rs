//! `[[middleware]]`: the chain in order, each link's component as a plugin entry, and the
//! errors of a link that names no component, two, or a taken name.

use std::path::Path;

use super::{Config, ConfigError, InstanceMode, OnError, from_toml_str};
use crate::test_support::TempDir;

fn toml(text: &str, base: &Path) -> Result<Config, ConfigError> {
    from_toml_str(text, Path::new("gateway.toml"), base, &|_| None)
}

fn errors(text: &str, base: &Path) -> Vec<String> {
    match toml(text, base) {
        Ok(_) => panic!("expected errors"),
        Err(e) => e.diagnostics().iter().map(|d| d.message.clone()).collect(),
    }
}

#[test]
fn links_keep_their_order_scope_and_component_settings() {
    let dir = TempDir::new("wasmgate-mw-config-");
    std::fs::write(dir.join("guard.wasm"), b"").unwrap();
    std::fs::write(dir.join("audit.wasm"), b"").unwrap();
    let config = toml(
        r#"
[[middleware]]
path = "guard.wasm"
servers = ["db", "files*"]
tools = ["db__*"]
profiles = ["team"]
config = { rules = [{ arg = "query", max = 3 }], strict = true }

[[middleware]]
name = "log"
path = "audit.wasm"
on_error = "pass"
instance = "call"
timeout = "2s"
"#,
        &dir,
    )
    .unwrap();
    let names: Vec<&str> = config.middleware.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["guard", "log"]);
    let guard = &config.middleware[0];
    assert_eq!(guard.on_error, OnError::Deny);
    assert_eq!(
        guard.servers.as_deref(),
        Some(&["db".to_string(), "files*".to_string()][..])
    );
    assert_eq!(guard.plugins, None);
    assert_eq!(guard.tools.as_deref(), Some(&["db__*".to_string()][..]));
    let component = &config.plugins.plugins["guard"];
    assert!(component.middleware);
    assert_eq!(
        component.path.as_deref(),
        Some(dir.join("guard.wasm").as_path())
    );
    // Shared instances unless the entry says otherwise; arrays and tables as JSON text.
    assert_eq!(component.instances.mode, InstanceMode::Shared);
    assert_eq!(component.config["rules"], r#"[{"arg":"query","max":3}]"#);
    assert_eq!(component.config["strict"], "true");
    let log = &config.plugins.plugins["log"];
    assert_eq!(config.middleware[1].on_error, OnError::Pass);
    assert_eq!(log.instances.mode, InstanceMode::Call);
    assert_eq!(log.limits.timeout, std::time::Duration::from_secs(2));
}

#[test]
fn a_link_needs_one_component_and_a_name_of_its_own() {
    let dir = TempDir::new("wasmgate-mw-config-");
    let both = errors(
        "[[middleware]]\nname = \"x\"\nuse = \"redact\"\npath = \"x.wasm\"\n",
        &dir,
    );
    assert!(both[0].contains("both `use` and `path`"), "{both:?}");
    let neither = errors("[[middleware]]\nname = \"x\"\n", &dir);
    assert!(
        neither[0].contains("neither `use` nor `path`"),
        "{neither:?}"
    );
    let nameless = errors("[[middleware]]\non_error = \"pass\"\n", &dir);
    assert!(nameless[0].contains("names no component"), "{nameless:?}");
    let unknown = errors("[[middleware]]\nuse = \"nosuch\"\n", &dir);
    assert!(
        unknown[0].contains("no bundled middleware `nosuch`"),
        "{unknown:?}"
    );
    let twice = errors(
        "[[middleware]]\npath = \"a.wasm\"\n[[middleware]]\nname = \"a\"\npath = \"b.wasm\"\n",
        &dir,
    );
    assert!(
        twice[0].contains("two middleware entries are named `a`"),
        "{twice:?}"
    );
    let taken = errors(
        "[plugins.a]\npath = \"p.wasm\"\n[[middleware]]\npath = \"a.wasm\"\n",
        &dir,
    );
    assert!(
        taken
            .iter()
            .any(|e| e.contains("has the name of a [plugins.a] table")),
        "{taken:?}"
    );
    let tool_keys = errors(
        "[[middleware]]\npath = \"a.wasm\"\nnamespace = \"x\"\n",
        &dir,
    );
    assert!(tool_keys[0].contains("namespace"), "{tool_keys:?}");
    let bad_glob = errors(
        "[[middleware]]\npath = \"a.wasm\"\ntools = [\"a[\"]\n",
        &dir,
    );
    assert!(bad_glob[0].contains("is not a glob"), "{bad_glob:?}");
}

#[test]
fn check_names_a_bundled_middleware_as_bundled_even_with_a_plugin_dir() {
    let dir = TempDir::new("wasmgate-mw-config-");
    std::fs::create_dir(dir.join("plugins")).unwrap();
    let config = toml(
        "[plugins]\ndir = \"plugins\"\n\n[[middleware]]\nuse = \"redact\"\n",
        &dir,
    )
    .unwrap();
    let summary = config.summary();
    assert!(
        summary.contains("redact: the bundled middleware `redact`"),
        "{summary}"
    );
    assert!(!summary.contains("redact.wasm"), "{summary}");
}
