//! `guard`: a bundled middleware that refuses `tools/call` (and `prompts/get`) requests
//! whose arguments break its rules: a path outside a prefix (normalised lexically, so a
//! `..` that escapes counts as outside), a text matching or not matching a regex, a
//! number out of range.
//!
//! Config (`host.config`, strings): `rules`, a JSON list of
//! `{"tool": GLOB, "arg": NAME, "under": PREFIX, "matching": RE, "not_matching": RE,
//! "min": N, "max": N, "message": TEXT}` (`arg` and one check required; no `tool`: every
//! tool). A config that does not parse denies every request it hooks.

mod rules;

use std::sync::OnceLock;

use rules::Rule;
use wasmgate_plugin::middleware::{
    Interest, Level, Middleware, Request, RequestAction, config, log,
};

fn rules() -> Result<&'static [Rule], String> {
    static RULES: OnceLock<Result<Vec<Rule>, String>> = OnceLock::new();
    RULES
        .get_or_init(|| {
            let parsed = rules::parse(&config("rules").unwrap_or_else(|| "[]".into()));
            if let Err(why) = &parsed {
                log(Level::Error, format!("guard: bad config: {why}"));
            }
            parsed
        })
        .as_deref()
        .map_err(|why| format!("guard middleware misconfigured: {why}"))
}

struct Guard;

impl Middleware for Guard {
    fn interest() -> Interest {
        Interest::new().requests(["tools/call", "prompts/get"])
    }

    fn on_request(req: Request) -> RequestAction {
        let rules = match rules() {
            Ok(rules) => rules,
            Err(why) => return RequestAction::deny(why),
        };
        let (Some(target), Some(arguments)) = (req.target(), req.arguments()) else {
            return RequestAction::Pass;
        };
        // Prompt arguments are strings by the protocol: `"5"` is checked as 5 there.
        let prompt = req.method() == "prompts/get";
        match rules
            .iter()
            .find_map(|rule| rule.check(target, arguments, prompt))
        {
            Some(message) => RequestAction::deny(message),
            None => RequestAction::Pass,
        }
    }
}

wasmgate_plugin::export_middleware!(Guard);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use wasmgate_plugin::middleware::Context;
    use wasmgate_plugin::testing::set_config;

    // One test: the rules are parsed once per process from the config set first.
    #[test]
    fn refuses_what_breaks_a_rule_and_passes_the_rest() {
        set_config(
            "rules",
            r#"[{"tool":"files_*","arg":"path","under":"/data"}]"#,
        );
        let req = |method: &str, target: &str, path: &str| {
            Request::new(
                Context::new(method, Some(target)),
                json!({"name": target, "arguments": {"path": path}}),
            )
        };
        assert_eq!(
            Guard::on_request(req("tools/call", "files_read", "/data/../etc")),
            RequestAction::deny("argument `path` of `files_read` must be a path under /data")
        );
        assert!(matches!(
            Guard::on_request(req("prompts/get", "files_p", "/etc")),
            RequestAction::Deny(_)
        ));
        assert_eq!(
            Guard::on_request(req("tools/call", "files_read", "/data/a")),
            RequestAction::Pass
        );
        let bare = Request::new(Context::new("tools/call", Some("files_read")), json!({}));
        assert_eq!(Guard::on_request(bare), RequestAction::Pass);
    }
}
