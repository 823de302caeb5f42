//! Test support: a port factory onto a fresh temporary SQLite database.

#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use photon_backend_sqlite::SqliteStoragePort;
use photon_core::{EventStore, PhotonError, Result, StoragePort, TransportCrypto};
use photon_testkit::{PortFactory, UndecodableRecord};

/// A port onto the file `db`, polling every 10 ms: the multi-process tests' children and
/// parents.
pub fn open_port(db: &Path) -> SqliteStoragePort {
    SqliteStoragePort::builder()
        .path(db)
        .poll_interval(Duration::from_millis(10))
        .build_blocking()
        .unwrap()
}

/// [`open_port`] under a plaintext store.
pub fn open_store(db: &Path) -> EventStore {
    EventStore::new(Arc::new(open_port(db)), TransportCrypto::plaintext())
}

/// Opens ports onto one fresh database file.
pub struct SqliteFactory {
    // Kept so the directory (and the database in it) lives as long as the factory.
    directory: tempfile::TempDir,
}

#[async_trait]
impl PortFactory for SqliteFactory {
    async fn open(&self) -> Result<Arc<dyn StoragePort>> {
        let port = SqliteStoragePort::builder()
            .path(self.directory.path().join("photon.db"))
            .poll_interval(Duration::from_millis(20))
            .build()
            .await?;
        Ok(Arc::new(port))
    }

    /// Publishes a placeholder, then overwrites its stored body, as damage on disk would.
    async fn store_undecodable(&self, record: UndecodableRecord<'_>) -> Result<()> {
        let store = EventStore::new(self.open().await?, TransportCrypto::plaintext());
        let placeholder = store
            .publish(
                record.topic,
                record.key,
                serde_json::Value::Null,
                serde_json::Value::Null,
            )
            .await?;
        store.port().flush().await?;
        let path = self.directory.path().join("photon.db");
        let stored = record.stored.to_vec();
        let failed = |err: rusqlite::Error| PhotonError::storage("sqlite", "damaging a row", err);
        let connection = rusqlite::Connection::open(path).map_err(failed)?;
        connection
            .busy_timeout(Duration::from_secs(10))
            .map_err(failed)?;
        let changed = connection
            .execute(
                "UPDATE events SET body = ?1 WHERE event_id = ?2",
                rusqlite::params![stored, placeholder.event_id],
            )
            .map_err(failed)?;
        assert_eq!(changed, 1, "exactly the placeholder row is damaged");
        Ok(())
    }
}

/// A factory onto a fresh database, or `None` (after `skip_or_fail`) without a temporary
/// directory.
pub async fn factory() -> Option<SqliteFactory> {
    match tempfile::tempdir() {
        Ok(directory) => Some(SqliteFactory { directory }),
        Err(err) => {
            photon_testkit::skip_or_fail("sqlite", &format!("no temporary directory: {err}"));
            None
        }
    }
}
