//! Newline-delimited JSON-RPC as it is read, from a client or from a server: one message
//! per line, with a bound on a line's length so that no peer can make the gateway hold
//! an endless line in memory.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// Longest message read from a client or a server. A longer line is skipped as it
/// arrives (never held whole) and reported.
pub const MAX_MESSAGE: usize = 64 << 20;

/// A buffer that held a line bigger than this is not kept for the small ones after it.
const KEEP_CAPACITY: usize = 1 << 20;

/// What [`read_line`] found.
#[derive(Debug, PartialEq)]
pub enum Line {
    /// A line (with its newline, unless the input ended without one) is in the buffer.
    Read,
    /// A line longer than the limit went by; it was at least this many bytes.
    TooLong(usize),
    /// The input ended.
    End,
}

/// Reads one line into `line`, or skips it when it grows past `max` bytes.
pub async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Line> {
    let mut skipped = 0;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok(match (skipped, line.is_empty()) {
                (0, true) => Line::End,
                (0, false) => Line::Read,
                _ => Line::TooLong(skipped),
            });
        }
        let (chunk, complete) = match buf.iter().position(|&b| b == b'\n') {
            Some(end) => (&buf[..=end], true),
            None => (buf, false),
        };
        let used = chunk.len();
        if skipped > 0 || line.len() + used > max {
            skipped += line.len() + used;
            line.clear();
        } else {
            line.extend_from_slice(chunk);
        }
        reader.consume(used);
        if complete {
            return Ok(if skipped > 0 {
                Line::TooLong(skipped)
            } else {
                Line::Read
            });
        }
    }
}

/// Empties `line` for the next read, giving back the memory of a huge one.
pub fn reuse(line: &mut Vec<u8>) {
    if line.capacity() > KEEP_CAPACITY {
        *line = Vec::new();
    }
    line.clear();
}

#[cfg(test)]
mod tests {
    use super::{Line, read_line};

    /// Lines past the limit are skipped whole and reported with their size; the lines
    /// around them are read as they are; the last line may lack its newline.
    #[tokio::test]
    async fn long_lines_are_skipped() {
        let input = format!("short\n{}\nnext\nlast", "x".repeat(100));
        let mut reader = tokio::io::BufReader::with_capacity(16, input.as_bytes());
        let mut line = Vec::new();
        let mut seen = Vec::new();
        loop {
            line.clear();
            match read_line(&mut reader, &mut line, 20).await.unwrap() {
                Line::End => break,
                Line::Read => seen.push(String::from_utf8(line.clone()).unwrap()),
                Line::TooLong(len) => seen.push(format!("too long: {len}")),
            }
        }
        assert_eq!(seen, ["short\n", "too long: 101", "next\n", "last"]);
    }
}
