//! Consumer groups of the SQLite port: the group protocol of `photon-core` over leases and
//! heartbeats stored in the database file, so that members in every process opening the
//! file share the work.
//!
//! - `group_members`: one row per member incarnation, with its expiry.
//! - `group_partitions`: one row per partition: the lease (owner, epoch, expiry) and the
//!   partition's checkpoint. Every change is one compare-and-set `UPDATE ... WHERE owner =
//!   ? AND epoch = ? AND expires_at > now`, so the checkpoint moves only under the live
//!   lease it was acknowledged under, in the same statement as the check.
//!
//! Expiries are in the host's wall-clock milliseconds: processes sharing a file share a
//! host clock. The coordination runs on its own connection (as another process would),
//! outside the append writer, on tokio's blocking pool.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use photon_core::group::{
    Claim, GroupCoordination, GroupScope, Heartbeat, HeldLease, LiveMember, PartitionLease,
};
use photon_core::{PhotonError, Result};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use crate::config::SqliteConfig;
use crate::error::sqlite_error;
use crate::error::LABEL;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS group_members (
    grp        TEXT NOT NULL,
    topic      TEXT NOT NULL,
    owner      TEXT NOT NULL,
    member     TEXT NOT NULL,
    partitions INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (grp, topic, owner)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS group_partitions (
    grp        TEXT NOT NULL,
    topic      TEXT NOT NULL,
    partition  INTEGER NOT NULL,
    owner      TEXT NOT NULL DEFAULT '',
    epoch      INTEGER NOT NULL DEFAULT 0,
    expires_at INTEGER NOT NULL DEFAULT 0,
    seq        INTEGER,
    PRIMARY KEY (grp, topic, partition)
) WITHOUT ROWID;
";

/// Leases and heartbeats in the database file.
pub(crate) struct SqliteCoordination {
    config: SqliteConfig,
    /// Opened on first use.
    connection: Arc<Mutex<Option<Connection>>>,
}

impl SqliteCoordination {
    pub(crate) fn new(config: SqliteConfig) -> Self {
        Self {
            config,
            connection: Arc::default(),
        }
    }

    /// Runs `work` on the coordination connection on the blocking pool.
    async fn run<T, F>(&self, what: &'static str, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection, i64) -> rusqlite::Result<T> + Send + 'static,
    {
        let connection = Arc::clone(&self.connection);
        let config = self.config.clone();
        tokio::task::spawn_blocking(move || {
            let mut slot = lock(&connection);
            if slot.is_none() {
                *slot = Some(open(&config)?);
            }
            let Some(connection) = slot.as_mut() else {
                return Err(PhotonError::Closed("sqlite group connection".into()));
            };
            work(connection, now_ms()).map_err(|e| sqlite_error(what, e))
        })
        .await
        .map_err(|join| PhotonError::storage(LABEL, "group task failed", join))?
    }
}

fn lock(connection: &Mutex<Option<Connection>>) -> MutexGuard<'_, Option<Connection>> {
    // The slot is only filled once; a panic cannot leave it torn.
    connection
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn open(config: &SqliteConfig) -> Result<Connection> {
    let what = "open the group connection";
    let connection = Connection::open(&config.path).map_err(|e| sqlite_error(what, e))?;
    connection
        .busy_timeout(config.busy_timeout)
        .map_err(|e| sqlite_error(what, e))?;
    // Group writes are not synced one by one (WAL with `synchronous = NORMAL`): each one
    // then holds the file's write lock for microseconds instead of an fsync, so a member
    // stopped mid-write (SIGSTOP, a debugger) almost never stalls the other processes of
    // the file. A process crash loses none of them; a power loss can lose the last lease
    // and checkpoint writes, whose events are then handled again (the events themselves
    // follow `PHOTON_SQLITE_SYNCHRONOUS`).
    connection
        .execute_batch("PRAGMA synchronous = NORMAL;")
        .map_err(|e| sqlite_error(what, e))?;
    connection
        .execute_batch(SCHEMA)
        .map_err(|e| sqlite_error("create the group tables", e))?;
    Ok(connection)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn ms(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

fn epoch_of(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

fn stored_epoch(epoch: u64) -> i64 {
    i64::try_from(epoch).unwrap_or(i64::MAX)
}

#[async_trait]
impl GroupCoordination for SqliteCoordination {
    async fn heartbeat(&self, scope: &GroupScope, beat: Heartbeat<'_>) -> Result<Vec<LiveMember>> {
        let (scope, member, owner) = (scope.clone(), beat.member.to_owned(), beat.owner.to_owned());
        self.run("record a group heartbeat", move |connection, _| {
            let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
            // Read with the write lock held: the wait for it must not shorten a lease.
            let now = now_ms();
            transaction
                .prepare_cached(
                    "INSERT INTO group_members (grp, topic, owner, member, partitions, expires_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
                     ON CONFLICT (grp, topic, owner) DO UPDATE SET expires_at = excluded.expires_at",
                )?
                .execute(params![scope.group, scope.topic, owner, member, beat.partitions, now + ms(beat.ttl)])?;
            transaction
                .prepare_cached(
                    "DELETE FROM group_members WHERE grp = ?1 AND topic = ?2 AND expires_at <= ?3",
                )?
                .execute(params![scope.group, scope.topic, now])?;
            let members = transaction
                .prepare_cached(
                    "SELECT DISTINCT member, partitions FROM group_members \
                     WHERE grp = ?1 AND topic = ?2 ORDER BY member, partitions",
                )?
                .query_map(params![scope.group, scope.topic], |row| {
                    Ok(LiveMember {
                        name: row.get(0)?,
                        partitions: row.get(1)?,
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            transaction.commit()?;
            Ok(members)
        })
        .await
    }

    async fn members(&self, scope: &GroupScope) -> Result<Vec<LiveMember>> {
        let scope = scope.clone();
        self.run("list group members", move |connection, now| {
            connection
                .prepare_cached(
                    "SELECT DISTINCT member, partitions FROM group_members \
                     WHERE grp = ?1 AND topic = ?2 AND expires_at > ?3 ORDER BY member, partitions",
                )?
                .query_map(params![scope.group, scope.topic, now], |row| {
                    Ok(LiveMember {
                        name: row.get(0)?,
                        partitions: row.get(1)?,
                    })
                })?
                .collect()
        })
        .await
    }

    async fn leave(&self, scope: &GroupScope, owner: &str) -> Result<()> {
        let (scope, owner) = (scope.clone(), owner.to_owned());
        self.run("leave a group", move |connection, _| {
            connection
                .prepare_cached(
                    "DELETE FROM group_members WHERE grp = ?1 AND topic = ?2 AND owner = ?3",
                )?
                .execute(params![scope.group, scope.topic, owner])?;
            Ok(())
        })
        .await
    }

    async fn acquire(&self, scope: &GroupScope, claim: Claim<'_>) -> Result<Option<u64>> {
        let (scope, owner) = (scope.clone(), claim.owner.to_owned());
        self.run("acquire a group lease", move |connection, _| {
            let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
            // Read with the write lock held: the wait for it must not shorten a lease.
            let now = now_ms();
            transaction
                .prepare_cached(
                    "INSERT OR IGNORE INTO group_partitions (grp, topic, partition) VALUES (?1, ?2, ?3)",
                )?
                .execute(params![scope.group, scope.topic, claim.partition])?;
            let epoch: Option<i64> = transaction
                .prepare_cached(
                    "UPDATE group_partitions SET owner = ?4, epoch = epoch + 1, expires_at = ?5 \
                     WHERE grp = ?1 AND topic = ?2 AND partition = ?3 \
                     AND (owner = '' OR expires_at <= ?6) RETURNING epoch",
                )?
                .query_row(
                    params![scope.group, scope.topic, claim.partition, owner, now + ms(claim.ttl), now],
                    |row| row.get(0),
                )
                .optional()?;
            transaction.commit()?;
            Ok(epoch.map(epoch_of))
        })
        .await
    }

    async fn renew(&self, scope: &GroupScope, held: HeldLease<'_>, ttl: Duration) -> Result<bool> {
        let epoch = stored_epoch(held.epoch);
        let (scope, owner) = (scope.clone(), held.owner.to_owned());
        self.run("renew a group lease", move |connection, _| {
            let transaction =
                connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
            // Read with the write lock held: the wait for it must not lengthen a lease.
            let now = now_ms();
            let changed = transaction
                .prepare_cached(
                    "UPDATE group_partitions SET expires_at = ?6 \
                     WHERE grp = ?1 AND topic = ?2 AND partition = ?3 AND owner = ?4 \
                     AND epoch = ?5 AND expires_at > ?7",
                )?
                .execute(params![
                    scope.group,
                    scope.topic,
                    held.partition,
                    owner,
                    epoch,
                    now + ms(ttl),
                    now
                ])?;
            transaction.commit()?;
            Ok(changed == 1)
        })
        .await
    }

    async fn release(&self, scope: &GroupScope, held: HeldLease<'_>) -> Result<()> {
        let epoch = stored_epoch(held.epoch);
        let (scope, owner) = (scope.clone(), held.owner.to_owned());
        self.run("release a group lease", move |connection, _| {
            connection
                .prepare_cached(
                    "UPDATE group_partitions SET owner = '', expires_at = 0 \
                     WHERE grp = ?1 AND topic = ?2 AND partition = ?3 AND owner = ?4 AND epoch = ?5",
                )?
                .execute(params![scope.group, scope.topic, held.partition, owner, epoch])?;
            Ok(())
        })
        .await
    }

    async fn load_checkpoint(&self, scope: &GroupScope, partition: u32) -> Result<Option<i64>> {
        let scope = scope.clone();
        self.run("load a group partition checkpoint", move |connection, _| {
            Ok(connection
                .prepare_cached(
                    "SELECT seq FROM group_partitions WHERE grp = ?1 AND topic = ?2 AND partition = ?3",
                )?
                .query_row(params![scope.group, scope.topic, partition], |row| {
                    row.get::<_, Option<i64>>(0)
                })
                .optional()?
                .flatten())
        })
        .await
    }

    async fn commit(&self, scope: &GroupScope, held: HeldLease<'_>, seq: i64) -> Result<()> {
        let epoch = stored_epoch(held.epoch);
        let (scope_owned, owner) = (scope.clone(), held.owner.to_owned());
        let changed = self
            .run(
                "commit a group partition checkpoint",
                move |connection, _| {
                    let scope = scope_owned;
                    let transaction =
                        connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
                    // Read with the write lock held: a late commit is judged at its time.
                    let now = now_ms();
                    let changed = transaction
                        .prepare_cached(
                            "UPDATE group_partitions SET seq = max(coalesce(seq, ?6), ?6) \
                         WHERE grp = ?1 AND topic = ?2 AND partition = ?3 AND owner = ?4 \
                         AND epoch = ?5 AND expires_at > ?7",
                        )?
                        .execute(params![
                            scope.group,
                            scope.topic,
                            held.partition,
                            owner,
                            epoch,
                            seq,
                            now
                        ])?;
                    transaction.commit()?;
                    Ok(changed)
                },
            )
            .await?;
        if changed == 1 {
            Ok(())
        } else {
            Err(held.fenced(scope))
        }
    }

    async fn leases(&self, scope: &GroupScope) -> Result<Vec<PartitionLease>> {
        let scope = scope.clone();
        self.run("list group leases", move |connection, now| {
            connection
                .prepare_cached(
                    "SELECT partition, owner, epoch, expires_at, seq FROM group_partitions \
                     WHERE grp = ?1 AND topic = ?2 ORDER BY partition",
                )?
                .query_map(params![scope.group, scope.topic], |row| {
                    let owner: String = row.get(1)?;
                    let expires_at: i64 = row.get(3)?;
                    Ok(PartitionLease {
                        partition: row.get(0)?,
                        live: !owner.is_empty() && expires_at > now,
                        owner,
                        epoch: epoch_of(row.get(2)?),
                        checkpoint: row.get(4)?,
                    })
                })?
                .collect()
        })
        .await
    }
}
