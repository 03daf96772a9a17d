//! The OAuth 2.1 client that lets the gateway into remote MCP servers that ask for it
//! (the MCP authorization spec): discovery from a 401, registration, PKCE, tokens kept in
//! a private file, refreshed, and stepped up on `insufficient_scope`.

use std::path::{Path, PathBuf};

pub mod challenge;
pub mod discovery;
pub mod flow;
pub mod login;
pub mod pkce;
pub mod registration;
pub mod store;
pub mod tokens;

pub use flow::OAuthClient;

/// Words of the error that says a login is needed, for whoever reports it.
pub const LOGIN_HINT: &str = "needs a login";

/// Why the client could not get a token; the remote backend names it in its status.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    /// An authorization code login is needed and none was done (or it expired).
    #[error("server `{server}` {LOGIN_HINT}: run `wasmgate auth login {server}`")]
    LoginRequired { server: String },
    /// Metadata that is missing, malformed, or fails a check the spec requires.
    #[error("OAuth discovery: {0}")]
    Discovery(String),
    /// The authorization server refused a registration or token request.
    #[error("the authorization server refused: {0}")]
    Refused(String),
    /// An authorization response that fails its checks (state, issuer, error).
    #[error("the authorization response: {0}")]
    Response(String),
    #[error("OAuth request failed: {0}")]
    Http(String),
    #[error("the token store: {0}")]
    Store(String),
    /// Step-up asked again and again: the server will not accept any scope given.
    #[error("server `{server}` still refuses after {attempts} authorizations: {reason}")]
    GaveUp {
        server: String,
        attempts: u32,
        reason: String,
    },
}

/// A secret (client secret, access or refresh token): its Debug output shows none of it.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// Which grant gets the tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// Machine to machine: the gateway asks on its own, with its client secret.
    ClientCredentials,
    /// A user logs in through a browser (`wasmgate auth login`), PKCE S256.
    AuthorizationCode,
}

impl Grant {
    pub fn as_str(self) -> &'static str {
        match self {
            Grant::ClientCredentials => "client_credentials",
            Grant::AuthorizationCode => "authorization_code",
        }
    }
}

/// A server's `[servers.X.oauth]`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthSettings {
    pub client_id: Option<String>,
    pub client_secret: Option<Secret>,
    pub scopes: Vec<String>,
    pub grant: Grant,
    /// A client ID metadata document's HTTPS URL, used as the client ID where the
    /// authorization server supports it.
    pub client_metadata_url: Option<String>,
}

/// How an authorization code login reaches the user, when one is needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interaction {
    /// None (a running gateway): the server's status says to run `wasmgate auth login`.
    None,
    /// Open the browser (or print the URL) and wait on the loopback redirect.
    Browser,
    /// Follow the authorization URL itself and take the code from its redirect: for an
    /// authorization server that grants without a user (the conformance suite's).
    Follow,
}

/// The folder tokens are kept in: `WASMGATE_AUTH_DIR`, else `[gateway] auth_dir`, else
/// `$XDG_STATE_HOME/wasmgate/auth`, else `~/.local/state/wasmgate/auth`.
pub fn auth_dir(configured: Option<&Path>) -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("WASMGATE_AUTH_DIR").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = configured {
        return Some(dir.to_path_buf());
    }
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|home| PathBuf::from(home).join(".local/state"))
        })?;
    Some(state.join("wasmgate/auth"))
}

static INTERACTION: std::sync::OnceLock<Interaction> = std::sync::OnceLock::new();

/// How this process reaches a user for a login: set once by a command that has one
/// (`wasmgate connect`); a gateway that serves has none.
pub fn set_interaction(interaction: Interaction) {
    let _ = INTERACTION.set(interaction);
}

pub fn interaction() -> Interaction {
    INTERACTION.get().copied().unwrap_or(Interaction::None)
}
