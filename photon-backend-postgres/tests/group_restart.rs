//! A connection outage while a consumer group of two members (separate ports, as separate
//! processes would have) handles a keyed stream: the scenario of
//! `photon_testkit::group_restart`. The shared test server cannot be restarted, so the
//! outage is made on the server side: for 1.3 s every connection of this test's ports
//! (found by their `application_name`) is terminated as soon as it appears, as a server
//! restart would do to them; appends, reads, leases and the listener all reconnect.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::PgFactory;

/// Outage: with the 2 s lease, renewals fail past the members' local deadline (1.6 s
/// after the last renewal) and leases expire during it.
const OUTAGE: Duration = Duration::from_millis(1300);

/// Terminates every connection named `application` until `OUTAGE` has passed.
fn outage(url: &str, application: &str) -> usize {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let admin = common::admin(url).await.unwrap();
        let started = Instant::now();
        let mut terminated = 0;
        while started.elapsed() < OUTAGE {
            let rows = admin
                .query(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                     WHERE application_name = $1",
                    &[&application],
                )
                .await
                .unwrap();
            terminated += rows.len();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        terminated
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_survives_a_connection_outage() {
    let application = format!("photon_restart_{}", &common::fresh_schema()[9..]);
    let url = common::named(&common::url(), &application);
    let Some(factory) = PgFactory::on(url.clone()).await else {
        return;
    };
    let factory = Arc::new(factory);
    let open = photon_testkit::group_restart::opener(Arc::clone(&factory));
    let admin_url = common::url();
    photon_testkit::group_restart::group_survives_a_restart(open, "restart.group", move || {
        let terminated = outage(&admin_url, &application);
        assert!(
            terminated > 0,
            "the outage terminated none of the ports' connections"
        );
    })
    .await;
}
