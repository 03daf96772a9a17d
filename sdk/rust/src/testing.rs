//! A stand-in for the gateway when tools run natively, in `cargo test`: it records what
//! they log and report, and serves the config a test sets. Per thread, so tests running
//! side by side do not see each other's. On wasm the real host is used and this is inert.

use std::cell::RefCell;
use std::collections::HashMap;

use crate::wit::Level;

/// One `progress` report: progress, total, message.
pub type Progress = (f64, Option<f64>, Option<String>);

#[derive(Default)]
struct FakeHost {
    config: HashMap<String, String>,
    logs: Vec<(Level, String)>,
    progress: Vec<Progress>,
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

pub(crate) fn log(level: Level, message: &str) {
    HOST.with_borrow_mut(|h| h.logs.push((level, message.into())));
}

pub(crate) fn progress(progress: f64, total: Option<f64>, message: Option<&str>) {
    HOST.with_borrow_mut(|h| h.progress.push((progress, total, message.map(Into::into))));
}

pub(crate) fn config(key: &str) -> Option<String> {
    HOST.with_borrow(|h| h.config.get(key).cloned())
}
