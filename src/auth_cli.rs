//! `wasmgate auth status|login|logout` over the remote servers' OAuth tokens, and
//! `wasmgate connect URL`: the gateway's remote client (with its OAuth client) against
//! one server, for trying a server out and for the conformance suite's client scenarios.

use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::config::{Config, ServerTransport};
use crate::oauth_client::store::Store;
use crate::oauth_client::{Interaction, OAuthClient, auth_dir};

#[derive(Subcommand, Debug)]
pub enum AuthCommand {
    /// Each OAuth server of the config: logged in or not, until when, with which scopes.
    Status,
    /// Log in to SERVER through the browser (authorization code with PKCE); the tokens
    /// are kept in the auth folder, readable by you alone.
    Login {
        server: String,
        /// Follow the authorization URL without a browser (an authorization server that
        /// grants without asking a user).
        #[arg(long)]
        no_browser: bool,
    },
    /// Forget SERVER's tokens.
    Logout { server: String },
}

/// `wasmgate connect`.
#[derive(Args, Debug)]
pub struct ConnectArgs {
    /// The server's MCP endpoint, e.g. https://example.com/mcp.
    pub url: String,
    /// Call this tool (its name on the server) and print the result; else list the tools.
    #[arg(long, value_name = "TOOL")]
    pub call: Option<String>,
    /// The call's arguments, a JSON object.
    #[arg(long, default_value = "{}")]
    pub arguments: String,
    /// A pre-registered OAuth client ID.
    #[arg(long)]
    pub client_id: Option<String>,
    /// Its secret (else from WASMGATE_CLIENT_SECRET).
    #[arg(long, env = "WASMGATE_CLIENT_SECRET", hide_env_values = true)]
    pub client_secret: Option<String>,
    /// A client ID metadata document's https:// URL.
    #[arg(long)]
    pub client_metadata_url: Option<String>,
    /// Scopes to ask for besides those the server names (repeatable).
    #[arg(long = "scope")]
    pub scopes: Vec<String>,
    /// "authorization_code" (default without a secret) or "client_credentials".
    #[arg(long)]
    pub grant: Option<String>,
    /// Follow the authorization URL itself instead of opening a browser.
    #[arg(long)]
    pub no_browser: bool,
}

/// The namespace `connect` serves the server under.
pub const CONNECT_SERVER: &str = "remote";

impl ConnectArgs {
    /// A config with the one server, as a user would write it.
    pub fn config_text(&self) -> String {
        let quote = |s: &str| toml::Value::String(s.to_string()).to_string();
        let mut text = format!(
            "[servers.{CONNECT_SERVER}]\nurl = {}\n[servers.{CONNECT_SERVER}.oauth]\n",
            quote(&self.url)
        );
        if let Some(id) = &self.client_id {
            text.push_str(&format!("client_id = {}\n", quote(id)));
        }
        if self.client_secret.is_some() {
            // Read from the environment by the config, so it is never in a file or an error.
            text.push_str("client_secret = \"${WASMGATE_CLIENT_SECRET}\"\n");
        }
        if let Some(url) = &self.client_metadata_url {
            text.push_str(&format!("client_metadata_url = {}\n", quote(url)));
        }
        if let Some(grant) = &self.grant {
            text.push_str(&format!("grant = {}\n", quote(grant)));
        }
        if !self.scopes.is_empty() {
            let scopes: Vec<String> = self.scopes.iter().map(|s| quote(s)).collect();
            text.push_str(&format!("scopes = [{}]\n", scopes.join(", ")));
        }
        text
    }

    pub fn interaction(&self) -> Interaction {
        match self.no_browser {
            true => Interaction::Follow,
            false => Interaction::Browser,
        }
    }
}

/// Runs an `auth` command over `config`'s servers.
pub fn run(command: AuthCommand, config: &Config) -> ExitCode {
    let Some(dir) = auth_dir(config.gateway.auth_dir.as_deref()) else {
        eprintln!(
            "wasmgate auth: no folder for tokens: set WASMGATE_AUTH_DIR, [gateway] auth_dir or HOME"
        );
        return ExitCode::from(1);
    };
    let store = Store::new(dir);
    match command {
        AuthCommand::Status => status(config, &store),
        AuthCommand::Logout { server } => match store.remove(&server) {
            Ok(true) => {
                println!("logged out of `{server}`");
                ExitCode::SUCCESS
            }
            Ok(false) => {
                println!("`{server}` had no tokens");
                ExitCode::SUCCESS
            }
            Err(err) => {
                eprintln!("wasmgate auth logout: {err}");
                ExitCode::from(1)
            }
        },
        AuthCommand::Login { server, no_browser } => login(config, store, &server, no_browser),
    }
}

fn status(config: &Config, store: &Store) -> ExitCode {
    let mut any = false;
    for (name, server) in &config.servers {
        let ServerTransport::Http(endpoint) = &server.transport else {
            continue;
        };
        let Some(oauth) = &endpoint.oauth else {
            continue;
        };
        any = true;
        let line = match store.load(name) {
            Ok(Some(saved)) if saved.url == endpoint.url => {
                let tokens = &saved.tokens;
                let expiry = match tokens.expires_at {
                    Some(at) if at <= crate::oauth_client::tokens::now() => {
                        match tokens.refresh_token {
                            Some(_) => "expired (refreshed at the next request)".to_string(),
                            None => "expired".to_string(),
                        }
                    }
                    Some(at) => format!(
                        "expires {}",
                        chrono::DateTime::from_timestamp(at as i64, 0)
                            .map_or_else(|| at.to_string(), |t| t.to_rfc3339())
                    ),
                    None => "no expiry given".to_string(),
                };
                format!(
                    "logged in at {} ({expiry}; scopes: {})",
                    saved.registration.issuer,
                    match tokens.scopes.is_empty() {
                        true => "none named".to_string(),
                        false => tokens.scopes.join(" "),
                    }
                )
            }
            Ok(_) if oauth.grant == crate::oauth_client::Grant::ClientCredentials => {
                "client credentials (a token is got at start)".to_string()
            }
            Ok(_) => format!("not logged in: run `wasmgate auth login {name}`"),
            Err(err) => format!("unreadable tokens: {err}"),
        };
        println!("{name:<24} {line}");
    }
    if !any {
        println!("no server has [servers.NAME.oauth]");
    }
    println!("tokens in {}", store.dir().display());
    ExitCode::SUCCESS
}

fn login(config: &Config, store: Store, server: &str, no_browser: bool) -> ExitCode {
    let endpoint = match config.servers.get(server).map(|s| &s.transport) {
        Some(ServerTransport::Http(endpoint)) if endpoint.oauth.is_some() => endpoint,
        _ => {
            eprintln!(
                "wasmgate auth login: `{server}` is not a remote server with [servers.{server}.oauth]"
            );
            return ExitCode::from(1);
        }
    };
    let mut settings = endpoint.oauth.clone().expect("checked above");
    settings.grant = match settings.grant {
        crate::oauth_client::Grant::ClientCredentials => {
            println!("`{server}` uses client credentials: the gateway gets its tokens itself");
            return ExitCode::SUCCESS;
        }
        grant => grant,
    };
    let interaction = match no_browser {
        true => Interaction::Follow,
        false => Interaction::Browser,
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("cannot start the async runtime: {err}");
            return ExitCode::from(1);
        }
    };
    let outcome = runtime.block_on(async {
        let client = OAuthClient::new(
            server,
            &endpoint.url,
            settings,
            interaction,
            Some(store),
            endpoint.ca_file.as_deref(),
        )?;
        client.login().await
    });
    match outcome {
        Ok(()) => {
            println!("logged in to `{server}`; a running gateway uses the tokens at its next try");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("wasmgate auth login {server}: {err}");
            ExitCode::from(1)
        }
    }
}
