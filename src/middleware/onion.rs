//! A request through the chain: the request hooks of the links that apply, in order, then
//! what they let through, then the result hooks of the links it passed, in reverse. A link
//! that denies or answers stops the way in; the links before it still see the outcome.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::{Chain, Link};
use crate::catalog::Target;
use crate::config::OnError;
use crate::plugin::{
    Denial, Direction, HookCall, HookContext, Outcome, RequestAction, ResultAction,
};
use crate::protocol::{self, Reply, RpcError};
use crate::telemetry::traces;

/// Where a request goes (to-server) or comes from (to-client).
#[derive(Clone, Copy, Debug)]
pub enum Route<'a> {
    Server(&'a str),
    Plugin(&'a str),
    /// The gateway's own tools and methods.
    Gateway,
}

impl<'a> Route<'a> {
    /// Where the catalog routes an item (`None`: no backend serves it).
    pub fn of(target: Option<&'a Target>) -> Route<'a> {
        match target {
            Some(Target::Server(backend)) => Route::Server(backend.name()),
            Some(Target::Wasm(plugin)) => Route::Plugin(plugin),
            Some(Target::Builtin) | None => Route::Gateway,
        }
    }

    pub(super) fn name(&self) -> Option<String> {
        match self {
            Route::Server(name) | Route::Plugin(name) => Some(name.to_string()),
            Route::Gateway => None,
        }
    }
}

/// What the chain knows of a request.
pub struct Facts<'a> {
    pub method: &'a str,
    pub direction: Direction,
    pub target: Option<&'a str>,
    pub route: Route<'a>,
    pub principal: Option<&'a str>,
    pub profile: Option<&'a str>,
    /// The client's `clientInfo`.
    pub client: &'a (dyn Fn() -> Value + Sync),
    pub era: &'a (dyn Fn() -> String + Sync),
    pub trace_id: &'a str,
    /// Keeps `instance = "session"` middleware per client.
    pub session: Option<Arc<str>>,
    pub timeout: Duration,
}

/// A link that applies to the request, and which of its hooks do.
struct Step<'c> {
    link: &'c Link,
    request: bool,
    result: bool,
}

impl Chain {
    /// Runs `next` with the params the request hooks let through, unless one denies or
    /// answers; then the result hooks. Without a link that applies, only `next`.
    pub async fn around<'f, F, Fut>(
        &self,
        facts: &Facts<'f>,
        params: Option<Value>,
        next: F,
    ) -> Result<Reply, RpcError>
    where
        F: FnOnce(Option<Value>) -> Fut,
        Fut: Future<Output = Result<Reply, RpcError>>,
    {
        let steps: Vec<Step<'_>> = (self.links.iter())
            .filter_map(|link| {
                let (request, result) =
                    link.scope
                        .applies(facts.method, &facts.route, facts.target, facts.profile);
                (request || result).then_some(Step {
                    link,
                    request,
                    result,
                })
            })
            .collect();
        if steps.is_empty() {
            return next(params).await;
        }
        let context = context_of(facts);
        let started = Instant::now();
        let mut params = params;
        let mut text: Option<String> = None;
        let mut passed = 0;
        let mut stopped: Option<Result<Reply, RpcError>> = None;
        for step in &steps {
            if step.request {
                let sent = text.get_or_insert_with(|| params_text(&params));
                match run_request(step.link, &context, sent, facts).await {
                    Ok(RequestAction::Pass) => {}
                    Ok(RequestAction::Replace(new)) => match object(&new) {
                        Ok(value) => {
                            params = Some(value);
                            text = Some(new);
                        }
                        Err(why) => {
                            let why = format!("its on-request replaced the params with {why}");
                            if let Some(refused) = failure(step.link, &why) {
                                stopped = Some(Err(refused));
                            }
                        }
                    },
                    Ok(RequestAction::Deny(denial)) => {
                        stopped = Some(Err(denied(step.link, denial)));
                    }
                    Ok(RequestAction::Answer(result)) => match object(&result) {
                        Ok(value) => stopped = Some(Ok(Reply::Built(value))),
                        Err(why) => {
                            let why = format!("its on-request answered with {why}");
                            if let Some(refused) = failure(step.link, &why) {
                                stopped = Some(Err(refused));
                            }
                        }
                    },
                    Err(error) => {
                        if let Some(refused) = failure(step.link, &error) {
                            stopped = Some(Err(refused));
                        }
                    }
                }
            }
            if stopped.is_some() {
                break;
            }
            passed += 1;
        }
        let results = steps[..passed].iter().any(|s| s.result);
        // What the result hooks are told went on, before `next` takes the params.
        let sent = match (results, text) {
            (false, _) => String::new(),
            (true, Some(text)) => text,
            (true, None) => params_text(&params),
        };
        let mut outcome = match stopped {
            Some(outcome) => outcome,
            None => next(params).await,
        };
        let elapsed_us = started.elapsed().as_micros() as u64;
        for step in steps[..passed].iter().rev().filter(|s| s.result) {
            let seen = outcome_of(&outcome);
            let call = hook_call(step.link, facts);
            let traced = traces::hook(&step.link.name, "on-result");
            let action = match &step.link.state {
                Ok(middleware) => {
                    let hook = middleware.on_result(&context, &sent, &seen, elapsed_us, call);
                    (traces::within(traced.as_ref(), hook).await).map_err(|e| e.to_string())
                }
                Err(why) => Err(why.clone()),
            };
            traces::end(traced, action.as_ref().err().map(String::as_str));
            match action {
                Ok(ResultAction::Pass) => {}
                Ok(ResultAction::Replace(new)) => match object(&new) {
                    Ok(value) => outcome = Ok(Reply::Built(value)),
                    Err(why) => {
                        let why = format!("its on-result replaced the result with {why}");
                        if let Some(refused) = failure(step.link, &why) {
                            outcome = Err(refused);
                        }
                    }
                },
                Ok(ResultAction::Deny(denial)) => outcome = Err(denied(step.link, denial)),
                Err(why) => {
                    if let Some(refused) = failure(step.link, &why) {
                        outcome = Err(refused);
                    }
                }
            }
        }
        outcome
    }
}

/// The link's request hook; `Err` is why it failed, or why it is not loaded.
async fn run_request(
    link: &Link,
    context: &HookContext,
    params: &str,
    facts: &Facts<'_>,
) -> Result<RequestAction, String> {
    let traced = traces::hook(&link.name, "on-request");
    let action = match &link.state {
        Ok(middleware) => {
            let hook = middleware.on_request(context, params, hook_call(link, facts));
            (traces::within(traced.as_ref(), hook).await).map_err(|e| e.to_string())
        }
        Err(why) => Err(why.clone()),
    };
    traces::end(traced, action.as_ref().err().map(String::as_str));
    action
}

fn hook_call(link: &Link, facts: &Facts<'_>) -> HookCall {
    HookCall {
        timeout: facts.timeout,
        session: facts.session.clone(),
        log: Some(link.log.clone()),
    }
}

fn context_of(facts: &Facts<'_>) -> HookContext {
    let client = (facts.client)();
    let field = |key: &str| client.get(key).and_then(Value::as_str).map(str::to_string);
    HookContext {
        method: facts.method.to_string(),
        direction: facts.direction,
        target: facts.target.map(str::to_string),
        route: facts.route.name(),
        principal: facts.principal.map(str::to_string),
        profile: facts.profile.map(str::to_string),
        client_name: field("name"),
        client_version: field("version"),
        era: (facts.era)(),
        trace_id: facts.trace_id.to_string(),
    }
}

/// A failed hook under its link's `on_error`: the error that refuses the request, or
/// `None` to go on as if it had passed.
fn failure(link: &Link, why: &str) -> Option<RpcError> {
    match link.on_error {
        OnError::Deny => {
            tracing::warn!(middleware = %link.name, "middleware {} failed; request refused: {why}", link.name);
            Some(link.failed(why))
        }
        OnError::Pass => {
            tracing::warn!(middleware = %link.name, "middleware {} failed; passed over (on_error = \"pass\"): {why}", link.name);
            None
        }
    }
}

/// A middleware's refusal as the client reads it.
fn denied(link: &Link, denial: Denial) -> RpcError {
    let mut data = Map::new();
    data.insert("middleware".into(), json!(link.name));
    if let Some(extra) = denial.data.as_deref() {
        let extra = serde_json::from_str(extra).unwrap_or_else(|_| json!(extra));
        data.insert("detail".into(), extra);
    }
    let code = denial.code.map_or(protocol::MIDDLEWARE_DENIED, i64::from);
    RpcError::new(code, denial.message).with_data(Value::Object(data))
}

fn params_text(params: &Option<Value>) -> String {
    params
        .as_ref()
        .map_or_else(|| "{}".into(), Value::to_string)
}

/// A hook's JSON object text, parsed; else what it was, in words.
fn object(text: &str) -> Result<Value, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err("JSON that is not an object".into()),
        Err(e) => Err(format!("text that is not JSON ({e})")),
    }
}

/// The outcome as the result hooks read it.
fn outcome_of(outcome: &Result<Reply, RpcError>) -> Outcome {
    match outcome {
        Ok(Reply::Built(value)) => Outcome::Success(value.to_string()),
        Ok(Reply::Raw(raw) | Reply::Written { raw, .. }) => Outcome::Success(raw.get().to_string()),
        Err(error) => {
            let mut object = json!({"code": error.code, "message": error.message});
            if let Some(data) = &error.data {
                object["data"] = (**data).clone();
            }
            Outcome::Failure(object.to_string())
        }
    }
}
