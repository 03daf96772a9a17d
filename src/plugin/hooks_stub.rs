//! TEMPORARY stub of the middleware API (replaced by mwhost's).
use std::sync::Arc;
use std::time::Duration;

use super::{LogSink, PluginHost};

pub enum PluginKind {
    Tools,
    Middleware,
}
#[derive(Clone, Default)]
pub struct Interest {
    pub requests: Vec<String>,
    pub results: Vec<String>,
    pub lists: Vec<String>,
    pub names: Vec<String>,
}
#[derive(Clone, Copy, Debug)]
pub enum Direction {
    ToServer,
    ToClient,
}
pub struct HookContext {
    pub method: String,
    pub direction: Direction,
    pub target: Option<String>,
    pub route: Option<String>,
    pub principal: Option<String>,
    pub profile: Option<String>,
    pub client_name: Option<String>,
    pub client_version: Option<String>,
    pub era: String,
    pub trace_id: String,
}
pub struct Denial {
    pub message: String,
    pub code: Option<i32>,
    pub data: Option<String>,
}
pub enum RequestAction {
    Pass,
    Replace(String),
    Deny(Denial),
    Answer(String),
}
pub enum Outcome {
    Success(String),
    Failure(String),
}
pub enum ResultAction {
    Pass,
    Replace(String),
    Deny(Denial),
}
pub struct ListContext {
    pub method: String,
    pub profile: Option<String>,
}
pub struct ListEntry {
    pub name: String,
    pub route: Option<String>,
    pub definition: String,
}
pub struct Edit {
    pub name: String,
    pub hide: bool,
    pub rename: Option<String>,
    pub title: Option<String>,
    pub description: Option<String>,
    pub annotations: Option<String>,
}
pub struct HookCall {
    pub timeout: Duration,
    pub session: Option<Arc<str>>,
    pub log: Option<LogSink>,
}
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("not loaded: {0}")]
    NotLoaded(String),
    #[error("not middleware: {0}")]
    NotMiddleware(String),
    #[error("{middleware}: {reason}")]
    Failed { middleware: String, reason: String },
}
impl PluginHost {
    pub fn middleware(&self, name: &str) -> Result<Middleware, HookError> {
        Err(HookError::NotLoaded(name.into()))
    }
}
#[derive(Clone)]
pub struct Middleware {
    interest: Interest,
}
impl Middleware {
    pub fn name(&self) -> &str {
        ""
    }
    pub fn digest(&self) -> &str {
        ""
    }
    pub fn interest(&self) -> &Interest {
        &self.interest
    }
    pub async fn on_request(
        &self,
        _ctx: &HookContext,
        _params: &str,
        _call: HookCall,
    ) -> Result<RequestAction, HookError> {
        todo!()
    }
    pub async fn on_result(
        &self,
        _ctx: &HookContext,
        _params: &str,
        _outcome: &Outcome,
        _elapsed_us: u64,
        _call: HookCall,
    ) -> Result<ResultAction, HookError> {
        todo!()
    }
    pub async fn on_list(
        &self,
        _ctx: &ListContext,
        _entries: &[ListEntry],
        _call: HookCall,
    ) -> Result<Vec<Edit>, HookError> {
        todo!()
    }
}
