//! The stdio transport: newline-delimited JSON-RPC on stdin/stdout, one client.
//! stdout carries protocol only; logs go to stderr.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::sync::mpsc;

use crate::gateway::Gateway;
use crate::session::Session;

/// Serves one client until `input` ends. Generic so tests can use in-memory pipes.
pub async fn serve<R, W>(gateway: Arc<Gateway>, input: R, output: W) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out_tx, out_rx) = mpsc::unbounded_channel();
    let writer = tokio::spawn(write_lines(output, out_rx));
    let session = Session::new(gateway, out_tx);
    let mut reader = BufReader::with_capacity(64 * 1024, input);
    let mut line = Vec::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).await? == 0 {
            break;
        }
        // JSON text is UTF-8 (RFC 8259): other bytes are a parse error, wherever they are.
        match std::str::from_utf8(&line) {
            Ok(text) => session.handle_line(text.trim_end_matches(['\n', '\r'])),
            Err(err) => session.send(crate::protocol::error_response(
                serde_json::Value::Null,
                &crate::protocol::RpcError::new(
                    crate::protocol::PARSE_ERROR,
                    format!("Parse error: not UTF-8 ({err})"),
                ),
            )),
        }
    }
    // Answers still in flight get `shutdown_grace` once the client closed stdin: a script
    // that pipes requests in and closes stdin still gets its answers, and a stuck call holds
    // exit no longer than a server that ignores its closed stdin would.
    let grace = session.gateway.config.load().gateway.shutdown_grace;
    session.drained(tokio::time::Instant::now() + grace).await;
    drop(session);
    let _ = tokio::time::timeout(Duration::from_millis(200), writer).await;
    Ok(())
}

/// The process's stdin and stdout. When they are pipes (as MCP clients start servers),
/// they are read and written by the async reactor: tokio's own `stdin()`/`stdout()` hand
/// every read and flush to a blocking thread, which costs more than the rest of a call.
pub fn std_streams() -> (
    Box<dyn AsyncRead + Unpin + Send>,
    Box<dyn AsyncWrite + Unpin + Send>,
) {
    use std::os::fd::AsFd;
    use tokio::net::unix::pipe;
    let input: Box<dyn AsyncRead + Unpin + Send> = match std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map(pipe::Receiver::from_owned_fd)
    {
        Ok(Ok(pipe)) => Box::new(pipe),
        _ => Box::new(tokio::io::stdin()),
    };
    let output: Box<dyn AsyncWrite + Unpin + Send> = match std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .map(pipe::Sender::from_owned_fd)
    {
        Ok(Ok(pipe)) => Box::new(pipe),
        _ => Box::new(tokio::io::stdout()),
    };
    (input, output)
}

async fn write_lines<W: AsyncWrite + Unpin>(output: W, mut rx: mpsc::UnboundedReceiver<String>) {
    let mut out = BufWriter::with_capacity(64 * 1024, output);
    while let Some(line) = rx.recv().await {
        if write_line(&mut out, &line).await.is_err() {
            return;
        }
        // Everything already queued goes out with one flush.
        while let Ok(line) = rx.try_recv() {
            if write_line(&mut out, &line).await.is_err() {
                return;
            }
        }
        if out.flush().await.is_err() {
            return;
        }
    }
}

async fn write_line<W: AsyncWrite + Unpin>(
    out: &mut BufWriter<W>,
    line: &str,
) -> std::io::Result<()> {
    out.write_all(line.as_bytes()).await?;
    out.write_all(b"\n").await
}
