//! A store's file, `<data_dir>/<plugin>/<scope>.json`: read whole, and replaced whole (a
//! temporary file renamed over it) under a lock on the plugin's folder that every gateway
//! sharing `data_dir` takes, so no reader ever sees half a file.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

/// The file format's version, written into every file so that a later format can tell.
const FORMAT: u32 = 1;

/// The file as written: values that are UTF-8 stay readable, others are base64.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    wasmgate_store: u32,
    entries: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
enum Value {
    Text(String),
    Base64(String),
}

/// Which version of the file was read: a write by anyone (another replica too) renames
/// a new file in, which changes the inode and the time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
}

impl Stamp {
    fn of(meta: &fs::Metadata) -> Stamp {
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
        }
    }
}

pub(super) type Entries = BTreeMap<String, Vec<u8>>;

/// One store's file and the folder that holds it.
pub(super) struct StoreFile {
    pub(super) dir: PathBuf,
    pub(super) path: PathBuf,
}

impl StoreFile {
    pub(super) fn new(data_dir: &Path, plugin: &str, scope: &str) -> StoreFile {
        let dir = data_dir.join(folder_name(plugin));
        let path = dir.join(format!("{}.json", folder_name(scope)));
        StoreFile { dir, path }
    }

    /// The file's version now; none when there is no file (an empty store).
    pub(super) fn stamp(&self) -> Result<Option<Stamp>, String> {
        match fs::metadata(&self.path) {
            Ok(meta) => Ok(Some(Stamp::of(&meta))),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.why(&e.to_string())),
        }
    }

    /// The entries and the version they were read from; no file is an empty store.
    pub(super) fn read(&self) -> Result<(Entries, Option<Stamp>), String> {
        let mut file = match File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok((Entries::new(), None)),
            Err(e) => return Err(self.why(&e.to_string())),
        };
        // The stamp of the open file, not of the path: a rename in between cannot pair
        // one version's stamp with another's entries.
        let meta = file.metadata().map_err(|e| self.why(&e.to_string()))?;
        let mut text = String::new();
        file.read_to_string(&mut text)
            .map_err(|e| self.why(&e.to_string()))?;
        let body: Body = serde_json::from_str(&text)
            .map_err(|e| self.why(&format!("not a wasmgate store file ({e})")))?;
        if body.wasmgate_store != FORMAT {
            return Err(self.why(&format!(
                "written in store format {}, this gateway reads {FORMAT}",
                body.wasmgate_store
            )));
        }
        let mut entries = Entries::new();
        for (key, value) in body.entries {
            let bytes = match value {
                Value::Text(text) => text.into_bytes(),
                Value::Base64(b64) => STANDARD.decode(b64).map_err(|e| {
                    self.why(&format!("the value of \"{key}\" is not base64 ({e})"))
                })?,
            };
            entries.insert(key, bytes);
        }
        Ok((entries, Some(Stamp::of(&meta))))
    }

    /// Replaces the file with `entries` (a temporary file, synced, renamed over it) and
    /// returns the new version. On an error the old file is left as it was.
    pub(super) fn write(&self, entries: &Entries) -> Result<Option<Stamp>, String> {
        let body = Body {
            wasmgate_store: FORMAT,
            entries: entries
                .iter()
                .map(|(key, bytes)| {
                    let value = match std::str::from_utf8(bytes) {
                        Ok(text) => Value::Text(text.to_owned()),
                        Err(_) => Value::Base64(STANDARD.encode(bytes)),
                    };
                    (key.clone(), value)
                })
                .collect(),
        };
        let text = serde_json::to_vec_pretty(&body).map_err(|e| self.why(&e.to_string()))?;
        let tmp = self.dir.join(temp_name(&self.path));
        let written = (|| {
            // Tests run as root too, where permissions cannot make a write fail.
            #[cfg(test)]
            if self.dir.join(FAIL_WRITES).exists() {
                return Err(std::io::Error::other("writes fail here (test)"));
            }
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            file.write_all(&text)?;
            file.sync_all()?;
            fs::rename(&tmp, &self.path)
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(self.why(&e.to_string()));
        }
        self.stamp()
    }

    /// Creates the plugin's folder (only its owner may read it: it holds every
    /// principal's data) and locks it against other writers, in this process or another
    /// sharing `data_dir`, until the returned file is dropped.
    pub(super) fn lock(&self) -> Result<File, String> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(|e| format!("cannot create {}: {e}", self.dir.display()))?;
        let path = self.dir.join(".lock");
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        file.lock()
            .map_err(|e| format!("cannot lock {}: {e}", path.display()))?;
        Ok(file)
    }

    fn why(&self, what: &str) -> String {
        format!("{}: {what}", self.path.display())
    }
}

/// In tests, a file of this name in a plugin's folder makes every write there fail.
#[cfg(test)]
pub(super) const FAIL_WRITES: &str = "fail-writes";

/// A temporary file's name beside `path`, unique in this process and among processes.
fn temp_name(path: &Path) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    format!(".{name}.{}.{n}.tmp", std::process::id())
}

/// A name as one path component: letters, digits, `-` and `_` stay, every other byte
/// (`/`, `.`, spaces, non-ASCII) becomes `%XX`, so that no two names share a folder and
/// none leaves `data_dir`.
fn folder_name(name: &str) -> String {
    if name.is_empty() {
        // Encoding never yields a lone `%`: no other name gets this folder.
        return "%".into();
    }
    let mut out = String::with_capacity(name.len());
    for byte in name.bytes() {
        match byte {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' => out.push(byte as char),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::folder_name;

    #[test]
    fn folder_names_stay_inside_and_apart() {
        assert_eq!(folder_name("notes"), "notes");
        assert_eq!(folder_name("../x"), "%2E%2E%2Fx");
        assert_eq!(folder_name("a b"), "a%20b");
        assert_ne!(folder_name("a%20b"), folder_name("a b"));
        assert_eq!(folder_name(""), "%");
    }
}
