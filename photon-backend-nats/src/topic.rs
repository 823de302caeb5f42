//! Name mapping (Photon topic, key and subscription → NATS subjects and stream names) and
//! lazy provisioning of the streams.
//!
//! Layout, for prefix `P`, topic `T` and `N` shards:
//! - one stream per topic and shard, `P_<topic-token>_<shard>`, holding the subjects
//!   `photon.P.ev.<topic-token>.<shard>.<key-token>`. A stream per topic lets retention,
//!   limits and deletion be decided per topic, and a topic's traffic never slows another's.
//! - `<key-token>` is `n` for the unkeyed partition and `k<base64url(key)>` for a key, so a
//!   key subscription is a server-side `filter_subject`; any key (dots, `*`, `>`, spaces,
//!   any Unicode) becomes one subject token, and no key token equals the unkeyed one.
//! - `<topic-token>` keeps `[a-z0-9-]` and writes `.` as `_d` and `_` as `_u`: reversible, so
//!   `a.b`, `a-b` and `a_b` are three streams, and valid both in subjects and stream names.
//! - a key's shard is a stable FNV-1a hash of its bytes modulo `N`; unkeyed events go to
//!   shard 0.
//! - every topic stream records the layout it was created with in its description
//!   (`photon layout: shards=N`); a port configured with another shard count refuses the
//!   topic with a configuration error naming both counts, because its keys would land in
//!   other streams and its stored seqs would be read with another stride. (JetStream 2.9
//!   has no stream metadata; the description is stored and returned by every version.)
//!   Streams made before the layout was recorded have no description and are accepted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_nats::jetstream::{self, stream};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use photon_core::{CheckpointKey, PhotonError, Result};
use tokio::sync::OnceCell;

use crate::config::{NatsConfig, SHARDS_ENV};
use crate::error::{storage, unavailable};
use async_nats::jetstream::context::{CreateStreamError, CreateStreamErrorKind};
use async_nats::jetstream::ErrorCode;

/// Start of the description of every topic stream; the shard count follows.
const LAYOUT_MARK: &str = "photon layout: shards=";

/// Subject token of the unkeyed partition (key tokens all start with `k`).
const UNKEYED_TOKEN: &str = "n";

/// Maps Photon names onto subjects and stream names for one prefix and shard count.
#[derive(Debug, Clone)]
pub(crate) struct Names {
    prefix: String,
    shards: u32,
}

impl Names {
    pub(crate) fn new(prefix: &str, shards: u32) -> Self {
        Self {
            prefix: prefix.to_owned(),
            shards: shards.max(1),
        }
    }

    pub(crate) fn shards(&self) -> u32 {
        self.shards
    }

    /// The shard of a key: unkeyed events live in shard 0.
    pub(crate) fn shard_of(&self, key: Option<&str>) -> u32 {
        photon_core::raw::shard::shard_for_key(key, self.shards)
    }

    pub(crate) fn stream_name(&self, topic: &str, shard: u32) -> String {
        format!("{}_{}_{shard}", self.prefix, topic_token(topic))
    }

    /// Whether a stream name belongs to this prefix (topic streams and the checkpoint store).
    pub(crate) fn owns_stream(&self, stream: &str) -> bool {
        stream
            .strip_prefix(&self.prefix)
            .is_some_and(|rest| rest.starts_with('_'))
    }

    /// The shard of one of this prefix's topic streams.
    pub(crate) fn shard_of_stream(&self, stream: &str) -> Option<u32> {
        if !self.owns_stream(stream) {
            return None;
        }
        let (_, shard) = stream.rsplit_once('_')?;
        shard.parse().ok().filter(|s| *s < self.shards)
    }

    pub(crate) fn event_subject(&self, topic: &str, key: Option<&str>) -> String {
        format!(
            "photon.{}.ev.{}.{}.{}",
            self.prefix,
            topic_token(topic),
            self.shard_of(key),
            key_token(key)
        )
    }

    /// The subjects of one topic stream.
    pub(crate) fn stream_subjects(&self, topic: &str, shard: u32) -> String {
        format!("photon.{}.ev.{}.{shard}.*", self.prefix, topic_token(topic))
    }

    /// The topic and shard of one of this prefix's topic streams; `None` for its other
    /// streams (checkpoints, groups) and for other prefixes'.
    pub(crate) fn topic_of_stream(&self, stream: &str) -> Option<(String, u32)> {
        let rest = stream.strip_prefix(&self.prefix)?.strip_prefix('_')?;
        let (token, shard) = rest.rsplit_once('_')?;
        let shard = shard.parse().ok()?;
        Some((topic_of_token(token)?, shard))
    }

    /// The checkpoint key and shard of a checkpoint subject made by
    /// [`Names::checkpoint_subject`].
    pub(crate) fn checkpoint_of_subject(&self, subject: &str) -> Option<(CheckpointKey, u32)> {
        let rest = subject
            .strip_prefix("photon.")?
            .strip_prefix(&self.prefix)?
            .strip_prefix(".cp.")?;
        let mut parts = rest.split('.');
        let subscription = bytes_of_token(parts.next()?)?;
        let topic = topic_of_token(parts.next()?)?;
        let key = key_of_token(parts.next()?)?;
        let shard = parts.next()?.parse().ok()?;
        if parts.next().is_some() {
            return None;
        }
        Some((
            CheckpointKey::new(subscription, topic, key.as_deref()),
            shard,
        ))
    }

    pub(crate) fn checkpoint_stream(&self) -> String {
        format!("{}_checkpoints", self.prefix)
    }

    pub(crate) fn checkpoint_subjects(&self) -> String {
        format!("photon.{}.cp.>", self.prefix)
    }

    /// One subject per checkpoint and shard.
    pub(crate) fn checkpoint_subject(&self, key: &CheckpointKey, shard: u32) -> String {
        format!(
            "photon.{}.cp.{}.{}.{}.{shard}",
            self.prefix,
            bytes_token(key.subscription.as_bytes()),
            topic_token(&key.topic),
            key_token(key.key.as_deref())
        )
    }
}

/// The reversible subject-token form of a topic name.
pub(crate) fn topic_token(topic: &str) -> String {
    let mut token = String::with_capacity(topic.len() + 4);
    for c in topic.chars() {
        match c {
            '.' => token.push_str("_d"),
            '_' => token.push_str("_u"),
            other => token.push(other),
        }
    }
    token
}

/// The topic name of a subject token made by [`topic_token`]; `None` for a token it
/// cannot have made.
pub(crate) fn topic_of_token(token: &str) -> Option<String> {
    let mut topic = String::with_capacity(token.len());
    let mut chars = token.chars();
    while let Some(c) = chars.next() {
        match c {
            '_' => match chars.next()? {
                'd' => topic.push('.'),
                'u' => topic.push('_'),
                _ => return None,
            },
            other => topic.push(other),
        }
    }
    photon_core::validate_topic_name(&topic).ok()?;
    Some(topic)
}

/// The partition key of a key token made by [`key_token`]: `Some(None)` for the unkeyed
/// partition, `None` for a token it cannot have made.
pub(crate) fn key_of_token(token: &str) -> Option<Option<String>> {
    if token == UNKEYED_TOKEN {
        return Some(None);
    }
    bytes_of_token(token).map(Some)
}

/// The text of a token made by `bytes_token`.
pub(crate) fn bytes_of_token(token: &str) -> Option<String> {
    let bytes = URL_SAFE_NO_PAD.decode(token.strip_prefix('k')?).ok()?;
    String::from_utf8(bytes).ok()
}

/// The subject token of a partition key.
pub(crate) fn key_token(key: Option<&str>) -> String {
    key.map_or_else(
        || UNKEYED_TOKEN.to_owned(),
        |key| bytes_token(key.as_bytes()),
    )
}

fn bytes_token(bytes: &[u8]) -> String {
    format!("k{}", URL_SAFE_NO_PAD.encode(bytes))
}

/// Topic streams, created on first use and cached by name.
#[derive(Debug)]
pub(crate) struct Streams {
    context: jetstream::Context,
    template: stream::Config,
    /// Shard count of this port's layout, recorded in and checked against every topic stream.
    shards: u32,
    /// The template of dead-letter topics: without age and size limits unless the
    /// configuration applies them to dead letters too.
    dead_letter_template: stream::Config,
    cache: Mutex<HashMap<String, Arc<OnceCell<Arc<stream::Stream>>>>>,
}

impl Streams {
    pub(crate) fn new(context: jetstream::Context, config: &NatsConfig) -> Self {
        Self {
            context,
            template: crate::retention::stream_template(config),
            shards: config.shards.max(1),
            dead_letter_template: crate::retention::dead_letter_template(config),
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The stream of a topic shard, created if missing.
    ///
    /// # Errors
    /// [`photon_core::PhotonError::Unavailable`] when the server does not answer,
    /// [`photon_core::PhotonError::Storage`] when it refuses the stream,
    /// [`photon_core::PhotonError::Config`] when the topic was created with another shard
    /// count.
    pub(crate) async fn topic_stream(
        &self,
        names: &Names,
        topic: &str,
        shard: u32,
    ) -> Result<Arc<stream::Stream>> {
        let template = if photon_core::is_dead_letter_topic(topic) {
            &self.dead_letter_template
        } else {
            &self.template
        };
        self.shard_stream(names, topic, shard, template).await
    }

    /// Makes every shard stream of `topic` keep its messages as dead-letter streams do:
    /// a missing one is created from the dead-letter template, an existing one loses the
    /// age and size limits the template does not have.
    ///
    /// # Errors
    /// As [`Streams::topic_stream`]; [`photon_core::PhotonError::Unavailable`] when the
    /// server does not take the new limits.
    pub(crate) async fn keep_dead_letters(&self, names: &Names, topic: &str) -> Result<()> {
        let kept = &self.dead_letter_template;
        for shard in 0..self.shards {
            let stream = self.shard_stream(names, topic, shard, kept).await?;
            let current = &stream.cached_info().config;
            if current.max_age == kept.max_age && current.max_bytes == kept.max_bytes {
                continue;
            }
            let config = stream::Config {
                max_age: kept.max_age,
                max_bytes: kept.max_bytes,
                ..current.clone()
            };
            self.context.update_stream(config).await.map_err(|err| {
                unavailable(
                    format!("cannot lift the retention limits of dead-letter topic {topic:?}"),
                    err,
                )
            })?;
        }
        Ok(())
    }

    /// The stream of a topic shard, created from `template` if missing.
    async fn shard_stream(
        &self,
        names: &Names,
        topic: &str,
        shard: u32,
        template: &stream::Config,
    ) -> Result<Arc<stream::Stream>> {
        let create = |shard: u32| stream::Config {
            subjects: vec![names.stream_subjects(topic, shard)],
            description: Some(format!("{LAYOUT_MARK}{}", self.shards)),
            ..template.clone()
        };
        // Shard 0 exists in every layout: checking it first refuses a changed shard count
        // before a stream of the new layout is created or anything is published.
        if shard != 0 {
            let first = self
                .ensure(names.stream_name(topic, 0), || create(0))
                .await?;
            self.check_layout(&first)?;
        }
        let stream = self
            .ensure(names.stream_name(topic, shard), || create(shard))
            .await?;
        self.check_layout(&stream)?;
        Ok(stream)
    }

    /// Refuses a topic stream created with another shard count than this port's.
    fn check_layout(&self, stream: &stream::Stream) -> Result<()> {
        let info = stream.cached_info();
        let Some(stored) = info
            .config
            .description
            .as_deref()
            .and_then(|text| text.strip_prefix(LAYOUT_MARK))
        else {
            return Ok(());
        };
        if stored == self.shards.to_string() {
            return Ok(());
        }
        Err(PhotonError::config(
            SHARDS_ENV,
            self.shards.to_string(),
            format!(
                "{stored}, the shard count stream {} was created with (another count would \
                 move keys to other streams and misread stored seqs)",
                info.config.name
            ),
        ))
    }

    /// A stream with the given name, created from `config` (name filled in) if missing.
    /// The handle is cached: only the first call per stream asks the server.
    pub(crate) async fn ensure(
        &self,
        name: String,
        config: impl FnOnce() -> stream::Config,
    ) -> Result<Arc<stream::Stream>> {
        let cell = {
            let mut cache = self
                .cache
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            cache.entry(name.clone()).or_default().clone()
        };
        if let Some(stream) = cell.get() {
            return Ok(stream.clone());
        }
        let stream = cell
            .get_or_try_init(|| async {
                let config = stream::Config {
                    name: name.clone(),
                    ..config()
                };
                let subjects = config.subjects.clone();
                match self.context.get_or_create_stream(config).await {
                    Ok(stream) => Ok(Arc::new(stream)),
                    Err(err) if is_subject_overlap(&err) => {
                        self.created_concurrently(&name, &subjects, err).await
                    }
                    Err(err) => Err(create_error(&name, err)),
                }
            })
            .await?;
        Ok(stream.clone())
    }

    /// The stream another client created between this one's lookup and its create: JetStream
    /// checks the name and then the subjects, so of two creates of one new stream, the second
    /// can be refused for overlapping the first. Taken only when the stream of that name now
    /// exists with exactly these subjects; a stream of another name claiming them is the
    /// refusal it says it is.
    async fn created_concurrently(
        &self,
        name: &str,
        subjects: &[String],
        refusal: CreateStreamError,
    ) -> Result<Arc<stream::Stream>> {
        match self.context.get_stream(name).await {
            Ok(stream) if stream.cached_info().config.subjects == subjects => {
                tracing::debug!(
                    stream = name,
                    "stream created concurrently by another client"
                );
                Ok(Arc::new(stream))
            }
            _ => Err(create_error(name, refusal)),
        }
    }

    /// A handle on an existing stream, `None` when it does not exist.
    ///
    /// # Errors
    /// [`photon_core::PhotonError::Unavailable`] when the server does not answer,
    /// [`photon_core::PhotonError::Config`] when the stream has another layout.
    pub(crate) async fn existing(&self, name: &str) -> Result<Option<Arc<stream::Stream>>> {
        let cached = {
            let cache = self
                .cache
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            cache.get(name).and_then(|cell| cell.get().cloned())
        };
        if let Some(stream) = cached {
            self.check_layout(&stream)?;
            return Ok(Some(stream));
        }
        match self.context.get_stream(name).await {
            Ok(stream) => {
                self.check_layout(&stream)?;
                Ok(Some(Arc::new(stream)))
            }
            Err(err)
                if matches!(
                    err.kind(),
                    jetstream::context::GetStreamErrorKind::JetStream(js)
                        if js.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND
                ) =>
            {
                Ok(None)
            }
            Err(err) => Err(unavailable(format!("cannot look up stream {name}"), err)),
        }
    }

    /// Forgets a cached stream (after the server said it does not exist).
    pub(crate) fn forget(&self, name: &str) {
        self.cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(name);
    }

    pub(crate) fn context(&self) -> &jetstream::Context {
        &self.context
    }
}

/// Whether the server refused a new stream because its subjects overlap another stream's.
fn is_subject_overlap(err: &CreateStreamError) -> bool {
    matches!(err.kind(), CreateStreamErrorKind::JetStream(refusal)
        if refusal.error_code() == ErrorCode::STREAM_SUBJECT_OVERLAP)
}

/// The error of a stream that could not be opened: the server's refusal (asking again gets
/// the same answer) is a storage error, anything else a retryable one.
fn create_error(name: &str, err: CreateStreamError) -> PhotonError {
    let message = format!("cannot open stream {name}");
    if matches!(err.kind(), CreateStreamErrorKind::JetStream(_)) {
        storage(message, err)
    } else {
        unavailable(message, err)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn topic_tokens_are_distinct_and_subject_safe() {
        let topics = ["a.b", "a-b", "a_b", "a_db", "a._b", "a_.b", "a__b", "a..b"];
        let tokens: HashSet<String> = topics.iter().map(|t| topic_token(t)).collect();
        assert_eq!(tokens.len(), topics.len());
        for token in &tokens {
            assert!(
                token
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
                "{token}"
            );
        }
    }

    #[test]
    fn stream_names_and_checkpoint_subjects_map_back() {
        let names = Names::new("photon", 4);
        for topic in ["a.b", "a-b", "a_b", "a_db", "orders.dlq", "x1"] {
            for shard in [0, 3] {
                let stream = names.stream_name(topic, shard);
                assert_eq!(
                    names.topic_of_stream(&stream),
                    Some((topic.to_owned(), shard))
                );
            }
            for key in [None, Some("k.1"), Some("東京"), Some("")] {
                let checkpoint = CheckpointKey::new("billing.v2", topic, key);
                let subject = names.checkpoint_subject(&checkpoint, 2);
                assert_eq!(names.checkpoint_of_subject(&subject), Some((checkpoint, 2)));
            }
        }
        assert_eq!(names.topic_of_stream(&names.checkpoint_stream()), None);
        assert_eq!(names.topic_of_stream("photon_groups"), None);
        assert_eq!(names.topic_of_stream("photon_x_oa_0"), None);
        assert_eq!(
            Names::new("photon_x", 1).topic_of_stream("photon_orders_0"),
            None
        );
    }

    #[test]
    fn key_tokens_are_single_tokens_without_collisions() {
        let keys = [
            "k3",
            "a.b",
            "*",
            ">",
            "with space",
            "東京",
            "n",
            "",
            "a.b.c",
        ];
        let mut tokens: HashSet<String> = keys.iter().map(|k| key_token(Some(k))).collect();
        assert_eq!(tokens.len(), keys.len());
        assert!(
            tokens.insert(key_token(None)),
            "unkeyed token collides with a key"
        );
        for token in &tokens {
            assert!(!token.contains(['.', '*', '>', ' ']), "{token}");
        }
        let long = "é".repeat(128);
        assert!(key_token(Some(&long)).len() < 400);
    }

    #[test]
    fn subjects_and_streams() {
        let names = Names::new("pfx", 4);
        let shard = names.shard_of(Some("a.b"));
        assert_eq!(
            names.event_subject("x.y", Some("a.b")),
            format!("photon.pfx.ev.x_dy.{shard}.kYS5i")
        );
        assert_eq!(names.event_subject("x.y", None), "photon.pfx.ev.x_dy.0.n");
        assert_eq!(names.stream_name("x.y", 3), "pfx_x_dy_3");
        assert_eq!(names.stream_subjects("x.y", 3), "photon.pfx.ev.x_dy.3.*");
        assert_eq!(names.shard_of_stream("pfx_x_dy_3"), Some(3));
        assert_eq!(names.shard_of_stream("other_x_dy_3"), None);
        assert_eq!(names.shard_of_stream("pfx_x_dy_9"), None);
    }

    #[test]
    fn shards_are_stable_and_spread() {
        let names = Names::new("p", 4);
        let used: HashSet<u32> = (0..64)
            .map(|i| names.shard_of(Some(&format!("key{i}"))))
            .collect();
        assert_eq!(used.len(), 4);
        assert_eq!(Names::new("p", 1).shard_of(Some("anything")), 0);
    }
}
