//! Publishing for later: the [`Photon`] methods that store an event in the schedule, and
//! the one that starts this process's scheduler.

use std::time::Duration;

use chrono::{DateTime, Utc};
use photon_core::{Headers, PhotonError, Result};
use serde_json::Value;

use super::entry::{due_ms, ScheduleEntry};
use super::{Scheduled, SchedulerTask};
use crate::Photon;

/// `delay` from now by `clock`, unless that is past the last time there is.
pub(crate) fn due_after(clock: &super::Clock, delay: Duration) -> Option<DateTime<Utc>> {
    let delay = chrono::Duration::from_std(delay).ok()?;
    clock.now().checked_add_signed(delay)
}

impl Photon {
    /// Publishes an event that subscribers see `delay` from now (by the scheduler's
    /// [`Clock`](super::Clock)) and not before; see [`crate::schedule`] for what is
    /// guaranteed (never early; durable as the port; per-key order by due time).
    ///
    /// Starts this process's scheduler if it is not running ([`Photon::start_scheduler`]).
    ///
    /// # Errors
    /// As [`Photon::publish_at`].
    ///
    /// # Examples
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use std::time::Duration;
    /// use futures::StreamExt;
    /// use serde_json::json;
    /// let photon = photon_runtime::Photon::builder().build()?;
    /// let mut reminders = photon.subscribe("reminders", None, None);
    /// let scheduled = photon
    ///     .publish_after("reminders", Some("u-1"), json!(null), json!("pay"), Duration::from_millis(50))
    ///     .await?;
    /// let event = reminders.next().await.unwrap()?;
    /// assert_eq!(event.payload, json!("pay"));
    /// assert!(chrono::Utc::now() >= scheduled.due_at); // never before its time
    /// # Ok::<_, photon_runtime::PhotonError>(())
    /// # }).unwrap();
    /// ```
    pub async fn publish_after(
        &self,
        topic: &str,
        key: Option<&str>,
        actor: Value,
        payload: Value,
        delay: Duration,
    ) -> Result<Scheduled> {
        let at = due_after(&self.scheduler_config().clock, delay).ok_or_else(|| {
            PhotonError::InvalidInput(format!(
                "delay {delay:?} for topic {topic:?}: too long to be a time"
            ))
        })?;
        self.publish_at_with_headers(topic, key, actor, payload, Headers::new(), at)
            .await
    }

    /// Publishes an event that subscribers see at `at` (by the scheduler's
    /// [`Clock`](super::Clock)) and not before; a time already past makes it due at once.
    /// See [`crate::schedule`].
    ///
    /// Starts this process's scheduler if it is not running ([`Photon::start_scheduler`]).
    ///
    /// # Errors
    /// Before anything is stored: as [`Photon::publish`] (invalid topic or key, payload
    /// over a limit), with [`PhotonError::PayloadTooLarge`] also when the schedule entry
    /// holding the sealed event is over the port's limit (its size is named);
    /// [`PhotonError::Unsupported`] on a port without consumer groups. After: the port's
    /// errors.
    ///
    /// # Cancel safety
    /// As [`Photon::publish`].
    pub async fn publish_at(
        &self,
        topic: &str,
        key: Option<&str>,
        actor: Value,
        payload: Value,
        at: DateTime<Utc>,
    ) -> Result<Scheduled> {
        self.publish_at_with_headers(topic, key, actor, payload, Headers::new(), at)
            .await
    }

    /// [`Photon::publish_at`] with headers, as [`Photon::publish_with_headers`] takes them.
    ///
    /// # Errors
    /// As [`Photon::publish_at`]; [`PhotonError::InvalidHeader`] as
    /// [`Photon::publish_with_headers`].
    pub async fn publish_at_with_headers(
        &self,
        topic: &str,
        key: Option<&str>,
        actor: Value,
        payload: Value,
        headers: Headers,
        at: DateTime<Utc>,
    ) -> Result<Scheduled> {
        let store = self.store();
        let event = store.draft_injected(topic, key, actor, payload, headers)?;
        let envelope_id = event.envelope_id.clone();
        let due_ms = due_ms(at);
        let entry = ScheduleEntry::Due {
            due_ms,
            draft: event,
        }
        .draft(&self.scheduler_config().topic)?;
        let limit = store.port().capabilities().max_payload_bytes;
        let size = photon_core::event::body_len(&entry.body);
        if size > limit {
            return Err(PhotonError::PayloadTooLarge {
                topic: topic.to_owned(),
                size,
                limit,
            });
        }
        self.start_scheduler()?;
        let stored = store.port().append(entry).await?;
        Ok(Scheduled {
            envelope_id,
            due_at: DateTime::from_timestamp_millis(due_ms).unwrap_or(at),
            entry_seq: stored.seq,
        })
    }

    /// Starts this process's scheduler, unless it runs already: it appends events
    /// published for later when they are due (see [`crate::schedule`]). A process that
    /// publishes for later runs one already; call this in processes that only consume, so
    /// that a scheduler still runs when the publishing processes are gone. It stops on
    /// [`Photon::shutdown`]. Must be called within a Tokio runtime.
    ///
    /// # Errors
    /// [`PhotonError::Unsupported`] on a port without consumer groups.
    ///
    /// # Examples
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let photon = photon_runtime::Photon::builder().build()?;
    /// photon.start_scheduler()?;
    /// photon.start_scheduler()?; // already running: nothing more
    /// photon.shutdown().await?;
    /// # Ok::<_, photon_runtime::PhotonError>(())
    /// # }).unwrap();
    /// ```
    pub fn start_scheduler(&self) -> Result<()> {
        let mut slot = self.scheduler_slot();
        if slot.is_none() {
            let store = self.store().clone();
            *slot = Some(SchedulerTask::start(store, self.scheduler_config())?);
        }
        Ok(())
    }
}
