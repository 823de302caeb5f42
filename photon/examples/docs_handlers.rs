//! The Rust examples of docs/handlers.md, compiled as they are written there (`photon/tests/
//! docs_examples.rs` checks that each one is here word for word): handler arguments, the
//! same handler as a closure, a retry policy and a timeout per handler, and tower
//! middleware, on the in-process store.
//!
//! Run with `cargo run -p photon --example docs_handlers`.

use photon::prelude::*;
use serde_json::json;

/// The page's stand-in for a handler's real work (sending an email).
async fn send(email: Event) -> Result<(), PhotonError> {
    println!(
        "sending {} to {}",
        email.payload,
        email.topic_key.unwrap_or_default()
    );
    Ok(())
}

// The snippets keep the page's layout (one-line structs, a signature broken before its
// return type), which rustfmt would rewrite.
#[rustfmt::skip]
async fn handler_arguments() -> Result<(), PhotonError> {
    // docs: handlers/handler-arguments
    use photon::prelude::*;

    #[topic(name = "orders", keyed_by = "order_id")]
    #[derive(Clone, serde::Serialize, serde::Deserialize)]
    struct Order { order_id: String, total: u32 }

    #[topic(name = "invoices", keyed_by = "order_id")]
    #[derive(Clone, serde::Serialize, serde::Deserialize)]
    struct Invoice { order_id: String, total: u32 }

    #[derive(Clone)]
    struct Rates { vat_percent: u32 }

    #[subscribe(durable = "invoicing")]
    async fn invoice(order: Order, State(rates): State<Rates>, photon: Photon, context: Context)
        -> Result<(), PhotonError>
    {
        println!("order {} seq {} attempt {}", order.order_id, context.seq(), context.attempt());
        let total = order.total * (100 + rates.vat_percent) / 100;
        Invoice { order_id: order.order_id, total }.publish_on(&photon).await?;
        Ok(())
    }

    let photon = Photon::builder().state(Rates { vat_percent: 20 }).build()?;
    let executor = photon.start_executor()?;
    // end docs
    Order { order_id: "o-1".into(), total: 100 }.publish_on(&photon).await?;
    executor.wait_idle().await?;
    executor.shutdown().await?;

    // docs: handlers/closure
    let executor = photon
        .executor()
        .state(Rates { vat_percent: 20 })
        .typed_handler("invoicing", |context: Context, order: Order, rates: State<Rates>| async move {
            println!("{} (attempt {}) at {}%", order.order_id, context.attempt(), rates.vat_percent);
        })
        .start()?;
    // end docs
    Order { order_id: "o-2".into(), total: 50 }.publish_on(&photon).await?;
    executor.wait_idle().await?;
    executor.shutdown().await?;
    photon.shutdown().await
}

#[rustfmt::skip]
async fn retries_and_timeouts(photon: &Photon) -> Result<(), PhotonError> {
    // docs: handlers/retries-and-timeouts
    use std::time::Duration;
    use photon::runtime::{HandlerOptions, RetryPolicy};

    let executor = photon
        .executor()
        .handler_with(
            HandlerOptions::new("mailer", "emails")
                .retry(RetryPolicy::default().max_attempts(8).initial_backoff(Duration::from_secs(1)))
                .max_handler_time(Duration::from_secs(30)),
            |email: Event| async move { send(email).await },
        )
        .start()?;
    // end docs
    executor.wait_idle().await?;
    executor.shutdown().await?;

    // Declared, it is started by `start_executor` (in `main`).
    // docs: handlers/retries-and-timeouts-declared
    #[subscribe(topic = "emails", durable = "mailer", max_attempts = 8, initial_backoff = "1s",
                max_backoff = "5m", timeout = "30s")]
    async fn mailer(email: Event) -> Result<(), PhotonError> { send(email).await }
    // end docs
    Ok(())
}

#[rustfmt::skip]
async fn middleware(photon: &Photon) -> Result<(), PhotonError> {
    // docs: handlers/middleware
    use std::time::Duration;
    use photon::runtime::HandlerOptions;

    let layers = tower::ServiceBuilder::new()
        .concurrency_limit(4)             // attempts at once, retries included
        .timeout(Duration::from_secs(5)); // one attempt
    let executor = photon
        .executor()
        .handler_layered(HandlerOptions::new("mailer", "emails"), layers, |email: Event| async move {
            send(email).await
        })
        .start()?;
    // end docs
    executor.wait_idle().await?;
    executor.shutdown().await
}

#[tokio::main]
async fn main() -> Result<(), PhotonError> {
    handler_arguments().await?;

    let photon = Photon::builder().build()?;
    photon
        .publish(
            "emails",
            Some("ada@example.com"),
            json!("shop"),
            json!("receipt"),
        )
        .await?;
    retries_and_timeouts(&photon).await?;
    middleware(&photon).await?;
    photon.shutdown().await
}
