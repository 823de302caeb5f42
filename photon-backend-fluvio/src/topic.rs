//! Fluvio topic names for Photon topics, and their provisioning.
//!
//! Fluvio names allow `[a-z0-9-]`, at most 63 characters, no leading or trailing `-`.
//! Photon topics (`[a-z0-9._-]`, up to 128 characters) map to:
//!
//! - `{prefix}-{topic}` with one shard, `{prefix}-s-{shard}-{topic}` with several;
//! - where `{topic}` is the Photon name itself when that is lossless: only `[a-z0-9-]`, no
//!   `--`, no trailing `-`, short enough, and not starting with `s-` or `checkpoints`
//!   (reserved for shard and checkpoint topics);
//! - otherwise a readable stem (`.` and `_` become `-`, truncated) followed by `--` and the
//!   16 hex digits of the FNV-1a hash of the full Photon name. Lossless names never contain
//!   `--`, so the two forms never meet, and `a.b`, `a-b`, `a_b` are three Fluvio topics.
//!
//! The exact Photon topic also travels in every record and is checked on read.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use fluvio::metadata::topic::TopicSpec;
use fluvio::{Fluvio, TopicProducerPool};
use photon_core::{PhotonError, Result};
use tokio::sync::OnceCell;

use crate::config::FluvioConfig;
use crate::error::{answered, unavailable};
use crate::retention::cleanup_policy;
use crate::stream_shard::fnv1a;

/// Longest Fluvio topic name.
pub(crate) const MAX_FLUVIO_NAME: usize = 63;

/// Longest accepted prefix: leaves room for the shard part, a stem and the hash.
pub(crate) const MAX_PREFIX_LEN: usize = 20;

/// How long a newly created topic may stay invisible to producers and consumers.
pub(crate) const PROVISION_WAIT: Duration = Duration::from_secs(30);

/// Whether `name` is a valid Fluvio topic name.
pub(crate) fn is_fluvio_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_FLUVIO_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// Whether `prefix` can start Fluvio names without making them ambiguous.
pub(crate) fn is_valid_prefix(prefix: &str) -> bool {
    prefix.len() <= MAX_PREFIX_LEN && is_fluvio_name(prefix) && !prefix.contains("--")
}

/// Appends the stem of `text` to `out`: `.`/`_` become `-`, runs of `-` collapse, at most
/// `max` characters, no leading or trailing `-`.
fn push_stem(out: &mut String, text: &str, max: usize) {
    let start = out.len();
    for c in text.chars() {
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() {
            c
        } else {
            '-'
        };
        if c == '-' && (out.len() == start || out.ends_with('-')) {
            continue;
        }
        if out.len() - start == max {
            break;
        }
        out.push(c);
    }
    while out.len() > start && out.ends_with('-') {
        out.pop();
    }
}

/// Appends a collision-free Fluvio name part for `text` to `out`, in `budget` characters.
fn push_name_part(out: &mut String, text: &str, budget: usize) {
    let lossless = is_fluvio_name(text)
        && !text.contains("--")
        && !text.starts_with("s-")
        && !text.starts_with("checkpoints")
        && text.len() <= budget;
    if lossless {
        out.push_str(text);
        return;
    }
    let start = out.len();
    push_stem(out, text, budget.saturating_sub(HASH_DIGITS + 2));
    if out.len() == start {
        out.push('x');
    }
    // Writing to a String cannot fail.
    let _ = write!(out, "--{:016x}", fnv1a(text.as_bytes()));
}

/// Hex digits of the hash that makes a lossy name part unique.
const HASH_DIGITS: usize = 16;

/// The Fluvio topic holding `shard` of the Photon `topic`.
///
/// Built in one buffer: it is computed on every publish.
pub fn fluvio_topic_name(prefix: &str, topic: &str, shard: u32, shards: u32) -> String {
    let mut name = String::with_capacity(MAX_FLUVIO_NAME);
    name.push_str(prefix);
    name.push('-');
    if shards > 1 {
        let _ = write!(name, "s-{shard}-");
    }
    let budget = MAX_FLUVIO_NAME - name.len();
    push_name_part(&mut name, topic, budget);
    name
}

/// The Fluvio topic of checkpoint commits: `{prefix}-checkpoints`.
pub fn checkpoints_topic_name(prefix: &str) -> String {
    format!("{prefix}-checkpoints")
}

/// The Fluvio topic of checkpoint snapshots: `{prefix}-checkpoints-snapshot`.
pub fn snapshot_topic_name(prefix: &str) -> String {
    format!("{prefix}-checkpoints-snapshot")
}

/// The Fluvio topic of the consumer groups' coordination log:
/// `{prefix}-checkpoints-groups` (no Photon topic maps to a name starting with
/// `{prefix}-checkpoints`).
pub fn groups_topic_name(prefix: &str) -> String {
    format!("{prefix}-checkpoints-groups")
}

/// The Fluvio topic of the snapshots of the coordination log:
/// `{prefix}-checkpoints-groups-snapshot`.
pub fn groups_snapshot_topic_name(prefix: &str) -> String {
    format!("{prefix}-checkpoints-groups-snapshot")
}

/// Build a Fluvio-safe durable consumer id for a keyed subscription.
///
/// The id is `d-{stem}--{hash}`: a readable stem of the subscription name and the FNV-1a
/// hash of subscription, topic and key, so that each checkpoint has its own Fluvio
/// consumer offset. Only `[a-z0-9-]`, at most 63 characters.
///
/// ```
/// use photon_backend_fluvio::durable_consumer_name;
/// let id = durable_consumer_name("billing", "orders.created", Some("eu"));
/// assert!(id.starts_with("d-billing--"));
/// assert_ne!(id, durable_consumer_name("billing", "orders.created", None));
/// ```
pub fn durable_consumer_name(subscription: &str, topic: &str, key: Option<&str>) -> String {
    let identity = format!("{subscription}\u{0}{topic}\u{0}{}", key.unwrap_or("\u{1}"));
    hashed_id("d", subscription, &identity)
}

/// Stable group id alias (NATS deliver-subject analogue).
///
/// One id per `(group, topic)`: `g-{stem}--{hash}`, Fluvio-safe like
/// [`durable_consumer_name`], for naming a group's objects in Fluvio tools (the port's
/// groups are coordinated by group and topic name, see `group.rs`).
///
/// ```
/// use photon_backend_fluvio::consumer_group_for;
/// assert_eq!(consumer_group_for("mailers", "orders"), consumer_group_for("mailers", "orders"));
/// assert_ne!(consumer_group_for("mailers", "orders"), consumer_group_for("mailers", "users"));
/// ```
pub fn consumer_group_for(group: &str, topic: &str) -> String {
    let identity = format!("{group}\u{0}{topic}");
    hashed_id("g", group, &identity)
}

/// `{tag}-{stem of readable}--{hash of identity}`, at most [`MAX_FLUVIO_NAME`] characters.
fn hashed_id(tag: &str, readable: &str, identity: &str) -> String {
    let mut id = String::with_capacity(MAX_FLUVIO_NAME);
    id.push_str(tag);
    id.push('-');
    let max = MAX_FLUVIO_NAME - id.len() - HASH_DIGITS - 2;
    push_stem(&mut id, readable, max);
    let _ = write!(id, "--{:016x}", fnv1a(identity.as_bytes()));
    id
}

/// An open producer, and the client it was opened with (the one to replace when it fails).
pub(crate) struct OpenProducer {
    pub(crate) producer: TopicProducerPool,
    pub(crate) client: Arc<Fluvio>,
}

/// Topics this port has made sure exist, and the producers opened on them.
#[derive(Default)]
pub(crate) struct Topics {
    /// Open producers by Fluvio topic. Every append looks here: one read lock, one clone.
    ready: RwLock<HashMap<String, Arc<OpenProducer>>>,
    /// Producers being opened, so that concurrent first appends open only one.
    opening: Mutex<HashMap<String, Arc<OnceCell<Arc<OpenProducer>>>>>,
}

impl Topics {
    /// The open producer of a Fluvio topic, if there is one.
    pub(crate) fn cached(&self, name: &str) -> Option<Arc<OpenProducer>> {
        // Only a map lookup and a clone happen under this lock.
        self.ready
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
    }

    /// The producer of a Fluvio topic, creating the topic first when it is missing;
    /// `client` is asked for only then.
    ///
    /// # Errors
    /// [`PhotonError::Unavailable`] when the cluster cannot create or show the topic.
    pub(crate) async fn producer(
        &self,
        client: impl FnOnce() -> Arc<Fluvio>,
        config: &FluvioConfig,
        name: &str,
    ) -> Result<Arc<OpenProducer>> {
        // Only map lookups and inserts happen under these locks.
        if let Some(open) = self
            .ready
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
        {
            return Ok(open.clone());
        }
        let cell = self
            .opening
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(name.to_owned())
            .or_default()
            .clone();
        let client = client();
        let open = cell
            .get_or_try_init(|| async {
                ensure_topic(&client, config, name).await?;
                let producer = crate::publish::open_producer(&client, config, name).await?;
                Ok::<_, PhotonError>(Arc::new(OpenProducer {
                    producer,
                    client: client.clone(),
                }))
            })
            .await?
            .clone();
        let mut opening = self.opening.lock().unwrap_or_else(|p| p.into_inner());
        // Cached only while still wanted: a `forget` or `clear` meanwhile drops the cell.
        if opening
            .get(name)
            .is_some_and(|current| Arc::ptr_eq(current, &cell))
        {
            opening.remove(name);
            self.ready
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .insert(name.to_owned(), open.clone());
        }
        Ok(open)
    }

    /// Drops every producer (after a reconnect): the next use opens a fresh one, as a
    /// producer whose connection broke does not always recover by itself.
    pub(crate) fn clear(&self) {
        let mut opening = self.opening.lock().unwrap_or_else(|p| p.into_inner());
        opening.clear();
        self.ready
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    /// Drops the producer of one topic (see [`Topics::clear`]).
    pub(crate) fn forget(&self, name: &str) {
        let mut opening = self.opening.lock().unwrap_or_else(|p| p.into_inner());
        opening.remove(name);
        self.ready
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(name);
    }
}

/// Creates a topic (one partition, the configured replicas and retention) unless it exists;
/// returns whether it was missing (so that nothing in it predates this call).
///
/// # Errors
/// [`PhotonError::Unavailable`] when the cluster refuses or cannot be reached.
///
/// Boxed: it runs once per topic, and so keeps the futures of its many callers small.
pub(crate) fn ensure_topic<'a>(
    fluvio: &'a Fluvio,
    config: &'a FluvioConfig,
    name: &'a str,
) -> futures::future::BoxFuture<'a, Result<bool>> {
    Box::pin(ensure_topic_now(fluvio, config, name))
}

async fn ensure_topic_now(fluvio: &Fluvio, config: &FluvioConfig, name: &str) -> Result<bool> {
    let admin = fluvio.admin().await;
    let exists = |listed: Vec<fluvio::metadata::objects::Metadata<TopicSpec>>| {
        listed.iter().any(|topic| topic.name == name)
    };
    let list = || async {
        answered(
            || format!("listing topic {name}"),
            admin.list::<TopicSpec, String>(vec![name.to_owned()]),
        )
        .await?
        .map_err(|e| unavailable(format!("cannot list topic {name}"), e))
    };
    if exists(list().await?) {
        return Ok(false);
    }
    let mut spec = TopicSpec::new_computed(1, config.replicas, None);
    spec.set_cleanup_policy(cleanup_policy(config.retention_max_age));
    let created = answered(
        || format!("creating topic {name}"),
        admin.create(name.to_owned(), false, spec),
    )
    .await?;
    // Another port may have created it in the meantime.
    if let Err(create) = created {
        if !exists(list().await?) {
            return Err(unavailable(format!("cannot create topic {name}"), create));
        }
    }
    Ok(true)
}

/// Retries `open` while the topic is still being provisioned (`TopicNotFound`).
///
/// # Errors
/// The last error once [`PROVISION_WAIT`] has passed, or any other error at once.
pub(crate) async fn retry_not_found<T, F, Fut>(name: &str, mut open: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<T>>,
{
    let deadline = tokio::time::Instant::now() + PROVISION_WAIT;
    loop {
        // Boxed: a heap allocation is nothing beside the round trip, and unboxed the
        // bound's future nested too deep in the catalog's for the compiler.
        match answered(|| format!("opening topic {name}"), Box::pin(open())).await? {
            Ok(value) => return Ok(value),
            Err(err) if is_not_found(&err) && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(err) => return Err(unavailable(format!("cannot open topic {name}"), err)),
        }
    }
}

/// Whether a client error is one a topic shows while it is still being provisioned: not
/// found yet, or its partition without a leader yet.
pub(crate) fn is_settling(err: &anyhow::Error) -> bool {
    is_not_found(err) || crate::error::is_leaderless(&err.to_string())
}

/// Whether a client error says the topic does not exist (yet).
pub(crate) fn is_not_found(err: &anyhow::Error) -> bool {
    matches!(
        err.downcast_ref::<fluvio::FluvioError>(),
        Some(fluvio::FluvioError::TopicNotFound(_))
    ) || err.to_string().contains("not found")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_stay_the_ones_existing_clusters_hold() {
        // Topics and consumer offsets already stored on clusters carry these names.
        let pinned = [
            (
                fluvio_topic_name("photon", "bench.publish0", 0, 1),
                "photon-bench-publish0--a26306ce3823c978",
            ),
            (
                fluvio_topic_name("photon", "orders.created_v2", 3, 4),
                "photon-s-3-orders-created-v2--d7747d3074bccd33",
            ),
            (
                fluvio_topic_name("photon", "._.", 0, 1),
                "photon-x--f8e5bc17ed2f328c",
            ),
            (
                fluvio_topic_name("photon", &format!("{}.b", "a".repeat(100)), 0, 1),
                "photon-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa--b985016300b524f5",
            ),
            (
                durable_consumer_name("billing", "orders.created", Some("eu")),
                "d-billing--b502a2a39f4d10ff",
            ),
            (
                consumer_group_for("Mailers.EU", "orders"),
                "g-ailers--70f988964b460f63",
            ),
        ];
        for (name, expected) in pinned {
            assert_eq!(name, expected);
        }
    }

    #[test]
    fn plain_names_stay_readable() {
        assert_eq!(fluvio_topic_name("photon", "orders", 0, 1), "photon-orders");
        assert_eq!(
            fluvio_topic_name("photon", "orders-eu", 3, 4),
            "photon-s-3-orders-eu"
        );
        assert_eq!(checkpoints_topic_name("photon"), "photon-checkpoints");
        assert_eq!(groups_topic_name("photon"), "photon-checkpoints-groups");
    }

    #[test]
    fn lossy_names_never_collide() {
        let names: Vec<String> = ["a.b", "a-b", "a_b", "a--b", "a-b-", "a..b"]
            .iter()
            .map(|t| fluvio_topic_name("photon", t, 0, 1))
            .collect();
        let unique: std::collections::BTreeSet<&String> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        for name in &names {
            assert!(is_fluvio_name(name), "{name}");
        }
        assert_eq!(names[1], "photon-a-b");
        assert!(names[0].starts_with("photon-a-b--"), "{}", names[0]);
    }

    #[test]
    fn reserved_shapes_are_hashed() {
        assert_ne!(
            fluvio_topic_name("photon", "checkpoints", 0, 1),
            checkpoints_topic_name("photon")
        );
        assert_ne!(
            fluvio_topic_name("photon", "checkpoints-groups", 0, 1),
            groups_topic_name("photon")
        );
        // An unsharded `s-1-x` must not land on shard 1 of `x`.
        assert_ne!(
            fluvio_topic_name("photon", "s-1-x", 0, 1),
            fluvio_topic_name("photon", "x", 1, 2)
        );
    }

    #[test]
    fn long_names_fit_and_stay_distinct() {
        let long_a = format!("{}a", "x".repeat(127));
        let long_b = format!("{}b", "x".repeat(127));
        for shards in [1, 256] {
            let a = fluvio_topic_name("abcdefghijklmnopqrst", &long_a, shards - 1, shards);
            let b = fluvio_topic_name("abcdefghijklmnopqrst", &long_b, shards - 1, shards);
            assert!(is_fluvio_name(&a) && is_fluvio_name(&b), "{a} {b}");
            assert_ne!(a, b);
        }
    }

    #[test]
    fn prefixes_are_checked() {
        assert!(is_valid_prefix("photon"));
        for bad in ["", "-p", "p-", "a--b", "Photon", "p.x", &"p".repeat(21)] {
            assert!(!is_valid_prefix(bad), "{bad}");
        }
    }

    #[test]
    fn consumer_ids_are_fluvio_safe_and_distinct() {
        let a = durable_consumer_name("Sub.ü", &"t".repeat(128), Some("k"));
        let b = durable_consumer_name("Sub.ü", &"t".repeat(128), Some("k2"));
        assert!(is_fluvio_name(&a), "{a}");
        assert_ne!(a, b);
        let g = consumer_group_for(&"G".repeat(100), "t");
        assert!(is_fluvio_name(&g), "{g}");
    }
}
