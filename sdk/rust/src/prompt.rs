//! [`Prompt`]: a prompt template (MCP `prompts/get`) as a Rust function from typed
//! arguments to messages; [`IntoPrompt`]: what it may return; [`user`], [`assistant`].

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::RequestError;
use crate::complete::Completers;
use crate::schema;
use crate::wit::{Content, PromptArgument, PromptInfo, PromptMessage, PromptOutput, Role};

/// A message from the user, of one text item.
pub fn user(text: impl Into<String>) -> PromptMessage {
    PromptMessage {
        role: Role::User,
        content: Content::Text(text.into()),
    }
}

/// A message from the assistant, of one text item.
pub fn assistant(text: impl Into<String>) -> PromptMessage {
    PromptMessage {
        role: Role::Assistant,
        content: Content::Text(text.into()),
    }
}

/// A prompt function's success value.
pub trait IntoPrompt {
    fn into_prompt(self) -> PromptOutput;
}

/// One message from the user.
impl IntoPrompt for String {
    fn into_prompt(self) -> PromptOutput {
        vec![user(self)].into_prompt()
    }
}

/// The messages, in order.
impl IntoPrompt for Vec<PromptMessage> {
    fn into_prompt(self) -> PromptOutput {
        PromptOutput {
            description: None,
            messages: self,
        }
    }
}

/// As it is, with a description.
impl IntoPrompt for PromptOutput {
    fn into_prompt(self) -> PromptOutput {
        self
    }
}

type Get = Box<dyn Fn(Map<String, Value>) -> Result<PromptOutput, RequestError>>;

/// One prompt: built with [`Prompt::new`], added with [`Plugin::prompt`](crate::Plugin::prompt).
pub struct Prompt {
    name: String,
    title: Option<String>,
    description: Option<String>,
    arguments: fn() -> Value,
    get: Get,
    pub(crate) completers: Completers,
}

impl Prompt {
    /// The prompt `name`, filled in by `get`. Its arguments are derived from `A`: a
    /// struct of `String` fields (`Option<String>` for the optional ones), whose doc
    /// comments describe them.
    pub fn new<A, P, F>(name: &str, description: &str, get: F) -> Self
    where
        A: DeserializeOwned + JsonSchema,
        P: IntoPrompt,
        F: Fn(A) -> Result<P, RequestError> + 'static,
    {
        Self {
            name: name.into(),
            title: None,
            description: Some(description.to_owned()).filter(|d| !d.is_empty()),
            arguments: schema::input::<A>,
            get: Box::new(move |args| {
                let args = serde_json::from_value(Value::Object(args))
                    .map_err(RequestError::invalid_params)?;
                Ok(get(args)?.into_prompt())
            }),
            completers: Completers::default(),
        }
    }

    pub fn title(mut self, title: &str) -> Self {
        self.title = Some(title.into());
        self
    }

    /// Completes the argument `argument`: `complete` gets what the user typed so far and
    /// gives the values that fit (the first 100 are sent).
    pub fn complete<F>(mut self, argument: &str, complete: F) -> Self
    where
        F: Fn(&str) -> Vec<String> + 'static,
    {
        self.completers.add(argument, complete);
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// What `list-prompts` says of it.
    pub fn info(&self) -> PromptInfo {
        let schema = (self.arguments)();
        let required: Vec<&str> = schema["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let arguments = schema["properties"]
            .as_object()
            .map(|props| {
                props
                    .iter()
                    .map(|(name, prop)| PromptArgument {
                        name: name.clone(),
                        title: prop["title"].as_str().map(Into::into),
                        description: prop["description"].as_str().map(Into::into),
                        required: required.contains(&name.as_str()),
                    })
                    .collect()
            })
            .unwrap_or_default();
        PromptInfo {
            name: self.name.clone(),
            title: self.title.clone(),
            description: self.description.clone(),
            arguments,
        }
    }

    /// Fills the prompt in from the client's arguments.
    pub fn get(&self, arguments: &[(String, String)]) -> Result<PromptOutput, RequestError> {
        let args = arguments
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        (self.get)(args)
    }
}
