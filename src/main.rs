use std::process::ExitCode;

use clap::Parser;

/// Every message is parsed into and written from small allocations; mimalloc serves them
/// at a fraction of glibc malloc's cost (figure in docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    wasmgate::cli::run(wasmgate::cli::Cli::parse())
}
