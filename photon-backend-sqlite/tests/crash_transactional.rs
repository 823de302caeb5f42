//! Exactly-once effects through SQLite transactions: a consumer process running a
//! transactional handler (one row per event into a table of the same file, committed with
//! the checkpoint advance) is killed with SIGKILL at 24 random points while a publisher
//! process publishes 4,000 keyed events. At the end the table holds exactly one row per
//! stored event of the topic: none missing, none twice. The table has no unique
//! constraint, so a repeat would show as a second row.
//!
//! Children are this test binary run again with `--ignored --exact crash_role` and
//! [`ROLE_ENV`] = `<role>|<db>|<log>`; the publisher is photon-testkit's crash publisher
//! (fsynced log of acknowledged publishes).

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use photon_backend_sqlite::rusqlite::Connection;
use photon_backend_sqlite::{sqlite_error, transactional_handler, SqliteStoragePort, Synchronous};
use photon_core::{EventStore, TransportCrypto};
use photon_runtime::{HandlerOptions, Photon};
use photon_testkit::crash::{publisher_role, read_acked, spawn_role, CrashPlan};
use photon_testkit::process::{Random, Spawned};

const ROLE_ENV: &str = "PHOTON_SQLITE_TEST_TX_CRASH_ROLE";
const TOPIC: &str = "crash.tx";
const EVENTS: usize = 4_000;
const KILLS: usize = 24;
/// Longest wait, after the last kill, for every event to be published and handled.
const DRAIN_DEADLINE: Duration = Duration::from_secs(40);

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

/// `normal`: a killed process loses nothing committed (the test kills processes; power
/// loss is not its subject), and commits skip the fsync.
fn open_port(db: &Path) -> SqliteStoragePort {
    SqliteStoragePort::builder()
        .path(db)
        .poll_interval(Duration::from_millis(10))
        .synchronous(Synchronous::Normal)
        .build_blocking()
        .unwrap()
}

/// The consumer: a transactional handler inserting one row per event, until killed.
async fn consume(db: &Path) {
    let port = open_port(db);
    let photon = Photon::builder()
        .storage_port(port.clone())
        .transport_crypto(TransportCrypto::plaintext())
        .build()
        .unwrap();
    let pid = i64::from(std::process::id());
    let handler = transactional_handler(move |tx, event| {
        tx.execute(
            "INSERT INTO handled_rows (event_id, seq, pid) VALUES (?1, ?2, ?3)",
            (&event.event_id, event.seq, pid),
        )
        .map(drop)
        .map_err(|e| sqlite_error("insert a handled row", e))
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
    let [role, db, log] = parts[..] else {
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
                    Arc::new(open_port(Path::new(db))),
                    TransportCrypto::plaintext(),
                );
                publisher_role(store, &plan(), log.into()).await;
            }
            _ => consume(Path::new(db)).await,
        }
    });
}

/// A child running `role` on the file `db`, logging to `log`.
fn start(role: &str, db: &Path, log: &Path) -> Spawned {
    Spawned::new(spawn_role(
        ROLE_ENV,
        format!("{role}|{}|{}", db.display(), log.display()),
    ))
}

fn count(db: &Path, sql: &str) -> i64 {
    Connection::open(db)
        .unwrap()
        .query_row(sql, [], |row| row.get(0))
        .unwrap_or(0)
}

/// The topic's stored event ids.
fn stored_events(db: &Path) -> HashSet<String> {
    let connection = Connection::open(db).unwrap();
    let mut statement = connection
        .prepare(
            "SELECT event_id FROM events WHERE topic_id = \
             (SELECT topic_id FROM topics WHERE name = ?1)",
        )
        .unwrap();
    let ids = statement
        .query_map([TOPIC], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    ids
}

/// Rows per event id in the handler's table.
fn rows_per_event(db: &Path) -> BTreeMap<String, i64> {
    let connection = Connection::open(db).unwrap();
    let mut statement = connection
        .prepare("SELECT event_id, count(*) FROM handled_rows GROUP BY event_id")
        .unwrap();
    let rows = statement
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactional_consumer_killed_at_random_points() {
    let directory = tempfile::tempdir().unwrap();
    let db = directory.path().join("tx-crash.db");
    let published_log = directory.path().join("published.log");
    let consumer_log = directory.path().join("consumer.log");
    // The user's table, in the same file, before any child opens it.
    drop(open_port(&db));
    Connection::open(&db)
        .unwrap()
        .execute_batch(
            "CREATE TABLE handled_rows (event_id TEXT NOT NULL, seq INTEGER NOT NULL, \
             pid INTEGER NOT NULL)",
        )
        .unwrap();

    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(7, |d| d.as_nanos() as u64)
        | 1;
    println!("transactional crash test seed {seed}");
    let mut random = Random::new(seed);
    let started = Instant::now();
    let mut publisher = start("publish", &db, &published_log);
    let mut consumer = start("consume", &db, &consumer_log);
    let mut rows_at_kills = Vec::with_capacity(KILLS);
    for _ in 0..KILLS {
        tokio::time::sleep(Duration::from_millis(100 + random.below(500))).await;
        consumer.kill();
        rows_at_kills.push(count(&db, "SELECT count(*) FROM handled_rows"));
        consumer = start("consume", &db, &consumer_log);
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
        let rows = count(&db, "SELECT count(*) FROM handled_rows");
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
    let stored = stored_events(&db);
    // The publisher is never killed, so every stored event was acknowledged.
    assert_eq!(stored, acked_ids);
    let rows = rows_per_event(&db);
    let missing = stored.iter().filter(|id| !rows.contains_key(*id)).count();
    let duplicated = rows.values().filter(|&&n| n > 1).count();
    let foreign = rows.keys().filter(|id| !stored.contains(*id)).count();
    let workers = count(&db, "SELECT count(DISTINCT pid) FROM handled_rows");
    println!(
        "{} events, {} rows, {missing} missing, {duplicated} duplicated, {workers} consumer processes wrote rows, {:?} in all",
        stored.len(),
        rows.values().sum::<i64>(),
        started.elapsed()
    );
    assert_eq!((missing, duplicated, foreign), (0, 0, 0));
    assert_eq!(rows.len(), EVENTS);
    assert_eq!(
        count(&db, "SELECT count(*) FROM handled_rows"),
        EVENTS as i64
    );
    // The checkpoint is the topic's last seq: everything handled committed its advance.
    assert_eq!(
        count(
            &db,
            "SELECT seq FROM checkpoints WHERE subscription = 'tx-consumer'"
        ),
        count(&db, "SELECT last_seq FROM topics WHERE name = 'crash.tx'")
    );
}
