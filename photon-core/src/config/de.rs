//! Serde `deserialize_with` functions that read config files in the same dialect as the
//! environment: durations and sizes as strings (`"250ms"`, `"64KiB"`; a size may also be a
//! plain number of bytes), flags as booleans or the flag words.
//!
//! ```
//! use std::time::Duration;
//! #[derive(serde::Deserialize)]
//! struct Settings {
//!     #[serde(deserialize_with = "photon_core::config::de::duration")]
//!     timeout: Duration,
//!     #[serde(deserialize_with = "photon_core::config::de::size")]
//!     limit: u64,
//! }
//! let s: Settings = serde_json::from_str(r#"{"timeout": "250ms", "limit": "64KiB"}"#).unwrap();
//! assert_eq!((s.timeout, s.limit), (Duration::from_millis(250), 65_536));
//! ```

use std::fmt;
use std::time::Duration;

use serde::de::{Deserializer, Error, Unexpected, Visitor};
use serde::Deserialize;

use super::parse::{parse_duration, parse_flag, parse_size, DURATION_FORM, FLAG_FORM, SIZE_FORM};

/// A duration written as in the dialect (`"250ms"`, `"7d"`).
///
/// # Errors
/// The deserializer's error, saying what a duration looks like.
pub fn duration<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(deserializer)?;
    parse_duration("", &text)
        .map_err(|_| D::Error::invalid_value(Unexpected::Str(&text), &DURATION_FORM))
}

/// An optional duration: `null` or absent is `None`.
///
/// # Errors
/// As [`duration`].
pub fn optional_duration<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Duration>, D::Error> {
    match Option::<String>::deserialize(deserializer)? {
        None => Ok(None),
        Some(text) => parse_duration("", &text)
            .map(Some)
            .map_err(|_| D::Error::invalid_value(Unexpected::Str(&text), &DURATION_FORM)),
    }
}

/// A size: a number of bytes, or a string in the dialect (`"64KiB"`, `"1MB"`).
///
/// # Errors
/// The deserializer's error, saying what a size looks like, also when the size does not
/// fit the field's type.
pub fn size<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<u64>,
{
    let bytes = deserializer.deserialize_any(SizeVisitor)?;
    T::try_from(bytes).map_err(|_| D::Error::invalid_value(Unexpected::Unsigned(bytes), &SIZE_FORM))
}

/// An optional size: `null` or absent is `None`.
///
/// # Errors
/// As [`size`].
pub fn optional_size<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<u64>,
{
    struct Wrapped<T>(T);
    impl<'de, T: TryFrom<u64>> Deserialize<'de> for Wrapped<T> {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            size(deserializer).map(Wrapped)
        }
    }
    Ok(Option::<Wrapped<T>>::deserialize(deserializer)?.map(|w| w.0))
}

/// A flag: a boolean, or a string of the flag words (`"yes"`, `"off"`, `"1"`).
///
/// # Errors
/// The deserializer's error, listing the flag words.
pub fn flag<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    deserializer.deserialize_any(FlagVisitor)
}

struct SizeVisitor;

impl Visitor<'_> for SizeVisitor {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(SIZE_FORM)
    }

    fn visit_u64<E: Error>(self, bytes: u64) -> Result<u64, E> {
        if bytes < i64::MAX as u64 {
            Ok(bytes)
        } else {
            Err(E::invalid_value(Unexpected::Unsigned(bytes), &self))
        }
    }

    fn visit_i64<E: Error>(self, bytes: i64) -> Result<u64, E> {
        u64::try_from(bytes).map_err(|_| E::invalid_value(Unexpected::Signed(bytes), &self))
    }

    fn visit_str<E: Error>(self, text: &str) -> Result<u64, E> {
        parse_size("", text).map_err(|_| E::invalid_value(Unexpected::Str(text), &self))
    }
}

struct FlagVisitor;

impl Visitor<'_> for FlagVisitor {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(FLAG_FORM)
    }

    fn visit_bool<E: Error>(self, value: bool) -> Result<bool, E> {
        Ok(value)
    }

    fn visit_u64<E: Error>(self, value: u64) -> Result<bool, E> {
        match value {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(E::invalid_value(Unexpected::Unsigned(value), &self)),
        }
    }

    fn visit_i64<E: Error>(self, value: i64) -> Result<bool, E> {
        match value {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(E::invalid_value(Unexpected::Signed(value), &self)),
        }
    }

    fn visit_str<E: Error>(self, text: &str) -> Result<bool, E> {
        parse_flag("", text).map_err(|_| E::invalid_value(Unexpected::Str(text), &self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Settings {
        #[serde(deserialize_with = "duration")]
        timeout: Duration,
        #[serde(default, deserialize_with = "optional_duration")]
        max_age: Option<Duration>,
        #[serde(deserialize_with = "size")]
        limit: usize,
        #[serde(default, deserialize_with = "optional_size")]
        max_bytes: Option<u64>,
        #[serde(deserialize_with = "flag")]
        sync_ack: bool,
    }

    fn read(json: &str) -> Result<Settings, String> {
        serde_json::from_str(json).map_err(|err| err.to_string())
    }

    #[test]
    fn reads_the_dialect() {
        let settings = read(
            r#"{"timeout": "250ms", "max_age": "7d", "limit": "64KiB", "max_bytes": 1000, "sync_ack": "off"}"#,
        )
        .unwrap();
        assert_eq!(
            settings,
            Settings {
                timeout: Duration::from_millis(250),
                max_age: Some(Duration::from_secs(604_800)),
                limit: 65_536,
                max_bytes: Some(1000),
                sync_ack: false,
            }
        );
        let settings =
            read(r#"{"timeout": "1s", "max_age": null, "limit": 10, "sync_ack": true}"#).unwrap();
        assert_eq!((settings.max_age, settings.max_bytes), (None, None));
    }

    #[test]
    fn refusals_say_what_is_expected() {
        let err = read(r#"{"timeout": "10", "limit": 1, "sync_ack": true}"#).unwrap_err();
        assert_eq!(
            err,
            format!("invalid value: string \"10\", expected {DURATION_FORM} at line 1 column 16")
        );
        let err = read(r#"{"timeout": "1s", "limit": "lots", "sync_ack": true}"#).unwrap_err();
        assert_eq!(
            err,
            format!("invalid value: string \"lots\", expected {SIZE_FORM} at line 1 column 33")
        );
        let err = read(r#"{"timeout": "1s", "limit": 1, "sync_ack": "maybe"}"#).unwrap_err();
        assert_eq!(
            err,
            format!("invalid value: string \"maybe\", expected {FLAG_FORM} at line 1 column 49")
        );
    }
}
