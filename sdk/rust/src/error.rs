//! [`ToolError`]: how a tool says it did not do its job, in words the model reads.

use std::fmt;

use crate::wit::CallError;

/// Why a tool call did not succeed. Return it as the `Err` of a tool function.
///
/// The client gets a result with `isError: true` and the message, which the model reads
/// and can act on (try another path, fix a value). Any `std::error::Error` converts with
/// `?`, keeping its message: `std::fs::read_to_string(path)?` in a tool fails with the OS
/// error's text. Prefer saying what was being done, with [`ToolError::new`]:
/// `.map_err(|e| ToolError::new(format!("read {path}: {e}")))`.
///
/// A panic is not the way to fail: it traps, and the client gets the gateway's message
/// about a trap instead of yours.
pub struct ToolError {
    kind: Kind,
    message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Failed,
    InvalidArguments,
}

impl ToolError {
    /// The tool ran and failed: WIT `call-error::failed`, the client sees `message`.
    pub fn new(message: impl fmt::Display) -> Self {
        Self {
            kind: Kind::Failed,
            message: message.to_string(),
        }
    }

    /// The arguments are wrong in a way the input schema could not say (two fields that
    /// exclude each other, a date in the past): WIT `call-error::invalid-arguments`,
    /// which the gateway words as "Invalid arguments for tool {name}: {message}".
    /// Arguments that break the schema never reach the tool, and arguments that do not
    /// fit the argument type are answered this way before the tool runs.
    pub fn invalid_arguments(message: impl fmt::Display) -> Self {
        Self {
            kind: Kind::InvalidArguments,
            message: message.to_string(),
        }
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn is_invalid_arguments(&self) -> bool {
        self.kind == Kind::InvalidArguments
    }
}

/// Not `impl std::error::Error for ToolError`: that would collide with this conversion,
/// which is what lets `?` turn any error into a tool failure.
impl<E: std::error::Error> From<E> for ToolError {
    fn from(error: E) -> Self {
        Self::new(error)
    }
}

impl From<ToolError> for CallError {
    fn from(error: ToolError) -> Self {
        match error.kind {
            Kind::Failed => CallError::Failed(error.message),
            Kind::InvalidArguments => CallError::InvalidArguments(error.message),
        }
    }
}

impl fmt::Debug for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}({:?})", self.kind, self.message)
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}
