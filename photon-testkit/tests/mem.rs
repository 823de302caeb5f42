//! The conformance suite against the in-process port.

use std::sync::Arc;

use async_trait::async_trait;
use photon_core::mem::MemStoragePort;
use photon_core::{Appended, Result, StoragePort};
use photon_testkit::PortFactory;

/// Every port it opens shares one in-process store.
struct MemFactory {
    port: MemStoragePort,
}

#[async_trait]
impl PortFactory for MemFactory {
    async fn open(&self) -> Result<Arc<dyn StoragePort>> {
        Ok(Arc::new(self.port.clone()))
    }

    async fn store_undecodable(
        &self,
        _next_to: &Appended,
        topic: &str,
        key: Option<&str>,
        stored: &[u8],
    ) -> Result<()> {
        self.port.append_undecodable(topic, key, stored);
        Ok(())
    }
}

photon_testkit::conformance_tests!(async {
    Some(MemFactory {
        port: MemStoragePort::new(),
    })
});
