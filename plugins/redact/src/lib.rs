//! `redact`: a bundled middleware that masks secrets (AWS keys, GitHub and Slack tokens,
//! private keys, JWTs, bearer tokens, `sk-` keys) and e-mail addresses in every string of
//! the results of `tools/call`, `resources/read` and `prompts/get`, and on request in the
//! arguments going out and in sampling results going to servers.
//!
//! Config (`host.config`, strings): `builtin` (comma list, default `secrets,emails`),
//! `patterns` (JSON list of regexes; a group named `secret` is masked alone), `mask`
//! (default `[REDACTED]`; `{kind}` in it names the kind), `arguments = "true"`,
//! `sampling = "true"`. A config that does not parse denies what it would have masked.

mod mask;

use std::sync::OnceLock;

use mask::{DEFAULT_BUILTIN, Masker};
use wasmgate_plugin::middleware::{
    Denial, Interest, Level, Middleware, Outcome, Request, RequestAction, Response, ResultAction,
    config, config_or, log,
};

const RESULTS: [&str; 3] = ["tools/call", "resources/read", "prompts/get"];
const SAMPLING: &str = "sampling/createMessage";

fn flag(key: &str) -> bool {
    config(key).is_some_and(|v| v.trim() == "true")
}

/// The masker of this instance's config, built once (config does not change under a
/// running instance).
fn masker() -> Result<&'static Masker, String> {
    static MASKER: OnceLock<Result<Masker, String>> = OnceLock::new();
    MASKER
        .get_or_init(|| {
            let built = Masker::new(
                &config_or("builtin", DEFAULT_BUILTIN),
                config("patterns").as_deref(),
                &config_or("mask", "[REDACTED]"),
            );
            if let Err(why) = &built {
                log(Level::Error, format!("redact: bad config: {why}"));
            }
            built
        })
        .as_ref()
        .map_err(|why| format!("redact middleware misconfigured: {why}"))
}

struct Redact;

impl Middleware for Redact {
    fn interest() -> Interest {
        let mut results: Vec<&str> = RESULTS.to_vec();
        if flag("sampling") {
            results.push(SAMPLING);
        }
        let requests: &[&str] = if flag("arguments") {
            &["tools/call", "prompts/get"]
        } else {
            &[]
        };
        Interest::new()
            .requests(requests.iter().copied())
            .results(results)
    }

    fn on_request(req: Request) -> RequestAction {
        let masker = match masker() {
            Ok(masker) => masker,
            Err(why) => return RequestAction::deny(why),
        };
        let mut params = req.params().clone();
        let changed = params
            .get_mut("arguments")
            .is_some_and(|arguments| masker.value(arguments));
        if changed {
            RequestAction::replace(params)
        } else {
            RequestAction::Pass
        }
    }

    fn on_result(res: Response) -> ResultAction {
        let masker = match masker() {
            Ok(masker) => masker,
            Err(why) => return ResultAction::deny(why),
        };
        match res.into_outcome() {
            Outcome::Success(mut result) => {
                if masker.value(&mut result) {
                    ResultAction::replace(result)
                } else {
                    ResultAction::Pass
                }
            }
            // An error's message and data may quote a secret too: the masked error goes
            // back as a denial with the same code.
            Outcome::Failure(mut error) => {
                if !masker.value(&mut error) {
                    return ResultAction::Pass;
                }
                let message = error["message"].as_str().unwrap_or("error").to_owned();
                let mut denial = Denial::new(message);
                denial.code = error["code"].as_i64().and_then(|c| i32::try_from(c).ok());
                if let Some(data) = error.get("data") {
                    denial = denial.data(data);
                }
                ResultAction::Deny(denial)
            }
        }
    }
}

wasmgate_plugin::export_middleware!(Redact);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use serde_json::json;
    use std::time::Duration;
    use wasmgate_plugin::middleware::Context;
    use wasmgate_plugin::testing::set_config;

    fn call(arguments: Value) -> Request {
        Request::new(
            Context::new("tools/call", Some("gh_get")),
            json!({"name": "get", "arguments": arguments}),
        )
    }

    // One test: the masker is built once per process from the config set first.
    #[test]
    fn masks_results_and_arguments_as_configured() {
        set_config("arguments", "true");
        set_config("mask", "<{kind}>");
        let interest = Redact::interest();
        assert_eq!(interest.requests, ["tools/call", "prompts/get"]);
        assert_eq!(interest.results, RESULTS);
        let res = Response::new(
            call(json!({})),
            Outcome::Success(json!({"content": [{"type": "text", "text": "a@b.io"}]})),
            Duration::ZERO,
        );
        assert_eq!(
            Redact::on_result(res),
            ResultAction::replace(json!({"content": [{"type": "text", "text": "<email>"}]}))
        );
        let failed = Response::new(
            call(json!({})),
            Outcome::Failure(json!({"message": "a@b.io"})),
            Duration::ZERO,
        );
        assert_eq!(
            Redact::on_result(failed),
            ResultAction::Deny(Denial::new("<email>"))
        );
        let failed = Response::new(
            call(json!({})),
            Outcome::Failure(json!({"code": -32000, "message": "no", "data": {"by": "a@b.io"}})),
            Duration::ZERO,
        );
        assert_eq!(
            Redact::on_result(failed),
            ResultAction::Deny(
                Denial::new("no")
                    .code(-32000)
                    .data(&json!({"by": "<email>"}))
            )
        );
        let plain = Response::new(
            call(json!({})),
            Outcome::Failure(json!({"code": -32000, "message": "no"})),
            Duration::ZERO,
        );
        assert_eq!(Redact::on_result(plain), ResultAction::Pass);
        assert_eq!(
            Redact::on_request(call(json!({"q": "AKIAIOSFODNN7EXAMPLE", "n": 1}))),
            RequestAction::replace(json!({"name": "get", "arguments": {"q": "<aws>", "n": 1}}))
        );
        assert_eq!(
            Redact::on_request(call(json!({"q": "plain"}))),
            RequestAction::Pass
        );
    }
}
