//! Connections. Each port has connections of its own for each kind of work, so that one
//! kind cannot starve another:
//!
//! - the page-read pool (`pool_size`): replay pages, queries, checkpoint loads,
//!   transactional handlers, retention sweeps, the schema's creation;
//! - the writer pool (`writer_connections`): the writer lanes' transactions;
//! - the coordination pool ([`COORDINATION_CONNECTIONS`]): consumer-group heartbeats,
//!   leases and partition commits;
//! - the listener: one connection that `LISTEN`s, with TCP keepalive.
//!
//! Every connection's `search_path` is the configured schema, so that queries name tables
//! unqualified, and its `lock_timeout` the configured one; all use the connection string's
//! TLS settings (see `ssl.rs`).

use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Runtime};
use futures::future::BoxFuture;
use photon_core::{PhotonError, Result};
use tokio_postgres::config::Host;
use tokio_postgres::{Client, Connection, Socket};

use crate::config::PostgresConfig;
use crate::error::{describe, pg_error, pool_error, refused_credentials, LABEL};
#[cfg(feature = "tls")]
pub(crate) use crate::tls::{Connector, Stream};
#[cfg(not(feature = "tls"))]
pub(crate) use clear::{Connector, Stream};

/// Connections of the consumer-group coordination (heartbeats, leases, partition commits),
/// apart from the page-read pool.
pub(crate) const COORDINATION_CONNECTIONS: usize = 2;

/// Longest idle time of the listener's connection before TCP keepalive probes start (a
/// connection string's shorter `keepalives_idle` wins): a listener whose connection died
/// silently (a dropped NAT entry, a dead host) notices within about a minute, reconnects
/// and wakes every subscriber, instead of waiting for the next recheck of each.
const LISTENER_KEEPALIVE_IDLE: Duration = Duration::from_secs(30);
/// Time between the listener's keepalive probes, unless the connection string sets it.
const LISTENER_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
/// Unanswered probes before the listener's connection counts as lost, unless set.
const LISTENER_KEEPALIVE_RETRIES: u32 = 3;

/// How the port reaches its server: the driver's configuration and the TLS connector, set
/// up once per port (the certificate files are read then).
#[derive(Clone)]
pub(crate) struct Server {
    pg: tokio_postgres::Config,
    connector: Connector,
    /// The connection string without its password, for messages.
    shown: String,
    connect_timeout: Duration,
}

impl Server {
    /// The server of `config`.
    ///
    /// # Errors
    /// [`PhotonError::Config`] for a connection string PostgreSQL cannot read, a refused
    /// TLS parameter (named), or a certificate or key file that cannot be used (named with
    /// its path).
    pub(crate) fn new(config: &PostgresConfig) -> Result<Self> {
        let split = crate::ssl::split(&config.url)?;
        let mut pg = driver_config(&split.driver, &config.url)?;
        pg.ssl_mode(split.ssl.mode.driver());
        // Custom plans only: a cached generic plan of `event_id = ANY($1)` chose a scan of
        // the whole events table while the table was young and unanalyzed, and kept it, so
        // each append batch grew slower with the table (9,000 /s falling to 1,800 /s in
        // 40,000 events); planning for the actual values keeps the index lookups.
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
        Ok(Self {
            pg,
            connector: Connector::new(&split.ssl)?,
            shown: crate::env::redact(&config.url),
            connect_timeout: config.connect_timeout,
        })
    }

    /// A pool of at most `size` connections, opened on first use.
    ///
    /// # Errors
    /// [`PhotonError::Storage`] when the pool cannot be built.
    pub(crate) fn pool(&self, size: usize) -> Result<Pool> {
        let manager = Manager::from_connect(
            self.pg.clone(),
            self.connector.clone(),
            ManagerConfig {
                // A connection that failed is dropped by the driver's `is_closed`; a query
                // per checkout to prove each connection alive would cost a round trip per
                // read.
                recycling_method: RecyclingMethod::Fast,
            },
        );
        Pool::builder(manager)
            .max_size(size)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(self.connect_timeout))
            .create_timeout(Some(self.connect_timeout))
            .build()
            .map_err(|e| PhotonError::storage(LABEL, "cannot build the connection pool", e))
    }

    /// The listener's connection, outside the pools and with TCP keepalive; the caller
    /// drives `Connection`.
    ///
    /// # Errors
    /// [`PhotonError::Unavailable`] when the server cannot be reached,
    /// [`PhotonError::Storage`] when it refuses the connection or its certificate is
    /// refused.
    pub(crate) async fn listener(&self) -> Result<(Client, Connection<Socket, Stream>)> {
        self.connector
            .connect(&self.listener_config())
            .await
            .map_err(|e| self.connect_error(e))
    }

    /// A pooled connection's error when the port opens: refused credentials as
    /// [`PhotonError::Unauthorized`] naming this server and its user, anything else as
    /// [`pool_error`] reads it.
    pub(crate) fn pool_connect_error(&self, what: &str, error: PoolError) -> PhotonError {
        match error {
            PoolError::Backend(backend) if refused_credentials(&backend) => self.refused(backend),
            other => pool_error(what, other),
        }
    }

    /// A direct connection's error: as [`Server::pool_connect_error`].
    fn connect_error(&self, error: tokio_postgres::Error) -> PhotonError {
        if refused_credentials(&error) {
            return self.refused(error);
        }
        pg_error(&format!("connect to {}", self.shown), error)
    }

    /// The server refused this port's credentials.
    fn refused(&self, error: tokio_postgres::Error) -> PhotonError {
        let user = self.pg.get_user().unwrap_or_default();
        PhotonError::unauthorized(
            LABEL,
            self.address(),
            format!("user {user:?}"),
            describe(&error),
            error,
        )
    }

    /// The server's hosts and ports, as `host:port` (or the socket directory), comma
    /// separated.
    fn address(&self) -> String {
        let ports = self.pg.get_ports();
        self.pg
            .get_hosts()
            .iter()
            .enumerate()
            .map(|(index, host)| {
                let port = ports
                    .get(index)
                    .or_else(|| ports.first())
                    .copied()
                    .unwrap_or(5432);
                match host {
                    Host::Tcp(name) => format!("{name}:{port}"),
                    Host::Unix(directory) => format!("{}:{port}", directory.display()),
                }
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The listener's driver configuration: the port's, with TCP keepalive.
    fn listener_config(&self) -> tokio_postgres::Config {
        let mut pg = self.pg.clone();
        pg.keepalives(true);
        pg.keepalives_idle(pg.get_keepalives_idle().min(LISTENER_KEEPALIVE_IDLE));
        if pg.get_keepalives_interval().is_none() {
            pg.keepalives_interval(LISTENER_KEEPALIVE_INTERVAL);
        }
        if pg.get_keepalives_retries().is_none() {
            pg.keepalives_retries(LISTENER_KEEPALIVE_RETRIES);
        }
        pg
    }
}

/// The driver's reading of a connection string without its TLS parameters; a refusal
/// shows the string as given, without its password.
fn driver_config(driver: &str, url: &str) -> Result<tokio_postgres::Config> {
    driver.parse().map_err(|e| {
        PhotonError::config(
            "url",
            crate::env::redact(url),
            format!("a PostgreSQL connection string ({e})"),
        )
    })
}

/// Checks a connection string as [`Server::new`] reads it, without reading files.
///
/// # Errors
/// [`PhotonError::Config`] naming `variable` for a string the driver cannot read, or
/// naming the refused TLS parameter.
pub(crate) fn check_url(variable: &str, url: &str) -> Result<()> {
    let split = crate::ssl::split(url)?;
    driver_config(&split.driver, url)
        .map(drop)
        .map_err(|error| match error {
            PhotonError::Config {
                value, expected, ..
            } => PhotonError::config(variable, value, expected),
            other => other,
        })
}

impl deadpool_postgres::Connect for Connector {
    fn connect(
        &self,
        pg: &tokio_postgres::Config,
    ) -> BoxFuture<
        '_,
        std::result::Result<(Client, tokio::task::JoinHandle<()>), tokio_postgres::Error>,
    > {
        let pg = pg.clone();
        Box::pin(async move {
            let (client, connection) = Connector::connect(self, &pg).await?;
            let driven = tokio::spawn(async move {
                if let Err(error) = connection.await {
                    tracing::warn!(error = %describe(&error), "postgres pooled connection lost");
                }
            });
            Ok((client, driven))
        })
    }
}

/// Without the `tls` feature: clear text only (`ssl.rs` refused every mode that needs TLS).
#[cfg(not(feature = "tls"))]
mod clear {
    use photon_core::Result;
    use tokio_postgres::tls::NoTlsStream;
    use tokio_postgres::{Client, Connection, NoTls, Socket};

    use crate::ssl::SslSettings;

    /// The stream of a connection.
    pub(crate) type Stream = NoTlsStream;

    /// Connects in clear text.
    #[derive(Clone)]
    pub(crate) struct Connector;

    impl Connector {
        /// The connector of `ssl` (`disable` or `prefer`).
        ///
        /// # Errors
        /// None; the signature is the `tls` feature's.
        pub(crate) fn new(ssl: &SslSettings) -> Result<Self> {
            if ssl.mode == crate::ssl::SslMode::Prefer {
                tracing::debug!(
                    "sslmode=prefer without the `tls` feature of photon-backend-postgres: \
                     connecting in clear text"
                );
            }
            Ok(Self)
        }

        /// One connection.
        ///
        /// # Errors
        /// The driver's error.
        pub(crate) async fn connect(
            &self,
            pg: &tokio_postgres::Config,
        ) -> std::result::Result<(Client, Connection<Socket, Stream>), tokio_postgres::Error>
        {
            pg.connect(NoTls).await
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn server(url: &str) -> Server {
        Server::new(&PostgresConfig {
            url: url.to_owned(),
            ..PostgresConfig::default()
        })
        .unwrap()
    }

    #[test]
    fn the_listener_has_tcp_keepalive() {
        let listener = server("postgres://app@db/events").listener_config();
        assert!(listener.get_keepalives());
        assert_eq!(listener.get_keepalives_idle(), LISTENER_KEEPALIVE_IDLE);
        assert_eq!(
            listener.get_keepalives_interval(),
            Some(LISTENER_KEEPALIVE_INTERVAL)
        );
        assert_eq!(
            listener.get_keepalives_retries(),
            Some(LISTENER_KEEPALIVE_RETRIES)
        );
        let shorter = server("postgres://app@db/events?keepalives_idle=5&keepalives_retries=9")
            .listener_config();
        assert_eq!(shorter.get_keepalives_idle(), Duration::from_secs(5));
        assert_eq!(shorter.get_keepalives_retries(), Some(9));
    }

    #[test]
    fn the_driver_gets_the_mode_without_the_tls_parameters() {
        let pg = server("postgres://app@db/events?sslmode=disable&application_name=x").pg;
        assert_eq!(pg.get_ssl_mode(), tokio_postgres::config::SslMode::Disable);
        assert_eq!(pg.get_application_name(), Some("x"));
        let default = server("host=db user=app").pg;
        assert_eq!(
            default.get_ssl_mode(),
            tokio_postgres::config::SslMode::Prefer
        );
        assert_eq!(default.get_application_name(), Some("photon"));
    }
}
