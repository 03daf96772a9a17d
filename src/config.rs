//! Gateway configuration: the validated model (`model`), the file schemas (`raw`),
//! loading with errors that name the file, the line and the fix, and what only
//! `wasmgate check` verifies (`commands`).

mod commands;
mod error;
mod exposure;
mod limits;
mod load;
mod model;
mod plugin_files;
mod raw;
mod redact;
mod summary;
mod tls;
mod validate;

pub use crate::names::namespace_for;
pub use commands::check_commands;
pub use error::{ConfigError, Diagnostic};
pub use limits::{BreakerConfig, LimitsConfig, RatePer, RateRule, parse_rate};
pub use load::{embedded_default, from_json_str, from_toml_str, load, load_with_env, process_env};
pub use model::*;
pub use plugin_files::load_with_plugin_files;
pub use redact::redact_url;
pub use tls::{TlsFileError, TlsPair, load_tls};
pub use validate::{ENV_TOKEN, EnvTokenError, MIN_TOKEN, check_listen, env_token};
pub use validate::{EnvLookup, default_data_dir};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_middleware;
#[cfg(test)]
mod tests_security;
#[cfg(test)]
mod tests_state;
