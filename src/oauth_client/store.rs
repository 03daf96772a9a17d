//! Tokens kept between runs: one JSON file a server in the auth folder, created readable
//! by the user alone (0600, the folder 0700), replaced whole by a rename.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::OAuthError;
use super::registration::Registration;
use super::tokens::Tokens;

/// What is kept for one server.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Saved {
    /// The server's MCP URL when the tokens were got: a changed URL wants a new login.
    pub url: String,
    pub resource: String,
    pub token_endpoint: String,
    pub registration: Registration,
    pub tokens: Tokens,
}

/// The auth folder.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    pub fn new(dir: PathBuf) -> Store {
        Store { dir }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn file(&self, server: &str) -> PathBuf {
        // Server names are `[A-Za-z0-9_-]` (validated), so a name is a safe file name.
        self.dir.join(format!("{server}.json"))
    }

    pub fn load(&self, server: &str) -> Result<Option<Saved>, OAuthError> {
        let file = self.file(server);
        let text = match std::fs::read_to_string(&file) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(OAuthError::Store(format!("{}: {err}", file.display()))),
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| OAuthError::Store(format!("{}: {e}", file.display())))
    }

    pub fn save(&self, server: &str, saved: &Saved) -> Result<(), OAuthError> {
        let fail = |e: std::io::Error| OAuthError::Store(format!("{}: {e}", self.dir.display()));
        private_dir(&self.dir).map_err(fail)?;
        let file = self.file(server);
        let partial = self
            .dir
            .join(format!(".{server}.json.{}", std::process::id()));
        let text =
            serde_json::to_vec_pretty(saved).map_err(|e| OAuthError::Store(e.to_string()))?;
        let mut out = private_file(&partial).map_err(fail)?;
        out.write_all(&text)
            .and_then(|()| out.sync_all())
            .map_err(fail)?;
        std::fs::rename(&partial, &file).map_err(fail)
    }

    /// Forgets a server's tokens; whether there were any.
    pub fn remove(&self, server: &str) -> Result<bool, OAuthError> {
        match std::fs::remove_file(self.file(server)) {
            Ok(()) => Ok(true),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(err) => Err(OAuthError::Store(err.to_string())),
        }
    }
}

#[cfg(unix)]
fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    if !dir.is_dir() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

#[cfg(not(unix))]
fn private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

#[cfg(unix)]
fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::File::create(path)
}

#[cfg(test)]
mod tests {
    use super::{Saved, Store};
    use crate::oauth_client::Secret;
    use crate::oauth_client::registration::{AuthMethod, Registration};
    use crate::oauth_client::tokens::Tokens;

    #[cfg(unix)]
    #[test]
    fn tokens_are_kept_in_a_private_file_and_never_in_debug_output() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("auth"));
        let saved = Saved {
            url: "https://mcp.example.com/mcp".into(),
            resource: "https://mcp.example.com/mcp".into(),
            token_endpoint: "https://as.example.com/token".into(),
            registration: Registration {
                issuer: "https://as.example.com".into(),
                client_id: "c".into(),
                client_secret: Some(Secret("client-secret-value".into())),
                auth_method: AuthMethod::ClientSecretBasic,
            },
            tokens: Tokens {
                access_token: Secret("access-token-value".into()),
                refresh_token: Some(Secret("refresh-token-value".into())),
                expires_at: Some(1),
                scopes: vec!["a".into()],
            },
        };
        store.save("docs", &saved).unwrap();
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir.path().join("auth")), 0o700);
        assert_eq!(mode(&dir.path().join("auth/docs.json")), 0o600);
        let back = store.load("docs").unwrap().unwrap();
        assert_eq!(back.tokens.access_token.expose(), "access-token-value");
        let shown = format!("{back:?}");
        for secret in [
            "client-secret-value",
            "access-token-value",
            "refresh-token-value",
        ] {
            assert!(!shown.contains(secret), "{shown}");
        }
        assert!(store.remove("docs").unwrap());
        assert!(store.load("docs").unwrap().is_none());
    }
}
