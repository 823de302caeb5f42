//! Batch handlers: a `#[subscribe]` function called with up to 50 orders at once (or what
//! arrived within 20 ms of a batch's first), and the same on the executor builder.
//!
//! Run with `cargo run -p photon --example batch_handlers`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use photon::prelude::*;
use photon::runtime::HandlerOptions;
use serde::{Deserialize, Serialize};

/// An order, keyed by its id: one order's events stay in order, in a batch and across them.
#[topic(name = "orders", keyed_by = "order_id")]
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Order {
    order_id: String,
    quantity: u32,
}

/// Where the batches are written: a stand-in for a database that prefers one insert of
/// many rows to many inserts of one.
#[derive(Clone, Default)]
struct Warehouse;

impl Warehouse {
    async fn insert_many(&self, rows: &[(String, u32)]) -> Result<(), PhotonError> {
        println!("inserting {} rows, from {:?}", rows.len(), rows.first());
        Ok(())
    }
}

static ROWS: AtomicUsize = AtomicUsize::new(0);

/// Writes each batch with one insert; the batch is acknowledged once this returns `Ok`,
/// and retried whole if it fails.
#[subscribe(durable = "warehouse", batch_max = 50, batch_wait = "20ms")]
async fn store(
    orders: Vec<TypedEvent<Order>>,
    State(warehouse): State<Warehouse>,
) -> Result<(), PhotonError> {
    let rows: Vec<(String, u32)> = orders
        .iter()
        .map(|order| (order.value.order_id.clone(), order.value.quantity))
        .collect();
    warehouse.insert_many(&rows).await?;
    ROWS.fetch_add(rows.len(), Ordering::SeqCst);
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), PhotonError> {
    let photon = Photon::builder().state(Warehouse).build()?;
    for n in 0..120u32 {
        let order = Order {
            order_id: format!("o-{}", n % 7),
            quantity: n,
        };
        order.publish_on(&photon).await?;
    }

    // The same on the builder, over raw events: counts them per batch.
    let executor = photon
        .executor()
        .declared_handlers()
        .batch_handler(
            HandlerOptions::new("counter", "orders"),
            BatchPolicy::new(100, Duration::from_millis(10)),
            |events: Vec<Event>| async move {
                println!(
                    "counted a batch of {} (seqs {} to {})",
                    events.len(),
                    events[0].seq,
                    events[events.len() - 1].seq
                );
            },
        )
        .start()?;
    executor.wait_idle().await?;
    executor.shutdown().await?;
    println!("stored {} rows", ROWS.load(Ordering::SeqCst));
    photon.shutdown().await
}
