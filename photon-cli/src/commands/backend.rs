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
    /// PostgreSQL at `PHOTON_POSTGRES_URL`, in schema `PHOTON_POSTGRES_SCHEMA`.
    #[cfg(feature = "postgres")]
    Postgres,
}

impl Backend {
    /// The durable backends this binary was built with, as `--backend` spells them.
    fn durable_names() -> String {
        Self::value_variants()
            .iter()
            .filter(|b| **b != Self::Mem)
            .filter_map(|b| b.to_possible_value())
            .map(|v| v.get_name().to_owned())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Opens the port with its environment configuration.
    ///
    /// # Errors
    /// A `Config` error naming a bad variable, or the port's connection error.
    pub async fn open(self) -> Result<Arc<dyn StoragePort>, PhotonError> {
        Ok(match self {
            Self::Mem => Arc::new(photon::mem::MemStoragePort::from_env()?),
            #[cfg(feature = "sqlite")]
            Self::Sqlite => Arc::new(photon::sqlite::SqliteStoragePort::from_env().await?),
            #[cfg(feature = "nats")]
            Self::Nats => Arc::new(photon::nats::NatsStoragePort::from_env().await?),
            #[cfg(feature = "fluvio")]
            Self::Fluvio => Arc::new(photon::fluvio::FluvioStoragePort::from_env().await?),
            #[cfg(feature = "postgres")]
            Self::Postgres => Arc::new(photon::postgres::PostgresStoragePort::from_env().await?),
        })
    }

    /// A Photon instance over this backend (keys from `PHOTON_TRANSPORT_KEYS`).
    ///
    /// # Errors
    /// A `Config` error on the in-process backend, which would keep nothing after the
    /// command; as [`Backend::open`], or a malformed key variable.
    pub async fn photon(self) -> Result<Photon, PhotonError> {
        if self == Self::Mem {
            return Err(PhotonError::config(
                "--backend (PHOTON_BACKEND)",
                "mem",
                format!(
                    "a durable backend ({}): the in-process store keeps nothing after this command; only `photon demo` runs on it",
                    Self::durable_names()
                ),
            ));
        }
        Photon::builder()
            .shared_storage_port(self.open().await?)
            .build()
    }
}
