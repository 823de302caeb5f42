//! Building blocks for the authors of storage ports, with no stability promise: they change
//! with the ports that use them, in any release. Applications use the rest of the crate.
//!
//! - [`wire`]: the stored form of a record (one encoding for every port).
//! - [`row`]: a stored row's fields, and a record built back from them.
//! - [`cursor`]: a polled read loop over pages of a store, woken by commits.
//! - [`wake`]: the per-topic commit signal a port's writer raises and its cursors wait on.
//! - [`shard`]: shard of a key, and seqs over several shards.
//! - [`group`]: the lease protocol's member, for ports whose groups run it.
//! - [`sql`]: the SQL port kit: the writer's protocol and a `StoragePort` over a SQL
//!   port's statements (the SQLite and PostgreSQL ports).

pub mod cursor;
pub mod row;
pub mod shard;
pub mod sql;
pub mod wake;
pub mod wire;

/// The lease protocol's member, as a port runs it (see [`crate::group`] for what it does).
pub mod group {
    pub use crate::group::member::{join, subscribe_group};
}
