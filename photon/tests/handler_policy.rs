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
