//! The port over TLS, against a cluster whose public endpoints serve TLS and require client
//! certificates:
//!
//! ```text
//! PHOTON_FLUVIO_SC_PORT=9203 PHOTON_FLUVIO_STATE=/tmp/photon-fluvio-tls \
//!     PHOTON_FLUVIO_TLS_DIR=/tmp/photon-fluvio-tls-certs scripts/fluvio-local.sh start
//! source /tmp/photon-fluvio-tls/tls.env   # PHOTON_FLUVIO_TLS_CA, _CERT, _KEY, _DOMAIN
//! PHOTON_FLUVIO_ENDPOINT=127.0.0.1:9203 cargo test -p photon-backend-fluvio --test tls
//! ```
//!
//! Publishing, a durable subscription and a consumer group work over TLS; a CA that did not
//! sign the cluster's certificate, a domain the certificate does not hold and a missing
//! client certificate each fail at once with an error naming the cause. Skipped (or failed
//! under `PHOTON_TEST_REQUIRE=fluvio-tls`) without `PHOTON_FLUVIO_TLS_CA`, except the
//! handshake deadline, which needs no cluster.

mod common;

use std::time::{Duration, Instant};

use common::certs::{write_cluster_certs, TEST_DOMAIN};
use common::FluvioFactory;
use photon_backend_fluvio::{
    FluvioConfig, FluvioStoragePort, FluvioStoragePortBuilder, TLS_CA_ENV,
};
use photon_core::PhotonError;
use photon_runtime::PhotonBuilder;
use photon_testkit::{skip_or_fail, take_exact};
use serde_json::json;

/// How long connecting may take (the port's connect timeout).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

/// A factory on the TLS cluster of the environment, and its resolved settings.
async fn tls_cluster() -> Option<(FluvioFactory, FluvioConfig)> {
    if std::env::var(TLS_CA_ENV).map_or(true, |ca| ca.trim().is_empty()) {
        skip_or_fail("fluvio-tls", &format!("{TLS_CA_ENV} not set"));
        return None;
    }
    let factory = FluvioFactory::from_env(1).await?;
    let config = factory.builder().resolve().unwrap();
    assert!(config.tls.is_some(), "{TLS_CA_ENV} turns TLS on");
    Some((factory, config))
}

/// The error of building a port with `builder`, and how long it took.
async fn refused(builder: FluvioStoragePortBuilder) -> (PhotonError, Duration) {
    let started = Instant::now();
    let err = builder.build().await.unwrap_err();
    (err, started.elapsed())
}

/// Building from `builder` fails the TLS handshake with `endpoint`, before the connect
/// timeout, saying `as <failure>` after the endpoint.
async fn handshake_refused(builder: FluvioStoragePortBuilder, endpoint: &str, failure: &str) {
    let (err, took) = refused(builder).await;
    assert_refused_fast(
        &err,
        took,
        &format!(
            "fluvio is unavailable: cannot connect to {endpoint}: TLS handshake with \
             {endpoint} as {failure}"
        ),
    );
}

/// A refusal that says `expected`, as `Unavailable`, before the connect timeout.
fn assert_refused_fast(err: &PhotonError, took: Duration, expected: &str) {
    assert!(matches!(err, PhotonError::Unavailable { .. }), "{err:?}");
    assert_eq!(err.to_string(), expected);
    assert!(took < CONNECT_TIMEOUT, "failed after {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_subscribe_and_group_over_tls() {
    let Some((factory, _)) = tls_cluster().await else {
        return;
    };
    let photon = PhotonBuilder::new()
        .storage_port(factory.port().await.unwrap())
        .build()
        .unwrap();
    let topic = "tls.orders";
    let mut published = Vec::new();
    for i in 0..5 {
        let key = format!("k{}", i % 2);
        let appended = photon
            .publish(topic, Some(&key), json!("shop"), json!({"i": i}))
            .await
            .unwrap();
        published.push(appended.seq);
    }

    let mut billing = photon.durable("billing", topic, None);
    let events: Vec<_> = take_exact(&mut billing, 5)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let seen: Vec<_> = events.iter().map(|e| (e.seq, e.payload.clone())).collect();
    let expected: Vec<_> = (0..5).map(|i| (published[i], json!({"i": i}))).collect();
    assert_eq!(seen, expected);
    billing.ack(&events[4]).await.unwrap();
    billing.flush().await.unwrap();

    let mut workers = photon.group("tls-workers", topic);
    let mut handled: Vec<_> = take_exact(&mut workers, 5)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    for event in &handled {
        workers.ack(event).await.unwrap();
    }
    handled.sort_by_key(|event| event.seq);
    let handled: Vec<_> = handled.iter().map(|e| (e.seq, e.payload.clone())).collect();
    assert_eq!(handled, expected);
    drop((billing, workers));
    photon.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_ca_fails_naming_the_unknown_issuer() {
    let Some((factory, config)) = tls_cluster().await else {
        return;
    };
    let other = tempfile::tempdir().unwrap();
    let other = write_cluster_certs(other.path(), TEST_DOMAIN).unwrap();
    let domain = domain_of(&config);
    handshake_refused(
        factory.builder().tls_ca(&other.ca),
        &config.endpoint,
        &format!(
            "{domain:?} failed: unknown issuer: the server's certificate is not signed by a \
             trusted CA"
        ),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_domain_fails_naming_the_name() {
    let Some((factory, config)) = tls_cluster().await else {
        return;
    };
    let domain = domain_of(&config);
    handshake_refused(
        factory.builder().tls_domain("photon.invalid"),
        &config.endpoint,
        &format!(
            "\"photon.invalid\" failed: name mismatch: the server's certificate does not hold \
             \"photon.invalid\" (it holds DnsName(\"{domain}\"), DnsName(\"*.{domain}\"), \
             DnsName(\"localhost\"), IpAddress(127.0.0.1))"
        ),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_client_certificate_is_refused_naming_it() {
    let Some((factory, config)) = tls_cluster().await else {
        return;
    };
    let tls = config.tls.as_ref().expect("TLS settings");
    // From a config, not the builder: the environment's client certificate stays out.
    let without_cert: FluvioConfig = serde_json::from_value(json!({
        "endpoint": config.endpoint,
        "prefix": factory.prefix,
        "tls": {"ca": tls.ca, "domain": tls.domain},
    }))
    .unwrap();
    let started = Instant::now();
    let err = FluvioStoragePort::connect(without_cert).await.unwrap_err();
    let took = started.elapsed();
    assert_refused_fast(
        &err,
        took,
        &format!(
            "fluvio is unavailable: cannot connect to {}: TLS: the server requires a client \
             certificate (alert CertificateRequired)",
            config.endpoint
        ),
    );
}

/// An endpoint that accepts connections and never answers (a plain endpoint waiting for a
/// request) fails the handshake after its 10 s deadline instead of hanging. Needs no cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_endpoint_fails_the_handshake_after_its_deadline() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = listener.local_addr().unwrap().to_string();
    let holding = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let certs = tempfile::tempdir().unwrap();
    let files = write_cluster_certs(certs.path(), TEST_DOMAIN).unwrap();
    let builder = FluvioStoragePortBuilder::new()
        .endpoint(endpoint.clone())
        .tls_ca(&files.ca)
        .tls_client_cert(&files.client, &files.client_key)
        .tls_domain(TEST_DOMAIN);
    let (err, took) = refused(builder).await;
    holding.abort();
    assert!(matches!(err, PhotonError::Unavailable { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "fluvio is unavailable: cannot connect to {endpoint}: TLS handshake with \
             {endpoint} as \"{TEST_DOMAIN}\" failed: no answer within 10s (does the endpoint \
             serve TLS?)"
        )
    );
    assert!(
        (Duration::from_secs(10)..CONNECT_TIMEOUT).contains(&took),
        "failed after {took:?}"
    );
}

/// The domain the cluster's certificates were made for.
fn domain_of(config: &FluvioConfig) -> String {
    let tls = config.tls.as_ref().expect("TLS settings");
    tls.domain
        .clone()
        .expect("PHOTON_FLUVIO_TLS_DOMAIN of the test cluster")
}
