//! Loading tests: the example files, each file format, defaults, and every kind of
//! error with the line it names and the fix it suggests.

use std::path::Path;
use std::time::Duration;

use super::*;
use crate::test_support::TempDir;

fn env_of(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |name| {
        vars.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| (*v).to_owned())
    }
}

const ENV: &[(&str, &str)] = &[
    ("HOME", "/home/ada"),
    ("MY_TOKEN", "s3cret"),
    ("XDG_CACHE_HOME", "/xdg/cache"),
];

/// A fresh directory under the system temp dir, with a `data` subdirectory.
fn scratch() -> TempDir {
    let dir = TempDir::new("wasmgate-config-test-");
    std::fs::create_dir_all(dir.join("data")).unwrap();
    dir
}

fn toml(text: &str, base: &Path) -> Result<Config, ConfigError> {
    from_toml_str(text, Path::new("gateway.toml"), base, &env_of(ENV))
}

fn json(text: &str, base: &Path) -> Result<Config, ConfigError> {
    from_json_str(
        text,
        Path::new("claude_desktop_config.json"),
        base,
        &env_of(ENV),
    )
}

fn only_error(result: Result<Config, ConfigError>) -> Diagnostic {
    match result {
        Ok(_) => panic!("expected an error"),
        Err(e) => {
            let ds = e.diagnostics();
            assert_eq!(ds.len(), 1, "{e}");
            ds[0].clone()
        }
    }
}

const FULL: &str = r#"
[gateway]
name = "wasmgate"
separator = "__"
timeout = "60s"
startup_timeout = "10s"
init_timeout = "90s"
page_size = 100
events = "wasmgate-events.jsonl"
event_buffer = 1000
log_level = "info"
max_restarts = 5
shutdown_grace = "2s"

[servers.time]
command = "uvx"
args = ["mcp-server-time"]
env = { TZ = "UTC", TOKEN = "${MY_TOKEN}" }
cwd = "."
namespace = "t"
timeout = "30s"
tool_timeouts = { slow_tool = "5s" }
tools = ["get_*"]
disabled_tools = ["*_danger"]
disabled = false

[plugins]
dir = "plugins"
watch = true
cache_dir = "~/.cache/wasmgate"
bundled = false
memory = "64MiB"
timeout = "10s"
fuel = 1000000

[plugins.fetch]
path = "plugins/fetch.wasm"
namespace = "web"
memory = "32MiB"
timeout = "2s"
fuel = 5000000
allow_hosts = ["api.example.test", "*.example.org", "localhost:8080"]
allow_dirs = [{ host = "./data", guest = "/data", mode = "ro" }]
allow_env = ["HOME"]
tools = ["get"]
disabled_tools = []
disabled = false
[plugins.fetch.config]
user_agent = "wasmgate"
retries = 3
"#;

#[test]
fn full_toml_example_parses_to_the_expected_model() {
    let base = scratch();
    let config = toml(FULL, &base).unwrap();
    let g = &config.gateway;
    assert_eq!((g.name.as_str(), g.separator.as_str()), ("wasmgate", "__"));
    assert_eq!(
        (g.timeout, g.startup_timeout, g.init_timeout),
        (
            Duration::from_secs(60),
            Duration::from_secs(10),
            Duration::from_secs(90)
        )
    );
    assert_eq!(
        (g.page_size, g.event_buffer, g.max_restarts),
        (100, 1000, 5)
    );
    assert_eq!(
        g.events_file.as_deref(),
        Some(base.join("wasmgate-events.jsonl").as_path())
    );
    assert_eq!(
        (g.log_level.as_str(), g.shutdown_grace),
        ("info", Duration::from_secs(2))
    );

    let time = &config.servers["time"];
    assert_eq!(time.name, "time");
    assert_eq!(
        (time.stdio().command.as_str(), time.stdio().args.as_slice()),
        ("uvx", &["mcp-server-time".to_owned()][..])
    );
    assert_eq!(time.stdio().env["TZ"], "UTC");
    assert_eq!(time.stdio().env["TOKEN"], "s3cret");
    assert_eq!(time.stdio().cwd.as_deref(), Some(&*base));
    assert_eq!(
        (time.namespace.as_str(), time.timeout),
        ("t", Duration::from_secs(30))
    );
    assert_eq!(time.tool_timeouts["slow_tool"], Duration::from_secs(5));
    assert!(time.tool_filter.allows("get_time") && !time.tool_filter.allows("convert_time"));
    assert!(!time.tool_filter.allows("get_danger"));
    assert!(!time.disabled);

    let p = &config.plugins;
    assert_eq!(p.dir.as_deref(), Some(base.join("plugins").as_path()));
    assert!(p.watch && !p.bundled);
    assert_eq!(
        p.cache_dir.as_deref(),
        Some(Path::new("/home/ada/.cache/wasmgate"))
    );
    assert_eq!(
        p.limits,
        PluginLimits {
            memory: 64 << 20,
            timeout: Duration::from_secs(10),
            fuel: Some(1_000_000)
        }
    );
    let fetch = &p.plugins["fetch"];
    assert_eq!(
        fetch.path.as_deref(),
        Some(base.join("plugins/fetch.wasm").as_path())
    );
    assert_eq!(fetch.namespace, "web");
    assert_eq!(
        fetch.limits,
        PluginLimits {
            memory: 32 << 20,
            timeout: Duration::from_secs(2),
            fuel: Some(5_000_000)
        }
    );
    assert_eq!(
        fetch.allow_hosts,
        ["api.example.test", "*.example.org", "localhost:8080"]
    );
    assert_eq!(
        fetch.allow_dirs,
        [DirGrant {
            host: base.join("data"),
            guest: "/data".into(),
            read_only: true,
            expose_gateway_files: false
        }]
    );
    assert_eq!(fetch.allow_env, ["HOME"]);
    assert_eq!(fetch.config["user_agent"], "wasmgate");
    assert_eq!(fetch.config["retries"], "3");
    assert_eq!(fetch.tool_filter.allow_patterns, ["get"]);
    assert!(fetch.tool_filter.deny.is_none());
    assert!(fetch.tool_filter.allows("get") && !fetch.tool_filter.allows("post"));
    assert_eq!(
        config.source.as_deref(),
        Some(base.join("gateway.toml").as_path())
    );
}

#[test]
fn an_empty_file_gives_every_default() {
    let base = scratch();
    let config = toml("", &base).unwrap();
    let g = &config.gateway;
    assert_eq!(
        (g.name.as_str(), g.separator.as_str(), g.log_level.as_str()),
        ("wasmgate", "__", "info")
    );
    assert_eq!(
        (
            g.timeout,
            g.startup_timeout,
            g.init_timeout,
            g.shutdown_grace
        ),
        (
            Duration::from_secs(60),
            Duration::from_secs(10),
            Duration::from_secs(60),
            Duration::from_secs(2)
        )
    );
    assert_eq!(
        (
            g.page_size,
            g.event_buffer,
            g.max_restarts,
            g.events_file.clone()
        ),
        (100, 1000, 5, None)
    );
    assert!(
        config.servers.is_empty()
            && config.plugins.plugins.is_empty()
            && config.warnings.is_empty()
    );
    let p = &config.plugins;
    assert!(p.watch && !p.bundled && p.dir.is_none());
    assert_eq!(
        p.cache_dir.as_deref(),
        Some(Path::new("/xdg/cache/wasmgate"))
    );
    assert_eq!(p.limits, PluginLimits::default());

    // A server with only a command: namespace from its key, timeout from the gateway.
    let config = toml(
        "[gateway]\ntimeout = \"45s\"\n[servers.every-thing]\ncommand = \"npx\"",
        &base,
    )
    .unwrap();
    let s = &config.servers["every-thing"];
    assert_eq!(
        (s.namespace.as_str(), s.timeout),
        ("every-thing", Duration::from_secs(45))
    );
    assert!(s.tool_filter.allow.is_none() && s.tool_filter.allows("anything"));
}

#[test]
fn cache_dir_falls_back_from_xdg_to_home_to_none() {
    let base = scratch();
    let home_only = from_toml_str(
        "",
        Path::new("g.toml"),
        &base,
        &env_of(&[("HOME", "/home/bo")]),
    )
    .unwrap();
    assert_eq!(
        home_only.plugins.cache_dir.as_deref(),
        Some(Path::new("/home/bo/.cache/wasmgate"))
    );
    let neither = from_toml_str("", Path::new("g.toml"), &base, &env_of(&[])).unwrap();
    assert_eq!(neither.plugins.cache_dir, None);
}

#[test]
fn embedded_default_serves_bundled_plugins_and_nothing_else() {
    let config = load::embedded_default_with_env(&env_of(&[("HOME", "/home/ada")]));
    assert!(config.servers.is_empty() && config.source.is_none() && config.warnings.is_empty());
    assert!(config.plugins.bundled && !config.plugins.watch && config.plugins.dir.is_none());
    assert_eq!(
        config.plugins.cache_dir.as_deref(),
        Some(Path::new("/home/ada/.cache/wasmgate"))
    );
    assert_eq!(config.gateway.separator, "__");
    assert_eq!(config.gateway.timeout, Duration::from_secs(60));
    assert!(embedded_default().plugins.bundled);
}

const CLAUDE: &str = r#"{
  "globalShortcut": "Ctrl+Space",
  "preferences": { "menuBarEnabled": false },
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "${HOME}/Desktop"],
      "env": { "TOKEN": "${MY_TOKEN}" }
    },
    "git": {
      "type": "stdio",
      "command": "uvx",
      "args": ["mcp-server-git"],
      "disabled": true,
      "autoApprove": ["git_status"],
      "alwaysAllow": [],
      "timeout": 60,
      "description": "git tools",
      "disabledTools": ["git_push"],
      "namespace": "g",
      "tools": ["git_*"]
    },
    "docs": { "url": "https://docs.example.test/mcp", "headers": { "Authorization": "Bearer ${MY_TOKEN}" } },
    "events": { "type": "sse", "url": "https://events.example.test/sse" },
    "hosted": { "type": "http", "url": "https://hosted.example.test/mcp" },
    "socket": { "type": "ws", "url": "wss://socket.example.test/" },
    "time": { "command": "uvx", "args": ["mcp-server-time"], "timeout": "5s", "tool_timeouts": { "convert": "1s" } }
  }
}"#;

#[test]
fn claude_desktop_json_with_client_keys_and_remote_entries() {
    let base = scratch();
    let config = json(CLAUDE, &base).unwrap();
    assert_eq!(
        config.servers.keys().collect::<Vec<_>>(),
        ["docs", "events", "filesystem", "git", "hosted", "time"]
    );
    let remote = |name: &str| match &config.servers[name].transport {
        ServerTransport::Http(endpoint) => endpoint.clone(),
        other => panic!("{name} is not remote: {other:?}"),
    };
    let docs = remote("docs");
    assert_eq!(docs.url, "https://docs.example.test/mcp");
    assert_eq!(docs.headers["Authorization"], "Bearer s3cret");
    assert_eq!(docs.transport, HttpTransport::Auto);
    assert_eq!(remote("events").transport, HttpTransport::Sse);
    assert_eq!(remote("hosted").transport, HttpTransport::StreamableHttp);
    let fs = &config.servers["filesystem"];
    assert_eq!(fs.stdio().args[2], "/home/ada/Desktop");
    assert_eq!(fs.stdio().env["TOKEN"], "s3cret");
    assert_eq!(fs.namespace, "filesystem");
    let git = &config.servers["git"];
    assert!(git.disabled);
    assert_eq!(git.namespace, "g");
    assert_eq!(
        git.timeout,
        Duration::from_secs(60),
        "a numeric timeout is another client's and is ignored"
    );
    assert!(git.tool_filter.allows("git_status") && !git.tool_filter.allows("git_push"));
    let time = &config.servers["time"];
    assert_eq!(
        (time.timeout, time.tool_timeouts["convert"]),
        (Duration::from_secs(5), Duration::from_secs(1))
    );
    assert!(
        config
            .warnings
            .iter()
            .any(|w| w.starts_with("server `socket` is remote over WebSocket")),
        "{:?}",
        config.warnings
    );
}

#[test]
fn json_can_set_gateway_and_plugins() {
    let base = scratch();
    let text = r#"{
      "wasmgate": { "separator": "-", "timeout": "15s", "page_size": 20 },
      "plugins": { "dir": "wasm", "watch": false, "memory": "16MiB", "echo": { "allow_env": ["HOME"] } },
      "mcpServers": {}
    }"#;
    let config = json(text, &base).unwrap();
    assert_eq!(
        (config.gateway.separator.as_str(), config.gateway.page_size),
        ("-", 20)
    );
    assert_eq!(config.gateway.timeout, Duration::from_secs(15));
    assert_eq!(
        config.plugins.dir.as_deref(),
        Some(base.join("wasm").as_path())
    );
    assert!(!config.plugins.watch);
    assert_eq!(config.plugins.plugins["echo"].limits.memory, 16 << 20);
    assert_eq!(config.plugins.plugins["echo"].path, None);
}

#[test]
fn unknown_key_in_an_mcp_servers_entry_is_an_error_with_its_line() {
    let text = "{\n  \"mcpServers\": {\n    \"time\": {\n      \"command\": \"uvx\",\n      \"comand\": \"x\"\n    }\n  }\n}";
    let d = only_error(json(text, &scratch()));
    assert_eq!((d.line, d.column.is_some()), (Some(5), true));
    assert!(
        d.message.contains("unknown field `comand`"),
        "{}",
        d.message
    );
    assert!(d.fix.as_deref().unwrap().contains("spelling"));
    assert!(
        d.to_string().starts_with("claude_desktop_config.json:5:"),
        "{d}"
    );
}

#[test]
fn json_syntax_errors_name_line_and_column() {
    let d = only_error(json(
        "{\n  \"mcpServers\": {\n    \"a\": { \"command\": \"x\", }\n  }\n}",
        &scratch(),
    ));
    assert_eq!(d.line, Some(3));
    assert!(d.fix.as_deref().unwrap().contains("trailing comma"));
    // A comment, as editors write them in JSON they call JSONC: said so.
    for comment in ["// the servers", "/* the servers */"] {
        let d = only_error(json(
            &format!("{{\n  {comment}\n  \"mcpServers\": {{}}\n}}"),
            &scratch(),
        ));
        assert_eq!(d.line, Some(2), "{d}");
        assert!(d.fix.as_deref().unwrap().contains("no comments"), "{d}");
    }
}

/// The parser's value errors have a position but no key: the key is read off the text.
#[test]
fn value_errors_from_the_parser_name_their_key() {
    for (text, expected) in [
        (
            "[gateway]\npage_size = 0\n",
            "gateway.toml:2:13: page_size: 0 is not allowed",
        ),
        (
            "[gateway]\nmax_restarts = -1\n",
            "gateway.toml:2:16: max_restarts: invalid value: integer `-1`",
        ),
    ] {
        let d = only_error(toml(text, &scratch()));
        assert!(d.to_string().starts_with(expected), "{d}");
    }
    for text in [
        r#"{"mcpServers": {"x": {"command": "true", "timeout": 1.5}}}"#,
        "{\n  \"mcpServers\": {\n    \"x\": {\"command\": \"true\", \"timeout\": 1.5}\n  }\n}",
    ] {
        let d = only_error(json(text, &scratch()));
        assert_eq!(d.key.as_deref(), Some("timeout"), "{d}");
        assert!(d.message.contains("or a whole number"), "{d}");
    }
}

#[test]
fn unknown_toml_key_names_line_column_and_fix() {
    let d = only_error(toml(
        "[gateway]\nname = \"gw\"\ntimout = \"5s\"\n",
        &scratch(),
    ));
    assert_eq!((d.line, d.column), (Some(3), Some(1)));
    assert!(
        d.message.contains("unknown field `timout`"),
        "{}",
        d.message
    );
    assert!(
        d.to_string()
            .starts_with("gateway.toml:3:1: unknown field `timout`"),
        "{d}"
    );
    assert!(
        d.to_string()
            .ends_with("docs/configuration.md lists every key)"),
        "{d}"
    );
}

#[test]
fn bad_durations_and_sizes_are_reported_at_their_value() {
    let base = scratch();
    let d = only_error(toml("[gateway]\n\ntimeout = \"30 parsecs\"\n", &base));
    assert_eq!((d.line, d.column), (Some(3), Some(11)));
    assert!(
        d.message.contains("invalid duration \"30 parsecs\""),
        "{}",
        d.message
    );
    assert!(d.message.contains("\"500ms\""));

    let d = only_error(toml("[servers.a]\ncommand = \"x\"\ntimeout = 30\n", &base));
    assert_eq!(d.line, Some(3));
    assert!(d.message.contains("write \"30s\""), "{}", d.message);

    let d = only_error(toml(
        "[servers.a]\ncommand = \"x\"\ntimeout = \"0s\"\n",
        &base,
    ));
    assert!(d.message.contains("greater than zero"), "{}", d.message);

    let d = only_error(toml("[plugins]\ndir = \"p\"\nmemory = \"64MB2\"\n", &base));
    assert_eq!((d.line, d.column), (Some(3), Some(10)));
    assert!(
        d.message.contains("invalid size \"64MB2\""),
        "{}",
        d.message
    );

    let d = only_error(toml(
        "[plugins.x]\npath = \"x.wasm\"\nmemory = \"12 parsecs\"\n",
        &base,
    ));
    assert_eq!(d.line, Some(3));
    assert!(
        d.message.contains("unknown unit \"parsecs\""),
        "{}",
        d.message
    );

    let d = only_error(toml("[gateway]\npage_size = 0\n", &base));
    assert_eq!(d.line, Some(2));
    assert!(d.message.contains("greater than zero"), "{}", d.message);
}

#[test]
fn sizes_parse_with_binary_and_decimal_units() {
    use super::raw::parse_size;
    assert_eq!(parse_size("64MiB"), Ok(64 << 20));
    assert_eq!(parse_size("512 KiB"), Ok(512 << 10));
    assert_eq!(parse_size("1GiB"), Ok(1 << 30));
    assert_eq!(parse_size("1000000"), Ok(1_000_000));
    assert_eq!(parse_size("10mb"), Ok(10_000_000));
    assert!(
        parse_size("MiB").is_err()
            && parse_size("1.5GiB").is_err()
            && parse_size("99999999999GiB").is_err()
    );
}

#[test]
fn plugins_table_mixes_settings_and_entries() {
    let base = scratch();
    let text = "[plugins]\ndir = \"p\"\nfuel = 7\n[plugins.timeout]\nnamespace = \"tmo\"\n[plugins.echo]\n";
    let config = toml(text, &base).unwrap();
    assert_eq!(config.plugins.limits.fuel, Some(7));
    assert_eq!(
        config.plugins.plugins.keys().collect::<Vec<_>>(),
        ["echo", "timeout"]
    );
    assert_eq!(config.plugins.plugins["timeout"].namespace, "tmo");
    assert_eq!(
        config.plugins.plugins["echo"].limits.fuel,
        Some(7),
        "entries inherit the defaults"
    );

    let d = only_error(toml("[plugins]\ndir = \"p\"\nwach = true\n", &base));
    assert_eq!(d.line, Some(3));
    assert!(
        d.message.contains("unknown key `plugins.wach`"),
        "{}",
        d.message
    );
    assert!(d.message.contains("[plugins.wach] table"));

    let d = only_error(toml("[plugins]\nwatch = \"yes\"\n", &base));
    assert!(
        d.message.contains("`plugins.watch` must be true or false"),
        "{}",
        d.message
    );

    let d = only_error(toml(
        "[plugins.echo]\npath = \"e.wasm\"\nallow_host = []\n",
        &base,
    ));
    assert_eq!(d.line, Some(3));
    assert!(
        d.message.contains("unknown field `allow_host`"),
        "{}",
        d.message
    );

    let d = only_error(toml(
        "[plugins.echo]\npath = \"e.wasm\"\nallow_dirs = [{ host = \".\", guest = \"/\", mode = \"rx\" }]\n",
        &base,
    ));
    assert!(d.message.contains("unknown variant `rx`"), "{}", d.message);
}

#[test]
fn variables_expand_in_command_args_env_and_cwd() {
    let base = scratch();
    let text = r#"
[servers.s]
command = "${HOME}/bin/server"
args = ["--token", "${MY_TOKEN}", "--level", "${LEVEL:-warn}", "cost: $$5", "$${LITERAL}"]
env = { A = "${env:MY_TOKEN}", B = "${UNSET_ONE:-dflt}" }
cwd = "${HOME}/work"
"#;
    let s = toml(text, &base).unwrap().servers.remove("s").unwrap();
    assert_eq!(s.stdio().command, "/home/ada/bin/server");
    assert_eq!(
        s.stdio().args,
        [
            "--token",
            "s3cret",
            "--level",
            "warn",
            "cost: $$5",
            "${LITERAL}"
        ]
    );
    assert_eq!(
        (s.stdio().env["A"].as_str(), s.stdio().env["B"].as_str()),
        ("s3cret", "dflt")
    );
    assert_eq!(s.stdio().cwd.as_deref(), Some(Path::new("/home/ada/work")));
}

#[test]
fn an_unset_variable_names_the_variable_the_server_and_the_line() {
    let base = scratch();
    let text =
        "[servers.time]\ncommand = \"uvx\"\nenv = { TZ = \"UTC\", TOKEN = \"${NOT_SET}\" }\n";
    let d = only_error(toml(text, &base));
    assert_eq!(
        d.to_string(),
        "gateway.toml:3:30: servers.time.env.TOKEN: environment variable NOT_SET is not set \
         (set it, or write ${NOT_SET:-default})"
    );
    // In args the position is the argument itself.
    let text =
        "[servers.time]\ncommand = \"uvx\"\nargs = [\n  \"a\",\n  \"--key=${NOT_SET}\",\n]\n";
    let d = only_error(toml(text, &base));
    assert_eq!(
        (d.line, d.column, d.key.as_deref()),
        (Some(5), Some(4), Some("servers.time.args"))
    );
    // A disabled server only warns.
    let text =
        "[servers.time]\ncommand = \"uvx\"\ndisabled = true\nenv = { TOKEN = \"${NOT_SET}\" }\n";
    let config = toml(text, &base).unwrap();
    assert!(config.servers["time"].disabled);
    assert!(
        config.warnings[0].contains("NOT_SET is not set"),
        "{:?}",
        config.warnings
    );
    // References other clients use are errors with a fix.
    let d = only_error(json(
        r#"{"mcpServers": {"a": {"command": "x", "env": {"K": "${input:key}"}}}}"#,
        &base,
    ));
    assert!(d.message.contains("`${input:key}`"), "{}", d.message);
    assert_eq!(d.key.as_deref(), Some("mcpServers.a.env.K"));
}

#[test]
fn relative_paths_resolve_against_the_config_directory() {
    let base = scratch();
    std::fs::create_dir_all(base.join("plugins/shared")).unwrap();
    let text = r#"
[gateway]
events = "logs/events.jsonl"
[servers.s]
command = "x"
cwd = "./data"
[plugins]
dir = "plugins"
cache_dir = "cache"
[plugins.p]
path = "../elsewhere/p.wasm"
allow_dirs = [{ host = "plugins/./shared", guest = "/shared", mode = "rw" }, { host = "~", guest = "/home" }]
"#;
    let home = base.to_str().unwrap().to_owned().leak();
    let env = move |name: &str| (name == "HOME").then(|| home.to_owned());
    let config = from_toml_str(text, Path::new("gateway.toml"), &base, &env).unwrap();
    assert_eq!(
        config.gateway.events_file,
        Some(base.join("logs/events.jsonl"))
    );
    assert_eq!(config.servers["s"].stdio().cwd, Some(base.join("data")));
    assert_eq!(config.plugins.dir, Some(base.join("plugins")));
    assert_eq!(config.plugins.cache_dir, Some(base.join("cache")));
    assert_eq!(
        config.plugins.plugins["p"].path,
        Some(base.join("../elsewhere/p.wasm"))
    );
    let grants = &config.plugins.plugins["p"].allow_dirs;
    assert_eq!(
        grants[0],
        DirGrant {
            host: base.join("plugins/shared"),
            guest: "/shared".into(),
            read_only: false,
            expose_gateway_files: false
        }
    );
    assert_eq!(
        grants[1],
        DirGrant {
            host: base.to_path_buf(),
            guest: "/home".into(),
            read_only: true,
            expose_gateway_files: false
        }
    );
}

#[test]
fn load_picks_the_format_and_resolves_against_the_files_directory() {
    let base = scratch();
    std::fs::write(
        base.join("gw.toml"),
        "[servers.a]\ncommand = \"x\"\ncwd = \"data\"\n",
    )
    .unwrap();
    std::fs::write(
        base.join("mcp.json"),
        r#"{"mcpServers": {"b": {"command": "y"}}}"#,
    )
    .unwrap();
    std::fs::write(
        base.join("config"),
        "  \n{\"mcpServers\": {\"c\": {\"command\": \"z\"}}}",
    )
    .unwrap();
    std::fs::write(base.join("gateway.conf"), "[servers.d]\ncommand = \"w\"\n").unwrap();
    let env = env_of(ENV);
    let a = load_with_env(&base.join("gw.toml"), &env).unwrap();
    assert_eq!(a.servers["a"].stdio().cwd, Some(base.join("data")));
    assert_eq!(a.source, Some(base.join("gw.toml")));
    assert!(
        load_with_env(&base.join("mcp.json"), &env)
            .unwrap()
            .servers
            .contains_key("b")
    );
    assert!(
        load_with_env(&base.join("config"), &env)
            .unwrap()
            .servers
            .contains_key("c")
    );
    assert!(
        load_with_env(&base.join("gateway.conf"), &env)
            .unwrap()
            .servers
            .contains_key("d")
    );
    let missing = load_with_env(&base.join("nope.toml"), &env).unwrap_err();
    assert!(matches!(missing, ConfigError::Read { .. }));
    assert!(
        missing
            .to_string()
            .contains("nope.toml: cannot read the configuration"),
        "{missing}"
    );
}

#[test]
fn duplicate_namespaces_name_both_owners() {
    let base = scratch();
    let text = "[servers.time]\ncommand = \"x\"\nnamespace = \"t\"\n\n[plugins.clock]\npath = \"c.wasm\"\nnamespace = \"t\"\n";
    let d = only_error(toml(text, &base));
    assert_eq!(d.line, Some(7));
    assert!(
        d.message
            .contains("used by both server `time` and plugin `clock`"),
        "{}",
        d.message
    );
    assert!(d.fix.as_deref().unwrap().contains("another namespace"));
    // A server and a plugin with the same key collide through their default namespaces.
    let text = "[servers.fetch]\ncommand = \"x\"\n[plugins.fetch]\npath = \"f.wasm\"\n";
    assert!(
        only_error(toml(text, &base))
            .message
            .contains("namespace \"fetch\"")
    );
    // Empty namespaces, and disabled entries, do not collide.
    let text = "[servers.a]\ncommand = \"x\"\nnamespace = \"\"\n[servers.b]\ncommand = \"y\"\nnamespace = \"\"\n\
                [servers.c]\ncommand = \"z\"\nnamespace = \"a\"\ndisabled = true\n";
    assert!(toml(text, &base).is_ok());
}

#[test]
fn a_bad_glob_is_named_with_its_line() {
    let text = "[servers.s]\ncommand = \"x\"\ntools = [\"get_*\",\n  \"[unclosed\"]\n";
    let d = only_error(toml(text, &scratch()));
    assert_eq!(
        (d.line, d.key.as_deref()),
        (Some(4), Some("servers.s.tools"))
    );
    assert!(
        d.message.contains("invalid glob \"[unclosed\""),
        "{}",
        d.message
    );
    assert!(d.fix.as_deref().unwrap().contains("[abc]"));
}

#[test]
fn tool_filter_allows_and_denies() {
    let base = scratch();
    let text = "[servers.s]\ncommand = \"x\"\ntools = [\"read_*\", \"list\"]\ndisabled_tools = [\"*_secret\", \"list\"]\n";
    let f = toml(text, &base)
        .unwrap()
        .servers
        .remove("s")
        .unwrap()
        .tool_filter;
    assert!(f.allows("read_file"));
    assert!(!f.allows("write_file"), "not in the allow list");
    assert!(!f.allows("read_secret"), "deny wins");
    assert!(!f.allows("list"));
    // Patterns that match none of a server's tools are named, allow ones first.
    assert_eq!(f.unmatched(&["read_file", "list"]), ["*_secret"]);
    assert_eq!(
        f.unmatched(&["write"]),
        ["read_*", "list", "*_secret", "list"]
    );
    assert!(f.unmatched(&["read_secret", "list"]).is_empty());
    let f = toml(
        "[servers.s]\ncommand = \"x\"\ntools = []\ndisabled_tools = [\"rm\"]\n",
        &base,
    )
    .unwrap()
    .servers
    .remove("s")
    .unwrap()
    .tool_filter;
    assert!(
        f.allows("ls") && !f.allows("rm"),
        "an empty allow list filters nothing"
    );
    assert!(ToolFilter::default().allows("anything"));
}

#[test]
fn a_server_without_command_is_an_error() {
    let d = only_error(toml("[servers.a]\nargs = [\"x\"]\n", &scratch()));
    assert_eq!(
        (d.line, d.key.as_deref()),
        (Some(1), Some("servers.a.command"))
    );
    assert!(d.message.contains("server `a` has no command"));
    assert!(d.fix.as_deref().unwrap().contains("command = "));
}

/// A plugin path that is missing is waited for; one that is a folder is said to be no file.
#[test]
fn a_plugin_path_that_is_no_file_is_named_so() {
    let base = scratch();
    let config = toml(
        "[plugins]\ndir = \"data\"\n[plugins.later]\npath = \"later.wasm\"\n[plugins.folder]\npath = \"data\"\n[plugins.data]\n",
        &base,
    )
    .unwrap();
    let data = base.join("data");
    assert_eq!(
        config.warnings,
        [
            format!(
                "plugin `data`: {} does not exist (yet); it will be loaded when it appears (or is the table's name misspelt?)",
                data.join("data.wasm").display()
            ),
            format!(
                "plugin `folder`: {} is not a regular file; a plugin is a .wasm file",
                data.display()
            ),
            format!(
                "plugin `later`: {} does not exist (yet); it will be loaded when it appears",
                base.join("later.wasm").display()
            ),
        ]
    );
}

#[test]
fn separator_rules() {
    let base = scratch();
    let config = toml("[gateway]\nseparator = \":\"\n", &base).unwrap();
    assert_eq!(config.gateway.separator, ":");
    assert!(
        config.warnings[0].contains("some clients reject"),
        "{:?}",
        config.warnings
    );
    assert!(
        toml("[gateway]\nseparator = \"-\"\n", &base)
            .unwrap()
            .warnings
            .is_empty()
    );
    let d = only_error(toml("[gateway]\nseparator = \"/\"\n", &base));
    assert_eq!(d.line, Some(2));
    assert!(d.message.contains("contains `/`"));
    assert!(
        only_error(toml("[gateway]\nseparator = \"\"\n", &base))
            .message
            .contains("empty")
    );
}

#[test]
fn namespaces_must_be_tool_name_safe() {
    let base = scratch();
    let d = only_error(toml(
        "[servers.a]\ncommand = \"x\"\nnamespace = \"my.ns\"\n",
        &base,
    ));
    assert_eq!(
        (d.line, d.key.as_deref()),
        (Some(3), Some("servers.a.namespace"))
    );
    // A key that is not a valid namespace gets a safe one, with a warning.
    let config = json(
        r#"{"mcpServers": {"github.com tools": {"command": "x"}}}"#,
        &base,
    )
    .unwrap();
    assert_eq!(
        config.servers["github.com tools"].namespace,
        "github_com_tools"
    );
    assert!(config.warnings[0].contains("\"github_com_tools\""));
}

#[test]
fn plugin_grants_are_checked() {
    let base = scratch();
    let d = only_error(toml(
        "[plugins.p]\npath = \"p.wasm\"\nallow_dirs = [\n  { host = \"./missing\", guest = \"/m\" },\n]\n",
        &base,
    ));
    assert_eq!(
        (d.line, d.key.as_deref()),
        (Some(4), Some("plugins.p.allow_dirs"))
    );
    assert!(d.message.contains("missing"), "{}", d.message);
    assert!(d.fix.as_deref().unwrap().contains("create the directory"));

    let d = only_error(toml(
        "[plugins.p]\npath = \"p.wasm\"\nallow_dirs = [{ host = \"data\", guest = \"data\" }]\n",
        &base,
    ));
    assert!(d.message.contains("must be absolute"), "{}", d.message);

    let d = only_error(toml(
        "[plugins.p]\npath = \"p.wasm\"\nallow_hosts = [\"https://api.test/v1\"]\n",
        &base,
    ));
    assert!(d.message.contains("leave out the scheme"), "{}", d.message);

    let d = only_error(toml(
        "[plugins.p]\npath = \"p.wasm\"\nallow_env = [\"MY-VAR\"]\n",
        &base,
    ));
    assert!(
        d.message
            .contains("\"MY-VAR\" is not an environment variable name"),
        "{}",
        d.message
    );

    let d = only_error(toml("[plugins.p]\nnamespace = \"p\"\n", &base));
    assert_eq!(d.line, Some(1));
    assert!(
        d.message.contains("plugin `p` has no path"),
        "{}",
        d.message
    );
    // With a dir, the path may be left out.
    assert!(toml("[plugins]\ndir = \"plugins\"\n[plugins.p]\n", &base).is_ok());
}

#[test]
fn a_log_level_that_is_no_level_and_an_empty_event_buffer_are_errors() {
    let base = scratch();
    let text = "[gateway]\nlog_level = \"verbose\"\nevent_buffer = 0\n";
    let err = toml(text, &base).unwrap_err().to_string();
    assert!(
        err.contains("invalid log level \"verbose\": `verbose` is not a level"),
        "{err}"
    );
    assert!(
        err.contains("event_buffer = 0 would keep no events"),
        "{err}"
    );
    for good in ["debug", "WARN", "info,wasmgate=debug", "wasmgate=trace"] {
        let text = format!("[gateway]\nlog_level = \"{good}\"\n");
        assert!(toml(&text, &base).is_ok(), "{good}");
    }
}

#[test]
fn every_validation_error_is_reported_in_file_order() {
    let base = scratch();
    let text = "[gateway]\nlog_level = \"info,[[\"\n[servers.a]\ncommand = \"\"\n[servers.b]\ncommand = \"x\"\ndisabled_tools = [\"{a\"]\nenv = { K = \"${NOPE}\" }\n";
    let err = toml(text, &base).unwrap_err();
    let lines: Vec<Option<usize>> = err.diagnostics().iter().map(|d| d.line).collect();
    assert_eq!(lines, [Some(2), Some(4), Some(7), Some(8)], "{err}");
    assert!(
        err.to_string()
            .starts_with("4 problems in the configuration:\n  gateway.toml:2:"),
        "{err}"
    );
}

#[test]
fn remote_servers_take_a_url_headers_and_tokens() {
    let base = scratch();
    let text = "[servers.a]\nurl = \"https://example.test/mcp\"\nbearer_token_env = \"MY_TOKEN\"\ntransport = \"sse\"\n\
                [servers.b]\nurl = \"http://127.0.0.1:1/mcp\"\nbearer_token_file = \"token\"\n";
    let config = toml(text, &base).unwrap();
    let ServerTransport::Http(a) = &config.servers["a"].transport else {
        panic!("a is remote")
    };
    assert_eq!(a.headers["Authorization"], "Bearer s3cret");
    assert_eq!(a.transport, HttpTransport::Sse);
    let ServerTransport::Http(b) = &config.servers["b"].transport else {
        panic!("b is remote")
    };
    assert_eq!(b.bearer_token_file, Some(base.join("token")));
    assert_eq!(b.transport, HttpTransport::Auto);

    for (entry, problem) in [
        (
            "url = \"ftp://example.test/\"",
            "is not an http:// or https:// URL",
        ),
        (
            "url = \"https://example.test/\"\ncommand = \"x\"",
            "has both a command and a url",
        ),
        (
            "url = \"https://example.test/\"\ntransport = \"ws\"",
            "unknown transport",
        ),
        (
            "url = \"https://example.test/\"\nheaders = { \"A B\" = \"v\" }",
            "is not a valid HTTP header",
        ),
    ] {
        let err = toml(&format!("[servers.c]\n{entry}\n"), &base).unwrap_err();
        assert!(err.to_string().contains(problem), "{entry}: {err}");
    }
}

#[test]
fn remote_servers_take_pool_limits_and_json_token_keys() {
    let base = scratch();
    let text = "[servers.a]\nurl = \"https://example.test/mcp\"\nmax_connections = 4\nmax_in_flight = 8\n\
                [servers.b]\nurl = \"https://example.test/mcp\"\n\
                [servers.c]\ncommand = \"x\"\nmax_in_flight = 2\n";
    let config = toml(text, &base).unwrap();
    let limits = |name: &str| match &config.servers[name].transport {
        ServerTransport::Http(h) => (h.max_connections, h.max_in_flight),
        ServerTransport::Stdio(_) => panic!("{name} is remote"),
    };
    assert_eq!(limits("a"), (4, 8));
    assert_eq!(limits("b"), (64, 64));
    assert!(
        config
            .warnings
            .iter()
            .any(|w| w.contains("`max_in_flight` is ignored because the entry has no `url`")),
        "{:?}",
        config.warnings
    );
    for (entry, problem) in [
        ("max_connections = 0", "max_connections"),
        (
            "max_connections = 2000",
            "max_connections = 2000 is more than 1024",
        ),
        (
            "max_in_flight = 5000",
            "max_in_flight = 5000 is more than 4096",
        ),
    ] {
        let text = format!("[servers.d]\nurl = \"https://example.test/\"\n{entry}\n");
        let err = toml(&text, &base).unwrap_err();
        assert!(err.to_string().contains(problem), "{entry}: {err}");
    }

    let config = json(
        r#"{"mcpServers": {"r": {"type": "http", "url": "https://example.test/mcp",
            "bearer_token_env": "MY_TOKEN", "ca_file": "ca.pem", "max_in_flight": 3}}}"#,
        &base,
    )
    .unwrap();
    let ServerTransport::Http(r) = &config.servers["r"].transport else {
        panic!("r is remote")
    };
    assert_eq!(r.headers["Authorization"], "Bearer s3cret");
    assert_eq!(r.ca_file, Some(base.join("ca.pem")));
    assert_eq!((r.max_connections, r.max_in_flight), (64, 3));
}

#[test]
fn self_referencing_servers_are_skipped_with_warnings() {
    let base = scratch();
    let text = "[servers.docs]\nurl = \"https://example.test/mcp\"\nheaders = { Authorization = \"Bearer x\" }\n\
                [servers.me]\ncommand = \"/usr/local/bin/wasmgate\"\nargs = [\"serve\", \"--config\", \"gateway.toml\"]\n\
                [servers.other]\ncommand = \"wasmgate\"\nargs = [\"serve\", \"--config\", \"team.toml\"]\n\
                [servers.flag]\ncommand = \"wasmgate\"\nargs = [\"--config=gateway.toml\"]\n\
                [servers.variable]\ncommand = \"wasmgate\"\nenv = { WASMGATE_CONFIG = \"./gateway.toml\" }\n";
    let config = toml(text, &base).unwrap();
    assert_eq!(config.servers.keys().collect::<Vec<_>>(), ["docs", "other"]);
    for name in ["me", "flag", "variable"] {
        let warning = format!("`{name}` runs wasmgate with this same configuration");
        assert!(
            config.warnings.iter().any(|w| w.contains(&warning)),
            "{name}: {:?}",
            config.warnings
        );
    }
    let config = json(
        r#"{"mcpServers": {"a": {"command": "x", "envFile": ".env"}}}"#,
        &base,
    )
    .unwrap();
    assert!(config.warnings[0].contains("envFile \".env\" is not read"));
    let d = only_error(json(
        r#"{"mcpServers": {"a": {"type": "pipe", "command": "x"}}}"#,
        &base,
    ));
    assert!(d.message.contains("unknown transport \"pipe\""));
}

#[test]
fn summary_shows_settings_without_secrets() {
    let base = scratch();
    let config = toml(FULL, &base).unwrap();
    let summary = config.summary();
    for expected in [
        "tool names {namespace}__{tool}",
        "time: uvx mcp-server-time",
        "namespace t, timeout 30s",
        "tool timeouts: slow_tool 5s",
        "env TOKEN, TZ",
        "only tools: get_*",
        "hidden tools: *_danger",
        "memory 64 MiB, timeout 10s, fuel 1000000",
        "namespace web, memory 32 MiB, timeout 2s, fuel 5000000",
        "may reach hosts: api.example.test, *.example.org, localhost:8080",
        "as /data (ro)",
        "may read env: HOME",
    ] {
        assert!(
            summary.contains(expected),
            "missing {expected:?} in\n{summary}"
        );
    }
    assert!(!summary.contains("s3cret"), "{summary}");
    assert!(embedded_default().summary().contains("built-in default"));
}

#[test]
fn the_shipped_examples_load() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let env = env_of(&[
        ("HOME", "/home/ada"),
        ("GITHUB_TOKEN", "ghp_x"),
        ("BRAVE_API_KEY", "b"),
    ]);
    for file in ["gateway.toml", "claude_desktop_config.json"] {
        let config =
            load_with_env(&examples.join(file), &env).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(!config.servers.is_empty(), "{file}");
    }
}

#[test]
fn a_table_for_a_bundled_plugin_needs_no_path_and_grants_are_one_per_guest_path() {
    let base = scratch();
    let grant = r#"allow_dirs = [{ host = "data", guest = "/data" }]"#;
    // With bundled plugins served, [plugins.files] gives the bundled `files` its grants.
    let config = toml(
        &format!("[plugins]\nbundled = true\n\n[plugins.files]\n{grant}\n"),
        &base,
    );
    if crate::config::validate::is_bundled("files") {
        let config = config.unwrap();
        let files = &config.plugins.plugins["files"];
        assert_eq!(files.path, None);
        assert_eq!(files.allow_dirs[0].guest, "/data");
    }
    // Without them, such a table names nothing.
    let d = only_error(toml(&format!("[plugins.files]\n{grant}\n"), &base));
    assert!(d.message.contains("has no path"), "{}", d.message);

    let d = only_error(toml(
        "[plugins.p]\npath = \"p.wasm\"\nallow_dirs = [{ host = \"data\", guest = \"/d\" }, { host = \".\", guest = \"/d\" }]\n",
        &base,
    ));
    assert!(
        d.message.contains("two grants share the guest path \"/d\""),
        "{}",
        d.message
    );
}

/// `[http]` and `[profiles]`: tokens expanded from the environment and never shown by
/// `check`, profiles compiled; a short token, an undefined profile and a listen address
/// without a port are errors at their key.
#[test]
fn http_and_profiles_parse_and_tokens_stay_secret() {
    let dir = scratch();
    let config = toml(
        r#"
[http]
listen = "127.0.0.1:8787"
tokens = [{ name = "ci", token = "${HOME}-0123456789abcdef", profiles = ["docs"] }]
max_sessions = 5

[profiles.docs]
tools = ["docs__*"]
servers = ["docs"]

[servers.docs]
command = "docs-server"
"#,
        dir.path(),
    )
    .expect("valid");
    assert_eq!(config.http.listen.as_deref(), Some("127.0.0.1:8787"));
    assert_eq!(config.http.max_sessions, 5);
    let token = &config.http.tokens[0];
    assert_eq!(
        (token.name.as_str(), token.profiles.as_slice()),
        ("ci", &["docs".to_string()][..])
    );
    assert!(token.token.ends_with("-0123456789abcdef") && !token.token.contains("${"));
    let docs = &config.profiles["docs"];
    assert!(docs.tools.as_ref().unwrap().is_match("docs__search"));
    assert!(!docs.tools.as_ref().unwrap().is_match("time__now"));
    let summary = config.summary();
    assert!(summary.contains("tokens: ci (profiles docs)"), "{summary}");
    assert!(!summary.contains(&token.token), "{summary}");
    assert!(
        !format!("{config:?}").contains(&token.token),
        "Debug shows no token"
    );

    for (text, says) in [
        (
            "[http]\ntokens = [{ name = \"a\", token = \"short\" }]",
            "shorter than 16",
        ),
        (
            "[http]\ntokens = [{ name = \"a\", token = \"0123456789abcdefg\", profiles = [\"x\"] }]",
            "not defined",
        ),
        ("[http]\nlisten = \"127.0.0.1\"", "no port"),
    ] {
        let error = only_error(toml(text, dir.path()));
        assert!(error.message.contains(says), "{text}: {}", error.message);
    }
}
