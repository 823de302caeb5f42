//! The SQL port kit: what the SQLite and PostgreSQL ports share, written once.
//!
//! A SQL port stores a topic's records as rows with dense per-topic seqs, commits writes
//! through a writer that group-commits [`Command`]s, and reads in pages. The port
//! implements [`SqlPort`] (its connections and statements), [`SqlQueries`] (reads by id,
//! by topic, newest first, a head), [`SqlCatalog`] (listings) and [`SqlPages`] (a
//! subscription's page reads); the kit's
//! [`StoragePort`](crate::StoragePort) implementation does the rest: encoding drafts,
//! asking the writer and waiting for its commit, subscriptions that read pages and wake on
//! commits, checkpoint writes, truncation, capabilities and consumer groups.
//!
//! - [`command`]: the writer's protocol: commands, what each produced, answers and
//!   failures.
//! - [`port`]: the traits a SQL port implements, and the `StoragePort` over them.
//! - [`gap`]: where a cursor ran into records deleted before it read them.
//! - [`error`]: the errors every SQL writer reports the same way.

pub mod command;
pub mod error;
pub mod gap;
pub mod port;
mod subscription;

pub use command::{Command, Outcome, Reply, Write};
pub use port::{ask, SqlCatalog, SqlPages, SqlPort, SqlQueries, SqlSettings};
