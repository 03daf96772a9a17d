//! The plugins' key-value store: per plugin and per scope (a principal, or "shared"),
//! bounded in size, kept in memory and persisted under `[plugins] data_dir` so that a
//! plugin's state survives reloads, traps and restarts. Also the instance mode a call
//! runs in (`mode`), the other half of a plugin's state.

mod file;
mod mode;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use sha2::{Digest, Sha256};

use crate::config::{default_data_dir, process_env};
use file::{Entries, Stamp, StoreFile};
pub use mode::effective_instance;

/// The longest key, in bytes.
pub const MAX_KEY: usize = 512;

/// Why a store refused a change.
#[derive(Debug, thiserror::Error)]
pub enum KvError {
    #[error(
        "the store is full: {used} of {limit} bytes used (keys and values; raise \
         [plugins] store_size, or delete keys)"
    )]
    Full { used: u64, limit: u64 },
    #[error("invalid key: {0}")]
    InvalidKey(String),
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
}

/// Every plugin's stores, one per plugin host.
pub struct KvStores {
    /// `None`: no folder was given and none could be found (no HOME).
    dir: Option<PathBuf>,
    limit: u64,
    open: Mutex<HashMap<(String, String), Arc<Scope>>>,
}

impl KvStores {
    /// `dir`: `[plugins] data_dir` (`None`: `$XDG_DATA_HOME/wasmgate` or
    /// `~/.local/share/wasmgate`); `limit`: bytes of keys and values per plugin and scope.
    pub fn new(dir: Option<PathBuf>, limit: u64) -> KvStores {
        KvStores {
            dir: dir.or_else(|| default_data_dir(&process_env)),
            limit,
            open: Mutex::new(HashMap::new()),
        }
    }

    /// The store of `plugin` for `scope` (see [`scope_for`]). Opening reads nothing: the
    /// file is read on first use.
    pub fn open(&self, plugin: &str, scope: &str) -> KvHandle {
        let mut open = relock(&self.open);
        let key = (plugin.to_owned(), scope.to_owned());
        let scope = open.entry(key).or_insert_with(|| {
            Arc::new(Scope {
                file: self
                    .dir
                    .as_deref()
                    .map(|d| StoreFile::new(d, plugin, scope)),
                limit: self.limit,
                state: Mutex::new(None),
            })
        });
        KvHandle {
            scope: scope.clone(),
        }
    }
}

/// One plugin's store for one scope; clones share it.
#[derive(Clone)]
pub struct KvHandle {
    scope: Arc<Scope>,
}

struct Scope {
    /// `None`: there is no data folder, so nothing can be kept.
    file: Option<StoreFile>,
    limit: u64,
    /// What the file held when last read or written; `None` until first use.
    state: Mutex<Option<Loaded>>,
}

struct Loaded {
    entries: Entries,
    /// Bytes of keys and values.
    used: u64,
    stamp: Option<Stamp>,
}

impl KvHandle {
    /// The value of `key`; none when it is not set, or the store cannot be read (a
    /// change would say why).
    pub fn get(&self, key: &str) -> Option<Vec<u8>> {
        let mut state = relock(&self.scope.state);
        let loaded = self.scope.fresh(&mut state).ok()?;
        loaded.entries.get(key).cloned()
    }

    /// Sets `key` to `value`; a value that would take the store past its limit changes
    /// nothing.
    pub fn set(&self, key: &str, value: Vec<u8>) -> Result<(), KvError> {
        check_key(key)?;
        self.scope.change(|loaded, limit| {
            let old = loaded.entries.get(key).map_or(0, |v| entry_size(key, v));
            let used = loaded.used - old + entry_size(key, &value);
            if used > limit {
                return Err(KvError::Full {
                    used: loaded.used,
                    limit,
                });
            }
            Ok(Some((key.to_owned(), Some(value))))
        })
    }

    /// Removes `key`; a key that is not set is no error.
    pub fn delete(&self, key: &str) -> Result<(), KvError> {
        check_key(key)?;
        self.scope.change(|loaded, _| {
            Ok(loaded
                .entries
                .contains_key(key)
                .then(|| (key.to_owned(), None)))
        })
    }

    /// The keys that start with `prefix`, sorted; none when the store cannot be read.
    pub fn keys(&self, prefix: &str) -> Vec<String> {
        let mut state = relock(&self.scope.state);
        let Ok(loaded) = self.scope.fresh(&mut state) else {
            return Vec::new();
        };
        loaded
            .entries
            .range(prefix.to_owned()..)
            .map(|(key, _)| key)
            .take_while(|key| key.starts_with(prefix))
            .cloned()
            .collect()
    }
}

/// A change to one key: its new value, or `None` to remove it.
type Change = Option<(String, Option<Vec<u8>>)>;

impl Scope {
    /// The entries as the file now holds them: read on first use, and again when another
    /// writer (another gateway sharing `data_dir`) replaced the file.
    fn fresh<'s>(&self, state: &'s mut Option<Loaded>) -> Result<&'s mut Loaded, KvError> {
        let file = self.file.as_ref().ok_or_else(no_folder)?;
        let stamp = file.stamp().map_err(KvError::Unavailable)?;
        if state.as_ref().is_none_or(|loaded| loaded.stamp != stamp) {
            let (entries, stamp) = file.read().map_err(KvError::Unavailable)?;
            let used = entries.iter().map(|(k, v)| entry_size(k, v)).sum();
            *state = Some(Loaded {
                entries,
                used,
                stamp,
            });
        }
        // Set just above when it was not.
        state.as_mut().ok_or_else(no_folder)
    }

    /// Decides a change on the current entries (under the folder's lock, so that no
    /// other writer's change is lost) and writes it; on any error memory and disk stay
    /// as they were.
    fn change(
        &self,
        decide: impl FnOnce(&Loaded, u64) -> Result<Change, KvError>,
    ) -> Result<(), KvError> {
        let file = self.file.as_ref().ok_or_else(no_folder)?;
        let mut state = relock(&self.state);
        let _lock = file.lock().map_err(KvError::Unavailable)?;
        let loaded = self.fresh(&mut state)?;
        let Some((key, value)) = decide(loaded, self.limit)? else {
            return Ok(());
        };
        let old = match value {
            Some(value) => loaded.entries.insert(key.clone(), value),
            None => loaded.entries.remove(&key),
        };
        match file.write(&loaded.entries) {
            Ok(stamp) => {
                loaded.used = loaded.entries.iter().map(|(k, v)| entry_size(k, v)).sum();
                loaded.stamp = stamp;
                Ok(())
            }
            Err(why) => {
                match old {
                    Some(old) => loaded.entries.insert(key, old),
                    None => loaded.entries.remove(&key),
                };
                Err(KvError::Unavailable(why))
            }
        }
    }
}

fn no_folder() -> KvError {
    KvError::Unavailable("no folder to keep it in: set [plugins] data_dir (HOME is not set)".into())
}

fn check_key(key: &str) -> Result<(), KvError> {
    match key.len() {
        0 => Err(KvError::InvalidKey("a key cannot be empty".into())),
        n if n > MAX_KEY => Err(KvError::InvalidKey(format!(
            "a key is at most {MAX_KEY} bytes, this one is {n}"
        ))),
        _ => Ok(()),
    }
}

fn entry_size(key: &str, value: &[u8]) -> u64 {
    (key.len() + value.len()) as u64
}

/// A lock whose holder panicked still guards consistent data: every change is made whole
/// or undone before the guard drops.
fn relock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The scope of a call's store: "shared" when the plugin's store is shared, else one per
/// principal: "local" without a token, else a short sha256 of the token (its name in the
/// config, or its value: either way a file name of fixed form that shows neither).
pub fn scope_for(shared: bool, token: Option<&str>) -> String {
    match (shared, token) {
        (true, _) => "shared".into(),
        (false, None) => "local".into(),
        (false, Some(token)) => {
            let digest = Sha256::digest(token.as_bytes());
            // 128 bits: no two tokens meet by chance; hex never spells "local" or "shared".
            crate::plugin::hex(&digest[..16])
        }
    }
}
