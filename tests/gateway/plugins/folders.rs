//! Plugin folders and files that appear, move or are linked after the start: links,
//! a folder removed and made again, folders that do not exist yet.

use std::time::Duration;

use serde_json::json;

use super::{replace_atomically, wait_list_change};
use crate::harness::{
    Client, LIST_CHANGED, TestDir, call_ok, first_list, fixture, has, plugin_dir, setup, shipped,
    text, wait_event, wait_tools,
};

// ---- folders that appear after the start ----

/// How long a plugin that appears may take to be announced (compiling echo takes a
/// second or two in a debug build).
const APPEAR_TIMEOUT: Duration = Duration::from_secs(30);

#[test]
fn one_build_output_named_by_path_and_by_a_link_reloads_both() {
    // `path` spells the folder with `..`; the link in the plugin folder names it plainly.
    // The watcher sees the folder once, under one of the two spellings.
    let setup = setup()
        .folder("build")
        .folder("elsewhere")
        .plugins("[plugins.rl]\npath = \"{dir}/elsewhere/../build/y.wasm\"");
    let dir = TestDir::new("link-and-path");
    let config = setup.write(&dir.path);
    let build = dir.join("build");
    std::fs::write(build.join("y.wasm"), shipped("hash")).unwrap();
    std::os::unix::fs::symlink("../build/y.wasm", dir.join("plugins/sym.wasm")).unwrap();
    let mut client = setup.spawn(&config, dir);
    let names = first_list(&mut client);
    assert!(
        has(&names, "rl__sha256") && has(&names, "sym__sha256"),
        "{names:?}"
    );
    replace_atomically(&build.join("y.wasm"), &shipped("json"));
    wait_list_change(&mut client, "both to serve the new build", |n| {
        has(n, "rl__query") && has(n, "sym__query") && !has(n, "sym__sha256")
    });
    // `cargo clean`, then a build: both go, and both come back.
    std::fs::remove_dir_all(&build).unwrap();
    wait_list_change(&mut client, "both to go", |n| {
        !has(n, "rl__query") && !has(n, "sym__query")
    });
    std::fs::create_dir(&build).unwrap();
    replace_atomically(&build.join("y.wasm"), &shipped("hash"));
    wait_list_change(&mut client, "both to come back", |n| {
        has(n, "rl__sha256") && has(n, "sym__sha256")
    });
}

#[test]
fn the_plugin_folder_removed_and_made_again_unloads_then_loads_its_plugins() {
    let (mut client, names) = setup().file("a.wasm", shipped("hash")).start_listed();
    assert!(has(&names, "a__sha256"), "{names:?}");
    let plugins = plugin_dir(&client);
    // `rm -rf`: its file's event and the folder's own both say it went.
    std::fs::remove_dir_all(&plugins).unwrap();
    wait_list_change(&mut client, "a to go", |n| !has(n, "a__sha256"));
    std::fs::create_dir(&plugins).unwrap();
    replace_atomically(&plugins.join("b.wasm"), &shipped("json"));
    wait_list_change(&mut client, "b to load", |n| has(n, "b__query"));
    // The folder was read again once for its going, not once per event.
    let stderr = client.stderr();
    assert_eq!(
        stderr
            .matches("a watched plugin folder was moved, removed or made again")
            .count(),
        1,
        "{stderr}"
    );
}

#[test]
fn a_symlinked_plugin_follows_the_file_it_points_to() {
    // The dev loop with a link in the plugin folder to the build output
    // (`ln -s ../build/y.wasm plugins/`): a build replaces the file behind the link.
    let setup = setup().folder("build");
    let dir = TestDir::new("symlink");
    let config = setup.write(&dir.path);
    let build = dir.join("build");
    std::fs::write(build.join("y.wasm"), shipped("hash")).unwrap();
    std::os::unix::fs::symlink("../build/y.wasm", dir.join("plugins/y.wasm")).unwrap();
    let mut client = setup.spawn(&config, dir);
    let names = first_list(&mut client);
    assert!(has(&names, "y__sha256"), "{names:?}");
    client.drain_notifications(LIST_CHANGED);

    replace_atomically(&build.join("y.wasm"), &shipped("json"));
    wait_list_change(&mut client, "y__query behind the link", |n| {
        has(n, "y__query") && !has(n, "y__sha256")
    });
    assert_eq!(wait_event(&mut client, "plugin.reloaded", "y")["tools"], 3);

    // `cargo clean` takes the build folder away: the plugin goes; the next build brings it back.
    std::fs::remove_dir_all(&build).unwrap();
    wait_list_change(&mut client, "y__query to go", |n| !has(n, "y__query"));
    std::fs::create_dir(&build).unwrap();
    replace_atomically(&build.join("y.wasm"), &shipped("hash"));
    wait_list_change(&mut client, "y__sha256 back", |n| has(n, "y__sha256"));

    // A link made while the gateway runs, to a file not built yet: loaded once it is,
    // and its target watched from then on.
    let plugins = plugin_dir(&client);
    std::os::unix::fs::symlink(build.join("z.wasm"), plugins.join("z.wasm")).unwrap();
    std::fs::write(build.join("z.wasm"), shipped("json")).unwrap();
    wait_list_change(&mut client, "z__query", |n| has(n, "z__query"));
    replace_atomically(&build.join("z.wasm"), &shipped("hash"));
    wait_list_change(&mut client, "z__sha256 behind the new link", |n| {
        has(n, "z__sha256") && !has(n, "z__query")
    });
}

/// Starts a gateway on `[plugins]` text whose folders do not exist yet.
fn start_before_folders(label: &str, plugins: &str) -> (Client, TestDir) {
    let dir = TestDir::new(label);
    let text = format!(
        "[gateway]\nshutdown_grace = \"1s\"\n\n[plugins]\ncache_dir = \"{{dir}}/cache\"\n{plugins}\n"
    );
    let config = dir.write(
        "gateway.toml",
        &text.replace("{dir}", dir.path.to_str().unwrap()),
    );
    let mut client = Client::spawn_with_env(
        &["serve", "--config", config.to_str().unwrap()],
        TestDir::new(&format!("{label}-gw")),
        &[],
    );
    client.initialize();
    let names = first_list(&mut client);
    assert!(!names.iter().any(|n| n.starts_with("echo__")), "{names:?}");
    client.drain_notifications(LIST_CHANGED);
    (client, dir)
}

fn wait_announced(client: &mut Client, tool: &str) {
    if client
        .try_notification(LIST_CHANGED, APPEAR_TIMEOUT)
        .is_none()
    {
        panic!(
            "{tool}: no tools/list_changed within {APPEAR_TIMEOUT:?} after the plugin appeared\nstderr:\n{}",
            client.stderr()
        );
    }
    wait_tools(client, &format!("{tool} to be listed"), |n| has(n, tool));
    assert_eq!(
        text(&call_ok(client, tool, json!({"text": "late"}))),
        "late"
    );
}

#[test]
fn a_plugin_folder_created_after_the_start_is_watched_when_it_appears() {
    // `wasmgate check` promises it: "plugins.dir ... is not a directory (yet); plugins
    // will be loaded when it appears".
    let (mut client, dir) = start_before_folders("late-dir", "dir = \"{dir}/later\"");
    std::fs::create_dir(dir.join("later")).unwrap();
    replace_atomically(&dir.join("later/echo.wasm"), &fixture("echo"));
    wait_announced(&mut client, "echo__echo");
}

#[test]
fn a_plugin_path_whose_folder_does_not_exist_yet_is_loaded_after_the_first_build() {
    // The dev loop of plugins/README.md before the first build: `target/` is not there yet.
    // The config check says "... does not exist (yet); it will be loaded when it appears".
    let (mut client, dir) = start_before_folders(
        "late-path",
        "[plugins.echo]\npath = \"{dir}/target/wasm32-wasip2/release/echo.wasm\"",
    );
    let release = dir.join("target/wasm32-wasip2/release");
    std::fs::create_dir_all(&release).unwrap();
    replace_atomically(&release.join("echo.wasm"), &fixture("echo"));
    wait_announced(&mut client, "echo__echo");
}
