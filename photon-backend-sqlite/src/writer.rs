//! The writer thread: owns the only write connection of a port and group-commits.
//!
//! It takes the first waiting command, drains whatever else is waiting (up to
//! `max_batch` events; a caller's batch counts its events and is never split, so one
//! larger than `max_batch` is a transaction of its own), runs them all in one
//! `BEGIN IMMEDIATE` transaction in arrival order, and answers each caller only after the
//! commit. Seqs are assigned inside that transaction,
//! under SQLite's write lock, so two processes writing one file never assign the same seq.
//! When a batch fails for a reason other than a busy lock, its commands are retried one
//! per transaction so that one bad command fails alone.

use std::collections::HashMap;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Instant;

use photon_core::raw::sql::Outcome;
use photon_core::Appended;
use rusqlite::{Connection, TransactionBehavior};

use crate::config::SqliteConfig;
use crate::error::{is_busy, LABEL};
use crate::row::PendingRow;
use crate::topic::{find_topic, provision_topic, store_last_seq, TopicRow};
use crate::transaction::TransactionWork;
use crate::{checkpoint, publish, retention};
use photon_core::raw::wake::CommitWakers;

/// A write for the writer thread: the kit's commands, and a caller's transaction (see
/// `transaction.rs`), which runs alone, never in a batch, and is answered by the work
/// itself.
pub(crate) type Command = photon_core::raw::sql::Command<(), TransactionWork>;

/// A topic touched by the running transaction.
struct TouchedTopic {
    row: TopicRow,
    appended: bool,
}

pub(crate) struct Writer {
    connection: Connection,
    config: SqliteConfig,
    heads: Arc<CommitWakers>,
    inbox: Receiver<Command>,
    /// Size of the previous batch: how many callers are likely to send again.
    last_batch: usize,
}

impl Writer {
    pub(crate) fn new(
        connection: Connection,
        config: SqliteConfig,
        heads: Arc<CommitWakers>,
        inbox: Receiver<Command>,
    ) -> Self {
        Self {
            connection,
            config,
            heads,
            inbox,
            last_batch: 1,
        }
    }

    /// Runs until every sender is dropped, then closes the connection.
    pub(crate) fn run(mut self) {
        let mut next_sweep = Instant::now() + self.config.retention_interval;
        loop {
            let first = if self.config.has_retention() {
                let wait = next_sweep.saturating_duration_since(Instant::now());
                match self.inbox.recv_timeout(wait) {
                    Ok(command) => Some(command),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            } else {
                match self.inbox.recv() {
                    Ok(command) => Some(command),
                    Err(_) => break,
                }
            };
            if let Some(first) = first {
                let batch = self.collect(first);
                self.last_batch = batch.len();
                self.execute_in_order(batch);
            }
            if self.config.has_retention() && Instant::now() >= next_sweep {
                retention::sweep(&mut self.connection, &self.config);
                next_sweep = Instant::now() + self.config.retention_interval;
            }
        }
        tracing::debug!(path = %self.config.path.display(), "sqlite writer stopped");
    }

    /// The batch started by `first`: whatever is waiting, and while the batch is smaller
    /// than the previous one, what arrives within `group_commit_wait`. Callers answered
    /// by the previous commit usually send again at once; waiting briefly for them makes
    /// one commit of many instead of many commits of one (each commit writes its pages to
    /// the WAL). A lone publisher (previous batch of one) never waits.
    ///
    /// `max_batch` caps the events of the batch (a caller's batch counts each of its
    /// events), not its commands; a caller's batch is never split, so the first command
    /// always goes in, however many events it holds.
    fn collect(&self, first: Command) -> Vec<Command> {
        let mut events = first.events();
        let mut batch = vec![first];
        let target = self.last_batch.min(self.config.max_batch);
        let deadline = Instant::now() + self.config.group_commit_wait;
        while events < self.config.max_batch {
            let next = match self.inbox.try_recv() {
                Ok(command) => command,
                Err(_) if batch.len() < target => {
                    let wait = deadline.saturating_duration_since(Instant::now());
                    match self.inbox.recv_timeout(wait) {
                        Ok(command) => command,
                        Err(_) => break,
                    }
                }
                Err(_) => break,
            };
            events += next.events();
            batch.push(next);
        }
        batch
    }

    /// Runs the commands in arrival order: each run of plain commands as one batch, each
    /// caller's transaction alone between them.
    fn execute_in_order(&mut self, batch: Vec<Command>) {
        let mut plain = Vec::with_capacity(batch.len());
        for command in batch {
            match command {
                Command::Own(work) => {
                    if !plain.is_empty() {
                        self.execute(std::mem::take(&mut plain));
                    }
                    work.run(&mut self.connection, &self.heads);
                }
                command => plain.push(command),
            }
        }
        if !plain.is_empty() {
            self.execute(plain);
        }
    }

    fn execute(&mut self, batch: Vec<Command>) {
        match apply(&mut self.connection, &batch) {
            Ok((outcomes, touched)) => {
                for (topic, state) in &touched {
                    if state.appended {
                        self.heads.committed(topic);
                    }
                }
                for (command, outcome) in batch.into_iter().zip(outcomes) {
                    command.answer(LABEL, outcome);
                }
            }
            Err(error) if batch.len() > 1 && !is_busy(&error) => {
                tracing::warn!(%error, commands = batch.len(), "sqlite batch failed; retrying its commands one by one");
                for command in batch {
                    self.execute(vec![command]);
                }
            }
            Err(error) => {
                let busy = is_busy(&error);
                let cause = error.to_string();
                for command in batch {
                    command.fail(LABEL, busy, &cause);
                }
            }
        }
    }
}

type Applied = (Vec<Outcome>, HashMap<String, TouchedTopic>);

/// Runs a batch in one transaction; nothing of it is stored unless this returns `Ok`.
fn apply(connection: &mut Connection, batch: &[Command]) -> rusqlite::Result<Applied> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut touched: HashMap<String, TouchedTopic> = HashMap::new();
    let mut outcomes = Vec::with_capacity(batch.len());
    for command in batch {
        let outcome = match command {
            Command::Append { row, .. } => {
                Outcome::Appended(append(&transaction, &mut touched, row)?)
            }
            Command::AppendBatch { rows, .. } => Outcome::AppendedBatch(
                rows.iter()
                    .map(|row| append(&transaction, &mut touched, row))
                    .collect::<rusqlite::Result<_>>()?,
            ),
            Command::Checkpoint { key, write, .. } => {
                checkpoint::apply(&transaction, key, *write)?;
                Outcome::Done
            }
            Command::Truncate {
                topic, before_seq, ..
            } => Outcome::Truncated(retention::delete_before(&transaction, topic, *before_seq)?),
            Command::TailSeq { topic, .. } => match touched.get(topic) {
                Some(state) => Outcome::Tail(state.row.last_seq),
                None => {
                    Outcome::Tail(find_topic(&transaction, topic)?.map_or(0, |row| row.last_seq))
                }
            },
            Command::DeclareDeadLetters { topic, .. } => {
                retention::declare_dead_letters(&transaction, topic)?;
                Outcome::Done
            }
            // Never batched: `execute_in_order` runs each alone.
            Command::Own(_) => Outcome::Done,
        };
        outcomes.push(outcome);
    }
    for state in touched.values().filter(|state| state.appended) {
        store_last_seq(&transaction, state.row)?;
    }
    transaction.commit()?;
    Ok((outcomes, touched))
}

/// Inserts one row with its topic's next seq, provisioning the topic on its first row in
/// the transaction.
fn append(
    transaction: &Connection,
    touched: &mut HashMap<String, TouchedTopic>,
    row: &PendingRow,
) -> rusqlite::Result<Appended> {
    let state = match touched.get_mut(&row.topic) {
        Some(state) => state,
        None => {
            let row_of_topic = provision_topic(transaction, &row.topic)?;
            touched.entry(row.topic.clone()).or_insert(TouchedTopic {
                row: row_of_topic,
                appended: false,
            })
        }
    };
    let (appended, inserted) = publish::insert(transaction, &mut state.row, row)?;
    state.appended |= inserted;
    Ok(appended)
}
