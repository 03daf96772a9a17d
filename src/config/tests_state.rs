//! A plugin's state in the config: `[plugins] data_dir` and `store_size`, a plugin's
//! `store`, and whether the operator set `instance` at all.

use std::path::Path;

use super::{Config, ConfigError, InstanceMode, StoreScope, from_toml_str, load};
use crate::test_support::TempDir;

fn with_env(
    text: &str,
    base: &Path,
    vars: &'static [(&'static str, &'static str)],
) -> Result<Config, ConfigError> {
    let env = move |name: &str| {
        vars.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| (*v).to_owned())
    };
    from_toml_str(text, Path::new("gateway.toml"), base, &env)
}

fn messages(result: Result<Config, ConfigError>) -> String {
    match result {
        Ok(_) => panic!("expected errors"),
        Err(e) => e.diagnostics().iter().map(|d| d.message.clone()).collect(),
    }
}

#[test]
fn data_dir_store_size_and_store_are_read() {
    let dir = TempDir::new("wasmgate-state-config-");
    let config = with_env(
        r#"
[plugins]
data_dir = "~/state"
store_size = "64KiB"

[plugins.notes]
path = "notes.wasm"
store = "shared"
instance = "call"

[plugins.todo]
path = "todo.wasm"
"#,
        &dir,
        &[("HOME", "/home/ada")],
    )
    .unwrap();
    let p = &config.plugins;
    assert_eq!(p.data_dir.as_deref(), Some(Path::new("/home/ada/state")));
    assert_eq!(p.store_size, 64 << 10);
    let notes = &p.plugins["notes"];
    assert_eq!(notes.store, StoreScope::Shared);
    assert!(notes.instances.configured);
    assert_eq!(notes.instances.mode, InstanceMode::Call);
    let todo = &p.plugins["todo"];
    assert_eq!(todo.store, StoreScope::Principal);
    assert!(!todo.instances.configured);
    assert_eq!(todo.instances.mode, InstanceMode::Call);
    let summary = config.summary();
    assert!(
        summary.contains("plugin stores in /home/ada/state, 64 KiB each"),
        "{summary}"
    );
    assert!(
        summary.contains("store: one for all principals"),
        "{summary}"
    );
}

#[test]
fn data_dir_falls_back_from_xdg_to_home_to_none() {
    let dir = TempDir::new("wasmgate-state-config-");
    const BOTH: &[(&str, &str)] = &[("XDG_DATA_HOME", "/xdg/data"), ("HOME", "/home/bo")];
    let config = with_env("", &dir, BOTH).unwrap();
    assert_eq!(
        config.plugins.data_dir.as_deref(),
        Some(Path::new("/xdg/data/wasmgate"))
    );
    assert_eq!(config.plugins.store_size, 1 << 20);
    let config = with_env("", &dir, &[("HOME", "/home/bo")]).unwrap();
    assert_eq!(
        config.plugins.data_dir.as_deref(),
        Some(Path::new("/home/bo/.local/share/wasmgate"))
    );
    // A relative XDG_DATA_HOME is ignored, as the XDG spec asks.
    let config = with_env("", &dir, &[("XDG_DATA_HOME", "rel")]).unwrap();
    assert_eq!(config.plugins.data_dir, None);
    let embedded =
        load::embedded_default_with_env(&|name| (name == "HOME").then(|| "/home/cy".to_owned()));
    assert_eq!(
        embedded.plugins.data_dir.as_deref(),
        Some(Path::new("/home/cy/.local/share/wasmgate"))
    );
}

#[test]
fn bad_state_keys_are_precise_errors() {
    let dir = TempDir::new("wasmgate-state-config-");
    let cases = [
        (
            "[plugins]\nstore_size = \"lots\"\n",
            "invalid size \"lots\"",
        ),
        ("[plugins]\nstore_size = 0\n", "must be greater than zero"),
        (
            "[plugins]\nstore_size = true\n",
            "`plugins.store_size` must be a size",
        ),
        (
            "[plugins]\ndata_dir = 3\n",
            "`plugins.data_dir` must be a path",
        ),
        (
            "[plugins.p]\npath = \"p.wasm\"\nstore = \"everyone\"\n",
            "unknown variant `everyone`, expected `principal` or `shared`",
        ),
    ];
    for (text, want) in cases {
        let got = messages(with_env(text, &dir, &[]));
        assert!(got.contains(want), "{text}: {got}");
    }
}

#[test]
fn a_read_write_grant_holding_data_dir_is_refused() {
    let dir = TempDir::new("wasmgate-state-config-");
    std::fs::create_dir_all(dir.join("work")).unwrap();
    let d = dir.to_str().unwrap();
    let text = format!(
        "[plugins]\ndata_dir = \"{d}/work/state\"\ncache_dir = \"{d}/cache\"\n\
         [plugins.p]\npath = \"p.wasm\"\n\
         allow_dirs = [{{ host = \"{d}/work\", guest = \"/w\", mode = \"rw\" }}]\n"
    );
    let got = messages(from_toml_str(
        &text,
        &dir.join("gateway.toml"),
        &dir,
        &|_| None,
    ));
    assert!(got.contains("every principal's data"), "{got}");
    let read_only = text.replace("mode = \"rw\"", "mode = \"ro\"");
    from_toml_str(&read_only, &dir.join("gateway.toml"), &dir, &|_| None).unwrap();
}
