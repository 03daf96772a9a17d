//! The catalog: every visible tool, prompt, resource and template, and where each lives.
//! Immutable once built; the gateway swaps in a new one (one pointer store) whenever a
//! backend's lists change, so calls never wait on a lock.

pub mod builtin_tools;
pub mod page;
pub mod uri_template;
pub mod view;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::Value;

use crate::backend::Backend;
use crate::backend::Discovered;
use crate::config::ToolFilter;
use crate::names;
use crate::schema::Patterns;
use uri_template::UriTemplate;

/// Where a request goes.
#[derive(Clone)]
pub enum Target {
    /// The gateway's own tools.
    Builtin,
    Server(Backend),
    Wasm(Arc<str>),
}

impl Target {
    /// The backend's name as errors and events show it.
    pub fn server(&self) -> &str {
        match self {
            Target::Builtin => "wasmgate",
            Target::Server(p) => p.name(),
            Target::Wasm(name) => name,
        }
    }
}

pub struct ToolRoute {
    pub target: Target,
    /// The backend's own name for the tool.
    pub name: String,
    pub timeout: Duration,
    input_schema: Value,
    /// The compiled schema and what its patterns may cost: compiled on first use (most
    /// tools of a big catalog are never called).
    check: OnceLock<Option<(jsonschema::Validator, Patterns)>>,
}

impl ToolRoute {
    /// The tool's `inputSchema`, as its backend gave it.
    pub fn input_schema(&self) -> &Value {
        &self.input_schema
    }

    /// Checks arguments against the tool's `inputSchema`; the error names the offending field.
    /// The check is the gateway's courtesy (every backend checks its own arguments) and runs
    /// on its I/O thread, so a schema beyond a plugin's budget, or arguments too costly for
    /// its patterns, are passed on unchecked rather than stall every other request.
    pub fn validate(&self, arguments: &Value) -> Result<(), String> {
        let check = self.check.get_or_init(|| {
            let size = self.input_schema.to_string().len();
            crate::schema::budget(&self.input_schema, size)
                .and_then(|patterns| Ok((crate::schema::compile(&self.input_schema)?, patterns)))
                .map_err(|e| tracing::warn!(server = self.target.server(), tool = %self.name, "its inputSchema {e}: arguments are not checked here"))
                .ok()
        });
        let Some((validator, patterns)) = check else {
            return Ok(());
        };
        if !crate::schema::quick_to_check(patterns, arguments) {
            tracing::debug!(server = self.target.server(), tool = %self.name, "arguments passed on unchecked: too costly for the patterns of the tool's inputSchema");
            return Ok(());
        }
        crate::schema::mismatch(validator, arguments).map_or(Ok(()), Err)
    }
}

pub struct PromptRoute {
    pub target: Target,
    pub name: String,
}

/// One backend's contribution.
pub struct Source<'a> {
    pub target: Target,
    pub namespace: &'a str,
    pub discovered: &'a Discovered,
    pub filter: &'a ToolFilter,
    pub timeout_for: &'a dyn Fn(&str) -> Duration,
}

#[derive(Default)]
pub struct Catalog {
    pub tools: Vec<Value>,
    tool_routes: HashMap<String, Arc<ToolRoute>>,
    pub prompts: Vec<Value>,
    prompt_routes: HashMap<String, PromptRoute>,
    pub resources: Vec<Value>,
    resource_routes: HashMap<String, Target>,
    pub templates: Vec<Value>,
    template_routes: Vec<(UriTemplate, Target)>,
    /// Names or URIs claimed by two backends: the first (servers by key, then plugins) keeps them.
    pub conflicts: Vec<String>,
    /// Each list's items as JSON text, by [`view::Kind`]: what pages are made of.
    texts: [page::Texts; 4],
}

impl Catalog {
    /// `builtin` tools come first and carry no prefix.
    pub fn build(separator: &str, builtin: Vec<Value>, sources: &[Source<'_>]) -> Catalog {
        let mut catalog = Catalog::default();
        for tool in builtin {
            let name = tool["name"].as_str().unwrap_or_default().to_string();
            let route = ToolRoute {
                target: Target::Builtin,
                name: name.clone(),
                timeout: Duration::from_secs(60),
                input_schema: tool
                    .get("inputSchema")
                    .cloned()
                    .unwrap_or(Value::Bool(true)),
                check: OnceLock::new(),
            };
            catalog.tool_routes.insert(name, Arc::new(route));
            catalog.tools.push(tool);
        }
        for source in sources {
            catalog.add_source(separator, source);
        }
        catalog
    }

    fn add_source(&mut self, separator: &str, source: &Source<'_>) {
        let server = source.target.server().to_string();
        for tool in &source.discovered.tools {
            let Some(name) = tool.get("name").and_then(Value::as_str) else {
                continue;
            };
            if !source.filter.allows(name) {
                continue;
            }
            let exposed = names::exposed(source.namespace, separator, name);
            if let Some(first) = self.tool_routes.get(&exposed) {
                self.conflicts.push(if first.target.server() == server {
                    format!("tool `{exposed}` is listed twice by `{server}`; the first is served")
                } else {
                    format!(
                        "tool `{exposed}` of `{server}` is hidden by `{}`'s tool of the same name",
                        first.target.server()
                    )
                });
                continue;
            }
            warn_if_long(&exposed);
            let mut def = tool.clone();
            def["name"] = Value::String(exposed.clone());
            let route = ToolRoute {
                target: source.target.clone(),
                name: name.to_string(),
                timeout: (source.timeout_for)(name),
                input_schema: tool
                    .get("inputSchema")
                    .cloned()
                    .unwrap_or(Value::Bool(true)),
                check: OnceLock::new(),
            };
            self.tool_routes.insert(exposed, Arc::new(route));
            self.tools.push(def);
        }
        for prompt in &source.discovered.prompts {
            let Some(name) = prompt.get("name").and_then(Value::as_str) else {
                continue;
            };
            let exposed = names::exposed(source.namespace, separator, name);
            if let Some(first) = self.prompt_routes.get(&exposed) {
                self.conflicts.push(format!(
                    "prompt `{exposed}` of `{server}` is hidden by `{}`'s prompt of the same name",
                    first.target.server()
                ));
                continue;
            }
            let mut def = prompt.clone();
            def["name"] = Value::String(exposed.clone());
            self.prompt_routes.insert(
                exposed,
                PromptRoute {
                    target: source.target.clone(),
                    name: name.to_string(),
                },
            );
            self.prompts.push(def);
        }
        for resource in &source.discovered.resources {
            let Some(uri) = resource.get("uri").and_then(Value::as_str) else {
                continue;
            };
            if let Some(first) = self.resource_routes.get(uri) {
                self.conflicts.push(format!(
                    "resource `{uri}` of `{server}` is also served by `{}`, which keeps it",
                    first.server()
                ));
                continue;
            }
            self.resource_routes
                .insert(uri.to_string(), source.target.clone());
            self.resources.push(resource.clone());
        }
        for template in &source.discovered.resource_templates {
            let Some(pattern) = template.get("uriTemplate").and_then(Value::as_str) else {
                continue;
            };
            self.template_routes
                .push((UriTemplate::parse(pattern), source.target.clone()));
            self.templates.push(template.clone());
        }
    }

    /// How many of the listed tools each backend serves, by (is a plugin, name): a tool
    /// hidden by another backend's of the same name counts for the one that serves it.
    pub fn tool_counts(&self) -> HashMap<(bool, &str), usize> {
        let mut counts = HashMap::new();
        for route in self.tool_routes.values() {
            let key = match &route.target {
                Target::Builtin => continue,
                Target::Server(p) => (false, p.name()),
                Target::Wasm(name) => (true, &**name),
            };
            *counts.entry(key).or_default() += 1;
        }
        counts
    }

    pub fn tool(&self, exposed: &str) -> Option<&Arc<ToolRoute>> {
        self.tool_routes.get(exposed)
    }

    pub fn prompt(&self, exposed: &str) -> Option<&PromptRoute> {
        self.prompt_routes.get(exposed)
    }

    /// Exact resource first, then the first template that matches.
    pub fn resource_target(&self, uri: &str) -> Option<&Target> {
        self.resource_routes.get(uri).or_else(|| {
            self.template_routes
                .iter()
                .find(|(t, _)| t.matches(uri))
                .map(|(_, target)| target)
        })
    }

    /// The backend that serves a prompt or template named in `completion/complete`'s `ref`.
    pub fn template_target(&self, uri_template: &str) -> Option<&Target> {
        self.templates
            .iter()
            .zip(&self.template_routes)
            .find(|(t, _)| t.get("uriTemplate").and_then(Value::as_str) == Some(uri_template))
            .map(|(_, (_, target))| target)
    }
}

/// Many clients refuse tool names over 64 characters (the strictest common rule, see
/// [`names::portable`]): such a name is served, with a warning, once per name.
fn warn_if_long(exposed: &str) {
    static WARNED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    if exposed.len() > 64
        && WARNED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(exposed.to_string())
    {
        tracing::warn!(
            tool = exposed,
            "tool `{exposed}` has {} characters, more than the 64 many clients accept: shorten its namespace or name",
            exposed.len()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prefixes_filters_and_conflicts() {
        let a = Discovered {
            tools: vec![
                json!({"name": "echo", "inputSchema": {"type": "object"}, "x-extra": 1}),
                json!({"name": "secret"}),
            ],
            resources: vec![json!({"uri": "r://one"})],
            ..Default::default()
        };
        let b = Discovered {
            tools: vec![json!({"name": "echo"})],
            resources: vec![json!({"uri": "r://one"})],
            ..Default::default()
        };
        let deny = ToolFilter {
            deny: Some(
                globset::GlobSetBuilder::new()
                    .add(globset::Glob::new("sec*").unwrap())
                    .build()
                    .unwrap(),
            ),
            ..Default::default()
        };
        let none = ToolFilter::default();
        let timeout = |_: &str| Duration::from_secs(1);
        let sources = [
            Source {
                target: Target::Wasm("a".into()),
                namespace: "a",
                discovered: &a,
                filter: &deny,
                timeout_for: &timeout,
            },
            Source {
                target: Target::Wasm("b".into()),
                namespace: "",
                discovered: &b,
                filter: &none,
                timeout_for: &timeout,
            },
        ];
        let catalog = Catalog::build("__", vec![json!({"name": "gateway_status"})], &sources);
        let names: Vec<_> = catalog
            .tools
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["gateway_status", "a__echo", "echo"]);
        assert_eq!(
            catalog.tools[1]["x-extra"], 1,
            "unknown fields pass through"
        );
        assert_eq!(catalog.tool("a__echo").unwrap().name, "echo");
        assert!(catalog.tool("a__secret").is_none());
        assert_eq!(catalog.resource_target("r://one").unwrap().server(), "a");
        assert_eq!(
            catalog.conflicts,
            ["resource `r://one` of `b` is also served by `a`, which keeps it"]
        );
    }

    fn route_with(input_schema: Value) -> ToolRoute {
        ToolRoute {
            target: Target::Builtin,
            name: "t".into(),
            timeout: Duration::from_secs(1),
            input_schema,
            check: OnceLock::new(),
        }
    }

    #[test]
    fn validation_names_the_field() {
        let route = route_with(
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
        );
        assert!(route.validate(&json!({"n": 1})).is_ok());
        assert!(
            route
                .validate(&json!({"n": "x"}))
                .unwrap_err()
                .contains("/n")
        );
        assert!(route.validate(&json!({})).unwrap_err().contains("\"n\""));
    }

    #[test]
    fn arguments_that_cannot_be_checked_quickly_are_passed_on_unchecked() {
        let one = json!({"type": "string", "pattern": "^[ab]*a[ab]{1000}c$"});
        let route = route_with(json!({"type": "object", "properties": {"s": one}}));
        assert!(
            route
                .validate(&json!({"s": "ab"}))
                .unwrap_err()
                .contains("/s")
        );
        // 20,000 bytes times 1,011 NFA states: over what the I/O thread takes on.
        assert!(route.validate(&json!({"s": "ab".repeat(10_000)})).is_ok());
        // A schema beyond a plugin's budget (here 33 patterns) is not checked at all.
        let many: Vec<Value> = (0..33)
            .map(|i| json!({"pattern": format!("^{i}")}))
            .collect();
        let route = route_with(json!({"type": "object", "properties": {"s": {"allOf": many}}}));
        assert!(route.validate(&json!({"s": "x"})).is_ok());
    }
}
