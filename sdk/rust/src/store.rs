//! The plugin's key-value store (the WIT `store` interface): kept by the gateway on
//! disk, per plugin and per principal, through reloads, traps and restarts; bounded in
//! size (`store_size`). Off wasm, an in-memory one per thread ([`crate::testing`]).

use serde::Serialize;
use serde::de::DeserializeOwned;

pub use crate::wit::StoreError;

/// The value of `key`, if it is set.
pub fn get(key: &str) -> Option<Vec<u8>> {
    imp::get(key)
}

/// Sets `key` to `value`.
pub fn set(key: &str, value: &[u8]) -> Result<(), StoreError> {
    imp::set(key, value)
}

/// Removes `key` (nothing if it is not set).
pub fn delete(key: &str) -> Result<(), StoreError> {
    imp::delete(key)
}

/// The keys that start with `prefix`, sorted.
pub fn keys(prefix: &str) -> Vec<String> {
    imp::keys(prefix)
}

/// The value of `key` read as JSON into `T`: `Ok(None)` if it is not set, an error if it
/// is not a `T`.
pub fn get_json<T: DeserializeOwned>(key: &str) -> Result<Option<T>, serde_json::Error> {
    get(key)
        .map(|bytes| serde_json::from_slice(&bytes))
        .transpose()
}

/// Sets `key` to `value` as JSON.
pub fn set_json<T: Serialize + ?Sized>(key: &str, value: &T) -> Result<(), StoreError> {
    let bytes = serde_json::to_vec(value)
        .map_err(|e| StoreError::Unavailable(format!("the value does not serialize: {e}")))?;
    set(key, &bytes)
}

#[cfg(target_arch = "wasm32")]
mod imp {
    pub use crate::wit::wasmgate::plugin::store::{delete, get, keys, set};
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    pub(super) use crate::testing::{store_delete as delete, store_get as get};
    pub(super) use crate::testing::{store_keys as keys, store_set as set};
}
