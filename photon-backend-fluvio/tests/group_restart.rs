//! The SPU restarts while a consumer group of two members (separate port instances)
//! handles a keyed stream: the scenario of `photon_testkit::group_restart`. Group
//! coordination goes through the same SPU, so leases lapse during the outage and are taken
//! again after it.
//!
//! Needs a cluster started by `scripts/fluvio-local.sh start` (it restarts the SPU from the
//! script's state directory); skips with a message otherwise.

mod common;

use std::sync::Arc;

use common::{owned_state, restart_spu, FluvioFactory};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_survives_an_spu_restart() {
    let Some(factory) = FluvioFactory::from_env(1).await else {
        return;
    };
    let Some(state) = owned_state() else {
        return;
    };
    let open = photon_testkit::group_restart::opener(Arc::new(factory));
    photon_testkit::group_restart::group_survives_a_restart(open, "restart.group", move || {
        restart_spu(&state)
    })
    .await;
}
