//! The conformance suite against real SQLite files: one fresh temporary database per
//! factory; every `open` opens a new port onto that file (a second `open` is a restart).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use photon_backend_sqlite::SqliteStoragePort;
use photon_core::{Result, StoragePort};
use photon_testkit::PortFactory;

struct SqliteFactory {
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
}

async fn factory() -> Option<SqliteFactory> {
    match tempfile::tempdir() {
        Ok(directory) => Some(SqliteFactory { directory }),
        Err(err) => {
            photon_testkit::skip_or_fail("sqlite", &format!("no temporary directory: {err}"));
            None
        }
    }
}

photon_testkit::conformance_tests!(factory());
