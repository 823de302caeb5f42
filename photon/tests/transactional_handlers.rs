//! `#[subscribe(durable = "...", transactional)]` as an application writes it: a plain fn
//! of the SQLite transaction and a typed event, started by `Photon::start_executor`, its
//! row and the checkpoint advance committed together.

mod common;

use std::time::Duration;

use common::{books_each_payment_once, Payment};
use photon::prelude::*;
use photon::sqlite::rusqlite::Connection;
use photon::sqlite::{sqlite_error, SqliteStoragePort, SqliteTransaction};
#[subscribe(durable = "ledger", transactional)]
fn book(tx: &SqliteTransaction<'_>, payment: Payment) -> Result<(), PhotonError> {
    if payment.cents < 0 {
        return Err(PhotonError::handler_permanent("negative amount"));
    }
    tx.execute(
        "INSERT INTO ledger (payment_id, cents) VALUES (?1, ?2)",
        (&payment.payment_id, payment.cents),
    )
    .map_err(|e| sqlite_error("book a payment", e))?;
    Ok(())
}

fn ledger(db: &std::path::Path) -> Vec<(String, i64)> {
    let connection = Connection::open(db).unwrap();
    let mut statement = connection
        .prepare("SELECT payment_id, cents FROM ledger ORDER BY rowid")
        .unwrap();
    let rows = statement
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_transactional_handler_books_each_payment_once() {
    let directory = tempfile::tempdir().unwrap();
    let db = directory.path().join("ledger.db");
    let port = SqliteStoragePort::builder()
        .path(&db)
        .poll_interval(Duration::from_millis(20))
        .build()
        .await
        .unwrap();
    port.transaction(|tx| {
        tx.execute_batch("CREATE TABLE ledger (payment_id TEXT NOT NULL, cents INTEGER NOT NULL)")
            .map_err(|e| sqlite_error("create the ledger", e))
    })
    .await
    .unwrap();
    books_each_payment_once(port, || std::future::ready(ledger(&db))).await;
}

#[tokio::test]
async fn a_declared_transactional_handler_needs_its_port() {
    let photon = photon::testing::photon().unwrap();
    match photon.start_executor() {
        Err(PhotonError::InvalidInput(message)) => {
            assert!(message.contains("::book is transactional on"), "{message}");
            assert!(message.contains("SqliteStoragePort"), "{message}");
            assert!(message.contains("the mem port"), "{message}");
        }
        other => panic!("expected InvalidInput, got {:?}", other.map(|_| ())),
    }
}
