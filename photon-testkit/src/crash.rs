//! A multi-process crash test any durable port can run: a publisher process and a durable
//! consumer process, both children of the test, killed with SIGKILL at random points,
//! each appending fsynced lines to its own log; the verdict is read from those logs.
//!
//! - The publisher (`role = publish`) publishes `events` keyed events from
//!   [`PUBLISH_TASKS`] tasks (task `t` owns the payload numbers `i ≡ t`, so each key has one
//!   ordered writer) and logs `ack <i> <key> <seq> <event_id>` after each acknowledged
//!   publish. Started again after a kill, each task continues after its last logged
//!   acknowledgement. A failed publish is retried with a new event after a pause.
//! - The consumer (`role = consume`) reads a durable subscription (checkpoint committed by
//!   a [`CheckpointCommitter`] with the [`CRASH_FLUSH`] window) and logs
//!   `handled <incarnation> <event_id> <key> <seq> <i>` before acknowledging each event.
//!
//! The verdict: every acknowledged publish was handled (missing 0); within each consumer
//! incarnation each key's seqs strictly increase; the handled lines that repeat an event
//! are at most `2 × max_pending + 1` per consumer kill (what the flush window can hold:
//! the pending acknowledgements, one commit in flight, the event being handled).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use photon_core::{CheckpointCommitter, CheckpointKey, EventStore, FlushPolicy, StartPolicy};
use serde_json::json;

use crate::process::Random;

/// Concurrent publishing tasks of the publisher process.
pub const PUBLISH_TASKS: usize = 8;

/// The consumer's flush window.
pub const CRASH_FLUSH: FlushPolicy = FlushPolicy {
    interval: Duration::from_millis(50),
    max_pending: 50,
};

/// Sizes and schedule of one crash test.
#[derive(Debug, Clone)]
pub struct CrashPlan {
    /// Topic (unique per run).
    pub topic: String,
    /// Events the publisher acknowledges in total.
    pub events: usize,
    /// Distinct keys.
    pub keys: usize,
    /// Times the consumer is killed (each at a random point).
    pub consumer_kills: usize,
    /// Kills of the consumer after which the publisher is killed too.
    pub publisher_kills_at: Vec<usize>,
    /// Kill of the consumer after which `on_midpoint` runs (a broker restart).
    pub midpoint: usize,
    /// Longest wait for the last consumer to handle every acknowledged event.
    pub drain_deadline: Duration,
    /// Pause of each publishing task after each acknowledged publish.
    pub publish_pause: Duration,
}

/// One acknowledged publish from the publisher's log.
#[derive(Debug, Clone)]
pub struct Acked {
    /// Payload number.
    pub i: u64,
    /// Key.
    pub key: String,
    /// Seq the port returned.
    pub seq: i64,
    /// Event id the port returned.
    pub event_id: String,
}

/// One handled event from the consumer's log.
#[derive(Debug, Clone)]
pub struct Handled {
    /// Consumer incarnation (0 for the first process).
    pub incarnation: usize,
    /// Event id.
    pub event_id: String,
    /// Key.
    pub key: String,
    /// Seq.
    pub seq: i64,
    /// Payload number.
    pub i: u64,
}

/// What the crash test measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrashReport {
    /// Acknowledged publishes.
    pub acked: usize,
    /// Handled lines (with repeats).
    pub handled: usize,
    /// Acknowledged publishes never handled.
    pub missing: usize,
    /// Handled lines repeating an event already handled.
    pub duplicates: usize,
    /// The allowed repeats.
    pub duplicate_bound: usize,
    /// Consumer incarnations that handled at least one event.
    pub incarnations: usize,
}

/// An fsynced line log.
struct Log(std::fs::File);

impl Log {
    fn open(path: &Path) -> Self {
        Self(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .expect("open crash log"),
        )
    }

    fn line(&mut self, text: &str) {
        self.0
            .write_all(format!("{text}\n").as_bytes())
            .expect("write crash log");
        self.0.sync_data().expect("fsync crash log");
    }
}

/// Reads the publisher's log; a line cut by a kill is not counted.
pub fn read_acked(path: &Path) -> Vec<Acked> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let ["ack", i, key, seq, event_id] = fields[..] else {
                return None;
            };
            Some(Acked {
                i: i.parse().ok()?,
                key: key.to_owned(),
                seq: seq.parse().ok()?,
                event_id: event_id.to_owned(),
            })
        })
        .collect()
}

/// Reads the consumer's log; a line cut by a kill is not counted.
pub fn read_handled(path: &Path) -> Vec<Handled> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let ["handled", incarnation, event_id, key, seq, i] = fields[..] else {
                return None;
            };
            Some(Handled {
                incarnation: incarnation.parse().ok()?,
                event_id: event_id.to_owned(),
                key: key.to_owned(),
                seq: seq.parse().ok()?,
                i: i.parse().ok()?,
            })
        })
        .collect()
}

/// The publisher process's work: publishes until `events` are acknowledged in the log.
///
/// # Panics
/// When the log cannot be written.
pub async fn publisher_role(store: EventStore, plan: &CrashPlan, log: PathBuf) {
    let (events, keys, pause) = (plan.events, plan.keys, plan.publish_pause);
    let done = read_acked(&log);
    let log = Arc::new(std::sync::Mutex::new(Log::open(&log)));
    let mut tasks = Vec::new();
    for task in 0..PUBLISH_TASKS {
        let next = done
            .iter()
            .filter(|a| a.i as usize % PUBLISH_TASKS == task)
            .map(|a| a.i as usize + PUBLISH_TASKS)
            .max()
            .unwrap_or(task);
        let (store, topic, log) = (store.clone(), plan.topic.clone(), log.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = next;
            while i < events {
                let key = format!("k{}", i % keys);
                match store
                    .publish(&topic, Some(&key), json!(null), json!({ "i": i }))
                    .await
                {
                    Ok(appended) => {
                        log.lock().unwrap_or_else(|p| p.into_inner()).line(&format!(
                            "ack {i} {key} {} {}",
                            appended.seq, appended.event_id
                        ));
                        i += PUBLISH_TASKS;
                        // Paced, so that the kills land while publishing goes on.
                        tokio::time::sleep(pause).await;
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            }
        }));
    }
    for task in tasks {
        let _ = task.await;
    }
}

/// The consumer process's work: handles the durable subscription until killed.
///
/// # Panics
/// When the log cannot be written.
pub async fn consumer_role(store: EventStore, topic: String, incarnation: usize, log: PathBuf) {
    let key = CheckpointKey::new("crash-consumer", topic, None);
    let committer = CheckpointCommitter::new(store.port().clone(), key.clone(), CRASH_FLUSH);
    let mut log = Log::open(&log);
    let mut events = store.subscribe_after_checkpoint(key, StartPolicy::Beginning);
    while let Some(item) = events.next().await {
        // Error items of a broker restart are retried by the stream itself.
        let Ok(event) = item else { continue };
        let i = event.payload["i"].as_u64().unwrap_or(u64::MAX);
        log.line(&format!(
            "handled {incarnation} {} {} {} {i}",
            event.event_id,
            event.topic_key.as_deref().unwrap_or("-"),
            event.seq
        ));
        // A commit failing during a broker restart is retried with the next one.
        let _ = committer.ack(event.seq).await;
    }
}

fn kill(child: &mut Child) {
    let _ = child.kill(); // SIGKILL
    let _ = child.wait();
}

impl CrashPlan {
    /// The plan every port's kill loop runs: 6,000 events on 32 keys, the consumer killed
    /// at 22 random points, the publisher at the 5th, 11th and 17th of them, the midpoint
    /// (a broker restart, where the test has one) after the 11th; `drain_deadline` is the
    /// backend's own.
    #[must_use]
    pub fn kill_loop(drain_deadline: Duration) -> Self {
        Self {
            topic: "crash.loop".into(),
            events: 6_000,
            keys: 32,
            consumer_kills: 22,
            publisher_kills_at: vec![5, 11, 17],
            midpoint: 11,
            drain_deadline,
            publish_pause: Duration::from_millis(20),
        }
    }
}

/// The child of [`run_located_crash_test`], if `env` is set: parses
/// `<role>|<incarnation>|<log>|<location>` and runs [`run_role`] on the store
/// `open(location)` returns. Call it from an ignored test named `crash_role`.
///
/// # Panics
/// When the variable is malformed, and as [`run_role`].
pub fn located_role<F>(env: &str, plan: &CrashPlan, open: impl FnOnce(String) -> F)
where
    F: std::future::Future<Output = EventStore>,
{
    let Ok(spec) = std::env::var(env) else {
        return;
    };
    let parts: Vec<&str> = spec.splitn(4, '|').collect();
    let [role, incarnation, log, location] = parts[..] else {
        panic!("bad {env}: {spec}");
    };
    run_role(plan, role, incarnation, log, open(location.to_owned()));
}

/// [`run_crash_test_in`] with children that open their port onto `location` (a file, a
/// schema, a URL and a prefix: whatever the port's [`located_role`] reads), started by
/// [`spawn_role`] with the spec in `env`.
///
/// # Panics
/// As [`run_crash_test_in`].
pub async fn run_located_crash_test(
    dir: &Path,
    plan: &CrashPlan,
    env: &str,
    location: &str,
    on_midpoint: impl FnMut(),
) -> CrashReport {
    run_crash_test_in(
        dir,
        plan,
        |role, incarnation, log| {
            spawn_role(
                env,
                format!("{role}|{incarnation}|{}|{location}", log.display()),
            )
        },
        on_midpoint,
    )
    .await
}

/// Runs one child of a crash test in this process, on a runtime of its own, until it is
/// killed: the publisher (`role = "publish"`) or the consumer (any other role, as
/// incarnation `incarnation`), on the store `open` returns, logging to `log`.
///
/// # Panics
/// When `incarnation` is not a number or the runtime cannot start.
pub fn run_role(
    plan: &CrashPlan,
    role: &str,
    incarnation: &str,
    log: &str,
    open: impl std::future::Future<Output = EventStore>,
) {
    let incarnation: usize = incarnation.parse().expect("a numeric incarnation");
    let log = PathBuf::from(log);
    let runtime = crate::process::child_runtime();
    runtime.block_on(async {
        let store = open.await;
        match role {
            "publish" => publisher_role(store, plan, log).await,
            _ => consumer_role(store, plan.topic.clone(), incarnation, log).await,
        }
    });
}

/// Starts this test binary again as a crash-test child: its ignored test `crash_role`,
/// with `spec` (role, incarnation, log and whatever the child needs to open its port) in
/// the environment variable `env`.
///
/// # Panics
/// When the child cannot be started.
pub fn spawn_role(env: &str, spec: String) -> Child {
    Command::new(std::env::current_exe().expect("the test binary's path"))
        .args([
            "--ignored",
            "--exact",
            "crash_role",
            "--test-threads=1",
            "--quiet",
        ])
        .env(env, spec)
        .stdout(Stdio::null())
        .spawn()
        .expect("a crash-test child")
}

/// [`run_crash_test`] with both logs in `dir`: `spawn(role, incarnation, log)` starts a
/// child writing to `log`. Asserts that every planned event was acknowledged and handled.
///
/// # Panics
/// As [`run_crash_test`], and when an event is missing.
pub async fn run_crash_test_in(
    dir: &Path,
    plan: &CrashPlan,
    mut spawn: impl FnMut(&str, usize, &Path) -> Child,
    on_midpoint: impl FnMut(),
) -> CrashReport {
    let published = dir.join("published.log");
    let handled = dir.join("handled.log");
    let report = run_crash_test(
        plan,
        &published,
        &handled,
        |role, incarnation| {
            let log = if role == "publish" {
                &published
            } else {
                &handled
            };
            spawn(role, incarnation, log)
        },
        on_midpoint,
    )
    .await;
    assert_eq!(report.missing, 0);
    assert_eq!(report.acked, plan.events);
    report
}

/// Runs the plan: `spawn(role, incarnation)` starts a child (`"publish"` or `"consume"`),
/// `on_midpoint` runs once after the `midpoint`-th consumer kill. Returns the report after
/// asserting the verdict.
///
/// # Panics
/// When an acknowledged publish was not handled, a key's order broke within an
/// incarnation, repeats exceed the bound, or the deadline passed.
pub async fn run_crash_test(
    plan: &CrashPlan,
    publish_log: &Path,
    consume_log: &Path,
    mut spawn: impl FnMut(&str, usize) -> Child,
    mut on_midpoint: impl FnMut(),
) -> CrashReport {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(7, |d| d.as_nanos() as u64)
        | 1;
    println!("crash test seed {seed}");
    let mut random = Random::new(seed);
    let started = Instant::now();
    let mut publisher_run = 0;
    let mut publisher = spawn("publish", publisher_run);
    let mut incarnation = 0;
    let mut consumer = spawn("consume", incarnation);
    for kill_number in 1..=plan.consumer_kills {
        // A random point: 100..900 ms into this incarnation.
        tokio::time::sleep(Duration::from_millis(100 + random.below(800))).await;
        kill(&mut consumer);
        if plan.publisher_kills_at.contains(&kill_number) {
            kill(&mut publisher);
            publisher_run += 1;
            publisher = spawn("publish", publisher_run);
        }
        if kill_number == plan.midpoint {
            on_midpoint();
        }
        incarnation += 1;
        consumer = spawn("consume", incarnation);
    }
    let kill_phase = started.elapsed();
    let acked_during_kills = read_acked(publish_log).len();
    assert!(
        acked_during_kills < plan.events,
        "publishing ended before the last kill: raise events or publish_pause"
    );
    // The publisher finishes, then the last consumer drains.
    let deadline = Instant::now() + plan.drain_deadline;
    loop {
        let acked = read_acked(publish_log);
        let seen: HashSet<String> = read_handled(consume_log)
            .into_iter()
            .map(|h| h.event_id)
            .collect();
        if acked.len() >= plan.events && acked.iter().all(|a| seen.contains(&a.event_id)) {
            break;
        }
        if Instant::now() > deadline {
            kill(&mut consumer);
            kill(&mut publisher);
            panic!(
                "deadline passed: {} of {} acknowledged, {} handled",
                acked.len(),
                plan.events,
                seen.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    kill(&mut consumer);
    kill(&mut publisher);

    let acked = read_acked(publish_log);
    let handled = read_handled(consume_log);
    let seen: HashSet<&str> = handled.iter().map(|h| h.event_id.as_str()).collect();
    let missing: Vec<&Acked> = acked
        .iter()
        .filter(|a| !seen.contains(a.event_id.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "acknowledged but never handled: {missing:?}"
    );
    // Every payload number was acknowledged exactly once.
    let numbers: HashSet<u64> = acked.iter().map(|a| a.i).collect();
    assert_eq!(numbers.len(), plan.events, "acknowledged payload numbers");
    assert_eq!(acked.len(), plan.events, "acknowledged publishes");
    // Within an incarnation, each key's seqs strictly increase.
    let mut last: HashMap<(usize, &str), i64> = HashMap::new();
    for h in &handled {
        if let Some(previous) = last.insert((h.incarnation, h.key.as_str()), h.seq) {
            assert!(
                previous < h.seq,
                "incarnation {} key {}: seq {} after {previous}",
                h.incarnation,
                h.key,
                h.seq
            );
        }
    }
    let incarnations: BTreeMap<usize, usize> =
        handled.iter().fold(BTreeMap::new(), |mut runs, h| {
            *runs.entry(h.incarnation).or_default() += 1;
            runs
        });
    let duplicates = handled.len() - seen.len();
    let duplicate_bound = plan.consumer_kills * (2 * CRASH_FLUSH.max_pending as usize + 1);
    let report = CrashReport {
        acked: acked.len(),
        handled: handled.len(),
        missing: missing.len(),
        duplicates,
        duplicate_bound,
        incarnations: incarnations.len(),
    };
    println!(
        "crash test: {report:?}; kill phase {kill_phase:?} ({acked_during_kills} acknowledged by then), {} publisher kills, per incarnation {incarnations:?}",
        plan.publisher_kills_at.len()
    );
    assert!(
        duplicates <= duplicate_bound,
        "{duplicates} repeats, more than {duplicate_bound}"
    );
    report
}
