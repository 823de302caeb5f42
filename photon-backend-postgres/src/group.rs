//! Consumer groups of the PostgreSQL port: the group protocol of `photon-core` over leases
//! and heartbeats stored in the schema, so that members in every process using the schema
//! share the work.
//!
//! - `group_members`: one row per member incarnation, with its expiry.
//! - `group_partitions`: one row per partition: the lease (owner, epoch, expiry) and the
//!   partition's checkpoint. Every change is one compare-and-set `UPDATE ... WHERE owner =
//!   $ AND epoch = $ AND expires_at > now`, so the checkpoint moves only under the live
//!   lease it was acknowledged under, in the same statement as the check; a concurrent
//!   change of the same row waits for the row lock and is judged on the row it then sees.
//!
//! Expiries are on the database server's clock (`clock_timestamp()`, read when the
//! statement runs), so the hosts' clocks never matter.

use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::Pool;
use photon_core::group::{
    Claim, GroupCoordination, GroupScope, Heartbeat, HeldLease, LiveMember, PartitionLease,
};
use photon_core::Result;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use crate::error::{pg_error, pool_error};

/// Leases and heartbeats in the schema.
pub(crate) struct PostgresCoordination {
    pool: Pool,
}

impl PostgresCoordination {
    pub(crate) fn new(pool: Pool) -> Self {
        Self { pool }
    }

    /// Runs one cached statement on a pooled connection.
    async fn query(
        &self,
        what: &str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>> {
        let client = self.pool.get().await.map_err(|e| pool_error(what, e))?;
        let statement = client
            .prepare_cached(sql)
            .await
            .map_err(|e| pg_error(what, e))?;
        client
            .query(&statement, params)
            .await
            .map_err(|e| pg_error(what, e))
    }
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

fn live_members(rows: &[Row]) -> std::result::Result<Vec<LiveMember>, tokio_postgres::Error> {
    rows.iter()
        .map(|row| {
            Ok(LiveMember {
                name: row.try_get(0)?,
                partitions: u32::try_from(row.try_get::<_, i64>(1)?).unwrap_or(u32::MAX),
            })
        })
        .collect()
}

#[async_trait]
impl GroupCoordination for PostgresCoordination {
    async fn heartbeat(&self, scope: &GroupScope, beat: Heartbeat<'_>) -> Result<Vec<LiveMember>> {
        let what = "record a group heartbeat";
        let failed = |e| pg_error(what, e);
        let mut client = self.pool.get().await.map_err(|e| pool_error(what, e))?;
        let transaction = client.transaction().await.map_err(failed)?;
        let upsert = transaction
            .prepare_cached(
                "INSERT INTO group_members (grp, topic, owner, member, partitions, expires_at) \
                 VALUES ($1, $2, $3, $4, $5, clock_timestamp() + $6::bigint * interval '1 millisecond') \
                 ON CONFLICT (grp, topic, owner) DO UPDATE SET expires_at = excluded.expires_at",
            )
            .await
            .map_err(failed)?;
        transaction
            .execute(
                &upsert,
                &[
                    &scope.group,
                    &scope.topic,
                    &beat.owner,
                    &beat.member,
                    &i64::from(beat.partitions),
                    &ms(beat.ttl),
                ],
            )
            .await
            .map_err(failed)?;
        let expire = transaction
            .prepare_cached(
                "DELETE FROM group_members WHERE grp = $1 AND topic = $2 \
                 AND expires_at <= clock_timestamp()",
            )
            .await
            .map_err(failed)?;
        transaction
            .execute(&expire, &[&scope.group, &scope.topic])
            .await
            .map_err(failed)?;
        let select = transaction
            .prepare_cached(
                "SELECT DISTINCT member, partitions FROM group_members \
                 WHERE grp = $1 AND topic = $2 ORDER BY member, partitions",
            )
            .await
            .map_err(failed)?;
        let rows = transaction
            .query(&select, &[&scope.group, &scope.topic])
            .await
            .map_err(failed)?;
        let members = live_members(&rows).map_err(failed)?;
        transaction.commit().await.map_err(failed)?;
        Ok(members)
    }

    async fn members(&self, scope: &GroupScope) -> Result<Vec<LiveMember>> {
        let what = "list group members";
        let rows = self
            .query(
                what,
                "SELECT DISTINCT member, partitions FROM group_members \
                 WHERE grp = $1 AND topic = $2 AND expires_at > clock_timestamp() \
                 ORDER BY member, partitions",
                &[&scope.group, &scope.topic],
            )
            .await?;
        live_members(&rows).map_err(|e| pg_error(what, e))
    }

    async fn leave(&self, scope: &GroupScope, owner: &str) -> Result<()> {
        self.query(
            "leave a group",
            "DELETE FROM group_members WHERE grp = $1 AND topic = $2 AND owner = $3",
            &[&scope.group, &scope.topic, &owner],
        )
        .await?;
        Ok(())
    }

    async fn acquire(&self, scope: &GroupScope, claim: Claim<'_>) -> Result<Option<u64>> {
        let what = "acquire a group lease";
        let part = i64::from(claim.partition);
        self.query(
            what,
            "INSERT INTO group_partitions (grp, topic, part) VALUES ($1, $2, $3) \
             ON CONFLICT (grp, topic, part) DO NOTHING",
            &[&scope.group, &scope.topic, &part],
        )
        .await?;
        let rows = self
            .query(
                what,
                "UPDATE group_partitions SET owner = $4, epoch = epoch + 1, \
                 expires_at = clock_timestamp() + $5::bigint * interval '1 millisecond' \
                 WHERE grp = $1 AND topic = $2 AND part = $3 \
                 AND (owner = '' OR expires_at <= clock_timestamp()) RETURNING epoch",
                &[
                    &scope.group,
                    &scope.topic,
                    &part,
                    &claim.owner,
                    &ms(claim.ttl),
                ],
            )
            .await?;
        match rows.first() {
            Some(row) => Ok(Some(epoch_of(
                row.try_get(0).map_err(|e| pg_error(what, e))?,
            ))),
            None => Ok(None),
        }
    }

    async fn renew(&self, scope: &GroupScope, held: HeldLease<'_>, ttl: Duration) -> Result<bool> {
        let (part, epoch) = (i64::from(held.partition), stored_epoch(held.epoch));
        let rows = self
            .query(
                "renew a group lease",
                "UPDATE group_partitions \
                 SET expires_at = clock_timestamp() + $6::bigint * interval '1 millisecond' \
                 WHERE grp = $1 AND topic = $2 AND part = $3 AND owner = $4 AND epoch = $5 \
                 AND expires_at > clock_timestamp() RETURNING epoch",
                &[
                    &scope.group,
                    &scope.topic,
                    &part,
                    &held.owner,
                    &epoch,
                    &ms(ttl),
                ],
            )
            .await?;
        Ok(rows.len() == 1)
    }

    async fn release(&self, scope: &GroupScope, held: HeldLease<'_>) -> Result<()> {
        let (part, epoch) = (i64::from(held.partition), stored_epoch(held.epoch));
        self.query(
            "release a group lease",
            "UPDATE group_partitions SET owner = '', expires_at = '-infinity' \
             WHERE grp = $1 AND topic = $2 AND part = $3 AND owner = $4 AND epoch = $5",
            &[&scope.group, &scope.topic, &part, &held.owner, &epoch],
        )
        .await?;
        Ok(())
    }

    async fn load_checkpoint(&self, scope: &GroupScope, partition: u32) -> Result<Option<i64>> {
        let what = "load a group partition checkpoint";
        let rows = self
            .query(
                what,
                "SELECT seq FROM group_partitions WHERE grp = $1 AND topic = $2 AND part = $3",
                &[&scope.group, &scope.topic, &i64::from(partition)],
            )
            .await?;
        match rows.first() {
            Some(row) => row.try_get(0).map_err(|e| pg_error(what, e)),
            None => Ok(None),
        }
    }

    async fn commit(&self, scope: &GroupScope, held: HeldLease<'_>, seq: i64) -> Result<()> {
        let (part, epoch) = (i64::from(held.partition), stored_epoch(held.epoch));
        let rows = self
            .query(
                "commit a group partition checkpoint",
                "UPDATE group_partitions SET seq = greatest(coalesce(seq, $6), $6) \
                 WHERE grp = $1 AND topic = $2 AND part = $3 AND owner = $4 AND epoch = $5 \
                 AND expires_at > clock_timestamp() RETURNING epoch",
                &[&scope.group, &scope.topic, &part, &held.owner, &epoch, &seq],
            )
            .await?;
        if rows.len() == 1 {
            Ok(())
        } else {
            Err(held.fenced(scope))
        }
    }

    async fn leases(&self, scope: &GroupScope) -> Result<Vec<PartitionLease>> {
        let what = "list group leases";
        let rows = self
            .query(
                what,
                "SELECT part, owner, epoch, expires_at > clock_timestamp(), seq \
                 FROM group_partitions WHERE grp = $1 AND topic = $2 ORDER BY part",
                &[&scope.group, &scope.topic],
            )
            .await?;
        rows.iter()
            .map(|row| {
                let owner: String = row.try_get(1)?;
                let unexpired: bool = row.try_get(3)?;
                Ok(PartitionLease {
                    partition: u32::try_from(row.try_get::<_, i64>(0)?).unwrap_or(u32::MAX),
                    live: !owner.is_empty() && unexpired,
                    owner,
                    epoch: epoch_of(row.try_get(2)?),
                    checkpoint: row.try_get(4)?,
                })
            })
            .collect::<std::result::Result<_, tokio_postgres::Error>>()
            .map_err(|e| pg_error(what, e))
    }
}
