//! JSON-RPC 2.0 envelope for MCP: parsing a line into messages, building answers,
//! and the error codes. Payloads stay `serde_json::Value` so that fields the gateway
//! does not know pass through untouched.

mod mcp;
pub mod modern;
pub mod param_headers;

pub use mcp::*;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// A backend is down, restarting or crashed mid-call.
pub const BACKEND_UNAVAILABLE: i64 = -32000;
/// A backend did not answer within its timeout.
pub const REQUEST_TIMEOUT: i64 = -32001;
/// A request arrived before `initialize` (MCP servers commonly use -32002 for "not initialized").
pub const NOT_INITIALIZED: i64 = -32002;
/// `resources/read` of a URI that no backend serves (the specification's suggestion).
pub const RESOURCE_NOT_FOUND: i64 = -32002;
/// A 2025-11-25 server's "open these URLs, then retry" (`data.elicitations`); the
/// 2026-07-28 era says it with an `input_required` result instead.
pub const URL_ELICITATION_REQUIRED: i64 = -32042;
/// A middleware refused the request (its own denial, or its failure under
/// `on_error = "deny"`), unless the middleware gave a code of its own.
pub const MIDDLEWARE_DENIED: i64 = -32003;

/// A JSON-RPC error object: data, not a Rust error, so it can travel unchanged.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    /// Boxed: errors travel inside `Result`s, which stay small this way.
    pub data: Option<Box<Value>>,
    /// Made by [`RpcError::invalid_arguments`]: the gateway found the tool's arguments
    /// wrong, which a client at 2025-11-25 or later gets as a tool error result. Never
    /// sent, never read from a server's error.
    pub invalid_arguments: bool,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: None,
            invalid_arguments: false,
        }
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(Box::new(data));
        self
    }

    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }

    /// Arguments that do not fit the tool: -32602 before 2025-11-25, a tool error result
    /// from then on (see [`argument_errors_are_results`]).
    pub fn invalid_arguments(tool: &str, why: impl std::fmt::Display) -> Self {
        RpcError {
            invalid_arguments: true,
            ..Self::invalid_params(format!("{INVALID_ARGUMENTS}{tool}: {why}"))
        }
    }

    /// A tool the client cannot call (or not see): -32602, as the specification has it
    /// (the seed documents said -32601). `why` follows the name as it is (` (...)` or
    /// nothing); the name is the client's, so it is cut short.
    pub fn unknown_tool(tool: &str, why: &str) -> Self {
        Self::invalid_params(format!("Unknown tool: {}{why}", cut_short(tool, 200)))
    }

    pub fn to_value(&self) -> Value {
        let mut error = Map::new();
        error.insert("code".into(), self.code.into());
        error.insert("message".into(), self.message.clone().into());
        if let Some(data) = &self.data {
            error.insert("data".into(), Value::clone(data));
        }
        Value::Object(error)
    }

    /// Reads an `error` member; a malformed one still becomes an error, never a panic.
    pub fn from_value(value: &Value) -> Self {
        RpcError {
            code: value
                .get("code")
                .and_then(Value::as_i64)
                .unwrap_or(INTERNAL_ERROR),
            message: value
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("error")
                .to_string(),
            data: value.get("data").cloned().map(Box::new),
            invalid_arguments: false,
        }
    }
}

/// One JSON-RPC message, as sent by either side.
#[derive(Debug, Clone)]
pub enum Message {
    Request {
        id: Value,
        method: String,
        params: Option<Value>,
    },
    Notification {
        method: String,
        params: Option<Value>,
    },
    Response {
        id: Value,
        result: Result<Value, RpcError>,
    },
}

/// What one line of input holds.
#[derive(Debug)]
pub enum Incoming {
    /// An invalid message comes with its id when that could be read, else null.
    Single(Result<Message, (Value, RpcError)>),
    /// A batch (2025-03-26): each element parsed on its own.
    Batch(Vec<Result<Message, (Value, RpcError)>>),
}

impl From<Message> for Incoming {
    fn from(message: Message) -> Incoming {
        Incoming::Single(Ok(message))
    }
}

/// Parses one line. Errors come back as the answer to send (with the id when one was readable).
pub fn parse_line(line: &str) -> Result<Incoming, Value> {
    if let Some(request) = plain_request(line) {
        return Ok(Incoming::Single(Ok(request)));
    }
    let value: Value = serde_json::from_str(line).map_err(|err| {
        error_response(
            Value::Null,
            &RpcError::new(PARSE_ERROR, format!("Parse error: {err}")),
        )
    })?;
    match value {
        Value::Array(items) if items.is_empty() => Err(error_response(
            Value::Null,
            &RpcError::new(INVALID_REQUEST, "Invalid Request: empty batch"),
        )),
        Value::Array(items) => Ok(Incoming::Batch(
            items.into_iter().map(parse_with_id).collect(),
        )),
        single => Ok(Incoming::Single(parse_with_id(single))),
    }
}

/// A request as nearly every client writes it, read straight into its parts: the general
/// path below builds a map of the whole message first and then takes it apart, which was a
/// quarter of the gateway's own work on a small plugin call (`benches/session_cpu.rs`).
/// Only what the general path would accept as the very same request is read here; anything
/// else (a notification, a batch, a null or odd id, non-object params, a repeated key, bad
/// JSON) gives `None` and goes the general way, which words the errors.
fn plain_request(line: &str) -> Option<Message> {
    #[derive(Deserialize)]
    struct Plain<'a> {
        #[serde(borrow)]
        jsonrpc: std::borrow::Cow<'a, str>,
        /// Required: a missing id is a notification, left to the general path.
        id: Value,
        method: String,
        #[serde(default, deserialize_with = "present_object")]
        params: Option<Map<String, Value>>,
    }
    /// A `null` is no object (the derive's `Option` would read it as absent).
    fn present_object<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Map<String, Value>>, D::Error> {
        Map::deserialize(d).map(Some)
    }
    let plain: Plain = serde_json::from_str(line).ok()?;
    // `valid_id` refuses a null id, which the general path answers with an error.
    if plain.jsonrpc != "2.0" || !valid_id(&plain.id) {
        return None;
    }
    Some(Message::Request {
        id: plain.id,
        method: plain.method,
        params: plain.params.map(Value::Object),
    })
}

/// `parse_message`, with the id for an error answer: JSON-RPC 2.0 answers with null only
/// when the id cannot be read, so a client can match the error to its request.
fn parse_with_id(value: Value) -> Result<Message, (Value, RpcError)> {
    let id = value
        .get("id")
        .cloned()
        .filter(valid_id)
        .unwrap_or(Value::Null);
    parse_message(value).map_err(|err| (id, err))
}

/// Below this, every whole number is exact as a float (2^53 is 9.007e15).
pub const EXACT_FLOAT_INTEGERS: f64 = 9.0e15;

/// A string, or a number that can be echoed as the same value: an integer beyond 64 bits
/// is read as a float that has lost digits, and would come back as another number.
fn valid_id(id: &Value) -> bool {
    match id {
        Value::String(_) => true,
        Value::Number(n) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.abs() < EXACT_FLOAT_INTEGERS)
        }
        _ => false,
    }
}

/// Checks the envelope of one message and splits it by kind.
pub fn parse_message(value: Value) -> Result<Message, RpcError> {
    let Value::Object(mut obj) = value else {
        return Err(RpcError::new(
            INVALID_REQUEST,
            "Invalid Request: not a JSON object",
        ));
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(RpcError::new(
            INVALID_REQUEST,
            "Invalid Request: \"jsonrpc\" must be \"2.0\"",
        ));
    }
    let id = obj.remove("id");
    if let Some(id) = &id
        && !valid_id(id)
        && !id.is_null()
    {
        return Err(RpcError::new(
            INVALID_REQUEST,
            "Invalid Request: id must be a string or a number that comes back as sent (no integer beyond 64 bits)",
        ));
    }
    let params = obj.remove("params");
    match &params {
        None | Some(Value::Object(_)) => {}
        // By-position params are valid JSON-RPC, but every MCP method takes named ones.
        Some(Value::Array(_)) => {
            return Err(RpcError::invalid_params(
                "Invalid params: params must be an object, not an array",
            ));
        }
        // JSON-RPC allows only an object or an array: the request itself is malformed.
        Some(_) => {
            return Err(RpcError::new(
                INVALID_REQUEST,
                "Invalid Request: params must be an object",
            ));
        }
    }
    match obj.remove("method") {
        // MCP (basic protocol): a request id MUST NOT be null; such a request is not run.
        Some(Value::String(_)) if id.as_ref().is_some_and(Value::is_null) => Err(RpcError::new(
            INVALID_REQUEST,
            "Invalid Request: id must not be null (write a string or a number, or leave it out for a notification)",
        )),
        Some(Value::String(method)) => Ok(match id {
            Some(id) => Message::Request { id, method, params },
            None => Message::Notification { method, params },
        }),
        Some(_) => Err(RpcError::new(
            INVALID_REQUEST,
            "Invalid Request: method must be a string",
        )),
        None => {
            let id = id.unwrap_or(Value::Null);
            if let Some(error) = obj.remove("error") {
                Ok(Message::Response {
                    id,
                    result: Err(RpcError::from_value(&error)),
                })
            } else if let Some(result) = obj.remove("result") {
                Ok(Message::Response {
                    id,
                    result: Ok(result),
                })
            } else {
                Err(RpcError::new(
                    INVALID_REQUEST,
                    "Invalid Request: no method, result or error",
                ))
            }
        }
    }
}

/// A result on its way to a client: one the gateway built, or a server's JSON text passed
/// through as it came (only the envelope around it is rewritten), which spares parsing and
/// re-serialising every server answer and keeps its bytes exactly.
#[derive(Debug)]
pub enum Reply {
    Built(Value),
    Raw(Box<RawValue>),
    /// A plugin's result written around its structured output's text (which may be
    /// megabytes): what is read of a result here is kept beside it, so that the text is
    /// not read again on the I/O thread. `first_text` is cut to 16 KiB.
    Written {
        raw: Box<RawValue>,
        is_error: bool,
        first_text: Option<String>,
    },
}

impl From<Value> for Reply {
    fn from(value: Value) -> Self {
        Reply::Built(value)
    }
}

impl Reply {
    pub fn into_value(self) -> Value {
        match self {
            Reply::Built(value) => value,
            Reply::Raw(raw) | Reply::Written { raw, .. } => {
                serde_json::from_str(raw.get()).unwrap_or(Value::Null)
            }
        }
    }

    /// The first text content of a `tools/call` result (the error, when `isError` is set),
    /// read without building the whole result: its structured content may be megabytes.
    pub fn first_text(&self) -> Option<String> {
        #[derive(Deserialize)]
        struct Item {
            text: Option<String>,
        }
        #[derive(Deserialize)]
        struct Texts {
            #[serde(default)]
            content: Vec<Item>,
        }
        match self {
            Reply::Built(value) => value
                .get("content")?
                .get(0)?
                .get("text")?
                .as_str()
                .map(str::to_string),
            Reply::Raw(raw) => {
                serde_json::from_str::<Texts>(raw.get())
                    .ok()?
                    .content
                    .into_iter()
                    .next()?
                    .text
            }
            Reply::Written { first_text, .. } => first_text.clone(),
        }
    }

    /// `isError: true` of a `tools/call` result, read without building the whole result.
    pub fn is_error_result(&self) -> bool {
        #[derive(Deserialize)]
        struct Flag {
            #[serde(rename = "isError", default)]
            is_error: Option<bool>,
        }
        match self {
            Reply::Built(value) => value.get("isError").and_then(Value::as_bool) == Some(true),
            // A fast search first: parsing a big result to find no flag is slow. (A key
            // written with escapes, `"is\u0045rror"`, is not seen: it only marks an event.)
            Reply::Raw(raw) if !raw.get().contains("\"isError\"") => false,
            Reply::Raw(raw) => {
                serde_json::from_str::<Flag>(raw.get())
                    .ok()
                    .and_then(|f| f.is_error)
                    == Some(true)
            }
            Reply::Written { is_error, .. } => *is_error,
        }
    }
}

/// The answer line for a request: the JSON text of `{"jsonrpc", "id", "result"|"error"}`.
/// Written around the result's text: no JSON object is built for the envelope.
pub fn response_line(id: &Value, result: Result<Reply, RpcError>) -> String {
    // Serialising a `Value` cannot fail (its keys are strings); "null" is never used.
    let text = |value: &Value| serde_json::to_string(value).unwrap_or_else(|_| "null".into());
    let built;
    let (key, body) = match &result {
        Ok(Reply::Raw(raw) | Reply::Written { raw, .. }) => ("result", raw.get()),
        Ok(Reply::Built(value)) => {
            built = text(value);
            ("result", built.as_str())
        }
        Err(error) => {
            built = text(&error.to_value());
            ("error", built.as_str())
        }
    };
    let id = text(id);
    let mut line = String::with_capacity(body.len() + id.len() + 32);
    line.push_str(r#"{"jsonrpc":"2.0","id":"#);
    line.push_str(&id);
    line.push_str(",\"");
    line.push_str(key);
    line.push_str("\":");
    line.push_str(body);
    line.push('}');
    line
}

/// The parts of a server's line needed to route it; `result` stays JSON text.
#[derive(Deserialize)]
pub struct RawEnvelope<'a> {
    #[serde(default)]
    pub jsonrpc: Option<&'a str>,
    #[serde(default)]
    pub id: Option<u64>,
    #[serde(default)]
    pub method: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pub result: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pub error: Option<&'a RawValue>,
}

impl RawEnvelope<'_> {
    /// A plain success response with a numeric id (the gateway's own ids to servers): the
    /// fast path. Anything else (requests, notifications, errors, odd ids) is read in full.
    pub fn fast_response(line: &str) -> Option<(u64, Box<RawValue>)> {
        let envelope: RawEnvelope = serde_json::from_str(line).ok()?;
        match envelope {
            RawEnvelope {
                jsonrpc: Some("2.0"),
                id: Some(id),
                method: None,
                result: Some(result),
                error: None,
            } => Some((id, result.to_owned())),
            _ => None,
        }
    }
}

pub fn response(id: Value, result: Result<Value, RpcError>) -> Value {
    match result {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(error) => error_response(id, &error),
    }
}

pub fn error_response(id: Value, error: &RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": error.to_value()})
}

pub fn request(id: Value, method: &str, params: Option<Value>) -> Value {
    let mut msg = json!({"jsonrpc": "2.0", "id": id, "method": method});
    if let Some(params) = params {
        msg["params"] = params;
    }
    msg
}

pub fn notification(method: &str, params: Option<Value>) -> Value {
    let mut msg = json!({"jsonrpc": "2.0", "method": method});
    if let Some(params) = params {
        msg["params"] = params;
    }
    msg
}

const INVALID_ARGUMENTS: &str = "Invalid arguments for tool ";

/// `text` for a message, cut at `max` bytes (at a character's edge) with its full size
/// after: a client that sent a megabyte is told what was wrong, not sent it back.
pub fn cut_short(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return text.into();
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}… ({} bytes)", &text[..cut], text.len()).into()
}

/// [`cut_short`] for a text the caller owns: kept as it is when it fits.
pub fn cut_owned(text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    cut_short(&text, max).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn single(line: &str) -> Result<Message, RpcError> {
        single_with_id(line).map_err(|(_, err)| err)
    }

    fn single_with_id(line: &str) -> Result<Message, (Value, RpcError)> {
        match parse_line(line).expect("parses") {
            Incoming::Single(m) => m,
            Incoming::Batch(_) => panic!("not a batch"),
        }
    }

    /// The general path alone, as `parse_line` was before its shortcut.
    fn general(line: &str) -> String {
        let parsed = serde_json::from_str::<Value>(line).map(parse_with_id);
        format!("{parsed:?}")
    }

    /// The shortcut reads the requests it takes exactly as the general path does, and
    /// leaves to it everything that path refuses or reads otherwise.
    #[test]
    fn plain_requests_read_as_the_general_path_reads_them() {
        let taken = [
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            r#"{"method":"tools/call","params":{"name":"a","arguments":{"x":[1,{"y":null}],"x":2}},"id":"s","jsonrpc":"2.0"}"#,
            r#" {"jsonrpc":"2\u002e0","id":"a\"b","method":"m\u00e9","params":{},"extra":{"k":1},"result":7} "#,
            r#"{"jsonrpc":"2.0","id":-5,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
        ];
        let left = [
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1e300,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1e400,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":3}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":2.0,"id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":7}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"} x"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping""#,
        ];
        for line in taken {
            let request = plain_request(line).unwrap_or_else(|| panic!("not taken: {line}"));
            assert_eq!(format!("Ok(Ok({request:?}))"), general(line), "{line}");
        }
        for line in left {
            assert!(plain_request(line).is_none(), "taken: {line}");
        }
    }

    #[test]
    fn invalid_json_is_a_parse_error_with_null_id() {
        let answer = parse_line("{oops").unwrap_err();
        assert_eq!(answer["error"]["code"], PARSE_ERROR);
        assert!(answer["id"].is_null());
    }

    #[test]
    fn empty_batch_is_invalid() {
        assert_eq!(
            parse_line("[]").unwrap_err()["error"]["code"],
            INVALID_REQUEST
        );
    }

    #[test]
    fn kinds_are_told_apart() {
        assert!(matches!(
            single(r#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#),
            Ok(Message::Request { .. })
        ));
        assert!(matches!(
            single(r#"{"jsonrpc":"2.0","method":"x"}"#),
            Ok(Message::Notification { .. })
        ));
        assert!(matches!(
            single(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            Ok(Message::Response { result: Ok(_), .. })
        ));
        let err = single(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"m"}}"#);
        assert!(matches!(
            err,
            Ok(Message::Response {
                result: Err(RpcError { code: -1, .. }),
                ..
            })
        ));
    }

    #[test]
    fn envelope_errors() {
        for line in [
            r#"{"id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":5}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":3}"#,
            r#"42"#,
        ] {
            assert_eq!(single(line).unwrap_err().code, INVALID_REQUEST, "{line}");
        }
    }

    #[test]
    fn errors_carry_the_id_when_it_can_be_read() {
        for (line, id, code) in [
            (r#"{"id":8,"method":"ping"}"#, json!(8), INVALID_REQUEST),
            (
                r#"{"jsonrpc":"2.0","id":"a","method":"ping","params":"x"}"#,
                json!("a"),
                INVALID_REQUEST,
            ),
            (
                r#"{"jsonrpc":"2.0","id":2,"method":"ping","params":[1]}"#,
                json!(2),
                INVALID_PARAMS,
            ),
            (
                r#"{"jsonrpc":"2.0","id":3,"method":5}"#,
                json!(3),
                INVALID_REQUEST,
            ),
            (
                r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
                Value::Null,
                INVALID_REQUEST,
            ),
            (
                r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
                Value::Null,
                INVALID_REQUEST,
            ),
        ] {
            let (got_id, err) = single_with_id(line).unwrap_err();
            assert_eq!((got_id, err.code), (id, code), "{line}");
        }
        // A response to an unparseable request carries id null: that stays readable.
        assert!(matches!(
            single(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"m"}}"#),
            Ok(Message::Response { .. })
        ));
    }

    #[test]
    fn batch_elements_parse_independently() {
        let Incoming::Batch(items) =
            parse_line(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"id":2}]"#).unwrap()
        else {
            panic!("batch expected")
        };
        assert!(items[0].is_ok());
        assert_eq!(items[1].as_ref().unwrap_err().0, json!(2));
    }

    #[test]
    fn built_results_and_errors_are_written_as_the_envelope_would_serialise() {
        let result =
            json!({"content": [{"type": "text", "text": "a \"quoted\" é"}], "isError": false});
        let out = response_line(&json!(3), Ok(Reply::Built(result.clone())));
        assert_eq!(
            serde_json::from_str::<Value>(&out).unwrap(),
            response(json!(3), Ok(result))
        );
        assert_eq!(
            out,
            r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"a \"quoted\" é"}],"isError":false}}"#
        );
        let error = RpcError::invalid_params("bad \"x\"");
        let out = response_line(&json!("s-1"), Err(error.clone()));
        assert_eq!(
            serde_json::from_str::<Value>(&out).unwrap(),
            error_response(json!("s-1"), &error)
        );
        assert!(!out.contains('\n'), "{out}");
    }

    #[test]
    fn raw_results_pass_through_byte_for_byte() {
        let line = r#"{"jsonrpc":"2.0","id":7,"result":{"z":1,"content":[{"type":"text","text":"\u00e9"}],"isError":true}}"#;
        let (id, raw) = RawEnvelope::fast_response(line).expect("a plain response");
        assert_eq!(id, 7);
        let reply = Reply::Raw(raw);
        assert!(reply.is_error_result());
        assert_eq!(reply.first_text().as_deref(), Some("é"));
        let out = response_line(&json!("client-1"), Ok(reply));
        assert_eq!(
            out,
            r#"{"jsonrpc":"2.0","id":"client-1","result":{"z":1,"content":[{"type":"text","text":"\u00e9"}],"isError":true}}"#
        );
        // Not the fast path: requests, errors, string ids, another JSON-RPC version.
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"m"}}"#,
            r#"{"jsonrpc":"2.0","id":"a","result":{}}"#,
            r#"{"jsonrpc":"1.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}"#,
        ] {
            assert!(RawEnvelope::fast_response(line).is_none(), "{line}");
        }
        assert!(!Reply::Built(json!({"content": []})).is_error_result());
        let image_first = RawValue::from_string(
            r#"{"structuredContent":{"big":[1]},"content":[{"type":"image","data":""},{"text":"t"}]}"#.into(),
        )
        .unwrap();
        assert_eq!(Reply::Raw(image_first).first_text(), None);
        for (text, is_error) in [
            (r#"{"content":[]}"#, false),
            (r#"{"content":[],"isError":false}"#, false),
            (
                r#"{"content":[{"type":"text","text":"\"isError\""}]}"#,
                false,
            ),
            (r#"{"isError":true,"content":[]}"#, true),
        ] {
            let raw = RawValue::from_string(text.into()).unwrap();
            assert_eq!(Reply::Raw(raw).is_error_result(), is_error, "{text}");
        }
    }

    #[test]
    fn batching_ends_with_2025_06_18() {
        assert!(batching_allowed("2024-11-05"));
        assert!(batching_allowed("2025-03-26"));
        assert!(!batching_allowed("2025-06-18"));
        assert!(!batching_allowed(LATEST_VERSION));
    }

    #[test]
    fn version_negotiation() {
        assert_eq!(negotiate_version(Some("2024-11-05")), "2024-11-05");
        assert_eq!(negotiate_version(Some("1999-01-01")), LATEST_VERSION);
        assert_eq!(negotiate_version(None), LATEST_VERSION);
    }
}
