//! A server restart while a consumer group of two members (separate connections) handles a
//! keyed stream: the scenario of `photon_testkit::group_restart`, on a NATS server this
//! test starts, stops and starts again.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{NatsFactory, OwnServer};

/// Server down time: with the 2 s lease, renewals fail past the members' local deadline
/// (1.6 s after the last renewal) and leases expire during the restart.
const OUTAGE_MS: u64 = 1300;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_survives_a_server_restart() {
    let Some(mut server) = OwnServer::start() else {
        photon_testkit::skip_or_fail("nats", "no /usr/sbin/nats-server to start");
        return;
    };
    let Some(factory) = NatsFactory::on(server.url(), 1).await else {
        return;
    };
    let open = photon_testkit::group_restart::opener(Arc::new(factory));
    photon_testkit::group_restart::group_survives_a_restart(open, "restart.group", move || {
        server.stop();
        std::thread::sleep(Duration::from_millis(OUTAGE_MS));
        server.restart();
        server
    })
    .await;
}
