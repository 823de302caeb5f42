//! The PostgreSQL port beside raw `tokio-postgres`, in a fresh schema of the server
//! `PHOTON_POSTGRES_URL` (the port's default otherwise), dropped afterwards.
//!
//! The raw side does the same work without Photon: the same JSON payloads into one table
//! keyed by `(topic, seq)`, in transactions of 4,096 rows from one connection, each one
//! `INSERT ... SELECT FROM unnest(...)` (its ceiling: no per-publish acknowledgement),
//! read back by a second connection in pages of 512. Both sides commit with the server's
//! `synchronous_commit` (on by default: each commit waits for the WAL flush).

use std::sync::Arc;
use std::time::{Duration, Instant};

use photon_backend_postgres::{PostgresConfig, PostgresStoragePort};
use photon_core::{PhotonError, Result};
use tokio_postgres::{Client, NoTls};

use super::{compare, raw_end_to_end_rate, PhotonSide, RawClient};
use crate::latency::Latencies;
use crate::measure::{per_second, BenchOptions};
use crate::report::AdapterFigures;

const RAW_BATCH: usize = 4096;
const RAW_PAGE: i64 = 512;

/// Runs the postgres scenario.
///
/// # Errors
/// [`PhotonError::Unavailable`] when the server cannot be reached; publish and read errors.
pub async fn run(options: &BenchOptions) -> Result<AdapterFigures> {
    let schema = fresh_schema("bench");
    let url = PostgresConfig::from_env()?.url;
    let admin = connect(&url, &schema).await?;
    let measured = measure(&url, &schema, options).await;
    let dropped = admin
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .map_err(|e| raw_error("drop the bench schema", e));
    let mut figures = measured?;
    dropped?;
    figures.server_version = Some(server_version(&admin).await?);
    Ok(figures)
}

async fn measure(url: &str, schema: &str, options: &BenchOptions) -> Result<AdapterFigures> {
    let port = PostgresStoragePort::builder()
        .url(url)
        .schema(schema)
        .build()
        .await?;
    let photon = PhotonSide::new(Arc::new(port), "bench")?;
    let raw = RawPostgres {
        url: url.to_owned(),
        schema: schema.to_owned(),
    };
    raw.create_table().await?;
    compare("postgres", &photon, &raw, options).await
}

/// A schema name unique to this run.
pub(crate) fn fresh_schema(prefix: &str) -> String {
    format!(
        "{prefix}_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

/// The version the server reports.
pub(crate) async fn server_version(client: &Client) -> Result<String> {
    let row = client
        .query_one("SHOW server_version", &[])
        .await
        .map_err(|e| raw_error("read the server version", e))?;
    row.try_get(0)
        .map_err(|e| raw_error("read the server version", e))
}

fn raw_error(what: &str, err: impl std::fmt::Display) -> PhotonError {
    PhotonError::InvalidInput(format!("raw tokio-postgres {what}: {err}"))
}

/// A connection whose `search_path` is `schema`, driven by a task of its own.
pub(crate) async fn connect(url: &str, schema: &str) -> Result<Client> {
    let mut config: tokio_postgres::Config =
        url.parse().map_err(|e| raw_error("read the URL", e))?;
    config.options(format!("-c search_path={schema}"));
    let (client, connection) = config
        .connect(NoTls)
        .await
        .map_err(|e| PhotonError::unavailable("postgres", "raw tokio-postgres connect", e))?;
    tokio::spawn(connection);
    Ok(client)
}

struct RawPostgres {
    url: String,
    schema: String,
}

impl RawPostgres {
    async fn connect(&self) -> Result<Client> {
        connect(&self.url, &self.schema).await
    }

    async fn create_table(&self) -> Result<()> {
        self.connect()
            .await?
            .batch_execute(
                "CREATE TABLE IF NOT EXISTS raw_events (topic TEXT NOT NULL, seq BIGINT NOT NULL, \
                 topic_key TEXT, body TEXT NOT NULL, PRIMARY KEY (topic, seq))",
            )
            .await
            .map_err(|e| raw_error("create the table", e))
    }
}

impl RawClient for RawPostgres {
    async fn publish_rate(&self, options: &BenchOptions, round: usize) -> Result<f64> {
        let mut client = self.connect().await?;
        insert_all(&mut client, options, &format!("publish{round}")).await
    }

    async fn end_to_end_rate(&self, options: &BenchOptions, round: usize) -> Result<f64> {
        let mut writer = self.connect().await?;
        let reader = self.connect().await?;
        let topic = format!("e2e{round}");
        let page = reader
            .prepare(
                "SELECT seq, body FROM raw_events WHERE topic = $1 AND seq > $2 \
                 ORDER BY seq LIMIT $3",
            )
            .await
            .map_err(|e| raw_error("prepare", e))?;
        let started = Instant::now();
        let inserting = {
            let (options, topic) = (*options, topic.clone());
            tokio::spawn(async move { insert_all(&mut writer, &options, &topic).await.map(|_| ()) })
        };
        let (mut after, mut received) = (0_i64, 0);
        while received < options.events {
            let rows = reader
                .query(&page, &[&topic, &after, &RAW_PAGE])
                .await
                .map_err(|e| raw_error("read", e))?;
            match rows.last() {
                Some(row) => {
                    after = row.try_get(0).map_err(|e| raw_error("read", e))?;
                    received += rows.len();
                }
                None => tokio::time::sleep(Duration::from_micros(200)).await,
            }
        }
        raw_end_to_end_rate(inserting, options.events, started.elapsed()).await
    }

    async fn latency(&self, options: &BenchOptions, round: usize) -> Result<Latencies> {
        let writer = self.connect().await?;
        let reader = self.connect().await?;
        let topic = format!("latency{round}");
        let insert = writer
            .prepare(
                "INSERT INTO raw_events (topic, seq, topic_key, body) VALUES ($1, $2, NULL, $3)",
            )
            .await
            .map_err(|e| raw_error("prepare", e))?;
        let select = reader
            .prepare("SELECT body FROM raw_events WHERE topic = $1 AND seq = $2")
            .await
            .map_err(|e| raw_error("prepare", e))?;
        let mut latencies = Latencies::default();
        for i in 0..options.latency_share(round) {
            let started = Instant::now();
            let seq = i as i64 + 1;
            let body = options.payload(i).to_string();
            writer
                .execute(&insert, &[&topic, &seq, &body])
                .await
                .map_err(|e| raw_error("insert", e))?;
            reader
                .query_one(&select, &[&topic, &seq])
                .await
                .map_err(|e| raw_error("read", e))?;
            latencies.record_since(started);
        }
        Ok(latencies)
    }
}

/// Inserts every event (encoding its payload as it goes, as Photon does) in transactions
/// of [`RAW_BATCH`] rows; returns events per second.
async fn insert_all(client: &mut Client, options: &BenchOptions, topic: &str) -> Result<f64> {
    let insert = client
        .prepare(
            "INSERT INTO raw_events (topic, seq, topic_key, body) \
             SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::text[])",
        )
        .await
        .map_err(|e| raw_error("prepare", e))?;
    let started = Instant::now();
    let mut next = 0;
    while next < options.events {
        let end = (next + RAW_BATCH).min(options.events);
        let seqs: Vec<i64> = (next..end).map(|i| i as i64 + 1).collect();
        let keys: Vec<String> = (next..end).map(|i| format!("k{}", i % 64)).collect();
        let bodies: Vec<String> = (next..end)
            .map(|i| options.payload(i).to_string())
            .collect();
        let transaction = client
            .transaction()
            .await
            .map_err(|e| raw_error("begin", e))?;
        transaction
            .execute(&insert, &[&topic, &seqs, &keys, &bodies])
            .await
            .map_err(|e| raw_error("insert", e))?;
        transaction
            .commit()
            .await
            .map_err(|e| raw_error("commit", e))?;
        next = end;
    }
    Ok(per_second(options.events, started.elapsed()))
}
