//! Exactly-once effects through SQLite transactions: photon-testkit's transactional kill
//! test (24 SIGKILLs of the consumer, 4,000 keyed events, exactly one row per event at the
//! end), with the user's table in the same file as the events.
//!
//! Children are this test binary run again with `--ignored --exact crash_role` and
//! [`ROLE_ENV`] = `<role>|<log>|<db>`; the publisher is photon-testkit's crash publisher
//! (fsynced log of acknowledged publishes).

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use photon_backend_sqlite::rusqlite::Connection;
use photon_backend_sqlite::{sqlite_error, transactional_handler, SqliteStoragePort, Synchronous};
use photon_core::{EventStore, TransportCrypto};
use photon_testkit::crash::CrashPlan;
use photon_testkit::transactional_crash::{
    consumer_runtime, handle_until_killed, kill_plan, run_located_transactional_crash,
    HandledTable, TX_SUBSCRIPTION,
};

const ROLE_ENV: &str = "PHOTON_SQLITE_TEST_TX_CRASH_ROLE";
const TOPIC: &str = "crash.tx";

fn plan() -> CrashPlan {
    // Longest wait, after the last kill, for every event to be published and handled.
    kill_plan(TOPIC, Duration::from_secs(40))
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
    let photon = consumer_runtime(port.clone());
    let pid = i64::from(std::process::id());
    let handler = transactional_handler(move |tx, event| {
        tx.execute(
            "INSERT INTO handled_rows (event_id, seq, pid) VALUES (?1, ?2, ?3)",
            (&event.event_id, event.seq, pid),
        )
        .map(drop)
        .map_err(|e| sqlite_error("insert a handled row", e))
    });
    handle_until_killed(&photon, &plan(), port, handler).await;
}

photon_testkit::transactional_crash_child!(
    ROLE_ENV,
    plan(),
    store: |db| async move {
        EventStore::new(
            Arc::new(open_port(Path::new(&db))),
            TransportCrypto::plaintext(),
        )
    },
    consume: |db| async move { consume(Path::new(&db)).await },
);

/// The test's view of the file.
struct Table {
    db: PathBuf,
}

impl Table {
    fn count(&self, sql: &str) -> i64 {
        Connection::open(&self.db)
            .unwrap()
            .query_row(sql, [], |row| row.get(0))
            .unwrap_or(0)
    }

    /// The rows of `sql`, each read by `read`.
    fn query<T, C: FromIterator<T>>(
        &self,
        sql: &str,
        params: impl rusqlite::Params,
        read: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> C {
        let connection = Connection::open(&self.db).unwrap();
        let mut statement = connection.prepare(sql).unwrap();
        let rows = statement
            .query_map(params, read)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        rows
    }
}

#[async_trait::async_trait]
impl HandledTable for Table {
    async fn rows(&self) -> i64 {
        self.count("SELECT count(*) FROM handled_rows")
    }

    async fn stored_events(&self) -> HashSet<String> {
        self.query(
            "SELECT event_id FROM events WHERE topic_id = \
             (SELECT topic_id FROM topics WHERE name = ?1)",
            [TOPIC],
            |row| row.get(0),
        )
    }

    async fn rows_per_event(&self) -> BTreeMap<String, i64> {
        self.query(
            "SELECT event_id, count(*) FROM handled_rows GROUP BY event_id",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
    }

    async fn writers(&self) -> i64 {
        self.count("SELECT count(DISTINCT pid) FROM handled_rows")
    }

    async fn checkpoint_and_head(&self) -> (i64, i64) {
        (
            self.count(&format!(
                "SELECT seq FROM checkpoints WHERE subscription = '{TX_SUBSCRIPTION}'"
            )),
            self.count(&format!(
                "SELECT last_seq FROM topics WHERE name = '{TOPIC}'"
            )),
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactional_consumer_killed_at_random_points() {
    let directory = tempfile::tempdir().unwrap();
    let db = directory.path().join("tx-crash.db");
    // The user's table, in the same file, before any child opens it.
    drop(open_port(&db));
    Connection::open(&db)
        .unwrap()
        .execute_batch(
            "CREATE TABLE handled_rows (event_id TEXT NOT NULL, seq INTEGER NOT NULL, \
             pid INTEGER NOT NULL)",
        )
        .unwrap();
    let table = Table { db: db.clone() };
    let location = db.display().to_string();
    run_located_transactional_crash(&plan(), &table, ROLE_ENV, &location, directory.path()).await;
}
