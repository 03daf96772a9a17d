//! [`Response`]: how a request ended, as `on_result` sees it; [`ResultAction`]: what to
//! do with it.

use std::time::Duration;

use serde_json::Value;

use super::request::Request;
use super::wit::{self, Context, Denial};

/// How a request ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The result object.
    Success(Value),
    /// The JSON-RPC error object (`code`, `message`, `data`).
    Failure(Value),
}

impl Outcome {
    fn from_wit(outcome: wit::Outcome) -> Self {
        let parse = |text: String| serde_json::from_str(&text).unwrap_or(Value::Null);
        match outcome {
            wit::Outcome::Success(text) => Self::Success(parse(text)),
            wit::Outcome::Failure(text) => Self::Failure(parse(text)),
        }
    }
}

/// A request that ended: the request as it went on (after every middleware's changes),
/// its outcome and how long it took.
#[derive(Debug)]
pub struct Response {
    request: Request,
    outcome: Outcome,
    elapsed: Duration,
}

impl Response {
    /// A response to `request`; for tests.
    pub fn new(request: Request, outcome: Outcome, elapsed: Duration) -> Self {
        Self {
            request,
            outcome,
            elapsed,
        }
    }

    /// A response from the WIT's arguments (the outcome's JSON text is parsed here; `null`
    /// if it is not JSON).
    pub fn from_wit(ctx: Context, params: String, outcome: wit::Outcome, elapsed_us: u64) -> Self {
        Self::new(
            Request::from_wit(ctx, params),
            Outcome::from_wit(outcome),
            Duration::from_micros(elapsed_us),
        )
    }

    /// The request, with its context and params.
    pub fn request(&self) -> &Request {
        &self.request
    }

    pub fn context(&self) -> &Context {
        self.request.context()
    }

    pub fn method(&self) -> &str {
        self.request.method()
    }

    pub fn target(&self) -> Option<&str> {
        self.request.target()
    }

    pub fn outcome(&self) -> &Outcome {
        &self.outcome
    }

    /// The result object, if it succeeded.
    pub fn result(&self) -> Option<&Value> {
        match &self.outcome {
            Outcome::Success(result) => Some(result),
            Outcome::Failure(_) => None,
        }
    }

    /// The JSON-RPC error object, if it failed.
    pub fn error(&self) -> Option<&Value> {
        match &self.outcome {
            Outcome::Success(_) => None,
            Outcome::Failure(error) => Some(error),
        }
    }

    /// Whether it failed: a JSON-RPC error, or a tool result with `isError: true`.
    pub fn is_error(&self) -> bool {
        match &self.outcome {
            Outcome::Success(result) => result["isError"] == Value::Bool(true),
            Outcome::Failure(_) => true,
        }
    }

    /// The outcome, owned (to edit it into a [`ResultAction::Replace`]).
    pub fn into_outcome(self) -> Outcome {
        self.outcome
    }

    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }
}

/// What to do with a result.
#[derive(Debug, Clone, PartialEq)]
pub enum ResultAction {
    Pass,
    /// Send this result (an object) instead; also turns an error into a result.
    Replace(Value),
    /// Refuse: the client gets the denial instead of the result.
    Deny(Denial),
}

impl ResultAction {
    pub fn replace(result: Value) -> Self {
        Self::Replace(result)
    }

    /// Refuse with this message and the default code; [`Denial`] for more.
    pub fn deny(message: impl Into<String>) -> Self {
        Self::Deny(Denial::new(message))
    }

    /// As the WIT says it.
    pub fn into_wit(self) -> wit::ResultAction {
        match self {
            Self::Pass => wit::ResultAction::Pass,
            Self::Replace(result) => wit::ResultAction::Replace(result.to_string()),
            Self::Deny(denial) => wit::ResultAction::Deny(denial),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_response_reads_its_outcome_request_and_time() {
        let ok = Response::from_wit(
            Context::new("tools/call", Some("x_echo")),
            r#"{"name":"echo","arguments":{"a":1}}"#.into(),
            wit::Outcome::Success(r#"{"content":[],"isError":true}"#.into()),
            1500,
        );
        assert_eq!(ok.result().unwrap()["content"], json!([]));
        assert!(ok.is_error() && ok.error().is_none());
        assert_eq!(ok.elapsed(), Duration::from_micros(1500));
        assert_eq!(ok.request().argument("a"), Some(&json!(1)));
        assert_eq!((ok.method(), ok.target()), ("tools/call", Some("x_echo")));
        let failed = Response::from_wit(
            Context::new("resources/read", None),
            "{}".into(),
            wit::Outcome::Failure(r#"{"code":-32002,"message":"gone"}"#.into()),
            0,
        );
        assert_eq!(failed.error().unwrap()["code"], -32002);
        assert!(failed.is_error() && failed.result().is_none());
        assert!(matches!(failed.into_outcome(), Outcome::Failure(_)));
    }

    #[test]
    fn result_actions_become_the_wit_variants() {
        let replaced = ResultAction::replace(json!({"content": []})).into_wit();
        assert!(matches!(replaced, wit::ResultAction::Replace(t) if t == r#"{"content":[]}"#));
        assert!(matches!(
            ResultAction::deny("held").into_wit(),
            wit::ResultAction::Deny(d) if d.message == "held"
        ));
        assert!(matches!(
            ResultAction::Pass.into_wit(),
            wit::ResultAction::Pass
        ));
    }
}
