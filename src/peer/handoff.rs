//! What lets one call outlive the request that started it, in the stateless era: a server's
//! request to the client waits as an [`Ask`] to be put in an `input_required` result, and
//! what the call sends the client meanwhile goes to whichever request carries it on now
//! (the [`Handoff`]: the first request, then each retry in turn).

use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::oneshot;

use super::ClientSink;
use crate::protocol::{RpcError, methods};

/// A server's request (sampling, elicitation, roots) made during a stateless request's
/// call, waiting for the client to answer it by retrying.
pub struct Ask {
    pub method: String,
    pub params: Option<Value>,
    pub reply: oneshot::Sender<Result<Value, RpcError>>,
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

    use super::{ClientSink, Handoff};

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
}
