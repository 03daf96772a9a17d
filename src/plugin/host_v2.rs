//! The imports of the 0.2 world: `host` (as 0.1's, plus `cancelled`), `results` (the
//! `reply` a call writes into), `client` (requests to the calling client, whose wait does
//! not count against the call's time), `notify` and `store`.

use std::time::{Duration, Instant};

use serde_json::Value;
use wasmtime::component::{HasData, Linker, Resource, ResourceTable};

use super::bindings::Level as LevelV1;
use super::bindings::wasmgate::plugin::host as host_v1;
use super::bindings_v2::wasmgate::plugin::{client, host, notify, results, store, types};
use super::cancel::Cancel;
use super::host_impl::{AskRoute, HostCtx};
use super::kv::KvError;
use super::limits::Deadline;
use super::reply::Reply;
use super::sandbox::StoreState;
use super::{PluginEvent, PluginNotice};
use crate::protocol::{self, RpcError, methods};

/// Bytes of one request to the client (its `params`), at most: an elicitation schema
/// or a sampling prompt, not a document.
pub const MAX_ASK_BYTES: usize = 64 << 10;

/// Requests to its client one call may make, at most.
pub const MAX_ASKS_PER_CALL: u32 = 32;

/// Notifications one call may send, at most; the rest are dropped.
const MAX_NOTICES_PER_CALL: u32 = 100;

/// What the 0.2 imports reach of an instance's state.
pub struct HostV2<'a> {
    pub host: &'a mut HostCtx,
    pub table: &'a mut ResourceTable,
    pub deadline: &'a mut Deadline,
}

/// Selects [`HostV2`] out of the store data for the generated linker glue.
pub struct HostV2Data;

impl HasData for HostV2Data {
    type Data<'a> = HostV2<'a>;
}

impl types::Host for HostV2<'_> {}

impl host::Host for HostV2<'_> {
    fn log(&mut self, level: host::Level, message: String) {
        let level = match level {
            host::Level::Debug => LevelV1::Debug,
            host::Level::Info => LevelV1::Info,
            host::Level::Warning => LevelV1::Warning,
            host::Level::Error => LevelV1::Error,
        };
        host_v1::Host::log(self.host, level, message);
    }

    fn progress(&mut self, progress: f64, total: Option<f64>, message: Option<String>) {
        host_v1::Host::progress(self.host, progress, total, message);
    }

    fn config(&mut self, key: String) -> Option<String> {
        host_v1::Host::config(self.host, key)
    }

    fn cancelled(&mut self) -> bool {
        (self.host.sinks.cancel.as_ref()).is_some_and(|c| c.is_cancelled())
    }

    fn traceparent(&mut self) -> Option<String> {
        self.host.sinks.traceparent.as_deref().map(str::to_string)
    }
}

impl results::Host for HostV2<'_> {}

impl results::HostReply for HostV2<'_> {
    fn room(&mut self, reply: Resource<Reply>) -> u64 {
        self.table.get(&reply).map_or(0, Reply::room)
    }

    fn add(&mut self, reply: Resource<Reply>, item: types::Content) -> Result<(), String> {
        match self.table.get_mut(&reply) {
            Ok(reply) => reply.add(item),
            Err(e) => Err(format!("no such reply: {e}")),
        }
    }

    fn structured(&mut self, reply: Resource<Reply>, json: String) -> Result<(), String> {
        match self.table.get_mut(&reply) {
            Ok(reply) => reply.structured(json),
            Err(e) => Err(format!("no such reply: {e}")),
        }
    }

    fn mark_error(&mut self, reply: Resource<Reply>) {
        if let Ok(reply) = self.table.get_mut(&reply) {
            reply.mark_error();
        }
    }

    fn drop(&mut self, reply: Resource<Reply>) -> wasmtime::Result<()> {
        // The host owns every reply and takes it back after the call; a guest never
        // holds one to drop.
        let _ = self.table.delete(reply);
        Ok(())
    }
}

impl client::Host for HostV2<'_> {
    async fn elicit(&mut self, params: String) -> Result<String, types::AskError> {
        self.ask(methods::ELICITATION_CREATE, Some(params)).await
    }

    async fn sample(&mut self, params: String) -> Result<String, types::AskError> {
        self.ask(methods::SAMPLING_CREATE_MESSAGE, Some(params))
            .await
    }

    async fn roots(&mut self) -> Result<String, types::AskError> {
        roots_of(self.ask(methods::ROOTS_LIST, None).await?)
    }

    async fn ask_all(
        &mut self,
        requests: Vec<client::Request>,
    ) -> Result<Vec<Result<String, types::AskError>>, types::AskError> {
        let route = self.route()?;
        let left = MAX_ASKS_PER_CALL.saturating_sub(self.host.asks) as usize;
        if requests.len() > left {
            return Err(types::AskError::Refused(format!(
                "{} requests, and this call may ask its client {left} more times \
                 ({MAX_ASKS_PER_CALL} in all)",
                requests.len()
            )));
        }
        let asks: Vec<_> = requests
            .into_iter()
            .map(|request| {
                let (method, params) = match request {
                    client::Request::Elicit(p) => (methods::ELICITATION_CREATE, Some(p)),
                    client::Request::Sample(p) => (methods::SAMPLING_CREATE_MESSAGE, Some(p)),
                    client::Request::Roots => (methods::ROOTS_LIST, None),
                };
                (method, self.prepare(method, params.as_deref()))
            })
            .collect();
        let _waiting = self.permit(&route)?;
        let started = Instant::now();
        self.deadline.paused.begin();
        let cancel = self.host.sinks.cancel.clone();
        // Sent together: a client of 2026-07-28 gets them in one `input_required` round.
        let answers = futures_util::future::join_all(asks.into_iter().map(|(method, ask)| {
            let (route, cancel) = (&route, cancel.as_deref());
            async move {
                let answer = wait(route, cancel, method, ask?).await?;
                match method {
                    methods::ROOTS_LIST => roots_of(answer),
                    _ => Ok(answer),
                }
            }
        }))
        .await;
        self.pause(started.elapsed());
        Ok(answers)
    }
}

/// The `roots` list of a `roots/list` result.
fn roots_of(result: String) -> Result<String, types::AskError> {
    let roots = serde_json::from_str::<Value>(&result)
        .ok()
        .and_then(|mut v| v.get_mut("roots").map(Value::take))
        .filter(Value::is_array)
        .ok_or_else(|| types::AskError::Failed("the client's answer has no `roots` list".into()))?;
    Ok(roots.to_string())
}

/// Waits for the client's answer to one request, within `ask_timeout`, unless the call
/// is cancelled meanwhile.
async fn wait(
    route: &AskRoute,
    cancel: Option<&Cancel>,
    method: &'static str,
    params: Option<Value>,
) -> Result<String, types::AskError> {
    let asked = (route.sink)(method, params);
    let outcome = tokio::select! {
        answer = tokio::time::timeout(route.timeout, asked) => match answer {
            Ok(answer) => answer.map_err(ask_error),
            Err(_) => Err(types::AskError::TimedOut(format!(
                "the client did not answer {method} within {} s (ask_timeout)",
                route.timeout.as_secs_f64()
            ))),
        },
        _ = async {
            match cancel {
                Some(cancel) => cancel.cancelled().await,
                None => std::future::pending().await,
            }
        } => Err(types::AskError::Cancelled("the call was cancelled".into())),
    };
    outcome.map(|value| value.to_string())
}

impl HostV2<'_> {
    /// One request to the calling client: bounded in size, number and in how many of the
    /// plugin's calls wait at once; its wait is added to the call's deadline.
    async fn ask(
        &mut self,
        method: &'static str,
        params: Option<String>,
    ) -> Result<String, types::AskError> {
        let route = self.route()?;
        let params = self.prepare(method, params.as_deref())?;
        let _waiting = self.permit(&route)?;
        let started = Instant::now();
        self.deadline.paused.begin();
        let cancel = self.host.sinks.cancel.clone();
        let outcome = wait(&route, cancel.as_deref(), method, params).await;
        self.pause(started.elapsed());
        outcome
    }

    /// Where this call's requests to its client go.
    fn route(&self) -> Result<AskRoute, types::AskError> {
        self.host.sinks.ask.clone().ok_or_else(|| {
            types::AskError::Unsupported(
                "no client to ask: the call did not come from an MCP client".into(),
            )
        })
    }

    /// The params of one request, checked, and counted against the call's bound.
    fn prepare(
        &mut self,
        method: &'static str,
        params: Option<&str>,
    ) -> Result<Option<Value>, types::AskError> {
        let refused = types::AskError::Refused;
        if let Some(params) = params
            && params.len() > MAX_ASK_BYTES
        {
            return Err(refused(format!(
                "{method} params of {} bytes; a request to the client may have {} KiB",
                params.len(),
                MAX_ASK_BYTES >> 10
            )));
        }
        let params = match params.map(serde_json::from_str::<Value>) {
            None => None,
            Some(Ok(value @ Value::Object(_))) => Some(value),
            Some(_) => {
                return Err(types::AskError::Failed(format!(
                    "{method} params are not a JSON object text"
                )));
            }
        };
        self.host.asks += 1;
        if self.host.asks > MAX_ASKS_PER_CALL {
            return Err(refused(format!(
                "this call asked its client {MAX_ASKS_PER_CALL} times already"
            )));
        }
        Ok(params)
    }

    /// This call's turn among the plugin's calls that wait for their clients.
    fn permit(
        &self,
        route: &AskRoute,
    ) -> Result<tokio::sync::OwnedSemaphorePermit, types::AskError> {
        route.waiting.clone().try_acquire_owned().map_err(|_| {
            types::AskError::Refused(format!(
                "{} calls of this plugin wait for their clients already",
                route.max_waiting
            ))
        })
    }

    /// The time the call waited for its client does not count against its limit.
    fn pause(&mut self, waited: Duration) {
        self.deadline.at += waited;
        self.deadline.paused.end(waited);
    }

    fn notice(&mut self, notice: PluginNotice) {
        self.host.notices += 1;
        if self.host.notices > MAX_NOTICES_PER_CALL {
            return;
        }
        if let Some(events) = &self.host.events {
            let _ = events.send(PluginEvent::Notice {
                name: self.host.plugin().to_string(),
                notice,
            });
        }
    }
}

/// A client's refusal in the words of the WIT.
fn ask_error(error: RpcError) -> types::AskError {
    let message = error.message.clone();
    match error.code {
        protocol::METHOD_NOT_FOUND | protocol::modern::MISSING_CLIENT_CAPABILITY => {
            types::AskError::Unsupported(message)
        }
        protocol::REQUEST_TIMEOUT => types::AskError::TimedOut(message),
        _ => types::AskError::Failed(format!("{message} (error {})", error.code)),
    }
}

impl notify::Host for HostV2<'_> {
    fn tools_changed(&mut self) {
        self.notice(PluginNotice::ToolsChanged);
    }

    fn resources_changed(&mut self) {
        self.notice(PluginNotice::ResourcesChanged);
    }

    fn prompts_changed(&mut self) {
        self.notice(PluginNotice::PromptsChanged);
    }

    fn resource_updated(&mut self, uri: String) {
        self.notice(PluginNotice::ResourceUpdated(uri));
    }
}

impl store::Host for HostV2<'_> {
    fn get(&mut self, key: String) -> Option<Vec<u8>> {
        self.host.sinks.kv.as_ref()?.get(&key)
    }

    fn set(&mut self, key: String, value: Vec<u8>) -> Result<(), types::StoreError> {
        self.kv()?.set(&key, value).map_err(store_error)
    }

    fn delete(&mut self, key: String) -> Result<(), types::StoreError> {
        self.kv()?.delete(&key).map_err(store_error)
    }

    fn keys(&mut self, prefix: String) -> Vec<String> {
        (self.host.sinks.kv.as_ref()).map_or_else(Vec::new, |kv| kv.keys(&prefix))
    }
}

impl HostV2<'_> {
    fn kv(&self) -> Result<&super::kv::KvHandle, types::StoreError> {
        self.host.sinks.kv.as_ref().ok_or_else(|| {
            types::StoreError::Unavailable(
                "no store: this call runs outside a client's call".into(),
            )
        })
    }
}

fn store_error(error: KvError) -> types::StoreError {
    let text = error.to_string();
    match error {
        KvError::Full { .. } => types::StoreError::Full(text),
        KvError::InvalidKey(_) => types::StoreError::InvalidKey(text),
        KvError::Unavailable(_) => types::StoreError::Unavailable(text),
    }
}

/// Adds the 0.2 imports to the linker that serves every world.
pub fn add_to_linker(linker: &mut Linker<StoreState>) -> wasmtime::Result<()> {
    use super::bindings_v2::wasmgate::plugin as v2;
    v2::types::add_to_linker::<StoreState, HostV2Data>(linker, StoreState::v2)?;
    v2::host::add_to_linker::<StoreState, HostV2Data>(linker, StoreState::v2)?;
    v2::results::add_to_linker::<StoreState, HostV2Data>(linker, StoreState::v2)?;
    v2::client::add_to_linker::<StoreState, HostV2Data>(linker, StoreState::v2)?;
    v2::notify::add_to_linker::<StoreState, HostV2Data>(linker, StoreState::v2)?;
    v2::store::add_to_linker::<StoreState, HostV2Data>(linker, StoreState::v2)?;
    Ok(())
}
