//! The Fluvio port's own kinds of setting (topic prefix, retention, batch size) for its
//! settings table in `config.rs` (`photon_core::settings!`); the TLS group, whose settings
//! turn each other on and off, resolved by hand ([`TlsBuilder`]); the checks that load the
//! TLS files; the tests of the table at work.

use std::path::PathBuf;
use std::time::Duration;

use photon_core::config::{
    parse_duration, Env, EnvVar, FilePath, Flag, GroupBuilder, Kind, Setting, Size, Text, TextRule,
};
use photon_core::{PhotonError, Result};

use crate::config::{
    FluvioConfig, TlsConfig, TLS_CA_ENV, TLS_CERT_ENV, TLS_DOMAIN_ENV, TLS_ENV, TLS_KEY_ENV,
};
use crate::retention::MIN_RETENTION;
use crate::tls::{TlsNames, FIELD_NAMES};
use crate::topic::{is_valid_prefix, MAX_PREFIX_LEN};

/// A prefix of Fluvio topic names: 1 to 20 characters of `[a-z0-9-]`, no leading,
/// trailing or double `-`.
#[derive(Debug)]
pub enum TopicPrefix {}

impl TextRule for TopicPrefix {
    fn form() -> String {
        format!("1 to {MAX_PREFIX_LEN} characters of `[a-z0-9-]`")
    }
    fn check(name: &str, prefix: &str) -> Result<()> {
        if is_valid_prefix(prefix) {
            return Ok(());
        }
        Err(PhotonError::config(
            name,
            prefix,
            format!(
                "1 to {MAX_PREFIX_LEN} characters of [a-z0-9-], no leading, trailing or double '-'"
            ),
        ))
    }
}

/// The retention of created topics: a duration in whole seconds from 10 s to `u32::MAX`
/// seconds (Fluvio keeps it in whole seconds of a `u32`).
#[derive(Debug)]
pub enum RetentionAge {}

impl RetentionAge {
    fn refuse(name: &str, value: &str) -> PhotonError {
        PhotonError::config(
            name,
            value,
            format!(
                "a duration in whole seconds from {}s to {}s, e.g. 3600s, 12h or 7d",
                MIN_RETENTION.as_secs(),
                u32::MAX
            ),
        )
    }
}

impl Kind for RetentionAge {
    type Value = Duration;
    type Set = Duration;

    fn form() -> String {
        "duration, whole seconds ≥ 10s".to_owned()
    }
    fn set(value: Duration) -> Duration {
        value
    }
    fn read(env: &Env, var: &EnvVar) -> Result<Option<Duration>> {
        env.read(var, |found| Self::parse(found.name, &found.text))
    }
    fn parse(field: &str, text: &str) -> Result<Duration> {
        // A bare number is refused by the dialect; say so with the retention's own bounds.
        if text.trim().parse::<u64>().is_ok() {
            return Err(Self::refuse(field, text));
        }
        parse_duration(field, text).map_err(|_| Self::refuse(field, text))
    }
    fn check(name: &str, retention: &Duration) -> Result<()> {
        let whole = retention.subsec_nanos() == 0;
        let secs = retention.as_secs();
        if whole && secs >= MIN_RETENTION.as_secs() && secs <= u64::from(u32::MAX) {
            Ok(())
        } else {
            Err(Self::refuse(name, &format!("{retention:?}")))
        }
    }
}

/// The producer's batch size: from 1 KiB to 4 GiB.
#[derive(Debug)]
pub enum BatchSize {}

impl Kind for BatchSize {
    type Value = usize;
    type Set = usize;

    fn form() -> String {
        "size from `1KiB` to `4GiB`".to_owned()
    }
    fn set(value: usize) -> usize {
        value
    }
    fn read(env: &Env, var: &EnvVar) -> Result<Option<usize>> {
        Size::<usize>::read(env, var)
    }
    fn parse(field: &str, text: &str) -> Result<usize> {
        Size::<usize>::parse(field, text)
    }
    fn check(name: &str, bytes: &usize) -> Result<()> {
        if (1024..=u32::MAX as usize).contains(bytes) {
            Ok(())
        } else {
            Err(PhotonError::config(
                name,
                bytes.to_string(),
                "a size from 1KiB to 4GiB",
            ))
        }
    }
}

/// The TLS settings of a [`crate::FluvioStoragePortBuilder`]: TLS is on when switched on,
/// or when unset and a CA is given; a setting given while TLS is off is refused (never
/// ignored).
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct TlsBuilder {
    pub(crate) on: Option<bool>,
    pub(crate) ca: Option<PathBuf>,
    pub(crate) client_cert: Option<(PathBuf, PathBuf)>,
    pub(crate) domain: Option<String>,
}

impl TlsBuilder {
    /// What each setting is called in errors: its setter when the builder gave it, else
    /// its variable.
    pub(crate) fn names(&self) -> TlsNames {
        let (cert, key) = match self.client_cert {
            Some(_) => ("tls_client_cert", "tls_client_cert"),
            None => (TLS_CERT_ENV, TLS_KEY_ENV),
        };
        TlsNames {
            on: if self.on.is_some() { "tls" } else { TLS_ENV },
            ca: if self.ca.is_some() {
                "tls_ca"
            } else {
                TLS_CA_ENV
            },
            cert,
            key,
            domain: if self.domain.is_some() {
                "tls_domain"
            } else {
                TLS_DOMAIN_ENV
            },
        }
    }
}

impl GroupBuilder for TlsBuilder {
    type Value = Option<TlsConfig>;

    fn resolve_group(self, env: &Env) -> Result<Option<TlsConfig>> {
        let names = self.names();
        let var = EnvVar::new;
        let switch = match self.on {
            Some(on) => Some(on),
            None => env.flag(&var(TLS_ENV))?,
        };
        let ca = match self.ca {
            Some(path) => Some(path),
            None => env.path(&var(TLS_CA_ENV))?,
        };
        let client_cert = match self.client_cert {
            Some(pair) => Some(pair),
            None => client_cert(env)?,
        };
        let domain = match self.domain {
            Some(domain) => Some(domain),
            None => env.text(&var(TLS_DOMAIN_ENV))?,
        };
        if switch.unwrap_or(ca.is_some()) {
            return Ok(Some(TlsConfig {
                ca,
                client_cert,
                domain,
            }));
        }
        let path = |path: &PathBuf| path.display().to_string();
        let given = [
            ca.as_ref().map(|ca| (names.ca, path(ca))),
            client_cert
                .as_ref()
                .map(|(cert, _)| (names.cert, path(cert))),
            domain.map(|domain| (names.domain, domain)),
        ];
        if let Some((name, value)) = given.into_iter().flatten().next() {
            let expected = match switch {
                Some(_) => format!("no TLS setting while {}=off (or TLS on)", names.on),
                None => format!(
                    "{} as well (or {}=on): TLS is off without a CA",
                    names.ca, names.on
                ),
            };
            return Err(PhotonError::config(name, value, expected));
        }
        Ok(None)
    }

    fn group_settings() -> Vec<Setting> {
        let row = |field, variable, form: fn() -> String, default, summary| Setting {
            field,
            variable,
            form,
            default,
            summary,
            group: "",
            aliases: &[],
        };
        vec![
            row(
                "",
                TLS_ENV,
                <Flag as Kind>::form,
                "on when a CA is set",
                "TLS to the SC and SPUs (in a config file: a `tls` object turns it on).",
            ),
            row(
                "ca",
                TLS_CA_ENV,
                <FilePath as Kind>::form,
                "none (the system's roots)",
                "PEM file of the CA certificates to trust; turns TLS on.",
            ),
            row(
                "client_cert",
                TLS_CERT_ENV,
                <FilePath as Kind>::form,
                "none",
                "PEM file of the client certificate (chain), with its key.",
            ),
            row(
                "client_cert",
                TLS_KEY_ENV,
                <FilePath as Kind>::form,
                "none",
                "PEM file of the client certificate's private key.",
            ),
            row(
                "domain",
                TLS_DOMAIN_ENV,
                <Text as Kind>::form,
                "the endpoint's host",
                "DNS name the SC's certificate holds (an SPU's: `<spu name>.<domain>`).",
            ),
        ]
    }

    fn named_in(_group: &str, err: PhotonError) -> PhotonError {
        // Its errors name the setter or the variable that was given (`tls_domain`,
        // `PHOTON_FLUVIO_TLS_CA`).
        err
    }

    fn check_group(_tls: &Option<TlsConfig>) -> Result<()> {
        // The files and the domain are checked with the endpoint, as connecting loads them
        // (`check_tls`).
        Ok(())
    }
}

/// The client certificate and key files, both or neither.
fn client_cert(env: &Env) -> Result<Option<(PathBuf, PathBuf)>> {
    let cert = env.path(&EnvVar::new(TLS_CERT_ENV))?;
    let key = env.path(&EnvVar::new(TLS_KEY_ENV))?;
    match (cert, key) {
        (Some(cert), Some(key)) => Ok(Some((cert, key))),
        (None, None) => Ok(None),
        (Some(cert), None) => Err(PhotonError::config(
            TLS_KEY_ENV,
            "",
            format!(
                "the key file of {TLS_CERT_ENV}={} (both or neither)",
                cert.display()
            ),
        )),
        (None, Some(key)) => Err(PhotonError::config(
            TLS_CERT_ENV,
            "",
            format!(
                "the certificate file of {TLS_KEY_ENV}={} (both or neither)",
                key.display()
            ),
        )),
    }
}

/// Refuses values that parse but cannot work, naming the field; reads the TLS files.
pub(crate) fn validate(config: &FluvioConfig) -> Result<()> {
    config.check_settings()?;
    check_tls(config, &FIELD_NAMES)
}

/// Loads the TLS settings as connecting would, naming a refused one by `names`.
pub(crate) fn check_tls(config: &FluvioConfig, names: &TlsNames) -> Result<()> {
    match &config.tls {
        Some(tls) => crate::tls::connector(tls, &config.endpoint, names).map(drop),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::*;
    use crate::retention::DEFAULT_RETENTION;
    use crate::stream_shard::TOPIC_SHARDS_ENV;

    fn resolve(builder: FluvioStoragePortBuilder, pairs: &[(&str, &str)]) -> Result<FluvioConfig> {
        builder.checked(&Env::from_pairs(pairs.iter().copied()))
    }

    #[test]
    fn the_configuration_page_holds_the_settings_table() {
        let page = std::path::Path::new(
            &std::env::var("CARGO_MANIFEST_DIR").expect("set by the test runner"),
        )
        .join("../docs/configuration.md");
        photon_core::config::assert_documented(&page, &FluvioConfig::settings());
    }

    #[test]
    fn defaults() {
        let config = resolve(FluvioStoragePortBuilder::new(), &[]).unwrap();
        assert_eq!(config, FluvioConfig::default());
        assert_eq!(config.endpoint, "127.0.0.1:9003");
        assert_eq!(config.prefix, "photon");
        assert_eq!(config.shards, 1);
        assert_eq!(config.max_in_flight, 256);
        assert!(config.sync_ack);
        assert_eq!(config.replay_cursor, ReplayCursor::StreamSeq);
        assert_eq!(config.retention_max_age, DEFAULT_RETENTION);
        assert!(!config.retention_dead_letters);
        assert_eq!(config.replicas, 1);
        assert_eq!(config.linger, Duration::ZERO);
        assert_eq!(config.batch_size, 64 * 1024);
    }

    #[test]
    fn the_seed_names_then_builder_precedence() {
        let vars = [
            (ENDPOINT_ENV, "10.0.0.1:9003"),
            (PREFIX_ENV, "shop"),
            (TOPIC_SHARDS_ENV, "4"),
            (MAX_INFLIGHT_ENV, "8"),
            (SYNC_ACK_ENV, "0"),
            (REPLAY_CURSOR_ENV, "tail_only"),
            (RETENTION_ENV, "3600s"),
            (REPLICAS_ENV, "3"),
        ];
        let config = resolve(FluvioStoragePortBuilder::new(), &vars).unwrap();
        assert_eq!(config.endpoint, "10.0.0.1:9003");
        assert_eq!(config.prefix, "shop");
        assert_eq!(config.shards, 4);
        assert_eq!(config.max_in_flight, 8);
        assert!(!config.sync_ack);
        assert_eq!(config.replay_cursor, ReplayCursor::TailOnly);
        assert_eq!(config.retention_max_age, Duration::from_secs(3600));
        assert_eq!(config.replicas, 3);
        let builder = FluvioStoragePortBuilder::new()
            .prefix("built")
            .shards(2)
            .sync_ack(true)
            .replicas(1);
        let config = resolve(builder, &vars).unwrap();
        assert_eq!(config.prefix, "built");
        assert_eq!(config.shards, 2);
        assert!(config.sync_ack);
        assert_eq!(config.replicas, 1);
    }

    #[test]
    fn the_names_every_adapter_uses() {
        let config = resolve(
            FluvioStoragePortBuilder::new(),
            &[
                (SHARDS_ENV, "8"),
                (MAX_IN_FLIGHT_ENV, "32"),
                (RETENTION_MAX_AGE_ENV, "12h"),
                (LINGER_ENV, "2ms"),
                (BATCH_SIZE_ENV, "256KiB"),
                (SYNC_ACK_ENV, "Off"),
                (RETENTION_DEAD_LETTERS_ENV, "on"),
            ],
        )
        .unwrap();
        assert!(config.retention_dead_letters);
        assert_eq!(config.shards, 8);
        assert_eq!(config.max_in_flight, 32);
        assert_eq!(config.retention_max_age, Duration::from_secs(43_200));
        assert_eq!(config.linger, Duration::from_millis(2));
        assert_eq!(config.batch_size, 256 * 1024);
        assert!(!config.sync_ack);
        let kept = FluvioStoragePortBuilder::new().retention_dead_letters(false);
        let config = resolve(kept, &[(RETENTION_DEAD_LETTERS_ENV, "on")]).unwrap();
        assert!(!config.retention_dead_letters, "the builder wins");
        let err = resolve(
            FluvioStoragePortBuilder::new(),
            &[(SHARDS_ENV, "8"), (TOPIC_SHARDS_ENV, "4")],
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid configuration PHOTON_FLUVIO_SHARDS=\"8\": expected the same value as \
             PHOTON_FLUVIO_TOPIC_SHARDS=\"4\", an older name of this setting (or unset it)"
        );
    }

    #[test]
    fn bad_values_name_their_variable() {
        let prefix_form =
            "expected 1 to 20 characters of [a-z0-9-], no leading, trailing or double '-'";
        let retention_form =
            "expected a duration in whole seconds from 10s to 4294967295s, e.g. 3600s, 12h or 7d";
        for (name, value, expected) in [
            (PREFIX_ENV, "Bad_Prefix", prefix_form),
            (TOPIC_SHARDS_ENV, "0", "expected an integer from 1 to 256"),
            (SHARDS_ENV, "257", "expected an integer from 1 to 256"),
            (
                MAX_INFLIGHT_ENV,
                "none",
                "expected an integer of at least 1",
            ),
            (SYNC_ACK_ENV, "maybe", "expected true or false"),
            (
                REPLAY_CURSOR_ENV,
                "offset",
                "expected stream_seq or tail_only",
            ),
            (RETENTION_ENV, "5s", retention_form),
            (RETENTION_ENV, "7", retention_form),
            (RETENTION_MAX_AGE_ENV, "soon", retention_form),
            (
                REPLICAS_ENV,
                "0",
                "expected an integer from 1 to 4294967295",
            ),
            (BATCH_SIZE_ENV, "12", "expected a size from 1KiB to 4GiB"),
        ] {
            let err = resolve(FluvioStoragePortBuilder::new(), &[(name, value)]).unwrap_err();
            let text = err.to_string();
            let prefix = format!("invalid configuration {name}={value:?}: {expected}");
            assert!(text.starts_with(&prefix), "{text}");
        }
        let err = resolve(FluvioStoragePortBuilder::new().shards(0), &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid configuration shards=\"0\": expected an integer from 1 to 256"
        );
    }

    #[test]
    fn deserializes_in_the_dialect() {
        let config: FluvioConfig = serde_json::from_str(
            r#"{"endpoint": "10.0.0.5:9003", "prefix": "shop", "topic_shards": 4,
                "max_inflight": 64, "sync_ack": "off", "replay_cursor": "tail_only",
                "retention": "3d", "replicas": 3, "linger": "2ms", "batch_size": "256KiB"}"#,
        )
        .unwrap();
        validate(&config).unwrap();
        assert_eq!(config.endpoint, "10.0.0.5:9003");
        assert_eq!(config.prefix, "shop");
        assert_eq!(config.shards, 4);
        assert_eq!(config.max_in_flight, 64);
        assert!(!config.sync_ack);
        assert_eq!(config.replay_cursor, ReplayCursor::TailOnly);
        assert_eq!(config.retention_max_age, Duration::from_secs(3 * 86_400));
        assert_eq!(config.replicas, 3);
        assert_eq!(config.linger, Duration::from_millis(2));
        assert_eq!(config.batch_size, 256 * 1024);
        let short = serde_json::from_str::<FluvioConfig>(r#"{"retention_max_age": "1s"}"#)
            .unwrap_err()
            .to_string();
        assert!(
            short.starts_with(
                "invalid configuration retention_max_age=\"1s\": expected a duration in whole \
                 seconds from 10s to 4294967295s, e.g. 3600s, 12h or 7d"
            ),
            "{short}"
        );
    }
}
