//! Resolution of a builder against the `PHOTON_POSTGRES_*` environment variables (parsed in
//! Photon's one dialect, `photon_core::config`), and the checks of values that parse but
//! cannot work.

use std::time::Duration;

use photon_core::config::{check_count, Env, EnvVar};
use photon_core::raw::sql::settings::{
    check_durations, check_sizes, max_payload_bytes, Retention, RetentionSet, RetentionVars,
};
use photon_core::{PhotonError, Result};

use crate::config::{
    PostgresConfig, PostgresStoragePortBuilder, PHOTON_POSTGRES_CONNECT_TIMEOUT,
    PHOTON_POSTGRES_LOCK_TIMEOUT, PHOTON_POSTGRES_MAX_BATCH, PHOTON_POSTGRES_MAX_PAYLOAD_BYTES,
    PHOTON_POSTGRES_PAGE_SIZE, PHOTON_POSTGRES_POOL_SIZE, PHOTON_POSTGRES_RECHECK_INTERVAL,
    PHOTON_POSTGRES_RETENTION_DEAD_LETTERS, PHOTON_POSTGRES_RETENTION_INTERVAL,
    PHOTON_POSTGRES_RETENTION_MAX_AGE, PHOTON_POSTGRES_RETENTION_MAX_EVENTS,
    PHOTON_POSTGRES_SCHEMA, PHOTON_POSTGRES_URL, PHOTON_POSTGRES_WRITER_CONNECTIONS,
};

/// Every count accepted, from 1.
const POSITIVE: std::ops::RangeInclusive<u64> = 1..=u64::MAX;
/// Longest schema name: the notification channel `photon_<schema>` must fit PostgreSQL's
/// 63-byte identifiers.
const MAX_SCHEMA_LEN: usize = 56;
const RETENTION: RetentionVars<'static> = RetentionVars {
    max_age: &EnvVar::new(PHOTON_POSTGRES_RETENTION_MAX_AGE),
    max_events: &EnvVar::new(PHOTON_POSTGRES_RETENTION_MAX_EVENTS),
    dead_letters: &EnvVar::new(PHOTON_POSTGRES_RETENTION_DEAD_LETTERS),
    interval: &EnvVar::new(PHOTON_POSTGRES_RETENTION_INTERVAL),
};
const SCHEMA_FORM: &str =
    "lowercase letters, digits and _, at most 56 characters, not starting with a digit";

impl PostgresStoragePortBuilder {
    /// Builder values, then `env`, then defaults; then [`validate`].
    pub(crate) fn resolve(self, env: &Env) -> Result<PostgresConfig> {
        let defaults = PostgresConfig::default();
        let default_retention = Retention {
            max_age: defaults.retention_max_age,
            max_events: defaults.retention_max_events,
            dead_letters: defaults.retention_dead_letters,
            interval: defaults.retention_interval,
        };
        let duration = |set: Option<Duration>, name: &'static str, default: Duration| match set {
            Some(value) => Ok(value),
            None => env
                .duration(&EnvVar::new(name))
                .map(|found| found.unwrap_or(default)),
        };
        let count = |set: Option<usize>, name: &'static str, default: usize| match set {
            Some(value) => Ok(value),
            None => env
                .count(&EnvVar::new(name), 1..=usize::MAX as u64)
                .map(|found| found.map_or(default, |n| n as usize)),
        };
        let text = |set: Option<String>, name: &'static str, default: String| match set {
            Some(value) => Ok(value),
            None => env
                .text(&EnvVar::new(name))
                .map(|found| found.unwrap_or(default)),
        };
        // A refused value is named by where it came from: the variable, or the field.
        let url_source = if self.url.is_some() {
            "url"
        } else {
            PHOTON_POSTGRES_URL
        };
        let url = text(self.url, PHOTON_POSTGRES_URL, defaults.url)?;
        check_url(url_source, &url)?;
        let schema_source = if self.schema.is_some() {
            "schema"
        } else {
            PHOTON_POSTGRES_SCHEMA
        };
        let schema = text(self.schema, PHOTON_POSTGRES_SCHEMA, defaults.schema)?;
        check_schema(schema_source, &schema)?;
        let mut config = PostgresConfig {
            url,
            pool_size: count(
                self.pool_size,
                PHOTON_POSTGRES_POOL_SIZE,
                defaults.pool_size,
            )?,
            writer_connections: count(
                self.writer_connections,
                PHOTON_POSTGRES_WRITER_CONNECTIONS,
                defaults.writer_connections,
            )?,
            schema,
            connect_timeout: duration(
                self.connect_timeout,
                PHOTON_POSTGRES_CONNECT_TIMEOUT,
                defaults.connect_timeout,
            )?,
            lock_timeout: duration(
                self.lock_timeout,
                PHOTON_POSTGRES_LOCK_TIMEOUT,
                defaults.lock_timeout,
            )?,
            max_batch: count(
                self.max_batch,
                PHOTON_POSTGRES_MAX_BATCH,
                defaults.max_batch,
            )?,
            page_size: count(
                self.page_size,
                PHOTON_POSTGRES_PAGE_SIZE,
                defaults.page_size,
            )?,
            max_payload_bytes: max_payload_bytes(
                env,
                self.max_payload_bytes,
                &EnvVar::new(PHOTON_POSTGRES_MAX_PAYLOAD_BYTES),
                defaults.max_payload_bytes,
            )?,
            recheck_interval: duration(
                self.recheck_interval,
                PHOTON_POSTGRES_RECHECK_INTERVAL,
                defaults.recheck_interval,
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

/// Refuses values that parse but cannot work, naming the field.
pub(crate) fn validate(config: &PostgresConfig) -> Result<()> {
    check_url("url", &config.url)?;
    check_schema("schema", &config.schema)?;
    check_count("pool_size", config.pool_size as u64, POSITIVE)?;
    check_count(
        "writer_connections",
        config.writer_connections as u64,
        POSITIVE,
    )?;
    check_sizes(
        config.max_batch,
        config.page_size,
        config.max_payload_bytes,
        config.retention_max_events,
    )?;
    check_durations(&[
        ("connect_timeout", Some(config.connect_timeout)),
        ("lock_timeout", Some(config.lock_timeout)),
        ("recheck_interval", Some(config.recheck_interval)),
        ("retention_interval", Some(config.retention_interval)),
        ("retention_max_age", config.retention_max_age),
    ])?;
    if config.lock_timeout > MAX_LOCK_TIMEOUT {
        return Err(PhotonError::config(
            "lock_timeout",
            format!("{:?}", config.lock_timeout),
            format!("a duration of at most {}ms", MAX_LOCK_TIMEOUT.as_millis()),
        ));
    }
    Ok(())
}

/// PostgreSQL's largest `lock_timeout` (an `int` of milliseconds).
const MAX_LOCK_TIMEOUT: Duration = Duration::from_millis(i32::MAX as u64);

/// Refuses a connection string PostgreSQL cannot read, or a refused TLS parameter; the
/// refused value is shown without its password.
fn check_url(variable: &str, url: &str) -> Result<()> {
    crate::connection::check_url(variable, url)
}

fn check_schema(variable: &str, schema: &str) -> Result<()> {
    let accepted = !schema.is_empty()
        && schema.len() <= MAX_SCHEMA_LEN
        && !schema.starts_with(|c: char| c.is_ascii_digit())
        && schema
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if accepted {
        Ok(())
    } else {
        Err(PhotonError::config(variable, schema, SCHEMA_FORM))
    }
}

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
    use super::*;

    fn resolve(
        builder: PostgresStoragePortBuilder,
        pairs: &[(&str, &str)],
    ) -> Result<PostgresConfig> {
        builder.resolve(&Env::from_pairs(pairs.iter().copied()))
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
                (PHOTON_POSTGRES_URL, "postgres://app:secret@db:6432/events"),
                (PHOTON_POSTGRES_POOL_SIZE, "3"),
                (PHOTON_POSTGRES_WRITER_CONNECTIONS, "2"),
                (PHOTON_POSTGRES_SCHEMA, "orders_2"),
                (PHOTON_POSTGRES_CONNECT_TIMEOUT, "2s"),
                (PHOTON_POSTGRES_LOCK_TIMEOUT, "750ms"),
                (PHOTON_POSTGRES_MAX_BATCH, "64"),
                (PHOTON_POSTGRES_PAGE_SIZE, "128"),
                (PHOTON_POSTGRES_MAX_PAYLOAD_BYTES, "4MiB"),
                (PHOTON_POSTGRES_RECHECK_INTERVAL, "250ms"),
                (PHOTON_POSTGRES_RETENTION_MAX_AGE, "7d"),
                (PHOTON_POSTGRES_RETENTION_MAX_EVENTS, "10"),
                (PHOTON_POSTGRES_RETENTION_DEAD_LETTERS, "yes"),
                (PHOTON_POSTGRES_RETENTION_INTERVAL, "1m"),
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
            &[
                (PHOTON_POSTGRES_SCHEMA, "from_env"),
                (PHOTON_POSTGRES_POOL_SIZE, "2"),
            ],
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
            refused(new(), &[(PHOTON_POSTGRES_POOL_SIZE, "many")]),
            "invalid configuration PHOTON_POSTGRES_POOL_SIZE=\"many\": expected an integer of at least 1"
        );
        assert_eq!(
            refused(new(), &[(PHOTON_POSTGRES_SCHEMA, "Photon-Events")]),
            format!("invalid configuration PHOTON_POSTGRES_SCHEMA=\"Photon-Events\": expected {SCHEMA_FORM}")
        );
        assert_eq!(
            refused(new().schema("9lives"), &[]),
            format!("invalid configuration schema=\"9lives\": expected {SCHEMA_FORM}")
        );
        let url = refused(
            new(),
            &[(PHOTON_POSTGRES_URL, "postgres://app:hunter2@db:notaport/x")],
        );
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
        let lock = refused(new(), &[(PHOTON_POSTGRES_LOCK_TIMEOUT, "soon")]);
        assert!(
            lock.starts_with(
                "invalid configuration PHOTON_POSTGRES_LOCK_TIMEOUT=\"soon\": expected"
            ),
            "{lock}"
        );
        assert_eq!(
            refused(new(), &[(PHOTON_POSTGRES_LOCK_TIMEOUT, "0s")]),
            "invalid configuration lock_timeout=\"0\": expected a duration greater than zero"
        );
        assert_eq!(
            refused(new().lock_timeout(Duration::from_secs(30 * 86_400)), &[]),
            "invalid configuration lock_timeout=\"2592000s\": expected a duration of at most 2147483647ms"
        );
        assert_eq!(
            refused(new(), &[(PHOTON_POSTGRES_RECHECK_INTERVAL, "0")]),
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
        let zero: PostgresConfig = serde_json::from_str(r#"{"pool_size": 0}"#).unwrap();
        assert_eq!(
            zero.validate().unwrap_err().to_string(),
            "invalid configuration pool_size=\"0\": expected an integer of at least 1"
        );
    }
}
