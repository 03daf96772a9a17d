//! More than one gateway: two replicas behind nginx (Debian's package), configured by
//! tests/gateway/fixtures/nginx-replicas.conf, which docs/deployment.md quotes. The
//! official Python SDK client makes its sessions through nginx; one replica is killed;
//! its sessions get 404 and a new `initialize` lands on the other.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::TestDir;
use crate::harness::on_path;
use crate::http_client::HttpGateway;
use crate::http_front::with_example;
use crate::third_party::{require, sdk_client, sdk_python};

const FIXTURE: &str = include_str!("fixtures/nginx-replicas.conf");
const SESSIONS: usize = 6;

/// nginx, on PATH or where Debian puts it (/usr/sbin is not on every user's PATH).
pub(crate) fn nginx() -> Option<PathBuf> {
    let found = on_path("nginx").or_else(|| {
        let sbin = PathBuf::from("/usr/sbin/nginx");
        sbin.exists().then_some(sbin)
    });
    require(
        "nginx",
        found,
        "apt-get install nginx; scripts/test.sh does",
    )
}

/// An nginx of the test's own: its config, prefix, logs and pid file in a temp folder.
pub(crate) struct Nginx {
    child: Child,
    pub(crate) port: u16,
    dir: TestDir,
}

impl Nginx {
    /// The fixture with the replicas' addresses and a free loopback port for nginx.
    pub(crate) fn start(nginx: &Path, replicas: [SocketAddr; 2]) -> Nginx {
        let dir = TestDir::new("nginx");
        let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
        // A port found free may be taken before nginx binds it: try again then.
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let site = [
                (
                    "listen 127.0.0.1:8080;",
                    format!("listen 127.0.0.1:{port};"),
                ),
                ("server 127.0.0.1:8701 ", format!("server {} ", replicas[0])),
                ("server 127.0.0.1:8702 ", format!("server {} ", replicas[1])),
            ]
            .iter()
            .fold(FIXTURE.to_string(), |text, (from, to)| {
                assert_eq!(text.matches(from).count(), 1, "{from} in the fixture");
                text.replace(from, to)
            });
            dir.write("replicas.conf", &site);
            let temp = |kind: &str| format!("{kind}_temp_path {};", path(&format!("temp-{kind}")));
            let conf = format!(
                "daemon off;\n\
                 # One process, stopped by its id.\n\
                 master_process off;\n\
                 pid {pid};\n\
                 error_log {log} info;\n\
                 events {{ worker_connections 256; }}\n\
                 http {{\n\
                 log_format replicas '$request_method $status $upstream_addr $upstream_status';\n\
                 access_log {access} replicas;\n\
                 {} {} {} {} {}\n\
                 include {site};\n\
                 }}\n",
                temp("client_body"),
                temp("proxy"),
                temp("fastcgi"),
                temp("uwsgi"),
                temp("scgi"),
                pid = path("nginx.pid"),
                log = path("error.log"),
                access = path("access.log"),
                site = path("replicas.conf"),
            );
            let conf = dir.write("nginx.conf", &conf);
            let mut child = Command::new(nginx)
                .arg("-p")
                .arg(&dir.path)
                .arg("-c")
                .arg(&conf)
                // Before the config is read, nginx would open its default error log.
                .args(["-e", &path("error.log")])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(dir.join("nginx.stderr")).unwrap())
                .spawn()
                .expect("start nginx");
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Nginx { child, port, dir };
                }
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
            let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default()
                + &std::fs::read_to_string(dir.join("nginx.stderr")).unwrap_or_default();
            assert!(log.contains("Address already in use"), "nginx: {log}");
        }
        panic!("nginx found no free port in 5 tries");
    }

    pub(crate) fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(name)).unwrap_or_default()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The SDK client in its `replicas` mode: a line of JSON out per step, a line in to go on.
struct SdkClient {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl SdkClient {
    fn start(python: &Path, url: &str, dir: &TestDir) -> SdkClient {
        let mut child = sdk_client(python, &["replicas", url, &SESSIONS.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.join("sdk.stderr")).unwrap())
            .spawn()
            .expect("start the SDK client");
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                let _ = send.send(line);
            }
        });
        SdkClient { child, lines }
    }

    fn next(&mut self, dir: &TestDir) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| {
                let stderr = std::fs::read_to_string(dir.join("sdk.stderr")).unwrap_or_default();
                panic!("the SDK client printed nothing more: {stderr}")
            });
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    fn go_on(&mut self) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(b"go\n").unwrap();
        stdin.flush().unwrap();
    }
}

impl Drop for SdkClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Two replicas behind nginx with the documented config: new sessions are spread over both,
/// every call of a session reaches the replica that holds it, and after one replica is
/// killed its sessions get 404 (so clients initialize again) while the other's go on, and
/// a new session lands on the live one.
#[test]
fn two_replicas_behind_nginx() {
    let Some(nginx) = nginx() else { return };
    let Some(python) = sdk_python() else { return };
    let deployment = include_str!("../../docs/deployment.md");
    assert!(
        deployment.contains(FIXTURE),
        "docs/deployment.md quotes tests/gateway/fixtures/nginx-replicas.conf as it is"
    );
    let mut first = HttpGateway::start(&with_example(""), &[]);
    let second = HttpGateway::start(&with_example(""), &[]);
    let (dead, live) = (first.addr.to_string(), second.addr.to_string());
    let proxy = Nginx::start(&nginx, [first.addr, second.addr]);
    let url = format!("http://127.0.0.1:{}/mcp", proxy.port);
    let mut client = SdkClient::start(&python, &url, &proxy.dir);

    let ok = |replica: &str| json!({"replica": replica, "echo": "through the balancer"});
    let before = client.next(&proxy.dir);
    let before = before.as_array().unwrap();
    assert_eq!(before.len(), SESSIONS);
    // initialize has no session id, so nginx spreads it round-robin.
    let on_dead = before.iter().filter(|s| **s == ok(&dead)).count();
    let on_live = before.iter().filter(|s| **s == ok(&live)).count();
    assert!(
        on_dead > 0 && on_live > 0 && on_dead + on_live == SESSIONS,
        "{before:?}\n{}",
        proxy.log("access.log")
    );

    first.kill();
    // A path naming no profile is told as that, not as a session whose replica stopped,
    // though one replica is down: whichever of them nginx tries last.
    crate::http_client::runtime().block_on(async {
        let proxied: SocketAddr = format!("127.0.0.1:{}", proxy.port).parse().unwrap();
        for _ in 0..4 {
            let mut conn = crate::http_client::Conn::open(proxied).await;
            let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "typo", "version": "1"}}});
            for session in [None, Some("an-old-session-id")] {
                let headers: Vec<(&str, &str)> =
                    session.map(|s| ("mcp-session-id", s)).into_iter().collect();
                let reply = conn.post("/mcp/typo", &headers, &init).await;
                assert_eq!(reply.status, 400, "{}", reply.body);
                assert!(reply.body.contains("no profile `typo`"), "{}", reply.body);
            }
        }
    });
    client.go_on();
    let seen = client.next(&proxy.dir);
    let after = seen["after"].as_array().unwrap();
    for (was, now) in before.iter().zip(after) {
        if *was == ok(&live) {
            assert_eq!(*now, ok(&live), "the live replica's sessions go on");
        } else {
            assert_eq!(now["statuses"], json!([["POST", 404]]), "{now}");
            let error = now["error"].as_str().unwrap();
            assert!(error.contains("Not Found"), "{error}");
        }
    }
    assert_eq!(
        seen["fresh"],
        ok(&live),
        "a new session lands on the live one"
    );

    let access = proxy.log("access.log");
    // Session ids are random: a session's first try is often the replica without it.
    eprintln!(
        "nginx: {} requests, {} sent on to the replica holding the session after a 404",
        access.lines().count(),
        access.lines().filter(|l| l.ends_with("404, 200")).count()
    );
    for gateway in [&first, &second] {
        assert!(
            !gateway.stderr().contains("panicked"),
            "{}",
            gateway.stderr()
        );
    }
}
