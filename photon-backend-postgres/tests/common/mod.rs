//! The test database: `PHOTON_POSTGRES_URL`, by default the local server's `test`
//! database; every [`PgFactory`] works in a schema of its own, dropped when it is dropped.

#![allow(dead_code)] // Each test binary uses its own part of this module.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use photon_backend_postgres::{PostgresStoragePort, PostgresStoragePortBuilder};
use photon_core::{EventStore, PhotonError, Result, StoragePort, TransportCrypto};
use photon_testkit::{PortFactory, UndecodableRecord};

/// The test server's connection string (`sslmode=disable` unless `PHOTON_POSTGRES_URL`
/// says otherwise).
pub fn url() -> String {
    std::env::var("PHOTON_POSTGRES_URL")
        .ok()
        .filter(|url| !url.trim().is_empty())
        // Clear text by default, as before TLS came: CI runs the conformance suite a second
        // time with `sslmode=require`, and `tests/tls.rs` sets its own modes.
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/test?sslmode=disable".to_owned())
}

/// `url` with its own `application_name`, so that a test finds its port's sessions in
/// `pg_stat_activity` among those of the tests running beside it.
pub fn named(url: &str, name: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}application_name={name}")
}

/// A fresh schema name.
pub fn fresh_schema() -> String {
    let unique = uuid::Uuid::new_v4().simple().to_string();
    format!("photon_t_{}", &unique[..16])
}

/// `url` without its TLS parameters (`ssl...`), which the driver alone may refuse
/// (`verify-full`, `sslrootcert`): the tests' own connections are in clear text.
pub fn without_tls(url: &str) -> String {
    let is_tls = |pair: &&str| pair.trim_start().starts_with("ssl");
    match url.split_once('?') {
        Some((base, query)) => {
            let kept: Vec<&str> = query.split('&').filter(|pair| !is_tls(pair)).collect();
            if kept.is_empty() {
                base.to_owned()
            } else {
                format!("{base}?{}", kept.join("&"))
            }
        }
        None if url.contains("://") => url.to_owned(),
        None => url
            .split_whitespace()
            .filter(|pair| !is_tls(pair))
            .collect::<Vec<_>>()
            .join(" "),
    }
}

/// A connection outside any port (in clear text), driven by a task of its own.
pub async fn admin(
    url: &str,
) -> std::result::Result<tokio_postgres::Client, tokio_postgres::Error> {
    let mut config: tokio_postgres::Config = without_tls(url).parse()?;
    config.ssl_mode(tokio_postgres::config::SslMode::Disable);
    config.connect_timeout(Duration::from_secs(3));
    config.application_name("photon-test-admin");
    let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

/// A port onto `schema` of the test server, for a child process: a child has no
/// [`PgFactory`], whose drop would drop the schema under the other processes.
pub async fn port_on(schema: &str) -> PostgresStoragePort {
    PostgresStoragePort::builder()
        .url(url())
        .schema(schema)
        .pool_size(4)
        .build()
        .await
        .unwrap()
}

/// How many events `topic` of `schema` holds, and how many distinct keys they carry.
pub async fn events_and_keys(
    client: &tokio_postgres::Client,
    schema: &str,
    topic: &str,
) -> (i64, i64) {
    let row = client
        .query_one(
            &format!(
                "SELECT count(*), count(DISTINCT topic_key) FROM {schema}.events \
                 WHERE topic_id = (SELECT topic_id FROM {schema}.topics WHERE name = $1)"
            ),
            &[&topic],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

/// The rows of `sql` (no parameters) as pairs of their first two columns.
pub async fn query_pairs<A, B, C>(client: &tokio_postgres::Client, sql: &str) -> C
where
    A: for<'a> tokio_postgres::types::FromSql<'a>,
    B: for<'a> tokio_postgres::types::FromSql<'a>,
    C: FromIterator<(A, B)>,
{
    client
        .query(sql, &[])
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

/// Ports onto one fresh schema of the test database.
pub struct PgFactory {
    pub url: String,
    pub schema: String,
}

impl PgFactory {
    /// A factory with a fresh schema; `None` (after [`photon_testkit::skip_or_fail`]) when
    /// the server does not answer.
    pub async fn new() -> Option<Self> {
        Self::on(url()).await
    }

    /// A factory with a fresh schema on the server of `url`.
    pub async fn on(url: String) -> Option<Self> {
        if let Err(err) = admin(&url).await {
            let cause = std::error::Error::source(&err).map_or(String::new(), |c| format!(": {c}"));
            photon_testkit::skip_or_fail(
                "postgres",
                &format!("no PostgreSQL server: {err}{cause}"),
            );
            return None;
        }
        Some(Self {
            url,
            schema: fresh_schema(),
        })
    }

    /// A builder onto this factory's schema.
    pub fn builder(&self) -> PostgresStoragePortBuilder {
        PostgresStoragePort::builder()
            .url(self.url.clone())
            .schema(self.schema.clone())
            .pool_size(4)
    }

    /// A new port onto this factory's schema.
    pub async fn port(&self) -> Result<PostgresStoragePort> {
        self.builder().build().await
    }
}

impl Drop for PgFactory {
    /// Drops the schema, on a thread of its own (a runtime cannot block inside another).
    fn drop(&mut self) {
        let (url, schema) = (self.url.clone(), self.schema.clone());
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async move {
                let client = admin(&url).await.ok()?;
                client
                    .batch_execute(&format!(
                        "SET lock_timeout = '10s'; DROP SCHEMA IF EXISTS {schema} CASCADE"
                    ))
                    .await
                    .ok()
            })
        })
        .join();
        if !matches!(dropped, Ok(Some(()))) {
            eprintln!("could not drop test schema {}", self.schema);
        }
    }
}

#[async_trait]
impl PortFactory for PgFactory {
    async fn open(&self) -> Result<Arc<dyn StoragePort>> {
        Ok(Arc::new(self.port().await?))
    }

    /// Publishes a placeholder, then overwrites its stored body, as damage would.
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
        let failed = |err| PhotonError::storage("postgres", "damaging a row", err);
        let client = admin(&self.url).await.map_err(failed)?;
        let changed = client
            .execute(
                &format!(
                    "UPDATE {}.events SET body = $1 WHERE event_id = $2",
                    self.schema
                ),
                &[&record.stored, &placeholder.event_id],
            )
            .await
            .map_err(failed)?;
        assert_eq!(changed, 1, "exactly the placeholder row is damaged");
        Ok(())
    }
}
