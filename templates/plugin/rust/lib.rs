//! `{{name}}`: a wasmgate plugin. Each tool is a function from its arguments (a struct the
//! gateway checks against the JSON Schema derived from it) to its output; `plugin()` lists
//! the tools (and resources, prompts) and `export!` makes them the component's exports.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use wasmgate_plugin::{
    Level, Plugin, RequestError, ResourceTemplate, Structured, Tool, ToolError, store,
};

// The arguments of `greet`, whose JSON Schema is derived from this struct: the `///`
// comments become its descriptions (a `///` on the struct would describe the whole).
#[derive(Deserialize, JsonSchema)]
struct GreetArgs {
    /// Who to greet
    name: String,
    /// How many times
    #[serde(default = "once")]
    #[schemars(range(min = 1, max = 10))]
    times: usize,
}

fn once() -> usize {
    1
}

/// A failure the model should read is an `Err(ToolError)`; it gets the message.
fn greet(args: GreetArgs) -> Result<String, ToolError> {
    if args.name.trim().is_empty() {
        return Err(ToolError::new("`name` is blank: say who to greet"));
    }
    wasmgate_plugin::log(Level::Info, "greet called");
    let name = args.name;
    Ok(vec![format!("Hello, {name}!"); args.times].join("\n"))
}

// Notes: state kept in the gateway's store, not in globals. A fresh instance may serve
// each call (the default), and the store outlives instances, reloads and restarts; each
// client's token has its own. Globals would need `.instance(Instance::Session)`.

/// One note, as the store keeps it (JSON, under `note/{id}`).
#[derive(Serialize, Deserialize, JsonSchema)]
struct Note {
    id: u64,
    text: String,
}

#[derive(Deserialize, JsonSchema)]
struct AddArgs {
    /// What to note
    text: String,
}

#[derive(Serialize, JsonSchema)]
struct Added {
    /// The new note's id (its resource is `notes://{id}`)
    id: u64,
    /// How many notes there are now
    count: usize,
}

fn add(args: AddArgs) -> Result<Structured<Added>, ToolError> {
    if args.text.trim().is_empty() {
        return Err(ToolError::new("`text` is blank: say what to note"));
    }
    let id = store::get_json::<u64>("next")?.unwrap_or(1);
    // Zero-padded, so that the store's sorted keys list notes in order.
    store::set_json(&format!("note/{id:010}"), &Note { id, text: args.text })?;
    store::set_json("next", &(id + 1))?;
    let count = store::keys("note/").len();
    Ok(Structured::new(Added { id, count }))
}

#[derive(Deserialize, JsonSchema)]
struct SearchArgs {
    /// Text the notes must contain (any case); empty for every note
    query: String,
}

#[derive(Serialize, JsonSchema)]
struct Found {
    notes: Vec<Note>,
}

fn search(args: SearchArgs) -> Result<Structured<Found>, ToolError> {
    let query = args.query.to_lowercase();
    let mut notes = Vec::new();
    for key in store::keys("note/") {
        if let Some(note) = store::get_json::<Note>(&key)?
            && note.text.to_lowercase().contains(&query)
        {
            notes.push(note);
        }
    }
    Ok(Structured::new(Found { notes }))
}

/// The variables of the template `notes://{id}`.
#[derive(Deserialize)]
struct NoteUri {
    id: String,
}

/// A note as a resource: clients read `notes://3`.
fn read_note(uri: NoteUri) -> Result<String, RequestError> {
    let id: u64 = uri.id.parse().map_err(|_| RequestError::not_found("no such note"))?;
    match store::get_json::<Note>(&format!("note/{id:010}"))? {
        Some(note) => Ok(note.text),
        None => Err(RequestError::not_found(format!("no note {id}"))),
    }
}

fn plugin() -> Plugin {
    Plugin::new()
        .tool(
            Tool::new("greet", "Says hello to `name`, `times` times.", greet)
                .title("Greet")
                .pure(),
        )
        .tool(Tool::new("add", "Adds a note; returns its id.", add))
        .tool(Tool::new("search", "Finds the notes that contain `query`.", search))
        .template(ResourceTemplate::new("notes://{id}", "note", read_note).mime_type("text/plain"))
}

wasmgate_plugin::export!(plugin);

#[cfg(test)]
mod tests {
    use super::*;
    use wasmgate_plugin::testing;
    use wasmgate_plugin::wit::Content;

    #[test]
    fn greets_as_often_as_asked() {
        let twice = greet(GreetArgs { name: "Ada".into(), times: 2 }).unwrap();
        assert_eq!(twice, "Hello, Ada!\nHello, Ada!");
        assert!(greet(GreetArgs { name: " ".into(), times: 1 }).is_err());
    }

    #[test]
    fn arguments_arrive_as_the_schema_says() {
        // As the gateway calls it: the arguments as JSON text, `times` left to its default.
        let out = plugin().call("greet", r#"{"name": "Ada"}"#).unwrap();
        assert!(matches!(&out.content[..], [Content::Text(t)] if t == "Hello, Ada!"));
        let schema = &plugin().list()[0].input_schema;
        assert!(schema.contains(r#""required":["name"]"#), "{schema}");
    }

    // Under `cargo test` the store is an in-memory one per test thread.
    #[test]
    fn notes_are_kept_in_the_store_between_calls() {
        testing::clear_store();
        let first = plugin().call("add", r#"{"text": "Buy milk"}"#).unwrap();
        assert_eq!(first.structured.as_deref(), Some(r#"{"id":1,"count":1}"#));
        let second = plugin().call("add", r#"{"text": "Call Ada"}"#).unwrap();
        assert_eq!(second.structured.as_deref(), Some(r#"{"id":2,"count":2}"#));

        let found = plugin().call("search", r#"{"query": "milk"}"#).unwrap();
        assert_eq!(
            found.structured.as_deref(),
            Some(r#"{"notes":[{"id":1,"text":"Buy milk"}]}"#)
        );
        let note = plugin().read("notes://2").unwrap();
        assert_eq!(note[0].text.as_deref(), Some("Call Ada"));
        assert!(plugin().read("notes://9").is_err());
    }
}
