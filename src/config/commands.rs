//! What only `wasmgate check` verifies: that each enabled server's command can be run.
//! It concerns the machine rather than the file, so serving does not refuse a config for
//! it: a program may be installed after the gateway started, and a failed start is retried.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::error::{ConfigError, Diagnostic, line_col, locate};
use super::model::{Config, ServerConfig};
use super::validate::{EnvLookup, Format};

/// Every enabled server whose command is a path that is not an executable file, or a bare
/// name found on no `PATH` directory. `file` is the config as named to the loader, read
/// again for the lines of the commands.
pub fn check_commands(config: &Config, file: &Path, env: EnvLookup<'_>) -> Result<(), ConfigError> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let servers_key = Format::detect(file, &text).servers_key();
    let problems: Vec<Diagnostic> = config
        .servers
        .values()
        .filter(|server| !server.disabled)
        .filter_map(|server| {
            let (message, fix) = unrunnable(server, env)?;
            let at = locate(&text, &[servers_key, &server.name, "command"], None);
            let (line, column) = at.map(|at| line_col(&text, at)).unzip();
            Some(Diagnostic {
                file: file.to_path_buf(),
                line,
                column,
                key: Some(format!("{servers_key}.{}.command", server.name)),
                message,
                fix: Some(fix),
            })
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ConfigError::Invalid(problems))
    }
}

/// Why the server's command cannot be run, and what to do, as the spawn would find it: a
/// command with a `/` is a path (a relative one from the server's `cwd`, else from the
/// working directory), any other is looked up on the `PATH` of the server's `env`, else
/// the gateway's.
fn unrunnable(server: &ServerConfig, env: EnvLookup<'_>) -> Option<(String, String)> {
    let crate::config::ServerTransport::Stdio(stdio) = &server.transport else {
        return None;
    };
    let command = &stdio.command;
    if command.contains('/') {
        let path = match &stdio.cwd {
            Some(cwd) => cwd.join(command),
            None => std::path::absolute(command).unwrap_or_else(|_| PathBuf::from(command)),
        };
        let shown = if path.as_os_str() == command.as_str() {
            format!("`{command}`")
        } else {
            format!("`{command}` ({})", path.display())
        };
        return match path.metadata() {
            Err(_) => Some((
                format!("command {shown} does not exist"),
                "correct the path, or install the program there".into(),
            )),
            Ok(_) if !executable(&path) => Some((
                format!("command {shown} is not an executable file"),
                "point command at the program, or make it executable (chmod +x)".into(),
            )),
            Ok(_) => None,
        };
    }
    let search = stdio.env.get("PATH").cloned().or_else(|| env("PATH"))?;
    if std::env::split_paths(&search).any(|dir| executable(&dir.join(command))) {
        return None;
    }
    Some((
        format!("command `{command}` is not found on PATH"),
        "install it, or write its absolute path; an MCP client may start the gateway with a shorter PATH than your shell's".into(),
    ))
}

fn executable(path: &Path) -> bool {
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(toml: &str, env: EnvLookup<'_>) -> Vec<String> {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let file =
            std::env::temp_dir().join(format!("wasmgate-commands-{}-{n}.toml", std::process::id()));
        std::fs::write(&file, toml).unwrap();
        let config = super::super::load_with_env(&file, env).expect("a valid config");
        let found = match check_commands(&config, &file, env) {
            Ok(()) => Vec::new(),
            Err(err) => err.diagnostics().iter().map(|d| d.to_string()).collect(),
        };
        let _ = std::fs::remove_file(&file);
        found
    }

    fn env(name: &str) -> Option<String> {
        (name == "PATH").then(|| "/nonexistent-dir:/bin:/usr/bin".to_string())
    }

    #[test]
    fn runnable_commands_pass() {
        let toml = "[servers.a]\ncommand = \"sh\"\n[servers.b]\ncommand = \"/bin/sh\"\n[servers.c]\ncommand = \"./sh\"\ncwd = \"/bin\"\n[servers.off]\ncommand = \"/nonexistent/x\"\ndisabled = true\n";
        assert_eq!(problems(toml, &env), Vec::<String>::new());
    }

    #[test]
    fn missing_paths_and_names_are_errors_with_their_line() {
        let toml = "[servers.a]\ncommand = \"/nonexistent/bin/x\"\n\n[servers.b]\ncommand = \"no-such-program-wasmgate\"\n[servers.c]\ncommand = \"/bin\"\n[servers.d]\ncommand = \"sh\"\nenv = { PATH = \"/nonexistent-dir\" }\n";
        let found = problems(toml, &env);
        assert_eq!(found.len(), 4, "{found:#?}");
        assert!(
            found[0]
                .contains(":2:1: servers.a.command: command `/nonexistent/bin/x` does not exist"),
            "{}",
            found[0]
        );
        assert!(
            found[1].contains(
                ":5:1: servers.b.command: command `no-such-program-wasmgate` is not found on PATH"
            ),
            "{}",
            found[1]
        );
        assert!(
            found[2].contains("`/bin` is not an executable file"),
            "{}",
            found[2]
        );
        assert!(
            found[3].contains("`sh` is not found on PATH"),
            "the server's own PATH is searched: {}",
            found[3]
        );
    }
}
