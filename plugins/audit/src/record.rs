//! One audit line: what a finished request was, for whom, and how it ended, as JSON;
//! without files or host calls, so it is tested natively.

use std::time::SystemTime;

use serde_json::{Map, Value, json};

/// What the hook knows of a request (the fields of the WIT `context` it logs).
#[derive(Debug, Default, Clone)]
pub struct Call {
    pub method: String,
    pub target: Option<String>,
    pub route: Option<String>,
    pub principal: Option<String>,
    pub profile: Option<String>,
    pub client_name: Option<String>,
    pub client_version: Option<String>,
    pub era: String,
    pub trace_id: String,
}

/// How it ended: the result or the JSON-RPC error object.
pub enum Ended<'a> {
    Success(&'a Value),
    Failure(&'a Value),
}

/// The JSON line (without its newline) for `call`, ended as `ended` after `elapsed_us`,
/// at `now`; with `params`' `arguments` when `arguments` is on.
pub fn line(
    call: &Call,
    params: &Value,
    ended: Ended,
    elapsed_us: u64,
    now: SystemTime,
    arguments: bool,
) -> String {
    let mut line = Map::new();
    line.insert(
        "time".into(),
        json!(humantime::format_rfc3339_millis(now).to_string()),
    );
    let fields = [
        ("principal", &call.principal),
        ("profile", &call.profile),
        ("client", &call.client_name),
        ("client_version", &call.client_version),
    ];
    for (key, value) in fields {
        line.insert(key.into(), json!(value));
    }
    line.insert("era".into(), json!(call.era));
    line.insert("method".into(), json!(call.method));
    line.insert("target".into(), json!(call.target));
    line.insert("route".into(), json!(call.route));
    let (outcome, code) = outcome(ended);
    line.insert("outcome".into(), json!(outcome));
    if let Some(code) = code {
        line.insert("code".into(), code);
    }
    // Milliseconds with the microseconds kept: calls through a gateway are often < 1 ms.
    line.insert("duration_ms".into(), json!(elapsed_us as f64 / 1000.0));
    line.insert("trace_id".into(), json!(call.trace_id));
    if arguments {
        line.insert("arguments".into(), params.get("arguments").cloned().into());
    }
    Value::Object(line).to_string()
}

/// `ok`; `error` with the JSON-RPC code (none for a tool's error result); or `denied`
/// for an error a middleware made (its `data` says `middleware`).
fn outcome(ended: Ended) -> (&'static str, Option<Value>) {
    match ended {
        Ended::Success(result) => {
            if result.get("isError") == Some(&Value::Bool(true)) {
                ("error", None)
            } else {
                ("ok", None)
            }
        }
        Ended::Failure(error) => {
            let code = error.get("code").cloned();
            let by_middleware = error
                .get("data")
                .and_then(|d| d.get("middleware"))
                .is_some();
            (if by_middleware { "denied" } else { "error" }, code)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn call() -> Call {
        Call {
            method: "tools/call".into(),
            target: Some("mw__echo".into()),
            route: Some("mw".into()),
            client_name: Some("mcp".into()),
            era: "2025-11-25".into(),
            trace_id: "t1".into(),
            ..Call::default()
        }
    }

    /// The line for a call with arguments `{"text": "hi"}` that ended with `ended`.
    fn logged(ended: Ended, elapsed_us: u64, now: SystemTime, arguments: bool) -> Value {
        let params = json!({"name": "mw__echo", "arguments": {"text": "hi"}});
        let text = line(&call(), &params, ended, elapsed_us, now, arguments);
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn a_success_is_ok_with_time_duration_and_context() {
        let now = UNIX_EPOCH + Duration::from_millis(1_790_000_000_123);
        let ok = logged(Ended::Success(&json!({})), 1500, now, false);
        assert_eq!(ok["time"], "2026-09-21T14:13:20.123Z");
        assert_eq!(ok["outcome"], "ok");
        assert_eq!(ok["duration_ms"], 1.5);
        assert_eq!(ok["target"], "mw__echo");
        assert_eq!(ok["route"], "mw");
        assert_eq!(ok["client"], "mcp");
        assert_eq!(ok["principal"], Value::Null);
        assert!(ok.get("arguments").is_none() && ok.get("code").is_none());
        let with = logged(Ended::Success(&json!({})), 1, now, true);
        assert_eq!(with["arguments"], json!({"text": "hi"}));
    }

    #[test]
    fn errors_carry_their_code_and_a_middleware_error_is_a_denial() {
        let now = SystemTime::now();
        let error = json!({"code": -32602, "message": "Unknown tool"});
        let failed = logged(Ended::Failure(&error), 1, now, false);
        assert_eq!(failed["outcome"], "error");
        assert_eq!(failed["code"], -32602);
        let denial = json!({"code": -32001, "message": "no", "data": {"middleware": "guard"}});
        assert_eq!(
            logged(Ended::Failure(&denial), 1, now, false)["outcome"],
            "denied"
        );
        let tool_error = json!({"content": [], "isError": true});
        assert_eq!(
            logged(Ended::Success(&tool_error), 1, now, false)["outcome"],
            "error"
        );
    }
}
