//! `Retry::after`: a handler asking for its event again later, waiting in place (its key
//! waits, order kept) or requeued to its retry topic through the scheduler (its key goes
//! on), with attempts counted across the requeue and a dead letter in the handler's own
//! topic's dead-letter topic when they run out.

use std::time::{Duration, Instant};

use futures::StreamExt;
use photon_runtime::executor::{Context, Retry, ATTEMPTS_HEADER, REQUEUED_FROM_HEADER};
use photon_runtime::{Event, HandlerOptions, Photon, PhotonError, RetryPolicy};
use serde_json::json;
use tokio::sync::mpsc;

/// One attempt as the handler saw it.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    n: i64,
    topic: String,
    attempt: u32,
    headers: Vec<(String, String)>,
    at: Instant,
}

/// A handler that reports every attempt and answers `Retry::after(delay)` to the first
/// attempt of event `n = 0` (or to every attempt with `always`).
fn asking_again(
    seen: mpsc::UnboundedSender<Seen>,
    delay: Duration,
    always: bool,
) -> impl Fn(Event, Context) -> std::future::Ready<Result<(), Retry>> + Send + Sync + 'static {
    move |event: Event, context: Context| {
        let n = event.payload["n"].as_i64().unwrap();
        let headers = context
            .headers()
            .iter()
            .filter(|(name, _)| name.starts_with("photon-"))
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        seen.send(Seen {
            n,
            topic: event.topic_name.clone(),
            attempt: context.attempt(),
            headers,
            at: Instant::now(),
        })
        .unwrap();
        std::future::ready(if n == 0 && (always || context.attempt() == 1) {
            Err(Retry::after(delay))
        } else {
            Ok(())
        })
    }
}

async fn next(seen: &mut mpsc::UnboundedReceiver<Seen>) -> Seen {
    tokio::time::timeout(Duration::from_secs(30), seen.recv())
        .await
        .expect("an attempt within 30 s")
        .unwrap()
}

/// Starts a handler of `options` answering as [`asking_again`] does, publishes events 0
/// and 1 of one key, and returns the executor and the first three attempts.
async fn three_attempts(
    photon: &Photon,
    options: HandlerOptions,
    delay: Duration,
) -> (photon_runtime::Executor, [Seen; 3]) {
    let (sender, mut seen) = mpsc::unbounded_channel();
    let executor = photon
        .executor()
        .handler_with(options, asking_again(sender, delay, false))
        .start()
        .unwrap();
    publish_two(photon).await;
    let attempts = [
        next(&mut seen).await,
        next(&mut seen).await,
        next(&mut seen).await,
    ];
    (executor, attempts)
}

async fn publish_two(photon: &Photon) {
    for n in 0..2 {
        photon
            .publish("emails", Some("u-1"), json!(null), json!({ "n": n }))
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn in_place_the_key_waits_and_keeps_its_order() {
    let photon = Photon::builder().build().unwrap();
    let delay = Duration::from_millis(200);
    let options = HandlerOptions::new("mailer", "emails");
    let (executor, attempts) = three_attempts(&photon, options, delay).await;
    let order: Vec<(i64, u32)> = attempts.iter().map(|s| (s.n, s.attempt)).collect();
    assert_eq!(
        order,
        vec![(0, 1), (0, 2), (1, 1)],
        "the key waited for event 0"
    );
    assert!(
        attempts[1].at - attempts[0].at >= delay,
        "retried before the delay asked for"
    );
    assert!(attempts
        .iter()
        .all(|s| s.topic == "emails" && s.headers.is_empty()));
    executor.wait_idle().await.unwrap();
    // Idle means handled; the checkpoint is stored by the periodic commit or, at the
    // latest, by the shutdown's final flush.
    executor.shutdown().await.unwrap();
    assert_eq!(
        photon.checkpoint("mailer", "emails", None).await.unwrap(),
        Some(2)
    );
}

#[tokio::test]
async fn requeued_the_key_goes_on_and_the_event_comes_back_from_the_retry_topic() {
    let photon = Photon::builder().build().unwrap();
    let delay = Duration::from_millis(300);
    let options = HandlerOptions::new("mailer", "emails").requeue_retries();
    let (executor, attempts) = three_attempts(&photon, options, delay).await;
    let order: Vec<(i64, u32, &str)> = attempts
        .iter()
        .map(|s| (s.n, s.attempt, s.topic.as_str()))
        .collect();
    assert_eq!(
        order,
        vec![
            (0, 1, "emails"),
            (1, 1, "emails"),
            (0, 2, "emails.retries.mailer")
        ],
        "event 1 went on while event 0 waited in the schedule"
    );
    assert!(
        attempts[2].at - attempts[0].at >= delay,
        "requeued event came back early"
    );
    let original = photon
        .subscribe("emails", None, None)
        .next()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        attempts[2].headers,
        vec![
            (ATTEMPTS_HEADER.to_owned(), "1".to_owned()),
            (
                REQUEUED_FROM_HEADER.to_owned(),
                format!("emails/{}/{}", original.seq, original.event_id)
            ),
        ]
    );
    executor.shutdown().await.unwrap();
    assert_eq!(
        photon.checkpoint("mailer", "emails", None).await.unwrap(),
        Some(2)
    );
    assert_eq!(
        photon
            .checkpoint("mailer", "emails.retries.mailer", None)
            .await
            .unwrap(),
        Some(1)
    );
}

#[tokio::test]
async fn requeued_attempts_run_out_into_the_handlers_own_dead_letter_topic() {
    let photon = Photon::builder().build().unwrap();
    let (sender, mut seen) = mpsc::unbounded_channel();
    let policy = RetryPolicy::default().max_attempts(3);
    let executor = photon
        .executor()
        .handler_with(
            HandlerOptions::new("mailer", "emails")
                .requeue_retries()
                .retry(policy),
            asking_again(sender, Duration::from_millis(20), true),
        )
        .start()
        .unwrap();
    photon
        .publish("emails", Some("u-1"), json!(null), json!({ "n": 0 }))
        .await
        .unwrap();
    let mut letters = photon.subscribe("emails.dlq", None, None);
    let letter = tokio::time::timeout(Duration::from_secs(30), letters.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let attempts: Vec<(u32, String)> = [
        next(&mut seen).await,
        next(&mut seen).await,
        next(&mut seen).await,
    ]
    .into_iter()
    .map(|s| (s.attempt, s.topic))
    .collect();
    assert_eq!(
        attempts,
        vec![
            (1, "emails".to_owned()),
            (2, "emails.retries.mailer".to_owned()),
            (3, "emails.retries.mailer".to_owned())
        ]
    );
    // The letter's head is its actor; its payload is the event's.
    assert_eq!(letter.actor["attempts"], 3, "{}", letter.actor);
    assert_eq!(letter.actor["original"]["topic"], "emails.retries.mailer");
    assert_eq!(letter.payload, json!({ "n": 0 }));
    assert!(seen.try_recv().is_err(), "no attempt after the last");
    executor.shutdown().await.unwrap();
}

#[tokio::test]
async fn requeue_is_refused_where_there_is_no_one_event_to_requeue() {
    let photon = Photon::builder().build().unwrap();
    let refused = photon
        .executor()
        .batch_handler(
            HandlerOptions::new("digest", "emails").requeue_retries(),
            photon_runtime::executor::BatchPolicy::new(10, Duration::from_millis(10)),
            |_batch: Vec<Event>| async move { Ok::<(), PhotonError>(()) },
        )
        .start();
    match refused {
        Err(PhotonError::InvalidInput(message)) => {
            assert!(
                message.contains("handler digest: requeue_retries"),
                "{message}"
            );
        }
        other => panic!(
            "expected the requeue to be refused, got {:?}",
            other.map(|_| ())
        ),
    }
}
