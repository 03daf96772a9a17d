//! JSON Schemas of a tool's argument and output types, shaped as the gateway and MCP
//! want them: subschemas inline, strict about unknown fields. [`Tool`](crate::Tool)
//! uses them; a guest written on the raw [`wit`](crate::wit) bindings may too.

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema};
use serde_json::Value;

/// The schema of the arguments a tool deserializes into `A`.
///
/// Unknown fields are refused (`additionalProperties: false`) unless the type says
/// otherwise: the gateway checks arguments against this schema before the call, so a
/// misspelled optional field is an error the model sees rather than a value ignored.
pub fn input<A: JsonSchema>() -> Value {
    let mut schema = root::<A>(SchemaSettings::draft2020_12().for_deserialize());
    if let Some(object) = schema.as_object_mut() {
        object
            .entry("additionalProperties")
            .or_insert(Value::Bool(false));
    }
    schema
}

/// The schema of the structured output a tool serializes from `T`.
pub fn output<T: JsonSchema>() -> Value {
    root::<T>(SchemaSettings::draft2020_12().for_serialize())
}

/// Whether MCP takes `schema` for arguments or structured output: `"type": "object"`.
pub fn is_object(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("object")
}

fn root<T: JsonSchema>(settings: SchemaSettings) -> Value {
    let generator = settings
        .with(|s| {
            // Inline: models and some clients do not follow `$ref`s. A recursive type
            // still gets `$defs`.
            s.inline_subschemas = true;
            // The gateway reads schemas as 2020-12, MCP's default, without being told.
            s.meta_schema = None;
        })
        .into_generator();
    let mut schema = Schema::to_value(generator.into_root_schema_for::<T>());
    drop_rust_formats(&mut schema);
    // schemars titles the root with the Rust type's name, which tells a model nothing
    // (MCP has a tool title of its own). A title written on the type is kept.
    if let Some(object) = schema.as_object_mut()
        && object.get("title").and_then(Value::as_str) == Some(T::schema_name().as_ref())
    {
        object.remove("title");
    }
    schema
}

/// Removes the `format`s schemars gives Rust's number types (`uint8`, `int64`, `double`,
/// ...): JSON Schema defines none of them, so they only cost the model's attention. The
/// bounds schemars writes beside them (`minimum: 0`, `maximum: 255`) say what matters.
fn drop_rust_formats(schema: &mut Value) {
    const RUST_FORMATS: &[&str] = &[
        "int", "int8", "int16", "int32", "int64", "int128", "uint", "uint8", "uint16", "uint32",
        "uint64", "uint128", "float", "double",
    ];
    match schema {
        Value::Object(fields) => {
            let rust_format = fields
                .get("format")
                .and_then(Value::as_str)
                .is_some_and(|f| RUST_FORMATS.contains(&f));
            if rust_format {
                fields.remove("format");
            }
            // Values (a default, an example) are data, not schemas: left as they are.
            fields
                .iter_mut()
                .filter(|(key, _)| {
                    !matches!(key.as_str(), "default" | "examples" | "const" | "enum")
                })
                .for_each(|(_, value)| drop_rust_formats(value));
        }
        Value::Array(items) => items.iter_mut().for_each(drop_rust_formats),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};
    use serde_json::json;

    /// Arguments of a search.
    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Search {
        /// What to look for
        query: String,
        #[serde(default = "ten")]
        #[schemars(range(min = 1, max = 100))]
        limit: u32,
        lang: Option<String>,
    }

    fn ten() -> u32 {
        10
    }

    #[derive(Serialize, JsonSchema)]
    struct Hits {
        hits: Vec<Hit>,
    }

    #[derive(Serialize, JsonSchema)]
    struct Hit {
        title: String,
        score: Option<f64>,
    }

    #[test]
    fn arguments_are_a_strict_object_with_their_docs_and_defaults() {
        let schema = input::<Search>();
        assert!(is_object(&schema));
        assert_eq!(schema["description"], "Arguments of a search.");
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(schema["required"], json!(["query"]));
        assert_eq!(
            schema["properties"]["query"]["description"],
            "What to look for"
        );
        assert_eq!(schema["properties"]["limit"]["default"], 10);
        assert_eq!(schema["properties"]["limit"]["maximum"], 100);
        assert!(schema["properties"]["limit"].get("format").is_none());
        assert_eq!(
            schema["properties"]["lang"]["type"],
            json!(["string", "null"])
        );
        assert!(schema.get("title").is_none() && schema.get("$schema").is_none());
    }

    #[test]
    fn outputs_describe_what_is_serialized_with_nested_types_inline() {
        let schema = output::<Hits>();
        assert!(is_object(&schema));
        let hit = &schema["properties"]["hits"]["items"];
        assert_eq!(hit["type"], "object");
        // Serialized, an `Option` is always there, as `null` at worst.
        assert_eq!(hit["required"], json!(["title", "score"]));
        assert!(schema.get("$defs").is_none());
        assert!(schema.get("additionalProperties").is_none());
    }

    #[test]
    fn a_type_that_is_not_an_object_is_told_apart() {
        assert!(!is_object(&input::<String>()));
        assert!(!is_object(&output::<Vec<u8>>()));
    }
}
