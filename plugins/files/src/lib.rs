//! `files`: list, read and write files under one directory the host grants.
//!
//! The plugin uses plain `std::fs`; WASI maps the guest paths onto the
//! directories preopened by an `allow_dirs` grant, and the host, not this
//! code, is what enforces read-only grants and the edges of the sandbox.
//! Every OS error becomes a `failed` result carrying the OS message.

mod paths;

use paths::Resolved;
use plugin_kit::{
    CallResult, Guest, ToolInfo, ToolInfoExt, args, structured, text, tool, unknown_tool,
};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::fs;

struct Files;

#[derive(Deserialize)]
struct PathArgs {
    path: String,
}

#[derive(Deserialize)]
struct ListArgs {
    #[serde(default = "dot")]
    path: String,
}

fn dot() -> String {
    ".".into()
}

#[derive(Deserialize)]
struct WriteArgs {
    path: String,
    text: String,
}

#[derive(Serialize)]
struct Entry {
    name: String,
    /// "file", "dir", "symlink" or "other".
    kind: &'static str,
    size: u64,
}

impl Guest for Files {
    fn list_tools() -> Vec<ToolInfo> {
        let path = json!({
            "type": "string",
            "description": "Path relative to the root (an absolute path must lie inside it)",
        });
        let dir = json!({
            "type": "string",
            "default": ".",
            "description": "Directory relative to the root; `.` for the root itself",
        });
        let contents = json!({"type": "string", "description": "The new contents"});
        let reads = json!({"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false});
        let overwrites = json!({
            "readOnlyHint": false,
            "destructiveHint": true,
            "idempotentHint": true,
            "openWorldHint": false,
        });
        vec![
            tool(
                "list",
                "Lists a directory under the root: name, kind and size of each entry, by name.",
                json!({"path": dir}),
                &[],
            )
            .title("List directory")
            .output_schema(listing_schema())
            .annotations(reads.clone()),
            tool(
                "read",
                "Reads a UTF-8 text file under the root.",
                json!({"path": path}),
                &["path"],
            )
            .title("Read file")
            .annotations(reads),
            tool(
                "write",
                "Writes `text` to a file under the root, creating it or replacing its contents. \
                 The parent directory must exist.",
                json!({"path": path, "text": contents}),
                &["path", "text"],
            )
            .title("Write file")
            .annotations(overwrites),
        ]
    }

    fn call_tool(name: String, arguments: String) -> CallResult {
        match name.as_str() {
            "list" => {
                let a: ListArgs = args(&arguments)?;
                list(&Resolved::new(&a.path)?)
            }
            "read" => {
                let a: PathArgs = args(&arguments)?;
                let p = Resolved::new(&a.path)?;
                fs::read_to_string(&p.full)
                    .map(text)
                    .map_err(|e| p.error("read", e))
            }
            "write" => {
                let a: WriteArgs = args(&arguments)?;
                let p = Resolved::new(&a.path)?;
                fs::write(&p.full, &a.text).map_err(|e| p.error("write", e))?;
                Ok(text(format!("wrote {} bytes to {}", a.text.len(), p.shown)))
            }
            _ => Err(unknown_tool(&name)),
        }
    }
}

fn list(dir: &Resolved) -> CallResult {
    let fail = |e| dir.error("list", e);
    let mut entries = Vec::new();
    for entry in fs::read_dir(&dir.full).map_err(fail)? {
        let entry = entry.map_err(fail)?;
        // symlink_metadata: report a link as a link, not as what it points to
        // (which may lie outside the grant).
        let meta = entry.path().symlink_metadata().map_err(fail)?;
        let kind = match meta.file_type() {
            t if t.is_dir() => "dir",
            t if t.is_file() => "file",
            t if t.is_symlink() => "symlink",
            _ => "other",
        };
        let name = entry.file_name().to_string_lossy().into_owned();
        entries.push(Entry {
            name,
            kind,
            size: meta.len(),
        });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    structured(&json!({"path": dir.shown, "entries": entries}))
}

fn listing_schema() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "entries": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "kind": {"enum": ["file", "dir", "symlink", "other"]},
                    "size": {"type": "integer", "minimum": 0},
                },
                "required": ["name", "kind", "size"],
            }},
        },
        "required": ["path", "entries"],
    })
}

plugin_kit::export!(Files);
