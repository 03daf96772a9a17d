//! `wasmgate plugin …`: a plugin author's commands. `new` writes a project that builds as
//! it is, `build` builds and validates it, `inspect` says what a component is and needs,
//! `call` runs one tool. `inspect` and `call` go through the gateway's own loader, sandbox
//! and limits, so what they accept is what the gateway serves.

mod build;
mod call;
mod call_hook;
pub mod dev;
mod inspect;
mod new;
mod setup;

use std::future::Future;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Subcommand, ValueEnum};

pub use call::{call_once, print_outcome};

/// The plugin contract this binary was built with: `wasmgate wit > wit/plugin.wit`.
pub const PLUGIN_WIT: &str = include_str!("../../wit/plugin.wit");

/// The 0.2 plugin world (`wasmgate wit` prints it: new plugins are built against it).
pub const PLUGIN_WIT_V2: &str = include_str!("../../wit/plugin-0.2/plugin.wit");

#[derive(Subcommand, Debug)]
pub enum PluginCommand {
    /// Write a new plugin project that builds as it is (one example tool, WIT vendored in),
    /// or with `--kind middleware` a pass-through middleware.
    New {
        /// The plugin's name: its crate, its file (NAME.wasm) and its tools' prefix.
        name: String,
        #[arg(long, value_enum, default_value_t = Lang::Rust)]
        lang: Lang,
        /// A plugin (tools) or a middleware (hooks on requests, results and lists).
        #[arg(long, value_enum, default_value_t = Kind::Plugin)]
        kind: Kind,
        /// Where to create the project (default: ./NAME).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Build a plugin project for wasm32-wasip2, then check the component as the gateway would.
    Build {
        /// The project (default: the current folder).
        dir: Option<PathBuf>,
    },
    /// What a component is: its world, tools and schemas, imports and the grants they need.
    Inspect {
        file: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Call one tool of a component (or run one hook of a middleware: --hook), with no
    /// config, in the gateway's sandbox and limits. Exit 0 on success, 1 on an error result
    /// (a failed hook), 2 when the call could not be made.
    Call(Box<call::CallArgs>),
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    Rust,
    Python,
    /// componentize-js: `js` on the command line.
    Js,
}

/// What `plugin new` writes: a component of which world.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Plugin,
    Middleware,
}

pub fn run(command: PluginCommand) -> ExitCode {
    match command {
        PluginCommand::New {
            name,
            lang,
            kind,
            dir,
        } => new::run(&name, lang, kind, dir),
        PluginCommand::Build { dir } => block_on(build::run(dir.unwrap_or_else(|| ".".into()))),
        PluginCommand::Inspect { file, json } => block_on(inspect::run(&file, json)),
        PluginCommand::Call(args) => block_on(call::run(*args)),
    }
}

fn block_on(work: impl Future<Output = ExitCode>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("wasmgate: cannot start the async runtime: {err}");
            return ExitCode::from(2);
        }
    };
    let code = runtime.block_on(work);
    // A plugin's worker threads must not keep the process alive.
    runtime.shutdown_timeout(Duration::from_millis(200));
    code
}
