//! The Rust examples of README.md, compiled as they are written there (`photon/tests/
//! docs_examples.rs` checks that each one is here word for word): the quick start's consume
//! loop, then the typed topic and its handler, both on the in-process store.
//!
//! Run with `cargo run -p photon --example docs_readme`.

use std::time::Duration;

use photon::PhotonError;

// The snippets keep the README's layout (aligned comments, one-line structs), which
// rustfmt would rewrite.
#[rustfmt::skip]
async fn quick_start() -> Result<(), PhotonError> {
    // docs: README/quick-start
    use photon::prelude::*;
    use serde_json::json;

    let photon = Photon::builder().build()?;                       // in-process store
    photon.publish("orders", Some("customer-7"), json!("shop"), json!({"total": 12})).await?;

    let mut billing = photon.durable("billing", "orders", None);   // resumes after its checkpoint
    while let Some(item) = billing.next().await {                  // None after photon.shutdown()
        match item {
            Ok(event) => {
                println!("{} #{}: {}", event.topic_name, event.seq, event.payload);
                billing.ack(&event).await?;                        // coalesced checkpoint
            }
            // A stored record that cannot be opened (key missing) or decoded (damaged):
            // keep it on `orders.dlq` and move on; it is never skipped silently.
            Err(err) if err.position().is_some() => billing.dead_letter(&err).await?,
            Err(err) => eprintln!("stream error: {err}"),           // e.g. backend unavailable
        }
    }
    // end docs
    Ok(())
}

#[rustfmt::skip]
async fn typed_topics_and_handlers() -> Result<(), PhotonError> {
    // docs: README/typed-topics-and-handlers
    use photon::prelude::*;
    use serde::{Deserialize, Serialize};

    #[topic(name = "orders", keyed_by = "order_id")]   // per-key order by order_id
    #[derive(Serialize, Deserialize)]                   // your own derives; #[topic] adds none
    struct Order { order_id: String, total: u32 }

    #[subscribe(durable = "billing")]                   // topic taken from the typed argument
    async fn bill(order: Order) -> Result<(), PhotonError> {
        println!("billing {} ({})", order.order_id, order.total);
        Ok(())                                          // retryable errors are retried, then dead-lettered
    }

    let photon = Photon::builder().build()?;
    Order { order_id: "o-1".into(), total: 12 }.publish_on(&photon).await?;
    let executor = photon.start_executor()?;            // every #[subscribe] handler, from its checkpoint
    executor.shutdown().await?;                         // drain in-flight handlers, commit checkpoints
    // end docs
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), PhotonError> {
    // The loop ends only when the Photon it reads from shuts down, and the Photon is the
    // loop's own: after the event is printed there is nothing more to read, so stop
    // waiting.
    if let Ok(ended) = tokio::time::timeout(Duration::from_secs(1), quick_start()).await {
        ended?;
    }
    typed_topics_and_handlers().await
}
