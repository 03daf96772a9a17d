//! Maps a tool's `path` argument onto the guest file system under the root.

use std::io;
use std::path::{Component, Path, PathBuf};
use wasmgate_plugin::{ToolError, config_or};

/// Where the grant is mounted in the guest unless the config says otherwise.
const DEFAULT_ROOT: &str = "/data";

/// A path under the root, checked not to leave it.
pub struct Resolved {
    pub full: PathBuf,
    /// `full` for messages.
    pub shown: String,
    root: PathBuf,
}

impl Resolved {
    pub fn new(path: &str) -> Result<Self, ToolError> {
        let root = PathBuf::from(config_or("root", DEFAULT_ROOT));
        let full = resolve(&root, Path::new(path)).ok_or_else(|| {
            ToolError::new(format!("{path:?} lies outside the root {}", root.display()))
        })?;
        Ok(Self {
            shown: full.display().to_string(),
            full,
            root,
        })
    }

    /// The failure of `op` on this path, with the OS message, and a hint when
    /// the cause is the likeliest mistake: no directory granted at the root.
    pub fn error(&self, op: &str, err: io::Error) -> ToolError {
        let mut message = format!("{op} {}: {err}", self.shown);
        if err.kind() == io::ErrorKind::NotFound && !self.root.exists() {
            let root = self.root.display();
            message +=
                &format!(" ({root} is not there: grant a directory at {root} with allow_dirs)");
        }
        ToolError::new(message)
    }
}

/// Joins `path` to `root` lexically and refuses a result outside `root`.
///
/// The host's preopens are the real boundary (WASI will not follow `..` or a
/// symlink out of a granted directory); checking here as well gives the model
/// a message that names the root instead of a bare "Operation not permitted",
/// and keeps `..` from reaching a second grant mounted beside the root.
fn resolve(root: &Path, path: &Path) -> Option<PathBuf> {
    // An absolute path is accepted when it names something under the root,
    // since models often repeat the full guest path they were shown.
    let relative = if path.is_absolute() {
        path.strip_prefix(root).ok()?
    } else {
        path
    };
    let mut full = root.to_path_buf();
    let mut depth = 0usize;
    for part in relative.components() {
        match part {
            Component::Normal(name) => {
                full.push(name);
                depth += 1;
            }
            Component::CurDir => {}
            Component::ParentDir if depth > 0 => {
                full.pop();
                depth -= 1;
            }
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(full)
}

#[cfg(test)]
mod tests {
    use super::resolve;
    use std::path::{Path, PathBuf};

    fn r(path: &str) -> Option<PathBuf> {
        resolve(Path::new("/data"), Path::new(path))
    }

    #[test]
    fn stays_under_the_root() {
        assert_eq!(r("."), Some("/data".into()));
        assert_eq!(r("a/b.txt"), Some("/data/a/b.txt".into()));
        assert_eq!(r("a/../b"), Some("/data/b".into()));
        assert_eq!(r("/data/a"), Some("/data/a".into()));
    }

    #[test]
    fn refuses_to_leave_it() {
        assert_eq!(r(".."), None);
        assert_eq!(r("a/../../etc/passwd"), None);
        assert_eq!(r("/etc/passwd"), None);
        assert_eq!(r("/data/../etc"), None);
        assert_eq!(r("/database"), None);
    }
}
