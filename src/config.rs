//! Gateway configuration: the validated model (`model`), the file schemas (`raw`),
//! and loading with errors that name the file, the line and the fix.

mod model;
pub use model::*;
