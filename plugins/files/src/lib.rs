//! `files`: list, read and write files under one directory the host grants.
//!
//! The plugin uses plain `std::fs`; WASI maps the guest paths onto the
//! directories preopened by an `allow_dirs` grant, and the host, not this
//! code, is what enforces read-only grants and the edges of the sandbox.
//! Every OS error becomes a `failed` result carrying the OS message.

mod paths;

use paths::Resolved;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fs;
use wasmgate_plugin::{Annotations, Plugin, Structured, Tool, ToolError};

#[derive(Deserialize, JsonSchema)]
struct PathArgs {
    /// Path relative to the root (an absolute path must lie inside it)
    path: String,
}

#[derive(Deserialize, JsonSchema)]
struct ListArgs {
    /// Directory relative to the root; `.` for the root itself
    #[serde(default = "dot")]
    path: String,
}

fn dot() -> String {
    ".".into()
}

#[derive(Deserialize, JsonSchema)]
struct WriteArgs {
    /// Path relative to the root (an absolute path must lie inside it)
    path: String,
    /// The new contents
    text: String,
}

#[derive(Serialize, JsonSchema)]
struct Listing {
    path: String,
    entries: Vec<Entry>,
}

#[derive(Serialize, JsonSchema)]
struct Entry {
    name: String,
    kind: Kind,
    size: u64,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

fn plugin() -> Plugin {
    let reads = Annotations {
        read_only_hint: Some(true),
        idempotent_hint: Some(true),
        open_world_hint: Some(false),
        ..Annotations::default()
    };
    let overwrites = Annotations {
        read_only_hint: Some(false),
        destructive_hint: Some(true),
        idempotent_hint: Some(true),
        open_world_hint: Some(false),
    };
    Plugin::new()
        .tool(
            Tool::new(
                "list",
                "Lists a directory under the root: name, kind and size of each entry, by name.",
                list,
            )
            .title("List directory")
            .annotations(reads.clone()),
        )
        .tool(
            Tool::new("read", "Reads a UTF-8 text file under the root.", read)
                .title("Read file")
                .annotations(reads),
        )
        .tool(
            Tool::new(
                "write",
                "Writes `text` to a file under the root, creating it or replacing its contents. \
                 The parent directory must exist.",
                write,
            )
            .title("Write file")
            .annotations(overwrites),
        )
}

wasmgate_plugin::export!(plugin);

fn read(a: PathArgs) -> Result<String, ToolError> {
    let p = Resolved::new(&a.path)?;
    fs::read_to_string(&p.full).map_err(|e| p.error("read", e))
}

fn write(a: WriteArgs) -> Result<String, ToolError> {
    let p = Resolved::new(&a.path)?;
    fs::write(&p.full, &a.text).map_err(|e| p.error("write", e))?;
    Ok(format!("wrote {} bytes to {}", a.text.len(), p.shown))
}

fn list(a: ListArgs) -> Result<Structured<Listing>, ToolError> {
    let dir = Resolved::new(&a.path)?;
    let fail = |e| dir.error("list", e);
    let mut entries = Vec::new();
    for entry in fs::read_dir(&dir.full).map_err(fail)? {
        let entry = entry.map_err(fail)?;
        // symlink_metadata: report a link as a link, not as what it points to
        // (which may lie outside the grant).
        let meta = entry.path().symlink_metadata().map_err(fail)?;
        let kind = match meta.file_type() {
            t if t.is_dir() => Kind::Dir,
            t if t.is_file() => Kind::File,
            t if t.is_symlink() => Kind::Symlink,
            _ => Kind::Other,
        };
        let name = entry.file_name().to_string_lossy().into_owned();
        entries.push(Entry {
            name,
            kind,
            size: meta.len(),
        });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Structured::new(Listing {
        path: dir.shown,
        entries,
    }))
}
