//! OpenTelemetry traces of client requests, exported over OTLP/HTTP (protobuf) when
//! `[telemetry] otlp_endpoint` is set. Off, every entry point returns at one atomic load,
//! before any name or attribute is built.
//!
//! The context travels with the request's future (`FutureExt::with_context`), and by hand
//! where work changes threads (the plugin workers) or processes (`_meta.traceparent`).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::time::Duration;

use futures_util::future::Either;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{
    FutureExt, Link, SpanKind, Status, TraceContextExt, Tracer, TracerProvider, WithContext,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracer, SdkTracerProvider};
use serde_json::Value;

use crate::peer::ClientPeer;
use crate::protocol::methods;
use crate::protocol::{Reply, RpcError};

struct Tracing {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
}

static TRACING: OnceLock<Tracing> = OnceLock::new();

/// How long an export may take before the batch is dropped.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Starts the exporter when `[telemetry]` (`crate::config::TelemetryConfig`) names an
/// endpoint; `Ok(false)` when tracing stays off. Called once, on the runtime the exports
/// are sent from.
pub fn start(
    endpoint: Option<&str>,
    sample_ratio: f64,
    service_name: &str,
) -> Result<bool, String> {
    let Some(endpoint) = endpoint else {
        return Ok(false);
    };
    if TRACING.get().is_some() {
        return Ok(true);
    }
    let runtime = tokio::runtime::Handle::try_current()
        .map_err(|_| "tracing needs the gateway's runtime".to_string())?;
    let client = reqwest::Client::builder()
        .timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|e| format!("the OTLP client: {e}"))?;
    let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(url)
        .with_timeout(EXPORT_TIMEOUT)
        .with_http_client(OtlpClient { client, runtime })
        .build()
        .map_err(|e| format!("the OTLP exporter: {e}"))?;
    let sampler = Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(sample_ratio)));
    let resource = Resource::builder()
        .with_service_name(service_name.to_string())
        .build();
    let provider = SdkTracerProvider::builder()
        .with_sampler(sampler)
        .with_resource(resource)
        .with_batch_exporter(exporter)
        .build();
    let tracer = provider.tracer("wasmgate");
    let _ = TRACING.set(Tracing { provider, tracer });
    Ok(true)
}

/// Exports what is left and stops the exporter (at shutdown).
pub fn stop() {
    if let Some(tracing) = TRACING.get()
        && let Err(e) = tracing.provider.shutdown()
    {
        tracing::warn!("the last traces were not exported: {e}");
    }
}

/// Whether requests are traced.
pub fn enabled() -> bool {
    TRACING.get().is_some()
}

/// The span of a client's request (kind server), named as OpenTelemetry's MCP conventions
/// name it ("tools/call get_time"), continuing `_meta.traceparent` if the request has one,
/// else the context it runs in (an HTTP `traceparent` header). `None` when tracing is off.
pub fn request(method: &str, params: Option<&Value>, peer: &ClientPeer) -> Option<Context> {
    let tracing = TRACING.get()?;
    let parent = params
        .and_then(|p| p.get("_meta")?.get("traceparent")?.as_str())
        .and_then(remote_parent)
        .unwrap_or_else(Context::current);
    let target = match method {
        methods::TOOLS_CALL | methods::PROMPTS_GET => params.and_then(|p| p.get("name")?.as_str()),
        methods::RESOURCES_READ => params.and_then(|p| p.get("uri")?.as_str()),
        _ => None,
    };
    let name = match target {
        Some(target) => format!("{method} {target}"),
        None => method.to_string(),
    };
    let mut attributes = vec![
        KeyValue::new("mcp.method.name", method.to_string()),
        KeyValue::new("mcp.protocol.version", peer.protocol_version()),
    ];
    if let Some(target) = target {
        let key = match method {
            methods::TOOLS_CALL => "gen_ai.tool.name",
            methods::PROMPTS_GET => "gen_ai.prompt.name",
            _ => "mcp.resource.uri",
        };
        attributes.push(KeyValue::new(key, target.to_string()));
        if method == methods::TOOLS_CALL {
            attributes.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
        }
    }
    // The principal, not the session id: an HTTP session id works as a credential.
    let principal = peer.principal();
    if let Some(token) = &principal.token {
        attributes.push(KeyValue::new("wasmgate.token", token.to_string()));
    }
    if let Some(profile) = &principal.profile {
        attributes.push(KeyValue::new("wasmgate.profile", profile.to_string()));
    }
    let span = tracing
        .tracer
        .span_builder(name)
        .with_kind(SpanKind::Server)
        .with_attributes(attributes)
        .start_with_context(&tracing.tracer, &parent);
    Some(parent.with_span(span))
}

/// How a request ended (`None`: cancelled), on its span: `outcome`, and for an error
/// `error.type` with `rpc.jsonrpc.error_code` (`tool_error` for a tool's error result).
pub fn end_request(context: &Context, answer: Option<&Result<Reply, RpcError>>) {
    let span = context.span();
    match answer {
        Some(Err(error)) => {
            span.set_attributes([
                KeyValue::new("outcome", "error"),
                KeyValue::new("error.type", error.code.to_string()),
                KeyValue::new("rpc.jsonrpc.error_code", error.code),
            ]);
            span.set_status(Status::error(error.message.clone()));
        }
        Some(Ok(reply)) if reply.is_error_result() => {
            span.set_attributes([
                KeyValue::new("outcome", "error"),
                KeyValue::new("error.type", "tool_error"),
            ]);
            span.set_status(Status::error("the tool reported an error"));
        }
        Some(Ok(_)) => span.set_attribute(KeyValue::new("outcome", "success")),
        None => span.set_attribute(KeyValue::new("outcome", "cancelled")),
    }
    span.end();
}

/// The context work runs in now, for work started elsewhere (a batch member's own task),
/// when requests are traced.
pub fn current() -> Option<Context> {
    TRACING.get()?;
    Some(Context::current())
}

/// The current trace's id, as the events write trace ids (32 hex digits), when a request
/// is traced: an event and its trace then share it.
pub fn current_trace_id() -> Option<String> {
    TRACING.get()?;
    let context = Context::current();
    let span = context.span();
    let span = span.span_context();
    span.is_valid().then(|| span.trace_id().to_string())
}

/// A child of the current span (the request's, or a child of it), when a request is
/// traced; `attributes` is called only then.
pub fn child(
    name: impl FnOnce() -> String,
    kind: SpanKind,
    attributes: impl FnOnce() -> Vec<KeyValue>,
) -> Option<Context> {
    let tracing = TRACING.get()?;
    let parent = Context::current();
    if !parent.has_active_span() {
        return None;
    }
    let span = tracing
        .tracer
        .span_builder(name())
        .with_kind(kind)
        .with_attributes(attributes())
        .start_with_context(&tracing.tracer, &parent);
    Some(parent.with_span(span))
}

/// The span of a middleware link's hook (`on-request`, `on-result`).
pub fn hook(link: &str, hook: &'static str) -> Option<Context> {
    child(
        || format!("middleware {link} {hook}"),
        SpanKind::Internal,
        || {
            vec![
                KeyValue::new("wasmgate.middleware", link.to_string()),
                KeyValue::new("wasmgate.hook", hook),
            ]
        },
    )
}

/// The span of a plugin's tool call.
pub fn plugin_call(plugin: &str, tool: &str) -> Option<Context> {
    child(
        || format!("plugin {plugin} {tool}"),
        SpanKind::Internal,
        || {
            vec![
                KeyValue::new("wasmgate.plugin", plugin.to_string()),
                KeyValue::new("gen_ai.tool.name", tool.to_string()),
            ]
        },
    )
}

/// A span of its own (a new trace) linked to the call whose `traceparent` is `cause`:
/// work on a plugin thread that a call started but that serves others too (making or
/// resetting an instance). `None` when the call was not traced.
pub fn linked(name: &'static str, plugin: &str, cause: Option<&str>) -> Option<Context> {
    let tracing = TRACING.get()?;
    let cause = remote_parent(cause?)?;
    let cause = cause.span().span_context().clone();
    let span = tracing
        .tracer
        .span_builder(name)
        .with_kind(SpanKind::Internal)
        .with_attributes([KeyValue::new("wasmgate.plugin", plugin.to_string())])
        .with_links(vec![Link::with_context(cause)])
        .start_with_context(&tracing.tracer, &Context::new());
    Some(Context::new().with_span(span))
}

/// Ends the span of `context`, an error when `error` is set.
pub fn end(context: Option<Context>, error: Option<&str>) {
    let Some(context) = context else { return };
    let span = context.span();
    if let Some(error) = error {
        span.set_status(Status::error(error.to_string()));
    }
    span.end();
}

/// Runs `future` inside `context` when there is one. Not an `async fn`: that would hold
/// `future` twice (its argument, and what it awaits), doubling the size of every request
/// future it wraps, traced or not.
pub fn within<F: Future>(context: Option<&Context>, future: F) -> Either<WithContext<F>, F> {
    match context {
        Some(context) => Either::Left(future.with_context(context.clone())),
        None => Either::Right(future),
    }
}

/// The context a W3C `traceparent` names, as the parent of what follows; `None` when it
/// is not a valid one.
pub fn remote_parent(traceparent: &str) -> Option<Context> {
    let carrier = HashMap::from([("traceparent".to_string(), traceparent.to_string())]);
    let context = TraceContextPropagator::new().extract(&carrier);
    context.span().span_context().is_valid().then_some(context)
}

/// The current span's `traceparent`, when a request is traced.
pub fn current_traceparent() -> Option<String> {
    TRACING.get()?;
    traceparent(&Context::current())
}

/// `context`'s span as a W3C `traceparent`.
pub fn traceparent(context: &Context) -> Option<String> {
    let span = context.span();
    let span = span.span_context();
    span.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            span.trace_id(),
            span.span_id(),
            span.trace_flags().to_u8()
        )
    })
}

/// The span of a request to a server (kind client: sent, and its answer waited for), as a
/// child of the current one; the request's `_meta.traceparent` is set to it, for the
/// server to continue the trace (SEP-414). Params that are not an object, or whose `_meta`
/// is not one, are sent as they are.
pub fn backend_call(method: &str, server: &str, params: &mut Value) -> Option<Context> {
    let context = child(
        || format!("{method} {server}"),
        SpanKind::Client,
        || {
            vec![
                KeyValue::new("mcp.method.name", method.to_string()),
                KeyValue::new("wasmgate.server", server.to_string()),
            ]
        },
    )?;
    if let Some(traceparent) = traceparent(&context)
        && let Some(params) = params.as_object_mut()
    {
        let meta = params
            .entry("_meta")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert("traceparent".into(), Value::String(traceparent));
        }
    }
    Some(context)
}

/// The `traceparent` header for a request to a remote server whose params carry one,
/// when requests are traced.
pub fn header_of(params: Option<&Value>) -> Option<http::HeaderValue> {
    TRACING.get()?;
    let traceparent = params?.get("_meta")?.get("traceparent")?.as_str()?;
    http::HeaderValue::from_str(traceparent).ok()
}

/// The exporter's HTTP client: the reqwest already in the tree, on the gateway's runtime
/// (the SDK's batch thread is outside it).
#[derive(Debug)]
struct OtlpClient {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

impl HttpClient for OtlpClient {
    fn send_bytes<'a, 'b>(
        &'a self,
        request: Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Result<Response<Bytes>, HttpError>> + Send + 'b>>
    where
        'a: 'b,
    {
        let client = self.client.clone();
        let sent = self.runtime.spawn(async move {
            let request = reqwest::Request::try_from(request)?;
            let response = client.execute(request).await?;
            let mut answer = Response::builder().status(response.status());
            if let Some(headers) = answer.headers_mut() {
                *headers = response.headers().clone();
            }
            let body = response.bytes().await?;
            Ok::<_, HttpError>(answer.body(body)?)
        });
        Box::pin(async move { sent.await? })
    }
}
