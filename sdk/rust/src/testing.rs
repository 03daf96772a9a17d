//! A stand-in for the gateway when plugins run natively, in `cargo test`: it records what
//! they log, report and announce, serves the config a test sets, keeps an in-memory
//! store, and answers the client requests (elicitation, sampling, roots) a test scripts.
//! Per thread, so tests running side by side do not see each other's. On wasm the real
//! host is used and this is inert.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, VecDeque};

use serde_json::{Value, json};

use crate::notify::Notification;
use crate::wit::wasmgate::plugin::client::Request;
use crate::wit::{AskError, Level, StoreError};

/// One `progress` report: progress, total, message.
pub type Progress = (f64, Option<f64>, Option<String>);

/// One request a plugin made of the client: its method and params.
pub type Ask = (String, Value);

#[derive(Default)]
struct FakeHost {
    config: HashMap<String, String>,
    logs: Vec<(Level, String)>,
    progress: Vec<Progress>,
    cancelled: bool,
    store: BTreeMap<String, Vec<u8>>,
    notifications: Vec<Notification>,
    elicitations: VecDeque<Result<Value, AskError>>,
    samples: VecDeque<Result<Value, AskError>>,
    roots: Option<Value>,
    asks: Vec<Ask>,
}

thread_local! {
    static HOST: RefCell<FakeHost> = RefCell::default();
}

/// Makes [`config`](crate::config)`(key)` answer `value` on this thread.
pub fn set_config(key: &str, value: &str) {
    HOST.with_borrow_mut(|h| h.config.insert(key.into(), value.into()));
}

/// The lines logged on this thread since the last call, oldest first.
pub fn take_logs() -> Vec<(Level, String)> {
    HOST.with_borrow_mut(|h| std::mem::take(&mut h.logs))
}

/// The progress reported on this thread since the last call, oldest first.
pub fn take_progress() -> Vec<Progress> {
    HOST.with_borrow_mut(|h| std::mem::take(&mut h.progress))
}

/// Makes [`cancelled`](crate::cancelled) answer `cancelled` on this thread.
pub fn set_cancelled(cancelled: bool) {
    HOST.with_borrow_mut(|h| h.cancelled = cancelled);
}

/// The announcements ([`crate::notify`]) made on this thread since the last call.
pub fn take_notifications() -> Vec<Notification> {
    HOST.with_borrow_mut(|h| std::mem::take(&mut h.notifications))
}

/// Empties this thread's store (it starts empty, and lasts as long as the thread).
pub fn clear_store() {
    HOST.with_borrow_mut(|h| h.store.clear());
}

/// The next elicitation is accepted with `content` (the form's values).
pub fn accept_elicitation(content: Value) {
    answer_elicitation(Ok(json!({"action": "accept", "content": content})));
}

/// The next elicitation is declined.
pub fn decline_elicitation() {
    answer_elicitation(Ok(json!({"action": "decline"})));
}

/// The next elicitation gets `answer`: a result (`{"action": ...}`) or why none came.
/// Answers are used in the order given; an elicitation with none left is `unsupported`.
pub fn answer_elicitation(answer: Result<Value, AskError>) {
    HOST.with_borrow_mut(|h| h.elicitations.push_back(answer));
}

/// The next sampling request gets `answer` (the sampled message, or why none came).
pub fn answer_sampling(answer: Result<Value, AskError>) {
    HOST.with_borrow_mut(|h| h.samples.push_back(answer));
}

/// The next sampling request is answered with the text `text`.
pub fn sample_answer_text(text: &str) {
    answer_sampling(Ok(json!({
        "role": "assistant",
        "content": {"type": "text", "text": text},
        "model": "testing",
        "stopReason": "endTurn",
    })));
}

/// Makes [`roots`](crate::client::roots) answer these `(uri, name)` roots.
pub fn set_roots(roots: &[(&str, &str)]) {
    let roots = roots
        .iter()
        .map(|(uri, name)| json!({"uri": uri, "name": name}))
        .collect();
    HOST.with_borrow_mut(|h| h.roots = Some(Value::Array(roots)));
}

/// The requests made of the client on this thread since the last call, oldest first.
pub fn take_asks() -> Vec<Ask> {
    HOST.with_borrow_mut(|h| std::mem::take(&mut h.asks))
}

pub(crate) fn log(level: Level, message: &str) {
    HOST.with_borrow_mut(|h| h.logs.push((level, message.into())));
}

pub(crate) fn progress(progress: f64, total: Option<f64>, message: Option<&str>) {
    HOST.with_borrow_mut(|h| h.progress.push((progress, total, message.map(Into::into))));
}

pub(crate) fn config(key: &str) -> Option<String> {
    HOST.with_borrow(|h| h.config.get(key).cloned())
}

pub(crate) fn cancelled() -> bool {
    HOST.with_borrow(|h| h.cancelled)
}

pub(crate) fn notify(what: Notification) {
    HOST.with_borrow_mut(|h| h.notifications.push(what));
}

fn check_key(key: &str) -> Result<(), StoreError> {
    if key.is_empty() || key.len() > 512 {
        return Err(StoreError::InvalidKey(format!(
            "a key is 1 to 512 bytes, not {}",
            key.len()
        )));
    }
    Ok(())
}

pub(crate) fn store_get(key: &str) -> Option<Vec<u8>> {
    HOST.with_borrow(|h| h.store.get(key).cloned())
}

pub(crate) fn store_set(key: &str, value: &[u8]) -> Result<(), StoreError> {
    check_key(key)?;
    HOST.with_borrow_mut(|h| h.store.insert(key.into(), value.into()));
    Ok(())
}

pub(crate) fn store_delete(key: &str) -> Result<(), StoreError> {
    check_key(key)?;
    HOST.with_borrow_mut(|h| h.store.remove(key));
    Ok(())
}

pub(crate) fn store_keys(prefix: &str) -> Vec<String> {
    HOST.with_borrow(|h| {
        h.store
            .keys()
            .filter(|k| k.starts_with(prefix))
            .cloned()
            .collect()
    })
}

/// Records the request and gives the next scripted answer from `queue`.
fn ask(
    method: &str,
    params: &str,
    queue: impl FnOnce(&mut FakeHost) -> Option<Result<Value, AskError>>,
) -> Result<String, AskError> {
    let params = serde_json::from_str(params).unwrap_or(Value::Null);
    HOST.with_borrow_mut(|h| {
        h.asks.push((method.into(), params));
        let answer = queue(h).unwrap_or_else(|| {
            Err(AskError::Unsupported(format!(
                "{method}: no answer scripted (wasmgate_plugin::testing)"
            )))
        });
        answer.map(|v| v.to_string())
    })
}

pub(crate) fn elicit(params: &str) -> Result<String, AskError> {
    ask("elicitation/create", params, |h| h.elicitations.pop_front())
}

pub(crate) fn sample(params: &str) -> Result<String, AskError> {
    ask("sampling/createMessage", params, |h| h.samples.pop_front())
}

pub(crate) fn ask_all(requests: &[Request]) -> Result<Vec<Result<String, AskError>>, AskError> {
    Ok(requests
        .iter()
        .map(|request| match request {
            Request::Elicit(params) => elicit(params),
            Request::Sample(params) => sample(params),
            Request::Roots => roots(),
        })
        .collect())
}

pub(crate) fn roots() -> Result<String, AskError> {
    ask("roots/list", "null", |h| h.roots.clone().map(Ok))
}
