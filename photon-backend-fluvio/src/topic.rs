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
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fluvio::metadata::topic::TopicSpec;
use fluvio::{Fluvio, TopicProducerPool};
use photon_core::{PhotonError, Result};
use tokio::sync::OnceCell;

use crate::config::FluvioConfig;
use crate::retention::cleanup_policy;
use crate::stream_shard::fnv1a;

/// Longest Fluvio topic name.
pub(crate) const MAX_FLUVIO_NAME: usize = 63;

/// Longest accepted prefix: leaves room for the shard part, a stem and the hash.
pub(crate) const MAX_PREFIX_LEN: usize = 20;

const LABEL: &str = "fluvio";

/// How long a newly created topic may stay invisible to producers and consumers.
const PROVISION_WAIT: Duration = Duration::from_secs(30);

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

/// `.`/`_` become `-`, runs of `-` collapse, cut to `max` characters, no trailing `-`.
fn stem(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max));
    for c in text.chars() {
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() {
            c
        } else {
            '-'
        };
        if c == '-' && (out.is_empty() || out.ends_with('-')) {
            continue;
        }
        if out.len() == max {
            break;
        }
        out.push(c);
    }
    while out.ends_with('-') {
        out.pop();
    }
    out
}

/// A collision-free Fluvio name part for `text`, fitting in `budget` characters.
fn name_part(text: &str, budget: usize) -> String {
    let lossless = is_fluvio_name(text)
        && !text.contains("--")
        && !text.starts_with("s-")
        && !text.starts_with("checkpoints")
        && text.len() <= budget;
    if lossless {
        return text.to_owned();
    }
    let hash = format!("{:016x}", fnv1a(text.as_bytes()));
    let stem = stem(text, budget.saturating_sub(hash.len() + 2));
    if stem.is_empty() {
        format!("x--{hash}")
    } else {
        format!("{stem}--{hash}")
    }
}

/// The Fluvio topic holding `shard` of the Photon `topic`.
pub fn fluvio_topic_name(prefix: &str, topic: &str, shard: u32, shards: u32) -> String {
    let head = if shards > 1 {
        format!("{prefix}-s-{shard}-")
    } else {
        format!("{prefix}-")
    };
    let part = name_part(topic, MAX_FLUVIO_NAME - head.len());
    format!("{head}{part}")
}

/// The Fluvio topic of checkpoint commits: `{prefix}-checkpoints`.
pub fn checkpoints_topic_name(prefix: &str) -> String {
    format!("{prefix}-checkpoints")
}

/// The Fluvio topic of checkpoint snapshots: `{prefix}-checkpoints-snapshot`.
pub fn snapshot_topic_name(prefix: &str) -> String {
    format!("{prefix}-checkpoints-snapshot")
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
    let hash = format!("{:016x}", fnv1a(identity.as_bytes()));
    let stem = stem(subscription, MAX_FLUVIO_NAME - 2 - hash.len() - 2);
    format!("d-{stem}--{hash}")
}

/// Stable group id alias (NATS deliver-subject analogue).
///
/// One id per `(group, topic)`: `g-{stem}--{hash}`, Fluvio-safe like
/// [`durable_consumer_name`]. The port names its in-process group dispatcher with it.
///
/// ```
/// use photon_backend_fluvio::consumer_group_for;
/// assert_eq!(consumer_group_for("mailers", "orders"), consumer_group_for("mailers", "orders"));
/// assert_ne!(consumer_group_for("mailers", "orders"), consumer_group_for("mailers", "users"));
/// ```
pub fn consumer_group_for(group: &str, topic: &str) -> String {
    let identity = format!("{group}\u{0}{topic}");
    let hash = format!("{:016x}", fnv1a(identity.as_bytes()));
    let stem = stem(group, MAX_FLUVIO_NAME - 2 - hash.len() - 2);
    format!("g-{stem}--{hash}")
}

/// Topics this port has made sure exist, and the producers opened on them.
#[derive(Default)]
pub(crate) struct Topics {
    ready: Mutex<HashMap<String, Arc<OnceCell<TopicProducerPool>>>>,
}

impl Topics {
    /// The producer of a Fluvio topic, creating the topic first when it is missing.
    ///
    /// # Errors
    /// [`PhotonError::Unavailable`] when the cluster cannot create or show the topic.
    pub(crate) async fn producer(
        &self,
        fluvio: &Fluvio,
        config: &FluvioConfig,
        name: &str,
    ) -> Result<TopicProducerPool> {
        let cell = {
            // Only map lookups happen under this lock.
            let mut ready = self.ready.lock().unwrap_or_else(|p| p.into_inner());
            match ready.get(name) {
                Some(cell) => cell.clone(),
                None => ready.entry(name.to_owned()).or_default().clone(),
            }
        };
        if let Some(producer) = cell.get() {
            return Ok(producer.clone());
        }
        let producer = cell
            .get_or_try_init(|| async {
                ensure_topic(fluvio, config, name).await?;
                crate::publish::open_producer(fluvio, config, name).await
            })
            .await?;
        Ok(producer.clone())
    }

    /// Drops every producer (after a reconnect): the next use opens a fresh one, as a
    /// producer whose connection broke does not always recover by itself.
    pub(crate) fn clear(&self) {
        self.ready.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// Drops the producer of one topic (see [`Topics::clear`]).
    pub(crate) fn forget(&self, name: &str) {
        let mut ready = self.ready.lock().unwrap_or_else(|p| p.into_inner());
        ready.remove(name);
    }
}

/// Creates a topic (one partition, the configured replicas and retention) unless it exists;
/// returns whether it was missing (so that nothing in it predates this call).
///
/// # Errors
/// [`PhotonError::Unavailable`] when the cluster refuses or cannot be reached.
pub(crate) async fn ensure_topic(
    fluvio: &Fluvio,
    config: &FluvioConfig,
    name: &str,
) -> Result<bool> {
    let admin = fluvio.admin().await;
    let exists = |listed: Vec<fluvio::metadata::objects::Metadata<TopicSpec>>| {
        listed.iter().any(|topic| topic.name == name)
    };
    let listed = admin
        .list::<TopicSpec, String>(vec![name.to_owned()])
        .await
        .map_err(|e| unavailable(format!("cannot list topic {name}"), e))?;
    if exists(listed) {
        return Ok(false);
    }
    let mut spec = TopicSpec::new_computed(1, config.replicas, None);
    spec.set_cleanup_policy(cleanup_policy(config.retention));
    if let Err(create) = admin.create(name.to_owned(), false, spec).await {
        // Another port may have created it in the meantime.
        let listed = admin
            .list::<TopicSpec, String>(vec![name.to_owned()])
            .await
            .map_err(|e| unavailable(format!("cannot list topic {name}"), e))?;
        if !exists(listed) {
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
        match open().await {
            Ok(value) => return Ok(value),
            Err(err) if is_not_found(&err) && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(err) => return Err(unavailable(format!("cannot open topic {name}"), err)),
        }
    }
}

/// Whether a client error says the topic does not exist (yet).
pub(crate) fn is_not_found(err: &anyhow::Error) -> bool {
    matches!(
        err.downcast_ref::<fluvio::FluvioError>(),
        Some(fluvio::FluvioError::TopicNotFound(_))
    ) || err.to_string().contains("not found")
}

/// A retryable error with the client's error as source.
pub(crate) fn unavailable(message: String, err: impl std::fmt::Display) -> PhotonError {
    PhotonError::Unavailable {
        backend: LABEL,
        message: format!("{message}: {err}"),
        source: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_stay_readable() {
        assert_eq!(fluvio_topic_name("photon", "orders", 0, 1), "photon-orders");
        assert_eq!(
            fluvio_topic_name("photon", "orders-eu", 3, 4),
            "photon-s-3-orders-eu"
        );
        assert_eq!(checkpoints_topic_name("photon"), "photon-checkpoints");
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
