//! The PostgreSQL port's own kinds of setting (the connection string, the schema name,
//! the lock timeout) for its settings table in `config.rs` (`photon_core::settings!`), and
//! the redaction of passwords; the tests of the table at work.

use std::time::Duration;

use photon_core::config::{Env, EnvVar, Kind, PositiveDuration, TextRule};
use photon_core::{PhotonError, Result};

/// Longest schema name: the notification channel `photon_<schema>` must fit PostgreSQL's
/// 63-byte identifiers.
const MAX_SCHEMA_LEN: usize = 56;
const SCHEMA_FORM: &str =
    "lowercase letters, digits and _, at most 56 characters, not starting with a digit";

/// A connection string PostgreSQL can read, with accepted TLS parameters; shown without
/// its password in `Debug` and in errors.
#[derive(Debug)]
pub enum ConnectionString {}

impl TextRule for ConnectionString {
    fn form() -> String {
        "connection string".to_owned()
    }
    fn check(name: &str, url: &str) -> Result<()> {
        crate::connection::check_url(name, url)
    }
    fn shown(text: &str) -> String {
        redact(text)
    }
}

/// A schema name: lowercase letters, digits and `_`, at most 56 characters, not starting
/// with a digit.
#[derive(Debug)]
pub enum SchemaName {}

impl TextRule for SchemaName {
    fn form() -> String {
        "schema name (`[a-z_][a-z0-9_]*`, at most 56 characters)".to_owned()
    }
    fn check(name: &str, schema: &str) -> Result<()> {
        let accepted = !schema.is_empty()
            && schema.len() <= MAX_SCHEMA_LEN
            && !schema.starts_with(|c: char| c.is_ascii_digit())
            && schema
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if accepted {
            Ok(())
        } else {
            Err(PhotonError::config(name, schema, SCHEMA_FORM))
        }
    }
}

/// PostgreSQL's `lock_timeout`: a duration greater than zero and at most `i32::MAX`
/// milliseconds.
#[derive(Debug)]
pub enum LockTimeout {}

impl Kind for LockTimeout {
    type Value = Duration;
    type Set = Duration;

    fn form() -> String {
        "duration > 0, at most 2147483647ms".to_owned()
    }
    fn set(value: Duration) -> Duration {
        value
    }
    fn read(env: &Env, var: &EnvVar) -> Result<Option<Duration>> {
        PositiveDuration::read(env, var)
    }
    fn parse(field: &str, text: &str) -> Result<Duration> {
        PositiveDuration::parse(field, text)
    }
    fn check(name: &str, timeout: &Duration) -> Result<()> {
        PositiveDuration::check(name, timeout)?;
        if *timeout > MAX_LOCK_TIMEOUT {
            return Err(PhotonError::config(
                name,
                format!("{timeout:?}"),
                format!("a duration of at most {}ms", MAX_LOCK_TIMEOUT.as_millis()),
            ));
        }
        Ok(())
    }
}

/// PostgreSQL's largest `lock_timeout` (an `int` of milliseconds).
const MAX_LOCK_TIMEOUT: Duration = Duration::from_millis(i32::MAX as u64);

/// The connection string with its password replaced by `***` (URL and `key=value` forms).
pub(crate) fn redact(url: &str) -> String {
    if let Some(scheme_end) = url.find("://") {
        let rest = &url[scheme_end + 3..];
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        if let Some(at) = rest[..authority_end].rfind('@') {
            if let Some(colon) = rest[..at].find(':') {
                let start = scheme_end + 3 + colon + 1;
                let end = scheme_end + 3 + at;
                return format!("{}***{}", &url[..start], &url[end..]);
            }
        }
        return match url.split_once('?') {
            Some((base, query)) => format!("{base}?{}", redact_pairs(query, '&')),
            None => url.to_owned(),
        };
    }
    redact_pairs(url, ' ')
}

fn redact_pairs(text: &str, separator: char) -> String {
    text.split(separator)
        .map(|pair| {
            let name = pair.split('=').next().unwrap_or_default();
            if name
                .trim_start_matches('?')
                .trim()
                .eq_ignore_ascii_case("password")
            {
                format!("{name}=***")
            } else {
                pair.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(&separator.to_string())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::*;

    fn resolve(
        builder: PostgresStoragePortBuilder,
        pairs: &[(&str, &str)],
    ) -> Result<PostgresConfig> {
        builder.resolve_with(&Env::from_pairs(pairs.iter().copied()))
    }

    #[test]
    fn defaults_apply_without_env() {
        let config = resolve(PostgresStoragePortBuilder::new(), &[]).unwrap();
        assert_eq!(config, PostgresConfig::default());
        assert_eq!(config.url, "postgres://postgres@127.0.0.1:5432/postgres");
        assert_eq!(config.pool_size, 8);
        assert_eq!(config.schema, "photon");
        assert_eq!(config.connect_timeout, Duration::from_secs(10));
        assert_eq!(config.lock_timeout, Duration::from_secs(5));
        assert_eq!(config.max_batch, 4096);
        assert_eq!(config.page_size, 512);
        assert_eq!(config.recheck_interval, Duration::from_secs(5));
        assert_eq!(config.retention_max_age, None);
        assert!(!config.has_retention());
    }

    #[test]
    fn every_variable_is_read_in_the_dialect() {
        let config = resolve(
            PostgresStoragePortBuilder::new(),
            &[
                (URL_ENV, "postgres://app:secret@db:6432/events"),
                (POOL_SIZE_ENV, "3"),
                (WRITER_CONNECTIONS_ENV, "2"),
                (SCHEMA_ENV, "orders_2"),
                (CONNECT_TIMEOUT_ENV, "2s"),
                (LOCK_TIMEOUT_ENV, "750ms"),
                (MAX_BATCH_ENV, "64"),
                (PAGE_SIZE_ENV, "128"),
                (MAX_PAYLOAD_BYTES_ENV, "4MiB"),
                (RECHECK_INTERVAL_ENV, "250ms"),
                (RETENTION_MAX_AGE_ENV, "7d"),
                (RETENTION_MAX_EVENTS_ENV, "10"),
                (RETENTION_DEAD_LETTERS_ENV, "yes"),
                (RETENTION_INTERVAL_ENV, "1m"),
            ],
        )
        .unwrap();
        assert_eq!(config.url, "postgres://app:secret@db:6432/events");
        assert_eq!(config.pool_size, 3);
        assert_eq!(config.writer_connections, 2);
        assert_eq!(config.schema, "orders_2");
        assert_eq!(config.connect_timeout, Duration::from_secs(2));
        assert_eq!(config.lock_timeout, Duration::from_millis(750));
        assert_eq!(config.max_batch, 64);
        assert_eq!(config.page_size, 128);
        assert_eq!(config.max_payload_bytes, 4 << 20);
        assert_eq!(config.recheck_interval, Duration::from_millis(250));
        assert_eq!(config.retention_max_age, Some(Duration::from_secs(604_800)));
        assert_eq!(config.retention_max_events, Some(10));
        assert!(config.retention_dead_letters);
        assert_eq!(config.retention_interval, Duration::from_secs(60));
    }

    #[test]
    fn builder_beats_env_beats_default() {
        let config = resolve(
            PostgresStoragePortBuilder::new().schema("from_builder"),
            &[(SCHEMA_ENV, "from_env"), (POOL_SIZE_ENV, "2")],
        )
        .unwrap();
        assert_eq!(config.schema, "from_builder");
        assert_eq!(config.pool_size, 2);
        assert_eq!(config.page_size, 512);
    }

    #[test]
    fn bad_values_name_the_variable_or_field() {
        let refused =
            |builder, pairs: &[(&str, &str)]| resolve(builder, pairs).unwrap_err().to_string();
        let new = PostgresStoragePortBuilder::new;
        assert_eq!(
            refused(new(), &[(POOL_SIZE_ENV, "many")]),
            "invalid configuration PHOTON_POSTGRES_POOL_SIZE=\"many\": expected an integer of at least 1"
        );
        assert_eq!(
            refused(new(), &[(SCHEMA_ENV, "Photon-Events")]),
            format!("invalid configuration PHOTON_POSTGRES_SCHEMA=\"Photon-Events\": expected {SCHEMA_FORM}")
        );
        assert_eq!(
            refused(new().schema("9lives"), &[]),
            format!("invalid configuration schema=\"9lives\": expected {SCHEMA_FORM}")
        );
        let url = refused(new(), &[(URL_ENV, "postgres://app:hunter2@db:notaport/x")]);
        assert!(
            url.starts_with(
                "invalid configuration PHOTON_POSTGRES_URL=\"postgres://app:***@db:notaport/x\": expected a PostgreSQL connection string"
            ),
            "{url}"
        );
        assert!(!url.contains("hunter2"), "{url}");
        assert_eq!(
            refused(new().page_size(0), &[]),
            "invalid configuration page_size=\"0\": expected an integer of at least 1"
        );
        let lock = refused(new(), &[(LOCK_TIMEOUT_ENV, "soon")]);
        assert!(
            lock.starts_with(
                "invalid configuration PHOTON_POSTGRES_LOCK_TIMEOUT=\"soon\": expected"
            ),
            "{lock}"
        );
        assert_eq!(
            refused(new(), &[(LOCK_TIMEOUT_ENV, "0s")]),
            "invalid configuration PHOTON_POSTGRES_LOCK_TIMEOUT=\"0\": expected a duration greater than zero"
        );
        assert_eq!(
            refused(new().lock_timeout(Duration::from_secs(30 * 86_400)), &[]),
            "invalid configuration lock_timeout=\"2592000s\": expected a duration of at most 2147483647ms"
        );
        assert_eq!(
            refused(new(), &[(RECHECK_INTERVAL_ENV, "0")]),
            "invalid configuration PHOTON_POSTGRES_RECHECK_INTERVAL=\"0\": expected a duration greater than zero"
        );
        assert_eq!(
            refused(new().recheck_interval(Duration::ZERO), &[]),
            "invalid configuration recheck_interval=\"0\": expected a duration greater than zero"
        );
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact("postgres://app:hunter2@db:5432/events"),
            "postgres://app:***@db:5432/events"
        );
        assert_eq!(
            redact("postgres://app@db/events?password=hunter2&sslmode=disable"),
            "postgres://app@db/events?password=***&sslmode=disable"
        );
        assert_eq!(
            redact("host=db user=app password=hunter2 dbname=events"),
            "host=db user=app password=*** dbname=events"
        );
        assert_eq!(
            redact("postgres://app@db/events"),
            "postgres://app@db/events"
        );
        let config = PostgresConfig {
            url: "postgres://app:hunter2@db/events".into(),
            ..PostgresConfig::default()
        };
        let shown = format!("{config:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("postgres://app:***@db/events"), "{shown}");
        let builder = PostgresStoragePortBuilder::new().url("postgres://app:hunter2@db/events");
        let shown = format!("{builder:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
    }

    #[test]
    fn deserializes_in_the_dialect() {
        let config: PostgresConfig = serde_json::from_str(
            r#"{"url": "postgres://app@db/events", "pool_size": 4, "schema": "billing",
                "max_payload_bytes": "64KiB", "retention_max_age": "1h",
                "retention_dead_letters": "on"}"#,
        )
        .unwrap();
        assert_eq!(config.pool_size, 4);
        assert_eq!(config.schema, "billing");
        assert_eq!(config.max_payload_bytes, 65_536);
        assert_eq!(config.retention_max_age, Some(Duration::from_secs(3600)));
        assert!(config.retention_dead_letters);
        let zero = serde_json::from_str::<PostgresConfig>(r#"{"pool_size": 0}"#).unwrap_err();
        assert_eq!(
            zero.to_string(),
            "invalid configuration pool_size=\"0\": expected an integer of at least 1"
        );
        let zero = PostgresConfig {
            pool_size: 0,
            ..PostgresConfig::default()
        };
        assert_eq!(
            zero.validate().unwrap_err().to_string(),
            "invalid configuration pool_size=\"0\": expected an integer of at least 1"
        );
    }

    #[test]
    fn the_configuration_page_holds_the_settings_table() {
        let page = Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("set by the test runner"))
            .join("../docs/configuration.md");
        photon_core::config::assert_documented(&page, &PostgresConfig::settings());
    }
}
