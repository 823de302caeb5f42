//! [`Photon::admin_snapshot`]: topics, handlers, checkpoints, lag, consumer groups and dead
//! letters, as one serializable value.

use std::collections::BTreeSet;

use photon_core::{Result, StoragePort};
use serde::{Deserialize, Serialize};

use crate::group::GroupStatus;
use crate::photon::Photon;

/// Records counted per page when counting dead letters.
const PAGE: usize = 1000;

/// The state of a `Photon` instance and its executors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminSnapshot {
    /// Label of the storage port (`"mem"`, `"sqlite"`, ...).
    pub port: String,
    /// Declared topics and the topics handlers consume, by name.
    pub topics: Vec<TopicSnapshot>,
    /// Every handler of every executor started on this instance.
    pub handlers: Vec<HandlerSnapshot>,
    /// Stored dead letters per topic.
    pub dead_letters: Vec<DeadLetterCount>,
    /// Every consumer group this instance takes part in (group handlers of its executors
    /// and groups joined with [`Photon::group`]), sorted by group and topic: the live
    /// members of every process, and per partition its owner, epoch, checkpoint and
    /// distance to the head. Empty on backends whose groups do not run the lease protocol.
    pub groups: Vec<GroupStatus>,
}

/// One topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicSnapshot {
    /// Topic name.
    pub name: String,
    /// Field giving the key, when declared with `#[topic(keyed_by = ...)]`.
    pub keyed_by: Option<String>,
    /// Rust type of the declaration, `None` for undeclared topics.
    pub type_name: Option<String>,
    /// Highest stored seq; `None` when empty or when the port cannot tell.
    pub head_seq: Option<i64>,
}

/// One handler's subscription.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandlerSnapshot {
    /// Handler name.
    pub name: String,
    /// Durable subscription name.
    pub durable: String,
    /// Topic.
    pub topic: String,
    /// Key filter.
    pub key: Option<String>,
    /// The consumer group the handler is a member of; its position is the group's, per
    /// partition, in [`AdminSnapshot::groups`] (`checkpoint` and `lag` are then `None`).
    pub group: Option<String>,
    /// Committed checkpoint.
    pub checkpoint: Option<i64>,
    /// `head_seq - checkpoint` (a missing checkpoint counts as 0); `None` when the port has
    /// no `head_seq` capability. On ports with gaps in seq it is an upper bound.
    pub lag: Option<i64>,
    /// Events handled by this process.
    pub handled: u64,
    /// Retries made by this process.
    pub retries: u64,
    /// Dead letters stored by this process.
    pub dead_lettered: u64,
    /// Stream errors (events that could not be opened) seen by this process.
    pub stream_errors: u64,
    /// Group handlers: events read by this process whose partition moved to another member
    /// before they started, given back unhandled (the partition's new owner handles them).
    #[serde(default)]
    pub given_back: u64,
    /// Events read and not yet acknowledgeable.
    pub outstanding: usize,
    /// Whether the subscription still runs.
    pub running: bool,
}

/// Dead letters of one topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadLetterCount {
    /// The original topic.
    pub topic: String,
    /// Its dead-letter topic.
    pub dead_letter_topic: String,
    /// Stored dead letters; `None` when the port cannot list topics.
    pub count: Option<u64>,
}

impl Photon {
    /// Topics, handlers with checkpoint and lag, consumer groups, and dead-letter counts.
    ///
    /// # Errors
    /// The port's storage errors while reading checkpoints, heads and dead letters.
    ///
    /// # Examples
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let photon = photon_runtime::Photon::builder().build()?;
    /// let executor = photon
    ///     .executor()
    ///     .handler("billing", "orders", |_event: photon_runtime::Event| async {})
    ///     .start()?;
    /// photon.publish("orders", None, serde_json::json!(null), serde_json::json!(1)).await?;
    /// executor.wait_idle().await?;
    /// let snapshot = photon.admin_snapshot().await?;
    /// assert_eq!(snapshot.handlers[0].handled, 1);
    /// assert_eq!(snapshot.topics[0].head_seq, Some(1));
    /// let json = serde_json::to_string(&snapshot).unwrap(); // e.g. for an HTTP admin route
    /// # let _ = json;
    /// # Ok::<_, photon_runtime::PhotonError>(())
    /// # }).unwrap();
    /// ```
    pub async fn admin_snapshot(&self) -> Result<AdminSnapshot> {
        let port = self.store().port().clone();
        let mut handlers = Vec::new();
        let mut handler_topics = BTreeSet::new();
        let mut group_names: BTreeSet<(String, String)> =
            self.joined_groups().into_iter().collect();
        for executor in self.executors() {
            for running in executor.running() {
                let options = &running.options;
                handler_topics.insert(options.topic().to_owned());
                let (checkpoint, lag) = match options.group_name() {
                    Some(group) => {
                        group_names.insert((group.to_owned(), options.topic().to_owned()));
                        (None, None)
                    }
                    None => {
                        let checkpoint = self
                            .checkpoint(options.durable(), options.topic(), options.topic_key())
                            .await?;
                        let head =
                            head_seq(port.as_ref(), options.topic(), options.topic_key()).await?;
                        let lag =
                            head.map(|head| (head.unwrap_or(0) - checkpoint.unwrap_or(0)).max(0));
                        if let Some(head) = head {
                            let metrics = running.stats.metrics();
                            metrics.lag(head.unwrap_or(0), checkpoint.unwrap_or(0));
                        }
                        (checkpoint, lag)
                    }
                };
                handlers.push(HandlerSnapshot {
                    name: options.handler_name().to_owned(),
                    durable: options.durable().to_owned(),
                    topic: options.topic().to_owned(),
                    key: options.topic_key().map(str::to_owned),
                    group: options.group_name().map(str::to_owned),
                    checkpoint,
                    lag,
                    handled: running.stats.handled(),
                    retries: running.stats.retries(),
                    dead_lettered: running.stats.dead_lettered(),
                    stream_errors: running.stats.stream_errors(),
                    given_back: running.stats.given_back(),
                    outstanding: running.progress.outstanding(),
                    running: !running.stats.is_stopped(),
                });
            }
        }
        let mut topics = Vec::new();
        let mut names = handler_topics;
        names.extend(self.registry().iter().map(|d| d.name.to_owned()));
        let mut dead_letters = Vec::new();
        for name in names {
            let declared = self.registry().get(&name);
            topics.push(TopicSnapshot {
                keyed_by: declared.and_then(|d| d.keyed_by).map(str::to_owned),
                type_name: declared.map(|d| d.type_name.to_owned()),
                head_seq: head_seq(port.as_ref(), &name, None).await?.flatten(),
                name: name.clone(),
            });
            let dead_letter_topic = self.executor_config().dead_letter_topic(&name);
            dead_letters.push(DeadLetterCount {
                count: count_records(port.as_ref(), &dead_letter_topic).await?,
                topic: name,
                dead_letter_topic,
            });
        }
        let mut groups = Vec::new();
        if let Some(coordination) = port.group_coordination() {
            for (group, topic) in group_names {
                groups.push(
                    crate::group::status(coordination.as_ref(), port.as_ref(), &group, &topic)
                        .await?,
                );
            }
        }
        Ok(AdminSnapshot {
            port: port.label().to_owned(),
            topics,
            handlers,
            dead_letters,
            groups,
        })
    }
}

/// `Some(head)` when the port can tell, `None` without the capability.
async fn head_seq(
    port: &dyn StoragePort,
    topic: &str,
    key: Option<&str>,
) -> Result<Option<Option<i64>>> {
    if !port.capabilities().head_seq {
        return Ok(None);
    }
    port.head_seq(topic, key).await.map(Some)
}

async fn count_records(port: &dyn StoragePort, topic: &str) -> Result<Option<u64>> {
    if !port.capabilities().list {
        return Ok(None);
    }
    let mut count = 0u64;
    let mut after = 0;
    loop {
        let page = port.list_by_topic(topic, after, PAGE).await?;
        count += page.len() as u64;
        match page.last() {
            Some(last) if page.len() == PAGE => after = last.seq,
            _ => return Ok(Some(count)),
        }
    }
}
