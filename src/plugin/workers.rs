//! The threads plugin code runs on: a multi-thread runtime of its own, apart from the
//! gateway's I/O thread. A plugin that computes for a while never holds up the messages
//! of other calls and sessions, and calls to plugins use every core.

use std::future::Future;

use tokio::runtime::{Builder, Runtime};

pub struct Workers {
    /// Always `Some` until dropped; an `Option` so that `drop` can take it.
    runtime: Option<Runtime>,
}

impl Workers {
    pub fn start() -> std::io::Result<Workers> {
        let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
        let runtime = Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("wasmgate-plugin")
            .enable_all()
            .build()?;
        Ok(Workers { runtime: Some(runtime) })
    }

    /// Runs `task` on a plugin thread; `Err` if it panicked or the runtime is shutting down.
    pub async fn run<T: Send + 'static>(&self, task: impl Future<Output = T> + Send + 'static) -> Result<T, String> {
        let runtime = self.runtime.as_ref().expect("present until drop");
        runtime.spawn(task).await.map_err(|e| if e.is_panic() { "the plugin host panicked".to_string() } else { "the plugin host is shutting down".to_string() })
    }

    /// Starts `task` on a plugin thread without waiting for it.
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.runtime.as_ref().expect("present until drop").spawn(task);
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
