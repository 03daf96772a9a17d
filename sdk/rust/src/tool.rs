//! [`Tool`]: one tool as a Rust function from typed arguments to an output, with what
//! `list-tools` says about it (name, description, schemas, annotations).

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::ToolError;
use crate::output::IntoOutput;
use crate::schema;
use crate::wit::{CallError, ToolInfo, ToolOutput};

/// One tool: built with [`Tool::new`], refined with the chained setters, added to a
/// [`Plugin`](crate::Plugin).
pub struct Tool {
    name: String,
    description: String,
    title: Option<String>,
    annotations: Option<Annotations>,
    // Schemas are derived only when the tools are listed, not on every call.
    input_schema: fn() -> Value,
    output_schema: fn() -> Option<Value>,
    run: Run,
}

type Run = Box<dyn Fn(&str) -> Result<ToolOutput, CallError>>;

/// MCP tool annotations: hints to the client about what a tool does. A hint left `None`
/// is not sent, and clients assume the cautious default.
#[derive(Serialize, Default, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Annotations {
    /// It changes nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    /// What it changes, it may destroy (overwrite, delete).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    /// Calling it twice with the same arguments does no more than once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    /// It reaches the world outside (the network), not only its own data.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}

impl Tool {
    /// A tool named `name` (letters, digits, `_`, `-`, `.`; served as
    /// `{plugin}__{name}`) that runs `run`.
    ///
    /// The input schema is derived from `A` (a struct deriving `Deserialize` and
    /// `JsonSchema`; its doc comments become the fields' descriptions), the output schema
    /// from `O` when it is [`Structured`](crate::Structured). The gateway checks the
    /// arguments against the schema before the call, so `run` gets only arguments that fit.
    pub fn new<A, O, F>(name: &str, description: &str, run: F) -> Self
    where
        A: DeserializeOwned + JsonSchema,
        O: IntoOutput,
        F: Fn(A) -> Result<O, ToolError> + 'static,
    {
        Self {
            name: name.into(),
            description: description.into(),
            title: None,
            annotations: None,
            input_schema: schema::input::<A>,
            output_schema: O::output_schema,
            run: Box::new(move |arguments| {
                let args = parse_arguments(arguments)?;
                Ok(run(args)?.into_output()?)
            }),
        }
    }

    /// A human-readable title (MCP `title`).
    pub fn title(self, title: &str) -> Self {
        Self {
            title: Some(title.into()),
            ..self
        }
    }

    pub fn annotations(self, annotations: Annotations) -> Self {
        Self {
            annotations: Some(annotations),
            ..self
        }
    }

    /// A pure function of its arguments: reads nothing, changes nothing, the same answer
    /// every time, so a client may call it without asking.
    pub fn pure(self) -> Self {
        self.annotations(Annotations {
            read_only_hint: Some(true),
            idempotent_hint: Some(true),
            open_world_hint: Some(false),
            ..Annotations::default()
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// What `list-tools` says of this tool.
    ///
    /// # Panics
    ///
    /// When the argument or output type is not an object (a struct or a map), which MCP
    /// requires: the message names the tool, and the gateway refuses the plugin with it.
    pub fn info(&self) -> ToolInfo {
        let input = (self.input_schema)();
        let output = (self.output_schema)();
        for (what, schema) in [("argument", Some(&input)), ("output", output.as_ref())] {
            if let Some(schema) = schema.filter(|s| !schema::is_object(s)) {
                panic!(
                    "tool `{}`: its {what} type must be a struct or a map (a JSON object, as \
                     MCP requires), not {schema}",
                    self.name
                );
            }
        }
        ToolInfo {
            name: self.name.clone(),
            title: self.title.clone(),
            description: self.description.clone(),
            input_schema: input.to_string(),
            output_schema: output.map(|s| s.to_string()),
            annotations: self
                .annotations
                .as_ref()
                .map(|a| serde_json::to_string(a).expect("annotations serialize to a JSON object")),
        }
    }

    /// Runs the tool on the arguments' JSON text.
    pub fn call(&self, arguments: &str) -> Result<ToolOutput, CallError> {
        (self.run)(arguments)
    }
}

/// Reads a call's arguments (JSON text) into a tool's argument type, as [`Tool`] does.
/// The gateway has checked them against the schema, so a failure here means a value the
/// schema allows and the type does not: an invalid-arguments error.
pub fn parse_arguments<A: DeserializeOwned>(arguments: &str) -> Result<A, ToolError> {
    let invalid = |e: serde_json::Error| ToolError::invalid_arguments(e);
    let mut value: Value = serde_json::from_str(arguments).map_err(invalid)?;
    whole_numbers_as_integers(&mut value);
    serde_json::from_value(value).map_err(invalid)
}

/// JSON Schema's `integer` is any number without a fractional part, `2.0` too, and the
/// gateway's check lets it through; serde's integers take only `2`. Such floats become
/// integers here.
fn whole_numbers_as_integers(value: &mut Value) {
    match value {
        Value::Number(n) if n.is_f64() => {
            if let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15) {
                *value = Value::from(f as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(whole_numbers_as_integers),
        Value::Object(fields) => fields.values_mut().for_each(whole_numbers_as_integers),
        _ => {}
    }
}

/// The arguments of a tool that takes none: `{}` (and nothing else).
#[derive(serde::Deserialize, Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct NoArgs {}

/// By hand, so that the doc comment above stays out of the schema the model reads.
impl JsonSchema for NoArgs {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NoArgs".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "object"})
    }
}
