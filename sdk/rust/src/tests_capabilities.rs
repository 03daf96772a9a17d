//! The 0.2 capabilities of the typed layer, driven as the gateway drives them, with
//! [`crate::testing`] standing in for the host.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::client::{self, Ask, AskError, Elicited, Root};
use crate::notify::{self, Notification};
use crate::prompt::{assistant, user};
use crate::store::{self, StoreError};
use crate::wit::{CompletionRef, CompletionRequest, Content, InstanceMode};
use crate::{Instance, Plugin, Prompt, RequestError, Resource, ResourceTemplate, testing};

#[derive(Deserialize)]
struct NoteRef {
    id: String,
}

#[derive(Deserialize, JsonSchema)]
struct Summarize {
    /// The note to summarize
    id: String,
    /// How long, in words
    words: Option<String>,
}

fn plugin() -> Plugin {
    Plugin::new()
        .resource(
            Resource::new("notes://index", "index", || Ok("a\nb"))
                .title("Index")
                .mime_type("text/plain"),
        )
        .resource(Resource::new("notes://logo", "logo", || Ok(vec![1u8, 2])))
        .template(
            ResourceTemplate::new("notes://{id}", "note", |p: NoteRef| match p.id.as_str() {
                "a" => Ok(format!("note {}", p.id)),
                _ => Err(RequestError::not_found(format!("no note {}", p.id))),
            })
            .mime_type("text/markdown")
            .complete("id", |typed| {
                ["apple", "avocado", "banana"]
                    .iter()
                    .filter(|n| n.starts_with(typed))
                    .map(|n| n.to_string())
                    .collect()
            }),
        )
        .prompt(
            Prompt::new("summarize", "Summarizes a note.", |a: Summarize| {
                let words = a.words.unwrap_or_else(|| "50".into());
                Ok(vec![
                    user(format!("Summarize note {} in {words} words.", a.id)),
                    assistant("Here it is:"),
                ])
            })
            .complete("id", |_| (0..150).map(|i| i.to_string()).collect()),
        )
        .instance(Instance::Session)
}

#[test]
fn resources_are_listed_and_read_by_uri_then_by_template() {
    let p = plugin();
    let listed: Vec<_> = p
        .resources()
        .into_iter()
        .map(|r| (r.uri, r.title))
        .collect();
    assert_eq!(
        listed,
        [
            ("notes://index".into(), Some("Index".into())),
            ("notes://logo".into(), None)
        ]
    );
    assert_eq!(p.templates()[0].uri_template, "notes://{id}");

    let index = p.read("notes://index").unwrap();
    assert_eq!(index[0].text.as_deref(), Some("a\nb"));
    assert_eq!(index[0].mime_type.as_deref(), Some("text/plain"));
    assert_eq!(p.read("notes://logo").unwrap()[0].blob, Some(vec![1, 2]));

    let note = p.read("notes://a").unwrap();
    assert_eq!(note[0].uri, "notes://a");
    assert_eq!(note[0].text.as_deref(), Some("note a"));
    assert_eq!(note[0].mime_type.as_deref(), Some("text/markdown"));

    let missing = crate::wit::RequestError::from(p.read("notes://zz").unwrap_err());
    assert_eq!(
        missing,
        crate::wit::RequestError::NotFound("no note zz".into())
    );
    let nowhere = crate::wit::RequestError::from(p.read("other://x").unwrap_err());
    assert_eq!(
        nowhere,
        crate::wit::RequestError::NotFound("no resource other://x".into())
    );
}

#[test]
fn prompts_derive_their_arguments_and_fill_in_messages() {
    let p = plugin();
    let info = &p.prompts()[0];
    assert_eq!(info.description.as_deref(), Some("Summarizes a note."));
    let args: Vec<_> = info
        .arguments
        .iter()
        .map(|a| (a.name.as_str(), a.description.as_deref(), a.required))
        .collect();
    assert_eq!(
        args,
        [
            ("id", Some("The note to summarize"), true),
            ("words", Some("How long, in words"), false)
        ]
    );
    let out = p
        .get_prompt("summarize", &[("id".into(), "a".into())])
        .unwrap();
    assert_eq!(
        out.messages[0].content,
        Content::Text("Summarize note a in 50 words.".into())
    );
    assert_eq!(out.messages.len(), 2);

    let missing = crate::wit::RequestError::from(p.get_prompt("summarize", &[]).unwrap_err());
    assert!(matches!(missing, crate::wit::RequestError::InvalidParams(m) if m.contains("`id`")));
    let unknown = crate::wit::RequestError::from(p.get_prompt("nope", &[]).unwrap_err());
    assert_eq!(
        unknown,
        crate::wit::RequestError::NotFound("no prompt nope".into())
    );
}

fn request(r#ref: CompletionRef, name: &str, value: &str) -> CompletionRequest {
    CompletionRequest {
        ref_: r#ref,
        argument_name: name.into(),
        argument_value: value.into(),
        context: Vec::new(),
    }
}

#[test]
fn completions_come_from_the_argument_s_function_cut_to_100() {
    let p = plugin();
    let template = CompletionRef::ResourceTemplate("notes://{id}".into());
    let done = p.complete(&request(template.clone(), "id", "a")).unwrap();
    assert_eq!(done.values, ["apple", "avocado"]);
    assert_eq!((done.total, done.has_more), (Some(2), false));

    let many = p
        .complete(&request(
            CompletionRef::Prompt("summarize".into()),
            "id",
            "",
        ))
        .unwrap();
    assert_eq!(
        (many.values.len(), many.total, many.has_more),
        (100, Some(150), true)
    );

    let none = p.complete(&request(template, "other", "")).unwrap();
    assert!(none.values.is_empty() && !none.has_more);
    let unknown = p
        .complete(&request(CompletionRef::Prompt("nope".into()), "id", ""))
        .unwrap_err();
    assert_eq!(unknown.message(), "no prompt nope");
}

#[test]
fn the_declared_instance_mode_is_what_describe_answers() {
    assert_eq!(plugin().describe().instance, Some(InstanceMode::Session));
    assert_eq!(Plugin::new().describe().instance, None);
}

#[derive(Deserialize, JsonSchema, Debug, PartialEq)]
struct Confirm {
    /// Delete it for good?
    sure: bool,
}

#[test]
fn an_elicitation_asks_with_the_type_s_schema_and_parses_the_answer() {
    testing::accept_elicitation(json!({"sure": true}));
    assert_eq!(
        client::elicit::<Confirm>("Delete?"),
        Ok(Elicited::Accepted(Confirm { sure: true }))
    );
    let asks = testing::take_asks();
    assert_eq!(asks[0].0, "elicitation/create");
    assert_eq!(asks[0].1["message"], "Delete?");
    let schema = &asks[0].1["requestedSchema"];
    assert_eq!(schema["properties"]["sure"]["type"], "boolean");
    assert_eq!(schema["required"], json!(["sure"]));
    assert!(schema.get("additionalProperties").is_none());

    testing::decline_elicitation();
    assert_eq!(client::elicit::<Confirm>("Delete?"), Ok(Elicited::Declined));
    testing::accept_elicitation(json!({"sure": "yes"}));
    assert!(matches!(
        client::elicit::<Confirm>("Delete?"),
        Err(AskError::Failed(m)) if m.contains("does not fit the form")
    ));
    testing::answer_elicitation(Err(AskError::TimedOut("60 s".into())));
    assert_eq!(
        client::elicit::<Confirm>("Delete?"),
        Err(AskError::TimedOut("60 s".into()))
    );
    assert!(matches!(
        client::elicit::<Confirm>("Delete?"),
        Err(AskError::Unsupported(m)) if m.contains("no answer scripted")
    ));
}

#[test]
fn sampling_and_roots_are_answered_as_scripted() {
    testing::sample_answer_text("a haiku");
    assert_eq!(client::sample_text("Write a haiku", 50).unwrap(), "a haiku");
    let asked = testing::take_asks();
    assert_eq!(asked[0].1["maxTokens"], 50);
    assert_eq!(
        asked[0].1["messages"][0]["content"]["text"],
        "Write a haiku"
    );

    testing::set_roots(&[("file:///work", "work")]);
    assert_eq!(
        client::roots().unwrap(),
        [Root {
            uri: "file:///work".into(),
            name: Some("work".into())
        }]
    );
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Note {
    text: String,
}

#[test]
fn the_store_keeps_bytes_and_json_by_key() {
    testing::clear_store();
    store::set("note/1", b"one").unwrap();
    store::set_json("note/2", &Note { text: "two".into() }).unwrap();
    store::set("other", b"x").unwrap();
    assert_eq!(store::get("note/1").as_deref(), Some(&b"one"[..]));
    assert_eq!(
        store::get_json::<Note>("note/2").unwrap(),
        Some(Note { text: "two".into() })
    );
    assert!(store::get_json::<Note>("note/1").is_err());
    assert_eq!(store::keys("note/"), ["note/1", "note/2"]);
    store::delete("note/1").unwrap();
    assert_eq!(store::get("note/1"), None);
    assert!(matches!(
        store::set("", b""),
        Err(StoreError::InvalidKey(_))
    ));
}

#[test]
fn announcements_and_cancellation_reach_the_stand_in() {
    notify::tools_changed();
    notify::resource_updated("notes://a");
    assert_eq!(
        testing::take_notifications(),
        [
            Notification::ToolsChanged,
            Notification::ResourceUpdated("notes://a".into())
        ]
    );
    assert!(!crate::cancelled());
    testing::set_cancelled(true);
    assert!(crate::cancelled());
    testing::set_cancelled(false);
}

#[test]
fn errors_of_the_host_read_as_sentences_and_convert_with_question_mark() {
    fn tool() -> Result<(), crate::ToolError> {
        store::set("", b"")?;
        Ok(())
    }
    let message = tool().unwrap_err().message().to_string();
    assert!(message.contains("512"), "{message}");
}

#[test]
fn several_requests_go_at_once_and_answer_in_order() {
    testing::sample_answer_text("sampled");
    testing::set_roots(&[("file:///a", "a")]);
    let answers = client::ask_all(&[
        Ask::Sample(json!({"messages": [], "maxTokens": 5})),
        Ask::Elicit(json!({"message": "?", "requestedSchema": {}})),
        Ask::Roots,
    ])
    .unwrap();
    assert_eq!(answers[0].as_ref().unwrap()["content"]["text"], "sampled");
    assert!(matches!(&answers[1], Err(AskError::Unsupported(_))));
    assert_eq!(answers[2].as_ref().unwrap()[0]["uri"], "file:///a");
    let methods: Vec<String> = testing::take_asks().into_iter().map(|a| a.0).collect();
    assert_eq!(
        methods,
        ["sampling/createMessage", "elicitation/create", "roots/list"]
    );
}
