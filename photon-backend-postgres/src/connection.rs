//! Connections: the pool (appends, reads, groups) and single connections (the live tail's
//! listener, the schema's creation). Every connection's `search_path` is the configured
//! schema, so that queries name tables unqualified, and its `lock_timeout` the configured
//! one.

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use photon_core::{PhotonError, Result};
use tokio_postgres::{Client, Connection, NoTls, Socket};

use crate::config::PostgresConfig;
use crate::error::{pg_error, LABEL};

/// The driver's configuration of `config`.
///
/// # Errors
/// [`PhotonError::Config`] for a connection string PostgreSQL cannot read.
pub(crate) fn pg_config(config: &PostgresConfig) -> Result<tokio_postgres::Config> {
    let mut pg: tokio_postgres::Config = config.url.parse().map_err(|e| {
        PhotonError::config(
            "url",
            crate::env::redact(&config.url),
            format!("a PostgreSQL connection string ({e})"),
        )
    })?;
    // Custom plans only: a cached generic plan of `event_id = ANY($1)` chose a scan of the
    // whole events table while the table was young and unanalyzed, and kept it, so each
    // append batch grew slower with the table (9,000 /s falling to 1,800 /s in 40,000
    // events); planning for the actual values keeps the index lookups.
    // A lock wait longer than `lock_timeout` fails (retryable) instead of hanging: the
    // writer's lanes, transactional handlers and every other session of the port.
    pg.options(format!(
        "-c search_path={} -c plan_cache_mode=force_custom_plan -c lock_timeout={}",
        config.schema,
        config.lock_timeout.as_millis().max(1)
    ));
    pg.connect_timeout(config.connect_timeout);
    if pg.get_application_name().is_none() {
        pg.application_name("photon");
    }
    Ok(pg)
}

/// Connections of the consumer-group coordination (heartbeats, leases, partition commits),
/// apart from the page-read pool.
pub(crate) const COORDINATION_CONNECTIONS: usize = 2;

/// The pool of `pool_size` connections; connections are opened on first use.
pub(crate) fn pool(config: &PostgresConfig) -> Result<Pool> {
    pool_of(config, config.pool_size)
}

/// A pool of at most `size` connections, opened on first use.
pub(crate) fn pool_of(config: &PostgresConfig, size: usize) -> Result<Pool> {
    let manager = Manager::from_config(
        pg_config(config)?,
        NoTls,
        ManagerConfig {
            // A connection that failed is dropped by the driver's `is_closed`; a query per
            // checkout to prove each connection alive would cost a round trip per read.
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(size)
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(config.connect_timeout))
        .create_timeout(Some(config.connect_timeout))
        .build()
        .map_err(|e| PhotonError::storage(LABEL, "cannot build the connection pool", e))
}

/// One connection outside the pool; the caller drives `Connection`.
pub(crate) async fn connect(
    config: &PostgresConfig,
) -> Result<(Client, Connection<Socket, tokio_postgres::tls::NoTlsStream>)> {
    pg_config(config)?.connect(NoTls).await.map_err(|e| {
        pg_error(
            &format!("connect to {}", crate::env::redact(&config.url)),
            e,
        )
    })
}

/// Warns when the server acknowledges commits before flushing them: an acknowledged
/// append could then be lost if the server crashes.
pub(crate) async fn warn_unless_durable(client: &deadpool_postgres::Client) {
    match client.query_one("SHOW synchronous_commit", &[]).await {
        Ok(row) => {
            let setting: String = row.try_get(0).unwrap_or_default();
            if setting.eq_ignore_ascii_case("off") {
                tracing::warn!(
                    "synchronous_commit is off for this connection: appends are acknowledged \
                     before their commit is flushed, and a server crash may lose the last ones"
                );
            }
        }
        Err(error) => {
            tracing::debug!(error = %crate::error::describe(&error), "cannot read synchronous_commit")
        }
    }
}
