//! Delayed and scheduled delivery (`Photon::publish_after`, `Photon::publish_at`), through
//! the scheduler over the port's consumer groups: never early, within a second of the due
//! time, per-key order by due time, nothing lost or repeated across a restart, and under
//! load; and a handler's `Retry::after` requeued through it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures::StreamExt;
use photon_core::{Event, TransportCrypto};
use photon_runtime::executor::Context as ExecutorContext;
use photon_runtime::testing::VirtualClock;
use photon_runtime::{Clock, HandlerOptions, Photon, Retry, SchedulerConfig};
use rand::Rng;
use serde_json::json;

use crate::context::{assert_quiet, eventually, take_exact, Context};

/// The scheduler's lease in these scenarios.
const LEASE: Duration = Duration::from_secs(2);
/// How late an event may be delivered after its due time on an idle scheduler.
const ON_TIME: chrono::Duration = chrono::Duration::seconds(1);
/// Events of the load scenario.
const LOAD_EVENTS: usize = 10_000;
/// The load scenario's events are due within this much of its start.
const LOAD_SPREAD_MS: i64 = 60_000;
/// Tasks publishing the load scenario's events.
const LOAD_PUBLISHERS: usize = 16;

/// A `Photon` on a new port of the backend with this run's schedule, on `clock`.
async fn photon(ctx: &Context, clock: Clock) -> Photon {
    let config = SchedulerConfig::default()
        .topic(ctx.topic("schedule"))
        .group(ctx.subscription("scheduler"))
        .lease(LEASE)
        .clock(clock);
    Photon::builder()
        .shared_storage_port(ctx.port().await)
        .transport_crypto(TransportCrypto::plaintext())
        .scheduler(config)
        .build()
        .unwrap()
}

/// Waits until the scheduler of `photon` holds the lease of the schedule's first
/// partition.
async fn scheduler_running(photon: &Photon) {
    let config = photon.scheduler_config();
    eventually("the scheduler holds its lease", || async {
        let status = photon
            .group_status(&config.group, &config.topic)
            .await
            .map_err(|err| err.to_string())?;
        let first = status.partitions.iter().find(|p| p.partition == 0);
        match first.and_then(|p| p.owner.clone()) {
            Some(_) => Ok(()),
            None => Err(format!("{status:?}")),
        }
    })
    .await;
}

/// The due time in milliseconds of an event, as its payload carries it.
fn due_of(event: &Event) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(event.payload["due_ms"].as_i64().unwrap()).unwrap()
}

/// Events of two keys due in an order other than their publish order (after an event
/// published at once, so that the topic exists): each arrives at or after its time and
/// within a second of it, once; each key's events arrive in due-time order, ties in
/// publish order.
pub async fn delayed_never_early(ctx: Context) {
    let photon = photon(&ctx, Clock::system()).await;
    // The scheduler's joining its group (about a second on Fluvio with shards) is no part
    // of its lateness.
    photon.start_scheduler().unwrap();
    scheduler_running(&photon).await;
    // Room to store every entry before the first is due. On a loaded machine storing can
    // take longer: then the orders below would not be the due orders, and the plan runs
    // again on a new topic with twice the room.
    let mut room_ms = 1_500;
    for attempt in 0..ROOM_ATTEMPTS {
        let topic = ctx.topic(&format!("reminders{attempt}"));
        if delayed_plan_in_due_order(&photon, &topic, room_ms).await {
            photon.shutdown().await.unwrap();
            return;
        }
        room_ms *= 2;
    }
    panic!(
        "storing 7 entries took more than {} ms, {ROOM_ATTEMPTS} times",
        room_ms / 2
    );
}

/// Times [`delayed_never_early`] gives its plan more room when storing it outran the room.
const ROOM_ATTEMPTS: usize = 4;

/// Publishes [`delayed_never_early`]'s plan on `topic` due from `room_ms` on and checks its
/// arrivals; `false`, with nothing checked, when storing the plan took longer than
/// `room_ms`.
async fn delayed_plan_in_due_order(photon: &Photon, topic: &str, room_ms: i64) -> bool {
    let mut reminders = photon.subscribe(topic, None, None);
    // The topic's first use (a broker creating its shard topics) is no part of the
    // scheduler's lateness: an event published at once goes first.
    photon
        .publish(topic, Some("w"), json!(null), json!({"warm": true}))
        .await
        .unwrap();
    let warm = take_exact(&mut reminders, 1).await.remove(0).unwrap();
    assert_eq!(warm.payload, json!({"warm": true}));
    let start = Utc::now() + chrono::Duration::milliseconds(room_ms);
    // (key, offset from start in ms): "a" published 1..=5 in this order.
    let plan = [
        ("a", 1_200),
        ("a", 400),
        ("b", 400),
        ("a", 800),
        ("a", 800),
        ("b", 0),
        ("a", -300),
    ];
    for (n, (key, offset)) in plan.iter().enumerate() {
        let at = start + chrono::Duration::milliseconds(*offset);
        let scheduled = photon
            .publish_at(
                topic,
                Some(key),
                json!(null),
                json!({"n": n, "due_ms": at.timestamp_millis()}),
                at,
            )
            .await
            .unwrap();
        assert!(scheduled.due_at >= at, "due {} for {at}", scheduled.due_at);
    }
    if Utc::now() >= start {
        return false;
    }
    let mut arrived: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for _ in 0..plan.len() {
        let event = take_exact(&mut reminders, 1).await.remove(0).unwrap();
        let now = Utc::now();
        let due = due_of(&event);
        let n = event.payload["n"].as_u64().unwrap();
        assert!(now >= due, "event {n} arrived {} early", due - now);
        assert!(now - due <= ON_TIME, "event {n} arrived {} late", now - due);
        arrived
            .entry(event.topic_key.clone().unwrap())
            .or_default()
            .push(n);
    }
    assert_eq!(arrived["a"], vec![6, 1, 3, 4, 0], "key a in due order");
    assert_eq!(arrived["b"], vec![5, 2], "key b in due order");
    assert_quiet(&mut reminders, Duration::from_millis(500)).await;
    true
}

/// Events published for later by an instance that shuts down before they are due are
/// delivered by the scheduler of the next instance on a new port (a restart), none early;
/// an event the first instance already appended while an earlier entry still waited is not
/// appended again. Both instances read one virtual clock, so that how long the first takes
/// to publish (a loaded machine, a broker creating shard topics) cannot make an event due
/// before the restart.
pub async fn delayed_survive_restart(ctx: Context) {
    let topic = ctx.topic("renewals");
    let clock = VirtualClock::new();
    let first = photon(&ctx, clock.clock()).await;
    let mut seen_first = first.subscribe(&topic, None, None);
    let later = clock.now() + chrono::Duration::hours(1);
    for n in 0..5 {
        let at = later + chrono::Duration::milliseconds(100 * n);
        first
            .publish_at(
                &topic,
                Some("r"),
                json!(null),
                json!({"n": n, "due_ms": at.timestamp_millis()}),
                at,
            )
            .await
            .unwrap();
    }
    let now = clock.now();
    first
        .publish_at(
            &topic,
            Some("r"),
            json!(null),
            json!({"n": 5, "due_ms": now.timestamp_millis()}),
            now,
        )
        .await
        .unwrap();
    let appended = take_exact(&mut seen_first, 1).await.remove(0).unwrap();
    assert_eq!(appended.payload["n"], 5);
    first.shutdown().await.unwrap();
    drop(first);

    let second = photon(&ctx, clock.clock()).await;
    let mut everything = second.subscribe(&topic, None, None);
    second.start_scheduler().unwrap();
    scheduler_running(&second).await;
    let again = take_exact(&mut everything, 1).await.remove(0).unwrap();
    assert_eq!(
        again.payload["n"], 5,
        "the event appended before the restart"
    );
    clock.set(later - chrono::Duration::milliseconds(1));
    assert_quiet(&mut everything, Duration::from_millis(300)).await;
    clock.set(later + chrono::Duration::milliseconds(400));
    let order: Vec<u64> = take_exact(&mut everything, 5)
        .await
        .into_iter()
        .map(|event| event.unwrap().payload["n"].as_u64().unwrap())
        .collect();
    assert_eq!(order, vec![0, 1, 2, 3, 4], "each once, in due order");
    assert_quiet(&mut everything, Duration::from_millis(500)).await;
    second.shutdown().await.unwrap();
}

/// On a virtual clock, an event a day away arrives when the clock is moved a day, and not
/// when it is moved less.
pub async fn delayed_by_virtual_clock(ctx: Context) {
    let topic = ctx.topic("digests");
    let clock = VirtualClock::new();
    let photon = photon(&ctx, clock.clock()).await;
    let mut digests = photon.subscribe(&topic, None, None);
    let hour = Duration::from_secs(3600);
    for hours in [24, 48] {
        photon
            .publish_after(
                &topic,
                Some("d"),
                json!(null),
                json!({"hours": hours}),
                hour * hours,
            )
            .await
            .unwrap();
    }
    clock.advance(hour * 23);
    assert_quiet(&mut digests, Duration::from_millis(300)).await;
    clock.advance(hour);
    let first = take_exact(&mut digests, 1).await.remove(0).unwrap();
    assert_eq!(first.payload, json!({"hours": 24}));
    assert_quiet(&mut digests, Duration::from_millis(300)).await;
    clock.advance(hour * 24);
    let second = take_exact(&mut digests, 1).await.remove(0).unwrap();
    assert_eq!(second.payload, json!({"hours": 48}));
    photon.shutdown().await.unwrap();
}

/// 10,000 events due at random times within 60 s, published from 16 tasks: every one
/// arrives once, none before its time.
pub async fn scheduled_under_load(ctx: Context) {
    let topic = ctx.topic("load");
    let photon = photon(&ctx, Clock::system()).await;
    let mut arrivals = photon.subscribe(&topic, None, None);
    let start = Utc::now();
    let mut publishers = Vec::new();
    for task in 0..LOAD_PUBLISHERS {
        let (photon, topic) = (photon.clone(), topic.clone());
        publishers.push(tokio::spawn(async move {
            for n in (task..LOAD_EVENTS).step_by(LOAD_PUBLISHERS) {
                let offset = rand::thread_rng().gen_range(0..LOAD_SPREAD_MS);
                let at = start + chrono::Duration::milliseconds(offset);
                let key = format!("k{}", n % 64);
                photon
                    .publish_at(
                        &topic,
                        Some(&key),
                        json!(null),
                        json!({"n": n, "due_ms": at.timestamp_millis()}),
                        at,
                    )
                    .await
                    .unwrap();
            }
        }));
    }
    for publisher in publishers {
        publisher.await.unwrap();
    }
    let deadline = tokio::time::Instant::now()
        + Duration::from_millis(u64::try_from(LOAD_SPREAD_MS).unwrap())
        + Duration::from_secs(60);
    let mut seen = vec![false; LOAD_EVENTS];
    let (mut early, mut repeated, mut worst_late) = (0, 0, chrono::Duration::zero());
    for _ in 0..LOAD_EVENTS {
        let event = match tokio::time::timeout_at(deadline, arrivals.next()).await {
            Ok(Some(event)) => event.unwrap(),
            other => panic!(
                "{} of {LOAD_EVENTS} arrived before the deadline ({other:?})",
                seen.iter().filter(|s| **s).count()
            ),
        };
        let now = Utc::now();
        let due = due_of(&event);
        if now < due {
            early += 1;
        }
        worst_late = worst_late.max(now - due);
        let n = usize::try_from(event.payload["n"].as_u64().unwrap()).unwrap();
        if std::mem::replace(&mut seen[n], true) {
            repeated += 1;
        }
    }
    println!("scheduled_under_load: worst lateness {worst_late}");
    assert_eq!((early, repeated), (0, 0), "early, repeated");
    assert!(seen.iter().all(|s| *s));
    assert_quiet(&mut arrivals, Duration::from_millis(500)).await;
    photon.shutdown().await.unwrap();
}

/// A handler with `requeue_retries` answers `Retry::after` to its first attempt of event
/// 0: event 1 of the same key is handled at once, event 0 comes back from the handler's
/// retry topic after the delay with its attempt count, and the handler's position on its
/// own topic passes both.
pub async fn retry_after_requeues(ctx: Context) {
    let topic = ctx.topic("emails");
    let durable = ctx.subscription("mailer");
    let retries = format!("{topic}.retries.{durable}");
    let photon = photon(&ctx, Clock::system()).await;
    let (seen, mut attempts) = tokio::sync::mpsc::unbounded_channel();
    let delay = Duration::from_millis(300);
    let executor = photon
        .executor()
        .handler_with(
            HandlerOptions::new(&durable, &topic).requeue_retries(),
            move |event: Event, context: ExecutorContext| {
                let n = event.payload["n"].as_u64().unwrap();
                seen.send((
                    n,
                    context.attempt(),
                    event.topic_name.clone(),
                    Instant::now(),
                ))
                .unwrap();
                std::future::ready(if n == 0 && context.attempt() == 1 {
                    Err(Retry::after(delay))
                } else {
                    Ok(())
                })
            },
        )
        .start()
        .unwrap();
    for n in 0..2 {
        photon
            .publish(&topic, Some("u-1"), json!(null), json!({ "n": n }))
            .await
            .unwrap();
    }
    let mut order = Vec::new();
    for _ in 0..3 {
        let attempt = tokio::time::timeout(crate::context::DEADLINE, attempts.recv())
            .await
            .expect("an attempt within the deadline")
            .unwrap();
        order.push(attempt);
    }
    let seen: Vec<(u64, u32, &str)> = order
        .iter()
        .map(|(n, attempt, topic, _)| (*n, *attempt, topic.as_str()))
        .collect();
    assert_eq!(
        seen,
        vec![
            (0, 1, topic.as_str()),
            (1, 1, topic.as_str()),
            (0, 2, retries.as_str())
        ]
    );
    assert!(
        order[2].3 - order[0].3 >= delay,
        "the requeued event came back early"
    );
    executor.shutdown().await.unwrap();
    assert_quiet(&mut attempts_stream(attempts), Duration::from_millis(300)).await;
    // The handler's position on its own topic passed both events (on every store, sharded
    // or not): its durable subscription, reopened, has nothing to give.
    let mut reopened = photon.durable(&durable, &topic, None);
    assert_quiet(&mut reopened, Duration::from_millis(500)).await;
    photon.shutdown().await.unwrap();
}

/// The rest of an attempt channel as a stream.
fn attempts_stream<T: Send + 'static>(
    receiver: tokio::sync::mpsc::UnboundedReceiver<T>,
) -> impl futures::Stream<Item = T> + Unpin {
    Box::pin(futures::stream::unfold(
        receiver,
        |mut receiver| async move { receiver.recv().await.map(|item| (item, receiver)) },
    ))
}
