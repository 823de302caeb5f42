//! Dead letters that must always be storable, and records that cannot be decoded, on mem
//! and SQLite: exactly one dead letter each, the checkpoint never passes an event before
//! its letter is stored, and later events keep flowing.

mod executor_support;

use std::sync::Arc;
use std::time::Duration;

use executor_support::{eventually, HookedPort, Seen, TestStore, BACKENDS, GARBAGE};
use photon_core::store::{encoded_len, MAX_JSON_DEPTH};
use photon_core::{CheckpointKey, StoragePort, DEFAULT_MAX_PAYLOAD_BYTES};
use photon_runtime::{Event, ExecutorConfig, FlushPolicy, Photon, PhotonError};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(30);

fn config() -> ExecutorConfig {
    ExecutorConfig::builder()
        .parallelism(4)
        .max_attempts(3)
        .initial_backoff(Duration::from_millis(20))
        .max_backoff(Duration::from_millis(50))
        .jitter(0.0)
        .build()
        .unwrap()
}

/// A value nesting arrays `depth` levels deep.
fn nested(depth: usize) -> Value {
    (1..depth).fold(json!([1]), |inner, _| json!([inner]))
}

fn photon_on(port: Arc<dyn StoragePort>, sealed: bool) -> Photon {
    let builder = Photon::builder()
        .shared_storage_port(port)
        .flush_policy(FlushPolicy::immediate());
    let builder = if sealed {
        builder.transport_key("k1", [7u8; 32])
    } else {
        builder
    };
    builder.build().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn letters_of_events_at_the_publish_limits_are_stored_once_and_the_checkpoint_reaches_the_head(
) {
    assert_eq!(encoded_len(&nested(MAX_JSON_DEPTH)), 2 * MAX_JSON_DEPTH + 1);
    for backend in BACKENDS {
        for sealed in [false, true] {
            let store = TestStore::new(backend).await;
            let photon = photon_on(store.port.clone(), sealed);
            let limit = photon.store().port().capabilities().max_payload_bytes;
            assert_eq!(limit, DEFAULT_MAX_PAYLOAD_BYTES);
            let deep = nested(MAX_JSON_DEPTH);
            let big = json!({ "blob": "x".repeat(9 * limit / 10) });
            // Passes the publish limit, but a letter with it and its metadata does not.
            let at_limit = json!({ "blob": "y".repeat(limit - 16 - "null".len()) });
            let mut failing = Vec::new();
            let mut good = Vec::new();
            for (i, payload) in [
                json!(0),
                deep.clone(),
                json!(2),
                big.clone(),
                json!(4),
                at_limit,
                json!(6),
            ]
            .into_iter()
            .enumerate()
            {
                let appended = photon
                    .publish("orders", Some("k"), json!(null), payload)
                    .await
                    .unwrap();
                if i % 2 == 1 {
                    failing.push(appended.seq);
                } else {
                    good.push(appended.seq);
                }
            }
            let seen = Seen::default();
            let executor = photon
                .executor()
                .config(config())
                .handler("billing", "orders", {
                    let (seen, failing) = (seen.clone(), failing.clone());
                    move |event: Event| {
                        let (seen, failing) = (seen.clone(), failing.clone());
                        async move {
                            if failing.contains(&event.seq) {
                                return Err(PhotonError::handler_permanent("cannot bill this"));
                            }
                            seen.record(&event);
                            Ok(())
                        }
                    }
                })
                .start()
                .unwrap();
            let head = *good.last().unwrap();
            let committed = || {
                futures::executor::block_on(photon.checkpoint("billing", "orders", None)).unwrap()
            };
            assert!(
                eventually(WAIT, || committed() == Some(head)).await,
                "{backend:?} sealed={sealed}: checkpoint stuck at {:?}",
                committed()
            );
            // Later events keep flowing.
            let later = photon
                .publish("orders", Some("k"), json!(null), json!(7))
                .await
                .unwrap();
            good.push(later.seq);
            assert!(eventually(WAIT, || committed() == Some(later.seq)).await);
            executor.shutdown().await.unwrap();
            assert_eq!(seen.seqs(), good);

            let letters = photon.dead_letters("orders").await.unwrap();
            let seqs: Vec<i64> = letters.iter().map(|l| l.original.seq).collect();
            assert_eq!(
                seqs, failing,
                "{backend:?} sealed={sealed}: one letter each"
            );
            // The deep and the 0.9 MiB payloads are kept whole, as they were.
            assert_eq!(letters[0].original.payload, deep);
            assert_eq!(letters[0].original.omitted, None);
            assert_eq!(letters[1].original.payload, big);
            assert_eq!(letters[1].original.omitted, None);
            // The one at the limit is stored as a reference to the original.
            assert_eq!(letters[2].original.payload, Value::Null);
            let omitted = letters[2].original.omitted.as_deref().unwrap();
            assert!(omitted.contains("over the limit"), "{omitted}");
            assert!(
                omitted.contains(&format!("seq {} of topic \"orders\"", failing[2])),
                "{omitted}"
            );
            assert_eq!(letters[2].error, "handler failed: cannot bill this");
            for letter in &letters {
                assert_eq!(
                    (letter.subscription.as_str(), letter.attempts),
                    ("billing", 1)
                );
                assert_eq!(letter.original.key.as_deref(), Some("k"));
            }
            // A whole letter replays as the original event.
            let replayed = photon.replay_dead_letter(&letters[0]).await.unwrap();
            let event = photon.get_event(&replayed.event_id).await.unwrap().unwrap();
            assert_eq!(event.payload, deep);
            photon.shutdown().await.unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undecodable_record_is_dead_lettered_with_its_bytes_before_the_checkpoint_passes_it() {
    for backend in BACKENDS {
        let store = TestStore::new(backend).await;
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let mut hooked = HookedPort::new(store.port.clone());
        hooked.dead_letter_gate = Some(gate.clone());
        let photon = photon_on(Arc::new(hooked), false);
        let first = photon
            .publish("orders", Some("a"), json!(null), json!(1))
            .await
            .unwrap();
        let bad = store.store_garbage("orders", Some("a")).await;
        let other = photon
            .publish("orders", Some("b"), json!(null), json!(3))
            .await
            .unwrap();
        let last = photon
            .publish("orders", Some("a"), json!(null), json!(4))
            .await
            .unwrap();

        let seen = Seen::default();
        let executor = photon
            .executor()
            .config(config())
            .handler("billing", "orders", seen.handler())
            .start()
            .unwrap();
        let sorted = || {
            let mut seqs = seen.seqs();
            seqs.sort_unstable();
            seqs
        };
        // Key b is not behind the damaged record; key a is.
        assert!(
            eventually(WAIT, || sorted() == vec![first.seq, other.seq]).await,
            "{:?}",
            seen.seqs()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        let key = CheckpointKey::new("billing", "orders", None);
        assert_eq!(
            store.port.load_checkpoint(&key).await.unwrap(),
            Some(first.seq),
            "{backend:?}: the checkpoint waits for the dead letter"
        );
        assert_eq!(sorted(), vec![first.seq, other.seq]);
        gate.add_permits(1);
        let committed = || futures::executor::block_on(store.port.load_checkpoint(&key)).unwrap();
        assert!(
            eventually(WAIT, || committed() == Some(last.seq)).await,
            "{:?}",
            committed()
        );
        executor.shutdown().await.unwrap();
        assert_eq!(sorted(), vec![first.seq, other.seq, last.seq]);
        assert_eq!(
            seen.by_key()["a"],
            vec![first.seq, last.seq],
            "key a in order"
        );

        let letters = photon.dead_letters("orders").await.unwrap();
        assert_eq!(letters.len(), 1, "{backend:?}");
        let original = &letters[0].original;
        assert_eq!((original.seq, original.topic.as_str()), (bad, "orders"));
        let undecodable = original.undecodable.as_ref().unwrap();
        assert_eq!(undecodable.stored().unwrap(), GARBAGE);
        assert_eq!(
            (&original.actor, &original.payload),
            (&Value::Null, &Value::Null)
        );
        assert!(matches!(
            photon.replay_dead_letter(&letters[0]).await,
            Err(PhotonError::InvalidInput(_))
        ));
        photon.shutdown().await.unwrap();
    }
}
