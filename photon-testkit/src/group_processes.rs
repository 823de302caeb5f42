//! Consumer groups across real processes, for any port whose groups span processes
//! ([`photon_core::StoragePort::group_coordination`]).
//!
//! - [`GroupProcesses::members_survive_kills`]: three member processes share 20,000 keyed
//!   events published by a fourth process; one member is killed with SIGKILL every 2 s and
//!   restarted, 6 times. From the logs: nothing acknowledged by the publisher is missing,
//!   no key is handled by two members at overlapping times, each owner run handles each
//!   key in order, an event is handled again only under a later epoch of its partition
//!   (after a kill or a lapsed lease) and duplicates stay within the bound, and each
//!   partition a killed member left with work is taken over within the lease + 2 s (a
//!   later kill starts the clock again; the new owner's own backlog is not counted).
//! - [`GroupProcesses::frozen_member_is_fenced`]: a member frozen with SIGSTOP for three times its
//!   lease, then resumed, starts no event of a partition it lost, its late acknowledgement
//!   is refused, and a late checkpoint commit under its old lease is refused by the store.
//!
//! Children are the calling test binary run again with `--ignored --exact group_child` and
//! the harness's role variable set: the test file defines an ignored test `group_child`
//! that calls [`GroupProcesses::child`]. Children append one line per step to their own
//! log file with `write` (which a SIGKILL cannot undo) and `fdatasync` it every 100 ms;
//! timestamps are CLOCK_REALTIME nanoseconds, comparable across the processes of one host.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use futures::StreamExt;
use photon_core::group::{partition_of, GroupOptions, GroupScope, DEFAULT_PARTITIONS};
use photon_core::raw::group::join;
use photon_core::{EventStore, GroupRequest, PhotonError, StartAt, StoragePort, TransportCrypto};
use serde_json::json;

use crate::group_checks::{
    order_per_run, overlapping, repeats_not_under_later_epochs, slow_takeovers,
};
use crate::process::Spawned;

pub(crate) const TOPIC: &str = "groups.orders";
pub(crate) const GROUP: &str = "billing";
const KEYS: usize = 64;
/// Tasks of the publisher process, each publishing its own keys.
const PUBLISHERS: usize = 8;
pub(crate) const LEASE: Duration = Duration::from_secs(2);
pub(crate) const HEARTBEAT: Duration = Duration::from_millis(200);

/// Opens a port onto the backend named by a location string (a file path, a URL and a
/// prefix, ...), in the test process and in every child.
pub type OpenPort = fn(String) -> BoxFuture<'static, Arc<dyn StoragePort>>;

/// The multi-process group tests of one backend.
#[derive(Debug, Clone)]
pub struct GroupProcesses {
    /// Environment variable that carries a child's role (unique per test binary).
    pub role_env: &'static str,
    /// Where the backend is: handed to `open` in every process.
    pub location: String,
    /// Opens a port onto `location`.
    pub open: OpenPort,
    /// Directory of the process logs.
    pub dir: PathBuf,
}

pub(crate) fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// An append-only log, synced every 100 ms.
pub(crate) struct Log {
    file: File,
    synced: Instant,
}

impl Log {
    pub(crate) fn open(path: &str) -> Self {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        Self {
            file,
            synced: Instant::now(),
        }
    }

    pub(crate) fn line(&mut self, line: &str) {
        self.file.write_all(format!("{line}\n").as_bytes()).unwrap();
        if self.synced.elapsed() >= Duration::from_millis(100) {
            self.file.sync_data().unwrap();
            self.synced = Instant::now();
        }
    }

    pub(crate) fn sync(&mut self) {
        self.file.sync_data().unwrap();
    }
}

impl GroupProcesses {
    /// Runs the child role named by `role_env`, if set:
    /// `publisher|location|log|count|per_second|keys|topic|first` (events `first..first +
    /// count`), `member|location|log|name|incarnation|handle_ms|topic|group` (the raw group
    /// stream) or `handler|location|log|name|incarnation|handle_ms|topic|group` (an executor
    /// group handler). Call it from an ignored test named `group_child`.
    ///
    /// # Panics
    /// On an unknown role or any failure of the child (the parent sees it in the logs).
    pub fn child(role_env: &str, open: OpenPort) {
        let Ok(spec) = std::env::var(role_env) else {
            return;
        };
        let parts: Vec<String> = spec.split('|').map(str::to_owned).collect();
        let runtime = crate::process::child_runtime();
        match parts[0].as_str() {
            "publisher" => runtime.block_on(publish(
                open(parts[1].clone()),
                &parts[2],
                Plan {
                    topic: parts[6].clone(),
                    first: parts[7].parse().unwrap(),
                    count: parts[3].parse().unwrap(),
                    per_second: parts[4].parse().unwrap(),
                    keys: parts[5].parse().unwrap(),
                },
            )),
            "member" => runtime.block_on(member(
                open(parts[1].clone()),
                &parts[2],
                &Role::parse(&parts[3..]),
            )),
            "delayed" => runtime.block_on(crate::delayed_processes::publisher(
                open(parts[1].clone()),
                &parts[2],
                &parts[3..],
            )),
            "handler" => runtime.block_on(crate::group_handlers::handler_member(
                open(parts[1].clone()),
                &parts[2],
                &Role::parse(&parts[3..]),
            )),
            other => panic!("unknown role {other}"),
        }
    }

    pub(crate) fn spawn(&self, spec: &str) -> Spawned {
        Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "group_child",
                "--test-threads=1",
                "--quiet",
            ])
            .env(self.role_env, spec)
            .stdout(std::process::Stdio::null())
            .spawn()
            .map(Spawned::new)
            .unwrap()
    }

    /// Starts a member process of `kind` (`member` or `handler`) logging to
    /// `dir/<name>.log`.
    pub(crate) fn spawn_role(&self, kind: &str, dir: &Path, role: &Role) -> Spawned {
        let log = dir.join(format!("{}.log", role.name));
        self.spawn(&format!(
            "{kind}|{}|{}|{}|{}|{}|{}|{}",
            self.location,
            log.display(),
            role.name,
            role.incarnation,
            role.handle_ms,
            role.topic,
            role.group
        ))
    }

    fn spawn_member(&self, name: &str, incarnation: u32, handle_ms: u64) -> Spawned {
        self.spawn_role(
            "member",
            &self.dir,
            &Role::fixed(name, incarnation, handle_ms),
        )
    }

    /// Starts a publisher process of `plan` logging to `log`.
    pub(crate) fn spawn_plan(&self, log: &Path, plan: &Plan) -> Spawned {
        self.spawn(&format!(
            "publisher|{}|{}|{}|{}|{}|{}|{}",
            self.location,
            log.display(),
            plan.count,
            plan.per_second,
            plan.keys,
            plan.topic,
            plan.first
        ))
    }

    pub(crate) fn spawn_publisher(
        &self,
        count: usize,
        per_second: u64,
        keys: usize,
    ) -> (Spawned, PathBuf) {
        let log = self.dir.join("published.log");
        let plan = Plan {
            topic: TOPIC.to_owned(),
            first: 0,
            count,
            per_second,
            keys,
        };
        (self.spawn_plan(&log, &plan), log)
    }

    /// The partition count members use on `topic` on this backend.
    pub(crate) async fn partitions(&self, topic: &str) -> u32 {
        let port = (self.open)(self.location.clone()).await;
        port.group_coordination()
            .expect("the port's groups span processes")
            .topic_partitions(topic)
            .unwrap_or(DEFAULT_PARTITIONS)
    }

    /// Three members, 20,000 keyed events, six SIGKILLs (see the module docs).
    ///
    /// # Panics
    /// When a check fails.
    pub async fn members_survive_kills(&self) {
        let _alone = one_at_a_time().await;
        const EVENTS: usize = 20_000;
        const KILLS: usize = 6;
        let partitions = self.partitions(TOPIC).await;
        let names = ["m0", "m1", "m2"];
        let mut incarnations = [0_u32; 3];
        let mut members: Vec<Spawned> = names
            .iter()
            .map(|name| self.spawn_member(name, 0, 1))
            .collect();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (mut publisher, published_log) = self.spawn_publisher(EVENTS, 1300, KEYS);

        // (run killed, kill time)
        let mut kills: Vec<((String, u32), i64)> = Vec::new();
        for kill in 0..KILLS {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let index = kill % names.len();
            members[index].kill();
            let at = now_ns();
            kills.push(((names[index].to_owned(), incarnations[index]), at));
            incarnations[index] += 1;
            members[index] = self.spawn_member(names[index], incarnations[index], 1);
        }

        let published = wait_all_handled(
            &published_log,
            &self.dir,
            &names,
            Duration::from_secs(90),
            |_| true,
        )
        .await;
        // Give a straggling duplicate the time to show up.
        tokio::time::sleep(Duration::from_millis(500)).await;
        for member in &mut members {
            member.kill();
        }
        assert!(publisher.wait().success());
        let handled = handlings(&all_steps(&self.dir, &names));

        assert_eq!(published.len(), EVENTS, "the publisher stored every event");
        let seen: HashSet<i64> = handled.iter().map(|h| h.seq).collect();
        let missing: Vec<i64> = published
            .keys()
            .filter(|seq| !seen.contains(seq))
            .copied()
            .collect();
        assert_eq!(missing, Vec::<i64>::new(), "missing events");
        for h in &handled {
            assert_eq!(published.get(&h.seq), Some(&h.key), "seq {} key", h.seq);
            assert_eq!(h.partition, partition_of(Some(&h.key), h.seq, partitions));
        }

        let killed_at: HashMap<(String, u32), i64> = kills.iter().cloned().collect();
        assert_eq!(overlapping(&handled, &killed_at), Vec::<String>::new());
        assert_eq!(order_per_run(&handled), Vec::<String>::new());

        // Duplicates come only from ownership changes: an event handled again was first
        // handled under an older epoch of its partition (the earlier owner was killed before
        // its commit, or lost its lease, which fences its acknowledgement and commits).
        // Bound: what an ownership can have acknowledged and not committed (one commit
        // interval) or read ahead, per ownership move (kills, hand-overs to restarted
        // members, lapses).
        assert_eq!(
            repeats_not_under_later_epochs(&handled),
            Vec::<String>::new()
        );
        let duplicates = handled.len() - seen.len();
        let ownerships: BTreeSet<(u32, u64, (String, u32))> = handled
            .iter()
            .map(|h| (h.partition, h.epoch, h.run.clone()))
            .collect();
        let moves = ownerships.len().saturating_sub(partitions as usize);
        let per_partition_bound = 256;
        let bound = moves * per_partition_bound;
        println!(
            "handled {} lines, {duplicates} duplicates (bound {bound}), {moves} ownership moves",
            handled.len()
        );
        assert!(duplicates <= bound, "{duplicates} duplicates > {bound}");

        // Takeover: for each kill, each partition the killed run handled with work left is
        // next handled by another run within the lease + 2 s.
        let faults: Vec<i64> = kills.iter().map(|(_, at)| *at).collect();
        let (published_at, _) = read_published_at(&published_log);
        let slow = slow_takeovers(
            &handled,
            &kills,
            &faults,
            &published_at,
            partitions,
            Some(1),
        );
        assert_eq!(slow, Vec::<String>::new(), "slow takeovers");
    }

    /// A member frozen past its lease is fenced (see the module docs).
    ///
    /// # Panics
    /// When a check fails.
    pub async fn frozen_member_is_fenced(&self) {
        let _alone = one_at_a_time().await;
        let names = ["m0", "m1"];
        // m0 spends 50 ms per event, so it is mid-handling when frozen.
        let mut frozen = self.spawn_member("m0", 0, 50);
        let mut other = self.spawn_member("m1", 0, 1);
        let (mut publisher, published_log) = self.spawn_publisher(400, 100, KEYS);
        tokio::time::sleep(Duration::from_secs(3)).await;
        let status = Command::new("kill")
            .args(["-STOP", &frozen.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let stopped = now_ns();
        // The freeze is the fault under test: three leases, so that a takeover slowed by a
        // loaded machine (lease expiry, then the next heartbeat and acquire) still falls
        // inside it (two were seen to be too short in CI).
        tokio::time::sleep(LEASE * 3).await;
        let resumed = now_ns();
        let status = Command::new("kill")
            .args(["-CONT", &frozen.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        assert!(publisher.wait().success());
        tokio::time::sleep(Duration::from_secs(3)).await;
        for child in [&mut frozen, &mut other] {
            child.kill();
        }

        let steps = all_steps(&self.dir, &names);
        let handled = handlings(&steps);
        let m0 = |h: &&Handling| h.run.0 == "m0";
        // Partitions m0 held when frozen, at their epochs.
        let held: BTreeMap<u32, u64> = handled
            .iter()
            .filter(m0)
            .filter(|h| h.start < stopped)
            .map(|h| (h.partition, h.epoch))
            .collect();
        assert!(!held.is_empty(), "m0 owned partitions before the freeze");
        // m1 took each of them over during the freeze, at a later epoch.
        for (partition, epoch) in &held {
            assert!(
                handled.iter().any(|h| h.run.0 == "m1"
                    && h.partition == *partition
                    && h.epoch > *epoch
                    && h.start > stopped
                    && h.start < resumed),
                "partition {partition} (m0 at epoch {epoch}) was not taken over during the freeze ({} of m1's handlings started during it, {} in all); the partition's handlings (run, epoch, ms from the freeze): {:?}",
                handled
                    .iter()
                    .filter(|h| h.run.0 == "m1" && h.start > stopped && h.start < resumed)
                    .count(),
                handled.iter().filter(|h| h.run.0 == "m1").count(),
                handled
                    .iter()
                    .filter(|h| h.partition == *partition)
                    .map(|h| (&h.run, h.epoch, (h.start - stopped) / 1_000_000))
                    .collect::<BTreeSet<_>>()
            );
        }
        // After the resume, m0 starts nothing under a lease it lost.
        for h in handled.iter().filter(m0).filter(|h| h.start > resumed) {
            assert!(
                !handled.iter().any(|o| o.run.0 == "m1"
                    && o.partition == h.partition
                    && o.epoch > h.epoch
                    && o.start < h.start),
                "m0 started seq {} of partition {} at epoch {} after losing it",
                h.seq,
                h.partition,
                h.epoch
            );
        }
        // The delivery m0 was handling when frozen: its ack and its commit were refused.
        let in_progress: Vec<&Handling> = handled
            .iter()
            .filter(m0)
            .filter(|h| h.start < stopped && h.end.is_none_or(|end| end > stopped))
            .collect();
        assert_eq!(
            in_progress.len(),
            1,
            "m0 was handling one event when frozen; its last handlings before (partition, epoch, seq, ms from the freeze to start and end): {:?}",
            handled
                .iter()
                .filter(m0)
                .filter(|h| h.start < stopped)
                .rev()
                .take(5)
                .map(|h| (h.partition, h.epoch, h.seq, (h.start - stopped) / 1_000_000, h.end.map(|end| (end - stopped) / 1_000_000)))
                .collect::<Vec<_>>()
        );
        let late = in_progress[0];
        let outcome: Vec<&str> = steps
            .iter()
            .filter(|s| s.member == "m0" && s.seq == late.seq && s.epoch == late.epoch)
            .map(|s| s.kind.as_str())
            .collect();
        assert_eq!(
            outcome,
            vec!["start", "end", "ack-refused", "commit-refused"]
        );
        // Every event was handled (m1 handled the frozen one again).
        let (published, done) = read_published(&published_log);
        assert!(done);
        let seen: HashSet<i64> = handled.iter().filter(|h| h.acked).map(|h| h.seq).collect();
        assert_eq!(
            published.keys().filter(|seq| !seen.contains(seq)).count(),
            0,
            "every published event was handled and acknowledged"
        );
        assert!(handled
            .iter()
            .any(|h| h.run.0 == "m1" && h.seq == late.seq && h.acked));
    }
}

/// What a publisher process publishes: events `first..first + count` of `topic`, event `i`
/// under key `k{i % keys}`, at about `per_second`.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) topic: String,
    pub(crate) first: usize,
    pub(crate) count: usize,
    pub(crate) per_second: u64,
    pub(crate) keys: usize,
}

/// Who a member process is and what it consumes.
#[derive(Debug, Clone)]
pub(crate) struct Role {
    pub(crate) name: String,
    pub(crate) incarnation: u32,
    pub(crate) handle_ms: u64,
    pub(crate) topic: String,
    pub(crate) group: String,
}

impl Role {
    /// A member of the fixed tests' group on their topic.
    pub(crate) fn fixed(name: &str, incarnation: u32, handle_ms: u64) -> Self {
        Self {
            name: name.to_owned(),
            incarnation,
            handle_ms,
            topic: TOPIC.to_owned(),
            group: GROUP.to_owned(),
        }
    }

    /// `name|incarnation|handle_ms|topic|group`.
    fn parse(parts: &[String]) -> Self {
        Self {
            name: parts[0].clone(),
            incarnation: parts[1].parse().unwrap(),
            handle_ms: parts[2].parse().unwrap(),
            topic: parts[3].clone(),
            group: parts[4].clone(),
        }
    }
}

/// Publishes `plan`, logging `seq key` once stored. [`PUBLISHERS`] tasks publish at once,
/// each for its own keys one event at a time, so that a key's events are stored in the
/// order of `i` while the rate does not hang on one round trip per event.
async fn publish(port: BoxFuture<'static, Arc<dyn StoragePort>>, log: &str, plan: Plan) {
    let store = EventStore::new(port.await, TransportCrypto::plaintext());
    let log = Arc::new(std::sync::Mutex::new(Log::open(log)));
    let started = Instant::now();
    let plan = Arc::new(plan);
    let tasks: Vec<_> = (0..PUBLISHERS)
        .map(|task| {
            let (store, log, plan) = (store.clone(), log.clone(), plan.clone());
            tokio::spawn(async move {
                let keys = plan.keys;
                let events = (plan.first..plan.first + plan.count)
                    .filter(|i| (i % keys) % PUBLISHERS == task);
                for i in events {
                    let offset = (i - plan.first) as u64 * 1_000_000 / plan.per_second;
                    tokio::time::sleep_until((started + Duration::from_micros(offset)).into())
                        .await;
                    let key = format!("k{}", i % keys);
                    let appended = store
                        .publish(&plan.topic, Some(&key), json!(null), json!({"i": i}))
                        .await
                        .unwrap();
                    let line = format!("{} {key} {}", appended.seq, now_ns());
                    log.lock().unwrap().line(&line);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let mut log = log.lock().unwrap();
    log.line("done");
    log.sync();
}

/// A group member: for each delivery logs `start`, waits `handle_ms`, logs `end`, then
/// acknowledges and logs the outcome. A refused acknowledgement is followed by a direct
/// commit under the same lease, whose outcome is logged too.
async fn member(port: BoxFuture<'static, Arc<dyn StoragePort>>, log: &str, role: &Role) {
    let port = port.await;
    let coordination = port.group_coordination().unwrap();
    let mut log = Log::open(log);
    let (name, incarnation, handle_ms) = (&role.name, role.incarnation, role.handle_ms);
    let options = GroupOptions::new(name).lease(LEASE).heartbeat(HEARTBEAT);
    let request = GroupRequest {
        group: role.group.clone(),
        member: name.clone(),
        topic: role.topic.clone(),
        start: StartAt::Beginning,
    };
    let scope = GroupScope::new(&role.group, &role.topic);
    let mut deliveries = join(port, coordination.clone(), request, options);
    while let Some(delivery) = deliveries.next().await {
        let delivery = delivery.unwrap();
        let ownership = delivery.ack.ownership().unwrap();
        let (key, seq) = (
            delivery.record.topic_key.clone().unwrap(),
            delivery.record.seq,
        );
        let what = format!(
            "{name} {incarnation} {} {} {key} {seq}",
            ownership.partition, ownership.epoch
        );
        log.line(&format!("start {what} {}", now_ns()));
        if handle_ms > 0 {
            tokio::time::sleep(Duration::from_millis(handle_ms)).await;
        }
        log.line(&format!("end {what} {}", now_ns()));
        match delivery.ack.ack().await {
            Ok(()) => log.line(&format!("acked {what} {}", now_ns())),
            Err(PhotonError::Fenced { .. }) => {
                log.line(&format!("ack-refused {what} {}", now_ns()));
                let commit = coordination.commit(&scope, ownership.held(), seq).await;
                let outcome = match commit {
                    Err(PhotonError::Fenced { .. }) => "commit-refused",
                    Ok(()) => "commit-accepted",
                    Err(_) => "commit-failed",
                };
                log.line(&format!("{outcome} {what} {}", now_ns()));
            }
            Err(err) => panic!("ack failed: {err}"),
        }
    }
}

/// Polls the logs (up to `within`) until the publisher is done and every event it stored
/// has a handling that `counts`; returns what it stored.
///
/// # Panics
/// When `within` passes first, naming how many were handled.
pub(crate) async fn wait_all_handled(
    published_log: &Path,
    dir: &Path,
    names: &[&str],
    within: Duration,
    counts: fn(&Handling) -> bool,
) -> BTreeMap<i64, String> {
    let deadline = Instant::now() + within;
    loop {
        let (published, done) = read_published(published_log);
        let handled = handlings(&all_steps(dir, names));
        let seen: HashSet<i64> = handled
            .iter()
            .filter(|h| counts(h))
            .map(|h| h.seq)
            .collect();
        if done && published.keys().all(|seq| seen.contains(seq)) {
            return published;
        }
        assert!(
            Instant::now() < deadline,
            "only {} of {} published events handled",
            published.keys().filter(|seq| seen.contains(seq)).count(),
            published.len()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// One line of a member log.
#[derive(Debug, Clone)]
pub(crate) struct Step {
    pub(crate) kind: String,
    pub(crate) member: String,
    pub(crate) incarnation: u32,
    pub(crate) partition: u32,
    pub(crate) epoch: u64,
    pub(crate) key: String,
    pub(crate) seq: i64,
    pub(crate) at: i64,
}

impl Step {
    fn run(&self) -> (String, u32) {
        (self.member.clone(), self.incarnation)
    }
}

fn read_steps(path: &Path) -> Vec<Step> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            // A kill can cut the last line: only complete lines count.
            let f: Vec<&str> = line.split(' ').collect();
            let [kind, member, incarnation, partition, epoch, key, seq, at] = f[..] else {
                return None;
            };
            Some(Step {
                kind: kind.to_owned(),
                member: member.to_owned(),
                incarnation: incarnation.parse().ok()?,
                partition: partition.parse().ok()?,
                epoch: epoch.parse().ok()?,
                key: key.to_owned(),
                seq: seq.parse().ok()?,
                at: at.parse().ok()?,
            })
        })
        .collect()
}

/// The events a publisher's log names (seq to key) and whether it finished.
pub(crate) fn read_published(path: &Path) -> (BTreeMap<i64, String>, bool) {
    let (published, done) = read_published_at(path);
    let keys = published
        .into_iter()
        .map(|(seq, (key, _))| (seq, key))
        .collect();
    (keys, done)
}

/// The events a publisher's log names (seq to key and the time it was stored) and whether
/// it finished.
pub(crate) fn read_published_at(path: &Path) -> (BTreeMap<i64, (String, i64)>, bool) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    // A SIGKILL can cut the last line: only lines with their newline count.
    let complete = text.rfind('\n').map_or("", |end| &text[..end]);
    let mut published = BTreeMap::new();
    let mut done = false;
    for line in complete.lines() {
        if line == "done" {
            done = true;
            continue;
        }
        let fields: Vec<&str> = line.split(' ').collect();
        if let [seq, key, at] = fields[..] {
            if let (Ok(seq), Ok(at)) = (seq.parse(), at.parse()) {
                published.insert(seq, (key.to_owned(), at));
            }
        }
    }
    (published, done)
}

pub(crate) fn all_steps(dir: &Path, members: &[&str]) -> Vec<Step> {
    members
        .iter()
        .flat_map(|name| read_steps(&dir.join(format!("{name}.log"))))
        .collect()
}

/// A handled event: the `start` and `end` of one run, and whether its ack (or the direct
/// commit after a refused ack) was accepted.
#[derive(Debug, Clone)]
pub(crate) struct Handling {
    pub(crate) run: (String, u32),
    pub(crate) partition: u32,
    pub(crate) epoch: u64,
    pub(crate) key: String,
    pub(crate) seq: i64,
    pub(crate) start: i64,
    pub(crate) end: Option<i64>,
    pub(crate) acked: bool,
}

pub(crate) fn handlings(steps: &[Step]) -> Vec<Handling> {
    let mut open: HashMap<((String, u32), i64), usize> = HashMap::new();
    let mut out: Vec<Handling> = Vec::new();
    for step in steps {
        let id = (step.run(), step.seq);
        match step.kind.as_str() {
            "start" => {
                open.insert(id, out.len());
                out.push(Handling {
                    run: step.run(),
                    partition: step.partition,
                    epoch: step.epoch,
                    key: step.key.clone(),
                    seq: step.seq,
                    start: step.at,
                    end: None,
                    acked: false,
                });
            }
            "end" => {
                if let Some(index) = open.get(&id) {
                    out[*index].end = Some(step.at);
                }
            }
            // A commit the store accepted after a refused acknowledgement (the member's own
            // clock gave the lease up first) stores the event as done, as an ack would.
            "acked" | "commit-accepted" => {
                if let Some(index) = open.get(&id) {
                    out[*index].acked = true;
                }
            }
            _ => {}
        }
    }
    out
}

/// Serializes the process tests of one test binary: their takeover deadlines are measured
/// in wall time, and two of them at once would share the machine's cores with each other's
/// member processes.
pub(crate) async fn one_at_a_time() -> tokio::sync::MutexGuard<'static, ()> {
    static ALONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    ALONE.lock().await
}

/// Expands to a port's multi-process group tests: the ignored child test `group_child`
/// ([`GroupProcesses::child`]) and one `#[tokio::test]` per listed test, each calling the
/// named method of [`GroupProcesses`] in a fresh temporary directory.
///
/// `setup` is an async function called as `setup(dir: &Path, args...)` with the listed
/// arguments; it returns `Option<(String, G)>`: the location handed to `open`, and a
/// guard kept until the test ends (a factory that deletes its streams on drop, say).
/// `None` skips the test: `setup` reports why (see [`crate::skip_or_fail`]).
///
/// ```ignore
/// photon_testkit::group_process_tests! {
///     role_env: "PHOTON_NATS_TEST_GROUP_ROLE",
///     open: open,
///     setup: location,
///     tests: {
///         group_members_survive_kills => members_survive_kills(1),
///         group_members_survive_kills_four_shards => members_survive_kills(4),
///     }
/// }
/// ```
///
/// Without `tests`, the four standard tests, `setup` called with the directory alone:
/// `group_members_survive_kills`, `frozen_member_is_fenced`,
/// `group_handlers_hold_through_joins_kills_and_freezes` and `group_composition`.
///
/// The calling crate needs `tokio` and `tempfile` among its dev-dependencies.
#[macro_export]
macro_rules! group_process_tests {
    (role_env: $role_env:expr, open: $open:expr, setup: $setup:expr $(,)?) => {
        $crate::group_process_tests! {
            role_env: $role_env,
            open: $open,
            setup: $setup,
            tests: {
                group_members_survive_kills => members_survive_kills(),
                frozen_member_is_fenced => frozen_member_is_fenced(),
                group_handlers_hold_through_joins_kills_and_freezes =>
                    handlers_hold_through_joins_kills_and_freezes(),
                /// Seeded schedules of joins, SIGKILLs and SIGSTOPs of member and publisher
                /// processes (`photon_testkit::composition::ProcessSchedule`), checked from
                /// the processes' logs.
                group_composition => composition(),
                /// Delayed events through SIGKILLed publishing processes running the
                /// scheduler (`photon_testkit::delayed_processes`).
                delayed_survive_kills => delayed_survive_kills(),
            }
        }
    };
    (
        role_env: $role_env:expr,
        open: $open:expr,
        setup: $setup:expr,
        tests: { $( $(#[$meta:meta])* $name:ident => $method:ident ( $($arg:expr),* ) ),* $(,)? }
    ) => {
        /// A child process of the tests below.
        #[test]
        #[ignore = "child process of the group process tests"]
        fn group_child() {
            $crate::group_processes::GroupProcesses::child($role_env, $open);
        }

        $(
            $(#[$meta])*
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let directory = tempfile::tempdir().unwrap();
                if let Some((location, _guard)) = $setup(directory.path() $(, $arg)*).await {
                    $crate::group_processes::GroupProcesses {
                        role_env: $role_env,
                        location,
                        open: $open,
                        dir: directory.path().to_owned(),
                    }
                    .$method()
                    .await;
                }
            }
        )*
    };
}
