//! Read connections: queries run on tokio's blocking pool, each on a pooled connection, so
//! the async runtime never waits on SQLite.

use std::sync::{Arc, Mutex};

use photon_core::{PhotonError, Result};
use rusqlite::Connection;

use crate::config::SqliteConfig;
use crate::error::LABEL;
use crate::schema::open_reader;

/// A pool of read connections onto one database file.
#[derive(Debug)]
pub struct Readers {
    config: SqliteConfig,
    idle: Mutex<Vec<Connection>>,
}

impl Readers {
    pub(crate) fn new(config: SqliteConfig) -> Self {
        Self {
            config,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Runs `query` on a read connection on the blocking pool.
    ///
    /// # Errors
    /// The query's error, or [`PhotonError::Storage`] when no connection can be opened.
    pub(crate) async fn read<T, F>(self: &Arc<Self>, query: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let readers = Arc::clone(self);
        tokio::task::spawn_blocking(move || readers.read_now(query))
            .await
            .map_err(|join| PhotonError::storage(LABEL, "read task failed", join))?
    }

    /// Runs `query` on a read connection on the calling thread.
    pub(crate) fn read_now<T>(&self, query: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let connection = match self.lock().pop() {
            Some(connection) => connection,
            None => open_reader(&self.config)?,
        };
        let result = query(&connection);
        let mut idle = self.lock();
        if idle.len() < self.config.readers {
            idle.push(connection);
        }
        result
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Connection>> {
        // Only pushes and pops happen under this lock: a panic cannot leave it torn.
        self.idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
