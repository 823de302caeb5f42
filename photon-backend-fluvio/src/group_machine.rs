//! The deterministic state machine of the group coordination log (see [`crate::group`]).
//!
//! Every port instance applies the same commands in the same (log) order to this machine,
//! so every instance derives the same members, leases, epochs and checkpoints, and the
//! outcome of a command is the same wherever it is computed.
//!
//! Time is the log clock: the largest writer time of the commands applied so far. It never
//! goes back, so a lease that expired at one log position stays expired at every later one,
//! whatever the clock of a later writer says.

use std::collections::{BTreeMap, HashMap};

use photon_core::group::{GroupScope, LiveMember, PartitionLease};
use serde::{Deserialize, Serialize};

/// One record of the coordination topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Command {
    /// Unique per call: the writer finds its outcome by it.
    pub(crate) id: String,
    /// The writer's wall clock when it wrote the command, in ms since the Unix epoch.
    pub(crate) at_ms: i64,
    /// Group name.
    pub(crate) group: String,
    /// Photon topic.
    pub(crate) topic: String,
    /// What to do.
    pub(crate) op: Op,
}

impl Command {
    fn scope(&self) -> GroupScope {
        GroupScope::new(&self.group, &self.topic)
    }
}

/// The operations of [`photon_core::group::GroupCoordination`] that change state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Op {
    /// A member incarnation is alive for `ttl_ms`.
    Heartbeat {
        member: String,
        owner: String,
        partitions: u32,
        ttl_ms: i64,
    },
    /// A member incarnation left.
    Leave { owner: String },
    /// Take a free or expired lease.
    Acquire {
        partition: u32,
        owner: String,
        ttl_ms: i64,
    },
    /// Extend a live lease held at `epoch`.
    Renew {
        partition: u32,
        owner: String,
        epoch: u64,
        ttl_ms: i64,
    },
    /// One heartbeat's renewals: each `(partition, epoch)` as [`Op::Renew`].
    RenewMany {
        owner: String,
        leases: Vec<(u32, u64)>,
        ttl_ms: i64,
    },
    /// Give a lease held at `epoch` back.
    Release {
        partition: u32,
        owner: String,
        epoch: u64,
    },
    /// Raise a checkpoint under a live lease held at `epoch`.
    Commit {
        partition: u32,
        owner: String,
        epoch: u64,
        seq: i64,
    },
}

/// What applying a command decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The live members after a heartbeat.
    Members(Vec<LiveMember>),
    /// A leave or release (they always succeed; a release of a lost lease changes nothing).
    Done,
    /// The new epoch, or `None` when another owner holds a live lease.
    Acquired(Option<u64>),
    /// Whether the lease was still held and live.
    Renewed(bool),
    /// Per lease of an [`Op::RenewMany`], in its order.
    RenewedMany(Vec<bool>),
    /// Whether the commit was made (`false`: fenced).
    Committed(bool),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct MemberEntry {
    name: String,
    partitions: u32,
    expires_ms: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Lease {
    /// Empty when released.
    owner: String,
    epoch: u64,
    expires_ms: i64,
    checkpoint: Option<i64>,
}

impl Lease {
    fn live(&self, now_ms: i64) -> bool {
        !self.owner.is_empty() && self.expires_ms > now_ms
    }

    fn held_by(&self, owner: &str, epoch: u64, now_ms: i64) -> bool {
        self.owner == owner && self.epoch == epoch && self.live(now_ms)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct GroupState {
    /// Heartbeats by owner token.
    members: HashMap<String, MemberEntry>,
    leases: BTreeMap<u32, Lease>,
}

impl GroupState {
    fn live_members(&self, now_ms: i64) -> Vec<LiveMember> {
        let mut members: Vec<LiveMember> = self
            .members
            .values()
            .filter(|entry| entry.expires_ms > now_ms)
            .map(|entry| LiveMember {
                name: entry.name.clone(),
                partitions: entry.partitions,
            })
            .collect();
        members.sort();
        members.dedup();
        members
    }
}

/// Extends a live lease held by `owner` at `epoch`; whether it was.
fn renew(
    state: &mut GroupState,
    partition: u32,
    owner: &str,
    epoch: u64,
    now_ms: i64,
    ttl_ms: i64,
) -> bool {
    match state.leases.get_mut(&partition) {
        Some(lease) if lease.held_by(owner, epoch, now_ms) => {
            lease.expires_ms = now_ms.saturating_add(ttl_ms);
            true
        }
        _ => false,
    }
}

/// Members, leases and checkpoints of every group of one port prefix, as of the commands
/// applied so far.
///
/// It serializes as its [`Fact`]s: what a snapshot of the log stores.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "Vec<Fact>", from = "Vec<Fact>")]
pub(crate) struct Machine {
    /// The log clock (ms since the Unix epoch).
    clock_ms: i64,
    groups: HashMap<GroupScope, GroupState>,
}

/// One piece of a [`Machine`]'s state: a snapshot of the log is a list of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Fact {
    /// The log clock.
    Clock { ms: i64 },
    /// A member incarnation's last heartbeat.
    Member {
        group: String,
        topic: String,
        owner: String,
        name: String,
        partitions: u32,
        expires_ms: i64,
    },
    /// A partition's lease (also a released one: its epoch and checkpoint stay).
    Lease {
        group: String,
        topic: String,
        partition: u32,
        owner: String,
        epoch: u64,
        expires_ms: i64,
        checkpoint: Option<i64>,
    },
}

impl From<Machine> for Vec<Fact> {
    fn from(machine: Machine) -> Self {
        machine.facts()
    }
}

impl From<Vec<Fact>> for Machine {
    fn from(facts: Vec<Fact>) -> Self {
        let mut machine = Machine::default();
        for fact in facts {
            match fact {
                Fact::Clock { ms } => machine.clock_ms = machine.clock_ms.max(ms),
                Fact::Member {
                    group,
                    topic,
                    owner,
                    name,
                    partitions,
                    expires_ms,
                } => {
                    let state = machine.groups.entry(GroupScope::new(&group, &topic));
                    state.or_default().members.insert(
                        owner,
                        MemberEntry {
                            name,
                            partitions,
                            expires_ms,
                        },
                    );
                }
                Fact::Lease {
                    group,
                    topic,
                    partition,
                    owner,
                    epoch,
                    expires_ms,
                    checkpoint,
                } => {
                    let state = machine.groups.entry(GroupScope::new(&group, &topic));
                    state.or_default().leases.insert(
                        partition,
                        Lease {
                            owner,
                            epoch,
                            expires_ms,
                            checkpoint,
                        },
                    );
                }
            }
        }
        machine
    }
}

impl Machine {
    /// The state that matters from here on, as [`Fact`]s: the clock, every lease (epochs
    /// and checkpoints must outlive their holders) and the members not yet expired on the
    /// log clock (an expired one is never listed again: liveness is judged at a time no
    /// earlier than the log clock, and the clock never goes back). Sorted, so two machines
    /// with the same state give the same facts.
    pub(crate) fn facts(&self) -> Vec<Fact> {
        let mut scopes: Vec<(&GroupScope, &GroupState)> = self.groups.iter().collect();
        scopes.sort_by(|a, b| (&a.0.group, &a.0.topic).cmp(&(&b.0.group, &b.0.topic)));
        let mut facts = vec![Fact::Clock { ms: self.clock_ms }];
        for (scope, state) in scopes {
            let mut members: Vec<(&String, &MemberEntry)> = state
                .members
                .iter()
                .filter(|(_, entry)| entry.expires_ms > self.clock_ms)
                .collect();
            members.sort_by(|a, b| a.0.cmp(b.0));
            facts.extend(members.into_iter().map(|(owner, entry)| Fact::Member {
                group: scope.group.clone(),
                topic: scope.topic.clone(),
                owner: owner.clone(),
                name: entry.name.clone(),
                partitions: entry.partitions,
                expires_ms: entry.expires_ms,
            }));
            facts.extend(state.leases.iter().map(|(partition, lease)| Fact::Lease {
                group: scope.group.clone(),
                topic: scope.topic.clone(),
                partition: *partition,
                owner: lease.owner.clone(),
                epoch: lease.epoch,
                expires_ms: lease.expires_ms,
                checkpoint: lease.checkpoint,
            }));
        }
        facts
    }

    /// The log clock: the largest writer time applied so far.
    pub(crate) fn clock_ms(&self) -> i64 {
        self.clock_ms
    }

    /// Applies one command at the next log position and returns what it decided.
    pub(crate) fn apply(&mut self, command: &Command) -> Outcome {
        self.clock_ms = self.clock_ms.max(command.at_ms);
        let now = self.clock_ms;
        let state = self.groups.entry(command.scope()).or_default();
        match &command.op {
            Op::Heartbeat {
                member,
                owner,
                partitions,
                ttl_ms,
            } => {
                state.members.insert(
                    owner.clone(),
                    MemberEntry {
                        name: member.clone(),
                        partitions: *partitions,
                        expires_ms: now.saturating_add(*ttl_ms),
                    },
                );
                // Every instance forgets the same expired members at the same position.
                state.members.retain(|_, entry| entry.expires_ms > now);
                Outcome::Members(state.live_members(now))
            }
            Op::Leave { owner } => {
                state.members.remove(owner);
                Outcome::Done
            }
            Op::Acquire {
                partition,
                owner,
                ttl_ms,
            } => {
                let lease = state.leases.entry(*partition).or_default();
                if lease.live(now) {
                    return Outcome::Acquired(None);
                }
                lease.owner.clone_from(owner);
                lease.epoch += 1;
                lease.expires_ms = now.saturating_add(*ttl_ms);
                Outcome::Acquired(Some(lease.epoch))
            }
            Op::Renew {
                partition,
                owner,
                epoch,
                ttl_ms,
            } => Outcome::Renewed(renew(state, *partition, owner, *epoch, now, *ttl_ms)),
            Op::RenewMany {
                owner,
                leases,
                ttl_ms,
            } => Outcome::RenewedMany(
                leases
                    .iter()
                    .map(|(partition, epoch)| renew(state, *partition, owner, *epoch, now, *ttl_ms))
                    .collect(),
            ),
            Op::Release {
                partition,
                owner,
                epoch,
            } => {
                if let Some(lease) = state
                    .leases
                    .get_mut(partition)
                    .filter(|lease| lease.owner == *owner && lease.epoch == *epoch)
                {
                    lease.owner.clear();
                    lease.expires_ms = 0;
                }
                Outcome::Done
            }
            Op::Commit {
                partition,
                owner,
                epoch,
                seq,
            } => match state.leases.get_mut(partition) {
                Some(lease) if lease.held_by(owner, *epoch, now) => {
                    lease.checkpoint = Some(lease.checkpoint.map_or(*seq, |c| c.max(*seq)));
                    Outcome::Committed(true)
                }
                _ => Outcome::Committed(false),
            },
        }
    }

    /// Whether `owner` holds the partition's lease at `epoch`, live at `now_ms`.
    pub(crate) fn held_by(
        &self,
        scope: &GroupScope,
        partition: u32,
        owner: &str,
        epoch: u64,
        now_ms: i64,
    ) -> bool {
        self.groups
            .get(scope)
            .and_then(|state| state.leases.get(&partition))
            .is_some_and(|lease| lease.held_by(owner, epoch, now_ms))
    }

    /// The live members of a scope at `now_ms`.
    pub(crate) fn members(&self, scope: &GroupScope, now_ms: i64) -> Vec<LiveMember> {
        self.groups
            .get(scope)
            .map(|state| state.live_members(now_ms))
            .unwrap_or_default()
    }

    /// The committed seq of a partition.
    pub(crate) fn checkpoint(&self, scope: &GroupScope, partition: u32) -> Option<i64> {
        self.groups
            .get(scope)
            .and_then(|state| state.leases.get(&partition))
            .and_then(|lease| lease.checkpoint)
    }

    /// Every lease of a scope, by partition, with liveness at `now_ms`.
    pub(crate) fn leases(&self, scope: &GroupScope, now_ms: i64) -> Vec<PartitionLease> {
        self.groups
            .get(scope)
            .map(|state| {
                state
                    .leases
                    .iter()
                    .map(|(partition, lease)| PartitionLease {
                        partition: *partition,
                        owner: lease.owner.clone(),
                        epoch: lease.epoch,
                        live: lease.live(now_ms),
                        checkpoint: lease.checkpoint,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(at_ms: i64, op: Op) -> Command {
        Command {
            id: format!("c{at_ms}"),
            at_ms,
            group: "g".into(),
            topic: "t".into(),
            op,
        }
    }

    fn acquire(at_ms: i64, owner: &str) -> Command {
        command(
            at_ms,
            Op::Acquire {
                partition: 0,
                owner: owner.into(),
                ttl_ms: 1000,
            },
        )
    }

    fn commit(at_ms: i64, owner: &str, epoch: u64, seq: i64) -> Command {
        command(
            at_ms,
            Op::Commit {
                partition: 0,
                owner: owner.into(),
                epoch,
                seq,
            },
        )
    }

    #[test]
    fn a_lease_goes_to_the_first_acquire_in_log_order_until_it_expires() {
        let mut machine = Machine::default();
        assert_eq!(
            machine.apply(&acquire(10_000, "a")),
            Outcome::Acquired(Some(1))
        );
        assert_eq!(
            machine.apply(&acquire(10_500, "b")),
            Outcome::Acquired(None)
        );
        assert_eq!(
            machine.apply(&acquire(10_999, "b")),
            Outcome::Acquired(None)
        );
        assert_eq!(
            machine.apply(&acquire(11_000, "b")),
            Outcome::Acquired(Some(2))
        );
        assert_eq!(
            machine.apply(&commit(11_001, "a", 1, 5)),
            Outcome::Committed(false)
        );
        assert_eq!(
            machine.apply(&commit(11_002, "b", 2, 5)),
            Outcome::Committed(true)
        );
        let scope = GroupScope::new("g", "t");
        assert_eq!(machine.checkpoint(&scope, 0), Some(5));
    }

    #[test]
    fn the_log_clock_never_goes_back() {
        let mut machine = Machine::default();
        assert_eq!(
            machine.apply(&acquire(10_000, "a")),
            Outcome::Acquired(Some(1))
        );
        // A writer whose clock runs ahead moves the log clock past the lease's expiry...
        assert_eq!(
            machine.apply(&acquire(12_000, "b")),
            Outcome::Acquired(Some(2))
        );
        // ...and a writer whose clock lags behind cannot bring the old lease back to life.
        assert_eq!(
            machine.apply(&commit(10_100, "a", 1, 3)),
            Outcome::Committed(false)
        );
        assert_eq!(machine.clock_ms(), 12_000);
        let renew = command(
            10_200,
            Op::Renew {
                partition: 0,
                owner: "b".into(),
                epoch: 2,
                ttl_ms: 1000,
            },
        );
        assert_eq!(machine.apply(&renew), Outcome::Renewed(true));
        let leases = machine.leases(&GroupScope::new("g", "t"), 12_999);
        assert_eq!(leases.len(), 1);
        assert!(leases[0].live);
        assert!(!machine.leases(&GroupScope::new("g", "t"), 13_000)[0].live);
    }

    #[test]
    fn commits_never_lower_a_checkpoint_and_releases_free_the_lease_at_once() {
        let mut machine = Machine::default();
        machine.apply(&acquire(1000, "a"));
        assert_eq!(
            machine.apply(&commit(1001, "a", 1, 9)),
            Outcome::Committed(true)
        );
        assert_eq!(
            machine.apply(&commit(1002, "a", 1, 4)),
            Outcome::Committed(true)
        );
        let scope = GroupScope::new("g", "t");
        assert_eq!(machine.checkpoint(&scope, 0), Some(9));
        let stale = command(
            1003,
            Op::Release {
                partition: 0,
                owner: "a".into(),
                epoch: 0,
            },
        );
        assert_eq!(machine.apply(&stale), Outcome::Done);
        assert_eq!(machine.apply(&acquire(1004, "b")), Outcome::Acquired(None));
        let release = command(
            1005,
            Op::Release {
                partition: 0,
                owner: "a".into(),
                epoch: 1,
            },
        );
        assert_eq!(machine.apply(&release), Outcome::Done);
        assert_eq!(
            machine.apply(&acquire(1006, "b")),
            Outcome::Acquired(Some(2))
        );
        assert_eq!(machine.checkpoint(&scope, 0), Some(9));
    }

    #[test]
    fn heartbeats_list_live_members_once_per_name() {
        let mut machine = Machine::default();
        let beat = |at_ms, member: &str, owner: &str| {
            command(
                at_ms,
                Op::Heartbeat {
                    member: member.into(),
                    owner: owner.into(),
                    partitions: 8,
                    ttl_ms: 1000,
                },
            )
        };
        let live = |names: &[&str]| -> Outcome {
            Outcome::Members(
                names
                    .iter()
                    .map(|name| LiveMember {
                        name: (*name).into(),
                        partitions: 8,
                    })
                    .collect(),
            )
        };
        assert_eq!(machine.apply(&beat(1000, "b", "b#1")), live(&["b"]));
        assert_eq!(machine.apply(&beat(1100, "a", "a#1")), live(&["a", "b"]));
        assert_eq!(machine.apply(&beat(1200, "a", "a#2")), live(&["a", "b"]));
        assert_eq!(machine.apply(&beat(2000, "a", "a#2")), live(&["a"]));
        let leave = command(
            2001,
            Op::Leave {
                owner: "a#1".into(),
            },
        );
        assert_eq!(machine.apply(&leave), Outcome::Done);
        assert_eq!(
            machine.members(&GroupScope::new("g", "t"), 2100),
            vec![LiveMember {
                name: "a".into(),
                partitions: 8
            }]
        );
    }

    #[test]
    fn a_batch_renews_each_lease_it_still_holds() {
        let mut machine = Machine::default();
        let take = |at_ms, partition, owner: &str| {
            command(
                at_ms,
                Op::Acquire {
                    partition,
                    owner: owner.into(),
                    ttl_ms: 1000,
                },
            )
        };
        assert_eq!(
            machine.apply(&take(1000, 0, "a")),
            Outcome::Acquired(Some(1))
        );
        assert_eq!(
            machine.apply(&take(1000, 1, "a")),
            Outcome::Acquired(Some(1))
        );
        assert_eq!(
            machine.apply(&take(1000, 2, "b")),
            Outcome::Acquired(Some(1))
        );
        let batch = command(
            1500,
            Op::RenewMany {
                owner: "a".into(),
                leases: vec![(0, 1), (1, 2), (2, 1), (3, 1)],
                ttl_ms: 1000,
            },
        );
        assert_eq!(
            machine.apply(&batch),
            Outcome::RenewedMany(vec![true, false, false, false])
        );
        let leases = machine.leases(&GroupScope::new("g", "t"), 2100);
        let live: Vec<(u32, bool)> = leases.iter().map(|l| (l.partition, l.live)).collect();
        assert_eq!(live, vec![(0, true), (1, false), (2, false)]);
        let json = serde_json::to_vec(&batch).unwrap();
        assert_eq!(serde_json::from_slice::<Command>(&json).unwrap(), batch);
    }

    /// A busy log: heartbeats, acquires, batched renewals, commits, a release, a leave, a
    /// member that expires, and a second group.
    fn busy_log() -> Vec<Command> {
        let mut log = Vec::new();
        let mut at = 1_000;
        let mut push = |group: &str, op: Op, log: &mut Vec<Command>| {
            at += 7;
            log.push(Command {
                id: format!("c{at}"),
                at_ms: at,
                group: group.into(),
                topic: "t".into(),
                op,
            });
        };
        for round in 0..200_u32 {
            for member in ["a", "b", "c"] {
                if member == "c" && round > 20 {
                    continue; // c stops beating and expires
                }
                let owner = format!("{member}#1");
                push(
                    "g",
                    Op::Heartbeat {
                        member: member.into(),
                        owner: owner.clone(),
                        partitions: 4,
                        ttl_ms: 500,
                    },
                    &mut log,
                );
                let mine = if member == "a" { [0, 1] } else { [2, 3] };
                for partition in mine {
                    push(
                        "g",
                        Op::Acquire {
                            partition,
                            owner: owner.clone(),
                            ttl_ms: 500,
                        },
                        &mut log,
                    );
                }
                push(
                    "g",
                    Op::RenewMany {
                        owner: owner.clone(),
                        leases: vec![(mine[0], 1), (mine[1], 1)],
                        ttl_ms: 500,
                    },
                    &mut log,
                );
                push(
                    "g",
                    Op::Commit {
                        partition: mine[0],
                        owner,
                        epoch: 1,
                        seq: i64::from(round),
                    },
                    &mut log,
                );
            }
            push(
                "h",
                Op::Acquire {
                    partition: round % 3,
                    owner: "x#1".into(),
                    ttl_ms: 50,
                },
                &mut log,
            );
        }
        push(
            "g",
            Op::Release {
                partition: 1,
                owner: "a#1".into(),
                epoch: 1,
            },
            &mut log,
        );
        push(
            "g",
            Op::Leave {
                owner: "b#1".into(),
            },
            &mut log,
        );
        log
    }

    #[test]
    fn a_machine_restored_from_its_facts_decides_as_the_one_that_replayed_everything() {
        let log = busy_log();
        for cut in [0, 1, 17, 300, log.len() / 2, log.len()] {
            let mut replayed = Machine::default();
            for command in &log[..cut] {
                replayed.apply(command);
            }
            let json = serde_json::to_vec(&replayed).unwrap();
            let mut restored: Machine = serde_json::from_slice(&json).unwrap();
            assert_eq!(restored.facts(), replayed.facts(), "cut {cut}");
            for command in &log[cut..] {
                assert_eq!(
                    restored.apply(command),
                    replayed.apply(command),
                    "cut {cut}, {command:?}"
                );
            }
            assert_eq!(restored.clock_ms(), replayed.clock_ms());
            for group in ["g", "h"] {
                let scope = GroupScope::new(group, "t");
                let now = replayed.clock_ms();
                assert_eq!(restored.leases(&scope, now), replayed.leases(&scope, now));
                assert_eq!(restored.members(&scope, now), replayed.members(&scope, now));
            }
        }
    }

    #[test]
    fn facts_drop_expired_members_and_keep_every_lease() {
        let mut machine = Machine::default();
        for command in busy_log() {
            machine.apply(&command);
        }
        let facts = machine.facts();
        let members: Vec<&str> = facts
            .iter()
            .filter_map(|fact| match fact {
                Fact::Member { owner, .. } => Some(owner.as_str()),
                _ => None,
            })
            .collect();
        // c expired long ago, b left; a is live.
        assert_eq!(members, ["a#1"]);
        let leases = facts
            .iter()
            .filter(|fact| matches!(fact, Fact::Lease { .. }))
            .count();
        assert_eq!(leases, 4 + 3);
        assert_eq!(
            facts[0],
            Fact::Clock {
                ms: machine.clock_ms()
            }
        );
        let g = GroupScope::new("g", "t");
        assert_eq!(machine.checkpoint(&g, 0), Some(199));
        assert_eq!(Machine::from(facts).checkpoint(&g, 0), Some(199));
    }

    #[test]
    fn commands_round_trip_through_json() {
        let original = commit(5, "a#x", 3, 42);
        let bytes = serde_json::to_vec(&original).unwrap();
        let decoded: Command = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(decoded, original);
    }
}
