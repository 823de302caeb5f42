//! The test factory: one fresh topic prefix per factory on the cluster named by
//! `PHOTON_FLUVIO_ENDPOINT` (start one with `scripts/fluvio-local.sh start`).

#![allow(dead_code)]

use std::sync::Arc;

use async_trait::async_trait;
use photon_backend_fluvio::{
    fluvio_endpoint_from_env, FluvioStoragePort, FluvioStoragePortBuilder,
};
use photon_core::{Result, StoragePort};
use photon_testkit::{skip_or_fail, PortFactory};

/// Opens ports that share one prefix (one topic namespace).
pub struct FluvioFactory {
    pub endpoint: String,
    pub prefix: String,
    pub shards: u32,
}

impl FluvioFactory {
    /// A factory with a fresh prefix, or `None` (after `skip_or_fail`) without an endpoint.
    pub async fn from_env(shards: u32) -> Option<Self> {
        let Some(endpoint) = fluvio_endpoint_from_env() else {
            skip_or_fail("fluvio", "PHOTON_FLUVIO_ENDPOINT not set");
            return None;
        };
        let unique = uuid::Uuid::new_v4().simple().to_string();
        Some(Self {
            endpoint,
            prefix: format!("t{}", &unique[..12]),
            shards,
        })
    }

    /// A builder for this factory's cluster and prefix.
    pub fn builder(&self) -> FluvioStoragePortBuilder {
        FluvioStoragePortBuilder::new()
            .endpoint(self.endpoint.clone())
            .prefix(self.prefix.clone())
            .topic_shards(self.shards)
    }

    /// A new port (a new connection).
    pub async fn port(&self) -> Result<FluvioStoragePort> {
        self.builder().build().await
    }
}

#[async_trait]
impl PortFactory for FluvioFactory {
    async fn open(&self) -> Result<Arc<dyn StoragePort>> {
        Ok(Arc::new(self.port().await?))
    }
}
