//! `pin`: pins the definitions of tools and prompts when first seen (a sha256 of each in
//! `pins.json`, in the granted folder `dir`), and flags a changed one (a warning naming
//! the old and new hash, the new definition kept in `pending.json`) or, with `block`,
//! hides it until approved: by `wasmgate pins approve NAME` or the config line `approve`.
//!
//! Config: `dir` (guest path, default `/pins`), `block` (`"true"` hides changed entries),
//! `approve` (`NAME=SHA256,...`).

mod pinning;
mod store;

use std::path::Path;

use wasmgate_plugin::middleware::{Edit, Interest, Level, ListView, Middleware, config, log};

struct Pin;

impl Middleware for Pin {
    fn interest() -> Interest {
        Interest::new().lists(["tools/list", "prompts/list"])
    }

    fn on_list(list: ListView) -> Vec<Edit> {
        let Some(kind) = list.method().strip_suffix("/list") else {
            return Vec::new();
        };
        let dir = config("dir").unwrap_or_else(|| "/pins".into());
        let dir = Path::new(&dir);
        let block = config("block").is_some_and(|b| b == "true");
        let (approvals, bad) = pinning::parse_approvals(&config("approve").unwrap_or_default());
        for part in bad {
            log(
                Level::Warning,
                format!("approve: `{part}` is not NAME=SHA256 (64 hex digits); ignored"),
            );
        }
        // Without its files it cannot tell a change: it says so and lets the list through.
        let (mut pins, mut pending) = match store::load(dir) {
            Ok(files) => files,
            Err(why) => {
                log(Level::Error, format!("{why}; the list is not reviewed"));
                return Vec::new();
            }
        };
        let entries: Vec<_> = list
            .entries()
            .iter()
            .map(|e| (e.name.clone(), e.definition.clone()))
            .collect();
        let review = pinning::review(kind, &entries, &mut pins, &mut pending, &approvals, block);
        for note in &review.notes {
            log(Level::Info, note);
        }
        for warning in &review.warnings {
            log(Level::Warning, warning);
        }
        if review.dirty
            && let Err(why) = store::save(dir, &pins, &pending)
        {
            log(Level::Error, why);
        }
        review.hidden.iter().map(Edit::hide).collect()
    }
}

wasmgate_plugin::export_middleware!(Pin);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use wasmgate_plugin::middleware::Entry;
    use wasmgate_plugin::testing;

    fn tools(description: &str) -> ListView {
        let definition = json!({"name": "x", "description": description, "inputSchema": {}});
        let entry = Entry {
            name: "s__x".into(),
            route: Some("s".into()),
            definition,
        };
        ListView::new("tools/list", vec![entry])
    }

    #[test]
    fn the_hook_pins_then_hides_a_change_until_the_config_approves_it() {
        let dir = std::env::temp_dir().join(format!("pin-hook-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        testing::set_config("dir", dir.to_str().unwrap());
        testing::set_config("block", "true");
        assert!(Pin::on_list(tools("a")).is_empty());
        assert!(dir.join("pins.json").is_file());
        testing::take_logs();

        assert_eq!(Pin::on_list(tools("b")), [Edit::hide("s__x")]);
        let logs = testing::take_logs();
        assert!(
            logs.iter()
                .any(|(level, line)| *level == Level::Warning && line.contains("`s__x` changed")),
            "{logs:?}"
        );
        let pending: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("pending.json")).unwrap()).unwrap();
        let hash = pending["tools"]["s__x"]["hash"].as_str().unwrap();
        assert_eq!(pending["tools"]["s__x"]["definition"]["description"], "b");

        testing::set_config("approve", &format!("s__x={hash}"));
        assert!(Pin::on_list(tools("b")).is_empty());
        let pins = std::fs::read_to_string(dir.join("pins.json")).unwrap();
        assert!(pins.contains(hash), "{pins}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
