//! Resolution of a builder against the `PHOTON_NATS_*` environment variables (parsed in
//! Photon's one dialect, `photon_core::config`), and the checks of a resolved config.

use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::time::Duration;

use photon_core::config::{check_count, parse_duration, Alias, Env, EnvVar};
use photon_core::{PhotonError, Result};

use crate::config::{
    redact_url, NatsConfig, NatsStoragePortBuilder, ReplayCursor, TlsConfig, CONNECT_TIMEOUT_ENV,
    CREDENTIALS_FILE_ENV, MAX_IN_FLIGHT_ENV, PREFIX_ENV, REPLAY_CURSOR_ENV, REPLICAS_ENV,
    RETENTION_DEAD_LETTERS_ENV, RETENTION_MAX_AGE_ENV, RETENTION_MAX_BYTES_ENV, SHARDS_ENV,
    SYNC_ACK_ENV, TLS_CA_FILE_ENV, TLS_CERT_FILE_ENV, TLS_KEY_FILE_ENV, TLS_REQUIRED_ENV, URL_ENV,
};

const PREFIX: EnvVar =
    EnvVar::new(PREFIX_ENV).aliases(&[Alias::deprecated("PHOTON_NATS_STREAM_PREFIX")]);
const SHARDS: EnvVar =
    EnvVar::new(SHARDS_ENV).aliases(&[Alias::deprecated("PHOTON_NATS_STREAM_SHARDS")]);
const RETENTION_MAX_AGE: EnvVar =
    EnvVar::new(RETENTION_MAX_AGE_ENV).aliases(&[Alias::deprecated("PHOTON_NATS_MAX_AGE")]);
const RETENTION_MAX_BYTES: EnvVar = EnvVar::new(RETENTION_MAX_BYTES_ENV)
    .aliases(&[Alias::deprecated_binary_letters("PHOTON_NATS_MAX_BYTES")]);
const REPLAY_CURSORS: [(&str, ReplayCursor); 2] = [
    ("stream_seq", ReplayCursor::StreamSeq),
    ("tail_only", ReplayCursor::TailOnly),
];

const REPLICAS: RangeInclusive<u64> = 1..=5;
const SHARD_COUNTS: RangeInclusive<u64> = 1..=64;
const IN_FLIGHT: RangeInclusive<u64> = 1..=65_536;

impl NatsStoragePortBuilder {
    /// Builder values, then `env`, then defaults; then [`validate`].
    pub(crate) fn resolve(&self, env: &Env) -> Result<NatsConfig> {
        let defaults = NatsConfig::default();
        let var = EnvVar::new;
        let count =
            |set: Option<u64>, var: &EnvVar, range: RangeInclusive<u64>, default: u64| match set {
                Some(value) => Ok(value),
                None => env.count(var, range).map(|found| found.unwrap_or(default)),
            };
        let flag = |set: Option<bool>, name: &'static str, default: bool| match set {
            Some(value) => Ok(value),
            None => env.flag(&var(name)).map(|found| found.unwrap_or(default)),
        };
        let retention_max_age = match self.retention_max_age {
            Some(age) => Some(age),
            None => env.duration(&RETENTION_MAX_AGE)?,
        };
        let retention_max_bytes = match self.retention_max_bytes {
            Some(bytes) => Some(bytes),
            None => env.size(&RETENTION_MAX_BYTES)?,
        };
        let config = NatsConfig {
            url: match &self.url {
                Some(url) => url.clone(),
                None => env
                    .read(&var(URL_ENV), |found| {
                        check_urls(found.name, found.text.trim())
                    })?
                    .unwrap_or(defaults.url),
            },
            prefix: match &self.prefix {
                Some(prefix) => prefix.clone(),
                None => env
                    .read(&PREFIX, |found| check_prefix(found.name, found.text.trim()))?
                    .unwrap_or(defaults.prefix),
            },
            replicas: count(
                self.replicas.map(|v| v as u64),
                &var(REPLICAS_ENV),
                REPLICAS,
                1,
            )? as usize,
            retention_max_age: retention_max_age.filter(|age| !age.is_zero()),
            retention_max_bytes: retention_max_bytes.filter(|bytes| *bytes > 0),
            retention_dead_letters: flag(
                self.retention_dead_letters,
                RETENTION_DEAD_LETTERS_ENV,
                false,
            )?,
            shards: count(self.shards.map(u64::from), &SHARDS, SHARD_COUNTS, 1)? as u32,
            sync_ack: flag(self.sync_ack, SYNC_ACK_ENV, true)?,
            max_in_flight: count(
                self.max_in_flight.map(|v| v as u64),
                &var(MAX_IN_FLIGHT_ENV),
                IN_FLIGHT,
                256,
            )? as usize,
            replay_cursor: match self.replay_cursor {
                Some(cursor) => cursor,
                None => env
                    .choice(&var(REPLAY_CURSOR_ENV), &REPLAY_CURSORS)?
                    .unwrap_or_default(),
            },
            connect_timeout: match self.connect_timeout {
                Some(timeout) => timeout,
                None => env
                    .read(&var(CONNECT_TIMEOUT_ENV), |found| {
                        check_timeout(found.name, parse_duration(found.name, &found.text)?)
                    })?
                    .unwrap_or(defaults.connect_timeout),
            },
            credentials_file: match &self.credentials_file {
                Some(path) => Some(path.clone()),
                None => env.path(&var(CREDENTIALS_FILE_ENV))?,
            },
            tls: TlsConfig {
                required: flag(self.tls_required, TLS_REQUIRED_ENV, false)?,
                ca_file: match &self.tls_ca_file {
                    Some(path) => Some(path.clone()),
                    None => env.path(&var(TLS_CA_FILE_ENV))?,
                },
                client_cert: match &self.tls_client_cert {
                    Some(pair) => Some(pair.clone()),
                    None => client_cert(env)?,
                },
            },
        };
        validate(&config)?;
        Ok(config)
    }
}

/// The client certificate and key files, both or neither.
fn client_cert(env: &Env) -> Result<Option<(PathBuf, PathBuf)>> {
    let cert = env.path(&EnvVar::new(TLS_CERT_FILE_ENV))?;
    let key = env.path(&EnvVar::new(TLS_KEY_FILE_ENV))?;
    match (cert, key) {
        (Some(cert), Some(key)) => Ok(Some((cert, key))),
        (None, None) => Ok(None),
        (Some(cert), None) => Err(PhotonError::config(
            TLS_KEY_FILE_ENV,
            "",
            format!(
                "a key file to go with {TLS_CERT_FILE_ENV}={}",
                cert.display()
            ),
        )),
        (None, Some(_)) => Err(PhotonError::config(
            TLS_CERT_FILE_ENV,
            "",
            format!("a certificate file to go with {TLS_KEY_FILE_ENV}"),
        )),
    }
}

/// Refuses values that parse but cannot work, naming the field.
pub(crate) fn validate(config: &NatsConfig) -> Result<()> {
    check_urls("url", &config.url)?;
    check_prefix("prefix", &config.prefix)?;
    check_count("replicas", config.replicas as u64, REPLICAS)?;
    check_count("shards", u64::from(config.shards), SHARD_COUNTS)?;
    check_count("max_in_flight", config.max_in_flight as u64, IN_FLIGHT)?;
    check_timeout("connect_timeout", config.connect_timeout)?;
    Ok(())
}

fn check_urls(variable: &str, urls: &str) -> Result<String> {
    if urls.split(',').any(|part| part.trim().is_empty()) {
        return Err(PhotonError::config(
            variable,
            redact_url(urls),
            "one or more server URLs, comma separated",
        ));
    }
    Ok(urls.to_owned())
}

fn check_prefix(variable: &str, prefix: &str) -> Result<String> {
    let ok = (1..=32).contains(&prefix.len())
        && prefix
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-');
    if ok {
        Ok(prefix.to_owned())
    } else {
        Err(PhotonError::config(
            variable,
            prefix,
            "1 to 32 characters from [A-Za-z0-9-]",
        ))
    }
}

fn check_timeout(variable: &str, timeout: Duration) -> Result<Duration> {
    if timeout.is_zero() {
        Err(PhotonError::config(
            variable,
            "0",
            "a duration greater than zero, e.g. 30s",
        ))
    } else {
        Ok(timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(builder: NatsStoragePortBuilder, pairs: &[(&str, &str)]) -> Result<NatsConfig> {
        builder.resolve(&Env::from_pairs(pairs.iter().copied()))
    }

    fn refused(pairs: &[(&str, &str)]) -> String {
        let err = resolve(NatsStoragePortBuilder::new(), pairs).unwrap_err();
        assert!(matches!(err, PhotonError::Config { .. }), "{err}");
        err.to_string()
    }

    #[test]
    fn defaults_without_env() {
        assert_eq!(
            resolve(NatsStoragePortBuilder::new(), &[]).unwrap(),
            NatsConfig::default()
        );
    }

    #[test]
    fn env_values_are_parsed() {
        let config = resolve(
            NatsStoragePortBuilder::new(),
            &[
                (URL_ENV, "nats://a:1,nats://b:2"),
                (PREFIX_ENV, "Shop-1"),
                (REPLICAS_ENV, "3"),
                (RETENTION_MAX_AGE_ENV, "7d"),
                (RETENTION_MAX_BYTES_ENV, "2GiB"),
                (RETENTION_DEAD_LETTERS_ENV, "on"),
                (SHARDS_ENV, "4"),
                (SYNC_ACK_ENV, "False"),
                (MAX_IN_FLIGHT_ENV, "1024"),
                (REPLAY_CURSOR_ENV, "tail_only"),
                (CONNECT_TIMEOUT_ENV, "250ms"),
                (CREDENTIALS_FILE_ENV, "/x.creds"),
                (TLS_REQUIRED_ENV, "yes"),
                (TLS_CA_FILE_ENV, "/ca.pem"),
                (TLS_CERT_FILE_ENV, "/c.pem"),
                (TLS_KEY_FILE_ENV, "/k.pem"),
            ],
        )
        .unwrap();
        assert_eq!(config.url, "nats://a:1,nats://b:2");
        assert_eq!(config.prefix, "Shop-1");
        assert_eq!(config.replicas, 3);
        assert_eq!(config.retention_max_age, Some(Duration::from_secs(604_800)));
        assert_eq!(config.retention_max_bytes, Some(2 << 30));
        assert!(config.retention_dead_letters);
        assert_eq!(config.shards, 4);
        assert!(!config.sync_ack);
        assert_eq!(config.max_in_flight, 1024);
        assert_eq!(config.replay_cursor, ReplayCursor::TailOnly);
        assert_eq!(config.connect_timeout, Duration::from_millis(250));
        assert_eq!(config.credentials_file, Some(PathBuf::from("/x.creds")));
        assert!(config.tls.required);
        assert_eq!(config.tls.ca_file, Some(PathBuf::from("/ca.pem")));
        assert_eq!(
            config.tls.client_cert,
            Some((PathBuf::from("/c.pem"), PathBuf::from("/k.pem")))
        );
    }

    #[test]
    fn deprecated_names_still_work() {
        let config = resolve(
            NatsStoragePortBuilder::new(),
            &[
                ("PHOTON_NATS_STREAM_PREFIX", "old"),
                ("PHOTON_NATS_STREAM_SHARDS", "2"),
                ("PHOTON_NATS_MAX_AGE", "90m"),
                ("PHOTON_NATS_MAX_BYTES", "2g"),
            ],
        )
        .unwrap();
        assert_eq!(config.prefix, "old");
        assert_eq!(config.shards, 2);
        assert_eq!(config.retention_max_age, Some(Duration::from_secs(5400)));
        assert_eq!(config.retention_max_bytes, Some(2 << 30));
        assert_eq!(
            refused(&[(SHARDS_ENV, "4"), ("PHOTON_NATS_STREAM_SHARDS", "2")]),
            "invalid configuration PHOTON_NATS_SHARDS=\"4\": expected the same value as \
             PHOTON_NATS_STREAM_SHARDS=\"2\", an older name of this setting (or unset it)"
        );
    }

    #[test]
    fn zero_retention_is_no_limit() {
        let config = resolve(
            NatsStoragePortBuilder::new(),
            &[(RETENTION_MAX_AGE_ENV, "0"), (RETENTION_MAX_BYTES_ENV, "0")],
        )
        .unwrap();
        assert_eq!(
            (config.retention_max_age, config.retention_max_bytes),
            (None, None)
        );
    }

    #[test]
    fn builder_wins_over_env() {
        let builder = NatsStoragePortBuilder::new()
            .shards(2)
            .sync_ack(true)
            .url("nats://x:9");
        let config = resolve(
            builder,
            &[
                (SHARDS_ENV, "8"),
                (SYNC_ACK_ENV, "false"),
                (URL_ENV, "nats://y:1"),
            ],
        )
        .unwrap();
        assert_eq!(
            (config.shards, config.sync_ack, config.url.as_str()),
            (2, true, "nats://x:9")
        );
    }

    #[test]
    fn bad_values_name_variable_and_accepted_values() {
        let cases = [
            (REPLICAS_ENV, "0", "expected an integer from 1 to 5"),
            (REPLICAS_ENV, "three", "expected an integer from 1 to 5"),
            (SHARDS_ENV, "65", "expected an integer from 1 to 64"),
            (
                "PHOTON_NATS_STREAM_SHARDS",
                "0",
                "expected an integer from 1 to 64",
            ),
            (
                MAX_IN_FLIGHT_ENV,
                "-1",
                "expected an integer from 1 to 65536",
            ),
            (
                RETENTION_MAX_AGE_ENV,
                "10",
                "expected a duration with a unit",
            ),
            (
                "PHOTON_NATS_MAX_AGE",
                "7 fortnights",
                "expected a duration with a unit",
            ),
            (RETENTION_MAX_BYTES_ENV, "lots", "expected a size in bytes"),
            (SYNC_ACK_ENV, "maybe", "expected true or false"),
            (TLS_REQUIRED_ENV, "2", "expected true or false"),
            (
                REPLAY_CURSOR_ENV,
                "beginning",
                "expected stream_seq or tail_only",
            ),
            (
                PREFIX_ENV,
                "a.b",
                "expected 1 to 32 characters from [A-Za-z0-9-]",
            ),
            (
                "PHOTON_NATS_STREAM_PREFIX",
                "under_score",
                "expected 1 to 32 characters from [A-Za-z0-9-]",
            ),
            (
                URL_ENV,
                "nats://a:1,,nats://b:2",
                "expected one or more server URLs, comma separated",
            ),
            (
                CONNECT_TIMEOUT_ENV,
                "0",
                "expected a duration greater than zero, e.g. 30s",
            ),
        ];
        for (name, value, expected) in cases {
            let message = refused(&[(name, value)]);
            let prefix = format!("invalid configuration {name}={value:?}: {expected}");
            assert!(message.starts_with(&prefix), "{message}");
        }
    }

    #[test]
    fn builder_values_name_their_field() {
        let err = resolve(NatsStoragePortBuilder::new().shards(0), &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid configuration shards=\"0\": expected an integer from 1 to 64"
        );
        let err = resolve(NatsStoragePortBuilder::new().prefix("a b"), &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid configuration prefix=\"a b\": expected 1 to 32 characters from [A-Za-z0-9-]"
        );
    }

    #[test]
    fn half_a_client_certificate_is_refused() {
        assert!(refused(&[(TLS_CERT_FILE_ENV, "/c.pem")]).contains(TLS_KEY_FILE_ENV));
        assert!(refused(&[(TLS_KEY_FILE_ENV, "/k.pem")]).contains(TLS_CERT_FILE_ENV));
    }

    #[test]
    fn debug_hides_url_secrets() {
        let config = resolve(
            NatsStoragePortBuilder::new().url("nats://app:s3cret@a:4222,tls://tok3n@b:4222"),
            &[],
        )
        .unwrap();
        let printed = format!("{config:?}");
        assert!(
            !printed.contains("s3cret") && !printed.contains("tok3n"),
            "{printed}"
        );
        assert!(
            printed.contains("nats://***@a:4222,tls://***@b:4222"),
            "{printed}"
        );
        let err = resolve(
            NatsStoragePortBuilder::new().url("nats://u:s3cret@a:1,"),
            &[],
        )
        .unwrap_err();
        assert!(!err.to_string().contains("s3cret"), "{err}");
    }

    #[test]
    fn deserializes_in_the_dialect() {
        let config: NatsConfig = serde_json::from_str(
            r#"{"url": "nats://10.0.0.1:4222", "stream_prefix": "shop", "shards": 4,
                "retention_max_age": "7d", "retention_max_bytes": "10GiB",
                "retention_dead_letters": true, "sync_ack": "off", "max_in_flight": 64,
                "replay_cursor": "tail_only", "connect_timeout": "5s",
                "tls": {"required": "yes", "client_cert": ["/c.pem", "/k.pem"]}}"#,
        )
        .unwrap();
        validate(&config).unwrap();
        assert_eq!(config.url, "nats://10.0.0.1:4222");
        assert_eq!(config.prefix, "shop");
        assert_eq!(config.shards, 4);
        assert_eq!(config.retention_max_age, Some(Duration::from_secs(604_800)));
        assert_eq!(config.retention_max_bytes, Some(10 << 30));
        assert!(config.retention_dead_letters);
        assert!(!config.sync_ack);
        assert_eq!(config.max_in_flight, 64);
        assert_eq!(config.replay_cursor, ReplayCursor::TailOnly);
        assert_eq!(config.connect_timeout, Duration::from_secs(5));
        assert!(config.tls.required);
        assert_eq!(
            config.tls.client_cert,
            Some((PathBuf::from("/c.pem"), PathBuf::from("/k.pem")))
        );
        assert_eq!(config.replicas, 1);
        let bad: NatsConfig = serde_json::from_str(r#"{"shards": 100}"#).unwrap();
        assert_eq!(
            validate(&bad).unwrap_err().to_string(),
            "invalid configuration shards=\"100\": expected an integer from 1 to 64"
        );
    }
}
