use std::process::ExitCode;

use clap::Parser;

/// Every message is parsed into and written from small allocations; mimalloc serves them
/// at a fraction of glibc malloc's cost (measured: malloc and free were ~25% of the CPU).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    wasmgate::cli::run(wasmgate::cli::Cli::parse())
}
