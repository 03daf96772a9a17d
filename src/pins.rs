//! `wasmgate pins list|approve`: reads and edits the files of the bundled `pin`
//! middleware (`pins.json`, `pending.json`) in the folder its `[[middleware]]` entry grants.
//!
//! The folder is found in the config file itself: the entry (`use = "pin"`, or the one
//! `--middleware` names), its `config.dir` (guest path, default `/pins`) and the
//! `allow_dirs` grant that maps it to a host folder.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where `pin` keeps its files unless its config says `dir`.
const DEFAULT_DIR: &str = "/pins";
const PINS: &str = "pins.json";
const PENDING: &str = "pending.json";

#[derive(Subcommand, Debug)]
pub enum PinsCommand {
    /// Show the pinned definitions and the changed ones waiting for approval.
    List {
        /// The `[[middleware]]` entry (by name) whose pins to show; needed only when the
        /// config has more than one `pin`.
        #[arg(long, value_name = "MW")]
        middleware: Option<String>,
    },
    /// Approve NAME's changed definition: its pending hash becomes its pin.
    Approve {
        /// The tool or prompt, by its gateway name (as `pins list` shows it).
        name: String,
        #[arg(long, value_name = "MW")]
        middleware: Option<String>,
    },
}

/// Why a `pins` command could not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum PinsError {
    #[error("wasmgate pins needs the gateway's config: pass --config FILE")]
    NoConfig,
    #[error("cannot read {path}: {reason}")]
    Config { path: PathBuf, reason: String },
    #[error("{path} has no [[middleware]] entry {which}")]
    NoPin { path: PathBuf, which: String },
    #[error("{path} has several pin middleware ({names}); choose one with --middleware")]
    Several { path: PathBuf, names: String },
    #[error(
        "middleware `{name}` grants no folder for its dir \"{dir}\": add allow_dirs = [{{ host = \"...\", guest = \"{dir}\", mode = \"rw\" }}]"
    )]
    NoGrant { name: String, dir: String },
    #[error("{path}: {reason}")]
    File { path: PathBuf, reason: String },
    #[error("nothing of `{name}` waits for approval in {path}{pinned}")]
    NotPending {
        name: String,
        path: PathBuf,
        pinned: String,
    },
}

/// Runs `command` on the config at `config`; prints what it did.
pub fn run(command: PinsCommand, config: Option<&Path>) -> Result<(), PinsError> {
    let config = config.ok_or(PinsError::NoConfig)?;
    let (named, approving) = match command {
        PinsCommand::List { middleware } => (middleware, None),
        PinsCommand::Approve { name, middleware } => (middleware, Some(name)),
    };
    let folder = locate(config, named.as_deref())?;
    let text = match approving {
        None => show(&folder)?,
        Some(name) => approve(&folder, &name)?,
    };
    print!("{text}");
    Ok(())
}

/// A pin middleware's host folder, and the entry it comes from.
#[derive(Debug)]
pub struct Folder {
    pub middleware: String,
    pub path: PathBuf,
}

/// The part of a `[[middleware]]` entry that says where its files are.
#[derive(Deserialize)]
struct Entry {
    name: Option<String>,
    #[serde(rename = "use")]
    uses: Option<String>,
    path: Option<String>,
    #[serde(default)]
    config: BTreeMap<String, toml::Value>,
    #[serde(default)]
    allow_dirs: Vec<Grant>,
}

#[derive(Deserialize)]
struct Grant {
    host: String,
    guest: String,
}

#[derive(Deserialize)]
struct File {
    #[serde(default)]
    middleware: Vec<Entry>,
}

impl Entry {
    /// Its name as the gateway gives it: `name`, else `use`, else the file's stem.
    fn name(&self) -> String {
        let stem = || {
            let path = Path::new(self.path.as_deref()?);
            Some(path.file_stem()?.to_string_lossy().into_owned())
        };
        self.name
            .clone()
            .or_else(|| self.uses.clone())
            .or_else(stem)
            .unwrap_or_default()
    }
}

/// Finds the pin middleware (`named`, or the one with `use = "pin"`) in the config file
/// at `config` and the host folder its `dir` is granted at.
pub fn locate(config: &Path, named: Option<&str>) -> Result<Folder, PinsError> {
    let unreadable = |reason: String| PinsError::Config {
        path: config.to_owned(),
        reason,
    };
    let text = std::fs::read_to_string(config).map_err(|e| unreadable(e.to_string()))?;
    let file: File = toml::from_str(&text).map_err(|e| unreadable(e.to_string()))?;
    let mut found: Vec<&Entry> = file
        .middleware
        .iter()
        .filter(|entry| match named {
            Some(name) => entry.name() == name,
            None => entry.uses.as_deref() == Some("pin"),
        })
        .collect();
    let entry = match found.len() {
        0 => {
            return Err(PinsError::NoPin {
                path: config.to_owned(),
                which: named.map_or_else(
                    || "with use = \"pin\" (or name one with --middleware)".to_owned(),
                    |n| format!("named `{n}`"),
                ),
            });
        }
        1 => found.remove(0),
        _ => {
            let names: Vec<String> = found.iter().map(|e| e.name()).collect();
            return Err(PinsError::Several {
                path: config.to_owned(),
                names: names.join(", "),
            });
        }
    };
    let dir = match entry.config.get("dir") {
        Some(toml::Value::String(dir)) => dir.clone(),
        _ => DEFAULT_DIR.to_owned(),
    };
    let base = config.parent().unwrap_or(Path::new("."));
    let path = host_path(&entry.allow_dirs, &dir, base).ok_or_else(|| PinsError::NoGrant {
        name: entry.name(),
        dir: dir.clone(),
    })?;
    Ok(Folder {
        middleware: entry.name(),
        path,
    })
}

/// Where the guest path `dir` lies on the host: under the grant whose guest path is it or
/// holds it (relative hosts are relative to `base`, the config's folder).
fn host_path(grants: &[Grant], dir: &str, base: &Path) -> Option<PathBuf> {
    let dir = dir.trim_end_matches('/');
    grants.iter().find_map(|grant| {
        let guest = grant.guest.trim_end_matches('/');
        let rest = dir.strip_prefix(guest)?;
        if !(rest.is_empty() || rest.starts_with('/')) {
            return None;
        }
        let host = match grant.host.strip_prefix("~/") {
            Some(home) => PathBuf::from(std::env::var_os("HOME")?).join(home),
            None => base.join(&grant.host),
        };
        Some(host.join(rest.trim_start_matches('/')))
    })
}

/// `pins.json`: per list (`tools`, `prompts`), each name's approved sha256.
type Pins = BTreeMap<String, BTreeMap<String, String>>;
/// `pending.json`: per list, each name whose definition differs from its pin.
type Pending = BTreeMap<String, BTreeMap<String, Change>>;

#[derive(Serialize, Deserialize)]
struct Change {
    hash: String,
    pinned: String,
    definition: Value,
}

fn read<T: for<'de> Deserialize<'de> + Default>(path: &Path) -> Result<T, PinsError> {
    let failed = |reason: String| PinsError::File {
        path: path.to_owned(),
        reason,
    };
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| failed(e.to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(T::default()),
        Err(e) => Err(failed(e.to_string())),
    }
}

/// Writes `value` to `dir/name` through a temporary file and a rename, so that the
/// middleware never reads half a file.
fn write<T: Serialize>(dir: &Path, name: &str, value: &T) -> Result<(), PinsError> {
    let path = dir.join(name);
    let temp = dir.join(format!(".{name}.wasmgate-pins.tmp"));
    let mut text = serde_json::to_string_pretty(value).expect("maps of strings serialize");
    text.push('\n');
    std::fs::write(&temp, text)
        .and_then(|()| std::fs::rename(&temp, &path))
        .map_err(|e| PinsError::File {
            path,
            reason: e.to_string(),
        })
}

/// What `pins list` prints.
fn show(folder: &Folder) -> Result<String, PinsError> {
    let pins: Pins = read(&folder.path.join(PINS))?;
    let pending: Pending = read(&folder.path.join(PENDING))?;
    let mut out = format!(
        "pins of middleware `{}` in {}\n",
        folder.middleware,
        folder.path.display()
    );
    let pinned: Vec<_> = pins
        .iter()
        .flat_map(|(list, names)| names.iter().map(move |n| (list, n)))
        .collect();
    let _ = writeln!(out, "pinned: {}", pinned.len());
    for (list, (name, hash)) in pinned {
        let _ = writeln!(out, "  {list} {name} sha256 {hash}");
    }
    let waiting: Vec<_> = pending
        .iter()
        .flat_map(|(list, names)| names.iter().map(move |n| (list, n)))
        .collect();
    let _ = writeln!(out, "pending: {}", waiting.len());
    for (list, (name, change)) in waiting {
        let _ = writeln!(
            out,
            "  {list} {name} sha256 {} (pinned {}); approve: wasmgate pins approve {name}",
            change.hash, change.pinned
        );
    }
    Ok(out)
}

/// Moves `name`'s pending hash (in every list it waits in) into `pins.json`.
fn approve(folder: &Folder, name: &str) -> Result<String, PinsError> {
    let pins_path = folder.path.join(PINS);
    let pending_path = folder.path.join(PENDING);
    let mut pins: Pins = read(&pins_path)?;
    let mut pending: Pending = read(&pending_path)?;
    let mut out = String::new();
    for (list, waiting) in pending.iter_mut() {
        if let Some(change) = waiting.remove(name) {
            let _ = writeln!(
                out,
                "approved {list} `{name}`: sha256 {} (was {}) pinned in {}",
                change.hash,
                change.pinned,
                pins_path.display()
            );
            pins.entry(list.clone())
                .or_default()
                .insert(name.to_owned(), change.hash);
        }
    }
    if out.is_empty() {
        let pinned: Vec<String> = pins
            .iter()
            .filter_map(|(list, names)| Some(format!("{list} sha256 {}", names.get(name)?)))
            .collect();
        return Err(PinsError::NotPending {
            name: name.to_owned(),
            path: pending_path,
            pinned: if pinned.is_empty() {
                " (and it is not pinned either)".to_owned()
            } else {
                format!(" (pinned: {})", pinned.join(", "))
            },
        });
    }
    // The pin first: a crash between the two writes leaves a pending entry that is
    // already pinned, which the middleware drops at its next look.
    write(&folder.path, PINS, &pins)?;
    write(&folder.path, PENDING, &pending)?;
    out.push_str(
        "the gateway applies it at its next catalog change or config reload (the pin \
         middleware reads its files when it reviews a list)\n",
    );
    Ok(out)
}
