//! A plaintext event's headers are also NATS message headers (but those named `Nats-*`), as
//! a NATS tool reading the stream sees them; a sealed event's are not (only `Nats-Msg-Id`).

mod common;

use std::sync::Arc;

use common::NatsFactory;
use photon_core::{EventStore, Headers, TransportCrypto};
use serde_json::json;

/// The NATS headers of the stored message `event_id` names (`<stream>:<stream seq>`), as
/// `(name, value)` pairs sorted by name.
async fn stored_headers(url: &str, event_id: &str) -> Vec<(String, String)> {
    let (stream, seq) = event_id.rsplit_once(':').unwrap();
    let jetstream = async_nats::jetstream::new(async_nats::connect(url).await.unwrap());
    let message = jetstream
        .get_stream(stream)
        .await
        .unwrap()
        .get_raw_message(seq.parse().unwrap())
        .await
        .unwrap();
    let mut pairs: Vec<(String, String)> = message
        .headers
        .iter()
        .flat_map(|(name, values)| {
            values
                .iter()
                .map(move |value| (name.to_string(), value.to_string()))
        })
        .collect();
    pairs.sort();
    pairs
}

fn headers() -> Headers {
    Headers::from([
        ("request-id".to_owned(), "r-7".to_owned()),
        (
            "traceparent".to_owned(),
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".to_owned(),
        ),
        ("Nats-Expected-Stream".to_owned(), "elsewhere".to_owned()),
    ])
}

#[tokio::test]
async fn plaintext_headers_become_nats_headers_but_the_servers_own() {
    let Some(factory) = NatsFactory::from_env(1).await else {
        return;
    };
    let store = EventStore::new(
        Arc::new(factory.port().await.unwrap()),
        TransportCrypto::plaintext(),
    );
    let appended = store
        .publish_with_headers("orders", Some("o-1"), json!(null), json!({}), headers())
        .await
        .unwrap();
    let stored = stored_headers(&factory.url, &appended.event_id).await;
    let msg_id = stored
        .iter()
        .find(|(name, _)| name == "Nats-Msg-Id")
        .map(|(_, value)| value.clone())
        .unwrap();
    assert_eq!(
        stored,
        vec![
            ("Nats-Msg-Id".to_owned(), msg_id),
            ("request-id".to_owned(), "r-7".to_owned()),
            (
                "traceparent".to_owned(),
                "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".to_owned()
            ),
        ]
    );
    // Photon reads every header back from the payload, the one left out of NATS's too.
    let event = store.get_event(&appended.event_id).await.unwrap().unwrap();
    assert_eq!(event.headers, headers());
}

#[tokio::test]
async fn sealed_headers_stay_out_of_nats_headers() {
    let Some(factory) = NatsFactory::from_env(1).await else {
        return;
    };
    let store = EventStore::new(
        Arc::new(factory.port().await.unwrap()),
        TransportCrypto::plaintext()
            .with_key("k1", [7u8; 32])
            .unwrap(),
    );
    let appended = store
        .publish_with_headers("orders", Some("o-1"), json!(null), json!({}), headers())
        .await
        .unwrap();
    let stored = stored_headers(&factory.url, &appended.event_id).await;
    let names: Vec<&str> = stored.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, vec!["Nats-Msg-Id"]);
    let event = store.get_event(&appended.event_id).await.unwrap().unwrap();
    assert_eq!(event.headers, headers());
}
