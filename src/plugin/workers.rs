//! The plugin threads: a multi-thread runtime of its own, apart from the gateway's I/O
//! thread. They make and reset instances (the ready pool's refill), validate new
//! versions, and take over any call that does not finish within its first poll on the
//! I/O thread (see `Calls::run`): a plugin that computes or waits for host I/O never
//! holds up the messages of other calls and sessions for longer than an epoch tick.

use std::future::Future;

use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::{Builder, Runtime};

use super::cancel::Cancel;

pub struct Workers {
    /// Always `Some` until dropped; an `Option` so that `drop` can take it.
    runtime: Option<Runtime>,
}

impl Workers {
    pub fn start() -> std::io::Result<Workers> {
        // One core is left to the I/O thread. Fewer threads also means fewer TLB-shootdown
        // interrupts when the pooling allocator resets an instance's memory (madvise), which
        // doubled the CPU of a Python plugin call with a thread per core.
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
            .saturating_sub(1)
            .max(1);
        let runtime = Builder::new_multi_thread()
            .worker_threads(threads)
            // A guest that computes yields at every epoch tick (1 ms); new calls wait in the
            // global queue, which by default is looked at only every 61 polls: with few
            // threads, a call beside a spinning plugin would wait for that plugin's time limit.
            .global_queue_interval(1)
            .thread_name("wasmgate-plugin")
            .enable_all()
            .build()?;
        Ok(Workers {
            runtime: Some(runtime),
        })
    }

    /// Runs `task` on a plugin thread; `Err` if it panicked or the runtime is shutting down.
    /// Dropping the returned future (the client cancelled the call) aborts the task at its
    /// next await: for a guest that computes, its next epoch tick. Its store goes with it.
    pub async fn run<T: Send + 'static>(
        &self,
        task: impl Future<Output = T> + Send + 'static,
        cancel: Option<Arc<Cancel>>,
    ) -> Result<T, String> {
        let runtime = self.runtime.as_ref().expect("present until drop");
        let task = runtime.spawn(task);
        let _abort_if_dropped = AbortOnDrop {
            task: task.abort_handle(),
            cancel,
            runtime: runtime.handle().clone(),
        };
        task.await.map_err(|e| {
            if e.is_panic() {
                "the plugin host panicked".to_string()
            } else {
                "the plugin host is shutting down".to_string()
            }
        })
    }

    /// Makes the plugin threads' runtime the current one until the guard drops: timers and
    /// tasks that a call creates during its first poll on the I/O thread then belong to the
    /// runtime the call moves to, which outlives the I/O thread's.
    pub fn enter(&self) -> tokio::runtime::EnterGuard<'_> {
        self.runtime.as_ref().expect("present until drop").enter()
    }

    /// Starts `task` on a plugin thread without waiting for it.
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.runtime
            .as_ref()
            .expect("present until drop")
            .spawn(task);
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        // The last reference to the host may go away on one of these threads, or inside
        // the gateway's runtime: neither may block on the workers' shutdown.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Aborts a task when dropped; a no-op once the task has finished.
/// How long a cancelled 0.2 call may go on to see `host.cancelled` and end on its own.
const CANCEL_GRACE: Duration = Duration::from_secs(1);

/// Stops a call whose caller went away: at once, or (a 0.2 call, which can see its
/// cancellation) after it was told and had [`CANCEL_GRACE`] to end cleanly.
struct AbortOnDrop {
    task: tokio::task::AbortHandle,
    cancel: Option<Arc<Cancel>>,
    runtime: tokio::runtime::Handle,
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        match &self.cancel {
            Some(cancel) if !self.task.is_finished() => {
                cancel.cancel();
                let task = self.task.clone();
                self.runtime.spawn(async move {
                    tokio::time::sleep(CANCEL_GRACE).await;
                    task.abort();
                });
            }
            _ => self.task.abort(),
        }
    }
}
