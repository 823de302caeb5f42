//! Headers through the runtime on mem and SQLite, in clear and sealed: a durable
//! subscription and an executor handler see them exactly, a dead letter keeps them and its
//! replay publishes them again, and a refused header stores nothing. No OpenTelemetry
//! layer is installed here, so a `traceparent` the caller gives passes through untouched,
//! with or without the `otel` feature.

mod executor_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use executor_support::{TestStore, BACKENDS};
use futures::StreamExt;
use photon_core::{HeaderProblem, StoragePort};
use photon_runtime::{Event, ExecutorConfig, FlushPolicy, Headers, Photon, PhotonError};
use serde_json::{json, Value};

const TRACE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn photon_on(port: Arc<dyn StoragePort>, sealed: bool) -> Photon {
    let config = ExecutorConfig::builder()
        .max_attempts(1)
        .jitter(0.0)
        .build()
        .unwrap();
    let builder = Photon::builder()
        .shared_storage_port(port)
        .flush_policy(FlushPolicy::immediate())
        .executor_config(config);
    let builder = if sealed {
        builder.transport_key("k1", [7u8; 32])
    } else {
        builder
    };
    builder.build().unwrap()
}

fn headers() -> Headers {
    Headers::from([
        ("traceparent".to_owned(), TRACE.to_owned()),
        ("request-id".to_owned(), "r-1 ü".to_owned()),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_reach_subscribers_handlers_dead_letters_and_replays() {
    for backend in BACKENDS {
        for sealed in [false, true] {
            let case = format!("{backend:?}, sealed: {sealed}");
            let store = TestStore::new(backend).await;
            let photon = photon_on(store.port.clone(), sealed);
            photon
                .publish_with_headers("orders", Some("o-1"), json!("shop"), json!(1), headers())
                .await
                .unwrap();
            photon
                .publish("orders", Some("o-1"), json!("shop"), json!(2))
                .await
                .unwrap();

            let mut audit = photon.durable("audit", "orders", None);
            let mut durable = Vec::new();
            for _ in 0..2 {
                let next = tokio::time::timeout(Duration::from_secs(30), audit.next()).await;
                let event = next.unwrap().unwrap().unwrap();
                durable.push((event.payload, event.headers));
            }
            assert_eq!(
                durable,
                vec![(json!(1), headers()), (json!(2), Headers::new())],
                "{case}"
            );

            // The first publication of payload 1 fails for good: it becomes a dead letter.
            let attempts = Arc::new(Mutex::new(Vec::<(i64, Value, Headers)>::new()));
            let seen = attempts.clone();
            let executor = photon
                .executor()
                .handler("billing", "orders", move |event: Event| {
                    let seen = seen.clone();
                    async move {
                        seen.lock().unwrap().push((
                            event.seq,
                            event.payload.clone(),
                            event.headers.clone(),
                        ));
                        match event.seq {
                            1 => Err(PhotonError::handler_permanent("declined")),
                            _ => Ok(()),
                        }
                    }
                })
                .start()
                .unwrap();
            executor.wait_idle().await.unwrap();
            let letters = photon.dead_letters("orders").await.unwrap();
            assert_eq!(letters.len(), 1, "{case}");
            assert_eq!(letters[0].original.headers, headers(), "{case}");
            let replayed = photon.replay_dead_letter(&letters[0]).await.unwrap();
            assert_eq!(replayed.seq, 3, "{case}");
            executor.wait_idle().await.unwrap();
            executor.shutdown().await.unwrap();
            assert_eq!(
                attempts.lock().unwrap().clone(),
                vec![
                    (1, json!(1), headers()),
                    (2, json!(2), Headers::new()),
                    (3, json!(1), headers()),
                ],
                "{case}"
            );
            photon.shutdown().await.unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_header_names_itself_and_stores_nothing() {
    for backend in BACKENDS {
        let store = TestStore::new(backend).await;
        let photon = photon_on(store.port.clone(), false);
        let refused = Headers::from([
            ("fine".to_owned(), "v".to_owned()),
            ("line".to_owned(), "a\r\nb".to_owned()),
        ]);
        match photon
            .publish_with_headers("orders", None, json!(null), json!(1), refused)
            .await
        {
            Err(PhotonError::InvalidHeader {
                topic,
                header,
                problem,
            }) => {
                assert_eq!(
                    (topic.as_str(), header.as_str(), problem),
                    ("orders", "line", HeaderProblem::InvalidValue)
                );
            }
            other => panic!("{backend:?}: expected InvalidHeader, got {other:?}"),
        }
        let head = photon
            .store()
            .port()
            .head_seq("orders", None)
            .await
            .unwrap();
        assert_eq!(head, None, "{backend:?}");
        photon.shutdown().await.unwrap();
    }
}
