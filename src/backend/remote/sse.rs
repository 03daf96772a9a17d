//! Server-sent events read from a response body, event by event, each within a size limit:
//! an event past it is skipped to its end, its bytes never held.

use http_body_util::BodyExt;
use hyper::body::Incoming;

/// One event's fields that MCP uses.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Event {
    pub(super) event: String,
    pub(super) data: String,
}

/// Why no event came.
#[derive(Debug, PartialEq)]
pub(super) enum SseError {
    /// An event longer than the limit (bytes), skipped: the stream goes on after it.
    TooLarge(usize),
    /// The stream broke; nothing more comes.
    Broken(String),
}

impl std::fmt::Display for SseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SseError::TooLarge(limit) => {
                write!(f, "an event larger than the limit of {}", size(*limit))
            }
            SseError::Broken(reason) => write!(f, "the event stream broke: {reason}"),
        }
    }
}

pub(super) struct SseReader {
    body: Incoming,
    lines: Lines,
}

impl SseReader {
    /// `limit`: the bytes one event may take, its lines and fields together.
    pub(super) fn new(body: Incoming, limit: usize) -> Self {
        SseReader {
            body,
            lines: Lines::new(limit),
        }
    }

    /// The id of the last event that had one, for `Last-Event-ID` on a reconnect.
    pub(super) fn last_id(&self) -> Option<&str> {
        self.lines.parser.last_id.as_deref()
    }

    /// The JSON-RPC id of the last event skipped as too large, when its start named one: the
    /// request it answers.
    pub(super) fn skipped_id(&self) -> Option<u64> {
        self.lines.skipped_id
    }

    /// The next event; `None` at the end of the stream.
    pub(super) async fn next(&mut self) -> Result<Option<Event>, SseError> {
        loop {
            if let Some(event) = self.lines.event()? {
                return Ok(Some(event));
            }
            match self.body.frame().await {
                None => return Ok(None),
                Some(Err(err)) => return Err(SseError::Broken(err.to_string())),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.lines.feed(&data);
                    }
                }
            }
        }
    }
}

/// The bytes read and not yet taken as lines, and the event they make so far.
struct Lines {
    buffer: Vec<u8>,
    /// Bytes of `buffer` taken as lines already.
    taken: usize,
    /// Bytes after `taken` known to hold no line end: each byte is looked at once.
    scanned: usize,
    parser: Parser,
    limit: usize,
    /// Set after an event past the limit: the lines up to its end are passed over.
    skipping: bool,
    /// See [`SseReader::skipped_id`].
    skipped_id: Option<u64>,
}

impl Lines {
    fn new(limit: usize) -> Self {
        Lines {
            buffer: Vec::new(),
            taken: 0,
            scanned: 0,
            parser: Parser::default(),
            limit,
            skipping: false,
            skipped_id: None,
        }
    }

    fn feed(&mut self, data: &[u8]) {
        // Taken lines go before new bytes come: the buffer holds one line's start at most.
        if self.taken > 0 {
            self.buffer.drain(..self.taken);
            self.scanned -= self.taken;
            self.taken = 0;
        }
        if self.skipping && !self.buffer.is_empty() {
            // Of a line being passed over, only whether it is empty matters.
            let blank = self.buffer == b"\r";
            self.buffer.clear();
            self.buffer.push(if blank { b'\r' } else { b'x' });
            self.scanned = self.buffer.len();
        }
        self.buffer.extend_from_slice(data);
    }

    /// The next event the lines read make; `Ok(None)` when more bytes are needed.
    fn event(&mut self) -> Result<Option<Event>, SseError> {
        while let Some(at) = self.buffer[self.scanned..].iter().position(|b| *b == b'\n') {
            let end = self.scanned + at;
            let line = String::from_utf8_lossy(&self.buffer[self.taken..end]);
            let line = line.trim_end_matches('\r').to_string();
            self.taken = end + 1;
            self.scanned = self.taken;
            if self.skipping {
                self.skipping = !line.is_empty();
                continue;
            }
            if let Some(event) = self.parser.line(&line) {
                return Ok(Some(event));
            }
            self.check(0)?;
        }
        self.scanned = self.buffer.len();
        if self.skipping {
            return Ok(None);
        }
        // The line not ended yet counts too.
        self.check(self.buffer.len() - self.taken).map(|()| None)
    }

    /// Fails the event being read once it (and `more` bytes of it not parsed yet) is past
    /// the limit, and passes over what is left of it.
    fn check(&mut self, more: usize) -> Result<(), SseError> {
        if self.parser.pending() + more <= self.limit {
            return Ok(());
        }
        // The event's data so far, or the line not ended yet that starts it.
        let start = match &self.parser.data {
            Some(data) => data.as_bytes(),
            None => (self.buffer[self.taken..].strip_prefix(b"data:")).unwrap_or_default(),
        };
        self.skipped_id = leading_id(&String::from_utf8_lossy(&start[..start.len().min(START)]));
        self.parser.drop_event();
        self.skipping = true;
        Err(SseError::TooLarge(self.limit))
    }
}

/// The line-level rules of the event stream format.
#[derive(Default)]
struct Parser {
    event: String,
    data: Option<String>,
    last_id: Option<String>,
}

impl Parser {
    fn line(&mut self, line: &str) -> Option<Event> {
        if line.is_empty() {
            let event = std::mem::take(&mut self.event);
            return self.data.take().map(|data| Event { event, data });
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            },
            "event" => self.event = value.to_string(),
            "id" if !value.contains('\0') => self.last_id = Some(value.to_string()),
            // Comments (keep-alives), `retry` and unknown fields.
            _ => {}
        }
        None
    }

    /// Bytes the event being read holds so far.
    fn pending(&self) -> usize {
        self.event.len() + self.data.as_ref().map_or(0, String::len)
    }

    fn drop_event(&mut self) {
        self.event.clear();
        self.data = None;
    }
}

/// Bytes of a skipped event looked at for its id.
const START: usize = 256;

/// The `id` of a JSON-RPC message from the start of its text, when the start holds a
/// top-level `"id"` and the whole of its number.
fn leading_id(start: &str) -> Option<u64> {
    let bytes = start.as_bytes();
    let (mut depth, mut at) = (0, 0);
    while at < bytes.len() {
        match bytes[at] {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth -= 1,
            b'"' => {
                let mut end = at + 1;
                while end < bytes.len() && bytes[end] != b'"' {
                    end += if bytes[end] == b'\\' { 2 } else { 1 };
                }
                let key = start.get(at + 1..end)?;
                let rest = start.get(end + 1..)?.trim_start();
                if depth == 1
                    && key == "id"
                    && let Some(value) = rest.strip_prefix(':')
                {
                    let value = value.trim_start();
                    let digits = value.find(|c: char| !c.is_ascii_digit())?;
                    return value[..digits].parse().ok();
                }
                at = end;
            }
            _ => {}
        }
        at += 1;
    }
    None
}

/// `16 MiB`, or bytes when not a whole number of MiB.
pub(super) fn size(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::{Event, Lines, Parser, SseError, leading_id};

    #[test]
    fn the_id_at_the_start_of_a_message() {
        let cases = [
            (r#"{"jsonrpc":"2.0","id":17,"result":{"#, Some(17)),
            (r#"{ "id" : 3 , "result""#, Some(3)),
            (r#"{"result":{"id":5,"x":"#, None),
            (r#"{"method":"id","params":{}"#, None),
            (r#"{"a":"say "id":9","id":4,"#, Some(4)),
            (r#"{"jsonrpc":"2.0","id":12"#, None),
            (r#"[{"id":1,"#, None),
        ];
        for (start, id) in cases {
            assert_eq!(leading_id(start), id, "{start}");
        }
    }

    #[test]
    fn events_from_lines() {
        let mut parser = Parser::default();
        let mut events = Vec::new();
        for line in [
            ": keep-alive",
            "",
            "id: 7",
            "event: message",
            "data: {\"a\":",
            "data:1}",
            "",
            "data: x",
            "",
        ] {
            events.extend(parser.line(line));
        }
        assert_eq!(
            events,
            [
                Event {
                    event: "message".into(),
                    data: "{\"a\":\n1}".into()
                },
                Event {
                    event: "".into(),
                    data: "x".into()
                }
            ]
        );
        assert_eq!(parser.last_id.as_deref(), Some("7"));
    }

    /// Every event of `chunks` fed in turn, or the error in its place.
    fn read(limit: usize, chunks: &[&str]) -> Vec<Result<String, SseError>> {
        let mut lines = Lines::new(limit);
        let mut out = Vec::new();
        for chunk in chunks {
            lines.feed(chunk.as_bytes());
            loop {
                match lines.event() {
                    Ok(Some(event)) => out.push(Ok(event.data)),
                    Ok(None) => break,
                    Err(err) => out.push(Err(err)),
                }
            }
            assert!(lines.buffer.len() <= limit + chunk.len() + 1);
        }
        out
    }

    #[test]
    fn an_event_past_the_limit_is_skipped_and_the_next_read() {
        let long = "x".repeat(40);
        // Many short lines, one long line in pieces, a long line among short ones.
        let many = format!("data: {long}\n").repeat(4);
        let events = read(
            64,
            &[
                "data: a\n\n",
                &many,
                "\ndata: b\n\n",
                "data: ",
                &long,
                &long,
                &long,
                "\n\ndata: c\r\n\r\n",
            ],
        );
        assert_eq!(
            events,
            [
                Ok("a".into()),
                Err(SseError::TooLarge(64)),
                Ok("b".into()),
                Err(SseError::TooLarge(64)),
                Ok("c".into())
            ]
        );
        // Small events in a piece longer than the limit are each within it.
        let events = read(64, &["data: s\n\n".repeat(20).as_str()]);
        assert_eq!(events.len(), 20);
        assert!(
            events.iter().all(|e| *e == Ok("s".to_string())),
            "{events:?}"
        );
    }
}
