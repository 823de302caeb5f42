//! `#[subscribe(durable = "...", transactional)]` as an application writes it: a plain fn
//! of the SQLite transaction and a typed event, started by `Photon::start_executor`, its
//! row and the checkpoint advance committed together.

use std::time::Duration;

use photon::prelude::*;
use photon::sqlite::rusqlite::Connection;
use photon::sqlite::{sqlite_error, SqliteStoragePort, SqliteTransaction};
use serde::{Deserialize, Serialize};

#[topic(name = "payments", keyed_by = "payment_id")]
#[derive(Serialize, Deserialize)]
struct Payment {
    payment_id: String,
    cents: i64,
}

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
    let photon = Photon::builder()
        .storage_port(port)
        .transport_crypto(photon::TransportCrypto::plaintext())
        .build()
        .unwrap();
    for (id, cents) in [("p-1", 100), ("p-2", -5), ("p-3", 300)] {
        Payment {
            payment_id: id.into(),
            cents,
        }
        .publish_on(&photon)
        .await
        .unwrap();
    }
    let executor = photon.start_executor().unwrap();
    executor.wait_idle().await.unwrap();
    assert_eq!(
        ledger(&db),
        vec![("p-1".to_owned(), 100), ("p-3".to_owned(), 300)]
    );
    let letters = photon.dead_letters("payments").await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].original.key.as_deref(), Some("p-2"));
    assert_eq!(
        photon.checkpoint("ledger", "payments", None).await.unwrap(),
        Some(3)
    );
    executor.shutdown().await.unwrap();

    // Started again on the same file: everything is covered, nothing is booked twice.
    let executor = photon.start_executor().unwrap();
    Payment {
        payment_id: "p-4".into(),
        cents: 400,
    }
    .publish_on(&photon)
    .await
    .unwrap();
    executor.wait_idle().await.unwrap();
    assert_eq!(ledger(&db).len(), 3);
    assert_eq!(ledger(&db)[2], ("p-4".to_owned(), 400));
    executor.shutdown().await.unwrap();
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
