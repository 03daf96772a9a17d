//! The notifications a connection sends its server: posted one after another, each before
//! any request that comes after it, from a short queue. A client can make many (one POST of
//! `roots/list_changed` notifications fans out to every server), so a `list_changed` already
//! waiting stands for its repeats, and past [`MAX_WAITING`] the oldest goes: a request waits
//! for a few notifications at most.

use std::collections::VecDeque;
use std::sync::{Mutex, Weak};

use serde_json::Value;
use tokio::sync::{mpsc, watch};

use super::Connection;

/// Notifications waiting to be posted, at most.
pub(super) const MAX_WAITING: usize = 64;

struct Note {
    /// Numbers the notes in the order they were queued, from 1.
    number: u64,
    method: String,
    message: Value,
}

#[derive(Default)]
struct Waiting {
    notes: VecDeque<Note>,
    /// The number of the last note queued.
    last: u64,
    /// Notes dropped so far, the oldest of a full queue each.
    dropped: u64,
}

pub(super) struct Notes {
    waiting: Mutex<Waiting>,
    /// Rung when a note is queued; its end (the connection dropped) ends the sender.
    bell: mpsc::Sender<()>,
    /// The number of the last note posted, or given up with the session.
    sent: watch::Sender<u64>,
}

impl Notes {
    /// The queue, and the task that posts what it holds for as long as `connection` lives.
    pub(super) fn new() -> (Notes, mpsc::Receiver<()>) {
        let (bell, rung) = mpsc::channel(1);
        let notes = Notes {
            waiting: Mutex::default(),
            bell,
            sent: watch::channel(0).0,
        };
        (notes, rung)
    }

    /// Queues `message` (notification `method`), unless it repeats a `list_changed` that
    /// waits. When the queue was full and its oldest note dropped: the notes dropped so far.
    pub(super) fn push(&self, method: &str, message: Value) -> Option<u64> {
        let mut waiting = self.waiting.lock().unwrap();
        let repeat = method.ends_with("/list_changed")
            && waiting.notes.iter().any(|note| note.method == method);
        if repeat {
            return None;
        }
        let mut dropped = None;
        if waiting.notes.len() >= MAX_WAITING {
            waiting.notes.pop_front();
            waiting.dropped += 1;
            dropped = Some(waiting.dropped);
        }
        waiting.last += 1;
        let number = waiting.last;
        waiting.notes.push_back(Note {
            number,
            method: method.to_string(),
            message,
        });
        drop(waiting);
        let _ = self.bell.try_send(());
        dropped
    }

    /// Resolves once every note queued before now is posted (or dropped).
    pub(super) async fn flushed(&self) {
        let last = self.waiting.lock().unwrap().last;
        let _ = self.sent.subscribe().wait_for(|sent| *sent >= last).await;
    }

    fn pop(&self) -> Option<Note> {
        self.waiting.lock().unwrap().notes.pop_front()
    }
}

/// Posts the queued notifications in order, until the connection is dropped.
pub(super) async fn send_notes(connection: Weak<Connection>, mut rung: mpsc::Receiver<()>) {
    while rung.recv().await.is_some() {
        loop {
            let Some(connection) = connection.upgrade() else {
                return;
            };
            let Some(note) = connection.notes.pop() else {
                break;
            };
            if connection.closed.borrow().is_none() {
                connection.post_message(note.message).await;
            }
            // Notes dropped from the front were numbered lower: done with them too.
            connection.notes.sent.send_replace(note.number);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn methods(notes: &Notes) -> Vec<String> {
        let waiting = notes.waiting.lock().unwrap();
        waiting.notes.iter().map(|n| n.method.clone()).collect()
    }

    #[test]
    fn a_waiting_list_changed_stands_for_its_repeats_and_a_full_queue_drops_its_oldest() {
        let (notes, _rung) = Notes::new();
        let roots = "notifications/roots/list_changed";
        for _ in 0..3 {
            assert_eq!(notes.push(roots, Value::Null), None);
        }
        assert_eq!(methods(&notes), [roots]);
        let cancelled = "notifications/cancelled";
        let dropped: Vec<Option<u64>> = (0..MAX_WAITING + 2)
            .map(|i| notes.push(cancelled, Value::from(i)))
            .collect();
        // Full with the 63rd: the list_changed went first, then the oldest cancellations.
        assert!(dropped[..MAX_WAITING - 1].iter().all(Option::is_none));
        assert_eq!(dropped[MAX_WAITING - 1..], [Some(1), Some(2), Some(3)]);
        let waiting = notes.waiting.lock().unwrap();
        assert_eq!(waiting.notes.len(), MAX_WAITING);
        assert_eq!(waiting.notes[0].message, Value::from(2));
        assert_eq!(waiting.last, 1 + MAX_WAITING as u64 + 2);
    }
}
