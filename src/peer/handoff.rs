//! What lets one call outlive the request that started it, in the stateless era: a server's
//! request to the client waits as an [`Ask`] to be put in an `input_required` result, and
//! what the call sends the client meanwhile goes to whichever request carries it on now
//! (the [`Handoff`]: the first request, then each retry in turn).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::{Notify, oneshot};

use super::ClientSink;
use crate::protocol::{RpcError, methods};

/// A server's request (sampling, elicitation, roots) made during a stateless request's
/// call, waiting for the client to answer it by retrying.
pub struct Ask {
    pub method: String,
    pub params: Option<Value>,
    pub reply: oneshot::Sender<AskAnswer>,
}

/// The client's answer to an [`Ask`].
pub type AskAnswer = Result<Value, RpcError>;

/// Makes the queue a call's [`Ask`]s wait in for its exchange. Not a channel: most calls
/// ask nothing, and every stateless request that may need input makes one (a channel
/// allocates a block of slots up front; this, one small object).
pub fn asks() -> (AskSender, AskReceiver) {
    let queue = Arc::new(AskQueue {
        waiting: Mutex::new(Some(VecDeque::new())),
        ready: Notify::new(),
    });
    (AskSender(queue.clone()), AskReceiver(queue))
}

struct AskQueue {
    /// `None` once the receiver is gone: an ask then fails at once.
    waiting: Mutex<Option<VecDeque<Ask>>>,
    ready: Notify,
}

/// The peer's end of [`asks`].
#[derive(Clone)]
pub struct AskSender(Arc<AskQueue>);

impl AskSender {
    /// Queues `ask`; `Err` gives it back when the exchange is gone.
    pub fn send(&self, ask: Ask) -> Result<(), Ask> {
        match self.0.waiting.lock().unwrap().as_mut() {
            Some(waiting) => waiting.push_back(ask),
            None => return Err(ask),
        }
        self.0.ready.notify_one();
        Ok(())
    }
}

/// The exchange's end of [`asks`]; dropping it fails the asks still queued (their
/// servers hear that the client will not answer).
pub struct AskReceiver(Arc<AskQueue>);

impl AskReceiver {
    /// The next ask, once there is one (cancel-safe: an ask is taken only when returned).
    pub async fn recv(&mut self) -> Option<Ask> {
        loop {
            if let Some(ask) =
                (self.0.waiting.lock().unwrap().as_mut()).and_then(VecDeque::pop_front)
            {
                return Some(ask);
            }
            // `notify_one` keeps a permit when no one waits, so a send between the check
            // and this wait is not missed.
            self.0.ready.notified().await;
        }
    }
}

impl Drop for AskReceiver {
    fn drop(&mut self) {
        let waiting = self.0.waiting.lock().unwrap().take();
        drop(waiting);
    }
}

/// Where a stateless call's own messages (progress, log lines) go: the stream of the
/// request that carries the call now, or nowhere while the call waits for a retry.
#[derive(Clone)]
pub struct Handoff(Arc<Mutex<Leg>>);

struct Leg {
    sink: Option<Arc<dyn ClientSink>>,
    /// The carrying request's key, once it is a retry (the first request's lines already
    /// name it).
    key: Option<Arc<str>>,
    /// A retry's own progress token: the call's progress was promised to the first
    /// request's token, so it is re-addressed (`None`: the retry asked for no progress).
    progress: Option<Option<Value>>,
}

impl Handoff {
    pub fn new(sink: Arc<dyn ClientSink>) -> Handoff {
        Handoff(Arc::new(Mutex::new(Leg {
            sink: Some(sink),
            key: None,
            progress: None,
        })))
    }

    /// The call waits for a retry: what it sends until then is dropped (the request that
    /// carried it has ended).
    pub fn detach(&self) {
        self.0.lock().unwrap().sink = None;
    }

    /// A retry carries the call on: its lines go to `next`'s stream, as request `key`'s,
    /// with progress re-addressed to the retry's `progress_token`.
    pub fn follow(&self, next: &Handoff, key: Arc<str>, progress_token: Option<Value>) {
        let mut leg = self.0.lock().unwrap();
        leg.sink = Some(Arc::new(next.clone()));
        leg.key = Some(key);
        leg.progress = Some(progress_token);
    }
}

impl ClientSink for Handoff {
    fn deliver(&self, line: String, related: Option<&Arc<str>>, droppable: bool) {
        let leg = self.0.lock().unwrap();
        let Some(sink) = &leg.sink else {
            return;
        };
        let related = leg.key.as_ref().or(related);
        match &leg.progress {
            Some(token) if line.contains(methods::PROGRESS) => {
                if let Some(line) = readdressed(&line, token.as_ref()) {
                    sink.deliver(line, related, droppable);
                }
            }
            _ => sink.deliver(line, related, droppable),
        }
    }
}

/// A progress notification for the retry's token; `None` when the retry asked for none.
fn readdressed(line: &str, token: Option<&Value>) -> Option<String> {
    let mut message: Value = serde_json::from_str(line).ok()?;
    if message.get("method").and_then(Value::as_str) != Some(methods::PROGRESS) {
        return Some(line.to_string());
    }
    message["params"]["progressToken"] = token?.clone();
    Some(message.to_string())
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use serde_json::{Value, json};

    use super::{Ask, ClientSink, Handoff, asks};

    /// The lines a stream got, with the request each was for.
    #[derive(Default)]
    struct Lines(Mutex<Vec<(String, Option<String>)>>);

    impl ClientSink for Arc<Lines> {
        fn deliver(&self, line: String, related: Option<&Arc<str>>, _droppable: bool) {
            let related = related.map(|r| r.to_string());
            self.0.lock().unwrap().push((line, related));
        }
    }

    fn progress(token: &str) -> String {
        json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": token, "progress": 1}})
        .to_string()
    }

    #[test]
    fn a_retry_gets_the_calls_lines_under_its_own_request_and_token() {
        let (first, retry) = (Arc::new(Lines::default()), Arc::new(Lines::default()));
        let call = Handoff::new(Arc::new(first.clone()));
        let first_key: Arc<str> = Arc::from("1");
        call.deliver(progress("t1"), Some(&first_key), true);
        call.detach();
        call.deliver(progress("t1"), Some(&first_key), true);
        let retry_sink = Handoff::new(Arc::new(retry.clone()));
        call.follow(&retry_sink, Arc::from("2"), Some(json!("t2")));
        call.deliver(progress("t1"), Some(&first_key), true);
        call.deliver("{\"other\":1}".into(), Some(&first_key), true);

        assert_eq!(first.0.lock().unwrap().len(), 1, "nothing while detached");
        let got = retry.0.lock().unwrap();
        let sent: Value = serde_json::from_str(&got[0].0).unwrap();
        assert_eq!(sent["params"]["progressToken"], "t2");
        assert_eq!(got[0].1.as_deref(), Some("2"));
        assert_eq!(
            (got[1].0.as_str(), got[1].1.as_deref()),
            ("{\"other\":1}", Some("2"))
        );

        // A retry that asked for no progress gets none.
        let quiet = Arc::new(Lines::default());
        call.follow(&Handoff::new(Arc::new(quiet.clone())), Arc::from("3"), None);
        call.deliver(progress("t1"), Some(&first_key), true);
        assert!(quiet.0.lock().unwrap().is_empty());
    }

    fn ask(method: &str) -> (Ask, tokio::sync::oneshot::Receiver<super::AskAnswer>) {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let ask = Ask {
            method: method.into(),
            params: None,
            reply,
        };
        (ask, answer)
    }

    #[tokio::test]
    async fn asks_come_in_order_and_fail_once_the_exchange_is_gone() {
        let (sender, mut receiver) = asks();
        let (first, _first_answer) = ask("roots/list");
        let (second, second_answer) = ask("sampling/createMessage");
        assert!(sender.send(first).is_ok());
        assert!(sender.send(second).is_ok());
        assert_eq!(receiver.recv().await.unwrap().method, "roots/list");
        // A waiting receiver is woken by a send.
        let late = tokio::spawn({
            let sender = sender.clone();
            async move {
                tokio::task::yield_now().await;
                let (third, _answer) = ask("elicitation/create");
                sender.send(third).is_ok()
            }
        });
        assert_eq!(
            receiver.recv().await.unwrap().method,
            "sampling/createMessage"
        );
        assert_eq!(receiver.recv().await.unwrap().method, "elicitation/create");
        assert!(late.await.unwrap());
        let (queued, queued_answer) = ask("roots/list");
        assert!(sender.send(queued).is_ok());
        drop(receiver);
        assert!(queued_answer.await.is_err(), "a queued ask is failed");
        assert!(sender.send(ask("roots/list").0).is_err());
        drop(second_answer);
    }
}
