//! The port's two connections to the cluster, each replaced on its own when it breaks.
//!
//! - The **publish** connection carries producers, admin requests, checkpoint commits and
//!   bounded reads (end offsets, one record, checkpoint loads).
//! - The **stream** connection carries the long-lived streaming consumers of
//!   subscriptions (and the consumer-offset mirror).
//!
//! They are separate because a streaming consumer on the connection a producer uses slows
//! that producer's acks down by 30x or more (measured with the raw client: 1.7k acked
//! records/s against 104k/s with the consumer on a second connection), and because each
//! must recover from an SPU restart whether or not the other is in use: a process that only
//! consumes has no failed send to notice a broken connection by.
//!
//! Both connect through the port's connector ([`crate::FluvioConfig::connector`]:
//! [`crate::prompt_connector`], or its TLS form): with the client's default sockets a
//! publish-to-subscriber round trip took about 44 ms (see [`crate::socket`]). A reconnect
//! reuses the connector, so TLS files are read once, when the port is built.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use fluvio::{Fluvio, FluvioClusterConfig};
use fluvio_future::net::DomainConnector;
use photon_core::{PhotonError, Result};

use crate::error::unavailable;

/// How long connecting to the SC may take.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

/// What a connection is used for (named in logs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// Producers, admin, checkpoints and bounded reads.
    Publish,
    /// Streaming consumers.
    Stream,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Self::Publish => "publish",
            Self::Stream => "stream",
        }
    }
}

/// One replaceable client.
pub(crate) struct Connection {
    role: Role,
    endpoint: String,
    connector: DomainConnector,
    client: RwLock<Arc<Fluvio>>,
    replacing: tokio::sync::Mutex<()>,
}

impl Connection {
    /// Connects within [`CONNECT_TIMEOUT`].
    ///
    /// # Errors
    /// [`PhotonError::Unavailable`] when the SC cannot be reached or the TLS handshake
    /// fails (the message names the cause).
    pub(crate) async fn open(
        role: Role,
        endpoint: &str,
        connector: DomainConnector,
    ) -> Result<Self> {
        let client = open_client(endpoint, &connector).await?;
        Ok(Self {
            role,
            endpoint: endpoint.to_owned(),
            connector,
            client: RwLock::new(Arc::new(client)),
            replacing: tokio::sync::Mutex::new(()),
        })
    }

    /// The current client.
    pub(crate) fn current(&self) -> Arc<Fluvio> {
        // Only a clone of the Arc happens under this lock.
        self.client
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Replaces `failed` with a new client, once however many callers saw it fail: after an
    /// SPU restart a client's SPU sockets do not always recover by themselves.
    ///
    /// # Errors
    /// [`PhotonError::Unavailable`] when no new connection could be made (the old one stays).
    pub(crate) async fn replace(&self, failed: &Arc<Fluvio>) -> Result<bool> {
        let _one_at_a_time = self.replacing.lock().await;
        if !Arc::ptr_eq(&self.current(), failed) {
            return Ok(false);
        }
        match open_client(&self.endpoint, &self.connector).await {
            Ok(fresh) => {
                *self.client.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(fresh);
                tracing::info!(
                    port = "fluvio",
                    connection = self.role.name(),
                    "reconnected"
                );
                Ok(true)
            }
            Err(err) => {
                tracing::warn!(
                    port = "fluvio",
                    connection = self.role.name(),
                    %err,
                    "reconnect failed; will retry"
                );
                Err(err)
            }
        }
    }
}

/// Connects to the SC within [`CONNECT_TIMEOUT`].
async fn open_client(endpoint: &str, connector: &DomainConnector) -> Result<Fluvio> {
    let cluster = FluvioClusterConfig::new(endpoint.to_owned());
    let connecting = Fluvio::connect_with_connector(connector.clone(), &cluster);
    match tokio::time::timeout(CONNECT_TIMEOUT, connecting).await {
        Ok(Ok(fluvio)) => Ok(fluvio),
        Ok(Err(err)) => Err(connect_failed(endpoint, err)),
        Err(_) => Err(PhotonError::Unavailable {
            backend: crate::error::LABEL,
            message: format!("no answer from {endpoint} within {CONNECT_TIMEOUT:?}"),
            source: None,
        }),
    }
}

/// The error of a failed connect: a TLS failure by itself (the client's wrapping adds
/// nothing and can hide the cause), anything else with the client's description.
fn connect_failed(endpoint: &str, err: anyhow::Error) -> PhotonError {
    #[cfg(feature = "tls")]
    if let Some((cause, source)) = crate::socket::tls_failure(&err) {
        return PhotonError::Unavailable {
            backend: crate::error::LABEL,
            message: format!("cannot connect to {endpoint}: {cause}"),
            source,
        };
    }
    unavailable(format!("cannot connect to {endpoint}"), err)
}
