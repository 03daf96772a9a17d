//! The `Mcp-Param-*` headers a stateless-era remote server expects on a `tools/call`
//! (`protocol::param_headers`): learnt from the server's own `tools/list` pages, written
//! from the call's arguments, so that a server checking them finds its own tool's mirrors.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::Value;
use serde_json::value::RawValue;

use crate::backend::modern;
use crate::protocol::param_headers::{mirrored, text_of};

/// By the server's tool name, its mirrored arguments: (property, header name).
#[derive(Default)]
pub struct ParamMirrors(Mutex<HashMap<String, Vec<(String, String)>>>);

impl ParamMirrors {
    /// Learns the mirrors of a `tools/list` page; a first page (no cursor asked) starts
    /// the list afresh.
    pub fn learn(&self, params: Option<&Value>, result: &RawValue) {
        let mut known = self.0.lock().unwrap();
        if params.and_then(|p| p.get("cursor")).is_none() {
            known.clear();
        }
        if !result.get().contains("x-mcp-header") {
            return;
        }
        let Ok(page) = serde_json::from_str::<Value>(result.get()) else {
            return;
        };
        for tool in page["tools"].as_array().into_iter().flatten() {
            let (Some(name), Some(schema)) = (tool["name"].as_str(), tool.get("inputSchema"))
            else {
                continue;
            };
            let found: Vec<(String, String)> = (mirrored(schema).into_iter())
                .map(|(property, header)| (property.to_string(), header.to_string()))
                .collect();
            if !found.is_empty() {
                known.insert(name.to_string(), found);
            }
        }
    }

    /// Adds to `headers` the mirrors of a `tools/call` with `params`.
    pub fn write(&self, headers: &mut http::HeaderMap, params: Option<&Value>) {
        let Some(params) = params else { return };
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return;
        };
        let known = self.0.lock().unwrap();
        let Some(mirrors) = known.get(name) else {
            return;
        };
        for (property, header) in mirrors {
            let Some(text) = params["arguments"].get(property).and_then(text_of) else {
                continue;
            };
            let name = http::HeaderName::try_from(format!("mcp-param-{header}"));
            let value = http::HeaderValue::from_str(&modern::encode_header(&text));
            if let (Ok(name), Ok(value)) = (name, value) {
                headers.insert(name, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_listed_mirror_is_written_on_its_call() {
        let mirrors = ParamMirrors::default();
        let page = json!({"tools": [{"name": "where", "inputSchema": {"type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}}]});
        let page = RawValue::from_string(page.to_string()).unwrap();
        mirrors.learn(None, &page);
        let mut headers = http::HeaderMap::new();
        let call = json!({"name": "where", "arguments": {"region": "été"}});
        mirrors.write(&mut headers, Some(&call));
        assert_eq!(headers["mcp-param-region"], "=?base64?w6l0w6k=?=");
        let other = json!({"name": "other", "arguments": {"region": "x"}});
        let mut none = http::HeaderMap::new();
        mirrors.write(&mut none, Some(&other));
        assert!(none.is_empty());
    }
}
