//! `{{name}}`: a wasmgate plugin. Each tool is a function from its arguments (a struct the
//! gateway checks against the JSON Schema derived from it) to its output; `plugin()` lists
//! the tools and `export!` makes them the component's exports.

use schemars::JsonSchema;
use serde::Deserialize;
use wasmgate_plugin::{Level, Plugin, Tool, ToolError};

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

fn plugin() -> Plugin {
    Plugin::new().tool(
        Tool::new("greet", "Says hello to `name`, `times` times.", greet)
            .title("Greet")
            .pure(),
    )
}

wasmgate_plugin::export!(plugin);

#[cfg(test)]
mod tests {
    use super::*;
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
}
