//! Typed configuration of the in-process port: builder call > environment variable >
//! default.

use serde::Deserialize;

use super::port::MemStoragePort;
use crate::capabilities::DEFAULT_MAX_PAYLOAD_BYTES;
use crate::config::{check_count, Env, EnvVar};
use crate::error::Result;

/// Largest accepted body (encoded actor and payload), a size (`1MiB`). Default 1 MiB.
pub const PHOTON_MEM_MAX_PAYLOAD_BYTES: &str = "PHOTON_MEM_MAX_PAYLOAD_BYTES";

/// Resolved configuration of a [`MemStoragePort`]. Deserializable, sizes as numbers or in
/// the dialect of [`crate::config`]:
///
/// ```
/// let config: photon_core::mem::MemConfig =
///     serde_json::from_str(r#"{"max_payload_bytes": "64KiB"}"#).unwrap();
/// assert_eq!(config.max_payload_bytes, 65_536);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct MemConfig {
    /// Largest accepted body in bytes.
    #[serde(deserialize_with = "crate::config::de::size")]
    pub max_payload_bytes: usize,
}

impl Default for MemConfig {
    fn default() -> Self {
        Self {
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
        }
    }
}

impl MemConfig {
    /// Defaults overridden by the `PHOTON_MEM_*` environment variables.
    ///
    /// # Errors
    /// [`crate::PhotonError::Config`] naming the variable of a refused value.
    pub fn from_env() -> Result<Self> {
        MemStoragePortBuilder::new().config()
    }

    /// Checks values that parse but cannot work.
    ///
    /// # Errors
    /// [`crate::PhotonError::Config`] naming the field.
    pub fn validate(&self) -> Result<()> {
        check_count(
            "max_payload_bytes",
            self.max_payload_bytes as u64,
            1..=u64::MAX,
        )?;
        Ok(())
    }
}

/// Builds a [`MemStoragePort`]; an unset field falls back to its environment variable,
/// then to its default.
///
/// | setting | variable | default |
/// |---|---|---|
/// | [`max_payload_bytes`](Self::max_payload_bytes) | `PHOTON_MEM_MAX_PAYLOAD_BYTES` | `1MiB` |
///
/// ```
/// use photon_core::{mem::MemStoragePort, StoragePort};
/// let port = MemStoragePort::builder().max_payload_bytes(4096).build().unwrap();
/// assert_eq!(port.capabilities().max_payload_bytes, 4096);
/// ```
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct MemStoragePortBuilder {
    max_payload_bytes: Option<usize>,
}

impl MemStoragePortBuilder {
    /// A builder with nothing set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Largest accepted body in bytes.
    ///
    /// ```
    /// let builder = photon_core::mem::MemStoragePort::builder().max_payload_bytes(64 << 10);
    /// ```
    pub fn max_payload_bytes(mut self, bytes: usize) -> Self {
        self.max_payload_bytes = Some(bytes);
        self
    }

    /// The resolved configuration (builder, then environment, then defaults).
    ///
    /// # Errors
    /// [`crate::PhotonError::Config`] naming the variable or field of a refused value.
    pub fn config(&self) -> Result<MemConfig> {
        self.resolve(&Env::process())
    }

    /// The store.
    ///
    /// # Errors
    /// As [`MemStoragePortBuilder::config`].
    pub fn build(self) -> Result<MemStoragePort> {
        MemStoragePort::with_config(self.config()?)
    }

    pub(crate) fn resolve(&self, env: &Env) -> Result<MemConfig> {
        let defaults = MemConfig::default();
        let max_payload_bytes = match self.max_payload_bytes {
            Some(bytes) => bytes,
            None => match env.size(&EnvVar::new(PHOTON_MEM_MAX_PAYLOAD_BYTES))? {
                Some(bytes) => usize::try_from(bytes).unwrap_or(usize::MAX),
                None => defaults.max_payload_bytes,
            },
        };
        let config = MemConfig { max_payload_bytes };
        config.validate()?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_then_env_then_default() {
        let none = Env::from_pairs::<&str, &str>([]);
        let env = Env::from_pairs([("PHOTON_MEM_MAX_PAYLOAD_BYTES", "64KiB")]);
        let builder = MemStoragePortBuilder::new();
        assert_eq!(builder.resolve(&none).unwrap(), MemConfig::default());
        assert_eq!(builder.resolve(&env).unwrap().max_payload_bytes, 65_536);
        let built = builder.max_payload_bytes(100).resolve(&env).unwrap();
        assert_eq!(built.max_payload_bytes, 100);
    }

    #[test]
    fn refusals_name_the_variable_or_field() {
        let env = Env::from_pairs([("PHOTON_MEM_MAX_PAYLOAD_BYTES", "big")]);
        let err = MemStoragePortBuilder::new().resolve(&env).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "invalid configuration PHOTON_MEM_MAX_PAYLOAD_BYTES=\"big\": expected {}",
                crate::config::SIZE_FORM
            )
        );
        let none = Env::from_pairs::<&str, &str>([]);
        let err = MemStoragePortBuilder::new()
            .max_payload_bytes(0)
            .resolve(&none)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid configuration max_payload_bytes=\"0\": expected an integer of at least 1"
        );
    }

    #[test]
    fn deserializes_in_the_dialect() {
        let config: MemConfig = serde_json::from_str(r#"{"max_payload_bytes": "2MiB"}"#).unwrap();
        assert_eq!(config.max_payload_bytes, 2 << 20);
        let config: MemConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(config, MemConfig::default());
        let err = serde_json::from_str::<MemConfig>(r#"{"max_bytes": 1}"#).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown field `max_bytes`, expected `max_payload_bytes` at line 1 column 12"
        );
    }
}
