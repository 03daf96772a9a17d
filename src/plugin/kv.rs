//! Placeholder of the plugins' key-value store (the `state` slice replaces this file).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

#[derive(Clone, Default)]
pub struct KvHandle(Arc<Mutex<BTreeMap<String, Vec<u8>>>>);

#[derive(Debug, thiserror::Error)]
pub enum KvError {
    #[error("the store is full ({used} of {limit} bytes)")]
    Full { used: u64, limit: u64 },
    #[error("invalid key: {0}")]
    InvalidKey(String),
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
}

impl KvHandle {
    pub fn get(&self, key: &str) -> Option<Vec<u8>> {
        self.0.lock().unwrap().get(key).cloned()
    }
    pub fn set(&self, key: &str, value: Vec<u8>) -> Result<(), KvError> {
        self.0.lock().unwrap().insert(key.into(), value);
        Ok(())
    }
    pub fn delete(&self, key: &str) -> Result<(), KvError> {
        self.0.lock().unwrap().remove(key);
        Ok(())
    }
    pub fn keys(&self, prefix: &str) -> Vec<String> {
        let map = self.0.lock().unwrap();
        map.keys()
            .filter(|k| k.starts_with(prefix))
            .cloned()
            .collect()
    }
}

#[derive(Default)]
pub struct KvStores(Mutex<BTreeMap<(String, String), KvHandle>>);

impl KvStores {
    pub fn new(_dir: Option<std::path::PathBuf>, _limit: u64) -> KvStores {
        KvStores::default()
    }
    pub fn open(&self, plugin: &str, scope: &str) -> KvHandle {
        let mut map = self.0.lock().unwrap();
        map.entry((plugin.into(), scope.into()))
            .or_default()
            .clone()
    }
}

pub fn scope_for(shared: bool, token: Option<&str>) -> String {
    match (shared, token) {
        (true, _) => "shared".into(),
        (false, None) => "local".into(),
        (false, Some(t)) => t.to_string(),
    }
}
