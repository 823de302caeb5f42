//! Checks shared by the tests of ports whose transactions publish (the outbox): a
//! subscriber waiting before the transactions is woken by the commit, once, with the
//! committed order `o-2` (seq 1, actor `"shop"`, payload `{"total": 2}`), and the next
//! ordinary publish is the very next event.

use std::time::Duration;

use futures::StreamExt;
use photon_core::{Appended, Event, EventStore, EventStream, StartAt};
use serde_json::json;
use tokio::task::JoinHandle;

/// A subscriber of `topic` from its beginning, started now, waiting in a task for its
/// first event; the task returns the event and the stream.
pub fn first_event(store: &EventStore, topic: &str) -> JoinHandle<(Event, EventStream)> {
    let mut subscriber = store.subscribe(topic, None, StartAt::Beginning);
    tokio::spawn(async move {
        let event = subscriber.next().await.unwrap().unwrap();
        (event, subscriber)
    })
}

/// The first event of `first` within `deadline` is the committed order `appended`
/// (`o-2`); `woken` says what should have woken the subscriber. Returns the event and
/// the stream.
///
/// # Panics
/// When the event is late or differs.
pub async fn assert_committed_order(
    first: JoinHandle<(Event, EventStream)>,
    appended: &Appended,
    deadline: Duration,
    woken: &str,
) -> (Event, EventStream) {
    let (event, subscriber) = tokio::time::timeout(deadline, first)
        .await
        .expect(woken)
        .unwrap();
    assert_eq!(event.event_id, appended.event_id);
    assert_eq!(event.seq, 1);
    assert_eq!(event.topic_key.as_deref(), Some("o-2"));
    assert_eq!(event.payload, json!({"total": 2}));
    assert_eq!(event.actor, json!("shop"));
    (event, subscriber)
}

/// An ordinary publish to `orders` after the committed one gets seq 2 and is the very
/// next event of `subscriber`, within `deadline`: the commit was delivered once.
///
/// # Panics
/// When it is not.
pub async fn assert_next_publish_follows(
    store: &EventStore,
    subscriber: &mut EventStream,
    deadline: Duration,
) {
    let next = store
        .publish("orders", None, json!(null), json!({"total": 3}))
        .await
        .unwrap();
    assert_eq!(next.seq, 2);
    let event = tokio::time::timeout(deadline, subscriber.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!((event.event_id, event.seq), (next.event_id, 2));
}
