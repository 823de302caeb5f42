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

use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use fluvio::{Fluvio, FluvioClusterConfig};
use fluvio_future::net::tcp_stream::{stream_with_opts, KeepaliveOpts, SocketOpts};
use fluvio_future::net::{
    AsConnectionFd, BoxReadConnection, BoxWriteConnection, ConnectionFd, DomainConnector,
    TcpDomainConnector,
};
use photon_core::{PhotonError, Result};

use crate::topic::unavailable;

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
    client: RwLock<Arc<Fluvio>>,
    replacing: tokio::sync::Mutex<()>,
}

impl Connection {
    /// Connects within [`CONNECT_TIMEOUT`].
    ///
    /// # Errors
    /// [`PhotonError::Unavailable`] when the SC cannot be reached.
    pub(crate) async fn open(role: Role, endpoint: &str) -> Result<Self> {
        Ok(Self {
            role,
            endpoint: endpoint.to_owned(),
            client: RwLock::new(Arc::new(open_client(endpoint).await?)),
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
        match open_client(&self.endpoint).await {
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

/// Plain TCP with `TCP_NODELAY` (and the client's usual keepalive).
///
/// With Nagle's algorithm on, as the client's default connector leaves it, a consumer's
/// small offset update waits for the TCP ack of the previous one, which the SPU delays by
/// up to 40 ms (it sends no reply to it); and the SPU sends no new records to a consumer
/// until that update arrives. That made every publish-to-subscriber round trip about 44 ms.
#[derive(Clone, Default)]
struct NoDelayConnector;

#[async_trait]
impl TcpDomainConnector for NoDelayConnector {
    async fn connect(
        &self,
        addr: &str,
    ) -> std::io::Result<(BoxWriteConnection, BoxReadConnection, ConnectionFd)> {
        let options = SocketOpts {
            nodelay: Some(true),
            keepalive: Some(KeepaliveOpts::default()),
        };
        let stream = stream_with_opts(addr, Some(options)).await?;
        let fd = stream.as_connection_fd();
        Ok((Box::new(stream.clone()), Box::new(stream), fd))
    }

    fn new_domain(&self, _domain: String) -> DomainConnector {
        Box::new(self.clone())
    }

    fn domain(&self) -> &str {
        "localhost"
    }

    fn clone_box(&self) -> DomainConnector {
        Box::new(self.clone())
    }
}

/// Connects to the SC within [`CONNECT_TIMEOUT`], over [`NoDelayConnector`].
async fn open_client(endpoint: &str) -> Result<Fluvio> {
    let cluster = FluvioClusterConfig::new(endpoint.to_owned());
    let connecting = Fluvio::connect_with_connector(Box::new(NoDelayConnector), &cluster);
    match tokio::time::timeout(CONNECT_TIMEOUT, connecting).await {
        Ok(Ok(fluvio)) => Ok(fluvio),
        Ok(Err(err)) => Err(unavailable(format!("cannot connect to {endpoint}"), err)),
        Err(_) => Err(PhotonError::Unavailable {
            backend: "fluvio",
            message: format!("no answer from {endpoint} within {CONNECT_TIMEOUT:?}"),
            source: None,
        }),
    }
}
