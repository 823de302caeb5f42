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

use photon_core::EventStore;

use crate::crash::{publisher_role, read_acked, spawn_role, CrashPlan};
use crate::process::{Random, Spawned};

/// The subscription name the consumer's transactional handler runs under.
pub const TX_SUBSCRIPTION: &str = "tx-consumer";

/// The plan of every port's transactional kill test: 4,000 events on 16 keys of `topic`,
/// the consumer killed 24 times, the publisher never (so that every stored event was
/// acknowledged); `drain_deadline` is the backend's own.
#[must_use]
pub fn kill_plan(topic: &str, drain_deadline: Duration) -> CrashPlan {
    CrashPlan {
        topic: topic.into(),
        events: 4_000,
        keys: 16,
        consumer_kills: 24,
        publisher_kills_at: Vec::new(),
        midpoint: 0,
        drain_deadline,
        publish_pause: Duration::from_millis(25),
    }
}

/// The child of [`run_located_transactional_crash`], if `env` is set: parses
/// `<role>|<log>|<location>`; role `publish` runs the crash publisher on the store
/// `store(location)` returns, any other role runs `consume(location)`, both until killed.
/// Call it from an ignored test named `crash_role`.
///
/// # Panics
/// When the variable is malformed or the runtime cannot start.
pub fn located_role<S, C>(
    env: &str,
    plan: &CrashPlan,
    store: impl FnOnce(String) -> S,
    consume: impl FnOnce(String) -> C,
) where
    S: std::future::Future<Output = EventStore>,
    C: std::future::Future<Output = ()>,
{
    let Ok(spec) = std::env::var(env) else {
        return;
    };
    let parts: Vec<&str> = spec.splitn(3, '|').collect();
    let [role, log, location] = parts[..] else {
        panic!("bad {env}: {spec}");
    };
    let runtime = crate::process::child_runtime();
    runtime.block_on(async {
        match role {
            "publish" => publisher_role(store(location.to_owned()).await, plan, log.into()).await,
            _ => consume(location.to_owned()).await,
        }
    });
}

/// A plaintext runtime on `port`, for the consumer child: its handler may need the runtime
/// (to publish) before [`handle_until_killed`] starts it.
///
/// # Panics
/// When the runtime cannot be built.
pub fn consumer_runtime(port: impl photon_core::StoragePort) -> photon_runtime::Photon {
    photon_runtime::Photon::builder()
        .storage_port(port)
        .transport_crypto(photon_core::TransportCrypto::plaintext())
        .build()
        .expect("a runtime on the port")
}

/// The consumer child's work: `handler` as the transactional handler of
/// [`TX_SUBSCRIPTION`] on `plan.topic`, run by `photon`'s executor on `port`, until the
/// process is killed.
///
/// # Panics
/// When the executor does not start.
pub async fn handle_until_killed<P: photon_core::TransactionalPort>(
    photon: &photon_runtime::Photon,
    plan: &CrashPlan,
    port: P,
    handler: std::sync::Arc<P::Handler>,
) {
    let _executor = photon
        .executor()
        .transactional_handler(
            photon_runtime::HandlerOptions::new(TX_SUBSCRIPTION, &plan.topic),
            std::sync::Arc::new(port),
            handler,
        )
        .start()
        .expect("the executor starts");
    std::future::pending::<()>().await;
}

/// Expands to the ignored test `crash_role`, the child of a port's transactional kill test:
/// [`located_role`] with the role variable `env`, the plan, the publisher's `store` and the
/// `consume` function (each given the location).
///
/// ```ignore
/// photon_testkit::transactional_crash_child!(
///     ROLE_ENV,
///     plan(),
///     store: |db| async move { open_store(&db) },
///     consume: |db| async move { consume(&db).await },
/// );
/// ```
#[macro_export]
macro_rules! transactional_crash_child {
    ($env:expr, $plan:expr, store: $store:expr, consume: $consume:expr $(,)?) => {
        /// A child: the publisher or the consumer, until killed.
        #[test]
        #[ignore = "child process of transactional_consumer_killed_at_random_points"]
        fn crash_role() {
            $crate::transactional_crash::located_role($env, &$plan, $store, $consume);
        }
    };
}

/// [`run_transactional_crash`] with children that work on `location` (a file, a schema:
/// whatever the port's [`located_role`] reads), started by [`spawn_role`] with the spec in
/// `env`.
///
/// # Panics
/// As [`run_transactional_crash`].
pub async fn run_located_transactional_crash(
    plan: &CrashPlan,
    table: &impl HandledTable,
    env: &str,
    location: &str,
    logs: &Path,
) {
    let start = |role: &str, log: &Path| {
        Spawned::new(spawn_role(
            env,
            format!("{role}|{}|{location}", log.display()),
        ))
    };
    run_transactional_crash(plan, table, start, logs).await;
}

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
