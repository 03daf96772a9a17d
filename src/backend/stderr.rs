//! A server's stderr into the gateway's log: read in bounded pieces whatever the bytes,
//! one escaped log line per line, under a budget, so that a chatty or binary-spewing server
//! neither stops being read (and dies of SIGPIPE) nor floods the log.

use std::sync::{Arc, Mutex};

use tokio::io::AsyncReadExt;

use crate::telemetry::budget::{self, Budget};
use crate::telemetry::one_line;

/// Longest line logged; the rest of a longer one is dropped, and the cut said.
const MAX_LINE: usize = 4096;
/// Characters of the last line kept for a start-up failure's message and `gateway_status`
/// (where a model may read it).
pub const LAST_LINE_CHARS: usize = 300;

/// Logs `stderr` until it closes, keeping its last non-empty line in `last`.
pub async fn log_stderr(
    server: String,
    mut stderr: impl tokio::io::AsyncRead + Unpin,
    last: Arc<Mutex<String>>,
) {
    let mut lines = Lines::new(server, last);
    let mut chunk = vec![0u8; 8192];
    loop {
        match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => lines.feed(&chunk[..n]),
        }
    }
    lines.finish();
}

struct Lines {
    server: String,
    last: Arc<Mutex<String>>,
    line: Vec<u8>,
    /// Bytes of the current line dropped past [`MAX_LINE`].
    cut: usize,
    budget: Budget,
}

impl Lines {
    fn new(server: String, last: Arc<Mutex<String>>) -> Lines {
        Lines {
            server,
            last,
            line: Vec::new(),
            cut: 0,
            budget: Budget::default(),
        }
    }

    fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let (piece, ended) = match bytes.iter().position(|&b| b == b'\n') {
                Some(end) => (&bytes[..end], true),
                None => (bytes, false),
            };
            let room = MAX_LINE - self.line.len();
            self.line.extend_from_slice(&piece[..piece.len().min(room)]);
            self.cut += piece.len().saturating_sub(room);
            bytes = &bytes[piece.len() + usize::from(ended)..];
            if ended {
                self.emit();
            }
        }
    }

    fn finish(&mut self) {
        if !self.line.is_empty() || self.cut > 0 {
            self.emit();
        }
    }

    fn emit(&mut self) {
        let text = String::from_utf8_lossy(&self.line);
        let text = text.trim_end_matches('\r');
        let shown = one_line(text);
        if !text.trim().is_empty() {
            *self.last.lock().unwrap() = shown.trim().chars().take(LAST_LINE_CHARS).collect();
        }
        if self.budget.take_or_drop() {
            let dropped = self.budget.take_dropped();
            if dropped > 0 {
                tracing::warn!(server = %self.server, "{dropped} stderr lines not logged ({})", budget::rule());
            }
            match self.cut {
                0 => tracing::info!(server = %self.server, "stderr: {shown}"),
                cut => {
                    tracing::info!(server = %self.server, "stderr: {shown} [{cut} more bytes cut]")
                }
            }
        }
        self.line.clear();
        self.cut = 0;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::{LAST_LINE_CHARS, MAX_LINE, log_stderr};

    /// Bytes that are not UTF-8, a line longer than the limit and control characters are all
    /// read through to the end; the last line is kept escaped and cut.
    #[tokio::test]
    async fn any_bytes_are_read_to_the_end() {
        let mut input = b"first\n\xff\xfe not utf-8\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', MAX_LINE * 3));
        input.extend(b"\nbell\x07 and \x1b[31mred\n");
        input.extend(std::iter::repeat_n(b'y', LAST_LINE_CHARS * 2));
        let last = Arc::new(Mutex::new(String::new()));
        log_stderr("s".into(), &input[..], last.clone()).await;
        assert_eq!(*last.lock().unwrap(), "y".repeat(LAST_LINE_CHARS));
        let last = Arc::new(Mutex::new(String::new()));
        log_stderr(
            "s".into(),
            &b"bell\x07 and \x1b[31mred\n\n"[..],
            last.clone(),
        )
        .await;
        assert_eq!(*last.lock().unwrap(), "bell\\u{7} and \\u{1b}[31mred");
    }
}
