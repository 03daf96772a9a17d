//! The event log: a bounded in-memory ring queried by `get_events`, optionally
//! appended to a JSON-lines file. Field names match the tracing fields.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

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
    pub fields: Map<String, Value>,
}

impl Event {
    pub fn to_json(&self) -> Value {
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
        for (k, v) in &self.fields {
            obj.insert(k.clone(), v.clone());
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
    ring: Mutex<VecDeque<Event>>,
    capacity: usize,
    file: Mutex<Option<File>>,
}

/// 32 hex digits, like a W3C trace id: a random per-process half and a counter, so
/// that the hot path takes no syscall for randomness.
pub fn new_trace_id() -> String {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    static PROCESS: OnceLock<u64> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let process = PROCESS.get_or_init(|| uuid::Uuid::new_v4().as_u64_pair().0);
    format!(
        "{process:016x}{:016x}",
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

impl EventLog {
    pub fn new(capacity: usize) -> Self {
        EventLog {
            ring: Mutex::new(VecDeque::with_capacity(capacity.min(4096))),
            capacity: capacity.max(1),
            file: Mutex::new(None),
        }
    }

    /// Appends to `path` from now on; the file is created when missing.
    pub fn open_file(&self, path: &Path) -> std::io::Result<()> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        *self.file.lock().unwrap() = Some(file);
        Ok(())
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
        let fields = match fields {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => Map::from_iter([("detail".to_string(), other)]),
        };
        let event = Event {
            timestamp: Utc::now(),
            trace_id: trace_id.to_string(),
            status,
            event_type,
            source: source.to_string(),
            fields,
        };
        tracing::debug!(
            event_type,
            source,
            status = status.as_str(),
            trace_id,
            "event"
        );
        if let Some(file) = self.file.lock().unwrap().as_mut() {
            // A full disk must not stop the gateway: the ring still has the event.
            let _ = writeln!(file, "{}", event.to_json());
        }
        let mut ring = self.ring.lock().unwrap();
        if ring.len() == self.capacity {
            ring.pop_front();
        }
        ring.push_back(event);
    }

    /// Newest first.
    pub fn query(&self, query: &Query) -> Vec<Value> {
        let ring = self.ring.lock().unwrap();
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
            .map(Event::to_json)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let dir = std::env::temp_dir().join(format!("wasmgate-events-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("events.jsonl");
        let log = EventLog::new(10);
        log.open_file(&path).unwrap();
        log.emit(
            "gateway.started",
            "wasmgate",
            Status::Success,
            json!({"x": 1}),
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let line: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(line["event_type"], "gateway.started");
        std::fs::remove_dir_all(dir).ok();
    }
}
