//! The layout of every Photon topic, stored on the cluster, so that a port configured
//! differently refuses a topic instead of misreading it.
//!
//! A seq names an offset only under one layout: `(offset + 1) × shards + shard`, in the
//! Fluvio topics the prefix and shard count name. A port with another shard count reads a
//! stored checkpoint of 1000 taken with one shard as offset 249 of its shard 0; a prefix
//! that ends like a shard part (`a-s-0` unsharded against `a` with shards) maps to the same
//! Fluvio topics as another layout.
//!
//! So the first port to use a Photon topic records `{prefix, topic, shards}` in the
//! cluster-wide topic [`LAYOUTS_TOPIC`] (a name no data or checkpoint topic can have: no
//! prefix contains `--`, and no name part starts with `-`). Before a port appends to,
//! subscribes to, or loads or commits a checkpoint of a topic for the first time, it
//! reads the records it has not seen yet and refuses with [`PhotonError::Config`] naming
//! both values when the topic is recorded with another shard count, or one of its Fluvio
//! topics belongs to another recorded layout. The oldest record wins; two ports starting
//! the same new topic with different layouts at the same moment can both record theirs,
//! and the one whose record came second is refused from its next start on.
//!
//! Topics created before layouts were recorded are adopted by the first port that uses
//! them.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};

use fluvio::{Fluvio, RecordKey};
use photon_core::{PhotonError, Result};
use serde::{Deserialize, Serialize};

use crate::config::FluvioConfig;
use crate::error::{answered, unavailable};
use crate::query::{end_offset, read_range};
use crate::topic::{ensure_topic, fluvio_topic_name, is_settling, Topics, PROVISION_WAIT};

/// The cluster-wide topic of layout records.
pub const LAYOUTS_TOPIC: &str = "photon--layouts";

/// One recorded layout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Layout {
    prefix: String,
    topic: String,
    shards: u32,
}

impl Layout {
    fn fluvio_topics(&self) -> impl Iterator<Item = String> + '_ {
        (0..self.shards)
            .map(|shard| fluvio_topic_name(&self.prefix, &self.topic, shard, self.shards))
    }
}

#[derive(Debug, Default)]
struct Known {
    /// `(prefix, topic)` → the oldest recorded layout.
    by_topic: HashMap<(String, String), Layout>,
    /// Fluvio topic → the oldest recorded layout holding it.
    by_fluvio: HashMap<String, Layout>,
    read_through: i64,
}

impl Known {
    fn add(&mut self, layout: Layout) {
        for name in layout.fluvio_topics() {
            self.by_fluvio.entry(name).or_insert_with(|| layout.clone());
        }
        self.by_topic
            .entry((layout.prefix.clone(), layout.topic.clone()))
            .or_insert(layout);
    }

    /// `Ok(true)` when `ours` is recorded, `Ok(false)` when nothing conflicts but it is not
    /// recorded yet.
    fn check(&self, ours: &Layout) -> Result<bool> {
        if let Some(stored) = self
            .by_topic
            .get(&(ours.prefix.clone(), ours.topic.clone()))
        {
            if stored.shards != ours.shards {
                return Err(PhotonError::config(
                    "shards",
                    ours.shards.to_string(),
                    format!(
                        "{} as topic {:?} (prefix {:?}) was created with: its stored seqs and checkpoints only mean something with that shard count",
                        stored.shards, ours.topic, ours.prefix
                    ),
                ));
            }
        }
        for name in ours.fluvio_topics() {
            if let Some(stored) = self.by_fluvio.get(&name) {
                if stored != ours {
                    return Err(PhotonError::config(
                        "prefix",
                        ours.prefix.clone(),
                        format!(
                            "a layout not sharing Fluvio topic {name:?}: it holds topic {:?} with prefix {:?} and {} shard(s), this port would read it as topic {:?} with prefix {:?} and {} shard(s)",
                            stored.topic, stored.prefix, stored.shards, ours.topic, ours.prefix, ours.shards
                        ),
                    ));
                }
            }
        }
        Ok(self
            .by_topic
            .contains_key(&(ours.prefix.clone(), ours.topic.clone())))
    }
}

/// The layouts one port has checked.
#[derive(Debug, Default)]
pub(crate) struct Layouts {
    /// Photon topics already checked: every later use is one lookup.
    checked: RwLock<HashSet<String>>,
    /// Only map operations happen under this lock.
    known: Mutex<Known>,
    /// Serializes reads and writes of the layout topic.
    updating: tokio::sync::Mutex<bool>,
}

impl Layouts {
    /// Whether `topic` was checked already (then [`Layouts::check`] returns at once).
    pub(crate) fn is_checked(&self, topic: &str) -> bool {
        self.checked
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains(topic)
    }

    /// Checks (once per topic) that `topic` is stored in this port's layout, recording it
    /// when it is new.
    ///
    /// # Errors
    /// [`PhotonError::Config`] naming both layouts on a mismatch;
    /// [`PhotonError::Unavailable`] when the layout topic cannot be read or written.
    pub(crate) async fn check(
        &self,
        fluvio: &Arc<Fluvio>,
        config: &FluvioConfig,
        topics: &Topics,
        topic: &str,
    ) -> Result<()> {
        if self
            .checked
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains(topic)
        {
            return Ok(());
        }
        let ours = Layout {
            prefix: config.prefix.clone(),
            topic: topic.to_owned(),
            shards: config.shards,
        };
        let mut created = self.updating.lock().await;
        if !*created {
            ensure_topic(fluvio, config, LAYOUTS_TOPIC).await?;
            *created = true;
        }
        self.read_new(fluvio).await?;
        let recorded = self.known().check(&ours)?;
        if !recorded {
            let value =
                serde_json::to_vec(&ours).map_err(|e| PhotonError::codec("topic layout", e))?;
            // Right after the layouts topic is created its partition may have no leader
            // yet: such a write is tried again until the topic settles.
            let settled = tokio::time::Instant::now() + PROVISION_WAIT;
            loop {
                let open = topics
                    .producer(|| fluvio.clone(), config, LAYOUTS_TOPIC)
                    .await?;
                let sending = async {
                    match open.producer.send(RecordKey::NULL, value.clone()).await {
                        Ok(output) => output.wait().await.map(|_| ()).map_err(anyhow::Error::from),
                        Err(err) => Err(err),
                    }
                };
                let sent = match answered(|| format!("a write to {LAYOUTS_TOPIC}"), sending).await {
                    Ok(sent) => sent,
                    Err(unanswered) => {
                        open.producer.clear_errors().await;
                        topics.forget(LAYOUTS_TOPIC);
                        return Err(unanswered);
                    }
                };
                let Err(err) = sent else { break };
                open.producer.clear_errors().await;
                topics.forget(LAYOUTS_TOPIC);
                if !is_settling(&err) || tokio::time::Instant::now() >= settled {
                    return Err(unavailable(format!("cannot write to {LAYOUTS_TOPIC}"), err));
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            // Another port may have recorded a different layout first.
            self.read_new(fluvio).await?;
            self.known().check(&ours)?;
        }
        self.checked
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(topic.to_owned());
        Ok(())
    }

    /// Every Photon topic recorded under `prefix`, with its recorded shard count, read up
    /// to the end of the layout topic.
    ///
    /// # Errors
    /// [`PhotonError::Unavailable`] when the layout topic cannot be read.
    pub(crate) async fn recorded(
        &self,
        fluvio: &Arc<Fluvio>,
        config: &FluvioConfig,
    ) -> Result<Vec<(String, u32)>> {
        {
            let mut created = self.updating.lock().await;
            if !*created {
                ensure_topic(fluvio, config, LAYOUTS_TOPIC).await?;
                *created = true;
            }
            self.read_new(fluvio).await?;
        }
        let mut topics: Vec<(String, u32)> = self
            .known()
            .by_topic
            .values()
            .filter(|layout| layout.prefix == config.prefix)
            .map(|layout| (layout.topic.clone(), layout.shards))
            .collect();
        topics.sort();
        Ok(topics)
    }

    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Folds the records not read yet.
    async fn read_new(&self, fluvio: &Fluvio) -> Result<()> {
        let from = self.known().read_through;
        let end = end_offset(fluvio, LAYOUTS_TOPIC).await?;
        let mut read = Vec::new();
        let mut malformed = None;
        read_range(
            fluvio,
            LAYOUTS_TOPIC,
            from,
            end,
            |record| match serde_json::from_slice::<Layout>(record.value()) {
                Ok(layout) => read.push(layout),
                Err(err) => malformed = Some((record.offset(), err)),
            },
        )
        .await?;
        if let Some((offset, err)) = malformed {
            return Err(PhotonError::codec(
                format!("topic layout {LAYOUTS_TOPIC}@{offset}"),
                err,
            ));
        }
        let mut known = self.known();
        for layout in read {
            known.add(layout);
        }
        known.read_through = known.read_through.max(end);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(prefix: &str, topic: &str, shards: u32) -> Layout {
        Layout {
            prefix: prefix.into(),
            topic: topic.into(),
            shards,
        }
    }

    #[test]
    fn another_shard_count_is_refused_naming_both() {
        let mut known = Known::default();
        known.add(layout("photon", "orders", 1));
        assert!(known.check(&layout("photon", "orders", 1)).unwrap());
        let err = known.check(&layout("photon", "orders", 4)).unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(&err, PhotonError::Config { variable, .. } if variable == "shards"),
            "{err:?}"
        );
        assert!(text.contains('4') && text.contains("1 as topic"), "{text}");
        assert!(!known.check(&layout("photon", "users", 4)).unwrap());
    }

    #[test]
    fn a_prefix_reaching_another_layouts_fluvio_topics_is_refused() {
        let mut known = Known::default();
        known.add(layout("a", "t", 4));
        // `a-s-0` unsharded names `a-s-0-t`, shard 0 of `t` under prefix `a`.
        let err = known.check(&layout("a-s-0", "t", 1)).unwrap_err();
        assert!(
            matches!(&err, PhotonError::Config { variable, .. } if variable == "prefix"),
            "{err:?}"
        );
        assert!(err.to_string().contains("\"a-s-0-t\""), "{err}");
        // The oldest record wins.
        known.add(layout("a", "t", 1));
        assert!(known.check(&layout("a", "t", 4)).unwrap());
    }
}
