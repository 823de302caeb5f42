//! The Rust example of docs/backends/postgres.md, compiled as it is written there
//! (`photon/tests/docs_examples.rs` checks that it is here word for word): a `Photon` on a
//! PostgreSQL schema (feature `postgres`).
//!
//! Needs the server of the page's URL (`postgres://app@127.0.0.1:5432/app`). Run with
//! `cargo run -p photon --example docs_backends_postgres --features postgres`.

use photon::prelude::*;
use serde_json::json;

async fn open() -> Result<Photon, PhotonError> {
    // docs: backends/postgres
    use photon::postgres::PostgresStoragePort;

    let port = PostgresStoragePort::builder()
        .url("postgres://app@127.0.0.1:5432/app")
        .schema("events")
        .build()
        .await?;
    let photon = Photon::builder().storage_port(port).build()?;
    // end docs
    Ok(photon)
}

#[tokio::main]
async fn main() -> Result<(), PhotonError> {
    let photon = open().await?;
    let appended = photon
        .publish("orders", Some("o-1"), json!("shop"), json!({"total": 12}))
        .await?;
    println!("stored as seq {}", appended.seq);
    photon.shutdown().await
}
