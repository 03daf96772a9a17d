//! Peers measured beside the gateway, when scripts/peers.sh has installed them into
//! target/peers (the bench installs nothing): mcp-proxy (crates.io), an MCP reverse proxy
//! with an HTTP front, in front of the same example server over stdio.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::Paths;
use crate::Result;
use crate::http::HttpTarget;
use crate::pipe::{toml_string, write_config};

/// mcp-proxy in front of the example server, as `mcp-proxy`; `None` when not installed.
pub(crate) async fn mcp_proxy(paths: &Paths, scratch: &Path) -> Result<Option<HttpTarget>> {
    let program = std::env::var_os("WASMGATE_BENCH_MCP_PROXY")
        .map(PathBuf::from)
        .unwrap_or_else(|| paths.target.join("peers/bin/mcp-proxy"));
    if !program.is_file() {
        println!(
            "mcp-proxy: not measured ({} is missing: `bash scripts/peers.sh` installs it)",
            program.display()
        );
        return Ok(None);
    }
    let addr = free_port()?;
    let config = scratch.join("mcp-proxy.toml");
    write_config(
        &config,
        &format!(
            "[proxy]\nname = \"bench\"\n\n[proxy.listen]\nhost = \"127.0.0.1\"\nport = {}\n\n\
             [[backends]]\nname = \"ex\"\ntransport = \"stdio\"\ncommand = {}\n",
            addr.port(),
            toml_string(&paths.server)
        ),
    )?;
    let config = config.to_str().ok_or("scratch is not UTF-8")?;
    let program = program.to_str().ok_or("its path is not UTF-8")?;
    // Its MCP endpoint is `/`, its tools `BACKEND/TOOL`. Its log at `info`, as the
    // gateway's is (unset, it logs every request at `debug`).
    let target = HttpTarget::start_at(
        "mcp-proxy",
        "ex/echo",
        Path::new("/usr/bin/env"),
        &["RUST_LOG=info", program, "--config", config],
        (addr, "/"),
        scratch,
    )
    .await?;
    Ok(Some(target))
}

/// A loopback port free a moment ago: mcp-proxy takes its port from its config.
fn free_port() -> Result<SocketAddr> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    listener.local_addr().map_err(|e| e.to_string())
}
