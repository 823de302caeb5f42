//! Executor group handlers across real processes
//! ([`GroupProcesses::handlers_hold_through_joins_kills_and_freezes`]): the path users
//! take (`HandlerOptions::group`, `#[subscribe(group = ..)]`), with a handler of 300 ms, a
//! standing backlog, members joining, members killed with SIGKILL and restarted (under
//! their name and under a new one), and a member frozen with SIGSTOP past its lease.
//!
//! Each member process runs an executor whose handler logs `start` and `end` of every
//! attempt with the partition and epoch it runs under ([`photon_runtime::current_ownership`]).
//! From the logs: no published event is missing, no attempt starts under a lease after a
//! later lease of its partition was taken (no zombie start), no key is handled by two
//! members at overlapping times (an attempt in progress when its process was frozen, or
//! whose lease check passed just before the freeze, is the documented exception: its
//! acknowledgement is refused), each run handles each key in
//! order, an event is handled again only under a later epoch, and every member killed or
//! frozen has each of its partitions with work left taken over within the lease + 2 s (a
//! later kill or freeze starts the clock again; time the new owner had every parallelism
//! slot busy with its other partitions is its backlog and is not counted).

use std::collections::{HashMap, HashSet};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use photon_core::{Event, PhotonError, StoragePort};
use photon_runtime::{current_ownership, ExecutorConfig, HandlerOptions, Photon};

use crate::group_checks::{
    order_per_run, overlapping, repeats_not_under_later_epochs, slow_takeovers,
    without_frozen_attempts, zombie_starts,
};
use crate::group_processes::{
    all_steps, handlings, now_ns, one_at_a_time, read_published_at, wait_all_handled,
    GroupProcesses, Log, Role, HEARTBEAT, LEASE, TOPIC,
};
use crate::process::Spawned;

/// Keys of the handler test: few, so that each key has a deep backlog.
const KEYS: usize = 16;
/// Events of the handler test.
const EVENTS: usize = 900;
/// How long the handler takes per event.
const HANDLE_MS: u64 = 300;

/// What the parent does to the members, in order, with the seconds since the first
/// member started.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// Starts member `n` (a join).
    Join(usize),
    /// SIGKILLs member `n` and restarts it under its name (static membership).
    KillReuse(usize),
    /// SIGKILLs member `n` and restarts it under a new name.
    KillRename(usize),
    /// SIGSTOPs member `n` for twice the lease, then resumes it.
    Freeze(usize),
}

const SCHEDULE: [(f64, Step); 8] = [
    (1.0, Step::Join(1)),
    (2.0, Step::Join(2)),
    (4.0, Step::KillReuse(1)),
    (7.0, Step::KillRename(2)),
    (9.5, Step::KillReuse(0)),
    (12.5, Step::Freeze(1)),
    (19.0, Step::KillReuse(2)),
    (22.0, Step::KillRename(0)),
];

/// A member process of the test and the names it ran under.
struct Slot {
    name: String,
    incarnation: u32,
    child: Spawned,
}

impl GroupProcesses {
    fn spawn_handler(&self, name: &str, incarnation: u32) -> Spawned {
        self.spawn_role(
            "handler",
            &self.dir,
            &Role::fixed(name, incarnation, HANDLE_MS),
        )
    }

    /// Executor group handlers through joins, kills and a freeze (see the module docs).
    ///
    /// # Panics
    /// When a check fails.
    pub async fn handlers_hold_through_joins_kills_and_freezes(&self) {
        let _alone = one_at_a_time().await;
        let started = Instant::now();
        let mut names: Vec<String> = Vec::new();
        let mut slots: Vec<Option<Slot>> = (0..3).map(|_| None).collect();
        let mut start = |slots: &mut Vec<Option<Slot>>, n: usize, name: String, incarnation| {
            if !names.contains(&name) {
                names.push(name.clone());
            }
            slots[n] = Some(Slot {
                child: self.spawn_handler(&name, incarnation),
                name,
                incarnation,
            });
        };
        start(&mut slots, 0, "h0".into(), 0);
        let (mut publisher, published_log) = self.spawn_publisher(EVENTS, 600, KEYS);
        // (run, time) of each kill; (run, from, to) of each freeze.
        let mut kills: Vec<((String, u32), i64)> = Vec::new();
        let mut freezes: Vec<((String, u32), i64, i64)> = Vec::new();
        let mut renamed = 0;
        for (at, step) in SCHEDULE {
            tokio::time::sleep_until((started + Duration::from_secs_f64(at)).into()).await;
            match step {
                Step::Join(n) => start(&mut slots, n, format!("h{n}"), 0),
                Step::KillReuse(n) | Step::KillRename(n) => {
                    let Some(mut slot) = slots[n].take() else {
                        continue;
                    };
                    slot.child.kill();
                    kills.push(((slot.name.clone(), slot.incarnation), now_ns()));
                    if matches!(step, Step::KillRename(_)) {
                        renamed += 1;
                        start(&mut slots, n, format!("h{n}r{renamed}"), 0);
                    } else {
                        start(&mut slots, n, slot.name, slot.incarnation + 1);
                    }
                }
                Step::Freeze(n) => {
                    let Some(slot) = slots[n].as_ref() else {
                        continue;
                    };
                    let pid = slot.child.id().to_string();
                    assert!(Command::new("kill")
                        .args(["-STOP", &pid])
                        .status()
                        .unwrap()
                        .success());
                    let from = now_ns();
                    tokio::time::sleep(LEASE * 2).await;
                    let to = now_ns();
                    assert!(Command::new("kill")
                        .args(["-CONT", &pid])
                        .status()
                        .unwrap()
                        .success());
                    freezes.push(((slot.name.clone(), slot.incarnation), from, to));
                }
            }
        }

        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let published = wait_all_handled(
            &published_log,
            &self.dir,
            &names,
            Duration::from_secs(120),
            |h| h.end.is_some(),
        )
        .await;
        // A straggling attempt of a given-back event would show up within a handler's time.
        tokio::time::sleep(Duration::from_millis(HANDLE_MS * 3)).await;
        for slot in slots.iter_mut().flatten() {
            slot.child.kill();
        }
        assert!(publisher.wait().success());
        let handled = handlings(&all_steps(&self.dir, &names));
        assert_eq!(published.len(), EVENTS, "the publisher stored every event");
        let ended: HashSet<i64> = handled
            .iter()
            .filter(|h| h.end.is_some())
            .map(|h| h.seq)
            .collect();
        let missing: Vec<i64> = published
            .keys()
            .filter(|seq| !ended.contains(seq))
            .copied()
            .collect();
        assert_eq!(missing, Vec::<i64>::new(), "missing events");
        for h in &handled {
            assert_eq!(published.get(&h.seq), Some(&h.key), "seq {} key", h.seq);
        }
        let checked = without_frozen_attempts(&handled, &freezes);
        let zombies = zombie_starts(&checked);
        assert_eq!(zombies, Vec::<String>::new(), "starts under a lost lease");
        let killed_at: HashMap<(String, u32), i64> = kills.iter().cloned().collect();
        let overlaps = overlapping(&checked, &killed_at);
        assert_eq!(
            overlaps,
            Vec::<String>::new(),
            "overlapping handlings of a key"
        );
        assert_eq!(order_per_run(&handled), Vec::<String>::new());
        assert_eq!(
            repeats_not_under_later_epochs(&checked),
            Vec::<String>::new()
        );

        let mut lost: Vec<((String, u32), i64)> = kills.clone();
        lost.extend(freezes.iter().map(|(run, from, _)| (run.clone(), *from)));
        let faults: Vec<i64> = lost.iter().map(|(_, at)| *at).collect();
        let (published_at, _) = read_published_at(&published_log);
        let partitions = self.partitions(TOPIC).await;
        let slots = ExecutorConfig::default().parallelism;
        let slow = slow_takeovers(
            &handled,
            &lost,
            &faults,
            &published_at,
            partitions,
            Some(slots),
        );
        println!(
            "{} handlings of {EVENTS} events, {} kills, {} freezes",
            handled.len(),
            kills.len(),
            freezes.len(),
        );
        assert_eq!(slow, Vec::<String>::new(), "slow takeovers");
    }
}

/// A member process running an executor group handler that logs each attempt's `start`
/// and `end` with the lease it runs under, and sleeps `handle_ms` in between.
pub(crate) async fn handler_member(
    port: BoxFuture<'static, Arc<dyn StoragePort>>,
    log: &str,
    role: &Role,
) {
    let (name, handle_ms) = (role.name.as_str(), role.handle_ms);
    let photon = Photon::builder()
        .shared_storage_port(port.await)
        .build()
        .unwrap();
    let log = Arc::new(Mutex::new(Log::open(log)));
    let run = format!("{name} {}", role.incarnation);
    let options = HandlerOptions::new(&role.group, &role.topic)
        .group(&role.group)
        .member(name)
        .lease(LEASE, HEARTBEAT);
    let _executor = photon
        .executor()
        .handler_with(options, move |event: Event| {
            let (log, run) = (log.clone(), run.clone());
            async move {
                let ownership = current_ownership().expect("a group handler runs under a lease");
                let key = event.topic_key.clone().unwrap_or_default();
                let what = format!(
                    "{run} {} {} {key} {}",
                    ownership.partition, ownership.epoch, event.seq
                );
                // Timed before the log's lock: another handler may hold it through a sync.
                let started = now_ns();
                log.lock().unwrap().line(&format!("start {what} {started}"));
                tokio::time::sleep(Duration::from_millis(handle_ms)).await;
                let ended = now_ns();
                log.lock().unwrap().line(&format!("end {what} {ended}"));
                Ok::<(), PhotonError>(())
            }
        })
        .start()
        .unwrap();
    std::future::pending::<()>().await;
}
