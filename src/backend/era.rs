//! Which MCP era a server is spoken to in: set by its `protocol`, or found out once and
//! remembered per command line (command, args, environment names, working folder) in the
//! gateway's cache folder, so that a stdio server costs a probe process once, not at
//! every start.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::config::{ServerConfig, ServerTransport, UpstreamProtocol};
use crate::protocol::LATEST_VERSION;
use crate::protocol::modern::MODERN_VERSION;

/// An MCP era, as a server speaks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// 2025-11-25: `initialize`, then a session.
    Legacy,
    /// 2026-07-28: stateless.
    Modern,
}

impl Era {
    pub fn version(self) -> &'static str {
        match self {
            Era::Legacy => LATEST_VERSION,
            Era::Modern => MODERN_VERSION,
        }
    }

    fn parse(text: &str) -> Option<Era> {
        match text.trim() {
            LATEST_VERSION => Some(Era::Legacy),
            MODERN_VERSION => Some(Era::Modern),
            _ => None,
        }
    }
}

/// How a server's era was decided, as its ready event says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Config,
    Cached,
    Probed,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Config => "config",
            Source::Cached => "cached",
            Source::Probed => "probed",
        }
    }
}

/// The era `protocol` sets, or `None` for "auto".
pub fn configured(config: &ServerConfig) -> Option<Era> {
    match config.protocol {
        UpstreamProtocol::Auto => None,
        UpstreamProtocol::Legacy => Some(Era::Legacy),
        UpstreamProtocol::Modern => Some(Era::Modern),
    }
}

/// Eras found by probing, one small file per command line, named by its digest (the
/// command line itself may hold secrets, so it is not written).
pub struct EraCache {
    dir: Option<PathBuf>,
}

impl EraCache {
    /// Under the gateway's cache folder (`[plugins] cache_dir`); none: nothing is kept.
    pub fn new(cache_dir: Option<&Path>) -> Self {
        EraCache {
            dir: cache_dir.map(|d| d.join("upstream-eras")),
        }
    }

    pub fn get(&self, config: &ServerConfig) -> Option<Era> {
        let file = self.file(config)?;
        Era::parse(&std::fs::read_to_string(file).ok()?)
    }

    /// Remembers `era`; a failure to write only costs another probe next time.
    pub fn put(&self, config: &ServerConfig, era: Era) {
        let (Some(dir), Some(file)) = (&self.dir, self.file(config)) else {
            return;
        };
        let temporary = file.with_extension(format!("tmp{}", std::process::id()));
        let written = std::fs::create_dir_all(dir)
            .and_then(|_| std::fs::write(&temporary, era.version()))
            .and_then(|_| std::fs::rename(&temporary, &file));
        if let Err(err) = written {
            tracing::warn!(server = %config.name, dir = %dir.display(), "cannot remember the server's protocol era: {err}");
        }
    }

    /// Forgets what was found for `config` (a start in that era failed).
    pub fn forget(&self, config: &ServerConfig) {
        if let Some(file) = self.file(config) {
            let _ = std::fs::remove_file(file);
        }
    }

    fn file(&self, config: &ServerConfig) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        Some(dir.join(format!("{}.era", command_digest(config)?)))
    }
}

/// The digest of what makes a stdio server the program it is: its command, args, the
/// names of its extra environment variables (their values may be rotating secrets), and
/// its working folder. `None` for a remote server.
fn command_digest(config: &ServerConfig) -> Option<String> {
    let ServerTransport::Stdio(command) = &config.transport else {
        return None;
    };
    let names: Vec<&String> = command.env.keys().collect();
    let key = serde_json::json!([
        command.command,
        command.args,
        names,
        command.cwd,
        command.inherit_env
    ]);
    let digest = Sha256::digest(key.to_string().as_bytes());
    Some(digest.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{Era, EraCache};
    use crate::config::{ServerConfig, from_toml_str};

    fn server(entry: &str) -> ServerConfig {
        let text = format!("[servers.s]\n{entry}\n");
        let env = |_: &str| None;
        let config = from_toml_str(&text, Path::new("g.toml"), Path::new("/"), &env).unwrap();
        config.servers["s"].clone()
    }

    /// One remembered era per command line: the values of `env` (rotating secrets) do
    /// not make another, its names and the arguments do.
    #[test]
    fn an_era_is_remembered_per_command_line() {
        let dir = tempfile::tempdir().unwrap();
        let cache = EraCache::new(Some(dir.path()));
        let first = server("command = \"srv\"\nenv = { TOKEN = \"a\" }");
        assert_eq!(cache.get(&first), None);
        cache.put(&first, Era::Modern);
        assert_eq!(cache.get(&first), Some(Era::Modern));
        let other_value = server("command = \"srv\"\nenv = { TOKEN = \"b\" }");
        assert_eq!(cache.get(&other_value), Some(Era::Modern));
        let other_name = server("command = \"srv\"\nenv = { KEY = \"a\" }");
        assert_eq!(cache.get(&other_name), None);
        let other_args = server("command = \"srv\"\nargs = [\"--x\"]\nenv = { TOKEN = \"a\" }");
        assert_eq!(cache.get(&other_args), None);
        cache.forget(&first);
        assert_eq!(cache.get(&first), None);
        // Without a cache folder nothing is kept, and nothing fails.
        let none = EraCache::new(None);
        none.put(&first, Era::Legacy);
        assert_eq!(none.get(&first), None);
    }
}
