//! The schema and its tables, created on open when missing.
//!
//! - `topics` gives each topic name an id and holds its last assigned seq. Appends lock the
//!   row (`SELECT ... FOR UPDATE`) in their transaction, so seqs are assigned one
//!   transaction at a time per topic, in every process, and without gaps.
//! - `events` holds one row per record; `(topic_id, seq)` is its key, `event_id` is
//!   unique, and `(topic_id, topic_key, seq)` serves keyed subscriptions. `body` is
//!   `bytea` so that what is read back is byte for byte what was written.
//! - `checkpoints` holds one seq per subscription, topic and key scope.
//! - `group_members` and `group_partitions` hold the consumer groups' leases.
//!
//! Several processes may open a new schema at once: the creation runs in one transaction
//! under an advisory lock on the schema's name, so they take turns instead of colliding
//! on PostgreSQL's catalog.

use deadpool_postgres::Client;
use photon_core::Result;

use crate::error::pg_error;

fn tables(schema: &str) -> String {
    format!(
        "
CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE IF NOT EXISTS {schema}.topics (
    topic_id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name     TEXT NOT NULL UNIQUE,
    last_seq BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS {schema}.events (
    topic_id    BIGINT NOT NULL,
    seq         BIGINT NOT NULL,
    event_id    TEXT NOT NULL,
    envelope_id TEXT,
    topic_key   TEXT,
    created_at  BIGINT NOT NULL,
    body        BYTEA NOT NULL,
    extra       TEXT,
    PRIMARY KEY (topic_id, seq)
);
CREATE UNIQUE INDEX IF NOT EXISTS events_by_id ON {schema}.events (event_id);
CREATE INDEX IF NOT EXISTS events_by_key ON {schema}.events (topic_id, topic_key, seq);
CREATE TABLE IF NOT EXISTS {schema}.checkpoints (
    subscription TEXT NOT NULL,
    topic        TEXT NOT NULL,
    keyed        BOOLEAN NOT NULL,
    topic_key    TEXT NOT NULL,
    seq          BIGINT NOT NULL,
    PRIMARY KEY (subscription, topic, keyed, topic_key)
);
CREATE TABLE IF NOT EXISTS {schema}.group_members (
    grp        TEXT NOT NULL,
    topic      TEXT NOT NULL,
    owner      TEXT NOT NULL,
    member     TEXT NOT NULL,
    partitions BIGINT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (grp, topic, owner)
);
CREATE TABLE IF NOT EXISTS {schema}.group_partitions (
    grp        TEXT NOT NULL,
    topic      TEXT NOT NULL,
    part       BIGINT NOT NULL,
    owner      TEXT NOT NULL DEFAULT '',
    epoch      BIGINT NOT NULL DEFAULT 0,
    expires_at TIMESTAMPTZ NOT NULL DEFAULT '-infinity',
    seq        BIGINT,
    PRIMARY KEY (grp, topic, part)
);
CREATE TABLE IF NOT EXISTS {schema}.dead_letter_topics (
    name TEXT PRIMARY KEY
);
"
    )
}

/// Creates the schema and tables that are missing (`schema` is validated: a plain
/// lowercase identifier).
pub(crate) async fn migrate(client: &mut Client, schema: &str) -> Result<()> {
    let failed = |e| pg_error(&format!("create the tables of schema {schema:?}"), e);
    let transaction = client.transaction().await.map_err(failed)?;
    transaction
        .execute(
            "SELECT pg_advisory_xact_lock(hashtext('photon.schema.' || $1::text))",
            &[&schema],
        )
        .await
        .map_err(failed)?;
    transaction
        .batch_execute(&tables(schema))
        .await
        .map_err(failed)?;
    transaction.commit().await.map_err(failed)
}
