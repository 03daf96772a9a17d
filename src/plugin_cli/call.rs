//! `plugin call FILE TOOL [JSON]` (a middleware's hook: `--hook`, see `call_hook`): one call through the gateway's own call path (catalog,
//! argument checks, sandbox, limits) for a config of this one plugin; `--repeat` and
//! `--script` (see `call_many`) make several on one kept instance. Also what it shares
//! with `wasmgate call`: the one-shot call outside any client session, and its printing.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};

use super::call_many::Calls;
use super::setup::{self, Grants};
use crate::catalog::view::View;
use crate::gateway::Gateway;
use crate::peer::{ClientPeer, Principal};
use crate::pipe::outbox::outbox;
use crate::protocol::{self, Reply, RpcError, methods};
use crate::router::{RequestContext, Router};

#[derive(clap::Args, Debug)]
pub struct CallArgs {
    /// The component (.wasm).
    file: PathBuf,
    /// The tool's name as the plugin lists it (without the gateway's prefix).
    #[arg(required_unless_present_any = ["hook", "script"], conflicts_with_all = ["hook", "script"])]
    tool: Option<String>,
    /// Arguments as a JSON object.
    #[arg(default_value = "{}")]
    arguments: String,
    /// A middleware: run this hook against a sample instead of a tool, and print its
    /// action as JSON.
    #[command(flatten)]
    pub(super) hook: super::call_hook::HookArgs,
    /// A directory the plugin may open, as HOST:GUEST[:ro|rw] (read-only by default; repeatable).
    #[arg(long = "allow-dir", value_name = "HOST:GUEST[:ro|rw]")]
    allow_dirs: Vec<String>,
    /// A host the plugin may send HTTP requests to (`name`, `name:port`, `*.suffix`; repeatable).
    #[arg(long = "allow-host", value_name = "HOST")]
    allow_hosts: Vec<String>,
    /// An environment variable of this process the plugin may read (repeatable).
    #[arg(long = "allow-env", value_name = "NAME")]
    allow_env: Vec<String>,
    /// Linear memory per instance, e.g. 64MiB (the gateway's default when absent).
    #[arg(long, value_name = "SIZE")]
    memory: Option<String>,
    /// Wall time for the call, e.g. 10s (the gateway's default when absent).
    #[arg(long, value_name = "DURATION")]
    timeout: Option<String>,
    /// Make the call N times on one instance (what the plugin keeps shows), printing one
    /// result per line.
    #[arg(long, value_name = "N", requires = "tool", value_parser = clap::value_parser!(u32).range(1..))]
    repeat: Option<u32>,
    /// Run the calls of FILE (`-`: stdin), one JSON object a line, {"tool": NAME,
    /// "arguments": {...}}, on one instance, printing one result per line.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["hook", "repeat"])]
    script: Option<PathBuf>,
    /// What the command line answers a 0.2 plugin's elicitation (`elicitation/create`)
    /// with: a JSON result such as '{"action": "accept", "content": {"name": "Ada"}}', or
    /// @FILE to read it from a file. Without it the plugin hears that no client can answer.
    #[arg(long, value_name = "JSON|@FILE")]
    answer: Option<String>,
}

/// Runs `plugin call`; `settings` are the `--config KEY=VALUE` values.
pub async fn run(args: CallArgs, settings: Vec<String>) -> ExitCode {
    let mut grants = args.grants();
    grants.settings = settings;
    if args.hook.hook.is_some() {
        return super::call_hook::run(&args.file, grants, &args.hook).await;
    }
    let arguments: Value = match serde_json::from_str(&args.arguments) {
        Ok(arguments) => arguments,
        Err(e) => {
            eprintln!("wasmgate: the arguments are not valid JSON: {e}");
            return ExitCode::from(2);
        }
    };
    let answer = match args.answer.as_deref().map(read_answer).transpose() {
        Ok(answer) => answer,
        Err(e) => {
            eprintln!("wasmgate: --answer {e}");
            return ExitCode::from(2);
        }
    };
    let (name, mut config) = match setup::config_for(&args.file, &grants) {
        Ok(found) => found,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let Some(entry) = config.plugins.plugins.get_mut(&name) else {
        eprintln!("wasmgate: plugin `{name}` is missing from the config made for it");
        return ExitCode::from(2);
    };
    // One kept instance for the whole run: the calls of --repeat and --script see what
    // the earlier ones left, as a client's calls do under `instance = "session"`.
    entry.instances.mode = crate::config::InstanceMode::Session;
    let prefix = format!("{}{}", entry.namespace, config.gateway.separator);
    let loading = Instant::now();
    let gateway = Gateway::start(config);
    gateway.wait_for_plugins().await;
    let load_ms = loading.elapsed().as_millis();
    let host = gateway.plugin_host();
    if let Some(failed) = host
        .as_ref()
        .and_then(|h| h.failed_plugins().into_iter().next())
    {
        eprintln!("{}", failed.reason());
        gateway.shutdown().await;
        return ExitCode::from(2);
    }
    let caller = Caller {
        gateway: &gateway,
        prefix,
        observer: Observer::new(answer),
    };
    let code = match (args.tool.as_deref(), args.repeat, &args.script) {
        (Some(tool), None, _) => call_one(&caller, &args.file, tool, arguments, load_ms).await,
        (Some(tool), Some(times), _) => {
            let calls = Calls::repeat(tool, arguments, times);
            super::call_many::run(&caller, &args.file, calls).await
        }
        (None, _, Some(script)) => match Calls::script(script).await {
            Ok(calls) => super::call_many::run(&caller, &args.file, calls).await,
            Err(e) => {
                eprintln!("wasmgate: {e}");
                ExitCode::from(2)
            }
        },
        (None, _, None) => unreachable!("clap requires a tool, a hook or a script"),
    };
    gateway.shutdown().await;
    code
}

/// What each call of a run goes through: the gateway, the plugin's tool prefix, and the
/// one client session (so one kept instance) whose notifications are shown.
pub(super) struct Caller<'a> {
    pub gateway: &'a Arc<Gateway>,
    pub prefix: String,
    pub observer: Observer,
}

impl Caller<'_> {
    /// Whether the plugin has `tool`; if not, says what it has, on stderr.
    pub fn has_tool(&self, file: &std::path::Path, tool: &str) -> bool {
        if self
            .gateway
            .catalog()
            .tool(&format!("{}{tool}", self.prefix))
            .is_some()
        {
            return true;
        }
        let host = self.gateway.plugin_host();
        let tools: Vec<String> = host
            .iter()
            .flat_map(|h| h.plugins())
            .flat_map(|p| p.tools)
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect();
        eprintln!(
            "{}: no tool `{tool}`; it has: {}",
            file.display(),
            tools.join(", ")
        );
        false
    }

    /// One call of the plugin's `tool`; its notifications go to stderr.
    pub async fn call(&self, tool: &str, arguments: Value) -> Result<Value, RpcError> {
        let tool = format!("{}{tool}", self.prefix);
        let (outcome, notifications) = self.observer.call(self.gateway, &tool, arguments).await;
        show_notifications(&notifications);
        outcome
    }
}

/// The single call: its result pretty on stdout, its timing on stderr.
async fn call_one(
    caller: &Caller<'_>,
    file: &std::path::Path,
    tool: &str,
    arguments: Value,
    load_ms: u128,
) -> ExitCode {
    if !caller.has_tool(file, tool) {
        return ExitCode::from(2);
    }
    let started = Instant::now();
    let outcome = caller.call(tool, arguments).await;
    let call_us = started.elapsed().as_micros();
    eprintln!(
        "time: call {:.1} ms (load {load_ms} ms)",
        call_us as f64 / 1000.0
    );
    print_outcome(outcome)
}

/// A call's log messages and progress, on stderr (the result alone goes to stdout, for a
/// script to read).
fn show_notifications(notifications: &[Value]) {
    for note in notifications {
        let params = &note["params"];
        match note["method"].as_str() {
            Some("notifications/message") => {
                let data = &params["data"];
                eprintln!(
                    "log {}: {}",
                    params["level"].as_str().unwrap_or("?"),
                    data.as_str()
                        .map_or_else(|| data.to_string(), str::to_owned)
                );
            }
            Some("notifications/progress") => {
                let total = params["total"].as_f64().map(|t| format!("/{t}"));
                eprintln!(
                    "progress {}{} {}",
                    params["progress"],
                    total.unwrap_or_default(),
                    params["message"].as_str().unwrap_or_default()
                );
            }
            _ => {}
        }
    }
}

impl CallArgs {
    /// The grants and limits of the command line.
    fn grants(&self) -> Grants {
        Grants {
            dirs: self.allow_dirs.clone(),
            hosts: self.allow_hosts.clone(),
            env: self.allow_env.clone(),
            memory: self.memory.clone(),
            timeout: self.timeout.clone(),
            settings: Vec::new(),
        }
    }
}

/// Prints a call's result (stdout) or JSON-RPC error (stderr): exit 0 for a result, 1 for
/// an error result or an error, as `wasmgate call` and `plugin call` both report.
pub fn print_outcome(outcome: Result<Value, RpcError>) -> ExitCode {
    match outcome {
        Ok(result) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&result).unwrap_or_default()
            );
            if result.get("isError").and_then(Value::as_bool) == Some(true) {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(error) => {
            eprintln!("error {}: {}", error.code, error.message);
            if let Some(data) = error.data {
                eprintln!("data: {data}");
            }
            ExitCode::from(1)
        }
    }
}

/// One tool call outside any client session (the `call` command): through the same
/// dispatch, for a peer that no notification reaches.
pub async fn call_once(
    gateway: &Arc<Gateway>,
    tool: &str,
    arguments: Value,
) -> Result<Value, RpcError> {
    let (out, _nobody) = outbox("nobody");
    let context = once_context(ClientPeer::new(out));
    let params = json!({"name": tool, "arguments": arguments});
    Router::new(gateway)
        .dispatch(&context, methods::TOOLS_CALL, Some(params))
        .await
        .map(Reply::into_value)
}

/// The command line as one client session that sees every log message (all levels) and
/// progress of its calls: each call's notifications come back with its outcome.
pub(super) struct Observer {
    context: RequestContext,
    inbox: tokio::sync::Mutex<crate::pipe::outbox::Inbox>,
    /// What it answers an elicitation with (`--answer`).
    answer: Option<Value>,
}

/// `--answer`'s value: JSON text, or `@FILE` holding it; an elicitation result object.
fn read_answer(text: &str) -> Result<Value, String> {
    let text = match text.strip_prefix('@') {
        Some(file) => std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?,
        None => text.to_string(),
    };
    let answer: Value = serde_json::from_str(&text).map_err(|e| format!("is not JSON: {e}"))?;
    match answer["action"].as_str() {
        Some("accept" | "decline" | "cancel") => Ok(answer),
        _ => Err(format!(
            "must be an elicitation result with `action` accept, decline or cancel: {answer}"
        )),
    }
}

impl Observer {
    fn new(answer: Option<Value>) -> Self {
        let (out, inbox) = outbox("command line");
        let peer = ClientPeer::new(out);
        // It declares elicitation only when it has an answer to give.
        let capabilities = match answer {
            Some(_) => json!({"elicitation": {}}),
            None => json!({}),
        };
        // Log messages go to initialized sessions only: this one is, as a current client.
        let _ = peer.initialized(
            protocol::LATEST_VERSION,
            capabilities,
            json!({"name": "wasmgate plugin call"}),
        );
        peer.set_log_level(0);
        Observer {
            context: once_context(peer),
            inbox: tokio::sync::Mutex::new(inbox),
            answer,
        }
    }

    async fn call(
        &self,
        gateway: &Arc<Gateway>,
        tool: &str,
        arguments: Value,
    ) -> (Result<Value, RpcError>, Vec<Value>) {
        let params = json!({
            "name": tool,
            "arguments": arguments,
            "_meta": {"progressToken": "command line"},
        });
        let mut notifications = Vec::new();
        let mut inbox = self.inbox.lock().await;
        let router = Router::new(gateway);
        let call = router.dispatch(&self.context, methods::TOOLS_CALL, Some(params));
        let mut call = std::pin::pin!(call);
        // What the call sends meanwhile: notifications to show, and its requests to the
        // client, answered here (an elicitation with `--answer`, the rest refused).
        let outcome = loop {
            tokio::select! {
                outcome = &mut call => break outcome.map(Reply::into_value),
                Some(message) = inbox.recv() => {
                    if let Ok(value) = serde_json::from_str::<Value>(&message.line) {
                        self.take(value, &mut notifications);
                    }
                }
            }
        };
        while let Some(message) = inbox.try_recv() {
            if let Ok(value) = serde_json::from_str(&message.line) {
                self.take(value, &mut notifications);
            }
        }
        (outcome, notifications)
    }

    /// A message the call sent: a request is answered, the rest kept to show.
    fn take(&self, message: Value, notifications: &mut Vec<Value>) {
        let (Some(id), Some(method)) = (message.get("id"), message["method"].as_str()) else {
            notifications.push(message);
            return;
        };
        let answer = match (&self.answer, method) {
            (Some(answer), methods::ELICITATION_CREATE) => {
                eprintln!(
                    "asked: {}",
                    message["params"]["message"].as_str().unwrap_or_default()
                );
                Ok(answer.clone())
            }
            _ => Err(RpcError::new(
                protocol::METHOD_NOT_FOUND,
                format!("wasmgate plugin call does not answer {method}"),
            )),
        };
        self.context.peer.client_answered(id, answer);
    }
}

fn once_context(peer: ClientPeer) -> RequestContext {
    // The command line is the local user's.
    peer.set_principal(Principal::operator());
    RequestContext {
        trace_id: crate::telemetry::events::new_trace_id(),
        peer: Arc::new(peer),
        request: None,
        principal: Principal::operator(),
        view: View::All,
    }
}
