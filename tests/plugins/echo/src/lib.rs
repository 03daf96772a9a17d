//! `echo`: the well-behaved test fixture. One tool per host feature the
//! gateway's tests need to see from inside a plugin: results of every kind,
//! progress, logs, config, the sandbox (env, files, network, stdio) and each
//! way a call can fail. `echo` itself does nothing but parse and answer
//! (the benchmark calls the same tool in `minimal`, which has no other).

mod kinds;

use plugin_kit::{
    CallError, CallResult, Guest, Level, ToolInfo, ToolInfoExt, ToolOutput, args, failed, host,
    http, structured, text, tool, unknown_tool,
};
use serde::Deserialize;
use serde_json::json;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

struct Echo;

/// How many times `list-tools` ran in this instance (the `listings` tool tells).
static LISTINGS: AtomicU32 = AtomicU32::new(0);

/// What `count` counts: calls of it in this instance.
static COUNT: AtomicU32 = AtomicU32::new(0);

#[derive(Deserialize)]
struct Text {
    text: String,
}

#[derive(Deserialize)]
struct Steps {
    steps: u32,
    #[serde(default)]
    delay_ms: u64,
}

#[derive(Deserialize)]
struct Millis {
    ms: u64,
}

#[derive(Deserialize)]
struct Message {
    message: String,
}

#[derive(Deserialize)]
struct Key {
    key: String,
}

#[derive(Deserialize)]
struct Name {
    name: String,
}

#[derive(Deserialize)]
struct PathArg {
    path: String,
}

#[derive(Deserialize)]
struct Write {
    path: String,
    text: String,
}

#[derive(Deserialize)]
struct Url {
    url: String,
}

#[derive(Deserialize)]
struct HttpRequest {
    method: String,
    url: String,
    #[serde(default)]
    headers: std::collections::BTreeMap<String, String>,
    body: Option<String>,
}

impl Guest for Echo {
    fn list_tools() -> Vec<ToolInfo> {
        LISTINGS.fetch_add(1, Ordering::Relaxed);
        let string = |description: &str| json!({"type": "string", "description": description});
        let none = || json!({});
        vec![
            tool(
                "echo",
                "Returns `text` unchanged.",
                json!({"text": string("Any text")}),
                &["text"],
            )
            .pure(),
            tool(
                "kinds",
                "Returns one content item of each kind (text, image/png, audio/wav, \
                 text resource, blob resource) and a structured result.",
                none(),
                &[],
            )
            .output_schema(kinds::output_schema())
            .pure(),
            tool(
                "progress",
                "Reports progress 1..=steps of `steps` (message \"step i of n\"), \
                 sleeping `delay_ms` after each, then returns \"done {steps}\".",
                json!({
                    "steps": {"type": "integer", "minimum": 0, "maximum": 10000},
                    "delay_ms": {"type": "integer", "minimum": 0, "maximum": 60000, "default": 0},
                }),
                &["steps"],
            ),
            tool(
                "sleep",
                "Blocks in a host call (a WASI clock) for `ms` milliseconds, then returns \
                 \"slept {ms}\". Unlike faulty.spin it burns no fuel or epochs.",
                json!({"ms": {"type": "integer", "minimum": 0, "maximum": 3600000}}),
                &["ms"],
            ),
            tool(
                "log",
                "Logs `message` at debug, info, warning and error, then returns \"logged\".",
                json!({"message": string("Text to log")}),
                &["message"],
            ),
            tool(
                "config",
                "Returns the plugin config value `key`, or \"unset\".",
                json!({"key": string("Key of the [plugins.NAME.config] table")}),
                &["key"],
            ),
            tool(
                "env",
                "Returns the environment variable `name`, or \"unset\" (allow_env grants it).",
                json!({"name": string("Variable name")}),
                &["name"],
            ),
            tool(
                "read",
                "Returns the text of the file at guest path `path`; fails with the OS \
                 message without an allow_dirs grant.",
                json!({"path": string("Guest path")}),
                &["path"],
            ),
            tool(
                "write",
                "Writes `text` to the file at guest path `path`, returns \"wrote {n}\"; \
                 fails with the OS message unless the grant is mode=\"rw\".",
                json!({"path": string("Guest path"), "text": string("New contents")}),
                &["path", "text"],
            ),
            tool(
                "listings",
                "Returns how many times list-tools ran in this instance before this call: \
                 0 in a fresh instance, 1 where the host warmed it.",
                none(),
                &[],
            )
            .pure(),
            tool(
                "count",
                "Adds one to a counter in the instance's memory and returns it: \"1\" in a \
                 fresh instance, more where the instance is kept between calls.",
                none(),
                &[],
            ),
            tool(
                "crash",
                "Adds one to the counter of `count`, then panics (a trap).",
                none(),
                &[],
            ),
            tool(
                "fail",
                "Always fails: call-error::failed(\"fail: requested failure\").",
                none(),
                &[],
            ),
            tool(
                "bad_args",
                "Always answers call-error::invalid-arguments(\"bad_args: rejected\").",
                none(),
                &[],
            ),
            tool(
                "is_error",
                "Runs and returns a result with is-error = true and text \
                 \"is_error: reported error\".",
                none(),
                &[],
            ),
            tool(
                "stdout",
                "Writes `text` to stdout (println!) and to stderr (eprintln!), then \
                 returns \"printed\". The host must route both to its log.",
                json!({"text": string("Text to print")}),
                &["text"],
            ),
            tool(
                "http",
                "HTTP GET of `url` (at most 100000 body bytes), like fetch.get; fails \
                 with the host's error when the host is not in allow_hosts.",
                json!({"url": string("http or https URL")}),
                &["url"],
            )
            .output_schema(http::page_schema()),
            tool(
                "http_request",
                "HTTP request of any `method` to `url` with `headers` and `body` (the SDK's \
                 http::request), at most 100000 body bytes back.",
                json!({
                    "method": string("GET, POST, ..."),
                    "url": string("http or https URL"),
                    "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                    "body": string("The body to send"),
                }),
                &["method", "url"],
            )
            .output_schema(http::page_schema()),
        ]
    }

    fn call_tool(name: String, arguments: String) -> CallResult {
        let a = arguments.as_str();
        match name.as_str() {
            "echo" => Ok(text(args::<Text>(a)?.text)),
            "kinds" => kinds::all(),
            "progress" => progress(args(a)?),
            "sleep" => {
                let Millis { ms } = args(a)?;
                std::thread::sleep(Duration::from_millis(ms));
                Ok(text(format!("slept {ms}")))
            }
            "log" => {
                let Message { message } = args(a)?;
                for level in [Level::Debug, Level::Info, Level::Warning, Level::Error] {
                    host::log(level, &message);
                }
                Ok(text("logged"))
            }
            "config" => Ok(text(
                host::config(&args::<Key>(a)?.key).unwrap_or_else(unset),
            )),
            "env" => Ok(text(
                std::env::var(args::<Name>(a)?.name).unwrap_or_else(|_| unset()),
            )),
            "read" => {
                let PathArg { path } = args(a)?;
                std::fs::read_to_string(&path)
                    .map(text)
                    .map_err(|e| failed(format!("read {path}: {e}")))
            }
            "write" => {
                let Write { path, text: t } = args(a)?;
                std::fs::write(&path, &t).map_err(|e| failed(format!("write {path}: {e}")))?;
                Ok(text(format!("wrote {}", t.len())))
            }
            "listings" => Ok(text(LISTINGS.load(Ordering::Relaxed).to_string())),
            "count" => Ok(text(
                (COUNT.fetch_add(1, Ordering::Relaxed) + 1).to_string(),
            )),
            "crash" => {
                COUNT.fetch_add(1, Ordering::Relaxed);
                panic!("crash: requested trap")
            }
            "fail" => Err(failed("fail: requested failure")),
            "bad_args" => Err(CallError::InvalidArguments("bad_args: rejected".into())),
            "is_error" => Ok(ToolOutput {
                is_error: true,
                ..text("is_error: reported error")
            }),
            "stdout" => {
                let Text { text: t } = args(a)?;
                println!("{t}");
                eprintln!("{t}");
                Ok(text("printed"))
            }
            "http" => structured(&http::get(&args::<Url>(a)?.url, 100_000)?),
            "http_request" => {
                let HttpRequest {
                    method,
                    url,
                    headers,
                    body,
                } = args(a)?;
                let mut request = http::request(&method, &url).max_bytes(100_000);
                for (name, value) in headers {
                    request = request.header(&name, value);
                }
                if let Some(body) = body {
                    request = request.body(body);
                }
                structured(&request.send()?)
            }
            _ => Err(unknown_tool(&name)),
        }
    }
}

fn progress(Steps { steps, delay_ms }: Steps) -> CallResult {
    let total = f64::from(steps);
    for step in 1..=steps {
        host::progress(
            f64::from(step),
            Some(total),
            Some(&format!("step {step} of {steps}")),
        );
        std::thread::sleep(Duration::from_millis(delay_ms));
    }
    Ok(text(format!("done {steps}")))
}

fn unset() -> String {
    "unset".into()
}

plugin_kit::export!(Echo);
