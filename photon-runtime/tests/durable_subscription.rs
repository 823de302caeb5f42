//! `DurableSubscription` on its failure paths, on mem and SQLite: acks commit only the
//! contiguous run, released events come back, error items can be acknowledged and
//! dead-lettered, and flush, drop and shutdown store every acknowledgement.

mod executor_support;

use std::sync::Arc;
use std::time::Duration;

use executor_support::{HookedPort, TestStore, BACKENDS, GARBAGE};
use futures::StreamExt;
use photon_core::{CheckpointKey, FlushPolicy, StoragePort};
use photon_runtime::{Event, Photon, PhotonError};
use photon_testkit::{assert_quiet, take_exact as take};
use serde_json::json;

const QUIET: Duration = Duration::from_millis(200);

fn photon_on(port: Arc<dyn StoragePort>, flush: FlushPolicy) -> Photon {
    Photon::builder()
        .shared_storage_port(port)
        .flush_policy(flush)
        .build()
        .unwrap()
}

/// A policy that never commits on its own within a test (only flush, drop and shutdown).
fn manual() -> FlushPolicy {
    FlushPolicy {
        interval: Duration::from_secs(3600),
        max_pending: u32::MAX,
    }
}

async fn publish(photon: &Photon, topic: &str, count: usize) -> Vec<i64> {
    let mut seqs = Vec::new();
    for i in 0..count {
        seqs.push(
            photon
                .publish(topic, None, json!(null), json!({ "i": i }))
                .await
                .unwrap()
                .seq,
        );
    }
    seqs
}

fn ok(item: photon_core::Result<Event>) -> Event {
    item.unwrap_or_else(|err| panic!("unexpected error item: {err}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_commit_only_the_contiguous_run() {
    for backend in BACKENDS {
        let store = TestStore::new(backend).await;
        let photon = photon_on(store.port.clone(), manual());
        let seqs = publish(&photon, "orders", 100).await;

        let mut sub = photon.durable("billing", "orders", None);
        let events: Vec<Event> = take(&mut sub, 100).await.into_iter().map(ok).collect();
        for event in &events[2..] {
            sub.ack(event).await.unwrap();
        }
        sub.flush().await.unwrap();
        assert_eq!(
            photon.checkpoint("billing", "orders", None).await.unwrap(),
            None,
            "{backend:?}"
        );
        assert_eq!(sub.outstanding(), 100);
        sub.ack(&events[0]).await.unwrap();
        sub.flush().await.unwrap();
        assert_eq!(
            photon.checkpoint("billing", "orders", None).await.unwrap(),
            Some(seqs[0])
        );
        drop(sub);

        // 1 was committed, 2 never acknowledged: a reopen delivers 2..=100 again.
        let mut again = photon.durable("billing", "orders", None);
        let redelivered: Vec<i64> = take(&mut again, 99)
            .await
            .into_iter()
            .map(|e| ok(e).seq)
            .collect();
        assert_eq!(redelivered, seqs[1..].to_vec(), "{backend:?}");
        assert_quiet(&mut again, QUIET).await;
        photon.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_event_is_delivered_again_first_and_holds_the_checkpoint() {
    for backend in BACKENDS {
        let store = TestStore::new(backend).await;
        let photon = photon_on(store.port.clone(), manual());
        let seqs = publish(&photon, "orders", 6).await;

        let mut sub = photon.durable("billing", "orders", None);
        let first: Vec<Event> = take(&mut sub, 3).await.into_iter().map(ok).collect();
        sub.ack(&first[0]).await.unwrap();
        sub.release(&first[1]).unwrap();
        sub.ack(&first[2]).await.unwrap();
        // The released event comes back before the rest of the stream.
        let next: Vec<i64> = take(&mut sub, 2)
            .await
            .into_iter()
            .map(|e| ok(e).seq)
            .collect();
        assert_eq!(next, vec![seqs[1], seqs[3]], "{backend:?}");
        sub.flush().await.unwrap();
        assert_eq!(
            photon.checkpoint("billing", "orders", None).await.unwrap(),
            Some(seqs[0])
        );
        // Releasing what was acknowledged, or never delivered, is refused.
        assert!(matches!(
            sub.release(&first[0]),
            Err(PhotonError::InvalidInput(_))
        ));
        sub.ack(&first[1]).await.unwrap();
        sub.flush().await.unwrap();
        assert_eq!(
            photon.checkpoint("billing", "orders", None).await.unwrap(),
            Some(seqs[2])
        );

        // A released event never acknowledged is delivered again after a reopen.
        let fourth = ok(take(&mut sub, 1).await.remove(0));
        assert_eq!(fourth.seq, seqs[4]);
        sub.release(&fourth).unwrap();
        drop(sub);
        let mut again = photon.durable("billing", "orders", None);
        let rest: Vec<i64> = take(&mut again, 3)
            .await
            .into_iter()
            .map(|e| ok(e).seq)
            .collect();
        assert_eq!(rest, seqs[3..].to_vec(), "{backend:?}");
        assert_quiet(&mut again, QUIET).await;
        photon.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_items_carry_their_position_and_are_acknowledged_or_dead_lettered() {
    for backend in BACKENDS {
        let store = TestStore::new(backend).await;
        let sealer = Photon::builder()
            .shared_storage_port(store.port.clone())
            .transport_key("old", [1u8; 32])
            .build()
            .unwrap();
        let photon = Photon::builder()
            .shared_storage_port(store.port.clone())
            .transport_key("new", [2u8; 32])
            .flush_policy(manual())
            .build()
            .unwrap();
        let a = photon
            .publish("orders", Some("k"), json!(null), json!({"i": 0}))
            .await
            .unwrap();
        let sealed = sealer
            .publish("orders", Some("k"), json!(null), json!({"i": 1}))
            .await
            .unwrap();
        let garbage = store.store_garbage("orders", Some("k")).await;
        let d = photon
            .publish("orders", Some("k"), json!(null), json!({"i": 3}))
            .await
            .unwrap();

        let mut sub = photon.durable("billing", "orders", None);
        let mut items = take(&mut sub, 4).await.into_iter();
        let first = ok(items.next().unwrap());
        let crypto = items.next().unwrap().unwrap_err();
        let undecodable = items.next().unwrap().unwrap_err();
        let last = ok(items.next().unwrap());
        assert_eq!((first.seq, last.seq), (a.seq, d.seq));
        assert!(matches!(crypto, PhotonError::Crypto { .. }), "{crypto}");
        assert_eq!(crypto.position(), Some(("orders", sealed.seq)));
        assert_eq!(undecodable.position(), Some(("orders", garbage)));
        sub.ack(&first).await.unwrap();
        sub.ack(&last).await.unwrap();
        sub.flush().await.unwrap();
        assert_eq!(
            photon.checkpoint("billing", "orders", None).await.unwrap(),
            Some(a.seq),
            "{backend:?}"
        );
        drop(sub);

        // Unhandled error items are delivered again after a restart, with their position.
        let mut sub = photon.durable("billing", "orders", None);
        let mut items = take(&mut sub, 3).await.into_iter();
        let crypto = items.next().unwrap().unwrap_err();
        let undecodable = items.next().unwrap().unwrap_err();
        let last = ok(items.next().unwrap());
        assert_eq!(crypto.position(), Some(("orders", sealed.seq)));
        assert_eq!(undecodable.position(), Some(("orders", garbage)));
        let unavailable = PhotonError::Unavailable {
            backend: "x",
            message: "y".into(),
            source: None,
        };
        assert!(matches!(
            sub.ack_error(&unavailable).await,
            Err(PhotonError::InvalidInput(_))
        ));
        sub.dead_letter(&crypto).await.unwrap();
        sub.ack(&last).await.unwrap();
        sub.flush().await.unwrap();
        assert_eq!(
            photon.checkpoint("billing", "orders", None).await.unwrap(),
            Some(sealed.seq)
        );
        sub.dead_letter(&undecodable).await.unwrap();
        sub.flush().await.unwrap();
        assert_eq!(
            photon.checkpoint("billing", "orders", None).await.unwrap(),
            Some(d.seq)
        );
        assert_quiet(&mut sub, QUIET).await;

        let letters = photon.dead_letters("orders").await.unwrap();
        assert_eq!(letters.len(), 2, "{backend:?}");
        assert_eq!(letters[0].original.seq, sealed.seq);
        assert!(letters[0].original.stored.is_some());
        assert_eq!(letters[1].original.seq, garbage);
        let bytes = letters[1]
            .original
            .undecodable
            .as_ref()
            .unwrap()
            .stored()
            .unwrap();
        assert_eq!(bytes, GARBAGE);
        // The sealed one opens once the old key is in the ring.
        let reader = Photon::builder()
            .shared_storage_port(store.port.clone())
            .transport_key("new", [2u8; 32])
            .transport_key("old", [1u8; 32])
            .build()
            .unwrap();
        let replayed = reader.replay_dead_letter(&letters[0]).await.unwrap();
        let event = reader.get_event(&replayed.event_id).await.unwrap().unwrap();
        assert_eq!(
            (event.topic_key.as_deref(), event.payload),
            (Some("k"), json!({"i": 1}))
        );
        photon.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flush_waits_for_the_periodic_commit_in_flight() {
    for backend in BACKENDS {
        let store = TestStore::new(backend).await;
        let mut hooked = HookedPort::new(store.port.clone());
        hooked.commit_delay = Duration::from_millis(400);
        let policy = FlushPolicy {
            interval: Duration::from_millis(20),
            max_pending: u32::MAX,
        };
        let photon = photon_on(Arc::new(hooked), policy);
        let seqs = publish(&photon, "orders", 3).await;
        let mut sub = photon.durable("billing", "orders", None);
        for event in take(&mut sub, 3).await {
            sub.ack(&ok(event)).await.unwrap();
        }
        // The periodic flush takes the acknowledgements and is now in its slow commit.
        tokio::time::sleep(Duration::from_millis(100)).await;
        sub.flush().await.unwrap();
        let key = CheckpointKey::new("billing", "orders", None);
        assert_eq!(
            store.port.load_checkpoint(&key).await.unwrap(),
            Some(seqs[2]),
            "{backend:?}"
        );
        photon.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reopen_during_a_periodic_commit_waits_for_it() {
    for backend in BACKENDS {
        let store = TestStore::new(backend).await;
        let mut hooked = HookedPort::new(store.port.clone());
        hooked.commit_delay = Duration::from_millis(300);
        let policy = FlushPolicy {
            interval: Duration::from_millis(20),
            max_pending: u32::MAX,
        };
        let photon = photon_on(Arc::new(hooked), policy);
        let seqs = publish(&photon, "orders", 20).await;
        let mut sub = photon.durable("billing", "orders", None);
        for event in take(&mut sub, 10).await {
            sub.ack(&ok(event)).await.unwrap();
        }
        // The periodic flush took the acknowledgements and holds the committer in its slow
        // commit when the subscription goes: the reopen must wait for that commit.
        tokio::time::sleep(Duration::from_millis(60)).await;
        drop(sub);
        let mut again = photon.durable("billing", "orders", None);
        let rest: Vec<i64> = take(&mut again, 10)
            .await
            .into_iter()
            .map(|e| ok(e).seq)
            .collect();
        assert_eq!(rest, seqs[10..].to_vec(), "{backend:?}: nothing repeated");
        let key = CheckpointKey::new("billing", "orders", None);
        assert_eq!(
            store.port.load_checkpoint(&key).await.unwrap(),
            Some(seqs[9]),
            "{backend:?}"
        );
        photon.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reopen_right_after_a_drop_and_shutdown_see_every_acknowledgement() {
    for backend in BACKENDS {
        let store = TestStore::new(backend).await;
        let mut hooked = HookedPort::new(store.port.clone());
        hooked.commit_delay = Duration::from_millis(300);
        let photon = photon_on(Arc::new(hooked), manual());
        let seqs = publish(&photon, "orders", 100).await;

        let mut sub = photon.durable("billing", "orders", None);
        for event in take(&mut sub, 50).await {
            sub.ack(&ok(event)).await.unwrap();
        }
        drop(sub);
        let mut again = photon.durable("billing", "orders", None);
        let rest: Vec<Event> = take(&mut again, 50).await.into_iter().map(ok).collect();
        let rest_seqs: Vec<i64> = rest.iter().map(|e| e.seq).collect();
        assert_eq!(
            rest_seqs,
            seqs[50..].to_vec(),
            "{backend:?}: nothing repeated after the drop"
        );
        let key = CheckpointKey::new("billing", "orders", None);
        assert_eq!(
            store.port.load_checkpoint(&key).await.unwrap(),
            Some(seqs[49])
        );
        for event in &rest {
            again.ack(event).await.unwrap();
        }

        // Acked in a task (the ack future is Send), then dropped: shutdown waits for its
        // final commit; a stream still open ends with `None`.
        let ten = publish(&photon, "orders", 10).await;
        let task = tokio::spawn(async move {
            let mut acked = Vec::new();
            while acked.len() < 10 {
                let event = ok(again.next().await.unwrap());
                again.ack(&event).await.unwrap();
                acked.push(event.seq);
            }
            (again, acked)
        });
        let (mut again, acked) = task.await.unwrap();
        assert_eq!(acked, ten);
        let more = photon
            .publish("orders", None, json!(null), json!({"i": 100}))
            .await
            .unwrap();
        let event = ok(again.next().await.unwrap());
        assert_eq!(event.seq, more.seq);
        again.ack(&event).await.unwrap();
        let mut open = photon.durable("audit", "orders", None);
        let first = ok(open.next().await.unwrap());
        assert_eq!(first.seq, seqs[0]);
        open.ack(&first).await.unwrap();
        let (read_all, all_read) = tokio::sync::oneshot::channel();
        let waiting = tokio::spawn(async move {
            let rest: Vec<i64> = take(&mut open, 110)
                .await
                .into_iter()
                .map(|e| ok(e).seq)
                .collect();
            read_all.send(rest).unwrap();
            open.next().await.map(|item| item.map(|e| e.seq))
        });
        let mut expected = seqs[1..].to_vec();
        expected.extend(&ten);
        expected.push(more.seq);
        assert_eq!(all_read.await.unwrap(), expected);
        drop(again);
        photon.shutdown().await.unwrap();
        assert_eq!(
            store.port.load_checkpoint(&key).await.unwrap(),
            Some(more.seq),
            "{backend:?}"
        );
        let audit = CheckpointKey::new("audit", "orders", None);
        assert_eq!(
            store.port.load_checkpoint(&audit).await.unwrap(),
            Some(seqs[0])
        );
        let after_shutdown = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("shutdown ends open durable streams")
            .unwrap();
        assert!(after_shutdown.is_none(), "{after_shutdown:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_outliving_its_photon_keeps_delivering() {
    let store = TestStore::new(executor_support::Backend::Mem).await;
    let photon = photon_on(store.port.clone(), FlushPolicy::immediate());
    let mut sub = photon.durable("billing", "orders", None);
    drop(photon);
    let other = photon_on(store.port.clone(), FlushPolicy::immediate());
    let seqs = publish(&other, "orders", 3).await;
    let got: Vec<Event> = take(&mut sub, 3).await.into_iter().map(ok).collect();
    assert_eq!(got.iter().map(|e| e.seq).collect::<Vec<_>>(), seqs);
    for event in &got {
        sub.ack(event).await.unwrap();
    }
    assert_eq!(
        other.checkpoint("billing", "orders", None).await.unwrap(),
        Some(seqs[2])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_reports_a_dropped_subscriptions_failed_final_commit() {
    for backend in BACKENDS {
        let store = TestStore::new(backend).await;
        let hooked = HookedPort::new(store.port.clone());
        let failing = hooked.failing_commits.clone();
        let policy = FlushPolicy {
            interval: Duration::from_secs(3600),
            max_pending: u32::MAX,
        };
        let photon = photon_on(Arc::new(hooked), policy);
        publish(&photon, "orders", 3).await;
        let mut sub = photon.durable("billing", "orders", None);
        for event in take(&mut sub, 3).await {
            sub.ack(&ok(event)).await.unwrap();
        }
        failing.store(true, std::sync::atomic::Ordering::SeqCst);
        // Dropped: its position is committed in the background, and that commit fails.
        drop(sub);
        match photon.shutdown().await {
            Err(PhotonError::Storage { message, .. }) => {
                assert!(message.contains("billing"), "{backend:?}: {message}")
            }
            other => panic!("{backend:?}: expected the failed final commit, got {other:?}"),
        }
        let key = CheckpointKey::new("billing", "orders", None);
        assert_eq!(store.port.load_checkpoint(&key).await.unwrap(), None);
    }
}
