//! The Rust example of docs/testing.md, compiled as it is written there (`photon/tests/
//! docs_examples.rs` checks that it is here word for word): `photon::testing`'s test Photon,
//! `Recorder` and `FailFirst` around a `#[subscribe]` function (feature `testing`).
//!
//! Run with `cargo run -p photon --example docs_testing --features testing`.

use photon::prelude::*;

/// The page's typed topic.
#[topic(name = "orders", keyed_by = "order_id")]
#[derive(Clone, serde::Serialize, serde::Deserialize)]
struct Order {
    order_id: String,
    total: u32,
}

/// The handler under test.
#[subscribe(durable = "billing")]
async fn bill(order: Order) -> Result<(), PhotonError> {
    println!("billing {} ({})", order.order_id, order.total);
    Ok(())
}

// The snippet keeps the page's layout (aligned comments), which rustfmt would rewrite.
#[rustfmt::skip]
async fn testing_your_handlers() -> Result<(), PhotonError> {
    // docs: testing/testing-your-handlers
    use photon::prelude::*;
    use photon::testing::{self, FailFirst, Recorder};

    let photon = testing::photon()?;
    let billed = Recorder::new();
    let flaky = FailFirst::new(2).when(|event| event.topic_key.as_deref() == Some("o-2"));
    let executor = photon
        .executor()
        .handler("billing", Order::TOPIC, flaky.wrap(billed.wrap(testing::typed(bill))))
        .start()?;
    Order { order_id: "o-2".into(), total: 12 }.publish_on(&photon).await?;
    executor.wait_idle().await?;
    assert_eq!(billed.len(), 1);                        // handled on its third attempt
    assert_eq!(photon.admin_snapshot().await?.handlers[0].retries, 2);
    // end docs
    executor.shutdown().await
}

#[tokio::main]
async fn main() -> Result<(), PhotonError> {
    testing_your_handlers().await
}
