//! What a plugin lists, read once per loaded version and checked (names, sizes, counts):
//! its tools, and a 0.2 plugin's resources, resource templates and prompts and what it
//! says of itself (`meta.describe`), as MCP objects the catalog serves.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::{Map, Value, json};
use wasmtime::Store;

use super::bindings::ToolInfo;
use super::bindings_v2::wasmgate::plugin::types as v2;
use super::convert::{self, MAX_LISTING_BYTES};
use super::plugin_v2::PluginV2;
use super::sandbox::StoreState;
use crate::config::InstanceMode;

/// A tool plugin's checked tools (MCP objects), and the output schemas of those that
/// declare one.
pub type CheckedTools = (Vec<Value>, HashMap<String, Arc<convert::OutputSchema>>);

/// Tools one plugin may list: clients handle a few hundred tools in all, and a catalog
/// of a hundred thousand makes every list page slow.
const MAX_TOOLS: usize = 1000;

/// Resources, templates or prompts a plugin may list, each.
const MAX_ITEMS: usize = 1000;

/// What a 0.2 version lists beyond its tools, as MCP objects (names unprefixed).
#[derive(Debug, Clone, Default)]
pub struct ListingV2 {
    pub resources: Vec<Value>,
    pub templates: Vec<Value>,
    pub prompts: Vec<Value>,
    /// It exports `completion`.
    pub completes: bool,
    /// The instance mode it declared (`meta.describe`).
    pub declared: Option<InstanceMode>,
}

/// The raw answers, read in one instance.
pub struct Raw {
    tools: Vec<ToolInfo>,
    resources: Vec<v2::ResourceInfo>,
    templates: Vec<v2::ResourceTemplate>,
    prompts: Vec<v2::PromptInfo>,
    completes: bool,
    about: Option<v2::About>,
}

/// Calls every listing export of `plugin` (none has an effect).
pub async fn read(store: &mut Store<StoreState>, plugin: &PluginV2) -> wasmtime::Result<Raw> {
    let tools = plugin.tool.call_list_tools(&mut *store).await?;
    let (resources, templates) = match &plugin.resources {
        Some(r) => (
            r.call_list_resources(&mut *store).await?,
            r.call_list_templates(&mut *store).await?,
        ),
        None => (Vec::new(), Vec::new()),
    };
    let prompts = match &plugin.prompts {
        Some(p) => p.call_list_prompts(&mut *store).await?,
        None => Vec::new(),
    };
    let about = match &plugin.meta {
        Some(m) => Some(m.call_describe(&mut *store).await?),
        None => None,
    };
    Ok(Raw {
        tools: tools.into_iter().map(tool_info).collect(),
        resources,
        templates,
        prompts,
        completes: plugin.completion.is_some(),
        about,
    })
}

impl Raw {
    /// Its tools (checked by the caller, as a 0.1 plugin's are), and the rest, checked.
    pub fn check(self) -> Result<(Vec<ToolInfo>, ListingV2), String> {
        for (what, n) in [
            ("resources", self.resources.len()),
            ("resource templates", self.templates.len()),
            ("prompts", self.prompts.len()),
        ] {
            if n > MAX_ITEMS {
                return Err(format!(
                    "lists {n} {what}; a plugin may list {MAX_ITEMS} at most"
                ));
            }
        }
        let resources: Vec<Value> = (self.resources.into_iter())
            .map(resource_to_mcp)
            .collect::<Result<_, _>>()?;
        let templates: Vec<Value> = (self.templates.into_iter())
            .map(template_to_mcp)
            .collect::<Result<_, _>>()?;
        let prompts: Vec<Value> = (self.prompts.into_iter())
            .map(prompt_to_mcp)
            .collect::<Result<_, _>>()?;
        let bytes: usize = [&resources, &templates, &prompts]
            .iter()
            .flat_map(|list| list.iter())
            .map(|item| item.to_string().len())
            .sum();
        if bytes > MAX_LISTING_BYTES {
            return Err(format!(
                "lists {bytes} bytes of resources, templates and prompts; a plugin may list \
                 {} MiB at most",
                MAX_LISTING_BYTES >> 20
            ));
        }
        unique(&resources, "uri", "resource")?;
        unique(&templates, "uriTemplate", "resource template")?;
        unique(&prompts, "name", "prompt")?;
        let declared = self.about.and_then(|a| a.instance).map(|mode| match mode {
            v2::InstanceMode::Call => InstanceMode::Call,
            v2::InstanceMode::Session => InstanceMode::Session,
            v2::InstanceMode::Shared => InstanceMode::Shared,
        });
        Ok((
            self.tools,
            ListingV2 {
                resources,
                templates,
                prompts,
                completes: self.completes,
                declared,
            },
        ))
    }
}

/// A 0.2 tool description in the 0.1 type the tool checks read (the same fields).
fn tool_info(info: v2::ToolInfo) -> ToolInfo {
    ToolInfo {
        name: info.name,
        title: info.title,
        description: info.description,
        input_schema: info.input_schema,
        output_schema: info.output_schema,
        annotations: info.annotations,
    }
}

fn unique(items: &[Value], key: &str, what: &str) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    for item in items {
        let name = item[key].as_str().unwrap_or_default();
        if !seen.insert(name) {
            return Err(format!("lists {what} `{name}` twice"));
        }
    }
    Ok(())
}

/// A name a client can send back: as tools' names are checked.
fn checked_name(name: &str, what: &str) -> Result<(), String> {
    if crate::names::follows_mcp_advice(name, crate::names::PORTABLE_LEN) {
        Ok(())
    } else {
        Err(format!(
            "{what} name {name:?} is not 1-{} letters, digits, `_`, `-` or `.`",
            crate::names::PORTABLE_LEN
        ))
    }
}

/// `annotations` JSON text as an object, or why not.
fn annotations(text: Option<String>, of: &str) -> Result<Option<Value>, String> {
    let Some(text) = text else {
        return Ok(None);
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(value @ Value::Object(_)) => Ok(Some(value)),
        _ => Err(format!("{of}: annotations are not a JSON object text")),
    }
}

fn put(object: &mut Map<String, Value>, key: &str, value: Option<impl Into<Value>>) {
    if let Some(value) = value {
        object.insert(key.to_string(), value.into());
    }
}

fn resource_to_mcp(r: v2::ResourceInfo) -> Result<Value, String> {
    checked_name(&r.name, "resource")?;
    if r.uri.is_empty() || !r.uri.contains(':') {
        return Err(format!(
            "resource `{}` has no URI with a scheme: {:?}",
            r.name, r.uri
        ));
    }
    let of = format!("resource `{}`", r.name);
    let mut object = Map::new();
    object.insert("uri".into(), json!(r.uri));
    object.insert("name".into(), json!(r.name));
    put(&mut object, "title", r.title);
    put(&mut object, "description", r.description);
    put(&mut object, "mimeType", r.mime_type);
    put(&mut object, "size", r.size);
    put(&mut object, "annotations", annotations(r.annotations, &of)?);
    Ok(Value::Object(object))
}

fn template_to_mcp(t: v2::ResourceTemplate) -> Result<Value, String> {
    checked_name(&t.name, "resource template")?;
    if !t.uri_template.contains(':') {
        return Err(format!(
            "resource template `{}` has no URI template with a scheme: {:?}",
            t.name, t.uri_template
        ));
    }
    let of = format!("resource template `{}`", t.name);
    let mut object = Map::new();
    object.insert("uriTemplate".into(), json!(t.uri_template));
    object.insert("name".into(), json!(t.name));
    put(&mut object, "title", t.title);
    put(&mut object, "description", t.description);
    put(&mut object, "mimeType", t.mime_type);
    put(&mut object, "annotations", annotations(t.annotations, &of)?);
    Ok(Value::Object(object))
}

fn prompt_to_mcp(p: v2::PromptInfo) -> Result<Value, String> {
    checked_name(&p.name, "prompt")?;
    let mut object = Map::new();
    object.insert("name".into(), json!(p.name));
    put(&mut object, "title", p.title);
    put(&mut object, "description", p.description);
    let arguments: Vec<Value> = (p.arguments.into_iter())
        .map(|a| {
            let mut arg = Map::new();
            arg.insert("name".into(), json!(a.name));
            put(&mut arg, "title", a.title);
            put(&mut arg, "description", a.description);
            if a.required {
                arg.insert("required".into(), json!(true));
            }
            Value::Object(arg)
        })
        .collect();
    if !arguments.is_empty() {
        object.insert("arguments".into(), Value::Array(arguments));
    }
    Ok(Value::Object(object))
}

/// A tool plugin's `list-tools` answer, checked: the number, size, names and schemas of
/// its tools; with the output schemas compiled.
pub async fn check_tools(infos: Vec<ToolInfo>) -> Result<CheckedTools, String> {
    if infos.len() > MAX_TOOLS {
        return Err(format!(
            "list-tools returned {} tools; a plugin may have {MAX_TOOLS} at most",
            infos.len()
        ));
    }
    let listing = convert::listing_bytes(&infos);
    if listing > convert::MAX_LISTING_BYTES {
        return Err(format!(
            "list-tools returned {listing} bytes of names, descriptions and \
             schemas; a plugin may list {} MiB at most",
            convert::MAX_LISTING_BYTES >> 20
        ));
    }
    // Compiling schemas takes time and memory: off the I/O thread.
    tokio::task::spawn_blocking({
        move || {
            let mut tools = Vec::with_capacity(infos.len());
            let mut output_schemas = HashMap::new();
            let mut seen = BTreeSet::new();
            let mut patterns = 0;
            for info in &infos {
                let tool = convert::tool_to_mcp(info)?;
                if !seen.insert(info.name.clone()) {
                    return Err(format!("lists tool `{}` twice", info.name));
                }
                patterns += tool.patterns;
                if patterns > convert::MAX_PLUGIN_PATTERNS {
                    return Err(format!(
                        "its schemas have more than {} patterns in all",
                        convert::MAX_PLUGIN_PATTERNS
                    ));
                }
                if let Some(schema) = tool.output_schema {
                    output_schemas.insert(info.name.clone(), schema);
                }
                tools.push(tool.mcp);
            }
            Ok((tools, output_schemas))
        }
    })
    .await
    .map_err(|e| format!("checking its tools failed: {e}"))?
}
