//! The in-process port's factory: every port it opens shares one in-process store.

use std::sync::Arc;

use async_trait::async_trait;
use photon_core::mem::MemStoragePort;
use photon_core::{Result, StoragePort};

use crate::context::{PortFactory, UndecodableRecord};

/// Opens ports onto one in-process store (a second `open` is a restart of the process's
/// port, not of the store).
#[derive(Debug, Clone)]
pub struct MemFactory {
    port: MemStoragePort,
}

impl MemFactory {
    /// A factory onto a new, empty store.
    pub fn new() -> Self {
        Self {
            port: MemStoragePort::new(),
        }
    }
}

impl Default for MemFactory {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl PortFactory for MemFactory {
    async fn open(&self) -> Result<Arc<dyn StoragePort>> {
        Ok(Arc::new(self.port.clone()))
    }

    async fn store_undecodable(&self, record: UndecodableRecord<'_>) -> Result<()> {
        self.port
            .append_undecodable(record.topic, record.key, record.stored);
        Ok(())
    }
}
