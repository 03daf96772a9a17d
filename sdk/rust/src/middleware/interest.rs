//! [`Interest`]: what a middleware hooks, built up from nothing.

use super::wit::Interest;

fn strings<I: IntoIterator<Item = S>, S: Into<String>>(items: I) -> Vec<String> {
    items.into_iter().map(Into::into).collect()
}

impl Interest {
    /// Hooks nothing: add `requests`, `results`, `lists` (MCP method names, or `*`).
    pub fn new() -> Self {
        Self {
            requests: Vec::new(),
            results: Vec::new(),
            lists: Vec::new(),
            names: Vec::new(),
        }
    }

    /// Methods whose requests `on_request` sees, such as `tools/call`.
    pub fn requests<I: IntoIterator<Item = S>, S: Into<String>>(mut self, methods: I) -> Self {
        self.requests.extend(strings(methods));
        self
    }

    /// Methods whose results `on_result` sees.
    pub fn results<I: IntoIterator<Item = S>, S: Into<String>>(mut self, methods: I) -> Self {
        self.results.extend(strings(methods));
        self
    }

    /// Lists `on_list` sees: `tools/list`, `prompts/list`, `resources/list`.
    pub fn lists<I: IntoIterator<Item = S>, S: Into<String>>(mut self, methods: I) -> Self {
        self.lists.extend(strings(methods));
        self
    }

    /// Globs (`*`, `?`) over the target (tool or prompt name, resource URI): requests
    /// whose target matches none are not hooked. None given: every target.
    pub fn names<I: IntoIterator<Item = S>, S: Into<String>>(mut self, globs: I) -> Self {
        self.names.extend(strings(globs));
        self
    }
}

impl Default for Interest {
    fn default() -> Self {
        Self::new()
    }
}
