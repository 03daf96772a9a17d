//! Compiled components on disk, keyed by the sha256 of the component bytes and
//! a hash of the engine's compilation settings (wasmtime version included), so
//! that a restart or a reload of an unchanged plugin skips compilation.
//!
//! Deserialising is unsafe (the bytes are trusted as machine code), so only
//! files this module wrote are read, and each carries a sha256 of its body that
//! is checked first: a truncated or corrupted entry is recompiled, never loaded.
//!
//! Every rebuild of a plugin is a new entry (a Python or JavaScript one is ~30 MB), so
//! after each store the folder is pruned to [`BUDGET`], least recently used first.

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

const MAGIC: &[u8; 8] = b"wgcache1";
const HEADER: usize = MAGIC.len() + 32;

/// Bytes of compiled code the folder keeps; the entry just written stays whatever its size.
pub const BUDGET: u64 = 1 << 30;

/// A temporary file this old was left by a process that died while writing it.
const STALE_TMP: std::time::Duration = std::time::Duration::from_secs(3600);

pub struct Cache {
    dir: PathBuf,
    /// Hex hash of the engine's compilation settings.
    engine_key: String,
}

/// Feeds `Hash` into sha256, for a key stable across runs of the same binary.
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Cache {
    pub fn new(dir: &Path, engine: &Engine) -> Cache {
        let mut hasher = ShaHasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_key = hex(&hasher.0.finalize()[..8]);
        Cache {
            dir: dir.to_path_buf(),
            engine_key,
        }
    }

    fn path(&self, digest: &str) -> PathBuf {
        self.dir.join(format!("{digest}-{}.cwasm", self.engine_key))
    }

    /// The cached compilation of the component whose sha256 is `digest`, if a
    /// sound one exists.
    pub fn load(&self, engine: &Engine, digest: &str) -> Option<Component> {
        let path = self.path(digest);
        let bytes = std::fs::read(&path).ok()?;
        // Used now: the last to go when the folder is pruned.
        if let Ok(file) = std::fs::File::options().append(true).open(&path) {
            let _ = file.set_modified(std::time::SystemTime::now());
        }
        let body = match bytes.get(HEADER..) {
            Some(body)
                if &bytes[..MAGIC.len()] == MAGIC
                    && bytes[MAGIC.len()..HEADER] == Sha256::digest(body)[..] =>
            {
                body
            }
            _ => {
                tracing::warn!(path = %path.display(), "compiled-plugin cache entry is damaged; recompiling");
                return None;
            }
        };
        // SAFETY: the file is in our cache directory, under a name only we
        // write, and its checksum matches what we wrote: these are bytes
        // produced by `Engine::precompile_component` of this engine.
        match unsafe { Component::deserialize(engine, body) } {
            Ok(component) => Some(component),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %super::limits::chain(&e), "compiled-plugin cache entry unusable; recompiling");
                None
            }
        }
    }

    /// Stores a compilation, atomically (a reader sees the old file or the new,
    /// never half of one). Failures only cost a recompile later.
    pub fn store(&self, digest: &str, compiled: &[u8]) {
        if let Err(e) = self.try_store(digest, compiled) {
            tracing::warn!(dir = %self.dir.display(), error = %e, "cannot write the compiled-plugin cache");
            return;
        }
        self.prune(&self.path(digest), BUDGET);
    }

    /// Deletes the least recently used entries (of any engine: older wasmgate versions
    /// too) until the rest fit in `budget` bytes, keeping `keep`; and temporary files
    /// that a crashed writer left.
    fn prune(&self, keep: &Path, budget: u64) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let now = std::time::SystemTime::now();
        let mut compiled = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = entry.metadata() else { continue };
            let used = meta.modified().unwrap_or(now);
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') && name.ends_with(".tmp") {
                if now.duration_since(used).is_ok_and(|age| age > STALE_TMP) {
                    let _ = std::fs::remove_file(&path);
                }
            } else if meta.is_file() && name.ends_with(".cwasm") && path != keep {
                compiled.push((used, meta.len(), path));
            }
        }
        let kept = std::fs::metadata(keep).map_or(0, |m| m.len());
        let mut total = kept + compiled.iter().map(|(_, len, _)| len).sum::<u64>();
        compiled.sort();
        for (_, len, path) in compiled {
            if total <= budget {
                break;
            }
            match std::fs::remove_file(&path) {
                Ok(()) => {
                    tracing::debug!(path = %path.display(), "compiled-plugin cache entry pruned");
                    total -= len;
                }
                Err(e) => tracing::debug!(path = %path.display(), error = %e, "cannot prune"),
            }
        }
    }

    fn try_store(&self, digest: &str, compiled: &[u8]) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let path = self.path(digest);
        let tmp = self.dir.join(format!(
            ".{digest}.{}.{}.tmp",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        let result = (|| {
            let mut file = std::fs::File::create(&tmp)?;
            file.write_all(MAGIC)?;
            file.write_all(&Sha256::digest(compiled))?;
            file.write_all(compiled)?;
            file.sync_all()?;
            std::fs::rename(&tmp, &path)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::Cache;

    /// Pruning deletes the least recently used entries first, down to the budget, never
    /// the entry just written, and leaves other files alone.
    #[test]
    fn prune_keeps_the_recently_used() {
        let dir = std::env::temp_dir().join(format!("wasmgate-prune-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let cache = Cache {
            dir: dir.clone(),
            engine_key: "e".into(),
        };
        let now = SystemTime::now();
        // a (oldest) .. d (newest), 100 bytes each; `a` was just written.
        for (i, name) in ["a", "b", "c", "d"].iter().enumerate() {
            let path = cache.path(name);
            std::fs::write(&path, [0u8; 100]).unwrap();
            let file = std::fs::File::options().append(true).open(&path).unwrap();
            file.set_modified(now - Duration::from_secs(100 - i as u64 * 10))
                .unwrap();
        }
        std::fs::write(dir.join("notes.txt"), "mine").unwrap();
        cache.prune(&cache.path("a"), 250);
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["a-e.cwasm", "d-e.cwasm", "notes.txt"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
