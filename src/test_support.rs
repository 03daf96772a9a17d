//! What unit tests share.

use std::path::{Path, PathBuf};

/// A fresh folder under the system temp dir, removed with the value. Its path is
/// canonical, as the config stores grant and plugin paths.
pub struct TempDir {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl TempDir {
    pub fn new(prefix: &str) -> TempDir {
        let dir = tempfile::Builder::new().prefix(prefix).tempdir().unwrap();
        let path = dir.path().canonicalize().unwrap();
        TempDir { _dir: dir, path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}
