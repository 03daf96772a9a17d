use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    wasmgate::cli::run(wasmgate::cli::Cli::parse())
}
