//! `#[subscribe]` with its policy arguments (`max_attempts`, `initial_backoff`, `timeout`,
//! `concurrency`): they compile and the executor applies them. The declared handlers are
//! global to this test binary: their topics (`policy.*`) are used by no other test.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use photon::prelude::*;
use serde_json::json;

/// Calls of `hang`.
static HANG_CALLS: AtomicU32 = AtomicU32::new(0);

/// Never finishes: only its time limit ends an attempt.
#[subscribe(
    topic = "policy.orders",
    durable = "policy-hang",
    max_attempts = 2,
    initial_backoff = "1ms",
    timeout = "50ms",
    concurrency = 2
)]
async fn hang(_event: Event) {
    HANG_CALLS.fetch_add(1, Ordering::SeqCst);
    std::future::pending::<()>().await;
}

#[tokio::test]
async fn the_attributes_policy_is_applied() {
    let photon = Photon::builder().build().unwrap();
    let executor = photon.start_executor().unwrap();
    let handlers = executor.handlers();
    let options = handlers
        .iter()
        .find(|options| options.durable() == "policy-hang")
        .expect("the declared handler");
    assert_eq!(options.concurrency_limit(), Some(2));
    assert_eq!(
        options.handler_time_limit(),
        Some(Duration::from_millis(50))
    );
    let retry = options.retry_policy().expect("a retry policy of its own");
    assert_eq!(
        (retry.max_attempts, retry.initial_backoff),
        (2, Duration::from_millis(1))
    );
    // Not declared: the executor's.
    assert_eq!(
        retry.max_backoff,
        photon.executor_config().retry.max_backoff
    );

    photon
        .publish("policy.orders", Some("o-1"), json!(null), json!({"n": 1}))
        .await
        .unwrap();
    executor.wait_idle().await.unwrap();
    assert_eq!(HANG_CALLS.load(Ordering::SeqCst), 2);
    let letters = photon.dead_letters("policy.orders").await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].attempts, 2);
    assert!(
        letters[0].error.starts_with("handler failed: timed out: "),
        "{}",
        letters[0].error
    );
    executor.shutdown().await.unwrap();
}

/// Attempts of `mail`: the attempt number and the topic it came from.
static MAIL_ATTEMPTS: std::sync::Mutex<Vec<(u32, String)>> = std::sync::Mutex::new(Vec::new());

/// Asks for its event again 10 ms later on the first attempt.
#[subscribe(topic = "policy.mail", durable = "policy-mail", requeue_retries)]
async fn mail(event: Event, context: Context) -> Result<(), Retry> {
    let attempt = context.attempt();
    MAIL_ATTEMPTS
        .lock()
        .unwrap()
        .push((attempt, event.topic_name.clone()));
    if attempt == 1 {
        return Err(Retry::after(Duration::from_millis(10)));
    }
    Ok(())
}

#[tokio::test]
async fn requeue_retries_sends_the_event_round_its_retry_topic() {
    let photon = Photon::builder().build().unwrap();
    let executor = photon.start_executor().unwrap();
    let reading: Vec<String> = executor
        .handlers()
        .iter()
        .filter(|options| options.durable() == "policy-mail")
        .map(|options| options.topic().to_owned())
        .collect();
    assert_eq!(reading, ["policy.mail", "policy.mail.retries.policy-mail"]);
    photon
        .publish(
            "policy.mail",
            Some("u-1"),
            json!(null),
            json!({"to": "a@b"}),
        )
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while MAIL_ATTEMPTS.lock().unwrap().len() < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the requeued attempt did not come"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    executor.shutdown().await.unwrap();
    assert_eq!(
        *MAIL_ATTEMPTS.lock().unwrap(),
        [
            (1, "policy.mail".to_owned()),
            (2, "policy.mail.retries.policy-mail".to_owned())
        ]
    );
}

/// Calls of `layered`.
static LAYERED_CALLS: AtomicU32 = AtomicU32::new(0);

/// Never finishes: the middleware given with `layer_declared` ends its attempts.
#[subscribe(
    topic = "policy.slow",
    durable = "policy-layered",
    max_attempts = 2,
    initial_backoff = "1ms"
)]
async fn layered(_event: Event) {
    LAYERED_CALLS.fetch_add(1, Ordering::SeqCst);
    std::future::pending::<()>().await;
}

#[tokio::test]
async fn middleware_wraps_a_declared_handler() {
    let photon = Photon::builder().build().unwrap();
    let executor = photon
        .executor()
        .layer_declared(
            "policy-layered",
            tower::timeout::TimeoutLayer::new(Duration::from_millis(20)),
        )
        .start()
        .unwrap();
    photon
        .publish("policy.slow", None, json!(null), json!({"n": 1}))
        .await
        .unwrap();
    executor.wait_idle().await.unwrap();
    executor.shutdown().await.unwrap();
    assert_eq!(LAYERED_CALLS.load(Ordering::SeqCst), 2);
    let letters = photon.dead_letters("policy.slow").await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].attempts, 2);
    assert!(
        letters[0].error.contains("request timed out"),
        "{}",
        letters[0].error
    );

    let unknown = photon
        .executor()
        .layer_declared(
            "nobody",
            tower::timeout::TimeoutLayer::new(Duration::from_millis(20)),
        )
        .start();
    match unknown {
        Err(PhotonError::InvalidInput(message)) => assert_eq!(
            message,
            "layer_declared: no #[subscribe] handler has the durable name \"nobody\""
        ),
        other => panic!("expected a refusal, got {:?}", other.map(|_| ())),
    }
}
