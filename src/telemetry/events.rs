//! The event log: bounded in-memory rings queried by `get_events`, optionally
//! appended to a JSON-lines file. Field names match the tracing fields.
//!
//! Tool calls have a ring of their own: at thousands of calls a second they would push
//! every crash, restart and reload out of one shared ring within a second.
//!
//! Replicas sharing one config share its events file: each line there names the replica
//! that wrote it, and goes out in one write, so that lines of several processes never mix.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use chrono::{DateTime, SecondsFormat, Utc};
#[cfg(test)]
use serde_json::json;
use serde_json::{Map, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Success,
    Failure,
    Pending,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Success => "success",
            Status::Failure => "failure",
            Status::Pending => "pending",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Event {
    pub timestamp: DateTime<Utc>,
    pub trace_id: String,
    pub status: Status,
    pub event_type: &'static str,
    /// Who it is about: "wasmgate", a server name or a plugin name.
    pub source: String,
    pub fields: Fields,
    /// Order of recording, across both rings.
    seq: u64,
}

/// What an event says beyond the fields every event has.
#[derive(Debug, Clone)]
pub enum Fields {
    Map(Map<String, Value>),
    /// A `tool.called` event's: recorded on every call, before its answer is written, and
    /// read only by `get_events` or the events file. Kept as they came, and written as
    /// JSON when read: a map built per call added to every call's latency.
    Call(CallFields),
}

/// The fields of `tool.called`, written as `tool`, `server` (the event's source),
/// `duration_ms`, `error` (null on success) and, when set, `cancelled`.
#[derive(Debug, Clone)]
pub struct CallFields {
    pub tool: String,
    pub duration_ms: f64,
    pub error: Option<String>,
    pub cancelled: bool,
    /// The name of the HTTP bearer token of the client that called, if any.
    pub token: Option<String>,
}

impl Event {
    pub fn to_json(&self) -> Value {
        self.json(None)
    }

    /// The event as JSON, with the `replica` that recorded it when given (the file's lines).
    fn json(&self, replica: Option<&str>) -> Value {
        let mut obj = Map::new();
        obj.insert(
            "timestamp".into(),
            self.timestamp
                .to_rfc3339_opts(SecondsFormat::Micros, false)
                .into(),
        );
        obj.insert("trace_id".into(), self.trace_id.clone().into());
        obj.insert("status".into(), self.status.as_str().into());
        obj.insert("event_type".into(), self.event_type.into());
        obj.insert("source".into(), self.source.clone().into());
        if let Some(replica) = replica {
            obj.insert("replica".into(), replica.into());
        }
        match &self.fields {
            Fields::Map(fields) => {
                for (k, v) in fields {
                    obj.insert(k.clone(), v.clone());
                }
            }
            Fields::Call(call) => {
                obj.insert("tool".into(), call.tool.clone().into());
                obj.insert("server".into(), self.source.clone().into());
                obj.insert("duration_ms".into(), call.duration_ms.into());
                obj.insert("error".into(), call.error.clone().into());
                if call.cancelled {
                    obj.insert("cancelled".into(), true.into());
                }
                if let Some(token) = &call.token {
                    obj.insert("token".into(), token.clone().into());
                }
            }
        }
        Value::Object(obj)
    }
}

/// What `get_events` filters by.
#[derive(Debug, Default)]
pub struct Query {
    pub trace_id: Option<String>,
    pub event_type: Option<String>,
    pub status: Option<String>,
    pub since: Option<DateTime<Utc>>,
    pub limit: usize,
}

pub struct EventLog {
    /// `tool.called` events.
    calls: Mutex<VecDeque<Event>>,
    /// Every other event: lifecycle, reloads, conflicts.
    others: Mutex<VecDeque<Event>>,
    /// Events kept in each ring.
    capacity: usize,
    next_seq: AtomicU64,
    file: Mutex<Option<EventFile>>,
    /// Every event as it is recorded, for live readers (the status page's feed); an event
    /// is copied for it only while someone listens.
    bus: tokio::sync::broadcast::Sender<Event>,
    /// Live readers of `bus`: what the hot path reads (`receiver_count` takes a lock).
    listeners: Arc<AtomicUsize>,
}

/// A live reader of the event log, from [`EventLog::subscribe`].
pub struct Subscription {
    receiver: tokio::sync::broadcast::Receiver<Event>,
    listeners: Arc<AtomicUsize>,
}

impl Subscription {
    /// The next event; `Lagged(n)` when the reader fell behind and `n` were dropped.
    pub async fn recv(&mut self) -> Result<Event, tokio::sync::broadcast::error::RecvError> {
        self.receiver.recv().await
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.listeners.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The JSON-lines file, opened again when it was renamed or deleted (logrotate's
/// default), which shows as another file, or none, at its path; and tried again while
/// it cannot be opened (its folder is missing, say).
struct EventFile {
    path: PathBuf,
    file: Option<File>,
    checked: Instant,
}

/// How often the file's path is looked at: one `stat` a second at most.
const ROTATION_CHECK: Duration = Duration::from_secs(1);

/// Bytes of a text field an event keeps (an error's words); the rest is cut, with the length.
const FIELD_TEXT_MAX: usize = 2048;

impl EventFile {
    /// Made readable by its owner only: events name tokens, tools and the words of errors.
    fn open(path: &Path) -> std::io::Result<File> {
        use std::os::unix::fs::OpenOptionsExt;
        OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)
    }

    /// Appends `line`, which ends with its newline.
    fn write_line(&mut self, line: &[u8]) {
        if self.checked.elapsed() >= ROTATION_CHECK {
            self.checked = Instant::now();
            if self.moved()
                && let Ok(reopened) = EventFile::open(&self.path)
            {
                if self.file.is_none() {
                    tracing::info!("appending events to {}", self.path.display());
                }
                self.file = Some(reopened);
            }
        }
        // The whole line in one write: with O_APPEND each write lands whole at the end of
        // the file, while a line in two writes could have another process's between them.
        // (Only a full disk makes a write to a file short.) A full disk must not stop the
        // gateway: the rings still have the event.
        if let Some(file) = &mut self.file {
            let _ = file.write_all(line);
        }
    }

    /// Whether the path no longer names the open file (or no file is open).
    fn moved(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        let Some(file) = &self.file else {
            return true;
        };
        match (std::fs::metadata(&self.path), file.metadata()) {
            (Ok(at_path), Ok(open)) => (at_path.dev(), at_path.ino()) != (open.dev(), open.ino()),
            (Err(_), _) => true,
            (_, Err(_)) => false,
        }
    }
}

/// Which process wrote a line of the events file: `HOST-PID`, unique among the replicas
/// that share a config (and its events file), on one machine or several.
pub fn replica() -> &'static str {
    static REPLICA: OnceLock<String> = OnceLock::new();
    REPLICA.get_or_init(|| format!("{}-{}", hostname(), std::process::id()))
}

fn hostname() -> String {
    let mut name = [0u8; 256];
    // SAFETY: gethostname writes at most `name.len()` bytes into the buffer it is given.
    let done = unsafe { libc::gethostname(name.as_mut_ptr().cast(), name.len()) } == 0;
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    if done && end > 0 {
        String::from_utf8_lossy(&name[..end]).into_owned()
    } else {
        "localhost".to_owned()
    }
}

/// A backend writes its errors' words (a plugin's failure text can be megabytes): the
/// rings keep a thousand events each, so each keeps the start of its texts only.
fn cut(text: String) -> String {
    crate::protocol::cut_owned(text, FIELD_TEXT_MAX)
}

/// 32 hex digits, like a W3C trace id: a random per-process half and a counter, so
/// that the hot path takes no syscall for randomness.
pub fn new_trace_id() -> String {
    static PROCESS: OnceLock<u64> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let process = PROCESS.get_or_init(|| uuid::Uuid::new_v4().as_u64_pair().0);
    let next = NEXT.fetch_add(1, Ordering::Relaxed);
    // By hand rather than `format!`: one is made per request, before its answer.
    let mut id = String::with_capacity(32);
    for half in [*process, next] {
        for shift in (0..64).step_by(4).rev() {
            id.push(char::from(
                b"0123456789abcdef"[(half >> shift) as usize & 0xf],
            ));
        }
    }
    id
}

impl EventLog {
    pub fn new(capacity: usize) -> Self {
        EventLog {
            calls: Mutex::new(VecDeque::with_capacity(capacity.min(4096))),
            others: Mutex::new(VecDeque::with_capacity(capacity.min(4096))),
            capacity: capacity.max(1),
            next_seq: AtomicU64::new(0),
            file: Mutex::new(None),
            bus: tokio::sync::broadcast::channel(512).0,
            listeners: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Appends to `path` from now on (`None`: to no file); the file is created when
    /// missing, and again when it was renamed or deleted. `Err` says why it cannot be
    /// opened now: it is tried again once a second while events come.
    pub fn set_file(&self, path: Option<&Path>) -> std::io::Result<()> {
        let Some(path) = path else {
            *self.file.lock().unwrap() = None;
            return Ok(());
        };
        let (file, result) = match EventFile::open(path) {
            Ok(file) => (Some(file), Ok(())),
            Err(err) => (None, Err(err)),
        };
        *self.file.lock().unwrap() = Some(EventFile {
            path: path.to_path_buf(),
            file,
            checked: Instant::now(),
        });
        result
    }

    /// Records an event with a fresh trace id.
    pub fn emit(&self, event_type: &'static str, source: &str, status: Status, fields: Value) {
        self.emit_traced(&new_trace_id(), event_type, source, status, fields)
    }

    pub fn emit_traced(
        &self,
        trace_id: &str,
        event_type: &'static str,
        source: &str,
        status: Status,
        fields: Value,
    ) {
        let mut fields = match fields {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => Map::from_iter([("detail".to_string(), other)]),
        };
        for value in fields.values_mut() {
            if let Value::String(text) = value {
                *text = cut(std::mem::take(text));
            }
        }
        self.record(trace_id, event_type, source, status, Fields::Map(fields));
    }

    /// Records a `tool.called` event.
    pub fn emit_call(&self, trace_id: &str, server: &str, status: Status, mut call: CallFields) {
        call.tool = cut(call.tool);
        call.error = call.error.map(cut);
        let outcome = match (call.cancelled, status) {
            (true, _) => "cancelled",
            (false, Status::Success) => "success",
            (false, _) => "error",
        };
        super::metrics::tool_call(&call.tool, server, outcome, call.duration_ms / 1000.0);
        self.record(trace_id, "tool.called", server, status, Fields::Call(call));
    }

    fn record(
        &self,
        trace_id: &str,
        event_type: &'static str,
        source: &str,
        status: Status,
        fields: Fields,
    ) {
        if event_type != "tool.called" {
            super::metrics::event(event_type);
        }
        let event = Event {
            timestamp: Utc::now(),
            trace_id: trace_id.to_string(),
            status,
            event_type,
            source: source.to_string(),
            fields,
            seq: self.next_seq.fetch_add(1, Ordering::Relaxed),
        };
        tracing::debug!(
            event_type,
            source,
            status = status.as_str(),
            trace_id,
            "event"
        );
        if self.listeners.load(Ordering::Relaxed) > 0 {
            let _ = self.bus.send(event.clone());
        }
        if let Some(file) = self.file.lock().unwrap().as_mut() {
            let mut line = event.json(Some(replica())).to_string().into_bytes();
            line.push(b'\n');
            file.write_line(&line);
        }
        let ring = if event_type == "tool.called" {
            &self.calls
        } else {
            &self.others
        };
        let mut ring = ring.lock().unwrap();
        if ring.len() == self.capacity {
            ring.pop_front();
        }
        ring.push_back(event);
    }

    /// Every event recorded from now on; a reader that falls more than a few hundred
    /// events behind is told how many it missed (`RecvError::Lagged`).
    pub fn subscribe(&self) -> Subscription {
        self.listeners.fetch_add(1, Ordering::Relaxed);
        Subscription {
            receiver: self.bus.subscribe(),
            listeners: self.listeners.clone(),
        }
    }

    /// Newest first, from both rings.
    pub fn query(&self, query: &Query) -> Vec<Value> {
        let mut hits: Vec<Event> = [&self.calls, &self.others]
            .iter()
            .flat_map(|ring| Self::matching(&ring.lock().unwrap(), query))
            .collect();
        hits.sort_unstable_by_key(|e| std::cmp::Reverse(e.seq));
        hits.iter().take(query.limit).map(Event::to_json).collect()
    }

    /// The newest `query.limit` events of one ring that match, newest first.
    fn matching(ring: &VecDeque<Event>, query: &Query) -> Vec<Event> {
        ring.iter()
            .rev()
            .filter(|e| query.trace_id.as_deref().is_none_or(|t| e.trace_id == t))
            .filter(|e| {
                query
                    .event_type
                    .as_deref()
                    .is_none_or(|t| e.event_type == t)
            })
            .filter(|e| {
                query
                    .status
                    .as_deref()
                    .is_none_or(|s| e.status.as_str() == s)
            })
            .filter(|e| query.since.is_none_or(|since| e.timestamp >= since))
            .take(query.limit)
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log appending to `events.jsonl` in a fresh folder named after `label`.
    fn log_on_file(label: &str) -> (std::path::PathBuf, std::path::PathBuf, EventLog) {
        let dir = std::env::temp_dir().join(format!("wasmgate-{label}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("events.jsonl");
        let log = EventLog::new(10);
        log.set_file(Some(&path)).unwrap();
        (dir, path, log)
    }

    #[test]
    fn trace_ids_are_32_hex_digits_and_differ() {
        let (a, b) = (new_trace_id(), new_trace_id());
        assert_eq!(a.len(), 32);
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()),
            "{a}"
        );
        assert_eq!(a[..16], b[..16], "one process half");
        let counter = |id: &str| u64::from_str_radix(&id[16..], 16).unwrap();
        assert!(counter(&b) > counter(&a), "{a} then {b}");
    }

    /// A call's event reads as any other, with the call's fields in their order.
    #[test]
    fn call_events_read_with_their_fields() {
        let log = EventLog::new(4);
        let call = |error: Option<&str>, cancelled| CallFields {
            tool: "p__echo".into(),
            duration_ms: 1.5,
            error: error.map(String::from),
            cancelled,
            token: None,
        };
        log.emit_call("t1", "p", Status::Success, call(None, false));
        log.emit_call(
            "t2",
            "p",
            Status::Failure,
            call(Some(&"x".repeat(5000)), true),
        );
        let all = log.query(&Query {
            limit: 10,
            ..Default::default()
        });
        let keys = |e: &Value| e.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        let common = ["timestamp", "trace_id", "status", "event_type", "source"];
        let ok: Vec<&str> = common
            .iter()
            .copied()
            .chain(["tool", "server", "duration_ms", "error"])
            .collect();
        assert_eq!(keys(&all[1]), ok);
        assert_eq!(all[1]["error"], Value::Null);
        assert_eq!(all[1]["server"], "p");
        assert_eq!(all[1]["duration_ms"], 1.5);
        assert_eq!(all[0]["cancelled"], true);
        assert_eq!(all[0]["status"], "failure");
        assert!(
            all[0]["error"].as_str().unwrap().len() < 2100,
            "cut like other texts"
        );
    }

    #[tokio::test]
    async fn live_readers_get_each_event_and_leave() {
        let log = EventLog::new(8);
        let mut reader = log.subscribe();
        log.emit(
            "plugin.loaded",
            "echo",
            Status::Success,
            json!({"tools": 1}),
        );
        let event = reader.recv().await.unwrap();
        assert_eq!(
            (event.event_type, event.source.as_str()),
            ("plugin.loaded", "echo")
        );
        drop(reader);
        assert_eq!(log.listeners.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn ring_is_bounded_and_newest_first() {
        let log = EventLog::new(3);
        for i in 0..5 {
            log.emit("tool.called", "s", Status::Success, json!({"i": i}));
        }
        let all = log.query(&Query {
            limit: 10,
            ..Default::default()
        });
        assert_eq!(all.len(), 3);
        assert_eq!(all[0]["i"], 4);
        assert_eq!(all[2]["i"], 2);
    }

    /// Calls fill their own ring: a burst of them leaves the lifecycle events queryable.
    #[test]
    fn tool_calls_do_not_push_other_events_out() {
        let log = EventLog::new(3);
        log.emit("backend.crashed", "s", Status::Failure, json!({}));
        for i in 0..10 {
            log.emit("tool.called", "s", Status::Success, json!({"i": i}));
        }
        log.emit("plugin.reloaded", "p", Status::Success, json!({}));
        let all = log.query(&Query {
            limit: 10,
            ..Default::default()
        });
        let kinds: Vec<&str> = all
            .iter()
            .map(|e| e["event_type"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "plugin.reloaded",
                "tool.called",
                "tool.called",
                "tool.called",
                "backend.crashed"
            ]
        );
        assert_eq!(all[1]["i"], 9);
        let newest = log.query(&Query {
            limit: 2,
            ..Default::default()
        });
        assert_eq!(newest.len(), 2);
        assert_eq!(newest[1]["i"], 9);
    }

    /// As logrotate does by default: the file is renamed, and the next line goes to a new
    /// file at the path (looked at once a second at most).
    #[test]
    fn a_renamed_events_file_is_opened_again() {
        let (dir, path, log) = log_on_file("rotate");
        log.emit("gateway.started", "wasmgate", Status::Success, json!({}));
        std::fs::rename(&path, dir.join("events.jsonl.1")).unwrap();
        std::thread::sleep(ROTATION_CHECK);
        log.emit("gateway.stopping", "wasmgate", Status::Success, json!({}));
        let new = std::fs::read_to_string(&path).unwrap();
        assert!(
            new.contains("gateway.stopping") && !new.contains("gateway.started"),
            "{new}"
        );
        let old = std::fs::read_to_string(dir.join("events.jsonl.1")).unwrap();
        assert!(
            old.contains("gateway.started") && !old.contains("gateway.stopping"),
            "{old}"
        );
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn filters_combine() {
        let log = EventLog::new(10);
        log.emit_traced("t1", "tool.called", "a", Status::Failure, Value::Null);
        log.emit_traced("t2", "tool.called", "a", Status::Success, Value::Null);
        log.emit_traced("t1", "backend.ready", "a", Status::Success, Value::Null);
        let q = Query {
            trace_id: Some("t1".into()),
            status: Some("failure".into()),
            limit: 10,
            ..Default::default()
        };
        let hits = log.query(&q);
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0]["event_type"], "tool.called");
        assert!(hits[0]["timestamp"].as_str().unwrap().ends_with("+00:00"));
    }

    #[test]
    fn file_gets_json_lines() {
        let (dir, path, log) = log_on_file("events");
        log.emit(
            "gateway.started",
            "wasmgate",
            Status::Success,
            json!({"x": 1}),
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let line: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(line["event_type"], "gateway.started");
        assert_eq!(line["replica"], replica());
        assert!(replica().ends_with(&format!("-{}", std::process::id())));
        std::fs::remove_dir_all(dir).ok();
    }
}
