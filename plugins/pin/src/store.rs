//! `pins.json` and `pending.json` in the granted folder: read whole, written whole through
//! a temporary file and a rename, so a reader (`wasmgate pins`) never sees half a file.

use std::fs;
use std::io::ErrorKind;
use std::path::Path;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::pinning::{Pending, Pins};

pub const PINS: &str = "pins.json";
pub const PENDING: &str = "pending.json";

/// The pins and pending changes kept in `dir`; a missing file is empty.
pub fn load(dir: &Path) -> Result<(Pins, Pending), String> {
    Ok((read(&dir.join(PINS))?, read(&dir.join(PENDING))?))
}

fn read<T: DeserializeOwned + Default>(path: &Path) -> Result<T, String> {
    match fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map_err(|e| format!("{} is not a pin file: {e}", path.display())),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(T::default()),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// Writes both files into `dir`.
pub fn save(dir: &Path, pins: &Pins, pending: &Pending) -> Result<(), String> {
    write(dir, PINS, pins)?;
    write(dir, PENDING, pending)
}

fn write<T: Serialize>(dir: &Path, name: &str, value: &T) -> Result<(), String> {
    let mut text = serde_json::to_string_pretty(value).expect("maps of strings serialize");
    text.push('\n');
    let temp = dir.join(format!(".{name}.tmp"));
    let path = dir.join(name);
    fs::write(&temp, text)
        .and_then(|()| fs::rename(&temp, &path))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}
