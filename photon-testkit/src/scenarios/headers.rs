//! Event headers through a real port: kept exactly, in clear and sealed, and never visible
//! in storage once sealed.

use std::time::Duration;

use photon_core::headers::MAX_HEADER_VALUE_LEN;
use photon_core::{Body, Headers, StartAt, SubscribeRequest, TransportCrypto, TRACEPARENT};
use serde_json::json;

use super::ok;
use crate::context::{assert_quiet, take_exact, Context};

const TRACE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn headers(pairs: &[(&str, &str)]) -> Headers {
    pairs
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect()
}

/// Headers published with an event come back exactly (names with case and punctuation,
/// Unicode, empty and longest values), an event without headers has none, and the stored
/// record holds them in clear without a key. With a key, the stored record holds neither
/// names nor values in clear, and the opened event has them all, `traceparent` included.
pub async fn headers_round_trip(ctx: Context) {
    let store = ctx.store().await;
    let topic = ctx.topic("headers");
    let longest = "v".repeat(MAX_HEADER_VALUE_LEN);
    let full = headers(&[
        (TRACEPARENT, TRACE),
        ("tracestate", "photon=t61rcWkgMzE"),
        ("X-Request_Id.v2", "r-1 ü 東京 🚀"),
        ("empty", ""),
        ("longest", &longest),
    ]);
    let published = [
        (json!({"n": 1}), full.clone()),
        (json!({"n": 2}), Headers::new()),
        (json!({"n": 3}), headers(&[(TRACEPARENT, TRACE)])),
    ];
    for (payload, headers) in &published {
        store
            .publish_with_headers(
                &topic,
                Some("k"),
                json!(null),
                payload.clone(),
                headers.clone(),
            )
            .await
            .unwrap();
    }
    let mut stream = store.subscribe(&topic, None, StartAt::Beginning);
    let events = take_exact(&mut stream, published.len()).await;
    let read: Vec<_> = events
        .into_iter()
        .map(|item| {
            let event = ok(item);
            (event.payload, event.headers)
        })
        .collect();
    assert_eq!(read, published.to_vec());
    assert_quiet(&mut stream, Duration::from_millis(200)).await;

    let mut raw = store.port().subscribe(SubscribeRequest {
        topic: topic.clone(),
        key: Some("k".into()),
        start: StartAt::Beginning,
        durable: None,
    });
    let first = take_exact(&mut raw, 1).await.remove(0).unwrap();
    assert_eq!(
        first.headers(),
        Some(&full),
        "stored in clear without a key"
    );

    sealed_headers_round_trip(&ctx).await;
}

async fn sealed_headers_round_trip(ctx: &Context) {
    let crypto = TransportCrypto::plaintext()
        .with_key("k1", [4u8; 32])
        .unwrap();
    let store = ctx.sealed_store(crypto).await;
    let topic = ctx.topic("sealed-headers");
    let marker = format!("hidden-{}", ctx.subscription("header"));
    let sealed = headers(&[
        (TRACEPARENT, TRACE),
        ("marker-name-visible-nowhere", &marker),
    ]);
    let appended = store
        .publish_with_headers(&topic, None, json!(null), json!({"n": 1}), sealed.clone())
        .await
        .unwrap();
    let record = super::first_raw_record(&store, &topic).await;
    assert_eq!(record.event_id, appended.event_id);
    assert!(matches!(record.body, Body::Sealed(_)), "{:?}", record.body);
    assert_eq!(record.headers(), None);
    let stored = serde_json::to_string(&record).unwrap();
    for hidden in [
        marker.as_str(),
        "marker-name-visible-nowhere",
        TRACE,
        TRACEPARENT,
    ] {
        assert!(
            !stored.contains(hidden),
            "{hidden} reached storage: {stored}"
        );
    }
    let event = store.open(record).unwrap();
    assert_eq!(event.headers, sealed);
    assert_eq!(event.payload, json!({"n": 1}));
}
