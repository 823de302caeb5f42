//! A writer task: group-commits the writes of one lane of the port (see `lanes.rs`): one
//! topic's appends, truncations and tail reads, or the checkpoint writes.
//!
//! It takes the first waiting command, drains whatever else is waiting (up to
//! `max_batch` events; a caller's batch counts its events and is never split, so one
//! larger than `max_batch` is a transaction of its own), and, when the previous batch had
//! several callers, waits up to 500 µs for them to send again; it runs the batch in one
//! transaction in arrival order, and answers each caller only after the commit; commands
//! arriving during a commit join the next batch.
//! The transaction locks the rows of the topics it appends to (in name order), assigns
//! seqs from them, stores the new last seqs and sends one `NOTIFY` per topic, which
//! PostgreSQL delivers on commit. The checkpoint lane's transactions lock checkpoint rows
//! only (in key order), and topic lanes never lock a checkpoint row: no writer transaction
//! holds both kinds of lock.
//!
//! A batch that fails for a transient reason (a deadlock with another process, a lost
//! connection, an event id stored meanwhile by another process) is run again, a few
//! times; one that outlasted the session's `lock_timeout` is not (its callers get the
//! retryable error at once, instead of waiting for the same lock again); one that fails
//! otherwise is split into single commands so that one bad command fails alone.
//!
//! A lane meets a barrier ([`Message::After`]) where a caller's batch across several
//! topics was queued on another topic's lane: once it committed what came before, it says
//! so (the batch runs only when every lane of its topics did) and waits until the batch is
//! answered, so that the batch is ordered with each of its topics' other writes (a tail
//! read, above all) as if it ran on each lane. A lane idle for [`IDLE`] leaves the port's
//! set of lanes and stops; the next command for it starts a new one.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Weak};
use std::time::Duration;

use deadpool_postgres::{Pool, Transaction};
use photon_core::raw::sql::error::shared_failure;
use photon_core::raw::sql::Outcome;
use photon_core::Appended;
use tokio::sync::mpsc;

use crate::error::{BatchError, LABEL};
use crate::lanes::{lock, Across, Barrier, LaneKey, Senders};
use crate::row::PendingRow;
use crate::topic::{last_seq, lock_topics, store_last_seqs, TopicRow};
use crate::{checkpoint, publish, retention};
use photon_core::raw::wake::CommitWakers;

/// Attempts of one batch before its callers get the error.
const ATTEMPTS: u32 = 4;
/// Pause before the second attempt; doubled for each later one.
const FIRST_PAUSE: Duration = Duration::from_millis(20);

/// Longest time a lane spends finding out whether a commit that lost its connection was
/// applied, before it answers that it cannot tell.
const SETTLE_WAIT: Duration = Duration::from_secs(10);
/// Longest wait for the callers of the previous commit to send again (see
/// [`Writer::gather`]): small beside a commit, which waits for the server's WAL flush.
const GROUP_COMMIT_WAIT: Duration = Duration::from_micros(500);
/// How long a lane waits for a command before it stops.
const IDLE: Duration = Duration::from_secs(60);

/// What a lane's queue holds.
#[derive(Debug)]
pub(crate) enum Message {
    /// A write to run.
    Command(Command),
    /// A barrier where a batch across topics that runs on another lane stands in this
    /// lane's order.
    After(Barrier),
}

/// A write (or a read that must be ordered with writes) for a writer task; a caller's
/// batch across topics carries its barriers on the lanes of its other topics.
pub(crate) type Command = photon_core::raw::sql::Command<Option<Across>>;

/// Whether this is a batch across topics, which ends the lane's batch it joins: the lane
/// waits for the batch's other lanes before running it, and those may wait for an earlier
/// batch across topics of this lane, which must have been answered.
fn is_across(command: &Command) -> bool {
    matches!(
        command,
        Command::AppendBatch {
            across: Some(_),
            ..
        }
    )
}

/// Outcomes in command order, and the topics appended to.
type Applied = (Vec<Outcome>, Vec<String>);

/// The writer task of one lane.
pub(crate) struct Writer {
    pub(crate) pool: Pool,
    pub(crate) heads: Arc<CommitWakers>,
    pub(crate) inbox: mpsc::UnboundedReceiver<Message>,
    pub(crate) max_batch: usize,
    /// The `NOTIFY` channel of the schema.
    pub(crate) channel: String,
    /// Which lane this is.
    pub(crate) key: LaneKey,
    /// The port's lanes, to leave when idle (weak: the port owns them).
    pub(crate) lanes: Weak<Senders>,
    /// A barrier met while draining: passed before the next batch.
    pub(crate) held: Option<Barrier>,
}

impl Writer {
    /// Runs until every sender is dropped, or until the lane was idle for [`IDLE`].
    pub(crate) async fn run(mut self) {
        let mut last_batch = 1;
        loop {
            if let Some(barrier) = self.held.take() {
                barrier.pass().await;
            }
            let Some(first) = self.next().await else {
                break;
            };
            let mut events = first.events();
            let mut batch = vec![first];
            self.drain(&mut batch, &mut events);
            if last_batch > 1 && self.held.is_none() {
                self.gather(&mut batch, &mut events, last_batch).await;
            }
            last_batch = batch.len();
            // Checkpoint rows are locked in key order, the same in every process (a
            // stable sort: the writes of one key keep their order).
            batch.sort_by(|a, b| a.checkpoint().cmp(&b.checkpoint()));
            for command in &mut batch {
                if let Command::AppendBatch {
                    across: Some(across),
                    ..
                } = command
                {
                    across.ready().await;
                }
            }
            self.execute(batch).await;
        }
        tracing::debug!(lane = ?self.key, "postgres writer lane stopped");
    }

    /// The next command, past any barrier; `None` when the port is gone or the lane was
    /// idle long enough to stop.
    async fn next(&mut self) -> Option<Command> {
        loop {
            let message = match tokio::time::timeout(IDLE, self.inbox.recv()).await {
                Ok(Some(message)) => message,
                Ok(None) => return None,
                Err(_) => self.retire()?,
            };
            match message {
                Message::Command(command) => return Some(command),
                Message::After(barrier) => barrier.pass().await,
            }
        }
    }

    /// Leaves the port's lanes unless a message arrived meanwhile (which it returns).
    /// Senders send under the lanes' lock, so none can slip in between the check and
    /// the removal.
    fn retire(&mut self) -> Option<Message> {
        let lanes = self.lanes.upgrade();
        let mut senders = lanes.as_deref().map(lock);
        match self.inbox.try_recv() {
            Ok(message) => Some(message),
            Err(_) => {
                if let Some(senders) = senders.as_mut() {
                    senders.remove(&self.key);
                }
                None
            }
        }
    }

    /// Adds whatever is waiting to `batch` while it holds fewer than `max_batch` events
    /// (`events` counts them; a caller's batch is never split), up to a barrier or a batch
    /// across topics.
    fn drain(&mut self, batch: &mut Vec<Command>, events: &mut usize) {
        while *events < self.max_batch && self.held.is_none() && !ends(batch) {
            match self.inbox.try_recv() {
                Ok(Message::Command(command)) => {
                    *events += command.events();
                    batch.push(command);
                }
                Ok(Message::After(barrier)) => self.held = Some(barrier),
                Err(_) => break,
            }
        }
    }

    /// Waits up to [`GROUP_COMMIT_WAIT`] for the callers the previous commit answered
    /// (`answered` of them): they usually send again at once, and without the wait they
    /// would form a batch of their own behind the commands that queued during that commit,
    /// two half-size commits each paying the WAL flush. A lone caller (a previous batch of
    /// one) never waits.
    async fn gather(&mut self, batch: &mut Vec<Command>, events: &mut usize, answered: usize) {
        let target = (batch.len() + answered).min(self.max_batch);
        let deadline = tokio::time::Instant::now() + GROUP_COMMIT_WAIT;
        while batch.len() < target
            && *events < self.max_batch
            && self.held.is_none()
            && !ends(batch)
        {
            match tokio::time::timeout_at(deadline, self.inbox.recv()).await {
                Ok(Some(Message::Command(command))) => {
                    *events += command.events();
                    batch.push(command);
                    self.drain(batch, events);
                }
                Ok(Some(Message::After(barrier))) => self.held = Some(barrier),
                Ok(None) | Err(_) => break,
            }
        }
    }

    async fn execute(&self, batch: Vec<Command>) {
        match self.attempt(&batch).await {
            Ok(applied) => self.answer(batch, applied),
            Err(error @ BatchError::Unknown(_)) => self.settle(batch, &error).await,
            Err(error) if batch.len() > 1 && !error.is_transient() => {
                tracing::warn!(%error, commands = batch.len(), "postgres batch failed; retrying its commands one by one");
                for command in batch {
                    let single = vec![command];
                    match self.attempt(&single).await {
                        Ok(applied) => self.answer(single, applied),
                        Err(error) => fail_all(single, &error),
                    }
                }
            }
            Err(error) => fail_all(batch, &error),
        }
    }

    /// Runs the batch, again after a transient failure other than a lock timeout, up to
    /// [`ATTEMPTS`] times.
    async fn attempt(&self, batch: &[Command]) -> std::result::Result<Applied, BatchError> {
        let mut pause = FIRST_PAUSE;
        let mut attempt = 1;
        // Whether an earlier attempt's commit may have been applied: running the batch
        // again then finds its events by id, and failing for good must not say "none stored".
        let mut unknown = false;
        loop {
            match apply(&self.pool, &self.channel, batch).await {
                Err(error) if error.retry_here() && attempt < ATTEMPTS => {
                    tracing::debug!(%error, attempt, "postgres batch failed; trying again");
                    unknown |= matches!(error, BatchError::Unknown(_));
                    tokio::time::sleep(pause).await;
                    pause *= 2;
                    attempt += 1;
                }
                Err(error) if unknown && !matches!(error, BatchError::Unknown(_)) => {
                    return Err(BatchError::Unknown(Box::new(error)))
                }
                result => return result,
            }
        }
    }

    /// Answers a batch whose commit may have been applied although every attempt failed:
    /// looks its appends up by event id (each command's events are stored all or none, in
    /// one transaction) until the server answers or [`SETTLE_WAIT`] has passed. Stored
    /// appends are answered with their seqs, the others fail; when the lookup cannot be
    /// made, every command fails saying that its events may be stored.
    async fn settle(&self, batch: Vec<Command>, error: &BatchError) {
        let ids: Vec<&str> = batch
            .iter()
            .flat_map(Command::rows)
            .map(|row| row.event_id.as_str())
            .collect();
        let found = match self.look_up(&ids).await {
            Ok(found) => found,
            Err(lookup) => {
                let cause = format!("{error}; looking the events up failed too ({lookup})");
                for command in batch {
                    fail_unsettled(command, &cause);
                }
                return;
            }
        };
        let cause = error.to_string();
        let seq_of = |row: &PendingRow| {
            found.get(&row.event_id).map(|&seq| Appended {
                event_id: row.event_id.clone(),
                seq,
            })
        };
        for command in batch {
            match command {
                Command::Append { row, reply } => match seq_of(&row) {
                    Some(appended) => {
                        self.heads.committed(&row.topic);
                        let _ = reply.send(Ok(appended));
                    }
                    None => Command::Append { row, reply }.fail(LABEL, true, &cause),
                },
                Command::AppendBatch {
                    rows,
                    reply,
                    across,
                } => match rows.iter().map(seq_of).collect::<Option<Vec<_>>>() {
                    Some(appended) => {
                        for row in &rows {
                            self.heads.committed(&row.topic);
                        }
                        let _ = reply.send(Ok(appended));
                    }
                    None => Command::AppendBatch {
                        rows,
                        reply,
                        across,
                    }
                    .fail(LABEL, true, &cause),
                },
                // Checkpoint writes and truncations are idempotent: the caller runs them
                // again; a head read is a read.
                other => other.fail(LABEL, true, &cause),
            }
        }
    }

    /// The stored seqs of `ids`, asking until the server answers or [`SETTLE_WAIT`] passed.
    async fn look_up(&self, ids: &[&str]) -> std::result::Result<HashMap<String, i64>, BatchError> {
        let deadline = tokio::time::Instant::now() + SETTLE_WAIT;
        let mut pause = FIRST_PAUSE;
        loop {
            let error = match self.pool.get().await {
                Ok(client) => match client
                    .query(
                        "SELECT event_id, seq FROM events WHERE event_id = ANY($1)",
                        &[&ids],
                    )
                    .await
                {
                    Ok(rows) => {
                        return rows
                            .iter()
                            .map(|row| -> std::result::Result<(String, i64), BatchError> {
                                Ok((row.try_get(0)?, row.try_get(1)?))
                            })
                            .collect()
                    }
                    Err(error) => BatchError::Db(error),
                },
                Err(error) => BatchError::Pool(error),
            };
            if !error.is_transient() || tokio::time::Instant::now() + pause > deadline {
                return Err(error);
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(1));
        }
    }

    fn answer(&self, batch: Vec<Command>, (outcomes, appended): Applied) {
        for topic in &appended {
            self.heads.committed(topic);
        }
        for (command, outcome) in batch.into_iter().zip(outcomes) {
            command.answer(LABEL, outcome);
        }
    }
}

/// Whether `batch` must take no more commands (it ends with a batch across topics).
fn ends(batch: &[Command]) -> bool {
    batch.last().is_some_and(is_across)
}

/// Runs a batch in one transaction; nothing of it is stored unless this returns `Ok`.
async fn apply(
    pool: &Pool,
    channel: &str,
    batch: &[Command],
) -> std::result::Result<Applied, BatchError> {
    let mut client = pool.get().await.map_err(BatchError::Pool)?;
    let transaction = client.transaction().await?;
    let names: BTreeSet<&str> = batch
        .iter()
        .flat_map(Command::rows)
        .map(|row| row.topic.as_str())
        .collect();
    let mut topics = if names.is_empty() {
        HashMap::new()
    } else {
        lock_topics(&transaction, &names).await?
    };
    let before: HashMap<String, i64> = topics
        .iter()
        .map(|(name, row)| (name.clone(), row.last_seq))
        .collect();
    let mut outcomes = Vec::with_capacity(batch.len());
    let mut run = Run::default();
    for command in batch {
        let outcome = match command {
            Command::Append { row, .. } => {
                run.rows.push(row);
                run.shapes.push(None);
                continue;
            }
            Command::AppendBatch { rows, .. } => {
                run.rows.extend(rows);
                run.shapes.push(Some(rows.len()));
                continue;
            }
            Command::Checkpoint { key, write, .. } => {
                insert_run(&transaction, &mut topics, &mut run, &mut outcomes).await?;
                checkpoint::apply(&transaction, key, *write).await?;
                Outcome::Done
            }
            Command::Truncate {
                topic, before_seq, ..
            } => {
                insert_run(&transaction, &mut topics, &mut run, &mut outcomes).await?;
                Outcome::Truncated(
                    retention::delete_before(&transaction, topic, *before_seq).await?,
                )
            }
            Command::TailSeq { topic, .. } => {
                insert_run(&transaction, &mut topics, &mut run, &mut outcomes).await?;
                Outcome::Tail(match topics.get(topic) {
                    Some(row) => row.last_seq,
                    None => last_seq(&transaction, topic).await?,
                })
            }
            Command::DeclareDeadLetters { topic, .. } => {
                insert_run(&transaction, &mut topics, &mut run, &mut outcomes).await?;
                transaction
                    .execute(retention::MARK_DEAD_LETTERS, &[topic])
                    .await?;
                Outcome::Done
            }
            Command::Own(never) => match *never {},
        };
        outcomes.push(outcome);
    }
    insert_run(&transaction, &mut topics, &mut run, &mut outcomes).await?;
    let advanced: Vec<(&String, TopicRow)> = topics
        .iter()
        .filter(|(name, row)| before.get(*name) != Some(&row.last_seq))
        .map(|(name, row)| (name, *row))
        .collect();
    let appended: Vec<String> = advanced.iter().map(|(name, _)| (*name).clone()).collect();
    if !advanced.is_empty() {
        let rows: Vec<TopicRow> = advanced.iter().map(|(_, row)| *row).collect();
        store_last_seqs(&transaction, &rows).await?;
        let notify = transaction
            .prepare_cached("SELECT pg_notify($1, name) FROM unnest($2::text[]) AS name")
            .await?;
        transaction.execute(&notify, &[&channel, &appended]).await?;
    }
    transaction.commit().await.map_err(|error| {
        // No answer from the server: the commit may have been applied.
        if error.code().is_none() {
            BatchError::Unknown(Box::new(BatchError::Db(error)))
        } else {
            BatchError::Db(error)
        }
    })?;
    Ok((outcomes, appended))
}

/// Appends consecutive in the batch, inserted together: their rows, and per command
/// `None` for a single append or `Some(n)` for a caller's batch of `n` rows.
#[derive(Default)]
struct Run<'a> {
    rows: Vec<&'a PendingRow>,
    shapes: Vec<Option<usize>>,
}

/// Inserts the appends gathered so far and empties `run`.
async fn insert_run(
    transaction: &Transaction<'_>,
    topics: &mut HashMap<String, TopicRow>,
    run: &mut Run<'_>,
    outcomes: &mut Vec<Outcome>,
) -> std::result::Result<(), BatchError> {
    if run.rows.is_empty() && run.shapes.is_empty() {
        return Ok(());
    }
    let mut appended = publish::insert_rows(transaction, topics, &run.rows)
        .await?
        .into_iter()
        .map(|(appended, _)| appended);
    for shape in run.shapes.drain(..) {
        outcomes.push(match shape {
            // `insert_rows` answers every row; were one missing, `Done` would not match
            // the append and `answer` would fail it rather than shift later outcomes.
            None => appended.next().map_or(Outcome::Done, Outcome::Appended),
            Some(rows) => Outcome::AppendedBatch(appended.by_ref().take(rows).collect()),
        });
    }
    run.rows.clear();
    Ok(())
}

fn fail_all(batch: Vec<Command>, error: &BatchError) {
    let transient = error.is_transient();
    let cause = error.to_string();
    for command in batch {
        command.fail(LABEL, transient, &cause);
    }
}

/// Fails a command whose events may or may not be stored.
fn fail_unsettled(command: Command, cause: &str) {
    let error = |what: String| shared_failure(LABEL, &what, true, cause);
    match command {
        Command::Append { reply, row } => {
            let _ = reply.send(Err(error(format!(
                "tell whether the append to topic {:?} (event {}) is stored",
                row.topic, row.event_id
            ))));
        }
        Command::AppendBatch { reply, rows, .. } => {
            let _ = reply.send(Err(error(format!(
                "tell whether a batch of {} events (first event {}) is stored: all or none are",
                rows.len(),
                rows.first().map_or("", |row| row.event_id.as_str())
            ))));
        }
        other => other.fail(LABEL, true, cause),
    }
}
