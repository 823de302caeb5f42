//! Resolution of a builder against the `PHOTON_FLUVIO_*` environment variables (parsed in
//! Photon's one dialect, `photon_core::config`), and the checks of a resolved config.

use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::time::Duration;

use photon_core::config::{check_count, Alias, Env, EnvVar};
use photon_core::{PhotonError, Result};

use crate::config::{
    FluvioConfig, FluvioStoragePortBuilder, ReplayCursor, TlsConfig, BATCH_SIZE_ENV, ENDPOINT_ENV,
    LINGER_ENV, MAX_INFLIGHT_ENV, MAX_IN_FLIGHT_ENV, PREFIX_ENV, REPLAY_CURSOR_ENV, REPLICAS_ENV,
    RETENTION_DEAD_LETTERS_ENV, RETENTION_ENV, RETENTION_MAX_AGE_ENV, SHARDS_ENV, SYNC_ACK_ENV,
    TLS_CA_ENV, TLS_CERT_ENV, TLS_DOMAIN_ENV, TLS_ENV, TLS_KEY_ENV,
};
use crate::retention::MIN_RETENTION;
use crate::stream_shard::{MAX_TOPIC_SHARDS, TOPIC_SHARDS_ENV};
use crate::tls::{TlsNames, FIELD_NAMES};
use crate::topic::{is_valid_prefix, MAX_PREFIX_LEN};

// The names this port has always read stay first-class (not deprecated): they are part of
// its published surface.
const SHARDS: EnvVar = EnvVar::new(SHARDS_ENV).aliases(&[Alias::also(TOPIC_SHARDS_ENV)]);
const MAX_IN_FLIGHT: EnvVar =
    EnvVar::new(MAX_IN_FLIGHT_ENV).aliases(&[Alias::also(MAX_INFLIGHT_ENV)]);
const RETENTION_MAX_AGE: EnvVar =
    EnvVar::new(RETENTION_MAX_AGE_ENV).aliases(&[Alias::also(RETENTION_ENV)]);

const SHARD_COUNTS: RangeInclusive<u64> = 1..=MAX_TOPIC_SHARDS as u64;
const POSITIVE: RangeInclusive<u64> = 1..=u64::MAX;
const REPLICA_COUNTS: RangeInclusive<u64> = 1..=u32::MAX as u64;
/// Fluvio keeps retention in whole seconds of a `u32`.
const RETENTION_SECS: RangeInclusive<u64> = 10..=u32::MAX as u64;
const MIN_BATCH_SIZE: u64 = 1024;

impl FluvioStoragePortBuilder {
    /// Builder values, then `env`, then defaults; then [`validate`] (naming each TLS
    /// setting as it was given).
    pub(crate) fn resolve_with(&self, env: &Env) -> Result<FluvioConfig> {
        let (tls, names) = self.resolve_tls(env)?;
        let defaults = FluvioConfig::default();
        let var = EnvVar::new;
        let count =
            |set: Option<u64>, var: &EnvVar, range: RangeInclusive<u64>, default: u64| match set {
                Some(value) => Ok(value),
                None => env.count(var, range).map(|found| found.unwrap_or(default)),
            };
        let config = FluvioConfig {
            endpoint: match &self.endpoint {
                Some(endpoint) => endpoint.clone(),
                None => env.text(&var(ENDPOINT_ENV))?.unwrap_or(defaults.endpoint),
            },
            prefix: match &self.prefix {
                Some(prefix) => prefix.clone(),
                None => env
                    .read(&var(PREFIX_ENV), |found| {
                        check_prefix(found.name, found.text.trim())
                    })?
                    .unwrap_or(defaults.prefix),
            },
            shards: count(self.shards.map(u64::from), &SHARDS, SHARD_COUNTS, 1)? as u32,
            max_in_flight: count(
                self.max_in_flight.map(|n| n as u64),
                &MAX_IN_FLIGHT,
                1..=usize::MAX as u64,
                defaults.max_in_flight as u64,
            )? as usize,
            sync_ack: match self.sync_ack {
                Some(on) => on,
                None => env.flag(&var(SYNC_ACK_ENV))?.unwrap_or(defaults.sync_ack),
            },
            replay_cursor: match self.replay_cursor {
                Some(cursor) => cursor,
                None => env
                    .choice(&var(REPLAY_CURSOR_ENV), &ReplayCursor::CHOICES)?
                    .unwrap_or_default(),
            },
            retention_max_age: match self.retention_max_age {
                Some(retention) => retention,
                None => env
                    .read(&RETENTION_MAX_AGE, |found| {
                        let retention = match found.text.trim().parse::<u64>() {
                            // A bare number is refused by the dialect; say so with the
                            // retention's own bounds.
                            Ok(_) => Err(refuse_retention(found.name, &found.text)),
                            Err(_) => photon_core::config::parse_duration(found.name, &found.text)
                                .map_err(|_| refuse_retention(found.name, &found.text)),
                        }?;
                        check_retention(found.name, retention)
                    })?
                    .unwrap_or(defaults.retention_max_age),
            },
            retention_dead_letters: match self.retention_dead_letters {
                Some(on) => on,
                None => env
                    .flag(&var(RETENTION_DEAD_LETTERS_ENV))?
                    .unwrap_or(defaults.retention_dead_letters),
            },
            replicas: count(
                self.replicas.map(u64::from),
                &var(REPLICAS_ENV),
                REPLICA_COUNTS,
                1,
            )? as u32,
            linger: match self.linger {
                Some(linger) => linger,
                None => env.duration(&var(LINGER_ENV))?.unwrap_or(defaults.linger),
            },
            batch_size: match self.batch_size {
                Some(bytes) => bytes,
                None => env
                    .read(&var(BATCH_SIZE_ENV), |found| {
                        let bytes = photon_core::config::parse_size(found.name, &found.text)?;
                        check_batch_size(found.name, bytes)
                    })?
                    .map_or(defaults.batch_size, |bytes| bytes as usize),
            },
            tls,
        };
        validate_settings(&config)?;
        check_tls(&config, &names)?;
        Ok(config)
    }

    /// The TLS settings: on when switched on, or when unset and a CA is given; a setting
    /// given while TLS is off is refused (never ignored). Also returns what each setting is
    /// called in errors: its variable, or its setter when the builder gave it.
    fn resolve_tls(&self, env: &Env) -> Result<(Option<TlsConfig>, TlsNames)> {
        let var = EnvVar::new;
        let mut names = TlsNames {
            on: TLS_ENV,
            ca: TLS_CA_ENV,
            cert: TLS_CERT_ENV,
            key: TLS_KEY_ENV,
            domain: TLS_DOMAIN_ENV,
        };
        let switch = match self.tls {
            Some(on) => {
                names.on = "tls";
                Some(on)
            }
            None => env.flag(&var(TLS_ENV))?,
        };
        let ca = match &self.tls_ca {
            Some(path) => {
                names.ca = "tls_ca";
                Some(path.clone())
            }
            None => env.path(&var(TLS_CA_ENV))?,
        };
        let client_cert = match &self.tls_client_cert {
            Some(pair) => {
                (names.cert, names.key) = ("tls_client_cert", "tls_client_cert");
                Some(pair.clone())
            }
            None => client_cert(env)?,
        };
        let domain = match &self.tls_domain {
            Some(domain) => {
                names.domain = "tls_domain";
                Some(domain.clone())
            }
            None => env.text(&var(TLS_DOMAIN_ENV))?,
        };
        if switch.unwrap_or(ca.is_some()) {
            let tls = TlsConfig {
                ca,
                client_cert,
                domain,
            };
            return Ok((Some(tls), names));
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
        Ok((None, names))
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
    validate_settings(config)?;
    check_tls(config, &FIELD_NAMES)
}

/// Loads the TLS settings as connecting would, naming a refused one by `names`.
fn check_tls(config: &FluvioConfig, names: &TlsNames) -> Result<()> {
    match &config.tls {
        Some(tls) => crate::tls::connector(tls, &config.endpoint, names).map(drop),
        None => Ok(()),
    }
}

/// [`validate`] without the TLS settings (which connecting loads itself).
pub(crate) fn validate_settings(config: &FluvioConfig) -> Result<()> {
    check_prefix("prefix", &config.prefix)?;
    check_count("shards", u64::from(config.shards), SHARD_COUNTS)?;
    check_count("max_in_flight", config.max_in_flight as u64, POSITIVE)?;
    check_count("replicas", u64::from(config.replicas), REPLICA_COUNTS)?;
    check_retention("retention_max_age", config.retention_max_age)?;
    check_batch_size("batch_size", config.batch_size as u64)?;
    Ok(())
}

fn check_prefix(variable: &str, prefix: &str) -> Result<String> {
    if is_valid_prefix(prefix) {
        Ok(prefix.to_owned())
    } else {
        Err(PhotonError::config(
            variable,
            prefix,
            format!(
                "1 to {MAX_PREFIX_LEN} characters of [a-z0-9-], no leading, trailing or double '-'"
            ),
        ))
    }
}

fn check_retention(variable: &str, retention: Duration) -> Result<Duration> {
    let whole = retention.subsec_nanos() == 0;
    if whole && RETENTION_SECS.contains(&retention.as_secs()) {
        Ok(retention)
    } else {
        Err(refuse_retention(variable, &format!("{retention:?}")))
    }
}

fn refuse_retention(variable: &str, value: &str) -> PhotonError {
    PhotonError::config(
        variable,
        value,
        format!(
            "a duration in whole seconds from {}s to {}s, e.g. 3600s, 12h or 7d",
            MIN_RETENTION.as_secs(),
            u32::MAX
        ),
    )
}

fn check_batch_size(variable: &str, bytes: u64) -> Result<u64> {
    if (MIN_BATCH_SIZE..=u32::MAX as u64).contains(&bytes) {
        Ok(bytes)
    } else {
        Err(PhotonError::config(
            variable,
            bytes.to_string(),
            "a size from 1KiB to 4GiB",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retention::DEFAULT_RETENTION;

    fn resolve(builder: FluvioStoragePortBuilder, pairs: &[(&str, &str)]) -> Result<FluvioConfig> {
        builder.resolve_with(&Env::from_pairs(pairs.iter().copied()))
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
        let short: FluvioConfig = serde_json::from_str(r#"{"retention_max_age": "1s"}"#).unwrap();
        assert_eq!(
            validate(&short).unwrap_err().to_string(),
            "invalid configuration retention_max_age=\"1s\": expected a duration in whole \
             seconds from 10s to 4294967295s, e.g. 3600s, 12h or 7d"
        );
    }
}
