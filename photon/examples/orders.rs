//! Typed topic, a `#[subscribe]` handler, the executor and a graceful shutdown.
//!
//! Run with `cargo run -p photon --example orders`.

use std::sync::atomic::{AtomicUsize, Ordering};

use photon::prelude::*;
use serde::{Deserialize, Serialize};

/// An order, published on topic `orders`, keyed by its id: one order's events stay in order.
#[topic(name = "orders", keyed_by = "order_id")]
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Order {
    order_id: String,
    item: String,
    quantity: u32,
}

static HANDLED: AtomicUsize = AtomicUsize::new(0);

/// Bills each order; the durable name `billing` keeps its checkpoint across restarts.
#[subscribe(durable = "billing")]
async fn bill(order: Order) -> Result<(), PhotonError> {
    println!(
        "billing {}: {} x {}",
        order.order_id, order.quantity, order.item
    );
    HANDLED.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), PhotonError> {
    let photon = Photon::builder().build()?;
    let orders = [
        ("o-1", "tea", 2),
        ("o-2", "coffee", 1),
        ("o-1", "scones", 4),
        ("o-3", "jam", 1),
        ("o-2", "milk", 3),
        ("o-1", "honey", 1),
    ];
    for (order_id, item, quantity) in orders {
        let order = Order {
            order_id: order_id.into(),
            item: item.into(),
            quantity,
        };
        let published = order.publish_on(&photon).await?;
        println!("published {order_id} as seq {}", published.seq);
    }

    let executor = photon.start_executor()?;
    executor.wait_idle().await?; // every order published so far is billed
    executor.shutdown().await?;

    let checkpoint = photon.checkpoint("billing", "orders", None).await?;
    println!(
        "handled {} orders; billing checkpoint = {checkpoint:?}",
        HANDLED.load(Ordering::SeqCst)
    );
    let snapshot = photon.admin_snapshot().await?;
    let json = serde_json::to_string_pretty(&snapshot)
        .map_err(|e| PhotonError::codec("admin snapshot", e))?;
    println!("{json}");
    photon.shutdown().await
}
