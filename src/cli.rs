//! Command line: `serve` (the default), `check`, `tools`, `call`, `wit`, `plugin …`,
//! `pins …`, `auth …`, `connect URL`. Parses flags, loads the config, runs, and maps the
//! outcome to an exit code.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use serde_json::{Value, json};

use crate::config::{self, Config};
use crate::gateway::Gateway;

#[derive(Parser, Debug)]
#[command(
    name = "wasmgate",
    version,
    about = "An MCP gateway for subprocess MCP servers and hot-reloaded WASM plugins"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Config file: gateway.toml, or a Claude Desktop / Cursor JSON with `mcpServers`
    /// (else from WASMGATE_CONFIG). Without one, wasmgate serves its embedded default
    /// (built-in tools and bundled plugins). Under `plugin call`: KEY=VALUE, a value the
    /// plugin reads with host.config(KEY) (repeatable there).
    // A list, and WASMGATE_CONFIG read by hand: `plugin call --config a=1 --config b=2`
    // takes several, and no variable's file may pass for a value there.
    #[arg(long, short, global = true, value_name = "FILE")]
    config: Vec<PathBuf>,
    /// Log filter for stderr (error, warn, info, debug, trace, or tracing directives).
    #[arg(long, global = true, env = "WASMGATE_LOG")]
    log_level: Option<String>,
    /// A plugin component to serve, named after its file (repeatable). Added to the config's
    /// plugins; without --config, served alone (no bundled plugins). Watched for rebuilds.
    #[arg(long = "plugin", global = true, value_name = "FILE")]
    plugins: Vec<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve MCP over stdio (the default), or over HTTP with --http or `[http] listen`.
    Serve {
        /// Serve Streamable HTTP (/mcp) and legacy SSE (/sse) on this address instead of
        /// stdio, e.g. 127.0.0.1:8787.
        #[arg(long, value_name = "ADDR")]
        http: Option<String>,
        /// Also serve the status page (/ui) and /metrics on this loopback address, e.g.
        /// 127.0.0.1:8788; log in with the token printed on stderr at start.
        #[arg(long, value_name = "ADDR")]
        admin: Option<String>,
        /// The admin listener's login token: this file's contents instead of a printed one.
        #[arg(long, value_name = "FILE", requires = "admin")]
        admin_token_file: Option<PathBuf>,
    },
    /// Validate the config, print a summary, exit 1 on errors.
    Check,
    /// Start the backends, print the aggregated tool catalog, exit.
    Tools {
        /// Print the MCP `tools/list` result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Call one tool and print its result; exit 0 on success, 1 on an error result.
    Call {
        /// The tool's name as `tools` shows it (e.g. `time__get_current_time`).
        tool: String,
        /// Arguments as a JSON object.
        #[arg(default_value = "{}")]
        arguments: String,
    },
    /// Remote servers' OAuth logins: `status`, `login SERVER`, `logout SERVER`.
    #[command(subcommand)]
    Auth(crate::auth_cli::AuthCommand),
    /// Connect to the MCP server at URL (logging in with OAuth when it asks) and list its
    /// tools, or call one with --call.
    Connect(crate::auth_cli::ConnectArgs),
    /// Print the plugin WIT (wasmgate:plugin) that this gateway loads, for a plugin's `wit/`.
    Wit,
    /// A plugin author's commands: `new`, `build`, `inspect`, `call`, and `push`, `pull`,
    /// `sign`, `keygen` for OCI registries.
    #[command(subcommand)]
    Plugin(crate::plugin_cli::PluginCommand),
    /// The `pin` middleware's pinned and pending tool definitions: `list`, `approve NAME`.
    #[command(subcommand)]
    Pins(crate::pins::PinsCommand),
    /// Serve over stdio as `serve` does, and rebuild each plugin SOURCE folder (a
    /// `wasmgate plugin new` project) when it changes: the new version is swapped in.
    /// The config's `[plugins.NAME] source` folders are built and watched too.
    Dev {
        /// Plugin project folders to build, serve and watch.
        #[arg(value_name = "SOURCE")]
        sources: Vec<PathBuf>,
        /// Build Rust plugins with the release profile (small, slow to build) instead of
        /// the fast `dev-plugin` one.
        #[arg(long)]
        release: bool,
    },
}

/// The config file: the one `--config` (twice is a mistake), else `WASMGATE_CONFIG`.
fn config_file(given: Vec<PathBuf>) -> Result<Option<PathBuf>, String> {
    match given.len() {
        0 => Ok(std::env::var_os("WASMGATE_CONFIG")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)),
        1 => Ok(given.into_iter().next()),
        n => Err(format!(
            "--config is given {n} times; a gateway reads one config file"
        )),
    }
}

pub fn run(cli: Cli) -> ExitCode {
    let command = cli.command.unwrap_or(Command::Serve {
        http: None,
        admin: None,
        admin_token_file: None,
    });
    crate::descriptors::raise();
    let command = match command {
        // No config file: each works on the files it is given; `plugin call`'s `--config`
        // values are the plugin's settings.
        Command::Plugin(command) => return crate::plugin_cli::run(command, cli.config),
        command => command,
    };
    let config_path = match config_file(cli.config) {
        Ok(path) => path,
        Err(e) => {
            eprintln!("wasmgate: {e}");
            return ExitCode::from(2);
        }
    };
    let mut plugins = cli.plugins;
    let command = match command {
        // Only the config file's `[[middleware]]` entries: no gateway, no backends.
        Command::Pins(command) => {
            return match crate::pins::run(command, config_path.as_deref()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("wasmgate pins: {e}");
                    ExitCode::from(1)
                }
            };
        }
        command => command,
    };
    if let Command::Wit = command {
        use std::io::Write;
        return match std::io::stdout().write_all(crate::plugin_cli::PLUGIN_WIT_V2.as_bytes()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("wasmgate: cannot write the WIT: {e}");
                ExitCode::from(1)
            }
        };
    }
    let mut dev_sources = Vec::new();
    // The folder of `dev`'s links, removed as this returns.
    let mut _dev_links = None;
    if let Command::Dev { sources, release } = &command {
        match crate::plugin_cli::dev::build_all(config_path.as_deref(), sources, *release) {
            Ok((built, watched, links)) => {
                plugins.extend(built);
                dev_sources = watched;
                _dev_links = links;
            }
            Err(e) => {
                eprintln!("wasmgate dev: {e}");
                return ExitCode::from(1);
            }
        }
    }
    let loaded = match &command {
        Command::Connect(args) => connect_config(args).map_err(|e| e.to_string()),
        _ => config::load_with_plugin_files(config_path.as_deref(), &plugins),
    };
    let config = match loaded {
        Ok(config) => config,
        Err(err) => {
            eprintln!("{err}");
            return ExitCode::from(1);
        }
    };
    let command = match command {
        Command::Auth(command) => return crate::auth_cli::run(command, &config),
        Command::Connect(args) => {
            crate::oauth_client::set_interaction(args.interaction());
            match args.call {
                Some(tool) => Command::Call {
                    tool: format!(
                        "{}{}{tool}",
                        crate::auth_cli::CONNECT_SERVER,
                        config.gateway.separator
                    ),
                    arguments: args.arguments,
                },
                None => Command::Tools { json: false },
            }
        }
        command => command,
    };
    if let Some(level) = &cli.log_level
        && let Err(e) = crate::telemetry::check_filter(level)
    {
        eprintln!(
            "wasmgate: invalid --log-level (or WASMGATE_LOG) \"{level}\": {e}; {}",
            crate::telemetry::FILTER_HELP
        );
        return ExitCode::from(1);
    }
    if let Command::Check = command {
        // A config file's validation checked WASMGATE_TOKEN; the built-in config has none.
        if config_path.is_none()
            && let Err(err) = config::env_token(&config::process_env)
        {
            eprintln!("wasmgate: {err}");
            return ExitCode::from(1);
        }
        if let Some(path) = &config_path
            && let Err(err) = config::check_commands(&config, path, &config::process_env)
        {
            eprintln!("{err}");
            return ExitCode::from(1);
        }
        let refused = crate::plugin::check_plugin_files(&config.plugins);
        for (name, path, problem) in &refused {
            eprintln!("{}: plugin `{name}` {problem}", path.display());
        }
        if !refused.is_empty() {
            return ExitCode::from(1);
        }
        print!("{}", config.summary());
        println!("config OK");
        return ExitCode::SUCCESS;
    }
    if let Err(refused) = crate::nesting::enter(config_path.as_deref()) {
        eprintln!("{refused}");
        return ExitCode::from(1);
    }
    let level = cli
        .log_level
        .clone()
        .unwrap_or_else(|| config.gateway.log_level.clone());
    crate::telemetry::init_logging(&level, cli.log_level.is_none());
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }
    let listen = match &command {
        Command::Serve { http, .. } => http.clone().or_else(|| config.http.listen.clone()),
        _ => None,
    };
    // One client over stdio is served fastest on one thread; over HTTP, `[http] threads`.
    let runtime = match (listen.as_ref(), config.http.threads) {
        (Some(_), Some(1)) | (None, _) => tokio::runtime::Builder::new_current_thread(),
        (Some(_), Some(n)) => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(n);
            builder
        }
        (Some(_), None) => tokio::runtime::Builder::new_multi_thread(),
    }
    .enable_all()
    .build();
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("cannot start the async runtime: {err}");
            return ExitCode::from(1);
        }
    };
    let outcome = runtime.block_on(async move {
        match command {
            Command::Dev { .. } => serve(config, plugins, None, None, dev_sources)
                .await
                .map(|_| ExitCode::SUCCESS),
            Command::Serve {
                admin,
                admin_token_file,
                ..
            } => {
                let admin = admin.map(|listen| (listen, admin_token_file));
                serve(config, plugins, listen, admin, Vec::new())
            }
            .await
            .map(|_| ExitCode::SUCCESS),
            Command::Tools { json } => list_tools(config, json).await,
            Command::Call { tool, arguments } => call(config, &tool, &arguments).await,
            Command::Check
            | Command::Wit
            | Command::Plugin(_)
            | Command::Pins(_)
            | Command::Auth(_)
            | Command::Connect(_) => {
                unreachable!("handled before the runtime starts")
            }
        }
    });
    // Plugin tasks and stuck backends must not keep the process alive.
    runtime.shutdown_timeout(Duration::from_millis(200));
    match outcome {
        Ok(code) => code,
        Err(err) => {
            eprintln!("wasmgate: {err:#}");
            ExitCode::from(1)
        }
    }
}

async fn serve(
    config: Config,
    plugin_files: Vec<PathBuf>,
    listen: Option<String>,
    admin: Option<(String, Option<PathBuf>)>,
    sources: Vec<crate::plugin_cli::dev::DevSource>,
) -> Result<()> {
    let watch_path = config.source.clone();
    // A bad admin token file fails before anything starts.
    let admin_token = match &admin {
        Some((_, file)) => Some(crate::transport::http::admin_token(file.as_deref())?),
        None => None,
    };
    let telemetry = &config.telemetry;
    let endpoint = telemetry.otlp_endpoint.as_deref();
    let service = &telemetry.service_name;
    match crate::telemetry::traces::start(endpoint, telemetry.sample_ratio, service) {
        Ok(true) => tracing::info!("tracing: exporting spans to OTLP"),
        Ok(false) => {}
        Err(why) => anyhow::bail!("[telemetry]: {why}"),
    }
    let gateway = start_gateway(config).await;
    if let (Some((listen, file)), Some(token)) = (admin, admin_token) {
        let bound =
            crate::transport::http::Listener::bind_admin(gateway.clone(), &listen, token.clone())
                .await;
        let listener = match bound {
            Ok(listener) => listener,
            Err(err) => {
                gateway.shutdown().await;
                return Err(err);
            }
        };
        // On stderr, not in the log: the one place the operator reads the token from.
        match file {
            Some(file) => eprintln!(
                "wasmgate: status page at {} (log in with the token in {})",
                listener.ui_url(),
                file.display()
            ),
            None => eprintln!(
                "wasmgate: status page at {} (log in with token {token})",
                listener.ui_url()
            ),
        }
        tokio::spawn(listener.serve_admin());
    }
    let _watcher =
        watch_path.map(|path| crate::reload::watch_config(gateway.clone(), path, plugin_files));
    let _sources = (!sources.is_empty())
        .then(|| crate::plugin_cli::dev::watch(gateway.clone(), sources))
        .flatten();
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("SIGTERM handler")?;
    let signal = async move {
        tokio::select! {
            _ = sigterm.recv() => tracing::info!("SIGTERM: shutting down"),
            _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT: shutting down"),
        }
    };
    match listen {
        Some(listen) => {
            let listener =
                match crate::transport::http::Listener::bind(gateway.clone(), &listen).await {
                    Ok(listener) => listener,
                    Err(err) => {
                        gateway.shutdown().await;
                        return Err(err);
                    }
                };
            // The address bound, on stderr: with port 0 it is how a script learns the port.
            // `bind` has checked what serving needs (TLS files included), so this is true.
            eprintln!("wasmgate: listening on {}", listener.url());
            tokio::spawn(warn_empty_profiles(gateway.clone()));
            tokio::spawn(log_served(gateway.clone(), true));
            listener.serve(signal).await?;
        }
        None => {
            tokio::spawn(log_served(gateway.clone(), false));
            let (input, output) = crate::transport::stdio::std_streams();
            crate::transport::stdio::serve(gateway.clone(), input, output, signal)
                .await
                .context("stdio")?;
        }
    }
    gateway.shutdown().await;
    // Off the runtime's thread: the last export is sent on this runtime.
    let _ = tokio::task::spawn_blocking(crate::telemetry::traces::stop).await;
    tracing::info!("shutdown finished: servers stopped, plugins unloaded");
    Ok(())
}

/// Once the servers and plugins have started: what this gateway serves, in one log line
/// an operator can check a deployment against (names only, never a token).
async fn log_served(gateway: Arc<Gateway>, http: bool) {
    gateway.wait_for_startup().await;
    gateway.wait_for_plugins().await;
    let config = gateway.config.load();
    let names = |names: Vec<String>| {
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    };
    let servers = gateway
        .servers()
        .iter()
        .map(|b| format!("{} ({})", b.name(), b.state().as_str()))
        .collect();
    let plugins = gateway
        .plugin_host()
        .map(|host| host.plugins().into_iter().map(|p| p.name).collect())
        .unwrap_or_default();
    let profiles = config.profiles.keys().cloned().collect();
    if http {
        let tokens = config.http.tokens.iter().map(|t| t.name.clone()).collect();
        tracing::info!(
            servers = %names(servers),
            plugins = %names(plugins),
            profiles = %names(profiles),
            tokens = %names(tokens),
            "serving"
        );
    } else {
        tracing::info!(
            servers = %names(servers),
            plugins = %names(plugins),
            profiles = %names(profiles),
            "serving over stdio"
        );
    }
}

/// Once the backends have started, a profile whose globs match nothing served, or that
/// shows nothing of any server or plugin, is almost surely a mistake (a glob with another
/// namespace, a server list that misses): said in the log.
async fn warn_empty_profiles(gateway: Arc<Gateway>) {
    use crate::catalog::Target;
    use crate::catalog::view::{Kind, item_name};
    gateway.wait_for_startup().await;
    gateway.wait_for_plugins().await;
    let starting = gateway
        .servers()
        .iter()
        .any(|b| b.state() == crate::backend::BackendState::Starting);
    let config = gateway.config.load();
    if starting || config.profiles.is_empty() {
        return;
    }
    let catalog = &*gateway.catalog();
    for profile in config.profiles.values() {
        let w = &profile.written;
        let mut backends_shown = false;
        let mut unmatched = Vec::new();
        for (label, globs, kinds) in [
            ("tools", &w.tools, &[Kind::Tools][..]),
            ("prompts", &w.prompts, &[Kind::Prompts]),
            (
                "resources",
                &w.resources,
                &[Kind::Resources, Kind::Templates],
            ),
        ] {
            let visible: Vec<_> = kinds
                .iter()
                .flat_map(|&kind| {
                    let items = catalog.visible(kind, profile).into_iter();
                    items.map(move |item| catalog.target_of(kind, item_name(kind, item)))
                })
                .collect();
            backends_shown |= visible
                .iter()
                .any(|target| !matches!(target, Some(Target::Builtin)));
            if let Some(globs) = globs
                && !globs.is_empty()
                && visible.is_empty()
            {
                unmatched.push(format!("{label} = [{}]", globs.join(", ")));
            }
        }
        if !unmatched.is_empty() {
            tracing::warn!(
                profile = %profile.name,
                "profile `{}`: {} match nothing it may see of what is served; \
                 names carry their namespace (e.g. time__*)",
                profile.name,
                unmatched.join(" and ")
            );
        } else if !backends_shown {
            tracing::warn!(
                profile = %profile.name,
                "profile `{}` shows nothing of any server or plugin: check its servers and globs",
                profile.name
            );
        }
    }
}

/// Starts the gateway and waits for its backends, for the one-shot commands: servers
/// for as long as `startup_timeout`, plugins until they are compiled and loaded (or
/// refused), since a one-shot command has no later `list_changed` to wait for.
async fn list_tools(config: Config, as_json: bool) -> Result<ExitCode> {
    let gateway = start_gateway(config).await;
    gateway.wait_for_start(true).await;
    let catalog = gateway.catalog();
    if as_json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"tools": catalog.tools}))?
        );
    } else {
        for tool in &catalog.tools {
            let name = tool["name"].as_str().unwrap_or_default();
            let description = tool["description"]
                .as_str()
                .unwrap_or_default()
                .lines()
                .next()
                .unwrap_or_default();
            println!("{name:<40} {description}");
        }
    }
    // What did not start serves nothing above: say so, and fail, so a script notices. A
    // server still starting or restarting after `startup_timeout` counts: it is not serving.
    let status = crate::builtin::status(&gateway);
    let failed: Vec<(&String, &Value)> = status["backends"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, backend)| {
            ["failed", "starting", "restarting"]
                .contains(&backend["status"].as_str().unwrap_or_default())
        })
        .collect();
    for (name, backend) in &failed {
        let reason = backend["last_error"]
            .as_str()
            .unwrap_or("no answer within startup_timeout");
        eprintln!(
            "{}: {name}: {reason}",
            backend["status"].as_str().unwrap_or_default()
        );
    }
    gateway.shutdown().await;
    Ok(if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

async fn call(config: Config, tool: &str, arguments: &str) -> Result<ExitCode> {
    let arguments: Value =
        serde_json::from_str(arguments).context("the arguments are not valid JSON")?;
    let gateway = start_gateway(config).await;
    let builtin = gateway
        .catalog()
        .tool(tool)
        .is_some_and(|route| matches!(route.target, crate::catalog::Target::Builtin));
    if builtin {
        // `gateway_status` and `get_events` report on the backends: after their start, so
        // that `wasmgate call gateway_status` can serve as a health check.
        gateway.wait_for_start(true).await;
    } else {
        gateway.wait_for_tool(tool, true).await;
    }
    let outcome = crate::plugin_cli::call_once(&gateway, tool, arguments).await;
    gateway.shutdown().await;
    Ok(crate::plugin_cli::print_outcome(outcome))
}

/// `wasmgate connect`'s config: the one server, in the working directory.
fn connect_config(args: &crate::auth_cli::ConnectArgs) -> Result<Config, config::ConfigError> {
    let here = std::env::current_dir().unwrap_or_default();
    config::from_toml_str(
        &args.config_text(),
        &here.join("connect.toml"),
        &here,
        &config::process_env,
    )
}

/// Starts the gateway once the config's `oci://` plugin sources are pulled (or found in
/// the cache), telling what failed as events.
async fn start_gateway(config: Config) -> std::sync::Arc<Gateway> {
    let (config, notices) = crate::oci_sources::resolve(config, None).await;
    let gateway = Gateway::start(config);
    crate::oci_sources::report(&gateway.events, notices);
    gateway
}
