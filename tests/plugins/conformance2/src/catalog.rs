//! The resources (static text, static binary, a watched one, the template
//! `test://template/{id}/data`), the prompts (simple, with arguments, with an embedded
//! resource, with an image, the MRTR one that elicits, the one a trigger adds) and the
//! completions of their arguments, as the fixture serves them.

use serde_json::json;

use crate::dynamic::Toggle;
use crate::tools::{PNG, blob, embedded, text};
use crate::wasmgate::plugin::results::Reply;
use crate::wasmgate::plugin::types::{
    CompletionRequest, Completions, Content, EmbeddedResource, PromptArgument, PromptInfo,
    PromptMessage, PromptOutput, RequestError, ResourceInfo, ResourceTemplate, Role,
};
use crate::{asks, plans};

const TEMPLATE: &str = "test://template/{id}/data";

pub fn resources() -> Vec<ResourceInfo> {
    [
        (
            "test://static-text",
            "static-text",
            "text/plain",
            "A static text resource",
        ),
        (
            "test://static-binary",
            "static-binary",
            "image/png",
            "A static binary resource",
        ),
        (
            "test://watched-resource",
            "watched-resource",
            "text/plain",
            "A resource to subscribe to",
        ),
    ]
    .iter()
    .map(|(uri, name, mime, description)| ResourceInfo {
        uri: uri.to_string(),
        name: name.to_string(),
        title: None,
        description: Some(description.to_string()),
        mime_type: Some(mime.to_string()),
        size: None,
        annotations: None,
    })
    .collect()
}

pub fn templates() -> Vec<ResourceTemplate> {
    vec![ResourceTemplate {
        uri_template: TEMPLATE.into(),
        name: "template".into(),
        title: Some("Resource Template".into()),
        description: Some("A resource template with parameter substitution".into()),
        mime_type: Some("application/json".into()),
        annotations: None,
    }]
}

/// Reads `uri` (listed, or of the template) into `reply`.
pub fn read(uri: &str, reply: &Reply) -> Result<(), RequestError> {
    let text_of = |mime: &str, body: String| EmbeddedResource {
        uri: uri.to_owned(),
        mime_type: Some(mime.to_owned()),
        text: Some(body),
        blob: None,
    };
    let contents = match uri {
        "test://static-text" => text_of(
            "text/plain",
            "This is the content of the static text resource.".into(),
        ),
        "test://static-binary" => EmbeddedResource {
            uri: uri.to_owned(),
            mime_type: Some("image/png".into()),
            text: None,
            blob: Some(PNG.to_vec()),
        },
        "test://watched-resource" => text_of("text/plain", "Watched resource content".into()),
        _ => {
            let id = uri
                .strip_prefix("test://template/")
                .and_then(|r| r.strip_suffix("/data"));
            let Some(id) = id.filter(|id| !id.is_empty() && !id.contains('/')) else {
                return Err(RequestError::NotFound(format!("Resource not found: {uri}")));
            };
            let body =
                json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
            text_of("application/json", body.to_string())
        }
    };
    reply
        .add(&Content::Resource(contents))
        .map_err(RequestError::Failed)
}

pub fn prompts() -> Vec<PromptInfo> {
    let argument = |name: &str, description: &str| PromptArgument {
        name: name.into(),
        title: None,
        description: Some(description.into()),
        required: true,
    };
    let prompt = |name: &str, title: Option<&str>, description: &str, arguments| PromptInfo {
        name: name.into(),
        title: title.map(Into::into),
        description: Some(description.into()),
        arguments,
    };
    let mut prompts = vec![
        prompt(
            "test_simple_prompt",
            Some("Simple Test Prompt"),
            "A simple prompt without arguments",
            vec![],
        ),
        prompt(
            "test_prompt_with_arguments",
            Some("Prompt With Arguments"),
            "A prompt with required arguments",
            vec![
                argument("arg1", "First test argument"),
                argument("arg2", "Second test argument"),
            ],
        ),
        prompt(
            "test_prompt_with_embedded_resource",
            Some("Prompt With Embedded Resource"),
            "A prompt that includes an embedded resource",
            vec![argument("resourceUri", "URI of the resource to embed")],
        ),
        prompt(
            "test_prompt_with_image",
            Some("Prompt With Image"),
            "A prompt that includes image content",
            vec![],
        ),
        prompt(
            plans::PROMPT,
            None,
            "MRTR: prompt that requires elicitation input",
            vec![],
        ),
    ];
    if Toggle::Prompt.on() {
        prompts.push(prompt(
            "test_dynamic_prompt",
            None,
            "Listed while test_trigger_prompt_change added it",
            vec![],
        ));
    }
    prompts
}

/// Prompt `name` filled in with `arguments`.
pub fn prompt(name: &str, arguments: &[(String, String)]) -> Result<PromptOutput, RequestError> {
    let arg = |key: &str| {
        let found = arguments.iter().find(|(k, _)| k == key);
        found.map_or("", |(_, v)| v.as_str()).to_owned()
    };
    let user = |content: Content| PromptMessage {
        role: Role::User,
        content,
    };
    let messages = match name {
        "test_simple_prompt" => vec![user(text("This is a simple prompt for testing."))],
        "test_prompt_with_arguments" => vec![user(text(&format!(
            "Prompt with arguments: arg1='{}', arg2='{}'",
            arg("arg1"),
            arg("arg2")
        )))],
        "test_prompt_with_embedded_resource" => vec![
            user(embedded(
                &arg("resourceUri"),
                "text/plain",
                "Embedded resource content for testing.",
            )),
            user(text("Please process the embedded resource above.")),
        ],
        "test_prompt_with_image" => vec![
            user(Content::Image(blob(PNG, "image/png"))),
            user(text("Please analyze the image above.")),
        ],
        plans::PROMPT => {
            let result = asks::run(plans::prompt());
            let said = &result["messages"][0]["content"]["text"];
            vec![user(text(said.as_str().unwrap_or_default()))]
        }
        "test_dynamic_prompt" if Toggle::Prompt.on() => {
            vec![user(text(
                "This prompt was added by test_trigger_prompt_change.",
            ))]
        }
        other => return Err(RequestError::NotFound(format!("Unknown prompt: {other}"))),
    };
    Ok(PromptOutput {
        description: None,
        messages,
    })
}

/// Completions for the prompt arguments and the template's `id`, by prefix.
pub fn complete(request: &CompletionRequest) -> Completions {
    let candidates: &[&str] = match request.argument_name.as_str() {
        "arg1" | "arg2" => &["paris", "park", "party"],
        "id" => &["1", "2", "123"],
        _ => &[],
    };
    let values: Vec<String> = candidates
        .iter()
        .filter(|v| v.starts_with(&request.argument_value))
        .map(|v| v.to_string())
        .collect();
    Completions {
        total: Some(values.len() as u32),
        values,
        has_more: false,
    }
}
