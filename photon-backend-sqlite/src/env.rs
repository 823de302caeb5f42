//! Reading `PHOTON_SQLITE_*` values: parsing with errors that name the variable, and the
//! checks of values that parse but cannot work.

use std::time::Duration;

use photon_core::{PhotonError, Result};

use crate::config::{SqliteConfig, Synchronous, PHOTON_SQLITE_SYNCHRONOUS};

/// Refuses values that parse but cannot work (zero sizes and intervals).
pub(crate) fn validate(config: &SqliteConfig) -> Result<()> {
    let positive = [
        ("poll_interval", config.poll_interval.is_zero()),
        ("max_batch", config.max_batch == 0),
        ("page_size", config.page_size == 0),
        ("max_payload_bytes", config.max_payload_bytes == 0),
        ("retention_interval", config.retention_interval.is_zero()),
        (
            "retention_max_age",
            config.retention_max_age.is_some_and(|age| age.is_zero()),
        ),
        (
            "retention_max_events",
            config.retention_max_events == Some(0),
        ),
    ];
    match positive.iter().find(|(_, zero)| *zero) {
        Some((field, _)) => Err(PhotonError::config(
            *field,
            "0",
            "a value greater than zero",
        )),
        None => Ok(()),
    }
}

pub(crate) fn parse<T: std::str::FromStr>(
    variable: &str,
    value: &str,
    expected: &str,
) -> Result<T> {
    value
        .trim()
        .parse()
        .map_err(|_| PhotonError::config(variable, value, expected))
}

pub(crate) fn number<T: std::str::FromStr>(
    set: Option<T>,
    env: &impl Fn(&str) -> Option<String>,
    variable: &str,
    default: T,
) -> Result<T> {
    match (set, env(variable)) {
        (Some(value), _) => Ok(value),
        (None, Some(text)) => parse(variable, &text, "a positive integer"),
        (None, None) => Ok(default),
    }
}

pub(crate) fn millis(
    set: Option<Duration>,
    env: &impl Fn(&str) -> Option<String>,
    variable: &str,
    default_ms: u64,
) -> Result<Duration> {
    let ms = match (set, env(variable)) {
        (Some(value), _) => return Ok(value),
        (None, Some(text)) => parse(variable, &text, "a positive integer of milliseconds")?,
        (None, None) => default_ms,
    };
    Ok(Duration::from_millis(ms))
}

pub(crate) fn optional<T: std::str::FromStr>(
    env: &impl Fn(&str) -> Option<String>,
    variable: &str,
) -> Result<Option<T>> {
    env(variable)
        .map(|text| parse(variable, &text, "a positive integer"))
        .transpose()
}

pub(crate) fn synchronous(env: &impl Fn(&str) -> Option<String>) -> Result<Synchronous> {
    match env(PHOTON_SQLITE_SYNCHRONOUS) {
        None => Ok(Synchronous::default()),
        Some(text) => match text.trim().to_ascii_lowercase().as_str() {
            "normal" => Ok(Synchronous::Normal),
            "full" => Ok(Synchronous::Full),
            _ => Err(PhotonError::config(
                PHOTON_SQLITE_SYNCHRONOUS,
                text,
                "full or normal",
            )),
        },
    }
}

/// A `true`/`false` variable, `false` when unset.
pub(crate) fn flag(env: &impl Fn(&str) -> Option<String>, variable: &str) -> Result<bool> {
    match env(variable) {
        None => Ok(false),
        Some(text) => match text.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" => Ok(true),
            "false" | "0" | "no" => Ok(false),
            _ => Err(PhotonError::config(variable, text, "true or false")),
        },
    }
}
