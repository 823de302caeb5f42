//! `photon demo`: durable delivery on the in-process store, with a resume half-way.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use clap::Args;
use photon::prelude::*;
use serde_json::json;

/// Options of `photon demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Events to publish.
    #[arg(long, default_value_t = 1000)]
    events: usize,
    /// Distinct keys (partitions).
    #[arg(long, default_value_t = 10)]
    keys: usize,
}

const TOPIC: &str = "demo.orders";
const SUBSCRIPTION: &str = "demo-billing";

/// What a consumer saw: `(key, order number)` in delivery order.
type Deliveries = Vec<(String, i64)>;

/// Runs the demo.
///
/// # Errors
/// Any Photon error, or a broken delivery guarantee.
pub async fn run(args: DemoArgs) -> Result<(), PhotonError> {
    if args.events == 0 || args.keys == 0 {
        return Err(PhotonError::InvalidInput(
            "--events and --keys must be at least 1".into(),
        ));
    }
    let photon = Photon::builder().build()?;
    println!(
        "photon demo: in-process store, topic {TOPIC}, {} keys",
        args.keys
    );
    for n in 0..args.events {
        let key = format!("customer-{}", n % args.keys);
        photon
            .publish(
                TOPIC,
                Some(&key),
                json!({"service": "shop"}),
                json!({"order": n, "amount": n * 3}),
            )
            .await?;
    }
    println!("published {} events", args.events);

    let half = args.events / 2;
    let first = consume(&photon, Some(half)).await?;
    println!(
        "consumer run 1: handled {} events, then dropped (checkpoint flushed on drop)",
        first.len()
    );
    let checkpoint = wait_for_checkpoint(&photon, half as i64).await?;
    println!("stored checkpoint: seq {checkpoint}");

    let second = consume(&photon, None).await?;
    println!(
        "consumer run 2: resumed after seq {checkpoint}, handled {} events",
        second.len()
    );

    verify(args.events, &first, &second)
}

async fn consume(photon: &Photon, limit: Option<usize>) -> Result<Deliveries, PhotonError> {
    let mut subscription = photon.durable(SUBSCRIPTION, TOPIC, None);
    let mut seen = Deliveries::new();
    while limit.is_none_or(|limit| seen.len() < limit) {
        let next = tokio::time::timeout(Duration::from_millis(500), subscription.next()).await;
        let Ok(Some(item)) = next else { break };
        let event = item?;
        let order = event.payload["order"].as_i64().unwrap_or(-1);
        seen.push((event.topic_key.clone().unwrap_or_default(), order));
        subscription.ack(&event).await?;
    }
    Ok(seen)
}

async fn wait_for_checkpoint(photon: &Photon, expected: i64) -> Result<i64, PhotonError> {
    for _ in 0..100 {
        if let Some(seq) = photon.checkpoint(SUBSCRIPTION, TOPIC, None).await? {
            if seq >= expected {
                return Ok(seq);
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err(PhotonError::InvalidInput(format!(
        "checkpoint did not reach {expected}"
    )))
}

fn verify(events: usize, first: &Deliveries, second: &Deliveries) -> Result<(), PhotonError> {
    let all: Vec<&(String, i64)> = first.iter().chain(second).collect();
    let unique: HashSet<i64> = all.iter().map(|(_, order)| *order).collect();
    let missing = (0..events as i64).filter(|n| !unique.contains(n)).count();
    let duplicates = all.len() - unique.len();
    let mut per_key: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for (key, order) in &all {
        per_key.entry(key).or_default().push(*order);
    }
    let out_of_order = per_key
        .values()
        .filter(|orders| orders.windows(2).any(|w| w[0] >= w[1]))
        .count();
    println!(
        "delivered {} of {events} events: missing {missing}, duplicates {duplicates}, keys out of order {out_of_order} of {}",
        unique.len(),
        per_key.len()
    );
    if missing > 0 || out_of_order > 0 {
        return Err(PhotonError::InvalidInput(
            "delivery guarantee broken".into(),
        ));
    }
    println!("nothing lost: every event delivered, per-key order kept");
    Ok(())
}
