//! A plugin's outbound HTTP: the host allow list, and the connection made to an address
//! the gateway resolved and checked itself, so that a name that resolves to loopback,
//! link-local (cloud metadata) or private addresses reaches them only when a grant lists
//! them.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::BodyExt;
use tokio::net::TcpStream;
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody};

use crate::telemetry::budget::Budget;

/// How long connecting may take when the guest sets no limit.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Most of a denied request's body read (and discarded) before answering.
const DENIED_BODY_DRAIN: usize = 1 << 20;

/// The hosts a plugin may send HTTP requests to: `name` (any port), `name:port`,
/// `*.suffix` (names under it, not the suffix itself, not IP addresses) or `*` (any
/// host). Anything else is answered `HTTP-request-denied` before a connection is made.
pub struct HostAllowList {
    pub plugin: Arc<str>,
    pub patterns: Vec<String>,
    /// Whether names may lead to loopback, link-local and private addresses.
    pub private_addresses: bool,
    /// The instance's log budget, which refusals are charged to.
    pub log_budget: Arc<Mutex<Budget>>,
    /// Hosts already named in a refusal by this instance: each is logged once.
    pub refused: BTreeSet<String>,
}

impl HostAllowList {
    pub fn allows(patterns: &[String], host: &str, port: u16) -> bool {
        let host = canonical_host(host);
        patterns.iter().any(|pattern| {
            let pattern = pattern.to_ascii_lowercase();
            let (pat_host, pat_port) = split_host_port(&pattern);
            if pat_port.is_some_and(|p| p != port) {
                return false;
            }
            if pat_host == "*" {
                return true;
            }
            match pat_host.strip_prefix("*.") {
                // A wildcard names DNS names: `*.0.0.1` must not open 127.0.0.1.
                Some(suffix) => {
                    host.parse::<IpAddr>().is_err()
                        && host.len() > suffix.len() + 1
                        && host.ends_with(&format!(".{suffix}"))
                }
                None => host == canonical_host(pat_host),
            }
        })
    }

    /// Whether a pattern for `port` lists `ip` itself (an address, or `localhost` for a
    /// loopback one): then a special address is meant.
    fn lists_address(patterns: &[String], ip: IpAddr, port: u16) -> bool {
        patterns.iter().any(|pattern| {
            let pattern = pattern.to_ascii_lowercase();
            let (pat_host, pat_port) = split_host_port(&pattern);
            if pat_port.is_some_and(|p| p != port) {
                return false;
            }
            match canonical_host(pat_host).parse::<IpAddr>() {
                Ok(listed) => unmapped(listed) == unmapped(ip),
                Err(_) => pat_host == "localhost" && ip.is_loopback(),
            }
        })
    }

    /// Logs a refusal once per host for this instance, under the plugin's log budget, with
    /// no more of the URL than scheme, host and port (its path and query may hold secrets).
    fn log_refusal(&mut self, scheme: &str, host: &str, port: u16, why: &str) {
        let target = format!("{scheme}://{host}:{port}");
        if !self.refused.insert(target.clone()) {
            return;
        }
        if super::lock(&self.log_budget).take_or_drop() {
            tracing::warn!(plugin = %self.plugin, target = %target, "outgoing HTTP request denied: {why}");
        }
    }

    /// The hook's answer: the request sent to a checked address, or denied.
    pub fn send(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
    ) -> super::sandbox::SendFuture {
        let uri = request.uri().clone();
        let https = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
        let scheme = if https { "https" } else { "http" };
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let raw_host = uri
            .host()
            .unwrap_or("")
            .trim_start_matches('[')
            .trim_end_matches(']');
        let host = canonical_host(raw_host);
        let userinfo = uri.authority().is_some_and(|a| a.as_str().contains('@'));
        let denial = if userinfo {
            Some("a user name in the address (user@host) is refused")
        } else if host.is_empty() || !HostAllowList::allows(&self.patterns, &host, port) {
            Some("host not in allow_hosts")
        } else {
            None
        };
        if let Some(why) = denial {
            self.log_refusal(scheme, &host, port, why);
            return denied(request);
        }
        let addresses = match host.parse::<IpAddr>() {
            Ok(ip) => Resolve::Ready(vec![SocketAddr::new(ip, port)]),
            Err(_) => Resolve::Name(host.clone()),
        };
        let policy = AddressPolicy {
            private: self.private_addresses,
            patterns: self.patterns.clone(),
        };
        let plugin = self.plugin.clone();
        let log_budget = self.log_budget.clone();
        tracing::debug!(plugin = %plugin, target = %format!("{scheme}://{host}:{port}"), method = %request.method(), "outgoing HTTP request");
        Box::new(async move {
            let candidates = addresses.resolve(port).await?;
            let allowed: Vec<SocketAddr> = candidates
                .iter()
                .copied()
                .filter(|addr| policy.permits(addr.ip(), port))
                .collect();
            if allowed.is_empty() {
                if super::lock(&log_budget).take_or_drop() {
                    tracing::warn!(plugin = %plugin, target = %format!("{scheme}://{host}:{port}"),
                        "outgoing HTTP request denied: the host resolves only to loopback, \
                         link-local or private addresses, which allow_hosts does not list \
                         (allow_private_addresses = true allows them)");
                }
                return Err(HttpError::DestinationIpProhibited);
            }
            send_to(request, options, &allowed, &host, https).await
        })
    }
}

/// What decides whether an address a name resolved to may be connected to.
struct AddressPolicy {
    private: bool,
    patterns: Vec<String>,
}

impl AddressPolicy {
    fn permits(&self, ip: IpAddr, port: u16) -> bool {
        self.private || !is_special(ip) || HostAllowList::lists_address(&self.patterns, ip, port)
    }
}

enum Resolve {
    Ready(Vec<SocketAddr>),
    Name(String),
}

impl Resolve {
    async fn resolve(self, port: u16) -> Result<Vec<SocketAddr>, HttpError> {
        match self {
            Resolve::Ready(addresses) => Ok(addresses),
            Resolve::Name(name) => match tokio::net::lookup_host((name.as_str(), port)).await {
                Ok(found) => Ok(found.collect()),
                Err(_) => Err(HttpError::DnsError {
                    rcode: Some("address not available".into()),
                    info_code: None,
                }),
            },
        }
    }
}

/// A denied request: its body is taken (and dropped) so that the guest sees the denial on
/// the response rather than a broken body stream.
fn denied(request: http::Request<WasiBody>) -> super::sandbox::SendFuture {
    Box::new(async move {
        let mut body = request.into_body();
        let mut taken = 0usize;
        while let Some(Ok(frame)) = body.frame().await {
            taken += frame.data_ref().map_or(0, |d| d.len());
            if taken > DENIED_BODY_DRAIN {
                break;
            }
        }
        Err(HttpError::HttpRequestDenied)
    })
}

/// Connects to the first of `addresses` that answers (TLS checked against `host`), and
/// sends `request` there over HTTP/1.1.
async fn send_to(
    mut request: http::Request<WasiBody>,
    options: Option<RequestOptions>,
    addresses: &[SocketAddr],
    host: &str,
    https: bool,
) -> Result<
    (
        http::Response<WasiBody>,
        Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
    ),
    HttpError,
> {
    let connect_timeout = options
        .and_then(|o| o.connect_timeout)
        .unwrap_or(CONNECT_TIMEOUT);
    let first_byte_timeout = options.and_then(|o| o.first_byte_timeout);
    let mut last = HttpError::ConnectionRefused;
    let mut stream = None;
    for address in addresses {
        match tokio::time::timeout(connect_timeout, TcpStream::connect(address)).await {
            Ok(Ok(s)) => {
                stream = Some(s);
                break;
            }
            Ok(Err(e)) => last = HttpError::Connect(e),
            Err(_) => last = HttpError::ConnectionTimeout,
        }
    }
    let stream = stream.ok_or(last)?;
    let io: Box<dyn TokioStream> = if https {
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.into(),
        };
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| HttpError::InternalError(Some(e.to_string())))?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let name = match host.parse::<IpAddr>() {
            Ok(ip) => rustls::pki_types::ServerName::from(ip),
            Err(_) => rustls::pki_types::ServerName::try_from(host.to_string())
                .map_err(HttpError::InvalidDnsNameError)?,
        };
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, stream)
            .await
            .map_err(HttpError::Tls)?;
        Box::new(tls)
    } else {
        Box::new(stream)
    };
    let (mut sender, connection) = tokio::time::timeout(
        connect_timeout,
        hyper::client::conn::http1::handshake(wasmtime_wasi_http::io::TokioIo::new(io)),
    )
    .await
    .map_err(|_| HttpError::ConnectionTimeout)??;
    // The request line holds the path alone; the authority went into `Host`.
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    *request.uri_mut() = http::Uri::builder()
        .path_and_query(path)
        .build()
        .map_err(|_| HttpError::HttpRequestUriInvalid)?;
    let connection = tokio::spawn(connection);
    let response = sender.send_request(request);
    let response = match first_byte_timeout {
        Some(limit) => tokio::time::timeout(limit, response)
            .await
            .map_err(|_| HttpError::ConnectionReadTimeout)??,
        None => response.await?,
    };
    let done = async move {
        match connection.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(HttpError::from(e)),
            Err(e) => Err(HttpError::InternalError(Some(e.to_string()))),
        }
    };
    Ok((
        response.map(|body| body.map_err(HttpError::from).boxed_unsync()),
        Box::new(done) as Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
    ))
}

trait TokioStream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static {}
impl<T> TokioStream for T where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static
{
}

/// The host as the allow list and the connection see it: lower case, no trailing dot, and
/// an IPv4 address written as numbers in any form the C library reads (`0x7f.0.0.1`,
/// `0177.0.0.1`, `2130706433`, `127.1`) as its dotted quad, so that it is an address, never
/// a name a wildcard matches.
pub fn canonical_host(host: &str) -> String {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    match numeric_ipv4(&host) {
        Some(ip) => ip.to_string(),
        None => host,
    }
}

/// `inet_aton`'s reading: one to four parts, each decimal, `0x` hex or `0` octal; the last
/// part fills the bytes the others left.
fn numeric_ipv4(host: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = host.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut values = Vec::with_capacity(4);
    for part in &parts {
        let (digits, radix) = if let Some(hex) = part.strip_prefix("0x") {
            (hex, 16)
        } else if part.len() > 1 && part.starts_with('0') {
            (&part[1..], 8)
        } else {
            (*part, 10)
        };
        if digits.is_empty() && radix != 16 || !digits.chars().all(|c| c.is_digit(radix)) {
            return None;
        }
        let value = if digits.is_empty() {
            0
        } else {
            u64::from_str_radix(digits, radix).ok()?
        };
        values.push(value);
    }
    let (last, leading) = values.split_last()?;
    if leading.iter().any(|&v| v > 255) {
        return None;
    }
    let room = 8 * (4 - leading.len() as u32);
    if room < 64 && *last >= 1u64 << room {
        return None;
    }
    let mut addr: u64 = 0;
    for (i, v) in leading.iter().enumerate() {
        addr |= v << (24 - 8 * i);
    }
    Some(Ipv4Addr::from((addr | last) as u32))
}

/// An IPv4 address carried in IPv6 (`::ffff:a.b.c.d`) as itself.
fn unmapped(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Loopback, link-local, private, shared (CGNAT), unspecified, broadcast or multicast: an
/// address inside the gateway's machine or network rather than out on the internet.
pub fn is_special(ip: IpAddr) -> bool {
    match unmapped(ip) {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
        }
    }
}

/// `host[:port]`, also `[v6]:port`.
fn split_host_port(s: &str) -> (&str, Option<u16>) {
    if let Some(rest) = s.strip_prefix('[')
        && let Some((host, tail)) = rest.split_once(']')
    {
        return (host, tail.strip_prefix(':').and_then(|p| p.parse().ok()));
    }
    match s.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => match port.parse() {
            Ok(port) => (host, Some(port)),
            Err(_) => (s, None),
        },
        _ => (s, None),
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::{HostAllowList, canonical_host, is_special};

    #[test]
    fn host_patterns() {
        let p = vec![
            "api.example.test".to_string(),
            "*.svc.test".into(),
            "127.0.0.1:8080".into(),
        ];
        assert!(HostAllowList::allows(&p, "api.example.test", 443));
        assert!(HostAllowList::allows(&p, "API.example.test", 80));
        assert!(!HostAllowList::allows(&p, "evil.example.test", 443));
        assert!(HostAllowList::allows(&p, "a.svc.test", 443));
        assert!(HostAllowList::allows(&p, "a.b.svc.test", 443));
        assert!(!HostAllowList::allows(&p, "svc.test", 443));
        assert!(!HostAllowList::allows(&p, "xsvc.test", 443));
        assert!(HostAllowList::allows(&p, "127.0.0.1", 8080));
        assert!(!HostAllowList::allows(&p, "127.0.0.1", 8081));
        assert!(!HostAllowList::allows(&[], "api.example.test", 443));
        assert!(!HostAllowList::allows(&["*.0.0.1".into()], "127.0.0.1", 80));
        let any = vec!["*".to_string()];
        assert!(HostAllowList::allows(&any, "127.0.0.1", 8081));
        assert!(HostAllowList::allows(&any, "example.test", 443));
    }

    /// Every numeric spelling of an IPv4 address is that address: a wildcard never matches
    /// it, and an address pattern matches all of them.
    #[test]
    fn numeric_hosts_are_addresses() {
        for spelling in [
            "0x7f.0.0.1",
            "0177.0.0.1",
            "2130706433",
            "127.1",
            "0x7f000001",
            "127.0.1",
            "127.0.0.1.",
        ] {
            assert_eq!(canonical_host(spelling), "127.0.0.1", "{spelling}");
            assert!(!HostAllowList::allows(&["*.0.0.1".into()], spelling, 80));
            assert!(!HostAllowList::allows(&["*.1".into()], spelling, 80));
            assert!(HostAllowList::allows(&["127.0.0.1".into()], spelling, 80));
        }
        for name in ["example.test", "1.2.3.4.5", "256.1.1.1", "08.0.0.1", "1e3"] {
            assert!(canonical_host(name).parse::<IpAddr>().is_err(), "{name}");
        }
        assert_eq!(canonical_host("4294967295"), "255.255.255.255");
        // As the C library reads it: the safe side, an address.
        assert_eq!(canonical_host("0x"), "0.0.0.0");
        assert!(canonical_host("4294967296").parse::<IpAddr>().is_err());
    }

    #[test]
    fn special_addresses() {
        for special in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
        ] {
            assert!(is_special(special.parse().unwrap()), "{special}");
        }
        for public in ["93.184.216.34", "2606:2800:220:1::1", "172.32.0.1"] {
            assert!(!is_special(public.parse().unwrap()), "{public}");
        }
    }
}
