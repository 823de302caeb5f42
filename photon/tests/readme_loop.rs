//! The README's consume loop, as written there, runs inside `tokio::spawn` (its futures are
//! `Send`): it acknowledges the event it can open, dead-letters the one it cannot (sealed
//! with a key this Photon lacks), and ends when `photon.shutdown()` is called.

use std::sync::Arc;
use std::time::Duration;

use photon::mem::MemStoragePort;
use photon::prelude::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_consume_loop_runs_in_a_spawned_task() -> Result<(), PhotonError> {
    let port = Arc::new(MemStoragePort::new());
    let sealing = Photon::builder()
        .shared_storage_port(port.clone())
        .transport_key("k1", [7u8; 32])
        .build()?;
    let sealed = sealing
        .publish(
            "orders",
            Some("customer-1"),
            json!("shop"),
            json!({"total": 1}),
        )
        .await?;
    let photon = Photon::builder().shared_storage_port(port).build()?;
    let plain = photon
        .publish(
            "orders",
            Some("customer-7"),
            json!("shop"),
            json!({"total": 12}),
        )
        .await?;

    let mut billing = photon.durable("billing", "orders", None);
    let consumer = tokio::spawn(async move {
        let mut printed = Vec::new();
        while let Some(item) = billing.next().await {
            match item {
                Ok(event) => {
                    printed.push(format!(
                        "{} #{}: {}",
                        event.topic_name, event.seq, event.payload
                    ));
                    billing.ack(&event).await?;
                }
                Err(err) if err.position().is_some() => billing.dead_letter(&err).await?,
                Err(err) => eprintln!("stream error: {err}"),
            }
        }
        Ok::<_, PhotonError>(printed)
    });

    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while photon.checkpoint("billing", "orders", None).await? != Some(plain.seq) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "both events done within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    photon.shutdown().await?;
    let printed = consumer.await.expect("the consumer task")?;
    assert_eq!(
        printed,
        vec![format!("orders #{}: {{\"total\":12}}", plain.seq)]
    );
    let letters = photon.dead_letters("orders").await?;
    assert_eq!(letters.len(), 1);
    assert_eq!(
        (
            letters[0].original.event_id.as_str(),
            letters[0].original.seq
        ),
        (sealed.event_id.as_str(), sealed.seq)
    );
    Ok(())
}
