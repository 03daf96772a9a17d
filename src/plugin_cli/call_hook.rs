//! `plugin call FILE --hook request|result|list ...`: one hook of a middleware against a
//! sample request, result or list, in the gateway's sandbox and limits, its action printed
//! as JSON (stdout); its log lines and timing on stderr.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::ValueEnum;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::setup::{self, Grants};
use crate::plugin::{
    Denial, Direction, Edit, HookCall, HookContext, ListContext, ListEntry, Outcome, PluginHost,
    RequestAction, ResultAction,
};

#[derive(clap::Args, Debug, Default)]
pub struct HookArgs {
    /// Run this hook of a middleware against a sample, instead of a tool.
    #[arg(long, value_enum)]
    pub hook: Option<Hook>,
    /// The request's (or list's) method; default tools/call (tools/list for --hook list).
    #[arg(long, requires = "hook")]
    method: Option<String>,
    /// The tool or prompt name, or the resource URI, the request names.
    #[arg(long, requires = "hook")]
    target: Option<String>,
    /// The server or plugin the request goes to.
    #[arg(long, requires = "hook")]
    route: Option<String>,
    /// The request's params, a JSON object; default {"name": TARGET, "arguments": {}}
    /// for tools/call with --target, else {}.
    #[arg(long, requires = "hook")]
    params: Option<String>,
    /// --hook result: the result object the request ended with (JSON; default
    /// {"content": []}).
    #[arg(long, requires = "hook", conflicts_with = "error")]
    result: Option<String>,
    /// --hook result: the JSON-RPC error object the request ended with instead.
    #[arg(long, requires = "hook")]
    error: Option<String>,
    /// --hook list: the entries, a JSON array of MCP objects (Tool, Prompt or Resource).
    #[arg(long, requires = "hook")]
    entries: Option<String>,
    /// A value the middleware reads with host.config(KEY), as `config` in its entry sets
    /// one (repeatable); `--config KEY=VALUE` does the same.
    #[arg(long = "set", value_name = "KEY=VALUE", requires = "hook")]
    settings: Vec<String>,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hook {
    Request,
    Result,
    List,
}

/// What the hook gets, read from the command line.
enum Sample {
    Request(HookContext, String),
    Result(HookContext, String, Outcome),
    List(ListContext, Vec<ListEntry>),
}

pub async fn run(file: &Path, grants: Grants, args: &HookArgs) -> ExitCode {
    let sample = match sample(args) {
        Ok(sample) => sample,
        Err(e) => {
            eprintln!("wasmgate: {e}");
            return ExitCode::from(2);
        }
    };
    let (name, mut config) = match setup::config_for(file, &grants) {
        Ok(found) => found,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    setup::as_middleware(&mut config, &name);
    if let Some(entry) = config.plugins.plugins.get_mut(&name) {
        for pair in &args.settings {
            match pair.split_once('=') {
                Some((key, value)) => entry.config.insert(key.to_owned(), value.to_owned()),
                None => {
                    eprintln!("wasmgate: --set {pair}: write KEY=VALUE");
                    return ExitCode::from(2);
                }
            };
        }
    }
    let loading = Instant::now();
    let (events, _events) = mpsc::unbounded_channel();
    let host = match PluginHost::start(&config.plugins, &[], events).await {
        Ok(host) => host,
        Err(e) => {
            eprintln!("wasmgate: cannot start the plugin host: {e:#}");
            return ExitCode::from(2);
        }
    };
    let load_ms = loading.elapsed().as_millis();
    let code = run_hook(&host, &name, sample, load_ms).await;
    host.shutdown().await;
    code
}

async fn run_hook(host: &PluginHost, name: &str, sample: Sample, load_ms: u128) -> ExitCode {
    if let Some(failed) = host.failed_plugins().into_iter().next() {
        eprintln!("{}", failed.reason());
        return ExitCode::from(2);
    }
    let middleware = match host.middleware(name) {
        Ok(middleware) => middleware,
        Err(e) => {
            eprintln!("wasmgate: {e}");
            return ExitCode::from(2);
        }
    };
    // The middleware's own time limit (--timeout) bounds the hook.
    let call = HookCall {
        timeout: Duration::from_secs(24 * 3600),
        session: None,
        log: Some(Arc::new(|level, message| {
            eprintln!("log {level}: {message}")
        })),
    };
    let started = Instant::now();
    let action = match sample {
        Sample::Request(ctx, params) => {
            (middleware.on_request(&ctx, &params, call).await).map(|action| request_json(&action))
        }
        Sample::Result(ctx, params, outcome) => {
            (middleware.on_result(&ctx, &params, &outcome, 0, call).await)
                .map(|action| result_json(&action))
        }
        Sample::List(ctx, entries) => (middleware.on_list(&ctx, &entries, call).await)
            .map(|edits| json!({"edits": edits.iter().map(edit_json).collect::<Vec<_>>()})),
    };
    eprintln!(
        "time: hook {:.1} ms (load {load_ms} ms)",
        started.elapsed().as_secs_f64() * 1000.0
    );
    match action {
        Ok(action) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&action).unwrap_or_default()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// The hook's input from the command line, or why it is unusable.
fn sample(args: &HookArgs) -> Result<Sample, String> {
    let hook = args
        .hook
        .ok_or("name a tool to call, or a middleware hook with --hook request|result|list")?;
    if hook == Hook::List {
        let method = args.method.clone().unwrap_or_else(|| "tools/list".into());
        let entries = list_entries(args.entries.as_deref().unwrap_or("[]"), &method)?;
        return Ok(Sample::List(
            ListContext {
                method,
                profile: None,
            },
            entries,
        ));
    }
    let method = args.method.clone().unwrap_or_else(|| "tools/call".into());
    let params = match (&args.params, &args.target) {
        (Some(params), _) => object("--params", params)?,
        (None, Some(target)) if method == "tools/call" => {
            json!({"name": target, "arguments": {}}).to_string()
        }
        (None, _) => "{}".to_string(),
    };
    let ctx = HookContext {
        method,
        direction: Direction::ToServer,
        target: args.target.clone(),
        route: args.route.clone(),
        principal: None,
        profile: None,
        client_name: Some("wasmgate plugin call".into()),
        client_version: Some(env!("CARGO_PKG_VERSION").into()),
        era: crate::protocol::LATEST_VERSION.into(),
        trace_id: crate::telemetry::events::new_trace_id(),
    };
    if hook == Hook::Request {
        return Ok(Sample::Request(ctx, params));
    }
    let outcome = match (&args.result, &args.error) {
        (_, Some(error)) => Outcome::Failure(object("--error", error)?),
        (Some(result), None) => Outcome::Success(object("--result", result)?),
        (None, None) => Outcome::Success(r#"{"content":[]}"#.into()),
    };
    Ok(Sample::Result(ctx, params, outcome))
}

/// `text` if it is a JSON object, compacted.
fn object(flag: &str, text: &str) -> Result<String, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) => Ok(value.to_string()),
        Ok(_) => Err(format!("{flag} must be a JSON object")),
        Err(e) => Err(format!("{flag} is not valid JSON: {e}")),
    }
}

/// `--entries`: MCP objects, each named by its `name` (a resource by its `uri`).
fn list_entries(text: &str, method: &str) -> Result<Vec<ListEntry>, String> {
    let key = if method == "resources/list" {
        "uri"
    } else {
        "name"
    };
    let items = match serde_json::from_str::<Value>(text) {
        Ok(Value::Array(items)) => items,
        Ok(_) => return Err("--entries must be a JSON array of MCP objects".into()),
        Err(e) => return Err(format!("--entries is not valid JSON: {e}")),
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| match item[key].as_str() {
            Some(name) => Ok(ListEntry {
                name: name.to_owned(),
                route: None,
                definition: item.to_string(),
            }),
            None => Err(format!("--entries: entry {i} has no string `{key}`")),
        })
        .collect()
}

/// JSON text a middleware answered (checked by the host to be an object), as a value.
fn parsed(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}

fn denial_json(denial: &Denial) -> Value {
    json!({
        "action": "deny",
        "message": denial.message,
        "code": denial.code,
        "data": denial.data.as_deref().map(parsed),
    })
}

fn request_json(action: &RequestAction) -> Value {
    match action {
        RequestAction::Pass => json!({"action": "pass"}),
        RequestAction::Replace(params) => json!({"action": "replace", "params": parsed(params)}),
        RequestAction::Deny(denial) => denial_json(denial),
        RequestAction::Answer(result) => json!({"action": "answer", "result": parsed(result)}),
    }
}

fn result_json(action: &ResultAction) -> Value {
    match action {
        ResultAction::Pass => json!({"action": "pass"}),
        ResultAction::Replace(result) => json!({"action": "replace", "result": parsed(result)}),
        ResultAction::Deny(denial) => denial_json(denial),
    }
}

fn edit_json(edit: &Edit) -> Value {
    let mut out = json!({"name": edit.name});
    if edit.hide {
        out["hide"] = json!(true);
    }
    for (key, value) in [
        ("rename", &edit.rename),
        ("title", &edit.title),
        ("description", &edit.description),
    ] {
        if let Some(value) = value {
            out[key] = json!(value);
        }
    }
    if let Some(annotations) = &edit.annotations {
        out["annotations"] = parsed(annotations);
    }
    out
}
