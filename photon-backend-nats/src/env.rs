//! Resolution of a builder against the `PHOTON_NATS_*` environment variables, and the
//! parsing of their values.

use std::path::PathBuf;
use std::time::Duration;

use photon_core::{PhotonError, Result};

use crate::config::{
    redact_url, NatsConfig, NatsStoragePortBuilder, ReplayCursor, Retention, TlsConfig,
    PHOTON_NATS_CONNECT_TIMEOUT, PHOTON_NATS_CREDENTIALS_FILE, PHOTON_NATS_MAX_AGE,
    PHOTON_NATS_MAX_BYTES, PHOTON_NATS_MAX_IN_FLIGHT, PHOTON_NATS_REPLAY_CURSOR,
    PHOTON_NATS_REPLICAS, PHOTON_NATS_RETENTION_DEAD_LETTERS, PHOTON_NATS_STREAM_PREFIX,
    PHOTON_NATS_STREAM_SHARDS, PHOTON_NATS_SYNC_ACK, PHOTON_NATS_TLS_CA_FILE,
    PHOTON_NATS_TLS_CERT_FILE, PHOTON_NATS_TLS_KEY_FILE, PHOTON_NATS_TLS_REQUIRED, PHOTON_NATS_URL,
};

impl NatsStoragePortBuilder {
    /// Builder values, then `env`, then defaults.
    pub(crate) fn resolve(&self, env: impl Fn(&str) -> Option<String>) -> Result<NatsConfig> {
        let defaults = NatsConfig::default();
        let pick = |set: Option<String>, name: &str| {
            set.or_else(|| env(name).filter(|v| !v.trim().is_empty()))
        };
        let url = pick(self.url.clone(), PHOTON_NATS_URL).unwrap_or(defaults.url);
        if url.split(',').any(|part| part.trim().is_empty()) {
            return Err(PhotonError::config(
                PHOTON_NATS_URL,
                redact_url(&url),
                "one or more server URLs, comma separated",
            ));
        }
        let stream_prefix = pick(self.stream_prefix.clone(), PHOTON_NATS_STREAM_PREFIX)
            .unwrap_or(defaults.stream_prefix);
        check_prefix(&stream_prefix)?;
        let number = |set: Option<u64>, name: &str, min: u64, max: u64, default: u64| match set {
            Some(value) => in_range(name, &value.to_string(), min, max),
            None => env(name).map_or(Ok(default), |text| in_range(name, &text, min, max)),
        };
        let replicas = number(
            self.replicas.map(|v| v as u64),
            PHOTON_NATS_REPLICAS,
            1,
            5,
            1,
        )? as usize;
        let stream_shards = number(
            self.stream_shards.map(u64::from),
            PHOTON_NATS_STREAM_SHARDS,
            1,
            64,
            1,
        )? as u32;
        let max_in_flight = number(
            self.max_in_flight.map(|v| v as u64),
            PHOTON_NATS_MAX_IN_FLIGHT,
            1,
            65_536,
            256,
        )? as usize;
        let max_age = match self.max_age {
            Some(age) => age,
            None => env(PHOTON_NATS_MAX_AGE).map_or(Ok(Duration::ZERO), |t| {
                parse_duration(PHOTON_NATS_MAX_AGE, &t)
            })?,
        };
        let max_bytes = match self.max_bytes {
            Some(bytes) => bytes,
            None => env(PHOTON_NATS_MAX_BYTES)
                .map_or(Ok(0), |t| parse_bytes(PHOTON_NATS_MAX_BYTES, &t))?,
        };
        let flag = |set: Option<bool>, name: &str, default: bool| match set {
            Some(value) => Ok(value),
            None => env(name).map_or(Ok(default), |t| parse_bool(name, &t)),
        };
        let replay_cursor = match self.replay_cursor {
            Some(cursor) => cursor,
            None => env(PHOTON_NATS_REPLAY_CURSOR)
                .map_or(Ok(ReplayCursor::StreamSeq), |t| parse_cursor(&t))?,
        };
        let connect_timeout = match self.connect_timeout {
            Some(timeout) => timeout,
            None => env(PHOTON_NATS_CONNECT_TIMEOUT).map_or(Ok(defaults.connect_timeout), |t| {
                parse_duration(PHOTON_NATS_CONNECT_TIMEOUT, &t)
            })?,
        };
        if connect_timeout.is_zero() {
            return Err(PhotonError::config(
                PHOTON_NATS_CONNECT_TIMEOUT,
                "0",
                "a duration greater than zero, e.g. 30s",
            ));
        }
        let path = |set: &Option<PathBuf>, name: &str| {
            set.clone()
                .or_else(|| env(name).filter(|v| !v.is_empty()).map(PathBuf::from))
        };
        let client_cert = match &self.tls_client_cert {
            Some(pair) => Some(pair.clone()),
            None => match (
                path(&None, PHOTON_NATS_TLS_CERT_FILE),
                path(&None, PHOTON_NATS_TLS_KEY_FILE),
            ) {
                (Some(cert), Some(key)) => Some((cert, key)),
                (None, None) => None,
                (Some(cert), None) => {
                    return Err(PhotonError::config(
                        PHOTON_NATS_TLS_KEY_FILE,
                        "",
                        format!(
                            "a key file to go with {PHOTON_NATS_TLS_CERT_FILE}={}",
                            cert.display()
                        ),
                    ))
                }
                (None, Some(_)) => {
                    return Err(PhotonError::config(
                        PHOTON_NATS_TLS_CERT_FILE,
                        "",
                        format!("a certificate file to go with {PHOTON_NATS_TLS_KEY_FILE}"),
                    ))
                }
            },
        };
        Ok(NatsConfig {
            url,
            stream_prefix,
            replicas,
            retention: Retention {
                max_age: (!max_age.is_zero()).then_some(max_age),
                max_bytes: (max_bytes > 0).then_some(max_bytes),
                dead_letters: flag(
                    self.retention_dead_letters,
                    PHOTON_NATS_RETENTION_DEAD_LETTERS,
                    false,
                )?,
            },
            stream_shards,
            sync_ack: flag(self.sync_ack, PHOTON_NATS_SYNC_ACK, true)?,
            max_in_flight,
            replay_cursor,
            connect_timeout,
            credentials_file: path(&self.credentials_file, PHOTON_NATS_CREDENTIALS_FILE),
            tls: TlsConfig {
                required: flag(self.tls_required, PHOTON_NATS_TLS_REQUIRED, false)?,
                ca_file: path(&self.tls_ca_file, PHOTON_NATS_TLS_CA_FILE),
                client_cert,
            },
        })
    }
}

fn check_prefix(prefix: &str) -> Result<()> {
    let ok = (1..=32).contains(&prefix.len())
        && prefix
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(PhotonError::config(
            PHOTON_NATS_STREAM_PREFIX,
            prefix,
            "1 to 32 characters from [A-Za-z0-9-]",
        ))
    }
}

fn in_range(name: &str, text: &str, min: u64, max: u64) -> Result<u64> {
    match text.trim().parse::<u64>() {
        Ok(value) if (min..=max).contains(&value) => Ok(value),
        _ => Err(PhotonError::config(
            name,
            text,
            format!("an integer from {min} to {max}"),
        )),
    }
}

fn parse_bool(name: &str, text: &str) -> Result<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(PhotonError::config(
            name,
            text,
            "true or false (also 1/0, yes/no, on/off)",
        )),
    }
}

fn parse_cursor(text: &str) -> Result<ReplayCursor> {
    match text.trim() {
        "stream_seq" => Ok(ReplayCursor::StreamSeq),
        "tail_only" => Ok(ReplayCursor::TailOnly),
        _ => Err(PhotonError::config(
            PHOTON_NATS_REPLAY_CURSOR,
            text,
            "stream_seq or tail_only",
        )),
    }
}

fn parse_duration(name: &str, text: &str) -> Result<Duration> {
    let refuse = || {
        PhotonError::config(
            name,
            text,
            "0 or a whole number with a unit: ms, s, m, h or d (e.g. 7d)",
        )
    };
    let trimmed = text.trim();
    if trimmed == "0" {
        return Ok(Duration::ZERO);
    }
    let split = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(refuse)?;
    let value: u64 = trimmed[..split].parse().map_err(|_| refuse())?;
    let unit = match &trimmed[split..] {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(refuse()),
    };
    value
        .checked_mul(unit)
        .map(Duration::from_millis)
        .ok_or_else(refuse)
}

fn parse_bytes(name: &str, text: &str) -> Result<u64> {
    let refuse = || {
        PhotonError::config(
            name,
            text,
            "0 (unlimited) or a whole number of bytes, optionally with k, m or g (binary)",
        )
    };
    let trimmed = text.trim().to_ascii_lowercase();
    let (digits, unit) = match trimmed.chars().last() {
        Some('k') => (&trimmed[..trimmed.len() - 1], 1u64 << 10),
        Some('m') => (&trimmed[..trimmed.len() - 1], 1 << 20),
        Some('g') => (&trimmed[..trimmed.len() - 1], 1 << 30),
        _ => (trimmed.as_str(), 1),
    };
    let value: u64 = digits.parse().map_err(|_| refuse())?;
    value
        .checked_mul(unit)
        .filter(|v| i64::try_from(*v).is_ok())
        .ok_or_else(refuse)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn resolve(builder: NatsStoragePortBuilder, env: &[(&str, &str)]) -> Result<NatsConfig> {
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        builder.resolve(|name| env.get(name).cloned())
    }

    fn refused(env: &[(&str, &str)]) -> String {
        let err = resolve(NatsStoragePortBuilder::new(), env).unwrap_err();
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
                (PHOTON_NATS_URL, "nats://a:1,nats://b:2"),
                (PHOTON_NATS_STREAM_PREFIX, "Shop-1"),
                (PHOTON_NATS_REPLICAS, "3"),
                (PHOTON_NATS_MAX_AGE, "7d"),
                (PHOTON_NATS_MAX_BYTES, "2g"),
                (PHOTON_NATS_STREAM_SHARDS, "4"),
                (PHOTON_NATS_SYNC_ACK, "false"),
                (PHOTON_NATS_MAX_IN_FLIGHT, "1024"),
                (PHOTON_NATS_REPLAY_CURSOR, "tail_only"),
                (PHOTON_NATS_CREDENTIALS_FILE, "/x.creds"),
                (PHOTON_NATS_TLS_REQUIRED, "yes"),
                (PHOTON_NATS_TLS_CA_FILE, "/ca.pem"),
                (PHOTON_NATS_TLS_CERT_FILE, "/c.pem"),
                (PHOTON_NATS_TLS_KEY_FILE, "/k.pem"),
            ],
        )
        .unwrap();
        assert_eq!(config.url, "nats://a:1,nats://b:2");
        assert_eq!(config.stream_prefix, "Shop-1");
        assert_eq!(config.replicas, 3);
        assert_eq!(
            config.retention.max_age,
            Some(Duration::from_secs(7 * 86_400))
        );
        assert_eq!(config.retention.max_bytes, Some(2 << 30));
        assert_eq!(config.stream_shards, 4);
        assert!(!config.sync_ack);
        assert_eq!(config.max_in_flight, 1024);
        assert_eq!(config.replay_cursor, ReplayCursor::TailOnly);
        assert_eq!(config.credentials_file, Some(PathBuf::from("/x.creds")));
        assert!(config.tls.required);
        assert_eq!(config.tls.ca_file, Some(PathBuf::from("/ca.pem")));
        assert_eq!(
            config.tls.client_cert,
            Some((PathBuf::from("/c.pem"), PathBuf::from("/k.pem")))
        );
    }

    #[test]
    fn builder_wins_over_env() {
        let builder = NatsStoragePortBuilder::new()
            .stream_shards(2)
            .sync_ack(true)
            .url("nats://x:9");
        let config = resolve(
            builder,
            &[
                (PHOTON_NATS_STREAM_SHARDS, "8"),
                (PHOTON_NATS_SYNC_ACK, "false"),
                (PHOTON_NATS_URL, "nats://y:1"),
            ],
        )
        .unwrap();
        assert_eq!(
            (config.stream_shards, config.sync_ack, config.url.as_str()),
            (2, true, "nats://x:9")
        );
    }

    #[test]
    fn bad_values_name_variable_and_accepted_values() {
        let cases = [
            (PHOTON_NATS_REPLICAS, "0", "from 1 to 5"),
            (PHOTON_NATS_REPLICAS, "three", "from 1 to 5"),
            (PHOTON_NATS_STREAM_SHARDS, "65", "from 1 to 64"),
            (PHOTON_NATS_MAX_IN_FLIGHT, "-1", "from 1 to 65536"),
            (PHOTON_NATS_MAX_AGE, "7 days", "ms, s, m, h or d"),
            (PHOTON_NATS_MAX_AGE, "10", "ms, s, m, h or d"),
            (PHOTON_NATS_MAX_BYTES, "lots", "bytes"),
            (PHOTON_NATS_SYNC_ACK, "maybe", "true or false"),
            (PHOTON_NATS_TLS_REQUIRED, "2", "true or false"),
            (
                PHOTON_NATS_REPLAY_CURSOR,
                "beginning",
                "stream_seq or tail_only",
            ),
            (PHOTON_NATS_STREAM_PREFIX, "a.b", "[A-Za-z0-9-]"),
            (PHOTON_NATS_STREAM_PREFIX, "under_score", "[A-Za-z0-9-]"),
            (PHOTON_NATS_URL, "nats://a:1,,nats://b:2", "comma separated"),
        ];
        for (name, value, expected) in cases {
            let message = refused(&[(name, value)]);
            assert!(message.contains(name), "{message}");
            assert!(message.contains(expected), "{message}");
        }
    }

    #[test]
    fn half_a_client_certificate_is_refused() {
        assert!(
            refused(&[(PHOTON_NATS_TLS_CERT_FILE, "/c.pem")]).contains(PHOTON_NATS_TLS_KEY_FILE)
        );
        assert!(
            refused(&[(PHOTON_NATS_TLS_KEY_FILE, "/k.pem")]).contains(PHOTON_NATS_TLS_CERT_FILE)
        );
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
    fn durations_and_sizes() {
        assert_eq!(parse_duration("X", "0").unwrap(), Duration::ZERO);
        assert_eq!(
            parse_duration("X", "250ms").unwrap(),
            Duration::from_millis(250)
        );
        assert_eq!(
            parse_duration("X", "90m").unwrap(),
            Duration::from_secs(5400)
        );
        assert_eq!(parse_bytes("X", "512").unwrap(), 512);
        assert_eq!(parse_bytes("X", "64K").unwrap(), 64 << 10);
        assert!(parse_bytes("X", "99999999999g").is_err());
    }
}
