//! `Mcp-Param-*` headers (SEP-2243) on the stateless HTTP front: a `tools/call` of a
//! tool whose schema marks arguments with `x-mcp-header` must mirror each in its header
//! (plain, or base64 in the `=?base64?…?=` sentinel); a missing, left-over or different
//! one is refused with HTTP 400 and -32020 before any server sees the call.

use serde_json::{Value, json};

use crate::conformance::fixture_config;
use crate::http_client::{Conn, HttpGateway, Reply, runtime};
use crate::listen::{headers, request};

const TOOL: &str = "test_header_params";

/// A stateless call of [`TOOL`] with `arguments`, and `params` as `Mcp-Param-*` headers.
async fn call(conn: &mut Conn, id: u64, arguments: Value, params: &[(&str, &str)]) -> Reply {
    let body = request(
        json!(id),
        "tools/call",
        json!({"name": TOOL, "arguments": arguments}),
    );
    let mut headers = headers(&body);
    headers.extend(
        params
            .iter()
            .map(|(name, value)| (format!("mcp-param-{name}"), value.to_string())),
    );
    let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (&**n, &**v)).collect();
    conn.post("/mcp", &headers, &body).await
}

#[test]
fn mirrored_arguments_are_checked_against_their_headers() {
    let gateway = HttpGateway::start(&fixture_config(&[]), &[]);
    runtime().block_on(async {
        let mut conn = gateway.connect().await;
        let all = json!({"region": "eu-west", "priority": 3, "verbose": true, "query": "q"});
        let sent = [
            ("Region", "eu-west"),
            ("PRIORITY", "3"),
            ("verbose", "true"),
        ];
        let reply = call(&mut conn, 1, all.clone(), &sent).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        let text = &reply.answer()["result"]["content"][0]["text"];
        assert_eq!(
            text, "region=\"eu-west\" priority=3 verbose=true",
            "{}",
            reply.body
        );
        // A value that is not plain ASCII comes base64-encoded; an argument left out has
        // no header; a value without the whole sentinel is taken as it is.
        let encoded = "=?base64?w6lsw6lnYW50?=";
        let reply = call(
            &mut conn,
            2,
            json!({"region": "élégant"}),
            &[("Region", encoded)],
        )
        .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        let literal = "=?base64?SGVsbG8=";
        let reply = call(
            &mut conn,
            3,
            json!({"region": literal}),
            &[("Region", literal)],
        )
        .await;
        assert_eq!(reply.status, 200, "{}", reply.body);

        let refused = [
            (json!({"region": "eu-west"}), vec![]),
            (json!({"region": "eu-west"}), vec![("Region", "us-east")]),
            (
                json!({"region": "Hello"}),
                vec![("Region", "=?base64?SGVsbG8?=")],
            ),
            (
                json!({"region": "Hello"}),
                vec![("Region", "=?base64?SGVs!!!bG8=?=")],
            ),
            (
                all.clone(),
                vec![
                    ("Region", "eu-west"),
                    ("Priority", "4"),
                    ("Verbose", "true"),
                ],
            ),
            (
                all.clone(),
                vec![("Region", "eu-west"), ("Priority", "3"), ("Verbose", "1")],
            ),
            (
                json!({"region": "eu-west"}),
                vec![("Region", "eu-west"), ("Priority", "3")],
            ),
        ];
        for (n, (arguments, sent)) in refused.into_iter().enumerate() {
            let id = 10 + n as u64;
            let reply = call(&mut conn, id, arguments, &sent).await;
            assert_eq!(reply.status, 400, "{sent:?}: {}", reply.body);
            let answer = reply.json();
            assert_eq!(answer["error"]["code"], -32020, "{answer}");
            assert_eq!(answer["id"], id, "{answer}");
        }
    });
    let stderr = gateway.stderr();
    assert!(!stderr.contains("panicked"), "{stderr}");
}
