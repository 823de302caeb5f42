//! The Rust example of docs/guarantees.md, compiled as it is written there (`photon/tests/
//! docs_examples.rs` checks that it is here word for word): a consumer group member's
//! loop, on the in-process store.
//!
//! Run with `cargo run -p photon --example docs_guarantees`.

use std::time::Duration;

use photon::prelude::*;
use serde_json::json;

// The snippet keeps the page's layout (aligned comments), which rustfmt would rewrite.
#[rustfmt::skip]
async fn group_member(photon: Photon) -> Result<(), PhotonError> {
    // docs: guarantees/consumer-groups
    let mut workers = photon.group("billing-workers", "orders");   // or group_with(.., GroupOptions)
    while let Some(event) = workers.next().await {
        let event = event?;
        println!("{} handled by this member", event.seq);
        workers.ack(&event).await?;                    // or workers.release(&event) to give it back
    }
    // end docs
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), PhotonError> {
    let photon = Photon::builder().build()?;
    for key in ["o-1", "o-2", "o-1"] {
        photon
            .publish("orders", Some(key), json!("shop"), json!({"total": 12}))
            .await?;
    }
    // A group's stream has no end (`Photon::shutdown` ends durable streams, not groups'):
    // stop reading once the three events have had time to be handled.
    if let Ok(ended) =
        tokio::time::timeout(Duration::from_secs(1), group_member(photon.clone())).await
    {
        ended?;
    }
    photon.shutdown().await
}
