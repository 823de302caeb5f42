//! `--backend`: which storage port a command opens, configured from the environment.

use std::sync::Arc;

use clap::ValueEnum;
use photon::{Photon, PhotonError, StoragePort};

/// The storage ports this binary was built with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// In-process store (nothing survives the command).
    Mem,
    /// SQLite file from `PHOTON_SQLITE_PATH` (default `photon.db`).
    #[cfg(feature = "sqlite")]
    Sqlite,
    /// NATS JetStream at `PHOTON_NATS_URL` (default `nats://127.0.0.1:4222`).
    #[cfg(feature = "nats")]
    Nats,
    /// Fluvio at `PHOTON_FLUVIO_ENDPOINT`.
    #[cfg(feature = "fluvio")]
    Fluvio,
}

impl Backend {
    /// Opens the port with its environment configuration.
    ///
    /// # Errors
    /// A `Config` error naming a bad variable, or the port's connection error.
    pub async fn open(self) -> Result<Arc<dyn StoragePort>, PhotonError> {
        Ok(match self {
            Self::Mem => Arc::new(photon::mem::MemStoragePort::new()),
            #[cfg(feature = "sqlite")]
            Self::Sqlite => Arc::new(photon::sqlite::SqliteStoragePort::builder().build().await?),
            #[cfg(feature = "nats")]
            Self::Nats => Arc::new(photon::nats::NatsStoragePortBuilder::new().build().await?),
            #[cfg(feature = "fluvio")]
            Self::Fluvio => Arc::new(
                photon::fluvio::FluvioStoragePortBuilder::new()
                    .build()
                    .await?,
            ),
        })
    }

    /// A Photon instance over this backend (keys from `PHOTON_TRANSPORT_KEYS`).
    ///
    /// # Errors
    /// As [`Backend::open`], or a malformed key variable.
    pub async fn photon(self) -> Result<Photon, PhotonError> {
        Photon::builder()
            .shared_storage_port(self.open().await?)
            .build()
    }
}
