//! The SQLite examples of docs/transactions.md, compiled as they are written there
//! (`photon/tests/docs_examples.rs` checks that each one is here word for word): a
//! transactional handler registered on the executor builder, and one declared with
//! `#[subscribe(transactional)]` (feature `sqlite`).
//!
//! Run with `cargo run -p photon --example docs_transactions_sqlite --features sqlite`:
//! its database files go to a temporary directory.

use std::sync::Arc;

use photon::prelude::*;
use photon::runtime::HandlerOptions;
use photon::sqlite::{sqlite_error, SqliteStoragePort, SqliteTransaction};
use serde_json::json;

/// A payment to book, on topic `payments`.
#[topic(name = "payments", keyed_by = "id")]
#[derive(serde::Serialize, serde::Deserialize)]
struct Payment {
    id: String,
    cents: i64,
}

// The snippet keeps the page's layout, which rustfmt would rewrite.
#[rustfmt::skip]
// docs: transactions/sqlite-declared
#[subscribe(durable = "ledger", transactional)]
fn book(tx: &SqliteTransaction<'_>, payment: Payment) -> Result<(), PhotonError> {
    tx.execute("INSERT INTO ledger (id, cents) VALUES (?1, ?2)", (&payment.id, payment.cents))
        .map_err(|e| sqlite_error("book a payment", e))?;
    Ok(())
}
// end docs

/// Creates the table a handler writes to, in the port's database.
async fn create_table(port: &SqliteStoragePort, columns: &'static str) -> Result<(), PhotonError> {
    port.transaction(move |tx| {
        tx.execute_batch(&format!("CREATE TABLE IF NOT EXISTS ledger ({columns})"))
            .map_err(|e| sqlite_error("create the ledger", e))
    })
    .await
}

// The snippet keeps the page's layout (aligned comments, a long line), which rustfmt
// would rewrite.
#[rustfmt::skip]
async fn registered() -> Result<(), PhotonError> {
    // docs: transactions/sqlite
    use photon::sqlite::{sqlite_error, transactional_handler, SqliteStoragePort};

    let port = SqliteStoragePort::builder().path("shop.db").build().await?;
    let photon = Photon::builder().storage_port(port.clone()).build()?;
    let ledger = transactional_handler(|tx, event| {      // tx: &SqliteTransaction, on the writer thread
        tx.execute("INSERT INTO ledger (event_id) VALUES (?1)", [&event.event_id])
            .map_err(|e| sqlite_error("insert into the ledger", e))?;
        Ok(())                                            // commits with the checkpoint advance
    });
    let executor = photon
        .executor()
        .transactional_handler(HandlerOptions::new("ledger", "orders"), Arc::new(port.clone()), ledger)
        .start()?;
    // end docs
    create_table(&port, "event_id TEXT NOT NULL").await?;
    photon.publish("orders", Some("o-1"), json!("shop"), json!({"total": 12})).await?;
    executor.wait_idle().await?;
    println!("ledger: orders up to {:?}", photon.checkpoint("ledger", "orders", None).await?);
    executor.shutdown().await?;
    photon.shutdown().await
}

async fn declared() -> Result<(), PhotonError> {
    let port = SqliteStoragePort::builder()
        .path("payments.db")
        .build()
        .await?;
    create_table(&port, "id TEXT NOT NULL, cents INTEGER NOT NULL").await?;
    let photon = Photon::builder().storage_port(port).build()?;
    Payment {
        id: "p-1".into(),
        cents: 250,
    }
    .publish_on(&photon)
    .await?;
    let executor = photon.start_executor()?;
    executor.wait_idle().await?;
    println!(
        "ledger: payments up to {:?}",
        photon.checkpoint("ledger", "payments", None).await?
    );
    executor.shutdown().await?;
    photon.shutdown().await
}

#[tokio::main]
async fn main() -> Result<(), PhotonError> {
    // The page's relative paths (`shop.db`) land in a directory of the run's own.
    let directory = tempfile::tempdir().expect("a temporary directory");
    std::env::set_current_dir(directory.path()).expect("the temporary directory is usable");
    registered().await?;
    declared().await
}
