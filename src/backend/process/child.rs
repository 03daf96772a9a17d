//! The server's process: spawned in its own process group with a base environment,
//! stopped politely (stdin closed, SIGTERM) and then not (SIGKILL to the group).

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::process::{Child, Command};

use super::ProcessBackend;
use super::connection::Connection;
use crate::config::ServerConfig;

impl ProcessBackend {
    /// After the server's process is gone: processes it started that still hold its stdout
    /// (a wrapper's child, a helper left behind) would keep the reader, and the gateway's
    /// exit, waiting for ever. They get `shutdown_grace` to go, then its process group
    /// gets SIGKILL.
    pub(super) async fn reap_group(&self, pid: u32, mut reader: tokio::task::JoinHandle<()>) {
        // (A finished handle must not be awaited again.)
        if reader.is_finished()
            || tokio::time::timeout(self.shutdown_grace, &mut reader)
                .await
                .is_ok()
        {
            return;
        }
        tracing::warn!(server = %self.name, pid, "processes it started still hold its output; sending SIGKILL to its process group");
        if pid != 0 {
            signal_group(pid, libc::SIGKILL);
        }
        if tokio::time::timeout(Duration::from_secs(1), &mut reader)
            .await
            .is_err()
        {
            reader.abort();
        }
    }

    pub(super) async fn terminate(&self, mut child: Child, connection: &Arc<Connection>) {
        let name = &self.name;
        let grace = self.shutdown_grace;
        // Closing stdin is the polite way to ask an MCP server to leave.
        connection.close();
        connection.writer.close();
        drop(child.stdin.take());
        if tokio::time::timeout(grace, child.wait()).await.is_ok() {
            return;
        }
        if let Some(pid) = child.id() {
            tracing::info!(server = %name, pid, "did not exit on stdin close; sending SIGTERM");
            signal_group(pid, libc::SIGTERM);
            if tokio::time::timeout(grace, child.wait()).await.is_ok() {
                return;
            }
            tracing::warn!(server = %name, pid, "did not exit on SIGTERM; sending SIGKILL");
            signal_group(pid, libc::SIGKILL);
        }
        let _ = child.kill().await;
    }
}

pub(super) fn spawn(config: &ServerConfig) -> std::io::Result<Child> {
    let config = config.stdio();
    let mut command = Command::new(&config.command);
    if !config.inherit_env {
        command.env_clear();
        for name in crate::config::BASE_ENV {
            // A value that starts with `()` is an exported shell function: never passed on.
            if let Some(value) = std::env::var_os(name)
                && !value.as_encoded_bytes().starts_with(b"()")
            {
                command.env(name, value);
            }
        }
    }
    // The HTTP front's own token is never passed on, not even with `inherit_env`; a server
    // entry's `env` may still give one explicitly.
    command.env_remove(crate::config::ENV_TOKEN);
    command
        .args(&config.args)
        .envs(&config.env)
        .envs(crate::nesting::chain().map(|chain| (crate::nesting::VAR, chain)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        // Its own process group, so that stopping it reaches what it spawned (npx, uvx wrappers).
        .process_group(0);
    if let Some(cwd) = &config.cwd {
        command.current_dir(cwd);
    }
    // A server gets the open-file limit the gateway was started with, not the one it raised
    // for itself: some programs still use select(), which breaks past descriptor 1023.
    if let Some(soft) = crate::descriptors::original_soft_limit() {
        // SAFETY: between fork and exec only async-signal-safe calls: getrlimit, setrlimit.
        unsafe {
            command.pre_exec(move || {
                let mut limit = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur != soft {
                    limit.rlim_cur = soft;
                    libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
                }
                Ok(())
            });
        }
    }
    command.spawn()
}

/// Resolves when a stop was asked for; the borrow of the flag ends here, before any await of the caller.
pub(super) fn signal_group(pid: u32, signal: i32) {
    // SAFETY: kill(2) with a negative pid signals the process group we created for the child.
    unsafe {
        libc::kill(-(pid as i32), signal);
    }
}

/// How the process exited, if it does within moments: its pipes end just before it exits.
pub(super) async fn exit_soon(child: &mut Child) -> Option<String> {
    tokio::time::timeout(Duration::from_millis(200), child.wait())
        .await
        .ok()
        .map(describe_exit)
}

pub(super) fn describe_exit(status: std::io::Result<std::process::ExitStatus>) -> String {
    match status {
        Ok(s) => s.to_string(),
        Err(e) => e.to_string(),
    }
}
