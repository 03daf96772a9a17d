//! [`Request`]: a request on its way, with its [`Context`]; [`RequestAction`]: what to do
//! with it; [`Denial`]: a refusal.

use std::cell::OnceCell;

use serde_json::{Map, Value};

use super::wit::{self, Context, Denial, Direction};

impl Context {
    /// A context for `method` naming `target`, with the rest at neutral values (to-server,
    /// no route, principal, profile or client, era `2025-11-25`, trace id `test`): for
    /// tests, which set the fields they care about.
    pub fn new(method: &str, target: Option<&str>) -> Self {
        Self {
            method: method.into(),
            direction: Direction::ToServer,
            target: target.map(Into::into),
            route: None,
            principal: None,
            profile: None,
            client_name: None,
            client_version: None,
            era: "2025-11-25".into(),
            trace_id: "test".into(),
        }
    }
}

impl Denial {
    /// A refusal with this message and the default code (-32003).
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: None,
            data: None,
        }
    }

    /// The JSON-RPC error code the client gets instead of -32003.
    pub fn code(mut self, code: i32) -> Self {
        self.code = Some(code);
        self
    }

    /// The error's `data`.
    pub fn data(mut self, data: &Value) -> Self {
        self.data = Some(data.to_string());
        self
    }
}

/// A request on its way: who asks what ([`Context`]) and its params, parsed from the
/// gateway's JSON text when first asked for.
#[derive(Debug)]
pub struct Request {
    ctx: Context,
    text: String,
    params: OnceCell<Value>,
}

impl Request {
    /// A request with these params (a JSON object), as the gateway would pass it; for tests.
    pub fn new(ctx: Context, params: Value) -> Self {
        let text = params.to_string();
        Self {
            ctx,
            text,
            params: OnceCell::from(params),
        }
    }

    /// A request from the WIT's arguments; its params are parsed when first asked for.
    pub fn from_wit(ctx: Context, params: String) -> Self {
        Self {
            ctx,
            text: params,
            params: OnceCell::new(),
        }
    }

    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The MCP method, such as `tools/call`.
    pub fn method(&self) -> &str {
        &self.ctx.method
    }

    /// The tool or prompt name (the gateway's, namespaced) or the resource URI it names.
    pub fn target(&self) -> Option<&str> {
        self.ctx.target.as_deref()
    }

    /// The server or plugin it goes to (or comes from, to-client).
    pub fn route(&self) -> Option<&str> {
        self.ctx.route.as_deref()
    }

    /// The params as the gateway sent them: a JSON object text.
    pub fn params_text(&self) -> &str {
        &self.text
    }

    /// The params object; `null` if the text is not JSON (the gateway sends objects).
    pub fn params(&self) -> &Value {
        self.params
            .get_or_init(|| serde_json::from_str(&self.text).unwrap_or(Value::Null))
    }

    /// The tool a `tools/call` calls (its gateway name); none for other methods.
    pub fn tool(&self) -> Option<&str> {
        if self.method() != "tools/call" {
            return None;
        }
        self.target().or_else(|| self.params()["name"].as_str())
    }

    /// The `arguments` object of a `tools/call` or `prompts/get`; none when it has none.
    pub fn arguments(&self) -> Option<&Map<String, Value>> {
        self.params().get("arguments")?.as_object()
    }

    /// One argument by name.
    pub fn argument(&self, name: &str) -> Option<&Value> {
        self.arguments()?.get(name)
    }
}

/// What to do with a request.
#[derive(Debug, Clone, PartialEq)]
pub enum RequestAction {
    /// Let it through as it is.
    Pass,
    /// Let it through with these params (an object) instead.
    Replace(Value),
    /// Refuse it: nothing goes further.
    Deny(Denial),
    /// Answer it with this result (an object): nothing goes further.
    Answer(Value),
}

impl RequestAction {
    pub fn replace(params: Value) -> Self {
        Self::Replace(params)
    }

    /// Refuse with this message and the default code; [`Denial`] for more.
    pub fn deny(message: impl Into<String>) -> Self {
        Self::Deny(Denial::new(message))
    }

    pub fn answer(result: Value) -> Self {
        Self::Answer(result)
    }

    /// As the WIT says it.
    pub fn into_wit(self) -> wit::RequestAction {
        match self {
            Self::Pass => wit::RequestAction::Pass,
            Self::Replace(params) => wit::RequestAction::Replace(params.to_string()),
            Self::Deny(denial) => wit::RequestAction::Deny(denial),
            Self::Answer(result) => wit::RequestAction::Answer(result.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn params_are_parsed_once_and_tools_call_parts_found() {
        let req = Request::from_wit(
            Context::new("tools/call", Some("github_search")),
            r#"{"name":"search","arguments":{"q":"x","limit":3}}"#.into(),
        );
        assert_eq!(req.tool(), Some("github_search"));
        assert_eq!(req.argument("limit"), Some(&json!(3)));
        assert_eq!(req.arguments().unwrap().len(), 2);
        assert!(std::ptr::eq(req.params(), req.params()));
        let untargeted = Request::new(
            Context::new("tools/call", None),
            json!({"name": "echo", "arguments": {}}),
        );
        assert_eq!(untargeted.tool(), Some("echo"));
        let read = Request::new(
            Context::new("resources/read", Some("file:///a")),
            json!({"uri": "file:///a"}),
        );
        assert_eq!((read.tool(), read.arguments()), (None, None));
        assert_eq!(read.target(), Some("file:///a"));
    }

    #[test]
    fn text_that_is_not_json_reads_as_null() {
        let req = Request::from_wit(Context::new("tools/call", None), "{oops".into());
        assert_eq!(req.params(), &Value::Null);
        assert_eq!((req.tool(), req.arguments()), (None, None));
        assert_eq!(req.params_text(), "{oops");
    }

    #[test]
    fn actions_become_the_wit_variants_with_json_text() {
        let replaced = RequestAction::replace(json!({"a": 1})).into_wit();
        assert!(matches!(replaced, wit::RequestAction::Replace(t) if t == r#"{"a":1}"#));
        let denied = RequestAction::Deny(Denial::new("no").code(-32602).data(&json!(["x"])));
        match denied.into_wit() {
            wit::RequestAction::Deny(d) => {
                assert_eq!((d.message.as_str(), d.code), ("no", Some(-32602)));
                assert_eq!(d.data.as_deref(), Some(r#"["x"]"#));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            RequestAction::deny("x").into_wit(),
            wit::RequestAction::Deny(Denial { code: None, .. })
        ));
        assert!(matches!(
            RequestAction::answer(json!({})).into_wit(),
            wit::RequestAction::Answer(t) if t == "{}"
        ));
        assert!(matches!(
            RequestAction::Pass.into_wit(),
            wit::RequestAction::Pass
        ));
    }
}
