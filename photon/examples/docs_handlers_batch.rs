//! The batch handler example of docs/handlers.md, compiled as it is written there
//! (`photon/tests/docs_examples.rs` checks it is here word for word), on the in-process
//! store.
//!
//! Run with `cargo run -p photon --example docs_handlers_batch`.

use photon::prelude::*;

/// An order, keyed by its id.
#[topic(name = "orders", keyed_by = "order_id")]
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Order {
    order_id: String,
    total: u32,
}

/// The page's stand-in for a database that prefers one insert of many rows.
#[derive(Clone)]
struct Db;

impl Db {
    async fn insert_many<'a>(
        &self,
        orders: impl Iterator<Item = &'a Order>,
    ) -> Result<(), PhotonError> {
        println!("inserting {} orders", orders.count());
        Ok(())
    }
}

/// The same for raw events.
async fn insert_many(events: &[Event]) -> Result<(), PhotonError> {
    println!("inserting {} events", events.len());
    Ok(())
}

// The snippet keeps the page's layout, which rustfmt would rewrite.
#[rustfmt::skip]
async fn batches(photon: &Photon) -> Result<Executor, PhotonError> {
    // docs: handlers/batch
    use std::time::Duration;
    use photon::prelude::*;
    use photon::runtime::HandlerOptions;

    #[subscribe(durable = "warehouse", batch_max = 100, batch_wait = "50ms")]
    async fn store(orders: Vec<TypedEvent<Order>>, State(db): State<Db>) -> Result<(), PhotonError> {
        db.insert_many(orders.iter().map(|order| &order.value)).await
    }

    // The same on the builder, over raw events:
    let executor = photon
        .executor()
        .batch_handler(
            HandlerOptions::new("warehouse", "orders"),
            BatchPolicy::new(100, Duration::from_millis(50)),
            |events: Vec<Event>| async move { insert_many(&events).await },
        )
        .start()?;
    // end docs
    Ok(executor)
}

#[tokio::main]
async fn main() -> Result<(), PhotonError> {
    let photon = Photon::builder().state(Db).build()?;
    for n in 0..10 {
        let order = Order {
            order_id: format!("o-{}", n % 3),
            total: n,
        };
        order.publish_on(&photon).await?;
    }
    let declared = photon.start_executor()?;
    declared.wait_idle().await?;
    declared.shutdown().await?;
    let built = batches(&photon).await?;
    built.wait_idle().await?;
    built.shutdown().await?;
    photon.shutdown().await
}
