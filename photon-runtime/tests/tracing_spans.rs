//! The spans Photon opens, seen by a recording layer: their names, counts, parents and
//! fields for a publish, a delivery and a handler attempt that fails once, and errors
//! recorded on them.

mod executor_support;
mod recording;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use executor_support::{eventually, retrying_at_once};
use futures::StreamExt;
use photon_runtime::{Event, FlushPolicy, Photon, PhotonError, RetryPolicy};
use recording::{fields, span, Recording, SeenEvent};
use serde_json::json;
use tracing::Level;
use tracing_subscriber::layer::SubscriberExt;

// The test runtime has one thread, so the thread's default subscriber sees every task.
#[tokio::test]
async fn a_publish_its_delivery_and_two_handler_attempts_are_spans_with_their_fields() {
    let recording = Recording::default();
    let _default =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(recording.clone()));
    let photon = Photon::builder()
        .flush_policy(FlushPolicy::immediate())
        .build()
        .unwrap();
    let appended = photon
        .publish("orders", Some("k1"), json!("alice"), json!({ "n": 1 }))
        .await
        .unwrap();
    let attempts = Arc::new(AtomicU32::new(0));
    let executor = photon
        .executor()
        .config(retrying_at_once(RetryPolicy::default().max_attempts))
        .handler("billing", "orders", {
            let attempts = attempts.clone();
            move |_event: Event| {
                let attempts = attempts.clone();
                async move {
                    if attempts.fetch_add(1, Ordering::SeqCst) == 0 {
                        return Err(PhotonError::handler("not yet"));
                    }
                    Ok(())
                }
            }
        })
        .start()
        .unwrap();
    let committed = eventually(Duration::from_secs(10), || {
        let checkpoint = photon.checkpoint("billing", "orders", None);
        futures::executor::block_on(checkpoint).unwrap() == Some(appended.seq)
    })
    .await;
    assert!(committed, "the event is handled and committed within 10 s");
    executor.shutdown().await.unwrap();
    photon.shutdown().await.unwrap();
    assert_eq!(attempts.load(Ordering::SeqCst), 2);

    let id = appended.event_id.as_str();
    let at = [
        ("topic", "orders"),
        ("key", "k1"),
        ("seq", "1"),
        ("event_id", id),
    ];
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut all = at.to_vec();
        all.extend_from_slice(extra);
        all
    };
    let error = PhotonError::handler("not yet").to_string();
    assert_eq!(
        recording.spans(),
        vec![
            span("photon.publish", None, &with(&[("backend", "mem")])),
            span(
                "photon.deliver",
                None,
                &with(&[("backend", "mem"), ("subscription", "billing")])
            ),
            span(
                "photon.handle",
                Some(1),
                &[
                    with(&[("handler", "billing"), ("subscription", "billing")]),
                    vec![("attempt", "1"), ("error", &error)]
                ]
                .concat()
            ),
            span(
                "photon.handle",
                Some(1),
                &with(&[
                    ("handler", "billing"),
                    ("subscription", "billing"),
                    ("attempt", "2")
                ])
            ),
        ]
    );
    assert_eq!(
        recording.errors(),
        vec![SeenEvent {
            level: Level::ERROR,
            span: Some(2),
            fields: fields(&[("message", "handler attempt failed"), ("error", &error)]),
        }]
    );
}

#[tokio::test]
async fn a_refused_publish_records_its_error_and_a_durable_stream_opens_a_delivery_span() {
    let recording = Recording::default();
    let _default =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(recording.clone()));
    let photon = Photon::builder().build().unwrap();
    let refused = photon
        .publish("orders", Some(""), json!(null), json!({}))
        .await
        .unwrap_err();
    let appended = photon
        .publish("orders", None, json!(null), json!({ "n": 1 }))
        .await
        .unwrap();
    let mut audit = photon.durable("audit", "orders", None);
    let event = audit.next().await.unwrap().unwrap();
    audit.ack(&event).await.unwrap();
    drop(audit);
    photon.shutdown().await.unwrap();

    let refusal = refused.to_string();
    let id = appended.event_id.as_str();
    let stored = [
        ("backend", "mem"),
        ("topic", "orders"),
        ("seq", "1"),
        ("event_id", id),
    ];
    assert_eq!(
        recording.spans(),
        vec![
            span(
                "photon.publish",
                None,
                &[
                    ("backend", "mem"),
                    ("topic", "orders"),
                    ("key", ""),
                    ("error", &refusal)
                ]
            ),
            span("photon.publish", None, &stored),
            span(
                "photon.deliver",
                None,
                &[&stored[..], &[("subscription", "audit")]].concat()
            ),
        ]
    );
    assert_eq!(
        recording.errors(),
        vec![SeenEvent {
            level: Level::ERROR,
            span: Some(0),
            fields: fields(&[("message", "publish failed"), ("error", &refusal)]),
        }]
    );
}
