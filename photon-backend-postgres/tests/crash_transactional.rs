//! Exactly-once effects through PostgreSQL transactions: a consumer process running a
//! transactional handler (one row per event into a table of the test schema, committed
//! with the checkpoint advance) is killed with SIGKILL at 24 random points while a
//! publisher process publishes 4,000 keyed events. At the end the table holds exactly one
//! row per stored event of the topic: none missing, none twice. The table has no unique
//! constraint, so a repeat would show as a second row.
//!
//! Children are this test binary run again with `--ignored --exact crash_role` and
//! [`ROLE_ENV`] = `<role>|<schema>|<log>`, on the server of `common::url`; the publisher is
//! photon-testkit's crash publisher (fsynced log of acknowledged publishes).

mod common;

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use photon_backend_postgres::{transactional_handler, PostgresStoragePort};
use photon_core::{EventStore, PhotonError, TransportCrypto};
use photon_runtime::{HandlerOptions, Photon};
use photon_testkit::crash::{publisher_role, read_acked, spawn_role, CrashPlan};
use photon_testkit::process::{Random, Spawned};

use common::PgFactory;

const ROLE_ENV: &str = "PHOTON_POSTGRES_TEST_TX_CRASH_ROLE";
const TOPIC: &str = "crash.tx";
const EVENTS: usize = 4_000;
const KILLS: usize = 24;
/// Longest wait, after the last kill, for every event to be published and handled.
const DRAIN_DEADLINE: Duration = Duration::from_secs(60);

fn plan() -> CrashPlan {
    CrashPlan {
        topic: TOPIC.into(),
        events: EVENTS,
        keys: 16,
        consumer_kills: KILLS,
        publisher_kills_at: Vec::new(),
        midpoint: 0,
        drain_deadline: DRAIN_DEADLINE,
        publish_pause: Duration::from_millis(25),
    }
}

async fn open_port(schema: &str) -> PostgresStoragePort {
    PostgresStoragePort::builder()
        .url(common::url())
        .schema(schema)
        .pool_size(4)
        .build()
        .await
        .unwrap()
}

/// The consumer: a transactional handler inserting one row per event, until killed.
async fn consume(schema: &str) {
    let port = open_port(schema).await;
    let photon = Photon::builder()
        .storage_port(port.clone())
        .transport_crypto(TransportCrypto::plaintext())
        .build()
        .unwrap();
    let pid = i64::from(std::process::id());
    let insert =
        format!("INSERT INTO {schema}.handled_rows (event_id, seq, pid) VALUES ($1, $2, $3)");
    let handler = transactional_handler(move |tx, event| {
        let insert = insert.clone();
        Box::pin(async move {
            tx.execute(&insert, &[&event.event_id, &event.seq, &pid])
                .await
                .map(drop)
                .map_err(|e| PhotonError::handler(format!("insert a handled row: {e}")))
        })
    });
    let _executor = photon
        .executor()
        .transactional_handler(
            HandlerOptions::new("tx-consumer", TOPIC),
            Arc::new(port),
            handler,
        )
        .start()
        .unwrap();
    std::future::pending::<()>().await;
}

/// A child: the publisher or the consumer, until killed.
#[test]
#[ignore = "child process of transactional_consumer_killed_at_random_points"]
fn crash_role() {
    let Ok(spec) = std::env::var(ROLE_ENV) else {
        return;
    };
    let parts: Vec<&str> = spec.splitn(3, '|').collect();
    let [role, schema, log] = parts[..] else {
        panic!("bad {ROLE_ENV}: {spec}");
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        match role {
            "publish" => {
                let store = EventStore::new(
                    Arc::new(open_port(schema).await),
                    TransportCrypto::plaintext(),
                );
                publisher_role(store, &plan(), log.into()).await;
            }
            _ => consume(schema).await,
        }
    });
}

/// A child running `role` on `schema`, logging to `log`.
fn start(role: &str, schema: &str, log: &Path) -> Spawned {
    Spawned::new(spawn_role(
        ROLE_ENV,
        format!("{role}|{schema}|{}", log.display()),
    ))
}

async fn count(client: &tokio_postgres::Client, sql: &str) -> i64 {
    client
        .query_opt(sql, &[])
        .await
        .unwrap()
        .and_then(|row| row.get::<_, Option<i64>>(0))
        .unwrap_or(0)
}

/// The topic's stored event ids.
async fn stored_events(client: &tokio_postgres::Client, schema: &str) -> HashSet<String> {
    client
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

/// Rows per event id in the handler's table.
async fn rows_per_event(client: &tokio_postgres::Client, schema: &str) -> BTreeMap<String, i64> {
    client
        .query(
            &format!("SELECT event_id, count(*) FROM {schema}.handled_rows GROUP BY event_id"),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
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
    let published_log = directory.path().join("published.log");
    let consumer_log = directory.path().join("consumer.log");
    let all_rows = format!("SELECT count(*) FROM {schema}.handled_rows");

    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(7, |d| d.as_nanos() as u64)
        | 1;
    println!("transactional crash test seed {seed}");
    let mut random = Random::new(seed);
    let started = Instant::now();
    let mut publisher = start("publish", &schema, &published_log);
    let mut consumer = start("consume", &schema, &consumer_log);
    let mut rows_at_kills = Vec::with_capacity(KILLS);
    for _ in 0..KILLS {
        tokio::time::sleep(Duration::from_millis(100 + random.below(500))).await;
        consumer.kill();
        rows_at_kills.push(count(&client, &all_rows).await);
        consumer = start("consume", &schema, &consumer_log);
    }
    let acked_during_kills = read_acked(&published_log).len();
    println!(
        "kill phase {:?}: {acked_during_kills} acknowledged, rows at each kill {rows_at_kills:?}",
        started.elapsed()
    );
    assert!(
        acked_during_kills < EVENTS,
        "publishing ended before the last kill: raise EVENTS or the publish pause"
    );

    let deadline = Instant::now() + DRAIN_DEADLINE;
    loop {
        let acked = read_acked(&published_log).len();
        let rows = count(&client, &all_rows).await;
        if acked == EVENTS && rows >= EVENTS as i64 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "deadline passed: {acked} of {EVENTS} acknowledged, {rows} rows"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Anything still in flight would add a row now: give it the time to show.
    tokio::time::sleep(Duration::from_millis(300)).await;
    consumer.kill();
    publisher.kill();

    let acked = read_acked(&published_log);
    let acked_ids: HashSet<String> = acked.iter().map(|a| a.event_id.clone()).collect();
    assert_eq!(acked.len(), EVENTS);
    assert_eq!(acked_ids.len(), EVENTS);
    let stored = stored_events(&client, &schema).await;
    // The publisher is never killed, so every stored event was acknowledged.
    assert_eq!(stored, acked_ids);
    let rows = rows_per_event(&client, &schema).await;
    let missing = stored.iter().filter(|id| !rows.contains_key(*id)).count();
    let duplicated = rows.values().filter(|&&n| n > 1).count();
    let foreign = rows.keys().filter(|id| !stored.contains(*id)).count();
    let workers = count(
        &client,
        &format!("SELECT count(DISTINCT pid) FROM {schema}.handled_rows"),
    )
    .await;
    println!(
        "{} events, {} rows, {missing} missing, {duplicated} duplicated, {workers} consumer processes wrote rows, {:?} in all",
        stored.len(),
        rows.values().sum::<i64>(),
        started.elapsed()
    );
    assert_eq!((missing, duplicated, foreign), (0, 0, 0));
    assert_eq!(rows.len(), EVENTS);
    assert_eq!(count(&client, &all_rows).await, EVENTS as i64);
    // The checkpoint is the topic's last seq: everything handled committed its advance.
    assert_eq!(
        count(
            &client,
            &format!("SELECT seq FROM {schema}.checkpoints WHERE subscription = 'tx-consumer'")
        )
        .await,
        count(
            &client,
            &format!("SELECT last_seq FROM {schema}.topics WHERE name = 'crash.tx'")
        )
        .await
    );
}
