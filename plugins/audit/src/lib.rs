//! `audit`: one JSON line per finished request (time, principal, profile, client, era,
//! method, target, route, outcome, duration; arguments on request), appended to a file in
//! a granted folder.
//!
//! Config: `file` (guest path, default `/audit/audit.jsonl`), `arguments` (`"true"` logs
//! each call's arguments), `methods` (comma-separated MCP methods, default `*`: all).

mod record;

use std::fs::OpenOptions;
use std::io::Write;
use std::time::SystemTime;

use wasmgate_plugin::middleware::{
    Interest, Level, Middleware, Outcome, Response, ResultAction, config, log,
};

use record::{Call, Ended};

struct Audit;

impl Middleware for Audit {
    fn interest() -> Interest {
        let methods = config("methods").unwrap_or_else(|| "*".into());
        Interest::new().results(methods.split(',').map(str::trim).filter(|m| !m.is_empty()))
    }

    fn on_result(res: Response) -> ResultAction {
        let ctx = res.context();
        let call = Call {
            method: ctx.method.clone(),
            target: ctx.target.clone(),
            route: ctx.route.clone(),
            principal: ctx.principal.clone(),
            profile: ctx.profile.clone(),
            client_name: ctx.client_name.clone(),
            client_version: ctx.client_version.clone(),
            era: ctx.era.clone(),
            trace_id: ctx.trace_id.clone(),
        };
        let ended = match res.outcome() {
            Outcome::Success(result) => Ended::Success(result),
            Outcome::Failure(error) => Ended::Failure(error),
        };
        let arguments = config("arguments").is_some_and(|a| a == "true");
        let elapsed_us = u64::try_from(res.elapsed().as_micros()).unwrap_or(u64::MAX);
        let params = res.request().params();
        let mut line = record::line(
            &call,
            params,
            ended,
            elapsed_us,
            SystemTime::now(),
            arguments,
        );
        line.push('\n');
        let file = config("file").unwrap_or_else(|| "/audit/audit.jsonl".into());
        // One write of the whole line, in append mode: lines of concurrent instances
        // do not interleave.
        let written = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&file)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = written {
            log(Level::Error, format!("cannot append to {file}: {e}"));
        }
        ResultAction::Pass
    }
}

wasmgate_plugin::export_middleware!(Audit);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;
    use wasmgate_plugin::middleware::{Context, Request};
    use wasmgate_plugin::testing;

    #[test]
    fn each_result_appends_one_line_to_the_file() {
        let file = std::env::temp_dir().join(format!("audit-hook-{}.jsonl", std::process::id()));
        testing::set_config("file", file.to_str().unwrap());
        testing::set_config("arguments", "true");
        let params = json!({"name": "s__echo", "arguments": {"text": "hi"}});
        for text in ["a", "b"] {
            let request = Request::new(Context::new("tools/call", Some("s__echo")), params.clone());
            let outcome = Outcome::Success(json!({"content": [{"type": "text", "text": text}]}));
            let res = Response::new(request, outcome, Duration::from_micros(2500));
            assert_eq!(Audit::on_result(res), ResultAction::Pass);
        }
        let text = std::fs::read_to_string(&file).unwrap();
        std::fs::remove_file(&file).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(lines[1]["target"], "s__echo");
        assert_eq!(lines[1]["duration_ms"], 2.5);
        assert_eq!(lines[1]["arguments"], json!({"text": "hi"}));
        assert_eq!(lines[1]["outcome"], "ok");
    }
}
