//! The commands besides `serve`: `--version`, `check`, `tools`, `call`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{TestDir, config, fixture_path, run_cli, run_cli_with_env};

const LIMIT: Duration = Duration::from_secs(30);

/// A folder with `gateway.toml` holding `toml`; returns the folder and the file's path.
fn with_config(toml: &str) -> (TestDir, String) {
    let dir = TestDir::new("cli");
    let path = dir.write("gateway.toml", toml);
    (dir, path.to_str().unwrap().to_string())
}

fn example_config() -> (TestDir, String) {
    let dir = TestDir::new("cli");
    let text = config().example("ex", &[]).render(&dir.path);
    let path = dir.write("gateway.toml", &text);
    (dir, path.to_str().unwrap().to_string())
}

#[test]
fn version() {
    let dir = TestDir::new("cli");
    let out = run_cli(&["--version"], &dir.path, LIMIT);
    assert!(out.status.success(), "{}", out.stderr);
    assert_eq!(
        out.stdout.trim(),
        format!("wasmgate {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn check_accepts_a_good_config_and_prints_a_summary() {
    let dir = TestDir::new("cli");
    // A server that leaves a mark when started: `check` must start nothing.
    let text = config()
        .example_with("ex", &["--name", "summarised"], &[r#"timeout = "7s""#])
        .server("marker", "/bin/sh", &["-c", "touch started-marker"], &[])
        .render(&dir.path);
    let path = dir.write("gateway.toml", &text);
    let out = run_cli(
        &["check", "--config", path.to_str().unwrap()],
        &dir.path,
        LIMIT,
    );
    out.assert_exit(0);
    assert!(
        out.stdout.contains("gateway.toml"),
        "the summary names the file:\n{}",
        out.stdout
    );
    assert!(
        out.stdout
            .lines()
            .any(|l| l.trim_start().starts_with("ex:") && l.contains("mcp_example_server")),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .lines()
            .any(|l| l.trim_start().starts_with("marker:")),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("config OK"), "{}", out.stdout);
    assert!(
        !dir.join("started-marker").exists(),
        "check started a server"
    );
}

#[test]
fn check_rejects_a_bad_config_naming_file_and_line() {
    let (dir, path) = with_config(
        "[gateway]\ntimeout = \"30s\"\n\n[servers.ex]\ncommand = \"x\"\nbogus_key = 1\n",
    );
    let out = run_cli(&["check", "--config", &path], &dir.path, LIMIT);
    out.assert_exit(1);
    assert!(
        out.stderr.contains("gateway.toml:6"),
        "stderr names file and line 6:\n{}",
        out.stderr
    );
    assert!(out.stderr.contains("bogus_key"), "{}", out.stderr);

    let (dir, path) = with_config("[gateway]\ntimeout = \"soon\"\n");
    let out = run_cli(&["check", "--config", &path], &dir.path, LIMIT);
    out.assert_exit(1);
    assert!(
        out.stderr.contains("gateway.toml:2"),
        "stderr names file and line 2:\n{}",
        out.stderr
    );

    let out = run_cli(
        &["check", "--config", "/nonexistent/wasmgate.toml"],
        &dir.path,
        LIMIT,
    );
    out.assert_exit(1);
    assert!(
        out.stderr.contains("/nonexistent/wasmgate.toml"),
        "{}",
        out.stderr
    );
}

/// `check` reads each plugin file's first bytes: what cannot be a component fails the
/// check, as it would fail to load.
#[test]
fn check_rejects_plugin_files_that_are_not_components() {
    let (dir, path) = with_config("[plugins]\ndir = \"plugins\"\n");
    std::fs::create_dir(dir.join("plugins")).unwrap();
    std::fs::write(dir.join("plugins/core.wasm"), b"\0asm\x01\0\0\0").unwrap();
    std::fs::write(dir.join("plugins/notes.wasm"), b"hello").unwrap();
    let out = run_cli(&["check", "--config", &path], &dir.path, LIMIT);
    out.assert_exit(1);
    assert!(
        out.stderr
            .contains("core.wasm: plugin `core` is a core WebAssembly module, not a component"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("notes.wasm: plugin `notes` is not a WebAssembly file"),
        "{}",
        out.stderr
    );
    std::fs::remove_file(dir.join("plugins/core.wasm")).unwrap();
    std::fs::remove_file(dir.join("plugins/notes.wasm")).unwrap();
    let out = run_cli(&["check", "--config", &path], &dir.path, LIMIT);
    assert!(out.status.success(), "{}", out.stderr);
}

/// What a plugin author copies into their crate: the WIT the binary loads.
#[test]
fn wit_prints_the_plugin_wit() {
    let dir = TestDir::new("cli");
    let out = run_cli(&["wit"], &dir.path, LIMIT);
    assert!(out.status.success(), "{}", out.stderr);
    let file = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/wit/plugin-0.2/plugin.wit"
    ))
    .expect("wit/plugin-0.2/plugin.wit");
    assert_eq!(out.stdout, file);
    assert!(
        out.stdout.contains("package wasmgate:plugin@"),
        "{}",
        out.stdout
    );
}

#[test]
fn a_log_level_that_is_no_level_exits_1_naming_it() {
    let dir = TestDir::new("cli");
    for (command, bad) in [
        ("tools", "verbose"),
        ("tools", "info,[["),
        ("check", "verbose"),
    ] {
        let out = run_cli(&[command, "--log-level", bad], &dir.path, LIMIT);
        out.assert_exit(1);
        assert!(
            out.stderr
                .contains(&format!("invalid --log-level (or WASMGATE_LOG) \"{bad}\"")),
            "{}",
            out.stderr
        );
    }
}

#[test]
fn serve_with_a_bad_config_exits_1_without_touching_stdout() {
    let (dir, path) = with_config("[gateway\n");
    let out = run_cli(&["serve", "--config", &path], &dir.path, LIMIT);
    out.assert_exit(1);
    assert!(out.stdout.is_empty(), "stdout: {}", out.stdout);
    assert!(out.stderr.contains("gateway.toml:1"), "{}", out.stderr);
}

#[test]
fn tools_lists_names_and_json() {
    let (dir, path) = example_config();
    let out = run_cli(&["tools", "--config", &path], &dir.path, LIMIT);
    assert!(out.status.success(), "{}", out.stderr);
    let names: Vec<&str> = out
        .stdout
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    for name in [
        "gateway_status",
        "get_events",
        "ex__echo",
        "ex__add",
        "ex__pid",
    ] {
        assert!(names.contains(&name), "{name} missing in:\n{}", out.stdout);
    }

    let out = run_cli(&["tools", "--json", "--config", &path], &dir.path, LIMIT);
    assert!(out.status.success(), "{}", out.stderr);
    let listed: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", out.stdout));
    let tools = listed["tools"].as_array().expect("a tools array");
    let add = tools
        .iter()
        .find(|t| t["name"] == "ex__add")
        .expect("ex__add");
    assert_eq!(add["x-custom"], json!({"keep": true}));
    assert_eq!(tools.len(), 16, "{}", out.stdout);
}

#[test]
fn tools_exits_1_naming_what_failed_to_start() {
    let dir = TestDir::new("cli");
    let broken = dir.write("broken.wasm", "not WebAssembly");
    // A server that exits at once is still restarting (or has failed) when the list is made.
    let text = config()
        .example("ex", &[])
        .server(
            "dead",
            "sh",
            &["-c", "echo 'no API key set' >&2; exit 3"],
            &[],
        )
        .render(&dir.path)
        + &format!(
            "\n[plugins.broken]\npath = {:?}\n",
            broken.to_str().unwrap()
        );
    let path = dir.write("gateway.toml", &text);
    let out = run_cli(
        &["tools", "--config", path.to_str().unwrap()],
        &dir.path,
        LIMIT,
    );
    out.assert_exit(1);
    assert!(out.stdout.contains("ex__echo"), "{}", out.stdout);
    assert!(
        out.stderr
            .lines()
            .any(|l| l.starts_with("failed: broken: ") && l.contains("not a WebAssembly file")),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .lines()
            .any(
                |l| (l.starts_with("restarting: dead: ") || l.starts_with("failed: dead: "))
                    && l.contains(
                        "exited during start-up (exit status: 3); its stderr: no API key set"
                    )
            ),
        "{}",
        out.stderr
    );
}

#[test]
fn one_shot_commands_wait_for_plugins_to_compile() {
    // startup_timeout ends long before the plugin is compiled (no cache): a one-shot
    // command has no later list_changed, so it waits for the plugin anyway.
    let dir = TestDir::new("cli");
    let plugin = fixture_path("minimal");
    let path = dir.write(
        "gateway.toml",
        &format!(
            "[gateway]\nstartup_timeout = \"1ms\"\n\n[plugins]\ncache_dir = {:?}\n\n\
             [plugins.mini]\npath = {:?}\n",
            dir.path.join("cache").to_str().unwrap(),
            plugin.to_str().unwrap()
        ),
    );
    let config = path.to_str().unwrap();
    let out = run_cli(&["tools", "--config", config], &dir.path, LIMIT);
    out.assert_exit(0);
    assert!(out.stdout.contains("mini__echo"), "{}", out.stdout);
    std::fs::remove_dir_all(dir.path.join("cache")).expect("empty the cache");
    let out = run_cli(
        &[
            "call",
            "--config",
            config,
            "mini__echo",
            r#"{"text":"compiled"}"#,
        ],
        &dir.path,
        LIMIT,
    );
    out.assert_exit(0);
    assert!(out.stdout.contains("compiled"), "{}", out.stdout);
}

/// The plugin author's loop without a config: `--plugin` serves a build output by its
/// file name, alone (no bundled plugins); with a config, beside what the config serves.
#[test]
fn plugin_files_are_served_with_or_without_a_config() {
    let dir = TestDir::new("cli");
    let plugin = fixture_path("minimal");
    let plugin = plugin.to_str().unwrap();
    let cache = dir.path.join("xdg-cache");
    let env = [("XDG_CACHE_HOME", cache.to_str().unwrap())];
    let cli = |args: &[&str]| run_cli_with_env(args, &dir.path, &env, LIMIT);

    let out = cli(&["tools", "--plugin", plugin]);
    out.assert_exit(0);
    let names: Vec<&str> = out
        .stdout
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        names,
        ["gateway_status", "get_events", "minimal__echo"],
        "{}",
        out.stdout
    );
    let out = cli(&[
        "call",
        "minimal__echo",
        r#"{"text":"hi"}"#,
        "--plugin",
        plugin,
    ]);
    out.assert_exit(0);
    let result: Value = serde_json::from_str(&out.stdout).expect("JSON result");
    assert_eq!(result["content"][0]["text"], "hi");

    // Two files with one stem would be one plugin: refused, naming both.
    let twin = dir.write("minimal.wasm", "");
    let out = cli(&[
        "tools",
        "--plugin",
        plugin,
        "--plugin",
        twin.to_str().unwrap(),
    ]);
    out.assert_exit(1);
    assert!(
        out.stderr.contains("both would be plugin `minimal`") && out.stderr.contains(plugin),
        "{}",
        out.stderr
    );
    assert!(out.stdout.is_empty(), "{}", out.stdout);

    // With a config: its servers stay, and a `[plugins.minimal]` table gives the file its
    // settings (here a namespace); the table needs no path, the command line gives it.
    let server = crate::harness::example_server();
    let table = "[plugins.minimal]\nnamespace = \"m\"\n";
    let config = dir.write(
        "gateway.toml",
        &format!(
            "[servers.ex]\ncommand = {:?}\n\n{table}",
            server.to_str().unwrap()
        ),
    );
    let config = config.to_str().unwrap();
    let out = cli(&["tools", "--config", config, "--plugin", plugin]);
    out.assert_exit(0);
    assert!(
        out.stdout.contains("ex__echo") && out.stdout.contains("m__echo"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("minimal__"), "{}", out.stdout);
    // Without the file, that table is an error, as before.
    let out = cli(&["check", "--config", config]);
    out.assert_exit(1);
    assert!(
        out.stderr.contains("plugin `minimal` has no path"),
        "{}",
        out.stderr
    );
    // A table that disables the plugin is no place for its file: said, not ignored.
    std::fs::write(config, format!("{table}disabled = true\n")).unwrap();
    let out = cli(&["tools", "--config", config, "--plugin", plugin]);
    out.assert_exit(1);
    assert!(
        out.stderr.contains("the config disables plugin `minimal`"),
        "{}",
        out.stderr
    );
}

#[test]
fn call_prints_the_result() {
    let (dir, path) = example_config();
    let out = run_cli(
        &["call", "--config", &path, "ex__echo", r#"{"text":"hi"}"#],
        &dir.path,
        LIMIT,
    );
    out.assert_exit(0);
    let result: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", out.stdout));
    assert_eq!(result["content"][0]["text"], "hi");
}

#[test]
fn call_beside_a_slow_server() {
    let dir = TestDir::new("cli");
    let text = config()
        .example("fast", &[])
        .example("slow", &["--start-delay-ms", "800"])
        .render(&dir.path);
    let path = dir.write("gateway.toml", &text);
    let path = path.to_str().unwrap();
    // Done before the slow server is up: its late answer to `initialize` is no warning.
    let out = run_cli(
        &["call", "--config", path, "fast__echo", r#"{"text":"hi"}"#],
        &dir.path,
        LIMIT,
    );
    out.assert_exit(0);
    assert!(!out.stderr.contains("WARN"), "{}", out.stderr);
    // The gateway's own status waits for the servers' start, as a health check needs.
    let out = run_cli(
        &["call", "--config", path, "gateway_status", "{}"],
        &dir.path,
        LIMIT,
    );
    out.assert_exit(0);
    let result: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", out.stdout));
    let status: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap())
        .expect("the status is JSON text");
    for server in ["fast", "slow"] {
        assert_eq!(status["backends"][server]["status"], "ready", "{status}");
    }
}

#[test]
fn call_of_a_failing_tool_exits_1() {
    let (dir, path) = example_config();
    let out = run_cli(&["call", "--config", &path, "ex__fail"], &dir.path, LIMIT);
    out.assert_exit(1);
    assert!(
        out.stdout.contains("this tool always fails"),
        "{}",
        out.stdout
    );

    let out = run_cli(
        &["call", "--config", &path, "ex__nope", "{}"],
        &dir.path,
        LIMIT,
    );
    out.assert_exit(1);
    assert!(out.stderr.contains("ex__nope"), "{}", out.stderr);

    let out = run_cli(
        &["call", "--config", &path, "ex__echo", "{not json"],
        &dir.path,
        LIMIT,
    );
    out.assert_exit(1);
}

#[test]
fn claude_desktop_json_config_works() {
    let dir = TestDir::new("cli");
    let server = crate::harness::example_server();
    let json = json!({"mcpServers": {"ex": {"command": server, "args": ["--name", "fromjson"]}}, "globalShortcut": "Ctrl+Space"});
    let path = dir.write("claude_desktop_config.json", &json.to_string());
    let out = run_cli(
        &[
            "call",
            "--config",
            path.to_str().unwrap(),
            "ex__echo",
            r#"{"text":"json"}"#,
        ],
        &dir.path,
        LIMIT,
    );
    out.assert_exit(0);
    assert!(out.stdout.contains("json"));
}

#[test]
fn one_shot_commands_leave_no_server_behind() {
    let dir = TestDir::new("cli");
    let example = crate::harness::example_server();
    // The shell writes its pid, then becomes the example server (same pid).
    let script = format!(
        r#"echo $$ > "{}/server.pid"; exec "{}""#,
        dir.path.display(),
        example.display()
    );
    let text = config()
        .server("ex", "/bin/sh", &["-c", &script], &[])
        .render(&dir.path);
    let path = dir.write("gateway.toml", &text);
    for args in [vec!["tools"], vec!["call", "ex__echo", r#"{"text":"x"}"#]] {
        let _ = std::fs::remove_file(dir.join("server.pid"));
        let mut full = args.clone();
        full.extend(["--config", path.to_str().unwrap()]);
        let out = run_cli(&full, &dir.path, LIMIT);
        assert!(out.status.success(), "{args:?}: {}", out.stderr);
        let pid: u32 = std::fs::read_to_string(dir.join("server.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        crate::harness::eventually(Duration::from_secs(5), "the server to be gone", || {
            crate::harness::process_gone(pid).then_some(())
        });
    }
}

#[test]
fn check_reports_commands_that_cannot_be_run_and_serve_still_starts() {
    let toml = "[servers.gone]\ncommand = \"/nonexistent/bin/x\"\n\n[servers.nameless]\ncommand = \"no-such-program-wasmgate-test\"\n";
    let (dir, path) = with_config(toml);
    let out = run_cli(&["check", "--config", &path], &dir.path, LIMIT);
    out.assert_exit(1);
    for expected in [
        "gateway.toml:2:1: servers.gone.command: command `/nonexistent/bin/x` does not exist",
        "gateway.toml:5:1: servers.nameless.command: command `no-such-program-wasmgate-test` is not found on PATH",
    ] {
        assert!(out.stderr.contains(expected), "{expected}\n{}", out.stderr);
    }
    // Serving is unchanged: the entries fail to start, the gateway serves the rest.
    let mut client = crate::harness::Client::spawn(&["serve", "--config", &path], dir);
    client.initialize();
    assert!(client.tool_names().contains(&"gateway_status".to_string()));
}
