//! [`RequestError`]: why a resource read, a prompt or a completion did not run.

use std::fmt;

use crate::ToolError;
use crate::wit;

/// Why a resource read, a prompt or a completion did not succeed: the `Err` of their
/// functions. Any `std::error::Error` converts with `?` (a failure, its message kept).
pub struct RequestError {
    kind: Kind,
    message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    NotFound,
    InvalidParams,
    Failed,
}

impl RequestError {
    /// It failed: the client gets JSON-RPC error -32603 with `message`.
    pub fn new(message: impl fmt::Display) -> Self {
        Self::of(Kind::Failed, message)
    }

    /// No such resource or prompt (a template's variables that name nothing, say): the
    /// client gets -32002 for a resource, -32602 for the rest.
    pub fn not_found(message: impl fmt::Display) -> Self {
        Self::of(Kind::NotFound, message)
    }

    /// Arguments the plugin cannot take: JSON-RPC error -32602.
    pub fn invalid_params(message: impl fmt::Display) -> Self {
        Self::of(Kind::InvalidParams, message)
    }

    fn of(kind: Kind, message: impl fmt::Display) -> Self {
        Self {
            kind,
            message: message.to_string(),
        }
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

/// As for [`ToolError`]: not `std::error::Error`, so that `?` converts any error.
impl<E: std::error::Error> From<E> for RequestError {
    fn from(error: E) -> Self {
        Self::new(error)
    }
}

/// A tool's failure, in a resource or prompt function that shares code with a tool.
impl From<ToolError> for RequestError {
    fn from(error: ToolError) -> Self {
        if error.is_invalid_arguments() {
            Self::invalid_params(error.message())
        } else {
            Self::new(error.message())
        }
    }
}

impl From<RequestError> for wit::RequestError {
    fn from(error: RequestError) -> Self {
        match error.kind {
            Kind::NotFound => wit::RequestError::NotFound(error.message),
            Kind::InvalidParams => wit::RequestError::InvalidParams(error.message),
            Kind::Failed => wit::RequestError::Failed(error.message),
        }
    }
}

impl fmt::Debug for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}({:?})", self.kind, self.message)
    }
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}
