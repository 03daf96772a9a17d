//! The legacy HTTP+SSE transport (MCP 2024-11-05): one `GET` event stream that first names
//! the URL to `POST` messages to (its `endpoint` event), then carries every answer and
//! every message of the server; a `POST` is only acknowledged (202).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::oneshot;

use super::{Closed, Connection, SHOWN, content_type, read_text, shown};
use crate::backend::BackendError;
use crate::backend::remote::client::Hold;
use crate::backend::remote::sse::{SseError, SseReader};

/// Where the answer to a request sent over the legacy transport goes.
type Waiting = oneshot::Sender<Result<Box<RawValue>, BackendError>>;

#[derive(Default)]
pub(super) struct Legacy {
    /// The path and query of the `endpoint` event.
    pub(super) post_path: String,
    pub(super) waiting: HashMap<u64, Waiting>,
}

impl Connection {
    /// Opens the event stream and waits for its `endpoint` event; the stream is then read
    /// on a task of its own until the session ends.
    pub(in crate::backend::remote) async fn open_legacy(
        self: &Arc<Self>,
        timeout: Duration,
    ) -> Result<(), BackendError> {
        let mut request = self.build(http::Method::GET, None);
        request.headers_mut().insert(
            http::header::ACCEPT,
            http::HeaderValue::from_static("text/event-stream"),
        );
        let opened = async {
            let (response, _lease) = self.send(request, Hold::Aside).await?;
            let status = response.status();
            if !status.is_success() || content_type(&response) != "text/event-stream" {
                let text = read_text(response.into_body()).await;
                return Err(self.http_error(
                    status.as_u16(),
                    format!("status {status} to the SSE GET: {}", shown(&text)),
                ));
            }
            let mut events = SseReader::new(response.into_body(), self.max_message);
            loop {
                match events.next().await {
                    Ok(Some(event)) if event.event == "endpoint" => {
                        return Ok((events, event.data));
                    }
                    Ok(Some(_)) => continue,
                    Err(SseError::TooLarge(_)) => self.skipped_event(),
                    Ok(None) => {
                        return Err(
                            self.broken("the SSE stream ended before its endpoint event".into())
                        );
                    }
                    Err(reason) => return Err(self.broken(reason.to_string())),
                }
            }
        };
        let (events, endpoint) =
            tokio::time::timeout(timeout, opened)
                .await
                .map_err(|_| BackendError::Timeout {
                    server: self.server.clone(),
                    timeout,
                })??;
        // Relative to the server's URL, or absolute on the same origin.
        let post_path = match endpoint.parse::<http::Uri>() {
            Ok(uri) if uri.authority().is_some() => {
                uri.path_and_query().map_or("/", |p| p.as_str()).to_string()
            }
            _ if endpoint.starts_with('/') => endpoint.trim().to_string(),
            _ => {
                let base = self.uri.path();
                let dir = &base[..base.rfind('/').map_or(0, |i| i + 1)];
                format!("{dir}{}", endpoint.trim())
            }
        };
        // Each request goes to it: a path a request line cannot carry fails here.
        if post_path.parse::<http::uri::PathAndQuery>().is_err() {
            let shown: String = format!("{endpoint:?}").chars().take(SHOWN).collect();
            return Err(self.broken(format!(
                "the SSE stream's endpoint event names {shown}, not a path a request can go to"
            )));
        }
        *self.legacy.lock().unwrap() = Some(Legacy {
            post_path,
            waiting: HashMap::new(),
        });
        tokio::spawn(self.clone().read_legacy(events));
        Ok(())
    }

    async fn read_legacy(self: Arc<Self>, mut events: SseReader) {
        let reason = loop {
            match events.next().await {
                Ok(Some(event)) if event.event.is_empty() || event.event == "message" => {
                    self.incoming(&event.data, None);
                }
                Ok(Some(_)) => {}
                // An answer skipped fails its request, when its start names it.
                Err(SseError::TooLarge(_)) => {
                    let failed = events.skipped_id().is_some_and(|id| {
                        self.complete_legacy(&Value::from(id), Err(self.too_large("an event")))
                    });
                    if !failed {
                        self.skipped_event();
                    }
                }
                Ok(None) => break "the SSE stream ended".to_string(),
                Err(reason) => break reason.to_string(),
            }
        };
        self.close(Closed::Broken(reason));
    }

    /// Sends a request over the legacy transport; its answer comes on the event stream.
    pub(super) async fn exchange_legacy(
        &self,
        id: u64,
        body: String,
        traceparent: Option<http::HeaderValue>,
    ) -> Result<Box<RawValue>, BackendError> {
        let (tx, rx) = oneshot::channel();
        if let Some(legacy) = self.legacy.lock().unwrap().as_mut() {
            legacy.waiting.insert(id, tx);
        }
        let mut request = self.build(http::Method::POST, Some(body));
        if let Some(traceparent) = traceparent {
            request.headers_mut().insert("traceparent", traceparent);
        }
        let (response, lease) = self.send(request, Hold::Request).await?;
        let status = response.status();
        let text = read_text(response.into_body()).await;
        lease.done();
        if !status.is_success() {
            if let Some(legacy) = self.legacy.lock().unwrap().as_mut() {
                legacy.waiting.remove(&id);
            }
            return Err(self.http_error(
                status.as_u16(),
                format!("status {status}: {}", shown(&text)),
            ));
        }
        rx.await.unwrap_or_else(|_| Err(self.gone()))
    }

    /// Hands an answer that came on the legacy stream to its request; false when none waits.
    pub(super) fn complete_legacy(
        &self,
        id: &Value,
        answer: Result<Box<RawValue>, BackendError>,
    ) -> bool {
        let waiting = id.as_u64().and_then(|id| {
            let mut legacy = self.legacy.lock().unwrap();
            legacy.as_mut()?.waiting.remove(&id)
        });
        match waiting {
            Some(tx) => {
                let _ = tx.send(answer);
                true
            }
            None => false,
        }
    }

    pub(super) fn legacy_path(&self) -> Option<String> {
        Some(self.legacy.lock().unwrap().as_ref()?.post_path.clone())
    }
}
