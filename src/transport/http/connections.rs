//! The HTTP front's connections, plain or TLS, on one accept loop. A connection is bounded in
//! time until its request is whole: `header_timeout` for a request head (a new connection's
//! TLS handshake and first head included) and for each pause in a request body,
//! `idle_timeout` between requests. Their number is bounded too: at `max_connections`, a new
//! connection closes the idlest ones, up to a 64th of the cap at once (those that never sent
//! a whole head first, then idle ones, then ones still sending a body), and waits while none
//! may be closed: one whose request is whole, its answer or event stream under way, never is.

use std::collections::{BinaryHeap, HashMap};
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use http_body_util::BodyExt as _;
use hyper::body::{Body as _, Incoming};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

/// Descriptors kept out of the connections' share besides the half that plugins may hold
/// (`crate::descriptors`): servers' pipes, the listener, the log and events files.
const RESERVED: usize = 64;

/// The peer's address, in each request's extensions as axum's `ConnectInfo`.
#[derive(Clone, Copy, Debug)]
pub struct Remote(pub SocketAddr);

/// `[http] header_timeout`, `idle_timeout` and `max_connections`, the last lowered by [`cap`].
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
    pub max: usize,
}

/// `max_connections`, lowered to leave plugins and servers their descriptors.
pub fn cap(configured: usize) -> usize {
    let room = (crate::descriptors::limit() / 2).saturating_sub(RESERVED);
    configured.min(room).max(1)
}

/// Connections told to close for room that may still be open, what the cap may be exceeded
/// by: a 64th of it, at least one.
fn closing_at_most(max: usize) -> usize {
    (max / 64).max(1)
}

/// The open connections.
pub struct Connections {
    bounds: Bounds,
    open: Mutex<HashMap<u64, Arc<Conn>>>,
    next_id: AtomicU64,
    /// A connection closed or stopped serving a request: room to accept, or one to close.
    changed: Notify,
    /// Connections told to close for room that are not gone yet.
    closing: AtomicUsize,
}

/// One connection's state, shared by its task, its requests and the accept loop.
struct Conn {
    state: Mutex<State>,
    /// Its deadline moved, or it was told to close.
    wake: Notify,
}

struct State {
    /// Requests whose answer is not all sent yet.
    busy: usize,
    /// Since when a request's body has been coming in, until it is whole.
    receiving: Option<Instant>,
    /// When bytes last came in.
    last_read: Instant,
    /// When it last stopped serving a request; its accept, at first.
    idle_since: Instant,
    /// It has sent a whole request head: not a header-less connection.
    served: bool,
    /// When the first byte after an idle spell came: a request head on its way.
    head_started: Option<Instant>,
    /// Told to close, to make room.
    evicted: bool,
    /// Told to close and not closed yet, nor finishing a request: in `Connections::closing`.
    closing: bool,
}

/// Why a connection's watch ended.
enum Lapse {
    /// Serving no request: close it now.
    Close(&'static str),
    /// Told to close while serving a request: finish it, then close.
    Finish,
}

impl State {
    /// When the connection is closed if nothing changes; `None` while it serves a request
    /// that is whole.
    fn deadline(&self, bounds: &Bounds) -> Option<(Instant, &'static str)> {
        if self.receiving.is_some() {
            return Some((
                self.last_read + bounds.header_timeout,
                "a request body paused past header_timeout",
            ));
        }
        if self.busy > 0 {
            return None;
        }
        Some(match (self.served, self.head_started) {
            (false, _) => (
                self.idle_since + bounds.header_timeout,
                "no request head within header_timeout",
            ),
            (true, Some(start)) => (
                start + bounds.header_timeout,
                "no whole request head within header_timeout",
            ),
            (true, None) => (
                self.idle_since + bounds.idle_timeout,
                "no request within idle_timeout",
            ),
        })
    }

    /// Where it stands in the order of closing for room, first first: `None` if it may not
    /// be closed. Header-less ones, then idle ones, then ones still sending a body.
    fn idlest_first(&self) -> Option<(u8, Instant)> {
        match (self.receiving, self.busy, self.served) {
            (Some(since), _, _) => Some((2, since)),
            (None, 0, false) => Some((0, self.idle_since)),
            (None, 0, true) => Some((1, self.idle_since)),
            (None, _, _) => None,
        }
    }
}

impl Conn {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Resolves when the connection is to close or, told to close, to finish its request.
    async fn lapse(&self, bounds: &Bounds) -> Lapse {
        loop {
            let woken = self.wake.notified();
            let (deadline, evicted, busy) = {
                let state = self.state();
                let whole = state.busy > 0 && state.receiving.is_none();
                (state.deadline(bounds), state.evicted, whole)
            };
            match (evicted, deadline) {
                (true, _) if busy => return Lapse::Finish,
                (true, _) => return Lapse::Close("closed for a new connection at max_connections"),
                (false, Some((at, why))) if at <= Instant::now() => return Lapse::Close(why),
                (false, Some((at, _))) => {
                    tokio::select! {
                        () = woken => {}
                        () = tokio::time::sleep_until(at) => {}
                    }
                }
                (false, None) => woken.await,
            }
        }
    }

    /// Bytes came in: the start of a request head if it was idle after a request.
    fn read_some(&self) {
        let mut state = self.state();
        state.last_read = Instant::now();
        if state.busy == 0 && state.served && state.head_started.is_none() {
            state.head_started = Some(Instant::now());
            drop(state);
            self.wake.notify_one();
        }
    }
}

impl Connections {
    pub fn new(bounds: Bounds) -> Arc<Connections> {
        Arc::new(Connections {
            bounds,
            open: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            changed: Notify::new(),
            closing: AtomicUsize::new(0),
        })
    }

    fn open(&self) -> MutexGuard<'_, HashMap<u64, Arc<Conn>>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Connections open now.
    pub fn len(&self) -> usize {
        self.open().len()
    }

    /// Resolves once every connection has closed.
    pub async fn closed(&self) {
        while self.len() > 0 {
            self.changed.notified().await;
        }
    }

    /// Accepts connections until `stop` turns true, each served by `app`, over TLS with `tls`.
    pub async fn accept(
        self: Arc<Self>,
        listener: TcpListener,
        tls: Option<TlsAcceptor>,
        app: Router,
        stop: watch::Receiver<bool>,
    ) {
        let mut stopped = pin!(stopped(stop.clone()));
        loop {
            let accepted = tokio::select! {
                () = &mut stopped => return,
                accepted = listener.accept() => accepted,
            };
            let (stream, remote) = match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors, most likely: wait for some to be freed.
                    tracing::warn!("accepting a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            // Room is made once a connection is there to take it (made ahead, it would close
            // the last one taken, maybe before that one's request was read); while every
            // connection serves a request, this one waits, and the ones after it in the backlog.
            tokio::select! {
                () = &mut stopped => return,
                () = self.room() => {}
            }
            let open = Open::new(&self);
            tokio::spawn(open.drive(stream, remote, tls.clone(), app.clone(), stop.clone()));
        }
    }

    /// Waits until one more connection fits: below the cap, or once the idlest connection
    /// that may be closed has closed.
    async fn room(&self) {
        // Those told to close are gone within moments, so they are counted out at once: a
        // flood of connections does not queue behind their tasks' turns.
        let fits = |open: usize, closing: usize| open.saturating_sub(closing) < self.bounds.max;
        loop {
            {
                let open = self.open();
                let closing = self.closing.load(Ordering::Relaxed);
                if fits(open.len(), closing) {
                    return;
                }
                let room = closing_at_most(self.bounds.max).saturating_sub(closing);
                // The idlest ones, as many as may close at once: one pass over the
                // connections serves that many new ones.
                let mut idlest = BinaryHeap::with_capacity(room + 1);
                for (id, conn) in open.iter().filter(|_| room > 0) {
                    let state = conn.state();
                    if let (false, Some(key)) = (state.evicted, state.idlest_first()) {
                        idlest.push((key, *id));
                        if idlest.len() > room {
                            idlest.pop();
                        }
                    }
                }
                for (_, id) in idlest {
                    let conn = &open[&id];
                    let mut state = conn.state();
                    state.evicted = true;
                    state.closing = true;
                    drop(state);
                    conn.wake.notify_one();
                    self.closing.fetch_add(1, Ordering::Relaxed);
                }
                if fits(open.len(), self.closing.load(Ordering::Relaxed)) {
                    return;
                }
            }
            self.changed.notified().await;
        }
    }

    /// A connection told to close will be gone: no longer counted as closing.
    fn closed_one(&self, conn: &Conn) {
        if std::mem::take(&mut conn.state().closing) {
            self.closing.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// A registered connection: counted until dropped.
struct Open {
    connections: Arc<Connections>,
    conn: Arc<Conn>,
    id: u64,
}

impl Open {
    fn new(connections: &Arc<Connections>) -> Open {
        let conn = Arc::new(Conn {
            state: Mutex::new(State {
                busy: 0,
                receiving: None,
                last_read: Instant::now(),
                idle_since: Instant::now(),
                served: false,
                head_started: None,
                evicted: false,
                closing: false,
            }),
            wake: Notify::new(),
        });
        let id = connections.next_id.fetch_add(1, Ordering::Relaxed);
        connections.open().insert(id, conn.clone());
        Open {
            connections: connections.clone(),
            conn,
            id,
        }
    }

    /// Serves the connection until it ends, is closed by its bounds, or the front stops.
    async fn drive(
        self,
        stream: TcpStream,
        remote: SocketAddr,
        tls: Option<TlsAcceptor>,
        app: Router,
        stop: watch::Receiver<bool>,
    ) {
        let io = Watched {
            stream,
            conn: self.conn.clone(),
        };
        let Some(acceptor) = tls else {
            return self.serve(io, remote, app, stop).await;
        };
        let handshake = tokio::select! {
            done = acceptor.accept(io) => done,
            // No request yet, so nothing to finish.
            _ = self.conn.lapse(&self.connections.bounds) => {
                tracing::debug!(%remote, "closing a connection: TLS handshake not done in time");
                return;
            }
        };
        match handshake {
            Ok(tls) => self.serve(tls, remote, app, stop).await,
            Err(e) => tracing::debug!(%remote, "TLS handshake failed: {e}"),
        }
    }

    async fn serve<I>(&self, io: I, remote: SocketAddr, app: Router, stop: watch::Receiver<bool>)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let app = TowerToHyperService::new(app);
        let (conn, connections) = (self.conn.clone(), self.connections.clone());
        let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo(Remote(remote)));
            let busy = Busy::begin(&conn, &connections);
            let request = match request.body().is_end_stream() {
                true => request.map(Body::new),
                false => {
                    conn.state().receiving = Some(Instant::now());
                    let receiving = Receiving(conn.clone());
                    // Handlers read the whole body, then drop it.
                    request.map(|body| {
                        Body::new(body.map_frame(move |frame| {
                            let _whole_once_dropped = &receiving;
                            frame
                        }))
                    })
                }
            };
            let answer = hyper::service::Service::call(&app, request);
            async move {
                let Ok(response) = answer.await;
                // Serving until its answer's body is all sent, or dropped: an event stream
                // keeps its connection from being closed to make room.
                Ok::<_, Infallible>(response.map(|body| {
                    Body::new(body.map_frame(move |frame| {
                        let _serving = &busy;
                        frame
                    }))
                }))
            }
        });
        let mut http = pin!(
            hyper::server::conn::http1::Builder::new()
                // The connection's lapse bounds heads; hyper's timer would cut idle ones too.
                .header_read_timeout(None)
                .serve_connection(TokioIo::new(io), service)
        );
        let mut lapse = pin!(self.conn.lapse(&self.connections.bounds));
        let mut lapsed = false;
        let mut stopping = pin!(stopped(stop));
        let mut stopped = false;
        loop {
            tokio::select! {
                _ = http.as_mut() => return,
                lapse = &mut lapse, if !lapsed => match lapse {
                    Lapse::Close(why) => {
                        tracing::debug!(%remote, "closing a connection: {why}");
                        return;
                    }
                    Lapse::Finish => {
                        // It stays until its answer is sent: room must come from another.
                        self.connections.closed_one(&self.conn);
                        lapsed = true;
                        http.as_mut().graceful_shutdown();
                    }
                },
                () = &mut stopping, if !stopped => {
                    stopped = true;
                    http.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        let mut open = self.connections.open();
        open.remove(&self.id);
        self.connections.closed_one(&self.conn);
        drop(open);
        self.connections.changed.notify_one();
    }
}

/// One request being served, until its answer is all sent.
struct Busy {
    conn: Arc<Conn>,
    connections: Arc<Connections>,
}

impl Busy {
    fn begin(conn: &Arc<Conn>, connections: &Arc<Connections>) -> Busy {
        let mut state = conn.state();
        state.busy += 1;
        state.served = true;
        state.head_started = None;
        drop(state);
        Busy {
            conn: conn.clone(),
            connections: connections.clone(),
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let mut state = self.conn.state();
        state.busy -= 1;
        if state.busy == 0 {
            state.idle_since = Instant::now();
        }
        drop(state);
        self.conn.wake.notify_one();
        self.connections.changed.notify_one();
    }
}

/// A request body still coming in, until dropped.
struct Receiving(Arc<Conn>);

impl Drop for Receiving {
    fn drop(&mut self) {
        self.0.state().receiving = None;
        self.0.wake.notify_one();
    }
}

/// Resolves when `stop` turns true or its sender is gone.
async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// A connection's TCP stream, telling its [`Conn`] when bytes come in.
struct Watched {
    stream: TcpStream,
    conn: Arc<Conn>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.conn.read_some();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(at: Instant) -> State {
        State {
            busy: 0,
            receiving: None,
            last_read: at,
            idle_since: at,
            served: false,
            head_started: None,
            evicted: false,
            closing: false,
        }
    }

    #[test]
    fn deadlines_follow_what_the_connection_waits_for() {
        let bounds = Bounds {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max: 4,
        };
        let t = Instant::now();
        let second = Duration::from_secs(1);
        let mut s = state(t);
        assert_eq!(s.deadline(&bounds).unwrap().0, t + 10 * second);
        s.served = true;
        assert_eq!(s.deadline(&bounds).unwrap().0, t + 60 * second);
        s.head_started = Some(t + 30 * second);
        assert_eq!(s.deadline(&bounds).unwrap().0, t + 40 * second);
        s.busy = 1;
        assert!(
            s.deadline(&bounds).is_none(),
            "a whole request has no deadline"
        );
        s.receiving = Some(t);
        s.last_read = t + 5 * second;
        assert_eq!(s.deadline(&bounds).unwrap().0, t + 15 * second);
    }

    #[test]
    fn header_less_ones_close_first_and_whole_requests_never() {
        let t = Instant::now();
        let later = t + Duration::from_secs(1);
        let fresh = state(later);
        let mut idle = state(t);
        idle.served = true;
        let mut sending = state(t);
        (sending.busy, sending.receiving) = (1, Some(t));
        let mut answering = state(t);
        answering.busy = 1;
        let order = |s: &State| s.idlest_first();
        assert!(order(&fresh) < order(&idle), "header-less before idle");
        assert!(
            order(&idle) < order(&sending),
            "idle before a body on its way"
        );
        assert_eq!(order(&answering), None);
        assert!(order(&state(t)) < order(&fresh), "oldest first");
    }
}
