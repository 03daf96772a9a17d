//! Compiled components on disk, keyed by the sha256 of the component bytes and
//! a hash of the engine's compilation settings (wasmtime version included), so
//! that a restart or a reload of an unchanged plugin skips compilation.
//!
//! Deserialising is unsafe (the bytes are trusted as machine code), so only
//! files this module wrote are read, and each carries a sha256 of its body that
//! is checked first: a truncated or corrupted entry is recompiled, never loaded.

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

const MAGIC: &[u8; 8] = b"wgcache1";
const HEADER: usize = MAGIC.len() + 32;

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
