//! `wasmgate plugin …`: a plugin author's commands. `new` writes a project that builds as
//! it is, `build` builds and validates it, `inspect` says what a component is and needs,
//! `call` runs one tool. `inspect` and `call` go through the gateway's own loader, sandbox
//! and limits, so what they accept is what the gateway serves. `push`, `pull`, `sign` and
//! `keygen` publish to OCI registries.

mod build;
mod build_errors;
mod call;
mod call_hook;
mod call_many;
pub mod dev;
mod inspect;
mod new;
mod oci;
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
    /// Call one tool of a component (or run one hook of a middleware: --hook) in the
    /// gateway's sandbox and limits, with the settings `--config KEY=VALUE` gives; with
    /// --repeat or --script, several calls on one instance. Exit 0 on success, 1 on an
    /// error result (a failed hook), 2 when the call could not be made.
    Call(Box<call::CallArgs>),
    /// Push a component to an OCI registry (the layout `wkg` uses); prints REF@sha256:….
    Push {
        file: PathBuf,
        #[command(flatten)]
        target: oci::Target,
    },
    /// Pull a component from an OCI registry, verified against its digest (and signature,
    /// with --public-key).
    Pull {
        #[command(flatten)]
        target: oci::Target,
        /// Where to write it (default: ./REPOSITORY-NAME.wasm).
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
        /// A cosign public key (PEM) the artifact's signature must verify with.
        #[arg(long, value_name = "PEM")]
        public_key: Option<PathBuf>,
    },
    /// Sign a pushed component (REF@sha256:…, as push prints it) with a private key,
    /// storing a cosign-style signature beside it in the registry.
    Sign {
        #[command(flatten)]
        target: oci::Target,
        /// The ECDSA P-256 private key, PKCS#8 PEM (`plugin keygen` writes one).
        #[arg(long, value_name = "PEM")]
        key: PathBuf,
    },
    /// Write a new signing key pair to DIR: cosign.key (private) and cosign.pub.
    Keygen { dir: PathBuf },
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

/// Runs a plugin command; `config` is what `--config` gave, which only `call` reads (as
/// KEY=VALUE settings): these commands read no config file.
pub fn run(command: PluginCommand, config: Vec<PathBuf>) -> ExitCode {
    match command {
        PluginCommand::New {
            name,
            lang,
            kind,
            dir,
        } => new::run(&name, lang, kind, dir),
        PluginCommand::Build { dir } => block_on(build::run(dir.unwrap_or_else(|| ".".into()))),
        PluginCommand::Inspect { file, json } => block_on(inspect::run(&file, json)),
        PluginCommand::Call(args) => {
            let settings = config
                .iter()
                .map(|value| value.to_string_lossy().into_owned())
                .collect();
            block_on(call::run(*args, settings))
        }
        PluginCommand::Push { file, target } => {
            oci::finish(block_on_result(oci::push(&file, &target)))
        }
        PluginCommand::Pull {
            target,
            output,
            public_key,
        } => oci::finish(block_on_result(oci::pull(
            &target,
            output,
            public_key.as_deref(),
        ))),
        PluginCommand::Sign { target, key } => {
            oci::finish(block_on_result(oci::sign(&target, &key)))
        }
        PluginCommand::Keygen { dir } => oci::finish(oci::keygen(&dir)),
    }
}

/// [`block_on`] for work that fails with an error of its own.
fn block_on_result<E>(work: impl Future<Output = Result<ExitCode, E>>) -> Result<ExitCode, E> {
    let mut outcome = None;
    let code = block_on(async {
        outcome = Some(work.await);
        ExitCode::SUCCESS
    });
    outcome.unwrap_or(Ok(code))
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
