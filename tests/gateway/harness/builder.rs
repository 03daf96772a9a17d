//! The one gateway config builder of the tests: `[gateway]` lines, server tables and,
//! for plugin tests, a plugin folder with its components; written into a test's folder
//! and started there.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::helpers::first_list;
use super::{Client, TestDir};

/// A TOML string literal.
pub fn toml_str(text: &str) -> String {
    // JSON string escapes are a subset of TOML basic-string escapes.
    serde_json::to_string(text).expect("a string serializes")
}

/// A gateway config under construction: `[gateway]` lines, server tables and an optional
/// plugin folder. `{dir}` in any line stands for the test's folder.
#[derive(Default, Clone)]
pub struct Config {
    /// The `[gateway]` lines (a test may take one of the defaults out).
    pub gateway: Vec<String>,
    servers: Vec<String>,
    /// Folders to create in the test's folder before the gateway starts.
    folders: Vec<String>,
    /// Whether the config's `log_level` applies (no `WASMGATE_LOG` from the test run).
    config_log_level: bool,
    /// `Some` once the config has `[plugins] dir = "{dir}/plugins"`.
    plugins: Option<Plugins>,
    env: Vec<(String, String)>,
    /// The protocol version the client asks for, when not the latest.
    version: Option<&'static str>,
}

/// The plugin folder and the `[plugins]` section.
#[derive(Default, Clone)]
struct Plugins {
    /// Files to put in the plugin folder: (file name, bytes).
    files: Vec<(String, Vec<u8>)>,
    /// `[plugins]` lines after `dir` and `cache_dir`, then `[plugins.NAME]` tables.
    parts: Vec<String>,
    /// `cache_dir`, when not `{dir}/cache`.
    cache: Option<PathBuf>,
    /// `data_dir`, when not `{dir}/store` (kept out of the user's home).
    data: Option<PathBuf>,
}

pub fn config() -> Config {
    // Short grace: the example server leaves at once when its stdin closes.
    Config::default().gateway(r#"shutdown_grace = "1s""#)
}

/// A config with `[plugins] dir = "{dir}/plugins"` and `cache_dir = "{dir}/cache"`.
pub fn setup() -> Config {
    // The first list waits for the plugins to load, for as long as startup_timeout.
    let mut config = config().gateway(r#"startup_timeout = "120s""#);
    config.plugins = Some(Plugins::default());
    config
}

impl Config {
    pub fn gateway(mut self, line: &str) -> Config {
        self.gateway.push(line.to_string());
        self
    }

    /// Lets the config's `log_level` apply: the gateway gets no `WASMGATE_LOG`.
    pub fn config_log_level(mut self) -> Config {
        self.config_log_level = true;
        self
    }

    /// A folder to create in the test's folder before start.
    pub fn folder(mut self, name: &str) -> Config {
        self.folders.push(name.to_string());
        self
    }

    pub fn env(mut self, key: &str, value: &str) -> Config {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn version(mut self, version: &'static str) -> Config {
        self.version = Some(version);
        self
    }

    /// `[servers.NAME]` running the example server with `args`.
    pub fn example(self, name: &str, args: &[&str]) -> Config {
        self.example_with(name, args, &[])
    }

    /// Like `example`, with more lines for the server's table (`timeout = "1s"`, ...).
    pub fn example_with(self, name: &str, args: &[&str], extra: &[&str]) -> Config {
        let command = super::example_server();
        self.server(name, command.to_str().expect("utf-8 path"), args, extra)
    }

    pub fn server(self, name: &str, command: &str, args: &[&str], extra: &[&str]) -> Config {
        let args: Vec<String> = args.iter().map(|a| toml_str(a)).collect();
        let table = format!(
            "[servers.{name}]\ncommand = {}\nargs = [{}]\n",
            toml_str(command),
            args.join(", ")
        );
        self.table(table, extra)
    }

    /// `[servers.NAME]` for a remote server at `url`, with more lines for its table.
    pub fn remote(self, name: &str, url: &str, extra: &[&str]) -> Config {
        self.table(
            format!("[servers.{name}]\nurl = {}\n", toml_str(url)),
            extra,
        )
    }

    fn table(mut self, mut table: String, extra: &[&str]) -> Config {
        for line in extra {
            table.push_str(line);
            table.push('\n');
        }
        self.servers.push(table);
        self
    }

    /// A component to put in the plugin folder.
    pub fn file(mut self, name: &str, bytes: Vec<u8>) -> Config {
        let plugins = self.plugins.get_or_insert_with(Plugins::default);
        plugins.files.push((name.into(), bytes));
        self
    }

    /// `[plugins]` text: keys (before any table) or whole `[plugins.NAME]` tables.
    pub fn plugins(mut self, text: &str) -> Config {
        let plugins = self.plugins.get_or_insert_with(Plugins::default);
        plugins.parts.push(text.into());
        self
    }

    /// The plugins' `cache_dir`, instead of `{dir}/cache`.
    pub fn cache(mut self, dir: PathBuf) -> Config {
        self.plugins.get_or_insert_with(Plugins::default).cache = Some(dir);
        self
    }

    /// The plugins' `data_dir`, instead of `{dir}/store`.
    pub fn data_dir(mut self, dir: &Path) -> Config {
        self.plugins.get_or_insert_with(Plugins::default).data = Some(dir.to_path_buf());
        self
    }

    pub fn render(&self, dir: &Path) -> String {
        let mut text = String::from("[gateway]\n");
        for line in &self.gateway {
            text.push_str(line);
            text.push('\n');
        }
        if let Some(plugins) = &self.plugins {
            let path = |name: &str| toml_str(dir.join(name).to_str().expect("utf-8 path"));
            let or_default = |given: Option<&Path>, name: &str| {
                given.map_or_else(|| path(name), |d| toml_str(d.to_str().expect("utf-8 path")))
            };
            text.push_str(&format!(
                "\n[plugins]\ndir = {}\ncache_dir = {}\ndata_dir = {}\n",
                path("plugins"),
                or_default(plugins.cache.as_deref(), "cache"),
                or_default(plugins.data.as_deref(), "store"),
            ));
            for part in &plugins.parts {
                text.push('\n');
                text.push_str(part);
                text.push('\n');
            }
        }
        for table in &self.servers {
            text.push('\n');
            text.push_str(table);
        }
        text.replace("{dir}", dir.to_str().expect("utf-8 path"))
    }

    /// Writes the plugin folder, the other folders and `gateway.toml` into `dir`.
    pub fn write(&self, dir: &Path) -> PathBuf {
        for folder in &self.folders {
            std::fs::create_dir_all(dir.join(folder)).expect("create folder");
        }
        if let Some(plugins) = &self.plugins {
            let folder = dir.join("plugins");
            std::fs::create_dir_all(&folder).expect("plugin folder");
            for (name, bytes) in &plugins.files {
                std::fs::write(folder.join(name), bytes).expect("write component");
            }
        }
        let path = dir.join("gateway.toml");
        std::fs::write(&path, self.render(dir)).expect("write config");
        path
    }

    /// `wasmgate serve --config` on the config in `config`, with `dir` for its stderr.
    fn launch(&self, config: &Path, dir: TestDir) -> Client {
        let env: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let args = ["serve", "--config", config.to_str().expect("utf-8 path")];
        Client::start_process(&args, dir, &env, !self.config_log_level)
    }

    /// Starts `wasmgate serve --config` on this config; the client is not initialized yet.
    pub fn start(&self) -> Client {
        let dir = TestDir::new("gw");
        let path = self.write(&dir.path);
        self.launch(&path, dir)
    }

    /// Starts the gateway, completes the MCP handshake with every client capability, and
    /// waits until every server has started (or failed) and its tools are listed. Tests
    /// of start-up itself use `start` and `initialize` instead.
    pub fn start_initialized(&self) -> Client {
        let mut client = self.start();
        client.initialize();
        client.wait_ready();
        client
    }

    /// Starts the gateway on the config in `config`, with its own folder `dir` for
    /// stderr, and initializes it (at `version`, when one is set).
    pub fn spawn(&self, config: &Path, dir: TestDir) -> Client {
        let mut client = self.launch(config, dir);
        match self.version {
            Some(version) => client.initialize_with(version, json!({})),
            None => client.initialize(),
        };
        client
    }

    /// Starts a gateway in a fresh folder, initializes, and waits for the first list
    /// (which waits for the plugins to load); returns the client and the tool names.
    pub fn start_listed(&self) -> (Client, Vec<String>) {
        let dir = TestDir::new("plugins");
        let config = self.write(&dir.path);
        let mut client = self.spawn(&config, dir);
        let names = first_list(&mut client);
        (client, names)
    }
}
