//! Typed configuration of the in-process port, from one settings table
//! (`crate::settings!`): builder call > environment variable > default.

use super::port::MemStoragePort;
use crate::capabilities::DEFAULT_MAX_PAYLOAD_BYTES;
use crate::config::{Env, Size};
use crate::error::Result;

crate::settings! {
    /// Resolved configuration of a [`MemStoragePort`]. Deserializable, sizes as numbers or
    /// in the dialect of [`crate::config`] (checked, a refused value named):
    ///
    /// ```
    /// let config: photon_core::mem::MemConfig =
    ///     serde_json::from_str(r#"{"max_payload_bytes": "64KiB"}"#).unwrap();
    /// assert_eq!(config.max_payload_bytes, 65_536);
    /// ```
    #[derive(Eq)]
    pub struct MemConfig;

    /// Builds a [`MemStoragePort`]; an unset setting falls back to its environment
    /// variable, then to its default.
    ///
    /// ```
    /// use photon_core::{mem::MemStoragePort, StoragePort};
    /// let port = MemStoragePort::builder().max_payload_bytes(4096).build().unwrap();
    /// assert_eq!(port.capabilities().max_payload_bytes, 4096);
    /// ```
    pub struct MemStoragePortBuilder;

    /// Largest accepted body (encoded actor and payload) in bytes.
    max_payload_bytes: Size<usize, 1> = DEFAULT_MAX_PAYLOAD_BYTES,
        env MAX_PAYLOAD_BYTES_ENV = "PHOTON_MEM_MAX_PAYLOAD_BYTES", shown "`1MiB`";
}

/// Former name of [`MAX_PAYLOAD_BYTES_ENV`].
#[deprecated(note = "use MAX_PAYLOAD_BYTES_ENV (same variable)")]
pub const PHOTON_MEM_MAX_PAYLOAD_BYTES: &str = MAX_PAYLOAD_BYTES_ENV;

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
        self.check_settings()
    }
}

impl MemStoragePortBuilder {
    /// The resolved configuration (builder, then environment, then defaults).
    ///
    /// # Errors
    /// [`crate::PhotonError::Config`] naming the variable or field of a refused value.
    pub fn config(&self) -> Result<MemConfig> {
        self.clone().resolve_with(&Env::process())
    }

    /// The store.
    ///
    /// # Errors
    /// As [`MemStoragePortBuilder::config`].
    pub fn build(self) -> Result<MemStoragePort> {
        MemStoragePort::with_config(self.config()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Env;

    #[test]
    fn builder_then_env_then_default() {
        let none = Env::from_pairs::<&str, &str>([]);
        let env = Env::from_pairs([("PHOTON_MEM_MAX_PAYLOAD_BYTES", "64KiB")]);
        let builder = MemStoragePortBuilder::new();
        assert_eq!(
            builder.clone().resolve_with(&none).unwrap(),
            MemConfig::default()
        );
        assert_eq!(
            builder
                .clone()
                .resolve_with(&env)
                .unwrap()
                .max_payload_bytes,
            65_536
        );
        let built = builder.max_payload_bytes(100).resolve_with(&env).unwrap();
        assert_eq!(built.max_payload_bytes, 100);
    }

    #[test]
    fn refusals_name_the_variable_or_field() {
        let env = Env::from_pairs([("PHOTON_MEM_MAX_PAYLOAD_BYTES", "big")]);
        let err = MemStoragePortBuilder::new().resolve_with(&env).unwrap_err();
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
            .resolve_with(&none)
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

    #[test]
    fn the_configuration_page_holds_the_settings_table() {
        let page = std::path::Path::new(
            &std::env::var("CARGO_MANIFEST_DIR").expect("set by the test runner"),
        )
        .join("../docs/configuration.md");
        crate::config::assert_documented(&page, &MemConfig::settings());
    }
}
