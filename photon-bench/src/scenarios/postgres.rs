//! The PostgreSQL port beside raw `tokio-postgres`, in a fresh schema of the server
//! `PHOTON_POSTGRES_URL` (the port's default otherwise), dropped afterwards.
//!
//! The raw side does the same work without Photon, under the same contract: the same
//! `options.publishers` tasks each insert their events one at a time and await each
//! insert's commit (its acknowledgement) before the next, over as many connections as the
//! port's pool holds (tasks sharing a connection pipeline their inserts on it), into one
//! table keyed by `(topic, seq)`; a second connection reads them back in pages of 512. Both
//! sides commit with the server's `synchronous_commit` (on by default: each commit waits
//! for the WAL flush). The raw side allocates no seqs (the event's index is its seq), so it
//! does less than the port, which numbers each topic without gaps.

use std::sync::Arc;
use std::time::{Duration, Instant};

use photon_backend_postgres::{PostgresConfig, PostgresStoragePort};
use photon_core::{PhotonError, Result};
use tokio_postgres::{Client, NoTls};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::{compare, raw_end_to_end_rate, PhotonSide, RawClient};
use crate::latency::Latencies;
use crate::measure::{per_second, BenchOptions};
use crate::report::AdapterFigures;

const RAW_PAGE: i64 = 512;

/// Runs the postgres scenario: in clear text, or with TLS on both sides when `tls`.
///
/// # Errors
/// [`PhotonError::Unavailable`] when the server cannot be reached; publish and read errors.
pub async fn run(options: &BenchOptions, tls: bool) -> Result<AdapterFigures> {
    let schema = fresh_schema("bench");
    let mut config = PostgresConfig::from_env()?;
    config.url = with_sslmode(&config.url, if tls { "require" } else { "disable" });
    let admin = connect(&config.url, &schema).await?;
    let measured = measure(&config, &schema, options, tls).await;
    let dropped = admin
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .map_err(|e| raw_error("drop the bench schema", e));
    let mut figures = measured?;
    dropped?;
    figures.server_version = Some(server_version(&admin).await?);
    Ok(figures)
}

async fn measure(
    config: &PostgresConfig,
    schema: &str,
    options: &BenchOptions,
    tls: bool,
) -> Result<AdapterFigures> {
    let port = PostgresStoragePort::builder()
        .url(&config.url)
        .schema(schema)
        .pool_size(config.pool_size)
        .build()
        .await?;
    let photon = PhotonSide::new(Arc::new(port), "bench")?;
    let raw = RawPostgres {
        url: config.url.clone(),
        schema: schema.to_owned(),
        connections: config.pool_size.max(1),
    };
    raw.create_table().await?;
    let adapter = if tls { "postgres-tls" } else { "postgres" };
    compare(adapter, &photon, &raw, options).await
}

/// `url` with its `sslmode` (if any) replaced by `mode`.
pub(crate) fn with_sslmode(url: &str, mode: &str) -> String {
    let is_mode = |pair: &&str| pair.trim_start().starts_with("sslmode");
    if url.contains("://") {
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut pairs: Vec<&str> = query
            .split('&')
            .filter(|pair| !pair.is_empty() && !is_mode(pair))
            .collect();
        let setting = format!("sslmode={mode}");
        pairs.push(&setting);
        format!("{base}?{}", pairs.join("&"))
    } else {
        let mut pairs: Vec<&str> = url.split_whitespace().filter(|p| !is_mode(p)).collect();
        let setting = format!("sslmode={mode}");
        pairs.push(&setting);
        pairs.join(" ")
    }
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

/// A connection whose `search_path` is `schema`, driven by a task of its own; with TLS
/// (rustls, certificate not verified, as the port's `sslmode=require`) when the URL says
/// `sslmode=require`.
pub(crate) async fn connect(url: &str, schema: &str) -> Result<Client> {
    let mut config: tokio_postgres::Config =
        url.parse().map_err(|e| raw_error("read the URL", e))?;
    config.options(format!("-c search_path={schema}"));
    let failed = |e| PhotonError::unavailable("postgres", "raw tokio-postgres connect", e);
    let client = if config.get_ssl_mode() == tokio_postgres::config::SslMode::Require {
        let (client, connection) = config.connect(encrypt_only()?).await.map_err(failed)?;
        tokio::spawn(connection);
        client
    } else {
        let (client, connection) = config.connect(NoTls).await.map_err(failed)?;
        tokio::spawn(connection);
        client
    };
    Ok(client)
}

/// The raw side's TLS: rustls (ring) accepting any server certificate, checking the
/// handshake's signatures.
fn encrypt_only() -> Result<MakeRustlsConnect> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| raw_error("set up TLS", e))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

/// Accepts every server certificate (the bench measures encryption, not authentication).
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> std::result::Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> std::result::Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> std::result::Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

struct RawPostgres {
    url: String,
    schema: String,
    /// Connections the publishers share, as many as the port's pool.
    connections: usize,
}

impl RawPostgres {
    async fn connect(&self) -> Result<Client> {
        connect(&self.url, &self.schema).await
    }

    /// The publishers' connections.
    async fn pool(&self) -> Result<Vec<Arc<Client>>> {
        let mut pool = Vec::with_capacity(self.connections);
        for _ in 0..self.connections {
            pool.push(Arc::new(self.connect().await?));
        }
        Ok(pool)
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
        let pool = self.pool().await?;
        let started = Instant::now();
        insert_all(&pool, options, &format!("publish{round}")).await?;
        Ok(per_second(options.events, started.elapsed()))
    }

    async fn end_to_end_rate(&self, options: &BenchOptions, round: usize) -> Result<f64> {
        let pool = self.pool().await?;
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
            tokio::spawn(async move { insert_all(&pool, &options, &topic).await })
        };
        // Concurrent inserts commit out of seq order: the reader takes only the run of seqs
        // without a gap and reads from its end again, as the port does.
        let mut after = 0_i64;
        while after < options.events as i64 {
            let rows = reader
                .query(&page, &[&topic, &after, &RAW_PAGE])
                .await
                .map_err(|e| raw_error("read", e))?;
            let before = after;
            for row in &rows {
                let seq: i64 = row.try_get(0).map_err(|e| raw_error("read", e))?;
                let _body: &str = row.try_get(1).map_err(|e| raw_error("read", e))?;
                if seq != after + 1 {
                    break;
                }
                after = seq;
            }
            if after == before {
                tokio::time::sleep(Duration::from_micros(200)).await;
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

/// `options.publishers` tasks insert every event (encoding its payload as it goes, as
/// Photon does), one row per statement and commit, each awaited before the task's next;
/// task `p` uses connection `p % pool.len()`. Seqs are the events' indexes, interleaved
/// over the tasks.
async fn insert_all(pool: &[Arc<Client>], options: &BenchOptions, topic: &str) -> Result<()> {
    let mut inserts = Vec::with_capacity(pool.len());
    for client in pool {
        let insert = client
            .prepare("INSERT INTO raw_events (topic, seq, topic_key, body) VALUES ($1, $2, $3, $4)")
            .await
            .map_err(|e| raw_error("prepare", e))?;
        inserts.push(insert);
    }
    let mut tasks = Vec::with_capacity(options.publishers);
    for publisher in 0..options.publishers {
        let client = pool[publisher % pool.len()].clone();
        let insert = inserts[publisher % pool.len()].clone();
        let (topic, options) = (topic.to_owned(), *options);
        tasks.push(tokio::spawn(async move {
            for i in 0..options.share(publisher) {
                let seq = (i * options.publishers + publisher) as i64 + 1;
                let key = format!("k{}", (publisher + i) % 64);
                let body = options.payload(i).to_string();
                client
                    .execute(&insert, &[&topic, &seq, &key, &body])
                    .await
                    .map_err(|e| raw_error("insert", e))?;
            }
            Ok::<_, PhotonError>(())
        }));
    }
    for task in tasks {
        task.await
            .map_err(|e| PhotonError::InvalidInput(format!("raw publisher task: {e}")))??;
    }
    Ok(())
}
