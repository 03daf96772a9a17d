//! Compiled components on disk, keyed by the component's sha256 and the engine's settings,
//! so that a restart or reload of an unchanged plugin skips compiling. Entries are native
//! code loaded unsandboxed: only the user's own, unwritable by others, unlinked and HMAC'd.

use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

const MAGIC: &[u8; 8] = b"wgcache2";
const HEADER: usize = MAGIC.len() + 32;

/// Bytes of compiled code the folder keeps: every rebuild of a plugin is a new entry, so
/// after each store the least recently used go first; the entry just written stays.
pub const BUDGET: u64 = 1 << 30;

/// A temporary file this old was left by a process that died while writing it.
const STALE_TMP: std::time::Duration = std::time::Duration::from_secs(3600);

/// The file in the cache folder that holds the HMAC key.
const KEY_FILE: &str = "key";
const KEY_LEN: usize = 32;

pub struct Cache {
    dir: PathBuf,
    /// Hex hash of the engine's compilation settings.
    engine_key: String,
    key: [u8; KEY_LEN],
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

/// Why a file or folder the cache would trust is refused: not the gateway user's, writable
/// by group or others, or not of the expected kind (a link is never followed).
fn untrusted(meta: &std::fs::Metadata, want_dir: bool) -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if want_dir && !meta.is_dir() || !want_dir && !meta.is_file() {
        let kind = if meta.file_type().is_symlink() {
            "a symbolic link"
        } else if want_dir {
            "not a directory"
        } else {
            "not a regular file"
        };
        return Some(kind.into());
    }
    if meta.uid() != me {
        return Some(format!(
            "owned by uid {}, not the gateway's {me}",
            meta.uid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Some(format!(
            "writable by group or others (mode {:o})",
            meta.mode() & 0o777
        ));
    }
    None
}

/// Opens a file of the cache folder for reading, without following a link, and checks that
/// it is trusted.
fn open_trusted(path: &Path) -> std::io::Result<std::fs::File> {
    let file = std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    match untrusted(&file.metadata()?, false) {
        None => Ok(file),
        Some(why) => Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            why,
        )),
    }
}

impl Cache {
    /// The cache in `dir`, made (0700) if missing; `None`, said in a warning, when the folder
    /// or its key cannot be trusted or made: plugins are then compiled at every load.
    pub fn new(dir: &Path, engine: &Engine) -> Option<Cache> {
        let mut hasher = ShaHasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_key = hex(&hasher.0.finalize()[..8]);
        match Cache::open_key(dir) {
            Ok(key) => Some(Cache {
                dir: dir.to_path_buf(),
                engine_key,
                key,
            }),
            Err(why) => {
                tracing::warn!(
                    dir = %dir.display(),
                    "the compiled-plugin cache {} is not used: {why}; plugins are compiled at \
                     every load (make it the gateway user's own, mode 700, or set another \
                     cache_dir)",
                    dir.display()
                );
                None
            }
        }
    }

    /// Checks the folder and reads its key, making either when missing.
    fn open_key(dir: &Path) -> Result<[u8; KEY_LEN], String> {
        if let Err(e) = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
        {
            return Err(format!("cannot create it: {e}"));
        }
        // The folder itself may be reached through a link (a cache on another disk): what
        // counts is who owns and may write the folder it leads to.
        let meta = std::fs::metadata(dir).map_err(|e| e.to_string())?;
        if let Some(why) = untrusted(&meta, true) {
            return Err(format!("it is {why}"));
        }
        let path = dir.join(KEY_FILE);
        let mut key = [0u8; KEY_LEN];
        let made = std::fs::File::options()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path);
        match made {
            Ok(mut file) => {
                fill_random(&mut key).map_err(|e| format!("cannot make a key: {e}"))?;
                file.write_all(&key)
                    .and_then(|()| file.sync_all())
                    .map_err(|e| format!("cannot write its key: {e}"))?;
                return Ok(key);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("cannot make its key {}: {e}", path.display())),
        }
        let mut file = open_trusted(&path)
            .map_err(|e| format!("its key {} is refused: {e}", path.display()))?;
        if file.metadata().map_err(|e| e.to_string())?.mode() & 0o077 != 0 {
            return Err(format!("its key {} is readable by others", path.display()));
        }
        let mut read = Vec::new();
        file.read_to_end(&mut read).map_err(|e| e.to_string())?;
        if read.len() != KEY_LEN {
            return Err(format!("its key {} is not {KEY_LEN} bytes", path.display()));
        }
        key.copy_from_slice(&read);
        Ok(key)
    }

    fn name(&self, digest: &str) -> String {
        format!("{digest}-{}.cwasm", self.engine_key)
    }

    fn path(&self, digest: &str) -> PathBuf {
        self.dir.join(self.name(digest))
    }

    /// The MAC of an entry: its name (so that an entry moved to another name is refused)
    /// and its body.
    fn mac(&self, name: &str, body: &[u8]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("any key length");
        mac.update(name.as_bytes());
        mac.update(&[0]);
        mac.update(body);
        mac
    }

    /// The cached compilation of the component whose sha256 is `digest`, if a
    /// sound one exists.
    pub fn load(&self, engine: &Engine, digest: &str) -> Option<Component> {
        let path = self.path(digest);
        let mut file = match open_trusted(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "compiled-plugin cache entry refused; recompiling");
                return None;
            }
        };
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).ok()?;
        // Used now: the last to go when the folder is pruned.
        let _ = file.set_modified(std::time::SystemTime::now());
        let authentic = bytes.get(HEADER..).is_some_and(|body| {
            &bytes[..MAGIC.len()] == MAGIC
                && self
                    .mac(&self.name(digest), body)
                    .verify_slice(&bytes[MAGIC.len()..HEADER])
                    .is_ok()
        });
        if !authentic {
            tracing::warn!(path = %path.display(), "compiled-plugin cache entry is not one this cache wrote (damaged, copied or crafted); recompiling");
            return None;
        }
        // SAFETY: the file is the gateway user's own, in a folder no one else can write, and
        // its MAC under the folder's key matches: these are bytes `store` wrote, produced by
        // `Engine::precompile_component` of an engine with these settings.
        match unsafe { Component::deserialize(engine, &bytes[HEADER..]) } {
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
    /// that a crashed writer left. Only names the cache writes are touched.
    fn prune(&self, keep: &Path, budget: u64) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let now = std::time::SystemTime::now();
        let mut compiled = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            // Not followed: a link is no entry, whatever its name.
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if !meta.is_file() {
                continue;
            }
            let used = meta.modified().unwrap_or(now);
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if is_temporary_name(&name) {
                if now.duration_since(used).is_ok_and(|age| age > STALE_TMP) {
                    let _ = std::fs::remove_file(&path);
                }
            } else if is_entry_name(&name) && path != keep {
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
        let name = self.name(digest);
        let path = self.dir.join(&name);
        let tmp = self.dir.join(format!(
            ".{digest}.{}.{}.tmp",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        let result = (|| {
            let mut file = std::fs::File::options()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&tmp)?;
            file.write_all(MAGIC)?;
            file.write_all(&self.mac(&name, compiled).finalize().into_bytes())?;
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

/// `{64 hex}-{16 hex}.cwasm`: an entry's name.
fn is_entry_name(name: &str) -> bool {
    let Some(stem) = name.strip_suffix(".cwasm") else {
        return false;
    };
    let hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    matches!(stem.split_once('-'), Some((digest, engine)) if hex(digest, 64) && hex(engine, 16))
}

/// `.{64 hex}.{pid}.{32 hex}.tmp`: a file being written.
fn is_temporary_name(name: &str) -> bool {
    let Some(inner) = name.strip_prefix('.').and_then(|n| n.strip_suffix(".tmp")) else {
        return false;
    };
    let parts: Vec<&str> = inner.split('.').collect();
    let hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    matches!(parts.as_slice(), [digest, pid, id]
        if hex(digest, 64) && !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()) && hex(id, 32))
}

/// Random bytes from the kernel.
fn fill_random(buf: &mut [u8]) -> std::io::Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        // SAFETY: the pointer and length name the unfilled part of `buf`.
        let n =
            unsafe { libc::getrandom(buf[filled..].as_mut_ptr().cast(), buf.len() - filled, 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        } else {
            filled += n as usize;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::time::{Duration, SystemTime};

    use super::Cache;
    use crate::test_support::TempDir;

    const MINIMAL: &str = concat!(env!("WASMGATE_TEST_PLUGINS"), "/minimal.wasm");

    fn digest(c: char) -> String {
        c.to_string().repeat(64)
    }

    fn engine() -> wasmtime::Engine {
        super::super::engine::build(false).unwrap()
    }

    /// Pruning deletes the least recently used entries first, down to the budget, never
    /// the entry just written, and leaves alone what the cache did not name.
    #[test]
    fn prune_keeps_the_recently_used_and_touches_only_its_names() {
        let tmp = TempDir::new("wasmgate-prune-");
        let cache = Cache {
            dir: tmp.to_path_buf(),
            engine_key: "e".repeat(16),
            key: [7; 32],
        };
        let now = SystemTime::now();
        // a (oldest) .. d (newest), 100 bytes each; `a` was just written.
        for (i, name) in ["a", "b", "c", "d"].iter().enumerate() {
            let path = cache.path(&digest(name.chars().next().unwrap()));
            std::fs::write(&path, [0u8; 100]).unwrap();
            let file = std::fs::File::options().append(true).open(&path).unwrap();
            file.set_modified(now - Duration::from_secs(100 - i as u64 * 10))
                .unwrap();
        }
        std::fs::write(tmp.join("notes.txt"), "mine").unwrap();
        std::fs::write(tmp.join("other.cwasm"), [0u8; 1000]).unwrap();
        cache.prune(&cache.path(&digest('a')), 250);
        let mut left: Vec<String> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let e = "e".repeat(16);
        assert_eq!(
            left,
            [
                format!("{}-{e}.cwasm", digest('a')),
                format!("{}-{e}.cwasm", digest('d')),
                "notes.txt".into(),
                "other.cwasm".into()
            ]
        );
    }

    /// An entry loads only from the cache that wrote it, unchanged, under its own name, as a
    /// file of the gateway's user that is no link; anything else is recompiled.
    #[test]
    fn entries_are_authenticated() {
        let engine = engine();
        let bytes = std::fs::read(MINIMAL).unwrap();
        let compiled = engine.precompile_component(&bytes).unwrap();
        let (one, two) = (
            TempDir::new("wasmgate-cache-"),
            TempDir::new("wasmgate-cache-"),
        );
        let a = Cache::new(&one.join("c"), &engine).unwrap();
        let b = Cache::new(&two.join("c"), &engine).unwrap();
        let key_mode = std::fs::metadata(one.join("c/key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(key_mode & 0o777, 0o600);
        let dir_mode = std::fs::metadata(one.join("c"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o777, 0o700);
        a.store(&digest('1'), &compiled);
        assert!(a.load(&engine, &digest('1')).is_some());
        // Another cache's entry (another key), copied in: refused.
        std::fs::copy(a.path(&digest('1')), b.path(&digest('1'))).unwrap();
        assert!(b.load(&engine, &digest('1')).is_none());
        // The same entry under another name (another component's digest): refused.
        std::fs::copy(a.path(&digest('1')), a.path(&digest('2'))).unwrap();
        assert!(a.load(&engine, &digest('2')).is_none());
        // A byte of the code changed: refused.
        let mut entry = std::fs::read(a.path(&digest('1'))).unwrap();
        let last = entry.len() - 1;
        entry[last] ^= 1;
        std::fs::write(a.path(&digest('3')), &entry).unwrap();
        assert!(a.load(&engine, &digest('3')).is_none());
        // A link to a sound entry: not followed.
        std::fs::rename(a.path(&digest('1')), one.join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(one.join("elsewhere"), a.path(&digest('1'))).unwrap();
        assert!(a.load(&engine, &digest('1')).is_none());
        // A sound entry that others may write: refused.
        std::fs::remove_file(a.path(&digest('1'))).unwrap();
        std::fs::rename(one.join("elsewhere"), a.path(&digest('1'))).unwrap();
        assert!(a.load(&engine, &digest('1')).is_some());
        std::fs::set_permissions(a.path(&digest('1')), PermissionsExt::from_mode(0o666)).unwrap();
        assert!(a.load(&engine, &digest('1')).is_none());
    }

    /// A folder others may write, or a key others may read, turns the cache off.
    #[test]
    fn an_untrusted_folder_or_key_is_not_used() {
        let engine = engine();
        let tmp = TempDir::new("wasmgate-cache-");
        let dir = tmp.join("c");
        assert!(Cache::new(&dir, &engine).is_some());
        std::fs::set_permissions(dir.join("key"), PermissionsExt::from_mode(0o644)).unwrap();
        assert!(Cache::new(&dir, &engine).is_none());
        std::fs::set_permissions(dir.join("key"), PermissionsExt::from_mode(0o600)).unwrap();
        assert!(Cache::new(&dir, &engine).is_some());
        std::fs::set_permissions(&dir, PermissionsExt::from_mode(0o777)).unwrap();
        assert!(Cache::new(&dir, &engine).is_none());
        std::fs::set_permissions(&dir, PermissionsExt::from_mode(0o700)).unwrap();
        let link = tmp.join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert!(Cache::new(&link, &engine).is_some());
        std::fs::set_permissions(&dir, PermissionsExt::from_mode(0o775)).unwrap();
        assert!(Cache::new(&link, &engine).is_none());
    }
}
