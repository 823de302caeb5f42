//! Delayed delivery across real processes ([`GroupProcesses::delayed_survive_kills`]): the
//! publishing processes run the scheduler and are killed with SIGKILL while it appends,
//! and the scheduler moves between processes.
//!
//! 1. Process P1 publishes 1,500 events for later (each due 1.5 to 9.5 s after its
//!    publish, 16 keys) and runs the scheduler; the test waits until P1 holds the
//!    scheduler's lease, starts a standby scheduler of its own (A), and SIGKILLs P1 once it
//!    logged 1,000 publishes and 50 events arrived: A takes over.
//! 2. Process P2 publishes 500 more; once they are logged and A (or P2: on a sharded
//!    topic the assignment may give it the schedule's partition) holds the lease, A shuts
//!    down (P2 takes over at once); once P2 appended 50 events, P2 is SIGKILLed and a new
//!    scheduler in the test (B) takes over.
//!
//! From the publishers' logs (`scheduled <n> <due_ms>` after each publish returned) and
//! the arrivals seen by a subscriber in the test: every logged event arrives, besides them
//! only the event P1 was publishing when killed; none arrives before its time; no event is
//! repeated on a store with atomic batches (an appended event is stored with its mark),
//! and elsewhere at most the batch a SIGKILLed scheduler was appending; each key's
//! events arrive in due-time order; and each arrives within 1 s of its time, except those
//! due while no scheduler ran (from a kill to the lease's end and the takeover, or a
//! hand-over), which arrive within the lease + 3 s.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use futures::future::BoxFuture;
use futures::StreamExt;
use photon_core::{StoragePort, TransportCrypto};
use photon_runtime::schedule::APPEND_BATCH;
use photon_runtime::{Photon, SchedulerConfig};
use rand::Rng;
use serde_json::json;

use crate::group_processes::{one_at_a_time, GroupProcesses, Log, LEASE};
use crate::process::Spawned;

const TOPIC: &str = "delayed.reminders";
const SCHEDULE: &str = "delayed.schedule";
const SCHEDULER_GROUP: &str = "delayed-scheduler";
const KEYS: usize = 16;
/// An event is due at least this long after its publish.
const MIN_DELAY_MS: i64 = 1_500;
/// ... and at most this much later again.
const SPREAD_MS: i64 = 8_000;
/// How late an event may arrive when a scheduler was running at its time.
const ON_TIME_MS: i64 = 1_000;
/// How late an event due while no scheduler ran may arrive, past the lease.
const TAKEOVER_MS: i64 = 3_000;
/// Longest wait for any one stage.
const STAGE: Duration = Duration::from_secs(30);

fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

/// A `Photon` on the backend with the test's schedule.
async fn photon(port: Arc<dyn StoragePort>) -> Photon {
    Photon::builder()
        .shared_storage_port(port)
        .transport_crypto(TransportCrypto::plaintext())
        .scheduler(
            SchedulerConfig::default()
                .topic(SCHEDULE)
                .group(SCHEDULER_GROUP)
                .lease(LEASE),
        )
        .build()
        .unwrap()
}

/// The child role `delayed|location|log|first|count|per_second`: starts its scheduler,
/// publishes events `first..first + count` for later, logging each, then keeps its
/// scheduler running until killed.
pub(crate) async fn publisher(
    port: BoxFuture<'static, Arc<dyn StoragePort>>,
    log: &str,
    args: &[String],
) {
    let first: u64 = args[0].parse().unwrap();
    let count: u64 = args[1].parse().unwrap();
    let per_second: u64 = args[2].parse().unwrap();
    let photon = photon(port.await).await;
    photon.start_scheduler().unwrap();
    let mut log = Log::open(log);
    let pause = Duration::from_micros(1_000_000 / per_second.max(1));
    for n in first..first + count {
        let offset = rand::thread_rng().gen_range(0..SPREAD_MS);
        let at = Utc::now() + chrono::Duration::milliseconds(MIN_DELAY_MS + offset);
        let key = format!("k{}", n % KEYS as u64);
        let payload = json!({"n": n, "due_ms": at.timestamp_millis()});
        let scheduled = photon
            .publish_at(TOPIC, Some(&key), json!(null), payload, at)
            .await
            .unwrap();
        log.line(&format!(
            "scheduled {n} {}",
            scheduled.due_at.timestamp_millis()
        ));
        tokio::time::sleep(pause).await;
    }
    log.sync();
    std::future::pending::<()>().await;
}

/// One arrival at the test's subscriber.
#[derive(Debug, Clone, Copy)]
struct Arrival {
    n: u64,
    key: usize,
    due_ms: i64,
    at_ms: i64,
}

/// `n -> due_ms` of a publisher's log.
fn logged(path: &std::path::Path) -> BTreeMap<u64, i64> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let mut words = line.split(' ');
            (words.next()? == "scheduled").then_some(())?;
            Some((words.next()?.parse().ok()?, words.next()?.parse().ok()?))
        })
        .collect()
}

/// Waits (bounded by [`STAGE`]) until `done` holds, naming `what` and the last state
/// `done` described when it does not.
async fn until(what: &str, mut done: impl AsyncFnMut() -> Result<(), String>) {
    let deadline = tokio::time::Instant::now() + STAGE;
    while let Err(state) = done().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not within {STAGE:?}; last seen: {state}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `Ok` when `holds`, else the state `describe` gives.
fn seen(holds: bool, describe: impl FnOnce() -> String) -> Result<(), String> {
    if holds {
        Ok(())
    } else {
        Err(describe())
    }
}

impl GroupProcesses {
    fn spawn_delayed(
        &self,
        log: &std::path::Path,
        first: u64,
        count: u64,
        per_second: u64,
    ) -> Spawned {
        self.spawn(&format!(
            "delayed|{}|{}|{first}|{count}|{per_second}",
            self.location,
            log.display()
        ))
    }

    /// Delayed events through two SIGKILLed publishing processes that ran the scheduler
    /// (see the module docs).
    ///
    /// # Panics
    /// When a check fails.
    pub async fn delayed_survive_kills(&self) {
        let _alone = one_at_a_time().await;
        let watcher = photon((self.open)(self.location.clone()).await).await;
        let arrivals: Arc<Mutex<Vec<Arrival>>> = Arc::default();
        let mut stream = watcher.subscribe(TOPIC, None, None);
        let collect = tokio::spawn({
            let arrivals = Arc::clone(&arrivals);
            async move {
                while let Some(event) = stream.next().await {
                    let event = event.unwrap();
                    let arrival = Arrival {
                        n: event.payload["n"].as_u64().unwrap(),
                        key: event.topic_key.unwrap()[1..].parse().unwrap(),
                        due_ms: event.payload["due_ms"].as_i64().unwrap(),
                        at_ms: now_ms(),
                    };
                    arrivals.lock().unwrap().push(arrival);
                }
            }
        });
        let arrived = || arrivals.lock().unwrap().len();
        let owner = async |photon: &Photon| -> Option<String> {
            let status = photon.group_status(SCHEDULER_GROUP, SCHEDULE).await.ok()?;
            let first = status.partitions.into_iter().find(|p| p.partition == 0)?;
            first.owner
        };
        let owned_by = |pid: u32| {
            move |owner: &Option<String>| {
                owner
                    .as_deref()
                    .is_some_and(|name| name.starts_with(&format!("scheduler-{pid}-")))
            }
        };
        // (from, to) in ms: no scheduler appended in between.
        let mut gaps: Vec<(i64, i64)> = Vec::new();

        let first_log = self.dir.join("delayed-1.log");
        let mut first = self.spawn_delayed(&first_log, 0, 1_500, 500);
        let first_pid = first.id();
        until("P1 holds the scheduler's lease", async || {
            let owner = owner(&watcher).await;
            seen(owned_by(first_pid)(&owner), || format!("owner {owner:?}"))
        })
        .await;
        let standby = photon((self.open)(self.location.clone()).await).await;
        standby.start_scheduler().unwrap();
        until(
            "P1 logged 1,000 publishes and 50 events arrived",
            async || {
                let (logged, arrived) = (logged(&first_log).len(), arrived());
                seen(logged >= 1_000 && arrived >= 50, || {
                    format!("{logged} logged, {arrived} arrived")
                })
            },
        )
        .await;
        first.kill();
        let killed = now_ms();
        gaps.push((killed, killed + i64::try_from(LEASE.as_millis()).unwrap()));

        let second_log = self.dir.join("delayed-2.log");
        let mut second = self.spawn_delayed(&second_log, 1_500, 500, 250);
        let second_pid = second.id();
        let me = std::process::id();
        // On a sharded topic the schedule has a partition per shard and its entries are in
        // partition 0, which the assignment may give to P2 rather than A.
        let mut holder = None;
        until(
            "A or P2 holds the lease and P2 logged 500 publishes",
            async || {
                let (logged, owner) = (logged(&second_log).len(), owner(&watcher).await);
                holder = owner.clone();
                seen(
                    logged == 500 && (owned_by(me)(&owner) || owned_by(second_pid)(&owner)),
                    || format!("{logged} logged, owner {owner:?}"),
                )
            },
        )
        .await;
        let handed = now_ms();
        standby.shutdown().await.unwrap();
        if owned_by(me)(&holder) {
            until("P2 holds the lease", async || {
                let owner = owner(&watcher).await;
                seen(owned_by(second_pid)(&owner), || format!("owner {owner:?}"))
            })
            .await;
            gaps.push((handed, now_ms()));
        }
        let before = arrived();
        until("P2 appended 50 events", async || {
            let arrived = arrived();
            seen(arrived >= before + 50, || {
                format!("{arrived} arrived, {before} before")
            })
        })
        .await;
        second.kill();
        let killed = now_ms();
        gaps.push((killed, killed + i64::try_from(LEASE.as_millis()).unwrap()));
        let last = photon((self.open)(self.location.clone()).await).await;
        last.start_scheduler().unwrap();

        let mut published = logged(&first_log);
        let second_published = logged(&second_log);
        assert_eq!(second_published.len(), 500, "P2 logged every publish");
        published.extend(second_published);
        let in_flight = logged(&first_log).keys().max().map_or(0, |n| n + 1);
        let deadline = tokio::time::Instant::now()
            + Duration::from_millis(u64::try_from(MIN_DELAY_MS + SPREAD_MS).unwrap())
            + STAGE;
        loop {
            let seen: std::collections::HashSet<u64> =
                arrivals.lock().unwrap().iter().map(|a| a.n).collect();
            if published.keys().all(|n| seen.contains(n)) {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} of {} logged events arrived",
                published.keys().filter(|n| seen.contains(n)).count(),
                published.len()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // A repeat of the last appends shows up here if it comes at all.
        tokio::time::sleep(LEASE).await;
        last.shutdown().await.unwrap();
        collect.abort();
        let arrivals = arrivals.lock().unwrap().clone();

        let early: Vec<&Arrival> = arrivals.iter().filter(|a| a.at_ms < a.due_ms).collect();
        assert_eq!(early.len(), 0, "arrived before their time: {early:?}");
        let mut firsts: HashMap<u64, Arrival> = HashMap::new();
        for arrival in &arrivals {
            firsts.entry(arrival.n).or_insert(*arrival);
        }
        let unlogged: Vec<u64> = firsts
            .keys()
            .filter(|n| !published.contains_key(n))
            .copied()
            .collect();
        assert!(
            unlogged.is_empty() || unlogged == [in_flight],
            "arrived unlogged: {unlogged:?} (P1 was publishing {in_flight})"
        );
        let repeats = arrivals.len() - firsts.len();
        println!(
            "delayed_survive_kills: {} arrivals, {} events, {repeats} repeats, gaps {gaps:?}",
            arrivals.len(),
            firsts.len()
        );
        if watcher.store().port().capabilities().atomic_batches {
            // Each appended event was stored in one transaction with its mark.
            assert_eq!(repeats, 0, "repeats on a store with atomic batches");
        } else {
            assert!(
                repeats <= 2 * APPEND_BATCH,
                "{repeats} repeats, more than a batch per SIGKILL"
            );
        }
        let mut by_key: Vec<Vec<&Arrival>> = vec![Vec::new(); KEYS];
        let mut seen = std::collections::HashSet::new();
        for arrival in &arrivals {
            if seen.insert(arrival.n) {
                by_key[arrival.key].push(arrival);
            }
        }
        for (key, arrivals) in by_key.iter().enumerate() {
            for pair in arrivals.windows(2) {
                assert!(
                    pair[0].due_ms <= pair[1].due_ms,
                    "key k{key}: event {} (due {}) arrived before event {} (due {})",
                    pair[0].n,
                    pair[0].due_ms,
                    pair[1].n,
                    pair[1].due_ms
                );
            }
        }
        let lease_ms = i64::try_from(LEASE.as_millis()).unwrap();
        let mut worst = 0;
        for arrival in firsts.values() {
            let late = arrival.at_ms - arrival.due_ms;
            worst = worst.max(late);
            let in_gap = gaps.iter().any(|(from, to)| {
                arrival.due_ms >= *from - ON_TIME_MS && arrival.due_ms <= *to + TAKEOVER_MS
            });
            let bound = if in_gap {
                lease_ms + TAKEOVER_MS
            } else {
                ON_TIME_MS
            };
            assert!(
                late <= bound,
                "event {} (due {}) arrived {late} ms late (bound {bound} ms; gaps {gaps:?})",
                arrival.n,
                arrival.due_ms
            );
        }
        println!("delayed_survive_kills: worst lateness {worst} ms");
    }
}
