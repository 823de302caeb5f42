//! The PostgreSQL examples of docs/transactions.md, compiled as they are written there
//! (`photon/tests/docs_examples.rs` checks that each one is here word for word): a
//! transactional handler registered on the executor builder, and one declared with
//! `#[subscribe(transactional)]` (feature `postgres`).
//!
//! Needs a PostgreSQL server: `PHOTON_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`), schema `photon_docs_examples`. Run with
//! `cargo run -p photon --example docs_transactions_postgres --features postgres`.

use std::sync::Arc;

use photon::postgres::{PostgresStoragePort, PostgresTransaction};
use photon::prelude::*;
use photon::runtime::HandlerOptions;
use serde_json::json;

/// A payment to book, on topic `payments`.
#[topic(name = "payments", keyed_by = "id")]
#[derive(serde::Serialize, serde::Deserialize)]
struct Payment {
    id: String,
    cents: i64,
}

// The snippet keeps the page's layout (a long line), which rustfmt would rewrite.
#[rustfmt::skip]
// docs: transactions/postgres-declared
#[subscribe(durable = "ledger", transactional)]
async fn book(tx: &PostgresTransaction<'_>, payment: Payment) -> Result<(), PhotonError> {
    tx.execute("INSERT INTO ledger (id, cents) VALUES ($1, $2)", &[&payment.id, &payment.cents])
        .await
        .map_err(|e| PhotonError::handler(e.to_string()))?;
    Ok(())
}
// end docs

#[rustfmt::skip]
async fn registered(photon: &Photon, port: &PostgresStoragePort) -> Result<(), PhotonError> {
    // docs: transactions/postgres
    use photon::postgres::transactional_handler;

    let ledger = transactional_handler(|tx, event| Box::pin(async move {
        tx.execute("INSERT INTO ledger (event_id) VALUES ($1)", &[&event.event_id])
            .await
            .map_err(|e| PhotonError::handler(e.to_string()))?;
        Ok(())                                            // commits with the checkpoint advance
    }));
    // end docs
    let executor = photon
        .executor()
        .transactional_handler(HandlerOptions::new("orders-ledger", "orders"), Arc::new(port.clone()), ledger)
        .start()?;
    photon.publish("orders", Some("o-1"), json!("shop"), json!({"total": 12})).await?;
    executor.wait_idle().await?;
    executor.shutdown().await
}

#[tokio::main]
async fn main() -> Result<(), PhotonError> {
    let url = std::env::var("PHOTON_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let (client, connection) =
        photon::postgres::tokio_postgres::connect(&url, photon::postgres::tokio_postgres::NoTls)
            .await
            .map_err(|e| PhotonError::handler(e.to_string()))?;
    tokio::spawn(connection);
    let sql = |e: photon::postgres::tokio_postgres::Error| PhotonError::handler(e.to_string());
    // Each run starts from an empty schema, so that what it prints is its own.
    client
        .batch_execute("DROP SCHEMA IF EXISTS photon_docs_examples CASCADE")
        .await
        .map_err(sql)?;
    let port = PostgresStoragePort::builder()
        .url(&url)
        .schema("photon_docs_examples")
        .build()
        .await?;
    // Both handlers write to `ledger`, in the port's schema (their connections' search
    // path): one table with room for both rows.
    client
        .batch_execute(
            "CREATE TABLE photon_docs_examples.ledger (event_id TEXT, id TEXT, cents BIGINT)",
        )
        .await
        .map_err(sql)?;
    let photon = Photon::builder().storage_port(port.clone()).build()?;
    registered(&photon, &port).await?;
    Payment {
        id: "p-1".into(),
        cents: 250,
    }
    .publish_on(&photon)
    .await?;
    let executor = photon.start_executor()?;
    executor.wait_idle().await?;
    executor.shutdown().await?;
    let booked = client
        .query_one("SELECT count(*) FROM photon_docs_examples.ledger", &[])
        .await
        .map_err(sql)?;
    println!("ledger rows: {}", booked.get::<_, i64>(0));
    for topic in ["orders", "payments"] {
        let letters = photon.dead_letters(topic).await?;
        assert!(letters.is_empty(), "dead letters on {topic}: {letters:?}");
    }
    photon.shutdown().await
}
