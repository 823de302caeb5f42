//! The records of the schedule topic: an event waiting for its time, and the mark that a
//! waiting event was appended.

use chrono::{DateTime, Utc};
use photon_core::{new_envelope_id, Body, Headers, PhotonError, Record, RecordDraft, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One record of the schedule topic, in clear (the event inside is sealed as any event is;
/// only its topic, key and due time are readable, as they are of every stored record).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "schedule", rename_all = "snake_case")]
pub(crate) enum ScheduleEntry {
    /// An event to append to its topic at `due_ms` (milliseconds since the Unix epoch, by
    /// the scheduler's clock), exactly as drafted when it was published: appending the
    /// same draft again keeps its envelope id, which brokers deduplicate.
    Due {
        /// When it is due.
        due_ms: i64,
        /// The event, validated and sealed.
        draft: RecordDraft,
    },
    /// The event of the entry with this event id was appended: a scheduler taking over
    /// skips that entry instead of appending it twice.
    Done {
        /// The schedule record's event id.
        entry: String,
    },
}

impl ScheduleEntry {
    /// The draft of this entry as a record of `schedule_topic`.
    pub(crate) fn draft(&self, schedule_topic: &str) -> Result<RecordDraft> {
        let payload = serde_json::to_value(self).map_err(|err| {
            PhotonError::InvalidInput(format!("schedule entry cannot be encoded: {err}"))
        })?;
        let created_at = Utc::now();
        Ok(RecordDraft {
            envelope_id: new_envelope_id(created_at),
            topic_name: schedule_topic.to_owned(),
            topic_key: None,
            created_at,
            body: Body::Plain {
                actor: Value::Null,
                payload,
                headers: Headers::new(),
            },
        })
    }

    /// The entry a schedule record holds.
    ///
    /// # Errors
    /// [`PhotonError::InvalidInput`] naming the record when it is no schedule entry (a
    /// sealed body, or another shape: something else wrote to the schedule topic).
    pub(crate) fn read(record: &Record) -> Result<Self> {
        let refused = |why: String| {
            PhotonError::InvalidInput(format!(
                "record {} of the schedule topic {:?} is no schedule entry: {why}",
                record.event_id, record.topic_name
            ))
        };
        match &record.body {
            Body::Plain { payload, .. } => {
                Self::deserialize(payload).map_err(|err| refused(err.to_string()))
            }
            Body::Sealed(_) => Err(refused("it is sealed".into())),
        }
    }
}

/// Milliseconds since the Unix epoch of `at`, rounded up: an event is never due before
/// the instant it was published for.
pub(crate) fn due_ms(at: DateTime<Utc>) -> i64 {
    let millis = at.timestamp_millis();
    if at.timestamp_subsec_nanos().is_multiple_of(1_000_000) {
        millis
    } else {
        millis.saturating_add(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn entries_round_trip_through_a_record() {
        let due = ScheduleEntry::Due {
            due_ms: 1_800_000_000_123,
            draft: RecordDraft {
                envelope_id: "env-1".into(),
                topic_name: "orders".into(),
                topic_key: Some("o-1".into()),
                created_at: Utc::now(),
                body: Body::Plain {
                    actor: json!("alice"),
                    payload: json!({"total": 12}),
                    headers: Headers::new(),
                },
            },
        };
        let done = ScheduleEntry::Done {
            entry: "evt-9".into(),
        };
        for entry in [due, done] {
            let draft = entry.draft("photon.schedule").unwrap();
            assert_eq!(
                (draft.topic_name.as_str(), draft.topic_key.as_deref()),
                ("photon.schedule", None)
            );
            let record = Record::from_draft(draft, "evt-1".into(), 1);
            assert_eq!(ScheduleEntry::read(&record).unwrap(), entry);
        }
    }

    #[test]
    fn a_record_of_another_shape_is_refused_by_id() {
        let mut draft = ScheduleEntry::Done { entry: "x".into() }
            .draft("photon.schedule")
            .unwrap();
        draft.body = Body::Plain {
            actor: Value::Null,
            payload: json!({"total": 12}),
            headers: Headers::new(),
        };
        let record = Record::from_draft(draft, "evt-7".into(), 3);
        let err = ScheduleEntry::read(&record).unwrap_err().to_string();
        assert!(err.contains("record evt-7 of the schedule topic"), "{err}");
    }

    #[test]
    fn due_times_round_up_to_the_millisecond() {
        let at = DateTime::from_timestamp(1_800_000_000, 1_000_001).unwrap();
        assert_eq!(due_ms(at), 1_800_000_000_002);
        let exact = DateTime::from_timestamp(1_800_000_000, 1_000_000).unwrap();
        assert_eq!(due_ms(exact), 1_800_000_000_001);
    }
}
