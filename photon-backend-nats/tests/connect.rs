//! Opening the port while its server is not up yet: it keeps trying (growing pauses)
//! within the connect timeout, and fails with `Unavailable` naming the address after it.

mod common;

use std::time::{Duration, Instant};

use common::OwnServer;
use photon_backend_nats::NatsStoragePortBuilder;
use photon_core::{PhotonError, StoragePort};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_waits_for_a_server_that_starts_later() {
    let Some(mut server) = OwnServer::reserve() else {
        photon_testkit::skip_or_fail("nats", "no /usr/sbin/nats-server to start");
        return;
    };
    let url = server.url();
    let opening = tokio::spawn(async move {
        NatsStoragePortBuilder::new()
            .url(url)
            .prefix("connectlater")
            .connect_timeout(Duration::from_secs(20))
            .build()
            .await
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        !opening.is_finished(),
        "open returned before the server started"
    );
    // Blocks this worker while the server starts (the other runs the opening task).
    server.restart();
    let port = tokio::time::timeout(Duration::from_secs(20), opening)
        .await
        .expect("open did not finish")
        .unwrap()
        .expect("open failed although the server started");
    assert_eq!(port.label(), "nats");
    drop(port);
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_without_a_server_fails_after_the_timeout_naming_the_address() {
    let Some(server) = OwnServer::reserve() else {
        photon_testkit::skip_or_fail("nats", "no /usr/sbin/nats-server to start");
        return;
    };
    let started = Instant::now();
    let error = NatsStoragePortBuilder::new()
        .url(server.url())
        .connect_timeout(Duration::from_secs(2))
        .build()
        .await
        .unwrap_err();
    let elapsed = started.elapsed();
    assert!(
        matches!(error, PhotonError::Unavailable { .. }),
        "{error:?}"
    );
    let address = format!("nats://127.0.0.1:{}", server.port);
    assert!(
        error.to_string().starts_with(&format!(
            "nats is unavailable: cannot connect to {address} ("
        )),
        "{error}"
    );
    assert!(std::error::Error::source(&error).is_some());
    // It kept trying for the whole timeout, and stopped after it: well before the 30 s
    // default, with room for a loaded machine.
    assert!(elapsed >= Duration::from_secs(2), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(15), "{elapsed:?}");
}
