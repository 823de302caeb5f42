//! Resolution of a builder against the `PHOTON_SQLITE_*` environment variables (parsed in
//! Photon's one dialect, `photon_core::config`), and the checks of values that parse but
//! cannot work.

use std::path::PathBuf;
use std::time::Duration;

use photon_core::config::{Alias, Env, EnvVar};
use photon_core::raw::sql::settings::{
    check_durations, check_sizes, max_payload_bytes, Retention, RetentionSet, RetentionVars,
};
use photon_core::Result;

use crate::config::{
    SqliteConfig, SqliteStoragePortBuilder, Synchronous, PHOTON_SQLITE_BUSY_TIMEOUT,
    PHOTON_SQLITE_GROUP_COMMIT_WAIT, PHOTON_SQLITE_MAX_BATCH, PHOTON_SQLITE_MAX_PAYLOAD_BYTES,
    PHOTON_SQLITE_PAGE_SIZE, PHOTON_SQLITE_PATH, PHOTON_SQLITE_POLL_INTERVAL,
    PHOTON_SQLITE_READERS, PHOTON_SQLITE_RETENTION_DEAD_LETTERS, PHOTON_SQLITE_RETENTION_INTERVAL,
    PHOTON_SQLITE_RETENTION_MAX_AGE, PHOTON_SQLITE_RETENTION_MAX_EVENTS, PHOTON_SQLITE_SYNCHRONOUS,
};

const POLL_INTERVAL: EnvVar = EnvVar::new(PHOTON_SQLITE_POLL_INTERVAL)
    .aliases(&[Alias::deprecated_millis("PHOTON_SQLITE_POLL_INTERVAL_MS")]);
const BUSY_TIMEOUT: EnvVar = EnvVar::new(PHOTON_SQLITE_BUSY_TIMEOUT)
    .aliases(&[Alias::deprecated_millis("PHOTON_SQLITE_BUSY_TIMEOUT_MS")]);
const GROUP_COMMIT_WAIT: EnvVar =
    EnvVar::new(PHOTON_SQLITE_GROUP_COMMIT_WAIT).aliases(&[Alias::deprecated_micros(
        "PHOTON_SQLITE_GROUP_COMMIT_WAIT_US",
    )]);
const RETENTION_MAX_AGE: EnvVar =
    EnvVar::new(PHOTON_SQLITE_RETENTION_MAX_AGE).aliases(&[Alias::deprecated_secs(
        "PHOTON_SQLITE_RETENTION_MAX_AGE_SECS",
    )]);
const RETENTION_INTERVAL: EnvVar =
    EnvVar::new(PHOTON_SQLITE_RETENTION_INTERVAL).aliases(&[Alias::deprecated_millis(
        "PHOTON_SQLITE_RETENTION_INTERVAL_MS",
    )]);
const RETENTION: RetentionVars<'static> = RetentionVars {
    max_age: &RETENTION_MAX_AGE,
    max_events: &EnvVar::new(PHOTON_SQLITE_RETENTION_MAX_EVENTS),
    dead_letters: &EnvVar::new(PHOTON_SQLITE_RETENTION_DEAD_LETTERS),
    interval: &RETENTION_INTERVAL,
};
const SYNCHRONOUS: [(&str, Synchronous); 2] =
    [("full", Synchronous::Full), ("normal", Synchronous::Normal)];

impl SqliteStoragePortBuilder {
    /// Builder values, then `env`, then defaults; then [`validate`].
    pub(crate) fn resolve(self, env: &Env) -> Result<SqliteConfig> {
        let defaults = SqliteConfig::default();
        let default_retention = Retention {
            max_age: defaults.retention_max_age,
            max_events: defaults.retention_max_events,
            dead_letters: defaults.retention_dead_letters,
            interval: defaults.retention_interval,
        };
        let duration = |set: Option<Duration>, var: &EnvVar, default: Duration| match set {
            Some(value) => Ok(value),
            None => env.duration(var).map(|found| found.unwrap_or(default)),
        };
        let count = |set: Option<usize>, name: &'static str, min: u64, default: usize| match set {
            Some(value) => Ok(value),
            None => env
                .count(&EnvVar::new(name), min..=usize::MAX as u64)
                .map(|found| found.map_or(default, |n| n as usize)),
        };
        let mut config = SqliteConfig {
            path: match self.path {
                Some(path) => path,
                None => env
                    .path(&EnvVar::new(PHOTON_SQLITE_PATH))?
                    .unwrap_or_else(|| PathBuf::from("photon.db")),
            },
            poll_interval: duration(self.poll_interval, &POLL_INTERVAL, defaults.poll_interval)?,
            busy_timeout: duration(self.busy_timeout, &BUSY_TIMEOUT, defaults.busy_timeout)?,
            max_batch: count(
                self.max_batch,
                PHOTON_SQLITE_MAX_BATCH,
                1,
                defaults.max_batch,
            )?,
            group_commit_wait: duration(
                self.group_commit_wait,
                &GROUP_COMMIT_WAIT,
                defaults.group_commit_wait,
            )?,
            page_size: count(
                self.page_size,
                PHOTON_SQLITE_PAGE_SIZE,
                1,
                defaults.page_size,
            )?,
            synchronous: match self.synchronous {
                Some(value) => value,
                None => env
                    .choice(&EnvVar::new(PHOTON_SQLITE_SYNCHRONOUS), &SYNCHRONOUS)?
                    .unwrap_or_default(),
            },
            readers: count(self.readers, PHOTON_SQLITE_READERS, 0, defaults.readers)?,
            max_payload_bytes: max_payload_bytes(
                env,
                self.max_payload_bytes,
                &EnvVar::new(PHOTON_SQLITE_MAX_PAYLOAD_BYTES),
                defaults.max_payload_bytes,
            )?,
            ..defaults
        };
        let retention = RetentionSet {
            max_age: self.retention_max_age,
            max_events: self.retention_max_events,
            dead_letters: self.retention_dead_letters,
            interval: self.retention_interval,
        }
        .resolve(env, RETENTION, default_retention)?;
        config.retention_max_age = retention.max_age;
        config.retention_max_events = retention.max_events;
        config.retention_dead_letters = retention.dead_letters;
        config.retention_interval = retention.interval;
        validate(&config)?;
        Ok(config)
    }
}

/// Refuses values that parse but cannot work (zero sizes and intervals), naming the field.
pub(crate) fn validate(config: &SqliteConfig) -> Result<()> {
    check_sizes(
        config.max_batch,
        config.page_size,
        config.max_payload_bytes,
        config.retention_max_events,
    )?;
    check_durations(&[
        ("poll_interval", Some(config.poll_interval)),
        ("retention_interval", Some(config.retention_interval)),
        ("retention_max_age", config.retention_max_age),
    ])
}

#[cfg(test)]
mod tests {
    use photon_core::DEFAULT_MAX_PAYLOAD_BYTES;

    use super::*;

    fn resolve(builder: SqliteStoragePortBuilder, pairs: &[(&str, &str)]) -> Result<SqliteConfig> {
        builder.resolve(&Env::from_pairs(pairs.iter().copied()))
    }

    #[test]
    fn defaults_apply_without_env() {
        let config = resolve(SqliteStoragePortBuilder::new(), &[]).unwrap();
        assert_eq!(config, SqliteConfig::default());
        assert_eq!(config.path, PathBuf::from("photon.db"));
        assert_eq!(config.poll_interval, Duration::from_millis(100));
        assert_eq!(config.busy_timeout, Duration::from_millis(5000));
        assert_eq!(config.max_batch, 4096);
        assert_eq!(config.group_commit_wait, Duration::from_micros(500));
        assert_eq!(config.page_size, 512);
        assert_eq!(config.synchronous, Synchronous::Full);
        assert_eq!(config.readers, 4);
        assert_eq!(config.max_payload_bytes, DEFAULT_MAX_PAYLOAD_BYTES);
        assert_eq!(config.retention_max_age, None);
        assert_eq!(config.retention_max_events, None);
        assert!(!config.retention_dead_letters);
        assert_eq!(config.retention_interval, Duration::from_secs(60));
        assert!(!config.has_retention());
    }

    #[test]
    fn every_variable_is_read_in_the_dialect() {
        let config = resolve(
            SqliteStoragePortBuilder::new(),
            &[
                (PHOTON_SQLITE_PATH, "/env.db"),
                (PHOTON_SQLITE_POLL_INTERVAL, "25ms"),
                (PHOTON_SQLITE_BUSY_TIMEOUT, "10s"),
                (PHOTON_SQLITE_MAX_BATCH, "64"),
                (PHOTON_SQLITE_GROUP_COMMIT_WAIT, "200us"),
                (PHOTON_SQLITE_PAGE_SIZE, "128"),
                (PHOTON_SQLITE_SYNCHRONOUS, "Normal"),
                (PHOTON_SQLITE_READERS, "0"),
                (PHOTON_SQLITE_MAX_PAYLOAD_BYTES, "4MiB"),
                (PHOTON_SQLITE_RETENTION_MAX_AGE, "7d"),
                (PHOTON_SQLITE_RETENTION_MAX_EVENTS, "10"),
                (PHOTON_SQLITE_RETENTION_DEAD_LETTERS, "yes"),
                (PHOTON_SQLITE_RETENTION_INTERVAL, "1m"),
            ],
        )
        .unwrap();
        assert_eq!(config.path, PathBuf::from("/env.db"));
        assert_eq!(config.poll_interval, Duration::from_millis(25));
        assert_eq!(config.busy_timeout, Duration::from_secs(10));
        assert_eq!(config.max_batch, 64);
        assert_eq!(config.group_commit_wait, Duration::from_micros(200));
        assert_eq!(config.page_size, 128);
        assert_eq!(config.synchronous, Synchronous::Normal);
        assert_eq!(config.readers, 0);
        assert_eq!(config.max_payload_bytes, 4 << 20);
        assert_eq!(config.retention_max_age, Some(Duration::from_secs(604_800)));
        assert_eq!(config.retention_max_events, Some(10));
        assert!(config.retention_dead_letters);
        assert_eq!(config.retention_interval, Duration::from_secs(60));
    }

    #[test]
    fn deprecated_names_keep_their_units() {
        let config = resolve(
            SqliteStoragePortBuilder::new(),
            &[
                ("PHOTON_SQLITE_POLL_INTERVAL_MS", "25"),
                ("PHOTON_SQLITE_BUSY_TIMEOUT_MS", "2000"),
                ("PHOTON_SQLITE_GROUP_COMMIT_WAIT_US", "200"),
                ("PHOTON_SQLITE_RETENTION_MAX_AGE_SECS", "3600"),
                ("PHOTON_SQLITE_RETENTION_INTERVAL_MS", "10000"),
            ],
        )
        .unwrap();
        assert_eq!(config.poll_interval, Duration::from_millis(25));
        assert_eq!(config.busy_timeout, Duration::from_secs(2));
        assert_eq!(config.group_commit_wait, Duration::from_micros(200));
        assert_eq!(config.retention_max_age, Some(Duration::from_secs(3600)));
        assert_eq!(config.retention_interval, Duration::from_secs(10));
    }

    #[test]
    fn builder_beats_env_beats_default() {
        let config = resolve(
            SqliteStoragePortBuilder::new()
                .path("/builder.db")
                .max_batch(8),
            &[
                (PHOTON_SQLITE_PATH, "/env.db"),
                (PHOTON_SQLITE_MAX_BATCH, "64"),
                (PHOTON_SQLITE_POLL_INTERVAL, "25ms"),
            ],
        )
        .unwrap();
        assert_eq!(config.path, PathBuf::from("/builder.db"));
        assert_eq!(config.max_batch, 8);
        assert_eq!(config.poll_interval, Duration::from_millis(25));
    }

    #[test]
    fn bad_values_name_the_variable_or_field() {
        let refused =
            |builder, pairs: &[(&str, &str)]| resolve(builder, pairs).unwrap_err().to_string();
        let new = SqliteStoragePortBuilder::new;
        assert_eq!(
            refused(new(), &[(PHOTON_SQLITE_MAX_BATCH, "many")]),
"invalid configuration PHOTON_SQLITE_MAX_BATCH=\"many\": expected an integer of at least 1"
        );
        assert_eq!(
            refused(new(), &[(PHOTON_SQLITE_SYNCHRONOUS, "off")]),
            "invalid configuration PHOTON_SQLITE_SYNCHRONOUS=\"off\": expected full or normal"
        );
        assert_eq!(
            refused(new(), &[(PHOTON_SQLITE_RETENTION_DEAD_LETTERS, "maybe")]),
            format!(
                "invalid configuration PHOTON_SQLITE_RETENTION_DEAD_LETTERS=\"maybe\": expected {}",
                photon_core::config::FLAG_FORM
            )
        );
        assert_eq!(
            refused(new(), &[("PHOTON_SQLITE_POLL_INTERVAL_MS", "fast")]),
            format!(
                "invalid configuration PHOTON_SQLITE_POLL_INTERVAL_MS=\"fast\": expected {}",
                photon_core::config::DURATION_FORM
            )
        );
        assert_eq!(
            refused(new().page_size(0), &[]),
            "invalid configuration page_size=\"0\": expected an integer of at least 1"
        );
        assert_eq!(
            refused(new(), &[(PHOTON_SQLITE_POLL_INTERVAL, "0")]),
            "invalid configuration poll_interval=\"0\": expected a duration greater than zero"
        );
    }

    #[test]
    fn deserializes_in_the_dialect_and_is_checked_on_open() {
        let config: SqliteConfig = serde_json::from_str(
            r#"{"path": "/tmp/x.db", "poll_interval": "20ms", "synchronous": "normal",
                "max_payload_bytes": "64KiB", "retention_max_age": "1h",
                "retention_max_events": 100, "retention_dead_letters": "on"}"#,
        )
        .unwrap();
        assert_eq!(config.path, PathBuf::from("/tmp/x.db"));
        assert_eq!(config.poll_interval, Duration::from_millis(20));
        assert_eq!(config.synchronous, Synchronous::Normal);
        assert_eq!(config.max_payload_bytes, 65_536);
        assert_eq!(config.retention_max_age, Some(Duration::from_secs(3600)));
        assert_eq!(config.retention_max_events, Some(100));
        assert!(config.retention_dead_letters);
        assert_eq!(config.busy_timeout, Duration::from_secs(5));
        let zero: SqliteConfig = serde_json::from_str(r#"{"page_size": 0}"#).unwrap();
        let err = crate::SqliteStoragePort::open_blocking(zero).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid configuration page_size=\"0\": expected an integer of at least 1"
        );
    }
}
