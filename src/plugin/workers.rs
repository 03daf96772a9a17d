//! The threads plugin code runs on: a multi-thread runtime of its own, apart from the
//! gateway's I/O thread. A plugin that computes for a while never holds up the messages
//! of other calls and sessions, and plugin calls run beside the I/O, on the other cores.

use std::future::Future;
use std::sync::mpsc::{SyncSender, TrySendError};

use tokio::runtime::{Builder, Runtime};

pub struct Workers {
    /// Always `Some` until dropped; an `Option` so that `drop` can take it.
    runtime: Option<Runtime>,
    /// Used stores on their way to the reaper thread.
    discarded: SyncSender<Box<dyn Send>>,
}

/// Stores the reaper may have waiting; past that they are dropped where they are, so a
/// starved reaper (it runs at nice 19) cannot pile up slots and their memory.
const REAPER_BACKLOG: usize = 4;

/// Drops what it is sent, at the lowest CPU priority. Dropping a used store of a big
/// plugin resets megabytes of its memory slot; done on a plugin thread, that delayed the
/// answer of the call just made (the I/O thread woke up behind it: +0.7 ms for Python).
fn start_reaper() -> std::io::Result<SyncSender<Box<dyn Send>>> {
    let (sender, receiver) = std::sync::mpsc::sync_channel::<Box<dyn Send>>(REAPER_BACKLOG);
    std::thread::Builder::new().name("wasmgate-reaper".into()).spawn(move || {
        // Linux sets a nice value per thread; elsewhere the reaper keeps the default priority.
        // SAFETY: setpriority on this thread's own id; failure leaves the default priority.
        #[cfg(target_os = "linux")]
        unsafe {
            libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19)
        };
        while let Ok(item) = receiver.recv() {
            drop(item);
        }
    })?;
    Ok(sender)
}

impl Workers {
    pub fn start() -> std::io::Result<Workers> {
        // One core is left to the I/O thread. Fewer threads also means fewer TLB-shootdown
        // interrupts when the pooling allocator resets an instance's memory (madvise), which
        // doubled the CPU of a Python plugin call with a thread per core.
        let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).saturating_sub(1).max(1);
        let runtime = Builder::new_multi_thread()
            .worker_threads(threads)
            // A guest that computes yields at every epoch tick (10 ms); new calls wait in the
            // global queue, which by default is looked at only every 61 polls: with few
            // threads, a call beside a spinning plugin would wait for that plugin's time limit.
            .global_queue_interval(1)
            .thread_name("wasmgate-plugin")
            .enable_all()
            .build()?;
        Ok(Workers { runtime: Some(runtime), discarded: start_reaper()? })
    }

    /// Drops `item` on the reaper thread (see [`start_reaper`]), or here if the reaper
    /// is behind or gone.
    pub fn discard(&self, item: impl Send + 'static) {
        if let Err(TrySendError::Full(item) | TrySendError::Disconnected(item)) = self.discarded.try_send(Box::new(item)) {
            drop(item);
        }
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
