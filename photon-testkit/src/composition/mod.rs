//! Composition testing: seeded random schedules of every operation on one port, checked
//! against one model.
//!
//! A [`Schedule`] is drawn from a seed ([`Schedule::generate`]): options (the group's
//! partition count, sealed or plaintext events, whether durable subscriptions flush after
//! every acknowledgement) and a list of [`Op`]s over the public API: publishing single
//! events and batches, keyed and unkeyed, and single events for later (0 to 400 ms,
//! `Photon::publish_after`, through the scheduler of the instance, which a restart stops
//! and starts again); durable subscriptions reading, acknowledging or
//! not, flushing, dropped and reopened; group members joining, reading, leaving and being
//! aborted; retention (`truncate_before`); restarts of the port (everything dropped and
//! the port opened again); and, in half the schedules, an executor handler on the topic
//! that is fast, slow, fails once or fails for good depending on the publishing operation
//! ([`Behaviour`]); in some of those a batch handler (batches of 2 or 7 events), which
//! fails, once or for good, with any of its events. [`run`] plays a schedule on a port, records everything it saw
//! in a [`History`], drains every consumer at the end, and [`check`] holds the history to
//! one model, the same for every port:
//!
//! - every stored event reaches every durable subscription and the group: delivered, or
//!   named by a `Gap` that a retention explains;
//! - within one delivery run, each key's events come in seq order;
//! - an event acknowledged by a durable subscription is not delivered to it again (every
//!   restart here is graceful: drops and shutdowns store the acknowledgements);
//! - no key is handed to two group members at overlapping times under accepted
//!   acknowledgements, and an event acknowledged in the group comes again only under a
//!   later lease of its partition;
//! - a subscription's stored checkpoint never moves backwards;
//! - every event published for later appears on its topic once, under its key, not
//!   before its due time (as a live subscriber sees it), and then counts as stored for
//!   every consumer above;
//! - the executor handler succeeds on every stored event or leaves a dead letter for it
//!   (only when it, or a batch-mate, failed for good), never both; an event is attempted
//!   again after its success only in a later instance and only when an earlier event was
//!   unfinished when the instance stopped (the documented bound of a graceful shutdown); a key's events
//!   are handled one after the other in seq order (a batch's together, in seq order
//!   inside it);
//! - every operation finishes within its bound (no hang).
//!
//! A failing schedule is shrunk ([`shrink`]: operations are removed while it still fails)
//! and reported with its seed and its shortest history; [`run_cases`] re-runs a seed
//! deterministically (the real ports' timing is the only noise).
//!
//! The multi-process mode ([`ProcessSchedule`], played by
//! `GroupProcesses::composition`) draws schedules of joins, SIGKILLs and SIGSTOPs of group
//! member and publisher processes and checks the processes' fsynced logs (see
//! `processes.rs`).
//!
//! # Adding an operation or an invariant
//! An operation is a variant of [`Op`], drawn in `generator.rs` (give it a weight), played
//! in `runner.rs` (record what it observed in the [`History`], bounded by [`OP_BOUND`]),
//! and, when it has its own effect on what consumers may see, accounted for in
//! `checker.rs`. An invariant is a function of the [`History`] in `checker.rs` that
//! returns a [`Violation`] naming what broke; [`check`] calls each. Every defect found
//! becomes a regression seed in [`REGRESSION_SEEDS`], run on every port.

mod checker;
mod generator;
mod handlers;
mod history;
mod processes;
mod runner;
mod shrink;

use std::sync::Arc;
use std::time::Duration;

pub use checker::{check, Violation};
pub use generator::{Op, Schedule};
pub use handlers::Behaviour;
pub use history::{Handled, History};
pub use processes::{
    MemberKind, ProcessOp, ProcessRun, ProcessSchedule, Restart, PROCESS_CASES_ENV,
    PROCESS_DRAIN_BOUND,
};
pub use runner::run;
pub use shrink::shrink;

use crate::context::PortFactory;

/// The longest any one operation (or the final drain of one consumer) may take.
pub const OP_BOUND: Duration = Duration::from_secs(30);

/// Environment variable: schedules per port (default 8 in tests).
pub const CASES_ENV: &str = "PHOTON_COMPOSITION_CASES";
/// Environment variable: when set, a failing schedule is reported as drawn, unshrunk.
pub const NO_SHRINK_ENV: &str = "PHOTON_COMPOSITION_NO_SHRINK";
/// Environment variable: first seed (default 1); case `n` runs seed `first + n`.
pub const SEED_ENV: &str = "PHOTON_COMPOSITION_SEED";

/// Schedules between two progress lines on standard error.
const PROGRESS_EVERY: usize = 25;

/// Seeds of schedules that found defects, run first on every port.
pub const REGRESSION_SEEDS: &[u64] = &[
    // Fluvio: a publish to a new topic waited for good behind a layout check that a
    // subscription dropped while opening had left stuck.
    301_010,
];

/// What a run of several schedules did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Schedules run.
    pub schedules: usize,
    /// Operations played.
    pub operations: usize,
    /// Faults injected (restarts, aborted members, retention sweeps, reopened
    /// subscriptions).
    pub faults: usize,
}

/// Runs `seeds`, then [`CASES_ENV`] (default `random`) seeded schedules from [`SEED_ENV`],
/// on the ports `factory` opens; on the first failure, shrinks the schedule and panics with the
/// seed, the violation and the shrunk schedule.
///
/// # Panics
/// When a schedule fails the model.
pub async fn run_cases(factory: Arc<dyn PortFactory>, seeds: &[u64], random: usize) -> Summary {
    let label = match factory.open().await {
        Ok(port) => port.label(),
        Err(err) => panic!("composition: cannot open the port: {err}"),
    };
    let cases = std::env::var(CASES_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(random);
    let first: u64 = std::env::var(SEED_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let mut all: Vec<u64> = REGRESSION_SEEDS.to_vec();
    all.extend_from_slice(seeds);
    all.extend((0..cases as u64).map(|n| first + n));
    let mut summary = Summary::default();
    for seed in all {
        let schedule = Schedule::generate(seed);
        summary.schedules += 1;
        summary.operations += schedule.ops.len();
        summary.faults += schedule.faults();
        let history = run(&factory, &schedule).await;
        if summary.schedules.is_multiple_of(PROGRESS_EVERY) {
            // A long soak shows how far it got, also when it is stopped before the end.
            eprintln!(
                "{label}: {} schedules, {} operations, {} faults so far (seed {seed})",
                summary.schedules, summary.operations, summary.faults
            );
        }
        if let Err(violation) = check(&history) {
            let shrunk = if std::env::var(NO_SHRINK_ENV).is_ok() {
                schedule.clone()
            } else {
                shrink(&factory, schedule.clone()).await
            };
            let mut again = run(&factory, &shrunk).await;
            if check(&again).is_ok() {
                // Timing decided it: the history shown is the one that failed.
                again = history;
            }
            panic!(
                "{label}: composition schedule with seed {seed} fails: {violation}\n\
                 shrunk to {} of {} operations: {:?}\n\
                 which fails with: {:?}\nits history:\n{}\n\
                 re-run with {SEED_ENV}={seed} {CASES_ENV}=1",
                shrunk.ops.len(),
                schedule.ops.len(),
                shrunk,
                check(&again).err(),
                again.trace.join("\n")
            );
        }
    }
    println!(
        "{label}: {} schedules, {} operations, {} faults, no violation",
        summary.schedules, summary.operations, summary.faults
    );
    summary
}
