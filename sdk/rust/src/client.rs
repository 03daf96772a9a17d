//! Asking the client that called (the WIT `client` interface): [`elicit`] the user for
//! a typed answer, [`sample`] its model, list its [`roots`]. Each waits for the client
//! (not counted against the call's `timeout`); an [`AskError`] says why there is no
//! answer, and the tool goes on without one. Off wasm they are answered by
//! [`crate::testing`].

use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

pub use crate::wit::AskError;

/// What the user did with an elicitation.
#[derive(Debug, Clone, PartialEq)]
pub enum Elicited<T> {
    /// They answered; the answer, parsed.
    Accepted(T),
    /// They said no.
    Declined,
    /// They dismissed it without choosing.
    Cancelled,
}

/// Asks the user to fill in a form: `message` says what for, and the form is the schema
/// of `T` (a struct of strings, numbers, booleans and enums, as MCP allows).
///
/// ```no_run
/// # use wasmgate_plugin::client::{self, Elicited};
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Confirm {
///     /// Delete it for good?
///     sure: bool,
/// }
/// match client::elicit::<Confirm>("Delete note 3?") {
///     Ok(Elicited::Accepted(Confirm { sure: true })) => { /* delete */ }
///     Ok(_) => { /* keep it */ }
///     Err(e) => { /* no answer: say so, or decide without one */ }
/// }
/// ```
pub fn elicit<T: DeserializeOwned + JsonSchema>(message: &str) -> Result<Elicited<T>, AskError> {
    let mut schema = crate::schema::input::<T>();
    // MCP's requested schema is a flat object: `additionalProperties` is not in its subset.
    if let Some(object) = schema.as_object_mut() {
        object.remove("additionalProperties");
        object.remove("description");
    }
    let answer = elicit_raw(&json!({"message": message, "requestedSchema": schema}))?;
    match answer["action"].as_str() {
        Some("accept") => {
            let content = answer.get("content").cloned().unwrap_or(json!({}));
            crate::parse_arguments(&content.to_string())
                .map(Elicited::Accepted)
                .map_err(|e| AskError::Failed(format!("the answer does not fit the form: {e}")))
        }
        Some("decline") => Ok(Elicited::Declined),
        Some("cancel") => Ok(Elicited::Cancelled),
        _ => Err(AskError::Failed(format!(
            "not an elicitation result: {answer}"
        ))),
    }
}

/// `elicitation/create` with these `params` (a form, or `"mode": "url"`); its result.
pub fn elicit_raw(params: &Value) -> Result<Value, AskError> {
    parse(imp::elicit(&params.to_string())?)
}

/// `sampling/createMessage` with these `params` (`messages`, `maxTokens`, ...); the
/// sampled message (`role`, `content`, `model`, `stopReason`).
pub fn sample(params: &Value) -> Result<Value, AskError> {
    parse(imp::sample(&params.to_string())?)
}

/// Asks the client's model to answer `prompt` (one user message) in at most
/// `max_tokens`; the text of its answer.
pub fn sample_text(prompt: &str, max_tokens: u32) -> Result<String, AskError> {
    let params = json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
        "maxTokens": max_tokens,
    });
    let answer = sample(&params)?;
    answer["content"]["text"]
        .as_str()
        .map(Into::into)
        .ok_or_else(|| AskError::Failed(format!("the model answered no text: {answer}")))
}

/// One root the client shares (MCP `Root`): a `file://` URI, and a name.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Root {
    pub uri: String,
    #[serde(default)]
    pub name: Option<String>,
}

/// The client's roots (`roots/list`).
pub fn roots() -> Result<Vec<Root>, AskError> {
    let text = imp::roots()?;
    serde_json::from_str(&text).map_err(|e| AskError::Failed(format!("not a list of roots: {e}")))
}

/// One request of [`ask_all`].
#[derive(Debug, Clone, PartialEq)]
pub enum Ask {
    /// `elicitation/create` with these params.
    Elicit(Value),
    /// `sampling/createMessage` with these params.
    Sample(Value),
    /// `roots/list`; its answer is the JSON array of roots.
    Roots,
}

/// Several requests at once: they reach the client together and their answers come back
/// in the same order, each as [`elicit_raw`], [`sample`] or [`roots`] would give it (as
/// JSON). `Err`: none was asked.
pub fn ask_all(requests: &[Ask]) -> Result<Vec<Result<Value, AskError>>, AskError> {
    use crate::wit::wasmgate::plugin::client::Request;
    let requests: Vec<Request> = requests
        .iter()
        .map(|ask| match ask {
            Ask::Elicit(params) => Request::Elicit(params.to_string()),
            Ask::Sample(params) => Request::Sample(params.to_string()),
            Ask::Roots => Request::Roots,
        })
        .collect();
    Ok(imp::ask_all(&requests)?
        .into_iter()
        .map(|answer| answer.and_then(parse))
        .collect())
}

fn parse(text: String) -> Result<Value, AskError> {
    serde_json::from_str(&text)
        .map_err(|e| AskError::Failed(format!("the answer is not JSON: {e}")))
}

#[cfg(target_arch = "wasm32")]
mod imp {
    pub use crate::wit::wasmgate::plugin::client::{ask_all, elicit, roots, sample};
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    pub(super) use crate::testing::{ask_all, elicit, roots, sample};
}
