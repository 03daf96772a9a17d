//! `hostile`: a plugin that tries to reach past its sandbox, one tool per attack, so that
//! the gateway's tests can show each refused. Every tool reports what it got (contents, a
//! status, an error) and leaves the judging to the test.

use plugin_kit::{
    CallResult, Guest, ToolInfo, args, failed, http, structured, text, tool, unknown_tool,
};
use serde::Deserialize;
use serde_json::json;

struct Hostile;

#[derive(Deserialize)]
struct Link {
    target: String,
    link: String,
}

#[derive(Deserialize)]
struct Rename {
    from: String,
    to: String,
}

#[derive(Deserialize)]
struct PathArg {
    path: String,
}

#[derive(Deserialize)]
struct Url {
    url: String,
}

#[derive(Deserialize)]
struct OpenMany {
    path: String,
    n: u32,
    #[serde(default)]
    hold_ms: u64,
}

impl Guest for Hostile {
    fn list_tools() -> Vec<ToolInfo> {
        let string = |description: &str| json!({"type": "string", "description": description});
        vec![
            tool(
                "symlink",
                "Makes a symbolic link at guest path `link` whose contents are `target`.",
                json!({"target": string("link contents"), "link": string("guest path")}),
                &["target", "link"],
            ),
            tool(
                "rename",
                "Renames guest path `from` to `to`.",
                json!({"from": string("guest path"), "to": string("guest path")}),
                &["from", "to"],
            ),
            tool(
                "read",
                "Returns the text of the file at guest path `path`.",
                json!({"path": string("guest path")}),
                &["path"],
            ),
            tool(
                "http",
                "GETs `url`; returns the status and body, or fails with the error.",
                json!({"url": string("http or https URL")}),
                &["url"],
            ),
            tool(
                "open_many",
                "Opens the file at `path` `n` times, keeping every handle for `hold_ms`; \
                 returns how many opened, and the first error.",
                json!({"path": string("guest path"), "n": {"type": "integer", "minimum": 0},
                       "hold_ms": {"type": "integer", "minimum": 0}}),
                &["path", "n"],
            ),
        ]
    }

    fn call_tool(name: String, arguments: String) -> CallResult {
        let a = arguments.as_str();
        match name.as_str() {
            "symlink" => {
                let Link { target, link } = args(a)?;
                symlink(&target, &link).map_err(|e| failed(format!("symlink {link}: {e}")))?;
                Ok(text("linked"))
            }
            "rename" => {
                let Rename { from, to } = args(a)?;
                std::fs::rename(&from, &to).map_err(|e| failed(format!("rename {from}: {e}")))?;
                Ok(text("renamed"))
            }
            "read" => {
                let PathArg { path } = args(a)?;
                std::fs::read_to_string(&path)
                    .map(text)
                    .map_err(|e| failed(format!("read {path}: {e}")))
            }
            "http" => structured(&http::get(&args::<Url>(a)?.url, 100_000)?),
            "open_many" => {
                let OpenMany { path, n, hold_ms } = args(a)?;
                let mut kept = Vec::new();
                let mut first_error = None;
                for _ in 0..n {
                    match std::fs::File::open(&path) {
                        Ok(file) => kept.push(file),
                        Err(e) => {
                            first_error = Some(e.to_string());
                            break;
                        }
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(hold_ms));
                structured(&json!({"opened": kept.len(), "error": first_error}))
            }
            _ => Err(unknown_tool(&name)),
        }
    }
}

/// `symlink_at` on the preopen that holds `link`: std has no stable symlink on WASI.
fn symlink(target: &str, link: &str) -> Result<(), String> {
    for (dir, guest) in wasip2::filesystem::preopens::get_directories() {
        let prefix = format!("{}/", guest.trim_end_matches('/'));
        if let Some(rest) = link.strip_prefix(&prefix) {
            return dir
                .symlink_at(target, rest)
                .map_err(|code| format!("{code:?}"));
        }
    }
    Err("no granted directory holds it".into())
}

plugin_kit::export!(Hostile);
