//! `#[subscribe(durable = "...", transactional)]` on PostgreSQL as an application writes
//! it: an `async fn` of the PostgreSQL transaction and a typed event, started by
//! `Photon::start_executor`, its row and the checkpoint advance committed together; a dead
//! letter stored with the advance past its event. Runs in a fresh schema of the server of
//! `PHOTON_POSTGRES_URL` (default: the local `test` database), dropped after.

mod common;

use std::time::Duration;

use common::{books_each_payment_once, Payment};
use photon::postgres::tokio_postgres::{self, Client, NoTls};
use photon::postgres::{PostgresStoragePort, PostgresTransaction};
use photon::prelude::*;
// The port's connections use its schema as their search path.
#[subscribe(durable = "ledger", transactional)]
async fn book(tx: &PostgresTransaction<'_>, payment: Payment) -> Result<(), PhotonError> {
    if payment.cents < 0 {
        return Err(PhotonError::handler_permanent("negative amount"));
    }
    tx.execute(
        "INSERT INTO ledger (payment_id, cents) VALUES ($1, $2)",
        &[&payment.payment_id, &payment.cents],
    )
    .await
    .map_err(|e| PhotonError::handler(format!("book a payment: {e}")))?;
    Ok(())
}

fn url() -> String {
    std::env::var("PHOTON_POSTGRES_URL")
        .ok()
        .filter(|url| !url.trim().is_empty())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

async fn connect() -> Option<Client> {
    let mut config: tokio_postgres::Config = url().parse().unwrap();
    config.connect_timeout(Duration::from_secs(3));
    match config.connect(NoTls).await {
        Ok((client, connection)) => {
            tokio::spawn(connection);
            Some(client)
        }
        Err(err) => {
            photon_testkit::skip_or_fail("postgres", &format!("no PostgreSQL server: {err}"));
            None
        }
    }
}

/// Drops the test's schema, also when the test fails.
struct Schema(String);

impl Drop for Schema {
    fn drop(&mut self) {
        let schema = self.0.clone();
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async move {
                connect()
                    .await?
                    .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                    .await
                    .ok()
            })
        })
        .join();
        if !matches!(dropped, Ok(Some(()))) {
            eprintln!("could not drop test schema {}", self.0);
        }
    }
}

async fn ledger(client: &Client, schema: &str) -> Vec<(String, i64)> {
    client
        .query(
            &format!("SELECT payment_id, cents FROM {schema}.ledger ORDER BY cents"),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_async_transactional_handler_books_each_payment_once() {
    let Some(client) = connect().await else {
        return;
    };
    let unique = uuid::Uuid::new_v4().simple().to_string();
    let schema = Schema(format!("photon_t_{}", &unique[..16]));
    let port = PostgresStoragePort::builder()
        .url(url())
        .schema(schema.0.clone())
        .pool_size(4)
        .build()
        .await
        .unwrap();
    client
        .batch_execute(&format!(
            "CREATE TABLE {}.ledger (payment_id TEXT NOT NULL, cents BIGINT NOT NULL)",
            &schema.0
        ))
        .await
        .unwrap();
    books_each_payment_once(port, || ledger(&client, &schema.0)).await;
}
