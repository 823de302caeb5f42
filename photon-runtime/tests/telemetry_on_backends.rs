//! Metrics and spans as a user meets them on each backend: one executor run (five events of
//! one key, one handled on its second attempt, one dead-lettered) on mem, SQLite, NATS and
//! Fluvio, with a local `DebuggingRecorder` and a recording tracing layer. Every series,
//! its labels and value, and every span with its parent and fields is checked; the only
//! difference between backends is the backend label, and the lag gauge, which a port
//! without `head_seq` (Fluvio) cannot report.
//!
//! NATS and Fluvio run under a prefix of their own; a missing server skips the test unless
//! `PHOTON_TEST_REQUIRE` names it.

mod executor_support;
mod recording;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use executor_support::{retrying_at_once, Seen};
use metrics_util::debugging::DebugValue;
use photon_backend_fluvio::FluvioStoragePort;
use photon_backend_nats::NatsStoragePort;
use photon_backend_sqlite::SqliteStoragePort;
use photon_core::mem::MemStoragePort;
use photon_core::metrics as names;
use photon_core::{StoragePort, TransportCrypto};
use photon_runtime::{Appended, Event, FlushPolicy, Photon, PhotonError};
use recording::{recorded, series, Recording, SeenSpan};
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt;

/// What one run left behind: the events published, in order, and the spans seen.
struct Run {
    published: Vec<Appended>,
    spans: Vec<SeenSpan>,
    head_seq: bool,
}

/// Publishes five events of key `k` through a Photon on `port`, runs an executor over them
/// (event 2 fails once, event 4 is refused for good) until event 5 is committed, and shuts
/// down.
async fn run_executor(port: impl StoragePort, recording: &Recording) -> Run {
    let head_seq = port.capabilities().head_seq;
    let photon = Photon::builder()
        .storage_port(port)
        .transport_crypto(TransportCrypto::plaintext())
        .flush_policy(FlushPolicy::immediate())
        .build()
        .unwrap();
    let mut published = Vec::new();
    for n in 1..=5 {
        published.push(
            photon
                .publish("orders", Some("k"), json!("tester"), json!({ "n": n }))
                .await
                .unwrap(),
        );
    }
    let seen = Seen::default();
    let second_attempts = Arc::new(AtomicU32::new(0));
    let executor = photon
        .executor()
        .config(retrying_at_once(3))
        .handler("billing", "orders", {
            let (seen, second_attempts) = (seen.clone(), second_attempts.clone());
            move |event: Event| {
                let (seen, second_attempts) = (seen.clone(), second_attempts.clone());
                async move {
                    match event.payload["n"].as_i64() {
                        Some(2) if second_attempts.fetch_add(1, Ordering::SeqCst) == 0 => {
                            return Err(PhotonError::handler("flaky once"));
                        }
                        Some(4) => return Err(PhotonError::handler_permanent("refused")),
                        _ => {}
                    }
                    seen.record(&event);
                    Ok(())
                }
            }
        })
        .start()
        .unwrap();
    let last = published[4].seq;
    // Polled with awaits: this runtime has one thread, which the ports' tasks need too.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while seen.len() < 4
        || photon.checkpoint("billing", "orders", None).await.unwrap() != Some(last)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "4 events handled and event 5 committed within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    executor.shutdown().await.unwrap();
    photon.shutdown().await.unwrap();
    let seqs: Vec<i64> = published.iter().map(|a| a.seq).collect();
    assert_eq!(seen.seqs(), vec![seqs[0], seqs[1], seqs[2], seqs[4]]);
    Run {
        published,
        spans: recording.spans(),
        head_seq,
    }
}

/// Runs the executor scenario on the port `open` makes, with the thread's recorder and
/// tracing subscriber, and checks every series and span.
fn check_backend<P, F>(label: &str, open: impl FnOnce() -> F)
where
    P: StoragePort,
    F: std::future::Future<Output = Option<P>>,
{
    let recording = Recording::default();
    let mut run = None;
    let metrics = recorded(|| async {
        let _default = tracing::subscriber::set_default(
            tracing_subscriber::registry().with(recording.clone()),
        );
        if let Some(port) = open().await {
            run = Some(run_executor(port, &recording).await);
        }
    });
    let Some(run) = run else {
        return;
    };
    check_metrics(label, metrics, run.head_seq);
    check_spans(label, &run);
}

fn check_metrics(label: &str, mut metrics: BTreeMap<recording::Series, DebugValue>, lag: bool) {
    let orders = &[("backend", label), ("topic", "orders")];
    let dlq = &[("backend", label), ("topic", "orders.dlq")];
    let billing = &[
        ("backend", label),
        ("topic", "orders"),
        ("subscription", "billing"),
    ];
    let durations = metrics
        .remove(&series(names::HANDLER_DURATION, billing))
        .expect("handler durations recorded");
    let DebugValue::Histogram(durations) = durations else {
        panic!("{durations:?} is no histogram")
    };
    // Five events, one of them tried twice.
    assert_eq!(durations.len(), 6, "{label}");
    let mut expected = BTreeMap::from([
        (series(names::PUBLISHED, orders), DebugValue::Counter(5)),
        (series(names::PUBLISHED, dlq), DebugValue::Counter(1)),
        (series(names::DELIVERED, billing), DebugValue::Counter(5)),
        (series(names::ACKNOWLEDGED, billing), DebugValue::Counter(5)),
        (series(names::RETRIES, billing), DebugValue::Counter(1)),
        (series(names::DEAD_LETTERS, billing), DebugValue::Counter(1)),
        // One key, handled in order, each acknowledgement committed at once.
        (
            series(names::CHECKPOINT_COMMITS, billing),
            DebugValue::Counter(5),
        ),
    ]);
    if lag {
        expected.insert(
            series(names::SUBSCRIPTION_LAG, billing),
            DebugValue::Gauge(0.0.into()),
        );
    }
    assert_eq!(metrics, expected, "{label}");
}

fn fields(pairs: &[(&str, &str)]) -> recording::Fields {
    recording::fields(pairs)
}

fn check_spans(label: &str, run: &Run) {
    let named = |name: &str| -> Vec<(usize, &SeenSpan)> {
        run.spans
            .iter()
            .enumerate()
            .filter(|(_, span)| span.name == name)
            .collect()
    };
    let stored = |appended: &Appended| {
        let seq = appended.seq.to_string();
        fields(&[
            ("backend", label),
            ("topic", "orders"),
            ("key", "k"),
            ("seq", &seq),
            ("event_id", &appended.event_id),
        ])
    };

    let publishes = named("photon.publish");
    let to_orders: Vec<_> = publishes
        .iter()
        .filter(|(_, span)| span.fields["topic"] == "orders")
        .map(|(_, span)| (span.parent, span.fields.clone()))
        .collect();
    let expected: Vec<_> = run.published.iter().map(|a| (None, stored(a))).collect();
    assert_eq!(to_orders, expected, "{label}");

    let delivers = named("photon.deliver");
    let delivered: Vec<_> = delivers
        .iter()
        .map(|(_, span)| (span.parent, span.fields.clone()))
        .collect();
    let expected: Vec<_> = run
        .published
        .iter()
        .map(|appended| {
            let mut fields = stored(appended);
            fields.insert("subscription".into(), "billing".into());
            (None, fields)
        })
        .collect();
    assert_eq!(delivered, expected, "{label}");

    // The dead letter is published inside the delivery of event 4, keeping its key.
    let to_dlq: Vec<_> = publishes
        .iter()
        .filter(|(_, span)| span.fields["topic"] == "orders.dlq")
        .collect();
    assert_eq!(to_dlq.len(), 1, "{label}: {to_dlq:?}");
    let (_, dead_letter) = to_dlq[0];
    assert_eq!(dead_letter.parent, Some(delivers[3].0), "{label}");
    let names: Vec<&str> = dead_letter.fields.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        vec!["backend", "event_id", "key", "seq", "topic"],
        "{label}"
    );
    assert_eq!(dead_letter.fields["backend"], label);
    assert_eq!(dead_letter.fields["key"], "k");

    let flaky = PhotonError::handler("flaky once").to_string();
    let refused = PhotonError::handler_permanent("refused").to_string();
    let handles = named("photon.handle");
    for (n, ((deliver, _), appended)) in delivers.iter().zip(&run.published).enumerate() {
        let attempts: Vec<_> = handles
            .iter()
            .filter(|(_, span)| span.parent == Some(*deliver))
            .map(|(_, span)| span.fields.clone())
            .collect();
        let attempt = |number: &str, error: Option<&str>| {
            let mut fields = stored(appended);
            fields.remove("backend");
            fields.insert("handler".into(), "billing".into());
            fields.insert("subscription".into(), "billing".into());
            fields.insert("attempt".into(), number.into());
            if let Some(error) = error {
                fields.insert("error".into(), error.into());
            }
            fields
        };
        let expected = match n + 1 {
            2 => vec![attempt("1", Some(&flaky)), attempt("2", None)],
            4 => vec![attempt("1", Some(&refused))],
            _ => vec![attempt("1", None)],
        };
        assert_eq!(attempts, expected, "{label}: event {}", n + 1);
    }
    assert_eq!(handles.len(), 6, "{label}");
}

#[test]
fn mem_records_every_metric_and_span_of_an_executor_run() {
    check_backend("mem", || async { Some(MemStoragePort::new()) });
}

#[test]
fn sqlite_records_the_same_metrics_and_spans() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("photon.db");
    check_backend("sqlite", || async move {
        Some(
            SqliteStoragePort::builder()
                .path(path)
                .build()
                .await
                .unwrap(),
        )
    });
}

#[test]
fn nats_records_the_same_metrics_and_spans() {
    check_backend("nats", || async {
        let url = std::env::var(photon_backend_nats::URL_ENV)
            .unwrap_or_else(|_| photon_backend_nats::DEFAULT_URL.to_owned());
        let prefix = format!("tel{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        match NatsStoragePort::builder()
            .url(url.clone())
            .prefix(prefix)
            .build()
            .await
        {
            Ok(port) => Some(port),
            Err(err) => {
                photon_testkit::skip_or_fail("nats", &format!("NATS at {url}: {err}"));
                None
            }
        }
    });
}

#[test]
fn fluvio_records_the_same_metrics_and_spans() {
    check_backend("fluvio", || async {
        let Ok(endpoint) = std::env::var(photon_backend_fluvio::ENDPOINT_ENV) else {
            photon_testkit::skip_or_fail("fluvio", "PHOTON_FLUVIO_ENDPOINT is not set");
            return None;
        };
        let prefix = format!("tel{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        Some(
            FluvioStoragePort::builder()
                .endpoint(endpoint)
                .prefix(prefix)
                .build()
                .await
                .unwrap(),
        )
    });
}
