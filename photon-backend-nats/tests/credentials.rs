//! Refused credentials are a permanent, typed error naming the server and the user, never
//! the password, returned at once: a caller that retries while `is_retryable()` would
//! otherwise loop for ever on the same refusal.

mod common;

use std::time::Duration;

use common::OwnServer;
use photon_backend_nats::NatsStoragePortBuilder;
use photon_core::StoragePort;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_credentials_are_permanent_and_name_server_and_user() {
    let Some(server) = OwnServer::start_with(&["--user", "photon", "--pass", "right-secret"])
    else {
        photon_testkit::skip_or_fail("nats", "no /usr/sbin/nats-server to start");
        return;
    };
    let port = server.port;
    let error = NatsStoragePortBuilder::new()
        .url(format!("nats://photon:wrong-secret@127.0.0.1:{port}"))
        .connect_timeout(Duration::from_secs(60))
        .build()
        .await
        .unwrap_err();
    let message = photon_testkit::assert_refused_credentials(
        &error,
        "nats",
        &format!("nats://***@127.0.0.1:{port}"),
        "user \"photon\"",
        "wrong-secret",
    );
    assert!(
        message.to_lowercase().contains("authorization violation"),
        "{message}"
    );

    // The right password connects: it was the credentials that were refused.
    let port = NatsStoragePortBuilder::new()
        .url(format!("nats://photon:right-secret@127.0.0.1:{port}"))
        .prefix("credentials")
        .build()
        .await
        .unwrap();
    assert_eq!(port.label(), "nats");
}
