//! Topic names, partition keys, and the registry of declared topics.

use std::collections::BTreeMap;

use crate::error::{PhotonError, Result};

/// Longest accepted topic name, in bytes.
pub const MAX_TOPIC_NAME_LEN: usize = 128;

/// Longest accepted topic key, in bytes.
pub const MAX_TOPIC_KEY_LEN: usize = 256;

/// Suffix of dead-letter topics (`orders` → `orders.dlq`), the executor's default.
pub const DEAD_LETTER_SUFFIX: &str = ".dlq";

/// Whether storage treats `topic` as a dead-letter topic: its name ends with
/// [`DEAD_LETTER_SUFFIX`]. Retention by age or count skips these unless the port is told
/// otherwise, because a dead letter is kept until someone looks at it.
///
/// ```
/// assert!(photon_core::is_dead_letter_topic("orders.dlq"));
/// assert!(!photon_core::is_dead_letter_topic("orders"));
/// ```
pub fn is_dead_letter_topic(topic: &str) -> bool {
    topic.ends_with(DEAD_LETTER_SUFFIX)
}

/// Checks a topic name: 1 to [`MAX_TOPIC_NAME_LEN`] characters from `[a-z0-9._-]`, starting
/// with a letter or digit.
///
/// # Errors
/// [`PhotonError::InvalidTopic`] naming the topic and the broken rule.
///
/// ```
/// use photon_core::validate_topic_name;
/// assert!(validate_topic_name("orders.created").is_ok());
/// assert!(validate_topic_name("Orders").is_err());
/// ```
pub fn validate_topic_name(topic: &str) -> Result<()> {
    let refuse = |reason: String| {
        Err(PhotonError::InvalidTopic {
            topic: topic.to_owned(),
            reason,
        })
    };
    if topic.is_empty() {
        return refuse("must not be empty".into());
    }
    if topic.len() > MAX_TOPIC_NAME_LEN {
        return refuse(format!(
            "is {} bytes, longer than the limit of {MAX_TOPIC_NAME_LEN}",
            topic.len()
        ));
    }
    if let Some(bad) = topic
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-')))
    {
        return refuse(format!("character {bad:?} is outside [a-z0-9._-]"));
    }
    if !topic.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return refuse("must start with a letter or digit".into());
    }
    Ok(())
}

/// Checks a partition key: non-empty, at most [`MAX_TOPIC_KEY_LEN`] bytes, no control
/// characters. Any other Unicode is accepted.
///
/// # Errors
/// [`PhotonError::InvalidKey`] naming the topic and the broken rule.
pub fn validate_topic_key(topic: &str, key: &str) -> Result<()> {
    let reason = if key.is_empty() {
        "must not be empty (use no key instead)".to_owned()
    } else if key.len() > MAX_TOPIC_KEY_LEN {
        format!(
            "is {} bytes, longer than the limit of {MAX_TOPIC_KEY_LEN}",
            key.len()
        )
    } else if key.chars().any(char::is_control) {
        "must not contain control characters".to_owned()
    } else {
        return Ok(());
    };
    Err(PhotonError::InvalidKey {
        topic: topic.to_owned(),
        reason,
    })
}

/// A topic declared in code (by `#[topic]` or by hand), collected with `inventory`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicDescriptor {
    /// Topic name.
    pub name: &'static str,
    /// Field of the event type whose value is the partition key, if keyed.
    pub keyed_by: Option<&'static str>,
    /// Rust type published on the topic.
    pub type_name: &'static str,
}

inventory::collect!(TopicDescriptor);

/// The topics a process knows, by name.
#[derive(Debug, Clone, Default)]
pub struct TopicRegistry {
    topics: BTreeMap<String, TopicDescriptor>,
}

impl TopicRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every descriptor submitted with `inventory::submit!` in the linked program.
    ///
    /// # Errors
    /// [`PhotonError::InvalidTopic`] when a declared name is invalid or declared twice with
    /// different settings.
    pub fn from_inventory() -> Result<Self> {
        let mut registry = Self::new();
        for descriptor in inventory::iter::<TopicDescriptor> {
            registry.register(*descriptor)?;
        }
        Ok(registry)
    }

    /// Adds a descriptor. Registering the same descriptor twice is harmless.
    ///
    /// # Errors
    /// [`PhotonError::InvalidTopic`] for an invalid name or a conflicting redeclaration.
    pub fn register(&mut self, descriptor: TopicDescriptor) -> Result<()> {
        validate_topic_name(descriptor.name)?;
        match self.topics.get(descriptor.name) {
            Some(existing) if *existing != descriptor => Err(PhotonError::InvalidTopic {
                topic: descriptor.name.to_owned(),
                reason: format!(
                    "declared twice with different settings ({} and {})",
                    existing.type_name, descriptor.type_name
                ),
            }),
            _ => {
                self.topics.insert(descriptor.name.to_owned(), descriptor);
                Ok(())
            }
        }
    }

    /// The descriptor of a topic.
    pub fn get(&self, name: &str) -> Option<&TopicDescriptor> {
        self.topics.get(name)
    }

    /// All descriptors, by name.
    pub fn iter(&self) -> impl Iterator<Item = &TopicDescriptor> {
        self.topics.values()
    }

    /// Number of topics.
    pub fn len(&self) -> usize {
        self.topics.len()
    }

    /// Whether no topic is registered.
    pub fn is_empty(&self) -> bool {
        self.topics.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names() {
        for ok in ["a", "a.b", "a-b", "a_b", "0x", "orders.v2.dlq"] {
            assert!(validate_topic_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "A", "a b", ".a", "-a", "a/b", "é", &"x".repeat(129)] {
            assert!(
                matches!(
                    validate_topic_name(bad),
                    Err(PhotonError::InvalidTopic { .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn topic_keys() {
        assert!(validate_topic_key("t", "clé-ü-東京").is_ok());
        assert!(validate_topic_key("t", "").is_err());
        assert!(validate_topic_key("t", "a\nb").is_err());
        let err = validate_topic_key("orders", &"k".repeat(257)).unwrap_err();
        assert!(err.to_string().contains("orders"), "{err}");
    }

    #[test]
    fn registry_refuses_conflicts() {
        let mut registry = TopicRegistry::new();
        let a = TopicDescriptor {
            name: "a",
            keyed_by: None,
            type_name: "A",
        };
        registry.register(a).unwrap();
        registry.register(a).unwrap();
        assert_eq!(registry.len(), 1);
        let b = TopicDescriptor {
            name: "a",
            keyed_by: Some("id"),
            type_name: "B",
        };
        assert!(registry.register(b).is_err());
    }
}
