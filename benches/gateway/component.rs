//! New versions of a plugin file: other bytes for the same component, written
//! the way builds and editors write files.

use std::path::Path;
use std::time::Instant;

use serde_json::{Map, Value};

use crate::{Paths, Result};

#[path = "../../tests/gateway/custom_section.rs"]
mod custom_section;

pub use custom_section::with_custom_section;

/// The bench plugin's bytes (`Paths::plugin`), or (`Err`) the results of a section skipped without it.
pub fn echo_plugin(
    paths: &Paths,
    section: &str,
) -> std::result::Result<Vec<u8>, Map<String, Value>> {
    std::fs::read(&paths.plugin).map_err(|e| {
        crate::skipped(
            section,
            format!("{}: {e} (build the test plugins)", paths.plugin.display()),
        )
    })
}

/// Writes `bytes` to `path` the way cargo and editors replace a file: a temporary
/// file in the same directory (a name the gateway ignores), then a rename over
/// `path`, so that a reader never sees half a file. Returns the time of the rename.
pub fn replace_file(path: &Path, bytes: &[u8]) -> Result<Instant> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("plugin");
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    std::fs::write(&tmp, bytes).map_err(|e| format!("{}: {e}", tmp.display()))?;
    let renamed = Instant::now();
    std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(renamed)
}
