//! `mwtest`: the middleware test fixture, on raw `wit_bindgen` bindings of the
//! `wasmgate:middleware` world. What each hook does is chosen by `host.config`:
//!
//! - `interest.requests`, `interest.results`, `interest.lists`, `interest.names`: comma
//!   lists, `describe`'s answer (absent: empty);
//! - `request` = `pass` | `deny` | `replace` | `answer` | `trap` | `loop` | `memory`;
//! - `result` = `pass` | `replace` | `deny` | `trap`;
//! - `list` = `none` | `hide:NAME` | `rename:OLD=NEW` | `describe:NAME=TEXT`;
//! - `deny_message`, `deny_code`: the denial's (default "denied by mwtest", none);
//! - `replace_with`: the text `replace` and `answer` return as it is (default: the params
//!   with `"replaced": N` added, or a one-text result).
//!
//! Every hook counts its calls in the instance and logs `mwtest HOOK call N` at info (not
//! with `quiet` set): a test sees whether a shared instance kept its state.

wit_bindgen::generate!({
    path: ["../../../wit", "../../../wit/middleware"],
    world: "wasmgate:middleware/middleware",
    generate_all,
});

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use exports::wasmgate::middleware::hooks::Guest;
use wasmgate::middleware::types::{
    Context, Denial, Edit, Entry, Interest, ListContext, Outcome, RequestAction, ResultAction,
};
use wasmgate::plugin::host::{self, Level};

struct MwTest;

/// Hook calls in this instance.
static CALLS: AtomicU64 = AtomicU64::new(0);

fn config(key: &str) -> Option<String> {
    host::config(key)
}

fn list(key: &str) -> Vec<String> {
    config(key)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Counts the call and logs it (unless `quiet` is set: the measurements); the count.
fn count(hook: &str) -> u64 {
    let n = CALLS.fetch_add(1, Ordering::Relaxed) + 1;
    if config("quiet").is_none() {
        host::log(Level::Info, &format!("mwtest {hook} call {n}"));
    }
    n
}

fn denial() -> Denial {
    Denial {
        message: config("deny_message").unwrap_or_else(|| "denied by mwtest".into()),
        code: config("deny_code").and_then(|c| c.parse().ok()),
        data: Some(r#"{"middleware":"mwtest"}"#.into()),
    }
}

fn text_result(text: &str) -> String {
    serde_json::json!({"content": [{"type": "text", "text": text}]}).to_string()
}

fn spin() -> ! {
    let mut n = 0u64;
    loop {
        n = black_box(n.wrapping_add(1));
    }
}

fn hog() -> ! {
    let mut blocks = Vec::new();
    loop {
        let mut block = vec![0u8; 1 << 20];
        block[black_box(0)] = 1;
        blocks.push(block);
        black_box(&blocks);
    }
}

impl Guest for MwTest {
    fn describe() -> Interest {
        Interest {
            requests: list("interest.requests"),
            results: list("interest.results"),
            lists: list("interest.lists"),
            names: list("interest.names"),
        }
    }

    fn on_request(ctx: Context, params: String) -> RequestAction {
        let n = count("on-request");
        match config("request").as_deref().unwrap_or("pass") {
            "deny" => RequestAction::Deny(denial()),
            "replace" => RequestAction::Replace(config("replace_with").unwrap_or_else(|| {
                let mut value: serde_json::Value =
                    serde_json::from_str(&params).unwrap_or_else(|_| serde_json::json!({}));
                value["replaced"] = n.into();
                value["target"] = ctx.target.clone().into();
                value.to_string()
            })),
            "answer" => {
                RequestAction::Answer(config("replace_with").unwrap_or_else(|| {
                    text_result(&format!("answered by mwtest for {}", ctx.method))
                }))
            }
            "trap" => panic!("mwtest: on-request trapped on purpose"),
            "loop" => spin(),
            "memory" => hog(),
            _ => RequestAction::Pass,
        }
    }

    fn on_result(
        _ctx: Context,
        _params: String,
        outcome: Outcome,
        elapsed_us: u64,
    ) -> ResultAction {
        count("on-result");
        match config("result").as_deref().unwrap_or("pass") {
            "replace" => ResultAction::Replace(config("replace_with").unwrap_or_else(|| {
                let was = match outcome {
                    Outcome::Success(_) => "success",
                    Outcome::Failure(_) => "failure",
                };
                text_result(&format!("replaced by mwtest: {was} after {elapsed_us} us"))
            })),
            "deny" => ResultAction::Deny(denial()),
            "trap" => panic!("mwtest: on-result trapped on purpose"),
            _ => ResultAction::Pass,
        }
    }

    fn on_list(_ctx: ListContext, entries: Vec<Entry>) -> Vec<Edit> {
        count("on-list");
        let rule = config("list").unwrap_or_else(|| "none".into());
        let edit = |name: &str| Edit {
            name: name.to_owned(),
            hide: false,
            rename: None,
            title: None,
            description: None,
            annotations: None,
        };
        let present = |name: &str| entries.iter().any(|e| e.name == name);
        if let Some(name) = rule.strip_prefix("hide:") {
            return present(name)
                .then(|| Edit {
                    hide: true,
                    ..edit(name)
                })
                .into_iter()
                .collect();
        }
        if let Some((old, new)) = rule.strip_prefix("rename:").and_then(|r| r.split_once('=')) {
            return present(old)
                .then(|| Edit {
                    rename: Some(new.to_owned()),
                    ..edit(old)
                })
                .into_iter()
                .collect();
        }
        if let Some((name, text)) = rule
            .strip_prefix("describe:")
            .and_then(|r| r.split_once('='))
        {
            return present(name)
                .then(|| Edit {
                    description: Some(text.to_owned()),
                    ..edit(name)
                })
                .into_iter()
                .collect();
        }
        Vec::new()
    }
}

export!(MwTest);
