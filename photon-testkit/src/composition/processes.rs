//! The multi-process mode: seeded schedules of process faults on a consumer group whose
//! members and publisher are real processes.
//!
//! A [`ProcessSchedule`] is drawn from a seed: the kind of member (the raw group stream
//! acknowledging each event, or an executor group handler), how long a member takes per
//! event, the keys, the publishing rate, how many members start, and 3 to 8 timed steps:
//! members joining, members killed with SIGKILL (restarted under their name, under a new
//! name, or not at all), members frozen with SIGSTOP (shorter or longer than their lease),
//! the publisher killed with SIGKILL (a new publisher process publishes the next chunk of
//! events) or frozen. [`GroupProcesses::play_schedule`] plays it against the backend and
//! checks, from the processes' fsynced logs:
//!
//! - every event a publisher logged as stored is handled to the end (and, on the raw
//!   stream, acknowledged); an event nobody logged is only handled when a publisher was
//!   killed (stored, its acknowledgement lost with the process);
//! - every handled event has the key it was published under and runs on the partition of
//!   its key;
//! - no attempt starts under a lease after a later lease of its partition began;
//! - no key is handled by two members at overlapping times (an attempt in progress when its
//!   process was frozen, or whose lease check passed just before the freeze and whose start
//!   shows just after it, is the documented exception; `group_checks::without_frozen_attempts`);
//! - each owner run handles each key in seq order;
//! - an event is handled again only under a later epoch of its partition;
//! - no acknowledgement is accepted after a later lease of its partition began (raw stream);
//! - a partition with work left is taken over within the lease + 2 s after its member was
//!   killed or frozen past its lease, when another member is running;
//! - the whole schedule drains within [`PROCESS_DRAIN_BOUND`].
//!
//! Runs: each port's `group_processes` test `group_composition` plays
//! [`PROCESS_CASES_ENV`] schedules (default 2) from [`SEED_ENV`](super::SEED_ENV).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use photon_core::group::partition_of;

use crate::group_checks::{
    order_per_run, overlapping, repeats_not_under_later_epochs, slow_takeovers,
    without_frozen_attempts, zombie_starts,
};
use crate::group_processes::{
    all_steps, handlings, now_ns, one_at_a_time, read_published_at, GroupProcesses, Handling, Plan,
    Role, LEASE,
};
use crate::process::{Random, Spawned};

/// Environment variable: multi-process schedules per port (default 2).
pub const PROCESS_CASES_ENV: &str = "PHOTON_COMPOSITION_PROCESS_CASES";

/// The longest a schedule may take to drain after its last step.
pub const PROCESS_DRAIN_BOUND: Duration = Duration::from_secs(120);

/// What the member processes of a schedule run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberKind {
    /// The raw group stream: each delivery logged, then acknowledged.
    Stream,
    /// An executor group handler (`HandlerOptions::group`).
    Handler,
}

/// What happens to a killed member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    /// Started again under its name (static membership).
    SameName,
    /// Replaced by a process under a new name.
    NewName,
    /// Not restarted (a crash that leaves the group).
    Never,
}

/// One step of a process schedule. `member` picks among the running members, modulo their
/// number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessOp {
    /// A member process under a new name joins.
    Join,
    /// SIGKILLs a member.
    Kill {
        /// Which running member.
        member: usize,
        /// What happens next.
        restart: Restart,
    },
    /// SIGSTOPs a member for `millis`, then SIGCONTs it.
    Freeze {
        /// Which running member.
        member: usize,
        /// How long it stays stopped.
        millis: u64,
    },
    /// SIGKILLs the publisher; a new publisher process publishes the next chunk.
    KillPublisher,
    /// SIGSTOPs the publisher for `millis`.
    FreezePublisher {
        /// How long it stays stopped.
        millis: u64,
    },
}

/// A multi-process schedule drawn from a seed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessSchedule {
    /// The seed it was drawn from.
    pub seed: u64,
    /// What the members run.
    pub kind: MemberKind,
    /// Milliseconds a member spends on each event.
    pub handle_ms: u64,
    /// Keys the events are spread over.
    pub keys: usize,
    /// Events per second each publisher process publishes.
    pub per_second: u64,
    /// Events each publisher process publishes.
    pub chunk: usize,
    /// Members running when the publisher starts.
    pub members: usize,
    /// Steps with their time in milliseconds after the publisher starts.
    pub steps: Vec<(u64, ProcessOp)>,
}

impl ProcessSchedule {
    /// Draws the schedule of `seed`: the same seed always gives the same schedule.
    pub fn generate(seed: u64) -> Self {
        let mut random = Random::new(seed.wrapping_mul(0xD1B5_4A32_D192_ED03) ^ 0x7A3F);
        let kind = if random.below(2) == 0 {
            MemberKind::Stream
        } else {
            MemberKind::Handler
        };
        let keys = [4, 16, 64][random.below(3) as usize];
        let per_second = 100 + random.below(300);
        let chunk = 150 + random.below(350) as usize;
        // A key's events are handled one after the other: keep a key's backlog (up to a few
        // chunks) within about ten seconds of handling.
        let longest = (10_000 * keys as u64 / (chunk as u64 * 3)).max(1);
        let handle_ms = [0, 1, 5, 20, 60][random.below(5) as usize].min(longest);
        let members = 1 + random.below(3) as usize;
        let publishing = chunk as u64 * 1000 / per_second;
        let mut times: Vec<u64> = (0..3 + random.below(6))
            .map(|_| 200 + random.below(publishing + 1500))
            .collect();
        times.sort_unstable();
        let steps = times
            .into_iter()
            .map(|at| (at, draw(&mut random)))
            .collect();
        Self {
            seed,
            kind,
            handle_ms,
            keys,
            per_second,
            chunk,
            members,
            steps,
        }
    }

    /// Faults the schedule injects (kills and freezes).
    pub fn faults(&self) -> usize {
        self.steps
            .iter()
            .filter(|(_, op)| !matches!(op, ProcessOp::Join))
            .count()
    }
}

fn draw(random: &mut Random) -> ProcessOp {
    let member = random.below(8) as usize;
    match random.below(100) {
        0..15 => ProcessOp::Join,
        15..50 => ProcessOp::Kill {
            member,
            restart: match random.below(5) {
                0 | 1 => Restart::SameName,
                2 | 3 => Restart::NewName,
                _ => Restart::Never,
            },
        },
        50..75 => ProcessOp::Freeze {
            member,
            millis: 500 + random.below(4000),
        },
        75..90 => ProcessOp::KillPublisher,
        _ => ProcessOp::FreezePublisher {
            millis: 300 + random.below(2500),
        },
    }
}

/// What playing one schedule did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessRun {
    /// Events the publishers logged as stored.
    pub published: usize,
    /// Handlings (attempts) the members logged.
    pub handlings: usize,
    /// Member and publisher processes killed with SIGKILL.
    pub kills: usize,
    /// Member and publisher processes frozen with SIGSTOP.
    pub freezes: usize,
}

/// A running member process.
struct Slot {
    role: Role,
    child: Spawned,
}

impl Slot {
    fn run(&self) -> (String, u32) {
        (self.role.name.clone(), self.role.incarnation)
    }
}

/// The publisher processes of one schedule, one chunk of events each.
struct Publishers {
    plan: Plan,
    logs: Vec<std::path::PathBuf>,
    current: Spawned,
    killed: usize,
}

impl GroupProcesses {
    /// Plays [`PROCESS_CASES_ENV`] schedules (default 2) from
    /// [`SEED_ENV`](super::SEED_ENV), each on its own topic and group.
    ///
    /// # Panics
    /// When a schedule breaks the model: with its seed, its steps and every finding.
    pub async fn composition(&self) -> ProcessRun {
        let cases: u64 = std::env::var(PROCESS_CASES_ENV)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2);
        let first: u64 = std::env::var(super::SEED_ENV)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1);
        let mut total = ProcessRun::default();
        for seed in first..first + cases {
            let schedule = ProcessSchedule::generate(seed);
            match self.play_schedule(&schedule).await {
                Ok(run) => {
                    total.published += run.published;
                    total.handlings += run.handlings;
                    total.kills += run.kills;
                    total.freezes += run.freezes;
                }
                Err(findings) => panic!(
                    "multi-process composition schedule with seed {seed} fails:\n{}\n\
                     schedule: {schedule:?}\n\
                     re-run with {}={seed} {PROCESS_CASES_ENV}=1",
                    findings.join("\n"),
                    super::SEED_ENV
                ),
            }
        }
        println!(
            "{cases} process schedules: {} events, {} handlings, {} kills, {} freezes, no violation",
            total.published, total.handlings, total.kills, total.freezes
        );
        total
    }

    /// Plays `schedule` and checks its logs (see the module docs).
    ///
    /// # Errors
    /// Every finding, one line each.
    pub async fn play_schedule(
        &self,
        schedule: &ProcessSchedule,
    ) -> Result<ProcessRun, Vec<String>> {
        let _alone = one_at_a_time().await;
        let unique = uuid::Uuid::new_v4().simple().to_string();
        let topic = format!("composition.p{}.{}", schedule.seed, &unique[..8]);
        let group = format!("c{}", &unique[..8]);
        let dir = self
            .dir
            .join(format!("s{}-{}", schedule.seed, &unique[..8]));
        std::fs::create_dir_all(&dir).expect("a log directory");
        let partitions = self.partitions(&topic).await;
        let kind = match schedule.kind {
            MemberKind::Stream => "member",
            MemberKind::Handler => "handler",
        };
        let role = |name: String, incarnation| Role {
            name,
            incarnation,
            handle_ms: schedule.handle_ms,
            topic: topic.clone(),
            group: group.clone(),
        };
        let mut names: Vec<String> = Vec::new();
        let mut slots: Vec<Slot> = Vec::new();
        let mut start = |slots: &mut Vec<Slot>, role: Role| {
            if !names.contains(&role.name) {
                names.push(role.name.clone());
            }
            let child = self.spawn_role(kind, &dir, &role);
            slots.push(Slot { role, child });
        };
        let mut fresh = 0;
        let mut new_name = || {
            fresh += 1;
            format!("m{fresh}")
        };
        for _ in 0..schedule.members {
            start(&mut slots, role(new_name(), 0));
        }
        let plan = Plan {
            topic: topic.clone(),
            first: 0,
            count: schedule.chunk,
            per_second: schedule.per_second,
            keys: schedule.keys,
        };
        let log = dir.join("published-0.log");
        let mut publishers = Publishers {
            current: self.spawn_plan(&log, &plan),
            plan,
            logs: vec![log],
            killed: 0,
        };
        let mut findings = Vec::new();
        let mut kills: Vec<((String, u32), i64)> = Vec::new();
        // (run, from, to) of each member freeze.
        let mut freezes: Vec<((String, u32), i64, i64)> = Vec::new();
        // Members lost (killed, or frozen past the lease) while another member was running.
        let mut lost: Vec<((String, u32), i64)> = Vec::new();
        let mut publisher_freezes = 0;
        let started = Instant::now();
        for (at, op) in &schedule.steps {
            tokio::time::sleep_until((started + Duration::from_millis(*at)).into()).await;
            match *op {
                ProcessOp::Join => start(&mut slots, role(new_name(), 0)),
                ProcessOp::Kill { member, restart } => {
                    if slots.is_empty() {
                        continue;
                    }
                    let mut slot = slots.remove(member % slots.len());
                    slot.child.kill();
                    let at = now_ns();
                    kills.push((slot.run(), at));
                    match restart {
                        Restart::SameName => {
                            let name = slot.role.name.clone();
                            start(&mut slots, role(name, slot.role.incarnation + 1));
                        }
                        Restart::NewName => start(&mut slots, role(new_name(), 0)),
                        Restart::Never => {}
                    }
                    if !slots.is_empty() {
                        lost.push((slot.run(), at));
                    }
                }
                ProcessOp::Freeze { member, millis } => {
                    if slots.is_empty() {
                        continue;
                    }
                    let slot = &slots[member % slots.len()];
                    let from = signal(&slot.child, "-STOP");
                    tokio::time::sleep(Duration::from_millis(millis)).await;
                    let to = signal(&slot.child, "-CONT");
                    freezes.push((slot.run(), from, to));
                    if Duration::from_millis(millis) > LEASE && slots.len() > 1 {
                        lost.push((slot.run(), from));
                    }
                }
                ProcessOp::KillPublisher => {
                    // Only a kill that cut a publisher short can leave stored events unlogged.
                    if publishers.current.is_running() {
                        publishers.killed += 1;
                    }
                    publishers.current.kill();
                    publishers.plan.first += publishers.plan.count;
                    let log = dir.join(format!("published-{}.log", publishers.logs.len()));
                    publishers.current = self.spawn_plan(&log, &publishers.plan);
                    publishers.logs.push(log);
                }
                ProcessOp::FreezePublisher { millis } => {
                    signal(&publishers.current, "-STOP");
                    tokio::time::sleep(Duration::from_millis(millis)).await;
                    signal(&publishers.current, "-CONT");
                    publisher_freezes += 1;
                }
            }
        }
        if slots.is_empty() {
            // Someone has to drain what is left.
            start(&mut slots, role(new_name(), 0));
        }

        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let completes = |h: &Handling| match schedule.kind {
            MemberKind::Stream => h.acked,
            MemberKind::Handler => h.end.is_some(),
        };
        let drained = drain(&publishers.logs, &dir, &names, completes).await;
        if let Err(finding) = drained {
            findings.push(finding);
        }
        // A straggling repeat of a given-back event would show up within a few handlings.
        tokio::time::sleep(Duration::from_millis(schedule.handle_ms * 3 + 500)).await;
        for slot in &mut slots {
            slot.child.kill();
        }
        publishers.current.kill();

        let mut published: BTreeMap<i64, (String, i64)> = BTreeMap::new();
        for log in &publishers.logs {
            published.extend(read_published_at(log).0);
        }
        let handled = handlings(&all_steps(&dir, &names));
        let done: HashSet<i64> = handled
            .iter()
            .filter(|h| completes(h))
            .map(|h| h.seq)
            .collect();
        let missing: Vec<i64> = published
            .keys()
            .filter(|seq| !done.contains(seq))
            .copied()
            .collect();
        if !missing.is_empty() {
            findings.push(format!(
                "{} of {} stored events never completed, first {:?}",
                missing.len(),
                published.len(),
                &missing[..missing.len().min(10)]
            ));
        }
        let mut unknown = BTreeSet::new();
        for h in &handled {
            match published.get(&h.seq) {
                Some((key, _)) if *key != h.key => findings.push(format!(
                    "seq {} handled under key {} but published under {key}",
                    h.seq, h.key
                )),
                Some(_) => {}
                None => {
                    unknown.insert(h.seq);
                }
            }
            let expected = partition_of(Some(&h.key), h.seq, partitions);
            if h.partition != expected {
                findings.push(format!(
                    "seq {} of key {} handled on partition {} (its key's is {expected})",
                    h.seq, h.key, h.partition
                ));
            }
        }
        if publishers.killed == 0 && !unknown.is_empty() {
            findings.push(format!(
                "events no publisher logged were handled although no publisher was killed: {unknown:?}"
            ));
        }
        let killed_at: HashMap<(String, u32), i64> = kills.iter().cloned().collect();
        let checked = without_frozen_attempts(&handled, &freezes);
        findings.extend(zombie_starts(&checked));
        findings.extend(overlapping(&checked, &killed_at));
        findings.extend(order_per_run(&handled));
        findings.extend(repeats_not_under_later_epochs(&checked));
        if schedule.kind == MemberKind::Stream {
            findings.extend(late_acknowledgements(&handled));
        }
        let faults: Vec<i64> = kills
            .iter()
            .map(|(_, at)| *at)
            .chain(freezes.iter().map(|(_, from, _)| *from))
            .collect();
        // A member of the raw stream handles one event at a time.
        let slots = (schedule.kind == MemberKind::Stream).then_some(1);
        findings.extend(slow_takeovers(
            &handled, &lost, &faults, &published, partitions, slots,
        ));

        if findings.is_empty() {
            Ok(ProcessRun {
                published: published.len(),
                handlings: handled.len(),
                kills: kills.len() + publishers.killed,
                freezes: freezes.len() + publisher_freezes,
            })
        } else {
            // The caller's directory goes with its test: keep the logs where they can be read.
            let kept = std::env::temp_dir().join(format!(
                "photon-composition-s{}-{}",
                schedule.seed,
                &unique[..8]
            ));
            let copied = std::fs::create_dir_all(&kept).and_then(|()| {
                for entry in std::fs::read_dir(&dir)? {
                    let entry = entry?;
                    std::fs::copy(entry.path(), kept.join(entry.file_name()))?;
                }
                Ok(())
            });
            findings.push(match copied {
                Ok(()) => format!("logs kept in {}", kept.display()),
                Err(err) => format!("logs in {} (not kept: {err})", dir.display()),
            });
            Err(findings)
        }
    }
}

/// Sends `signal` to `child` with kill(1); returns when it was sent.
fn signal(child: &Spawned, signal: &str) -> i64 {
    let sent = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .is_ok_and(|status| status.success());
    assert!(sent, "kill {signal} {}", child.id());
    now_ns()
}

/// Waits (up to [`PROCESS_DRAIN_BOUND`]) until the last publisher is done and every event
/// any publisher logged has a handling that `completes`.
async fn drain(
    logs: &[std::path::PathBuf],
    dir: &Path,
    names: &[&str],
    completes: impl Fn(&Handling) -> bool,
) -> Result<(), String> {
    let deadline = Instant::now() + PROCESS_DRAIN_BOUND;
    loop {
        let mut published = BTreeSet::new();
        let mut last_done = false;
        for log in logs {
            let (events, done) = read_published_at(log);
            published.extend(events.into_keys());
            last_done = done;
        }
        let handled = handlings(&all_steps(dir, names));
        let done: HashSet<i64> = handled
            .iter()
            .filter(|h| completes(h))
            .map(|h| h.seq)
            .collect();
        let left = published.iter().filter(|seq| !done.contains(seq)).count();
        if last_done && left == 0 {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "not drained within {} s: {left} of {} stored events not completed, last publisher {}",
                PROCESS_DRAIN_BOUND.as_secs(),
                published.len(),
                if last_done { "done" } else { "not done" }
            ));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Acknowledgements accepted after a later lease of their partition began: the handling
/// ended (so its acknowledgement came) after another member started the partition under a
/// later epoch.
fn late_acknowledgements(handled: &[Handling]) -> Vec<String> {
    handled
        .iter()
        .filter(|h| h.acked)
        .filter_map(|h| {
            let end = h.end?;
            let later = handled
                .iter()
                .find(|o| o.partition == h.partition && o.epoch > h.epoch && o.start < end)?;
            Some(format!(
                "{:?} had seq {} acknowledged under epoch {} of partition {} after {:?} started it at epoch {}",
                h.run, h.seq, h.epoch, h.partition, later.run, later.epoch
            ))
        })
        .collect()
}
