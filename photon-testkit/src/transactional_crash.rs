//! The kill test of transactional handlers, shared by the ports that run them (SQLite,
//! PostgreSQL): a consumer process whose handler inserts one row per event into the
//! user's table, in the transaction that advances the checkpoint, is killed with SIGKILL at
//! `plan.consumer_kills` random points while a publisher process publishes `plan.events`
//! events. At the end the table holds exactly one row per stored event of the topic: none
//! missing, none twice. The table must have no unique constraint, so that a repeat would
//! show as a second row.
//!
//! Each port's test brings the children (its own consumer; the publisher is
//! [`crate::crash::publisher_role`]) and reads its store through [`HandledTable`].

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use crate::crash::{read_acked, CrashPlan};
use crate::process::{Random, Spawned};

/// The subscription name the consumer's transactional handler runs under.
pub const TX_SUBSCRIPTION: &str = "tx-consumer";

/// What the test reads from the port's store once its children are gone or between kills.
#[async_trait]
pub trait HandledTable: Sync {
    /// Rows in the user's table.
    async fn rows(&self) -> i64;
    /// Ids of the events stored on the plan's topic.
    async fn stored_events(&self) -> HashSet<String>;
    /// Rows of the user's table per event id.
    async fn rows_per_event(&self) -> BTreeMap<String, i64>;
    /// Distinct consumer processes that wrote rows.
    async fn writers(&self) -> i64;
    /// The committed checkpoint of [`TX_SUBSCRIPTION`] and the topic's last seq.
    async fn checkpoint_and_head(&self) -> (i64, i64);
}

/// Runs the kill test. `start(role, log)` spawns a child running `role` (`publish` or
/// `consume`) that logs to `log`.
///
/// # Panics
/// On any lost or repeated effect, a checkpoint behind the topic's end, or when the drain
/// deadline passes.
pub async fn run_transactional_crash(
    plan: &CrashPlan,
    table: &impl HandledTable,
    start: impl Fn(&str, &Path) -> Spawned,
    logs: &Path,
) {
    let events = plan.events;
    let published_log = logs.join("published.log");
    let consumer_log = logs.join("consumer.log");
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(7, |d| d.as_nanos() as u64)
        | 1;
    println!("transactional crash test seed {seed}");
    let mut random = Random::new(seed);
    let started = Instant::now();
    let mut publisher = start("publish", &published_log);
    let mut consumer = start("consume", &consumer_log);
    let mut rows_at_kills = Vec::with_capacity(plan.consumer_kills);
    for _ in 0..plan.consumer_kills {
        tokio::time::sleep(Duration::from_millis(100 + random.below(500))).await;
        consumer.kill();
        rows_at_kills.push(table.rows().await);
        consumer = start("consume", &consumer_log);
    }
    let acked_during_kills = read_acked(&published_log).len();
    println!(
        "kill phase {:?}: {acked_during_kills} acknowledged, rows at each kill {rows_at_kills:?}",
        started.elapsed()
    );
    assert!(
        acked_during_kills < events,
        "publishing ended before the last kill: raise the events or the publish pause"
    );

    let deadline = Instant::now() + plan.drain_deadline;
    loop {
        let acked = read_acked(&published_log).len();
        let rows = table.rows().await;
        if acked == events && rows >= events as i64 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "deadline passed: {acked} of {events} acknowledged, {rows} rows"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Anything still in flight would add a row now: give it the time to show.
    tokio::time::sleep(Duration::from_millis(300)).await;
    consumer.kill();
    publisher.kill();

    let acked = read_acked(&published_log);
    let acked_ids: HashSet<String> = acked.iter().map(|a| a.event_id.clone()).collect();
    assert_eq!(acked.len(), events);
    assert_eq!(acked_ids.len(), events);
    let stored = table.stored_events().await;
    // The publisher is never killed, so every stored event was acknowledged.
    assert_eq!(stored, acked_ids);
    let rows = table.rows_per_event().await;
    let missing = stored.iter().filter(|id| !rows.contains_key(*id)).count();
    let duplicated = rows.values().filter(|&&n| n > 1).count();
    let foreign = rows.keys().filter(|id| !stored.contains(*id)).count();
    println!(
        "{} events, {} rows, {missing} missing, {duplicated} duplicated, {} consumer processes wrote rows, {:?} in all",
        stored.len(),
        rows.values().sum::<i64>(),
        table.writers().await,
        started.elapsed()
    );
    assert_eq!((missing, duplicated, foreign), (0, 0, 0));
    assert_eq!(rows.len(), events);
    assert_eq!(table.rows().await, events as i64);
    // The checkpoint is the topic's last seq: everything handled committed its advance.
    let (checkpoint, head) = table.checkpoint_and_head().await;
    assert_eq!(checkpoint, head);
}
