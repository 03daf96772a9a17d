//! An OTLP/HTTP receiver for the benches, on std threads: it reads each export and answers
//! 200, counting exports and bytes, so that the gateway under test exports as it would to
//! a collector, while the receiver's own work stays out of the gateway's CPU figures.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Default)]
pub struct Counts {
    pub exports: AtomicU64,
    pub bytes: AtomicU64,
}

/// Starts the receiver on a loopback port: its base URL, and what it has received.
pub fn start() -> std::io::Result<(String, Arc<Counts>)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}", listener.local_addr()?);
    let counts = Arc::new(Counts::default());
    let shared = counts.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let counts = shared.clone();
            std::thread::spawn(move || serve(stream, &counts));
        }
    });
    Ok((url, counts))
}

/// One connection's requests (HTTP/1.1, kept alive), each answered 200 with an empty body.
fn serve(stream: TcpStream, counts: &Counts) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    loop {
        let mut length = 0usize;
        let mut line = String::new();
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = value.trim().parse().unwrap_or(0);
            }
            if line == "\r\n" {
                break;
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        counts.exports.fetch_add(1, Ordering::Relaxed);
        counts.bytes.fetch_add(length as u64, Ordering::Relaxed);
        let answer =
            "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}
