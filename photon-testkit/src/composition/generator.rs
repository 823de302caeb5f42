//! Drawing a schedule from a seed: the same seed always gives the same schedule.

use crate::process::Random;

/// Durable subscriptions a schedule uses.
pub(crate) const SUBSCRIPTIONS: u8 = 2;
/// Group members a schedule uses.
pub(crate) const MEMBERS: u8 = 3;
/// Keys events are published under (`None`: unkeyed).
pub(crate) const KEYS: u8 = 6;

/// One step of a schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Publishes one event under key `k{key}` (unkeyed when `None`).
    Publish {
        /// The key's number.
        key: Option<u8>,
    },
    /// Publishes one event under key `k{key}` for `delay_ms` from now
    /// (`Photon::publish_after`).
    PublishLater {
        /// The key's number.
        key: Option<u8>,
        /// How long from now it is due.
        delay_ms: u16,
    },
    /// Publishes a batch, one event per entry.
    PublishBatch {
        /// The keys of the batch's events.
        keys: Vec<Option<u8>>,
    },
    /// Durable subscription `sub` (opened when not open) takes up to `count` events,
    /// acknowledging them when `ack` is set.
    Read {
        /// Which subscription.
        sub: u8,
        /// Most events taken.
        count: u8,
        /// Whether they are acknowledged.
        ack: bool,
    },
    /// Flushes subscription `sub`'s acknowledgements and reads its stored checkpoint.
    Flush {
        /// Which subscription.
        sub: u8,
    },
    /// Drops subscription `sub` (its unacknowledged events come again when it reopens).
    Drop {
        /// Which subscription.
        sub: u8,
    },
    /// Group member `member` joins (when it is not in the group).
    Join {
        /// Which member.
        member: u8,
    },
    /// Group member `member` takes up to `count` events and acknowledges each.
    Take {
        /// Which member.
        member: u8,
        /// Most events taken.
        count: u8,
    },
    /// Group member `member` leaves gracefully.
    Leave {
        /// Which member.
        member: u8,
    },
    /// Group member `member` is dropped without leaving (as a task aborted mid-way).
    Abort {
        /// Which member.
        member: u8,
    },
    /// Removes the events before `head - keep` (ports with `truncate`).
    Truncate {
        /// Events kept at the head.
        keep: u8,
    },
    /// Drops every subscription and member, shuts the instance down and opens the port
    /// again.
    Restart,
}

impl Op {
    fn is_fault(&self) -> bool {
        matches!(
            self,
            Op::Drop { .. } | Op::Abort { .. } | Op::Truncate { .. } | Op::Restart
        )
    }
}

/// A schedule: options and operations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// The seed it was drawn from.
    pub seed: u64,
    /// The group's partition count (ports without shards).
    pub partitions: u32,
    /// Whether events are sealed (encrypted) instead of plaintext.
    pub sealed: bool,
    /// Whether durable subscriptions store every acknowledgement at once instead of
    /// coalescing them.
    pub flush_each_ack: bool,
    /// Whether an executor handler runs on the topic (see `handlers.rs`).
    pub handler: bool,
    /// When the handler is a batch handler: its most events per batch.
    pub handler_batch: Option<usize>,
    /// The operations, in order.
    pub ops: Vec<Op>,
}

impl Schedule {
    /// The schedule of `seed`: 30 to 59 operations.
    pub fn generate(seed: u64) -> Self {
        let mut random = Random::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let partitions = [1, 4, 8, 16][random.below(4) as usize];
        let sealed = random.below(2) == 0;
        let flush_each_ack = random.below(2) == 0;
        let handler = random.below(2) == 0;
        let length = 30 + random.below(30) as usize;
        let mut ops: Vec<Op> = (0..length).map(|_| draw(&mut random)).collect();
        // Delayed publishes replace a quarter of the plain ones, drawn from a stream of
        // their own for the same reason as batch handlers below.
        let mut later = Random::new(seed.wrapping_mul(0xA24B_AED4_963E_E407));
        for op in &mut ops {
            if let Op::Publish { key } = *op {
                if later.below(4) == 0 {
                    let delay_ms = later.below(400) as u16;
                    *op = Op::PublishLater { key, delay_ms };
                }
            }
        }
        // From a stream of its own, so that the rest of a seed's schedule stays what it was
        // before batch handlers were drawn (the regression seeds name schedules).
        let mut batches = Random::new(seed.wrapping_mul(0xD1B5_4A32_D192_ED03));
        let handler_batch = match batches.below(4) {
            0 => Some(2),
            1 => Some(7),
            _ => None,
        };
        Self {
            seed,
            partitions,
            sealed,
            flush_each_ack,
            handler,
            handler_batch: handler_batch.filter(|_| handler),
            ops,
        }
    }

    /// Operations that inject a fault (drops, aborts, retention, restarts).
    pub fn faults(&self) -> usize {
        self.ops.iter().filter(|op| op.is_fault()).count()
    }
}

fn key(random: &mut Random) -> Option<u8> {
    let drawn = random.below(u64::from(KEYS) + 1) as u8;
    (drawn < KEYS).then_some(drawn)
}

fn draw(random: &mut Random) -> Op {
    let small = |random: &mut Random, bound: u64| 1 + random.below(bound) as u8;
    match random.below(100) {
        0..=24 => Op::Publish { key: key(random) },
        25..=32 => {
            let len = small(random, 8);
            Op::PublishBatch {
                keys: (0..len).map(|_| key(random)).collect(),
            }
        }
        33..=49 => Op::Read {
            sub: random.below(u64::from(SUBSCRIPTIONS)) as u8,
            count: small(random, 12),
            ack: random.below(4) != 0,
        },
        50..=54 => Op::Flush {
            sub: random.below(u64::from(SUBSCRIPTIONS)) as u8,
        },
        55..=59 => Op::Drop {
            sub: random.below(u64::from(SUBSCRIPTIONS)) as u8,
        },
        60..=67 => Op::Join {
            member: random.below(u64::from(MEMBERS)) as u8,
        },
        68..=81 => Op::Take {
            member: random.below(u64::from(MEMBERS)) as u8,
            count: small(random, 12),
        },
        82..=86 => Op::Leave {
            member: random.below(u64::from(MEMBERS)) as u8,
        },
        87..=90 => Op::Abort {
            member: random.below(u64::from(MEMBERS)) as u8,
        },
        91..=95 => Op::Truncate {
            keep: random.below(20) as u8,
        },
        _ => Op::Restart,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_one_schedule() {
        assert_eq!(Schedule::generate(7), Schedule::generate(7));
        assert_ne!(Schedule::generate(7), Schedule::generate(8));
        let schedule = Schedule::generate(3);
        assert!((30..60).contains(&schedule.ops.len()));
    }

    #[test]
    fn delayed_publishes_are_drawn() {
        let later = (0..50)
            .flat_map(|seed| Schedule::generate(seed).ops)
            .filter(|op| matches!(op, Op::PublishLater { delay_ms, .. } if *delay_ms < 400))
            .count();
        let plain = (0..50)
            .flat_map(|seed| Schedule::generate(seed).ops)
            .filter(|op| matches!(op, Op::Publish { .. }))
            .count();
        // A quarter of the plain publishes become delayed ones.
        assert!(
            later * 5 > plain && later < plain,
            "{later} delayed, {plain} plain"
        );
    }
}
