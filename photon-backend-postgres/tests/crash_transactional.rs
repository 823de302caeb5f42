//! Exactly-once effects through PostgreSQL transactions: photon-testkit's transactional
//! kill test (24 SIGKILLs of the consumer, 4,000 keyed events, exactly one row per event at
//! the end), with the user's table in the test schema beside the events.
//!
//! The handler also publishes both ways (issue 23): through its transaction to
//! [`SIDE_TX`], which must hold exactly one event per handled event at the end, and with
//! `Photon::publish` to [`SIDE_DIRECT`] while its transaction is open, which must hold at
//! least one (an independent append, made again when a kill rolled the transaction back).
//!
//! Children are this test binary run again with `--ignored --exact crash_role` and
//! [`ROLE_ENV`] = `<role>|<log>|<schema>`, on the server of `common::url`; the publisher is
//! photon-testkit's crash publisher (fsynced log of acknowledged publishes).

mod common;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use photon_backend_postgres::transactional_handler;
use photon_core::{EventStore, PhotonError, TransportCrypto};
use photon_testkit::crash::CrashPlan;
use photon_testkit::transactional_crash::{
    consumer_runtime, handle_until_killed, kill_plan, run_located_transactional_crash,
    HandledTable, TX_SUBSCRIPTION,
};
use serde_json::json;

use common::PgFactory;

const ROLE_ENV: &str = "PHOTON_POSTGRES_TEST_TX_CRASH_ROLE";
const TOPIC: &str = "crash.tx";
/// Published to through the handler's transaction, keyed by the handled event's id.
const SIDE_TX: &str = "crash.tx.side";
/// Published to with `Photon::publish` from the handler, keyed by the handled event's id.
const SIDE_DIRECT: &str = "crash.tx.direct";

fn plan() -> CrashPlan {
    // Longest wait, after the last kill, for every event to be published and handled.
    kill_plan(TOPIC, Duration::from_secs(60))
}

/// The consumer: a transactional handler inserting one row per event and publishing both
/// ways, until killed.
async fn consume(schema: &str) {
    let port = common::port_on(schema).await;
    let photon = consumer_runtime(port.clone());
    let pid = i64::from(std::process::id());
    let insert =
        format!("INSERT INTO {schema}.handled_rows (event_id, seq, pid) VALUES ($1, $2, $3)");
    let handler = {
        let photon = photon.clone();
        transactional_handler(move |tx, event| {
            let (insert, photon) = (insert.clone(), photon.clone());
            Box::pin(async move {
                tx.execute(&insert, &[&event.event_id, &event.seq, &pid])
                    .await
                    .map_err(|e| PhotonError::handler(format!("insert a handled row: {e}")))?;
                let source = Some(event.event_id.as_str());
                let draft = photon
                    .store()
                    .draft(SIDE_TX, source, json!(null), json!(event.seq))?;
                tx.publish(draft).await?;
                photon
                    .publish(SIDE_DIRECT, source, json!(null), json!(event.seq))
                    .await?;
                Ok(())
            })
        })
    };
    handle_until_killed(&photon, &plan(), port, handler).await;
}

photon_testkit::transactional_crash_child!(
    ROLE_ENV,
    plan(),
    store: |schema| async move {
        let port = common::port_on(&schema).await;
        EventStore::new(Arc::new(port), TransportCrypto::plaintext())
    },
    consume: |schema| async move { consume(&schema).await },
);

/// The test's view of the schema.
struct Table {
    client: tokio_postgres::Client,
    schema: String,
}

impl Table {
    async fn events_and_keys(&self, topic: &str) -> (i64, i64) {
        common::events_and_keys(&self.client, &self.schema, topic).await
    }

    async fn count(&self, sql: &str) -> i64 {
        self.client
            .query_opt(sql, &[])
            .await
            .unwrap()
            .and_then(|row| row.get::<_, Option<i64>>(0))
            .unwrap_or(0)
    }
}

#[async_trait::async_trait]
impl HandledTable for Table {
    async fn rows(&self) -> i64 {
        let schema = &self.schema;
        self.count(&format!("SELECT count(*) FROM {schema}.handled_rows"))
            .await
    }

    async fn stored_events(&self) -> HashSet<String> {
        let schema = &self.schema;
        self.client
            .query(
                &format!(
                    "SELECT event_id FROM {schema}.events WHERE topic_id = \
                     (SELECT topic_id FROM {schema}.topics WHERE name = $1)"
                ),
                &[&TOPIC],
            )
            .await
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect()
    }

    async fn rows_per_event(&self) -> BTreeMap<String, i64> {
        let schema = &self.schema;
        common::query_pairs(
            &self.client,
            &format!("SELECT event_id, count(*) FROM {schema}.handled_rows GROUP BY event_id"),
        )
        .await
    }

    async fn writers(&self) -> i64 {
        let schema = &self.schema;
        self.count(&format!(
            "SELECT count(DISTINCT pid) FROM {schema}.handled_rows"
        ))
        .await
    }

    async fn checkpoint_and_head(&self) -> (i64, i64) {
        let schema = &self.schema;
        let checkpoint = self
            .count(&format!(
                "SELECT seq FROM {schema}.checkpoints WHERE subscription = '{TX_SUBSCRIPTION}'"
            ))
            .await;
        let head = self
            .count(&format!(
                "SELECT last_seq FROM {schema}.topics WHERE name = '{TOPIC}'"
            ))
            .await;
        (checkpoint, head)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactional_consumer_killed_at_random_points() {
    let Some(factory) = PgFactory::new().await else {
        return;
    };
    let schema = factory.schema.clone();
    // The schema and the user's table exist before any child opens them.
    drop(factory.port().await.unwrap());
    let client = common::admin(&factory.url).await.unwrap();
    client
        .batch_execute(&format!(
            "CREATE TABLE {schema}.handled_rows (event_id TEXT NOT NULL, seq BIGINT NOT NULL, \
             pid BIGINT NOT NULL)"
        ))
        .await
        .unwrap();
    let directory = tempfile::tempdir().unwrap();
    let table = Table {
        client,
        schema: schema.clone(),
    };
    run_located_transactional_crash(&plan(), &table, ROLE_ENV, &schema, directory.path()).await;
    let events = plan().events as i64;
    assert_eq!(
        table.events_and_keys(SIDE_TX).await,
        (events, events),
        "one event through the transaction per handled event"
    );
    let (direct, sources) = table.events_and_keys(SIDE_DIRECT).await;
    assert_eq!(sources, events, "a direct publish for every handled event");
    assert!(direct >= events);
}
