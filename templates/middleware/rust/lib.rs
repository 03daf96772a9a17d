//! `{{name}}`: a wasmgate middleware. It sees the requests, results and lists its
//! `interest` names, on their way through the gateway, and may change or refuse them.
//! This one lets everything through and logs each call's tool and time; each hook left
//! out of `impl Middleware` passes too.

use wasmgate_plugin::middleware::{
    Interest, Level, Middleware, Request, RequestAction, Response, ResultAction, log,
};

struct {{type}};

impl Middleware for {{type}} {
    /// What it hooks (asked once per loaded version): MCP methods, or `*` for all.
    fn interest() -> Interest {
        Interest::new()
            .requests(["tools/call"])
            .results(["tools/call"])
    }

    /// A request on its way: `Pass`, `replace(params)`, `deny("why")` or `answer(result)`.
    fn on_request(req: Request) -> RequestAction {
        // An example of a refusal: a `config = { deny = "NAME" }` in the gateway's
        // `[[middleware]]` entry refuses calls of that tool.
        if let Some(denied) = wasmgate_plugin::middleware::config("deny")
            && req.tool() == Some(denied.as_str())
        {
            return RequestAction::deny(format!("{denied} is refused by {{name}}"));
        }
        RequestAction::Pass
    }

    /// How it ended: `Pass`, `replace(result)` or `deny("why")`.
    fn on_result(res: Response) -> ResultAction {
        let tool = res.request().tool().unwrap_or("?");
        log(Level::Info, format!("{tool} took {} µs", res.elapsed().as_micros()));
        ResultAction::Pass
    }
}

wasmgate_plugin::export_middleware!({{type}});

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use wasmgate_plugin::middleware::{Context, Outcome};
    use wasmgate_plugin::testing;

    fn call(tool: &str) -> Request {
        Request::new(
            Context::new("tools/call", Some(tool)),
            json!({"name": tool, "arguments": {}}),
        )
    }

    #[test]
    fn passes_calls_and_refuses_the_configured_tool() {
        assert_eq!({{type}}::on_request(call("files_read")), RequestAction::Pass);
        testing::set_config("deny", "files_delete");
        assert!(matches!(
            {{type}}::on_request(call("files_delete")),
            RequestAction::Deny(_)
        ));
    }

    #[test]
    fn results_pass_and_are_logged() {
        let res = Response::new(
            call("files_read"),
            Outcome::Success(json!({"content": []})),
            std::time::Duration::from_micros(42),
        );
        assert_eq!({{type}}::on_result(res), ResultAction::Pass);
        assert_eq!(testing::take_logs()[0].1, "files_read took 42 µs");
    }
}
