//! The Rust examples of docs/delayed.md, compiled as they are written there (`photon/tests/
//! docs_examples.rs` checks that each one is here word for word): publishing for later, a
//! scheduler in a consuming process, a handler asking for its event again later, and a
//! test on a virtual clock, on the in-process store.
//!
//! Run with `cargo run -p photon --features testing --example docs_delayed`.

use std::time::Duration;

use photon::prelude::*;
use serde_json::json;

// The snippets keep the page's layout, which rustfmt would rewrite.
#[rustfmt::skip]
async fn publish_later(photon: &Photon) -> Result<(), PhotonError> {
    // docs: delayed/publish-later
    use std::time::Duration;

    // Visible to subscribers in 30 minutes, not before.
    let reminder = photon
        .publish_after("reminders", Some("cart-42"), json!(null), json!({"cart": 42}), Duration::from_secs(1800))
        .await?;
    println!("due at {}", reminder.due_at);

    // Visible at 09:00 UTC tomorrow.
    let nine = (chrono::Utc::now() + chrono::Duration::days(1))
        .date_naive()
        .and_hms_opt(9, 0, 0)
        .expect("a time of day")
        .and_utc();
    photon.publish_at("digests", Some("team-7"), json!(null), json!({"team": 7}), nine).await?;
    // end docs
    Ok(())
}

#[rustfmt::skip]
async fn consuming_process() -> Result<(), PhotonError> {
    // docs: delayed/consuming-process
    use photon::SchedulerConfig;

    let photon = Photon::builder()
        .scheduler(SchedulerConfig::default().lease(Duration::from_secs(2)))
        .build()?;
    photon.start_scheduler()?; // this process appends what falls due, with the others
    // end docs
    photon.shutdown().await
}

#[rustfmt::skip]
async fn retry_later(photon: &Photon) -> Result<(), PhotonError> {
    // docs: delayed/retry-later
    use photon::Retry;

    #[subscribe(topic = "emails", durable = "mailer", requeue_retries)]
    async fn mail(email: Event, context: Context) -> Result<(), Retry> {
        if context.attempt() == 1 && email.payload["to"] == "busy@example.com" {
            // "421 try again later": this key's next emails go on meanwhile.
            return Err(Retry::after(Duration::from_secs(60)));
        }
        Ok(())
    }
    // end docs
    let _ = mail;
    let executor = photon.start_executor()?;
    executor.shutdown().await
}

#[rustfmt::skip]
async fn virtual_clock() -> Result<(), PhotonError> {
    // docs: delayed/virtual-clock
    use photon::testing::VirtualClock;
    use photon::SchedulerConfig;

    let clock = VirtualClock::new();
    let photon = Photon::builder()
        .scheduler(SchedulerConfig::default().clock(clock.clock()))
        .build()?;
    let mut reminders = photon.subscribe("reminders", None, None);
    let day = Duration::from_secs(24 * 3600);
    photon.publish_after("reminders", Some("cart-42"), json!(null), json!("come back"), day).await?;

    clock.advance(day - Duration::from_secs(1));     // nothing yet
    clock.advance(Duration::from_secs(1));           // due now
    let reminder = reminders.next().await.expect("the reminder")?;
    assert_eq!(reminder.payload, json!("come back"));
    // end docs
    photon.shutdown().await
}

#[tokio::main]
async fn main() -> Result<(), PhotonError> {
    let photon = Photon::builder().build()?;
    publish_later(&photon).await?;
    retry_later(&photon).await?;
    photon.shutdown().await?;
    consuming_process().await?;
    virtual_clock().await
}
