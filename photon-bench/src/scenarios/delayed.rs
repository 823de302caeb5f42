//! Delivery through the scheduler beside publishing at once.
//!
//! An event published with `Photon::publish_after` and no delay is due when the call
//! returns, but it still goes through the schedule: stored in the schedule topic, read by
//! the scheduler, appended to its topic and marked done there. These rows time what that
//! path costs: end to end to a durable subscription beside the same events published at
//! once, and the round trip (publish -> a live subscriber receives it) beside the raw
//! client's. The scheduler appends one due event at a time, so the end-to-end rows run
//! [`DELAYED_SHARE`]th of the other rows' events.

use std::time::{Duration, Instant};

use photon_core::{Result, StartAt};
use photon_runtime::Photon;
use serde_json::json;

use super::photon_side::{durable_rate, next, PhotonSide, Publishing, Sealing, PUBLISH_KEYS};
use crate::latency::Latencies;
use crate::measure::BenchOptions;

/// The delayed rows' end-to-end measurements run `events / DELAYED_SHARE` events.
pub const DELAYED_SHARE: usize = 10;

impl PhotonSide {
    /// Events per second from publish to a durable subscription's acknowledgement
    /// (plaintext, [`DELAYED_SHARE`]th of `options.events`): with `publishing`
    /// [`Publishing::DueNow`] through the scheduler, with [`Publishing::Each`] the same
    /// events published at once.
    ///
    /// # Errors
    /// The port's errors.
    pub async fn delayed_end_to_end_rate(
        &self,
        options: &BenchOptions,
        round: usize,
        publishing: Publishing,
    ) -> Result<f64> {
        let name = match publishing {
            Publishing::DueNow => "e2e-delayed",
            Publishing::Each | Publishing::Batched => "e2e-at-once",
        };
        let topic = self.topic(Sealing::Plain, name, round);
        let options = delayed_options(options);
        let photon = self.photon(Sealing::Plain);
        let rate = durable_rate(photon, &options, &topic, PUBLISH_KEYS, publishing).await?;
        self.done_with(&topic).await?;
        Ok(rate)
    }

    /// Round trips of events due at once through the scheduler (plaintext): each sample
    /// runs from before `Photon::publish_after` with no delay to a live subscriber's
    /// receiving the event, one event in flight at a time.
    ///
    /// # Errors
    /// The port's errors.
    pub async fn delayed_latency(&self, options: &BenchOptions, round: usize) -> Result<Latencies> {
        let photon = self.photon(Sealing::Plain);
        let topic = self.topic(Sealing::Plain, "latency-delayed", round);
        let mut stream = photon.subscribe_at(&topic, None, StartAt::Tail);
        // A first round trip sets up the subscription and the scheduler's lease.
        publish_due_now(photon, &topic, None, options, 0).await?;
        next(&mut stream).await?;
        let mut latencies = Latencies::default();
        for i in 0..options.latency_share(round) {
            let started = Instant::now();
            publish_due_now(photon, &topic, None, options, i).await?;
            next(&mut stream).await?;
            latencies.record_since(started);
        }
        drop(stream);
        self.done_with(&topic).await?;
        Ok(latencies)
    }
}

/// `options` with [`DELAYED_SHARE`]th of its events (at least one per publisher).
fn delayed_options(options: &BenchOptions) -> BenchOptions {
    BenchOptions {
        events: (options.events / DELAYED_SHARE).max(options.publishers),
        ..*options
    }
}

/// Publishes payload `i` to `topic` through the scheduler, due at once.
pub(crate) async fn publish_due_now(
    photon: &Photon,
    topic: &str,
    key: Option<&str>,
    options: &BenchOptions,
    i: usize,
) -> Result<()> {
    photon
        .publish_after(topic, key, json!(null), options.payload(i), Duration::ZERO)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Arc;

    use photon_core::mem::MemStoragePort;
    use photon_core::{Body, StoragePort};
    use photon_runtime::SchedulerConfig;

    use super::*;

    /// The envelope ids of every record of `topic`, and for the schedule topic those of the
    /// drafts its due entries hold.
    async fn envelope_ids(
        port: &Arc<dyn StoragePort>,
        topic: &str,
    ) -> (Vec<String>, BTreeSet<String>) {
        let records = port.list_by_topic(topic, 0, usize::MAX).await.unwrap();
        let drafts = records
            .iter()
            .filter_map(|record| match &record.body {
                Body::Plain { payload, .. } if payload["schedule"] == "due" => {
                    Some(payload["draft"]["envelope_id"].as_str().unwrap().to_owned())
                }
                _ => None,
            })
            .collect();
        let ids = records
            .into_iter()
            .map(|record| record.envelope_id)
            .collect();
        (ids, drafts)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn events_due_now_reach_the_subscriber_through_the_schedule_once_each() {
        let port: Arc<dyn StoragePort> = Arc::new(MemStoragePort::new());
        let side = PhotonSide::new(port.clone(), "bench-test").unwrap();
        let options = BenchOptions {
            events: 400,
            publishers: 4,
            latency_samples: 10,
            rounds: 1,
            ..BenchOptions::default()
        };
        side.delayed_end_to_end_rate(&options, 0, Publishing::DueNow)
            .await
            .unwrap();
        let topic = side.topic(Sealing::Plain, "e2e-delayed", 0);
        let (delivered, _) = envelope_ids(&port, &topic).await;
        let schedule = SchedulerConfig::default().topic;
        let (_, scheduled) = envelope_ids(&port, &schedule).await;
        // 40 events and the warm-up, each once, each one the schedule held.
        assert_eq!(delivered.len(), 41);
        assert_eq!(
            delivered.iter().cloned().collect::<BTreeSet<_>>(),
            scheduled
        );

        let latencies = side.delayed_latency(&options, 0).await.unwrap();
        assert_eq!(latencies.samples(), 10);
        let (_, scheduled) = envelope_ids(&port, &schedule).await;
        assert_eq!(
            scheduled.len(),
            41 + 11,
            "the round trips went through the schedule"
        );
        side.photon(Sealing::Plain).shutdown().await.unwrap();
    }
}
