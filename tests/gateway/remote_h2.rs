//! HTTP/2 to a remote server that offers it over TLS (ALPN), against a small MCP server on
//! hyper's HTTP/2 server with a certificate of a private CA.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use serde_json::{Value, json};

use crate::harness::{TestDir, text, toml_str};
use crate::remote::make_ca_and_certificate;

/// An HTTPS server speaking HTTP/2 only (ALPN `h2`), with `cert.pem` and `key.pem` of
/// `certs`: `initialize`, `tools/list` (`version`), and `tools/call version`, whose text
/// is the HTTP version the request came over.
fn h2_server(certs: &TestDir) -> SocketAddr {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_file_iter(certs.join("cert.pem"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(certs.join("key.pem")).unwrap();
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        crate::http_client::runtime().block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let io = wasmtime_wasi_http::io::TokioIo::new(tls);
                    let service = hyper::service::service_fn(answer);
                    let _ = hyper::server::conn::http2::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    )
                    .serve_connection(io, service)
                    .await;
                });
            }
        })
    });
    addr
}

async fn answer(
    request: hyper::Request<Incoming>,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    let version = format!("{:?}", request.version());
    let reply = |status: u16, body: Option<Value>| {
        let body = body.map_or(String::new(), |b| b.to_string());
        let response = hyper::Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .header("mcp-session-id", "h2-session");
        Ok(response.body(Full::new(Bytes::from(body))).unwrap())
    };
    if request.method() != hyper::Method::POST {
        return reply(405, None);
    }
    let body = request.into_body().collect().await.unwrap().to_bytes();
    let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let result = match message["method"].as_str() {
        _ if message.get("id").is_none() => return reply(202, None),
        Some("initialize") => {
            json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                                     "serverInfo": {"name": "h2", "version": "1"}})
        }
        Some("tools/list") => {
            json!({"tools": [{"name": "version", "inputSchema": {"type": "object"}}]})
        }
        Some("tools/call") => json!({"content": [{"type": "text", "text": version}]}),
        _ => json!({}),
    };
    reply(
        200,
        Some(json!({"jsonrpc": "2.0", "id": message["id"], "result": result})),
    )
}

/// A server that offers HTTP/2 gets it: every call goes over the one HTTP/2 connection,
/// several at once among them.
#[test]
fn http2_where_the_server_offers_it() {
    let certs = TestDir::new("tls");
    make_ca_and_certificate(&certs);
    let addr = h2_server(&certs);
    let dir = TestDir::new("outer");
    let ca = format!(
        "ca_file = {}",
        toml_str(certs.join("ca.pem").to_str().unwrap())
    );
    let url = format!("https://localhost:{}/mcp", addr.port());
    let config = crate::harness::config()
        .remote("up", &url, &[&ca])
        .render(&dir.path);
    let path = dir.write("gateway.toml", &config);
    let path = path.to_str().unwrap().to_string();
    let mut client =
        crate::harness::Client::spawn_with_env(&["serve", "--config", &path], dir, &[]);
    client.initialize();
    client.wait_ready();
    let ids: Vec<Value> = (0..8)
        .map(|_| {
            client.send_request(
                "tools/call",
                json!({"name": "up__version", "arguments": {}}),
            )
        })
        .collect();
    for id in &ids {
        let response = client.wait_response(id, crate::harness::TIMEOUT);
        assert_eq!(text(&response["result"]), "HTTP/2.0", "{response}");
    }
}
