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
pub(super) const LIVE_QUEUE: usize = 512;
/// Finished request streams kept for a client that lost one and resumes.
const FINISHED_KEPT: usize = 16;
/// Bytes a session keeps over all its streams: past it, finished streams go first (oldest
/// first), then the oldest events of the others. An event larger than this is kept alone
/// until a connection takes it.
pub const SESSION_KEPT_BYTES: usize = 8 << 20;

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
        if let Some(live) = &self.live {
            match live.try_send((event_id(id, seq), line)) {
                Ok(()) => self.sent = seq,
                Err(_) => self.live = None,
            }
        }
        let mut dropped = false;
        // Past the byte cap an event is kept alone only while no connection has taken it:
        // once sent, it is not kept for a resume.
        while self.buffer.len() > REPLAY
            || (self.bytes > REPLAY_BYTES && (self.buffer.len() > 1 || self.sent == seq))
        {
            dropped |= self.drop_oldest();
        }
        dropped
    }

    /// Drops the oldest event kept; `true` when no connection had taken it.
    fn drop_oldest(&mut self) -> bool {
        match self.buffer.pop_front() {
            Some((old, line)) => {
                self.bytes -= line.len();
                old > self.sent
            }
            None => false,
        }
    }

    fn has_reader(&self) -> bool {
        self.live.as_ref().is_some_and(|l| !l.is_closed())
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

pub(super) fn event_id(stream: u64, seq: u64) -> String {
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

impl Inner {
    /// Bytes kept over all streams.
    fn kept(&self) -> usize {
        self.streams.values().map(|s| s.bytes).sum()
    }

    /// Drops finished streams, oldest first, then the oldest events of the largest stream,
    /// until the session keeps at most `cap` bytes (an event a connection has not taken
    /// stays when it is all its stream holds). Returns how many unsent events went.
    fn keep_within(&mut self, cap: usize) -> u64 {
        let mut dropped = 0;
        let mut kept = self.kept();
        while kept > cap {
            if let Some(old) = self.finished.pop_front() {
                if let Some(stream) = self.streams.remove(&old) {
                    dropped += stream
                        .buffer
                        .iter()
                        .filter(|(seq, _)| *seq > stream.sent)
                        .count() as u64;
                    kept -= stream.bytes;
                }
                continue;
            }
            let largest = (self.streams.values_mut())
                .filter(|s| s.buffer.len() > 1 || s.sent >= s.next_seq)
                .filter(|s| !s.buffer.is_empty())
                .max_by_key(|s| s.bytes);
            let Some(stream) = largest else {
                break;
            };
            let before = stream.bytes;
            dropped += u64::from(stream.drop_oldest());
            kept -= before - stream.bytes;
        }
        dropped
    }
}

/// What a request answered over HTTP writes to: a session's [`Streams`], or a stateless
/// request's own single stream.
pub trait RequestStreams: Send + Sync + 'static {
    /// A stream for request `key`, read by the connection returned.
    fn open_request(&self, key: &Arc<str>) -> mpsc::Receiver<Event>;
    /// The request `key` is answered (`answer`, else it got none): the answer ends its stream.
    fn finish_request(&self, key: &Arc<str>, answer: Option<String>);
    /// Drops request `key`'s stream, whose answer went out as plain JSON; `true` when it
    /// held nothing.
    fn close_request_if_empty(&self, key: &Arc<str>) -> bool;
}

impl RequestStreams for Streams {
    fn open_request(&self, key: &Arc<str>) -> mpsc::Receiver<Event> {
        Streams::open_request(self, key)
    }

    fn finish_request(&self, key: &Arc<str>, answer: Option<String>) {
        Streams::finish_request(self, key, answer);
    }

    fn close_request_if_empty(&self, key: &Arc<str>) -> bool {
        Streams::close_request_if_empty(self, key)
    }
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
            let dropped = inner.keep_within(SESSION_KEPT_BYTES);
            inner.dropped += dropped;
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
            None => (
                SESSION_STREAM,
                (inner.streams.get(&SESSION_STREAM)).map_or(0, |s| s.sent),
            ),
        };
        let stream = inner.streams.get_mut(&id).ok_or(Refused::Unknown)?;
        // A resume never takes a stream from a connection that still reads it.
        if stream.has_reader() {
            return Err(Refused::Busy);
        }
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
        inner.streams.values().any(Stream::has_reader)
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
        let mut dropped = match inner.streams.get_mut(&id) {
            Some(stream) => u64::from(stream.push(id, line.into())),
            None => 0,
        };
        dropped += inner.keep_within(SESSION_KEPT_BYTES);
        if dropped > 0 {
            inner.dropped += dropped;
            for _ in 0..dropped {
                crate::telemetry::metrics::messages_dropped();
            }
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

    /// Finished answers nobody read, each larger than a stream's cap, are kept within the
    /// session's cap in total.
    #[test]
    fn a_session_keeps_bounded_bytes() {
        let streams = Streams::new(false);
        let big = "x".repeat(REPLAY_BYTES + 1);
        for i in 0..FINISHED_KEPT {
            let k = key(&i.to_string());
            drop(streams.open_request(&k));
            streams.finish_request(&k, Some(big.clone()));
        }
        let kept = streams.inner.lock().unwrap().kept();
        assert!(
            kept <= SESSION_KEPT_BYTES,
            "{kept} bytes kept, over {SESSION_KEPT_BYTES}"
        );
        assert!(streams.dropped() > 0);
    }

    /// A `Last-Event-ID` resume does not take a stream a connection still reads.
    #[tokio::test]
    async fn a_resume_does_not_take_a_read_stream() {
        let streams = Streams::new(false);
        let mut reader = streams.open_request(&key("1"));
        streams.deliver("progress".into(), Some(&key("1")), true);
        let (id, _) = reader.recv().await.unwrap();
        assert!(matches!(
            streams.attach(parse_event_id(&id)),
            Err(Refused::Busy)
        ));
        drop(reader);
        assert!(streams.attach(parse_event_id(&id)).is_ok());
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
