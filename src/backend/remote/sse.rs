//! Server-sent events read from a response body, event by event.

use http_body_util::BodyExt;
use hyper::body::Incoming;

/// One event's fields that MCP uses.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Event {
    pub(super) event: String,
    pub(super) data: String,
}

pub(super) struct SseReader {
    body: Incoming,
    buffer: Vec<u8>,
    parser: Parser,
}

impl SseReader {
    pub(super) fn new(body: Incoming) -> Self {
        SseReader {
            body,
            buffer: Vec::new(),
            parser: Parser::default(),
        }
    }

    /// The id of the last event that had one, for `Last-Event-ID` on a reconnect.
    pub(super) fn last_id(&self) -> Option<&str> {
        self.parser.last_id.as_deref()
    }

    /// The next event; `None` at the end of the stream.
    pub(super) async fn next(&mut self) -> Result<Option<Event>, String> {
        loop {
            while let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                let line = String::from_utf8_lossy(&line);
                if let Some(event) = self.parser.line(line.trim_end_matches(['\n', '\r'])) {
                    return Ok(Some(event));
                }
            }
            if self.buffer.len() > crate::pipe::lines::MAX_MESSAGE {
                return Err("an event longer than 64 MiB".into());
            }
            match self.body.frame().await {
                None => return Ok(None),
                Some(Err(err)) => return Err(format!("the event stream broke: {err}")),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buffer.extend_from_slice(&data);
                    }
                }
            }
        }
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
}

#[cfg(test)]
mod tests {
    use super::{Event, Parser};

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
}
