//! A session's event streams: one per request answered with SSE, and the session's own
//! (stream 0, opened by `GET`). Each numbers its events and keeps the last ones for a
//! client that resumes with `Last-Event-ID`; what arrives while no connection reads a
//! stream waits there, bounded (oldest dropped, counted).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use crate::peer::ClientSink;

/// The session's own stream: messages that belong to no request.
pub const SESSION_STREAM: u64 = 0;
/// Events kept per stream for resumption and for a client not reading now.
const REPLAY: usize = 256;
/// Bytes kept per stream, whatever the count.
const REPLAY_BYTES: usize = 4 << 20;
/// Events a connection may have unwritten before it counts as a client that does not
/// read: that connection is closed (its events stay for a resume) and the session goes on.
const LIVE_QUEUE: usize = 512;
/// Finished request streams kept for a client that lost one and resumes.
const FINISHED_KEPT: usize = 16;

/// One event for a connection: its id and its data.
pub type Event = (String, Arc<str>);

#[derive(Default)]
struct Stream {
    next_seq: u64,
    buffer: VecDeque<(u64, Arc<str>)>,
    bytes: usize,
    /// The last event handed to a connection.
    sent: u64,
    live: Option<mpsc::Sender<Event>>,
    /// The request's answer is in: the stream ends once it is written.
    finished: bool,
}

impl Stream {
    fn push(&mut self, id: u64, line: Arc<str>) -> bool {
        self.next_seq += 1;
        let seq = self.next_seq;
        self.bytes += line.len();
        self.buffer.push_back((seq, line.clone()));
        let mut dropped = false;
        while self.buffer.len() > REPLAY || (self.bytes > REPLAY_BYTES && self.buffer.len() > 1) {
            if let Some((old, line)) = self.buffer.pop_front() {
                self.bytes -= line.len();
                dropped |= old > self.sent;
            }
        }
        if let Some(live) = &self.live {
            match live.try_send((event_id(id, seq), line)) {
                Ok(()) => self.sent = seq,
                Err(_) => self.live = None,
            }
        }
        dropped
    }

    /// Attaches a connection that has seen every event up to `after`.
    fn attach(&mut self, id: u64, after: u64) -> mpsc::Receiver<Event> {
        let (tx, rx) = mpsc::channel(LIVE_QUEUE);
        for (seq, line) in self.buffer.iter().filter(|(seq, _)| *seq > after) {
            if tx.try_send((event_id(id, *seq), line.clone())).is_err() {
                break;
            }
            self.sent = *seq;
        }
        if !self.finished {
            self.live = Some(tx);
        }
        rx
    }
}

fn event_id(stream: u64, seq: u64) -> String {
    format!("{stream}-{seq}")
}

/// `Last-Event-ID` as (stream, sequence).
pub fn parse_event_id(text: &str) -> Option<(u64, u64)> {
    let (stream, seq) = text.split_once('-')?;
    Some((stream.parse().ok()?, seq.parse().ok()?))
}

#[derive(Default)]
struct Inner {
    next_stream: u64,
    /// Request streams by the key of the request's id.
    by_request: HashMap<Arc<str>, u64>,
    streams: HashMap<u64, Stream>,
    finished: VecDeque<u64>,
    dropped: u64,
}

/// Where a session's messages go. `single`: everything on the session's stream (the
/// legacy HTTP+SSE transport, whose answers travel there too).
pub struct Streams {
    inner: Mutex<Inner>,
    single: bool,
}

/// Why a stream cannot be opened.
pub enum Refused {
    /// A `GET` stream is open already.
    Busy,
    /// The event id names no stream this session keeps.
    Unknown,
}

impl Streams {
    pub fn new(single: bool) -> Arc<Streams> {
        let mut inner = Inner {
            next_stream: SESSION_STREAM + 1,
            ..Default::default()
        };
        inner.streams.insert(SESSION_STREAM, Stream::default());
        Arc::new(Streams {
            inner: Mutex::new(inner),
            single,
        })
    }

    /// A stream for request `key`, read by the connection returned.
    pub fn open_request(&self, key: &Arc<str>) -> mpsc::Receiver<Event> {
        let mut inner = self.inner.lock().unwrap();
        let id = inner.next_stream;
        inner.next_stream += 1;
        inner.by_request.insert(key.clone(), id);
        let stream = inner.streams.entry(id).or_default();
        stream.attach(id, 0)
    }

    /// The request `key` is answered (`answer`, else it got none): the answer ends its stream.
    pub fn finish_request(&self, key: &Arc<str>, answer: Option<String>) {
        let mut inner = self.inner.lock().unwrap();
        let Some(id) = inner.by_request.remove(key) else {
            return;
        };
        let Some(stream) = inner.streams.get_mut(&id) else {
            return;
        };
        if let Some(answer) = answer {
            stream.push(id, answer.into());
        }
        stream.finished = true;
        stream.live = None;
        let all_sent = stream.sent == stream.next_seq;
        if all_sent {
            inner.streams.remove(&id);
        } else {
            inner.finished.push_back(id);
            while inner.finished.len() > FINISHED_KEPT {
                if let Some(old) = inner.finished.pop_front() {
                    inner.streams.remove(&old);
                }
            }
        }
    }

    /// Drops request `key`'s stream, whose answer went out as plain JSON; `true` when it
    /// held nothing (else the caller answers with the events it holds, see [`Self::take`]).
    pub fn close_request_if_empty(&self, key: &Arc<str>) -> bool {
        let mut inner = self.inner.lock().unwrap();
        let Some(&id) = inner.by_request.get(key) else {
            return true;
        };
        if inner.streams.get(&id).is_some_and(|s| s.next_seq > 0) {
            return false;
        }
        inner.by_request.remove(key);
        inner.streams.remove(&id);
        true
    }

    /// Opens the session's own stream (`after`: `None` for a new `GET`, which gets what
    /// waited for it) or resumes stream `resume` after the given event.
    pub fn attach(&self, resume: Option<(u64, u64)>) -> Result<mpsc::Receiver<Event>, Refused> {
        let mut inner = self.inner.lock().unwrap();
        let (id, after) = match resume {
            Some(point) => point,
            None => {
                let stream = inner.streams.get(&SESSION_STREAM);
                if stream.is_some_and(|s| s.live.as_ref().is_some_and(|l| !l.is_closed())) {
                    return Err(Refused::Busy);
                }
                (SESSION_STREAM, stream.map_or(0, |s| s.sent))
            }
        };
        let stream = inner.streams.get_mut(&id).ok_or(Refused::Unknown)?;
        let rx = stream.attach(id, after);
        if stream.finished && stream.sent == stream.next_seq {
            inner.streams.remove(&id);
            inner.finished.retain(|f| *f != id);
        }
        Ok(rx)
    }

    /// Whether a connection reads one of the streams now.
    pub fn has_reader(&self) -> bool {
        let inner = self.inner.lock().unwrap();
        inner
            .streams
            .values()
            .any(|s| s.live.as_ref().is_some_and(|l| !l.is_closed()))
    }

    /// Ends every connection (the session ended).
    pub fn close_all(&self) {
        let mut inner = self.inner.lock().unwrap();
        for stream in inner.streams.values_mut() {
            stream.live = None;
        }
    }

    /// Ends the connection reading the session's own stream.
    pub fn end_session_stream(&self) {
        if let Some(stream) = self.inner.lock().unwrap().streams.get_mut(&SESSION_STREAM) {
            stream.live = None;
        }
    }

    /// Messages dropped because no one read them in time.
    pub fn dropped(&self) -> u64 {
        self.inner.lock().unwrap().dropped
    }
}

impl ClientSink for Arc<Streams> {
    fn deliver(&self, line: String, related: Option<&Arc<str>>, _droppable: bool) {
        let mut inner = self.inner.lock().unwrap();
        let id = match related {
            Some(key) if !self.single => {
                inner.by_request.get(key).copied().unwrap_or(SESSION_STREAM)
            }
            _ => SESSION_STREAM,
        };
        let dropped = match inner.streams.get_mut(&id) {
            Some(stream) => stream.push(id, line.into()),
            None => false,
        };
        if dropped {
            inner.dropped += 1;
            crate::telemetry::metrics::messages_dropped();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: &str) -> Arc<str> {
        Arc::from(k)
    }

    /// A request's events go on its stream, others on the session's; a client that lost
    /// the request's stream resumes it after the last event it saw, answer included.
    #[tokio::test]
    async fn request_streams_route_and_resume() {
        let streams = Streams::new(false);
        let mut first = streams.open_request(&key("1"));
        streams.deliver("progress 1".into(), Some(&key("1")), true);
        streams.deliver("list_changed".into(), None, true);
        let (id, line) = first.recv().await.unwrap();
        assert_eq!(&*line, "progress 1");
        drop(first);
        streams.deliver("progress 2".into(), Some(&key("1")), true);
        streams.finish_request(&key("1"), Some("answer".into()));
        let mut resumed = streams
            .attach(parse_event_id(&id))
            .unwrap_or_else(|_| panic!("the stream is kept"));
        assert_eq!(&*resumed.recv().await.unwrap().1, "progress 2");
        assert_eq!(&*resumed.recv().await.unwrap().1, "answer");
        assert!(
            resumed.recv().await.is_none(),
            "the stream ends after the answer"
        );
        // The session's stream got what waited for it.
        let mut own = streams.attach(None).unwrap_or_else(|_| panic!("opens"));
        assert_eq!(&*own.recv().await.unwrap().1, "list_changed");
        assert!(matches!(streams.attach(None), Err(Refused::Busy)));
    }

    /// With no reader, the session's stream keeps the last events only, and counts the rest.
    #[test]
    fn waiting_events_are_bounded() {
        let streams = Streams::new(false);
        for i in 0..(REPLAY + 10) {
            streams.deliver(format!("n{i}"), None, true);
        }
        assert_eq!(streams.dropped(), 10);
    }
}
