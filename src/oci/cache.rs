//! The pull cache, beside the compiled-code cache: components stored by their layer digest
//! (`oci/sha256/HEX.wasm`) and an index (`oci/index.json`) of which manifest each tag last
//! named, which layer each manifest holds and which keys its signature verified with. A
//! file is read back only if it still has its digest.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{OciError, OciRef, Pin, Pulled, digest_of};

/// The pull cache under a cache folder.
pub struct PullCache {
    dir: PathBuf,
}

#[derive(Default, Serialize, Deserialize)]
struct Index {
    /// `oci://REG/REPO:TAG` → the manifest digest it named at the last pull.
    #[serde(default)]
    tags: BTreeMap<String, String>,
    #[serde(default)]
    manifests: BTreeMap<String, Entry>,
}

#[derive(Default, Serialize, Deserialize)]
struct Entry {
    layer: String,
    /// Digests of the public keys (their PEM text) a signature verified with.
    #[serde(default)]
    keys: BTreeSet<String>,
}

impl PullCache {
    /// The cache in `cache_dir/oci`.
    pub fn new(cache_dir: &Path) -> PullCache {
        PullCache {
            dir: cache_dir.join("oci"),
        }
    }

    fn index_path(&self) -> PathBuf {
        self.dir.join("index.json")
    }

    fn file_for(&self, layer: &str) -> PathBuf {
        let hex = layer.strip_prefix("sha256:").unwrap_or(layer);
        self.dir.join("sha256").join(format!("{hex}.wasm"))
    }

    fn index(&self) -> Index {
        std::fs::read(self.index_path())
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }

    /// The cached file `reference` last resolved to (a tag: the last pull's manifest), with
    /// its manifest digest; `None` when absent, damaged, or not verified with `key_id`.
    pub fn lookup(&self, reference: &OciRef, key_id: Option<&str>) -> Option<(PathBuf, String)> {
        let index = self.index();
        let manifest = match &reference.pin {
            Pin::Digest(digest) => digest.clone(),
            Pin::Tag(_) => index.tags.get(&reference.to_string())?.clone(),
        };
        let entry = index.manifests.get(&manifest)?;
        if key_id.is_some_and(|key| !entry.keys.contains(key)) {
            return None;
        }
        let path = self.file_for(&entry.layer);
        let bytes = std::fs::read(&path).ok()?;
        (digest_of(&bytes) == entry.layer).then_some((path, manifest))
    }

    /// Stores a verified pull of `reference` (verified with `key_id`, if any); its file.
    pub fn store(
        &self,
        reference: &OciRef,
        pulled: &Pulled,
        key_id: Option<&str>,
    ) -> Result<PathBuf, OciError> {
        let path = self.file_for(&pulled.layer_digest);
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |error| OciError::Io { path, error }
        };
        let folder = path.parent().unwrap_or(&self.dir);
        std::fs::create_dir_all(folder).map_err(io(folder))?;
        if !std::fs::read(&path).is_ok_and(|bytes| digest_of(&bytes) == pulled.layer_digest) {
            write_atomically(&path, &pulled.wasm).map_err(io(&path))?;
        }
        let mut index = self.index();
        if let Pin::Tag(_) = reference.pin {
            index
                .tags
                .insert(reference.to_string(), pulled.manifest_digest.clone());
        }
        let entry = index
            .manifests
            .entry(pulled.manifest_digest.clone())
            .or_default();
        entry.layer = pulled.layer_digest.clone();
        entry.keys.extend(key_id.map(str::to_owned));
        let text = serde_json::to_vec_pretty(&index).unwrap_or_default();
        let index_path = self.index_path();
        write_atomically(&index_path, &text).map_err(io(&index_path))?;
        Ok(path)
    }
}

/// Writes through a temporary file and a rename, so a reader never sees half a file.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let temp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&temp, bytes)?;
    std::fs::rename(&temp, path)
}

#[cfg(test)]
mod tests {
    use super::PullCache;
    use crate::oci::{OciRef, Pulled, digest_of};

    #[test]
    fn a_pull_is_found_by_tag_and_digest_and_a_damaged_file_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let cache = PullCache::new(dir.path());
        let tag = OciRef::parse("oci://127.0.0.1:1/a/b:1").unwrap();
        let wasm = b"\0asm-ish".to_vec();
        let manifest = digest_of(b"manifest");
        let pulled = Pulled {
            manifest_digest: manifest.clone(),
            layer_digest: digest_of(&wasm),
            wasm,
        };
        let path = cache.store(&tag, &pulled, Some("k1")).unwrap();
        assert_eq!(
            cache.lookup(&tag, None),
            Some((path.clone(), manifest.clone()))
        );
        assert_eq!(
            cache
                .lookup(&tag.at_digest(&manifest), Some("k1"))
                .unwrap()
                .1,
            manifest
        );
        // Verified with another key: not good enough.
        assert_eq!(cache.lookup(&tag, Some("k2")), None);
        std::fs::write(&path, b"tampered").unwrap();
        assert_eq!(cache.lookup(&tag, None), None);
    }
}
