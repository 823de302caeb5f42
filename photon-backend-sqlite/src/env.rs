//! The SQLite port's settings table at work: resolution against the `PHOTON_SQLITE_*`
//! environment variables in Photon's one dialect, deserialization, the checks, and the
//! configuration page's table (all made by `photon_core::settings!` in `config.rs`).

#[cfg(test)]
mod tests {
    use photon_core::DEFAULT_MAX_PAYLOAD_BYTES;

    use std::path::{Path, PathBuf};
    use std::time::Duration;

    use photon_core::config::Env;
    use photon_core::Result;

    use crate::config::*;

    fn resolve(builder: SqliteStoragePortBuilder, pairs: &[(&str, &str)]) -> Result<SqliteConfig> {
        builder.resolve_with(&Env::from_pairs(pairs.iter().copied()))
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
                (PATH_ENV, "/env.db"),
                (POLL_INTERVAL_ENV, "25ms"),
                (BUSY_TIMEOUT_ENV, "10s"),
                (MAX_BATCH_ENV, "64"),
                (GROUP_COMMIT_WAIT_ENV, "200us"),
                (PAGE_SIZE_ENV, "128"),
                (SYNCHRONOUS_ENV, "Normal"),
                (READERS_ENV, "0"),
                (MAX_PAYLOAD_BYTES_ENV, "4MiB"),
                (RETENTION_MAX_AGE_ENV, "7d"),
                (RETENTION_MAX_EVENTS_ENV, "10"),
                (RETENTION_DEAD_LETTERS_ENV, "yes"),
                (RETENTION_INTERVAL_ENV, "1m"),
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
                (PATH_ENV, "/env.db"),
                (MAX_BATCH_ENV, "64"),
                (POLL_INTERVAL_ENV, "25ms"),
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
            refused(new(), &[(MAX_BATCH_ENV, "many")]),
"invalid configuration PHOTON_SQLITE_MAX_BATCH=\"many\": expected an integer of at least 1"
        );
        assert_eq!(
            refused(new(), &[(SYNCHRONOUS_ENV, "off")]),
            "invalid configuration PHOTON_SQLITE_SYNCHRONOUS=\"off\": expected full or normal"
        );
        assert_eq!(
            refused(new(), &[(RETENTION_DEAD_LETTERS_ENV, "maybe")]),
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
            refused(new(), &[(POLL_INTERVAL_ENV, "0")]),
            "invalid configuration PHOTON_SQLITE_POLL_INTERVAL=\"0\": expected a duration greater than zero"
        );
        assert_eq!(
            refused(new().poll_interval(Duration::ZERO), &[]),
            "invalid configuration poll_interval=\"0\": expected a duration greater than zero"
        );
    }

    #[test]
    fn deserializes_in_the_dialect_checked_and_is_checked_again_on_open() {
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
        let refused = serde_json::from_str::<SqliteConfig>(r#"{"page_size": 0}"#).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "invalid configuration page_size=\"0\": expected an integer of at least 1"
        );
        let unknown = serde_json::from_str::<SqliteConfig>(r#"{"page": 1}"#).unwrap_err();
        assert!(
            unknown.to_string().starts_with("unknown field `page`"),
            "{unknown}"
        );
        let zero = SqliteConfig {
            page_size: 0,
            ..SqliteConfig::default()
        };
        let err = crate::SqliteStoragePort::open_blocking(zero).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid configuration page_size=\"0\": expected an integer of at least 1"
        );
    }

    #[test]
    fn the_configuration_page_holds_the_settings_table() {
        let page = Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("set by the test runner"))
            .join("../docs/configuration.md");
        photon_core::config::assert_documented(&page, &SqliteConfig::settings());
    }
}
