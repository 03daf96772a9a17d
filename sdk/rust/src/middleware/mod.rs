//! Middleware: components of the `wasmgate:middleware` world, which see, change or refuse
//! what passes through the gateway (requests, their results, and the lists clients read).
//!
//! A middleware crate implements [`Middleware`] on a type and exports it with
//! [`export_middleware!`](crate::export_middleware); every hook has a default that lets
//! everything through, so a middleware writes only the ones it needs. One crate exports
//! one world: a crate is either a plugin ([`export!`](crate::export)) or a middleware.
//!
//! ```
//! use wasmgate_plugin::middleware::{Interest, Middleware, Request, RequestAction};
//!
//! struct NoDrops;
//!
//! impl Middleware for NoDrops {
//!     fn interest() -> Interest {
//!         Interest::new().requests(["tools/call"])
//!     }
//!
//!     fn on_request(req: Request) -> RequestAction {
//!         let query = req.argument("query").and_then(|q| q.as_str()).unwrap_or("");
//!         if query.to_lowercase().contains("drop table") {
//!             return RequestAction::deny("no DROP TABLE here");
//!         }
//!         RequestAction::Pass
//!     }
//! }
//!
//! wasmgate_plugin::export_middleware!(NoDrops);
//! # use wasmgate_plugin::middleware::Context;
//! # let req = Request::new(Context::new("tools/call", Some("db_query")),
//! #     serde_json::json!({"name": "db_query", "arguments": {"query": "DROP TABLE x"}}));
//! # assert!(matches!(NoDrops::on_request(req), RequestAction::Deny(_)));
//! ```
//!
//! # Layout
//!
//! - [`Interest`] (`interest.rs`): which requests, results and lists it hooks.
//! - [`Request`], [`RequestAction`], [`Context`], [`Denial`] (`request.rs`).
//! - [`Response`], [`Outcome`], [`ResultAction`] (`response.rs`).
//! - [`ListView`], [`Entry`], [`Edit`] (`list.rs`).
//! - [`wit`]: the raw bindings; [`on_request`] and the other `on_*` functions are what the
//!   export calls, for tests that go through the same JSON text as the gateway.
//! - [`config`], [`log`] (`host.rs`): the `host` of 0.1, which the middleware world
//!   imports (not the plugin side's [`crate::config`], which is 0.2's); served by
//!   [`crate::testing`] under `cargo test`.

mod host;
mod interest;
mod list;
mod request;
mod response;
pub mod wit;

pub use host::{Level, config, config_or, log};
pub use list::{Edit, Entry, ListView};
pub use request::{Request, RequestAction};
pub use response::{Outcome, Response, ResultAction};
pub use wit::{Context, Denial, Direction, Interest, ListContext};

/// A middleware's hooks. Each runs on its own for one request, result or list; what it
/// keeps between calls (instance modes `session` and `shared`) goes in a `static`.
pub trait Middleware {
    /// What it hooks; asked once per loaded version, so it must have no effect.
    fn interest() -> Interest;

    /// A request on its way to a server or plugin (or, `to-client`, to the client).
    fn on_request(req: Request) -> RequestAction {
        let _ = req;
        RequestAction::Pass
    }

    /// How a request it hooked ended.
    fn on_result(res: Response) -> ResultAction {
        let _ = res;
        ResultAction::Pass
    }

    /// A list as the gateway would serve it: the edits to make to it.
    fn on_list(list: ListView) -> Vec<Edit> {
        let _ = list;
        Vec::new()
    }
}

/// `describe`, as the export answers it.
pub fn describe<M: Middleware>() -> Interest {
    M::interest()
}

/// `on-request` on the gateway's JSON text, as the export runs it.
pub fn on_request<M: Middleware>(ctx: Context, params: String) -> wit::RequestAction {
    M::on_request(Request::from_wit(ctx, params)).into_wit()
}

/// `on-result` on the gateway's JSON text, as the export runs it.
pub fn on_result<M: Middleware>(
    ctx: Context,
    params: String,
    outcome: wit::Outcome,
    elapsed_us: u64,
) -> wit::ResultAction {
    M::on_result(Response::from_wit(ctx, params, outcome, elapsed_us)).into_wit()
}

/// `on-list`, as the export runs it.
pub fn on_list<M: Middleware>(ctx: ListContext, entries: Vec<wit::Entry>) -> Vec<wit::Edit> {
    M::on_list(ListView::from_wit(ctx, entries))
        .into_iter()
        .map(Edit::into_wit)
        .collect()
}

/// Makes a type's [`Middleware`] hooks the component's `hooks` export:
/// `wasmgate_plugin::export_middleware!(Redact);` after `impl Middleware for Redact`.
#[macro_export]
macro_rules! export_middleware {
    ($middleware:ty) => {
        const _: () = {
            struct WasmgateMiddlewareExport;

            impl $crate::middleware::wit::Guest for WasmgateMiddlewareExport {
                fn describe() -> $crate::middleware::Interest {
                    $crate::middleware::describe::<$middleware>()
                }

                fn on_request(
                    ctx: $crate::middleware::Context,
                    params: ::std::string::String,
                ) -> $crate::middleware::wit::RequestAction {
                    $crate::middleware::on_request::<$middleware>(ctx, params)
                }

                fn on_result(
                    ctx: $crate::middleware::Context,
                    params: ::std::string::String,
                    outcome: $crate::middleware::wit::Outcome,
                    elapsed_us: u64,
                ) -> $crate::middleware::wit::ResultAction {
                    $crate::middleware::on_result::<$middleware>(ctx, params, outcome, elapsed_us)
                }

                fn on_list(
                    ctx: $crate::middleware::ListContext,
                    entries: ::std::vec::Vec<$crate::middleware::wit::Entry>,
                ) -> ::std::vec::Vec<$crate::middleware::wit::Edit> {
                    $crate::middleware::on_list::<$middleware>(ctx, entries)
                }
            }

            $crate::middleware::wit::export_raw!(
                WasmgateMiddlewareExport with_types_in $crate::middleware::wit
            );
        };
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;
    use serde_json::json;

    /// Tags results with a config value, hides `secret_*`, and passes requests by default.
    struct Tagger;

    impl Middleware for Tagger {
        fn interest() -> Interest {
            Interest::new()
                .results(["tools/call"])
                .lists(["tools/list"])
        }

        fn on_result(res: Response) -> ResultAction {
            let mut result = res.result().cloned().unwrap_or(json!({}));
            result["tag"] = json!(config_or("tag", "none"));
            ResultAction::replace(result)
        }

        fn on_list(list: ListView) -> Vec<Edit> {
            let secret = |e: &&Entry| e.name.starts_with("secret_");
            list.entries()
                .iter()
                .filter(secret)
                .map(|e| Edit::hide(&e.name))
                .collect()
        }
    }

    // Expands here as in a middleware crate.
    crate::export_middleware!(Tagger);

    #[test]
    fn the_export_runs_the_hooks_on_the_gateways_json_text() {
        let interest = describe::<Tagger>();
        assert_eq!(
            (interest.results, interest.requests),
            (vec!["tools/call".to_string()], vec![])
        );
        let ctx = || Context::new("tools/call", Some("a_b"));
        assert_eq!(
            on_request::<Tagger>(ctx(), "{}".into()),
            wit::RequestAction::Pass
        );
        testing::set_config("tag", "t1");
        let action = on_result::<Tagger>(
            ctx(),
            "{}".into(),
            wit::Outcome::Success(r#"{"content":[]}"#.into()),
            9,
        );
        assert_eq!(
            action,
            wit::ResultAction::Replace(r#"{"content":[],"tag":"t1"}"#.into())
        );
        let entry = |name: &str| wit::Entry {
            name: name.into(),
            route: None,
            definition: format!(r#"{{"name":"{name}"}}"#),
        };
        let ctx = ListContext {
            method: "tools/list".into(),
            profile: None,
        };
        let edits = on_list::<Tagger>(ctx, vec![entry("open"), entry("secret_key")]);
        assert_eq!(edits.len(), 1);
        assert!(edits[0].hide && edits[0].name == "secret_key");
    }
}
