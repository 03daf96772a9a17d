//! `rename`: a bundled middleware that changes how tools and prompts are listed: their
//! name, title, description and annotations, per gateway name.
//!
//! Config (`host.config`, strings): `tools`, a JSON object from gateway name to
//! `{"name": NEW, "title": T, "description": D, "annotations": {...}}` (each optional).
//! Hooks `tools/list` and `prompts/list` only. A config that does not parse fails the
//! list hook (the middleware's `on_error` then decides), with the reason in the log.

mod overrides;

use std::sync::OnceLock;

use overrides::Overrides;
use wasmgate_plugin::middleware::{Edit, Interest, Level, ListView, Middleware, config, log};

fn overrides() -> &'static Overrides {
    static OVERRIDES: OnceLock<Overrides> = OnceLock::new();
    OVERRIDES.get_or_init(|| {
        match Overrides::parse(&config("tools").unwrap_or_else(|| "{}".into())) {
            Ok(parsed) => parsed,
            Err(why) => {
                log(Level::Error, format!("rename: bad config: {why}"));
                // A trap: the gateway fails the hook as `on_error` says.
                panic!("rename middleware misconfigured: {why}");
            }
        }
    })
}

struct Rename;

impl Middleware for Rename {
    fn interest() -> Interest {
        Interest::new().lists(["tools/list", "prompts/list"])
    }

    fn on_list(list: ListView) -> Vec<Edit> {
        overrides().edits(&list)
    }
}

wasmgate_plugin::export_middleware!(Rename);
