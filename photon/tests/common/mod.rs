//! The payment ledger both transactional handler tests book into, and the run they share:
//! only the port and how its `ledger` table is read differ between SQLite and PostgreSQL.

use photon::prelude::*;
use serde::{Deserialize, Serialize};

#[topic(name = "payments", keyed_by = "payment_id")]
#[derive(Serialize, Deserialize)]
pub struct Payment {
    pub payment_id: String,
    pub cents: i64,
}

async fn pay(photon: &Photon, id: &str, cents: i64) {
    Payment {
        payment_id: id.into(),
        cents,
    }
    .publish_on(photon)
    .await
    .unwrap();
}

/// On a plaintext Photon over `port` (its `ledger` table created): publishes three
/// payments (the second negative, which the `ledger` handler refuses for good), runs the
/// executor until idle and checks the booked rows, the dead letter and the checkpoint;
/// then starts the executor again with a fourth payment and checks that only that one is
/// added. `ledger` reads the booked rows in booking order.
pub async fn books_each_payment_once<F, Fut>(port: impl photon::core::StoragePort, ledger: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Vec<(String, i64)>>,
{
    let photon = &Photon::builder()
        .storage_port(port)
        .transport_crypto(photon::TransportCrypto::plaintext())
        .build()
        .unwrap();
    for (id, cents) in [("p-1", 100), ("p-2", -5), ("p-3", 300)] {
        pay(photon, id, cents).await;
    }
    let executor = photon.start_executor().unwrap();
    executor.wait_idle().await.unwrap();
    assert_eq!(
        ledger().await,
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

    // Started again on the same store: everything is covered, nothing is booked twice.
    let executor = photon.start_executor().unwrap();
    pay(photon, "p-4", 400).await;
    executor.wait_idle().await.unwrap();
    assert_eq!(
        ledger().await,
        vec![
            ("p-1".to_owned(), 100),
            ("p-3".to_owned(), 300),
            ("p-4".to_owned(), 400)
        ]
    );
    executor.shutdown().await.unwrap();
}
