//! The value forms of Photon's configuration dialect, each refused with a
//! [`PhotonError::Config`] that names the variable, the value and the accepted form.

use std::ops::RangeInclusive;
use std::time::Duration;

use crate::error::{PhotonError, Result};

/// What a duration looks like, for error messages.
pub const DURATION_FORM: &str =
    "a duration with a unit, such as 250ms, 30s, 5m, 12h or 7d (units may be combined: 1h 30m)";
/// What a size looks like, for error messages.
pub const SIZE_FORM: &str =
    "a size in bytes, optionally with a unit, such as 512, 64KiB, 1MiB or 1MB (KiB = 1024 B, KB = 1000 B)";
/// What a flag looks like, for error messages.
pub const FLAG_FORM: &str = "true or false (also 1/0, yes/no, on/off, in any case)";

/// Parses a duration: humantime's form (`250ms`, `30s`, `7d`, `1h 30m`), or `0`.
///
/// ```
/// use std::time::Duration;
/// use photon_core::config::parse_duration;
/// assert_eq!(parse_duration("X", "250ms").unwrap(), Duration::from_millis(250));
/// assert_eq!(parse_duration("X", "7d").unwrap(), Duration::from_secs(7 * 86_400));
/// ```
///
/// # Errors
/// [`PhotonError::Config`] naming `variable` when the text is not a duration (a number
/// without a unit is refused: it could mean any unit).
pub fn parse_duration(variable: &str, text: &str) -> Result<Duration> {
    humantime::parse_duration(text.trim())
        .map_err(|_| PhotonError::config(variable, text, DURATION_FORM))
}

/// Parses a size in bytes: a whole number of bytes, or a number with a unit (`64KiB`,
/// `1.5MiB`, `1MB`; `K`, `M`, `G` alone are decimal like `KB`), case-insensitive.
///
/// ```
/// use photon_core::config::parse_size;
/// assert_eq!(parse_size("X", "64KiB").unwrap(), 65_536);
/// assert_eq!(parse_size("X", "1MB").unwrap(), 1_000_000);
/// assert_eq!(parse_size("X", "512").unwrap(), 512);
/// ```
///
/// # Errors
/// [`PhotonError::Config`] naming `variable` when the text is not a size or does not fit
/// in an `i64` of bytes.
pub fn parse_size(variable: &str, text: &str) -> Result<u64> {
    let refuse = || PhotonError::config(variable, text, SIZE_FORM);
    let trimmed = text.trim();
    if !trimmed.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(refuse());
    }
    // bytesize saturates on overflow; the largest size any port stores is i64::MAX.
    let size: bytesize::ByteSize = trimmed.parse().map_err(|_| refuse())?;
    match size.as_u64() {
        bytes if bytes < i64::MAX as u64 => Ok(bytes),
        _ => Err(refuse()),
    }
}

/// Parses a flag: `true`/`false`, `1`/`0`, `yes`/`no`, `on`/`off`, in any case.
///
/// ```
/// use photon_core::config::parse_flag;
/// assert!(parse_flag("X", "Yes").unwrap());
/// assert!(!parse_flag("X", "OFF").unwrap());
/// ```
///
/// # Errors
/// [`PhotonError::Config`] naming `variable` for any other text.
pub fn parse_flag(variable: &str, text: &str) -> Result<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(PhotonError::config(variable, text, FLAG_FORM)),
    }
}

/// Parses a count: a whole number within `range`.
///
/// ```
/// use photon_core::config::parse_count;
/// assert_eq!(parse_count("X", "16", 1..=64).unwrap(), 16);
/// assert!(parse_count("X", "65", 1..=64).is_err());
/// ```
///
/// # Errors
/// [`PhotonError::Config`] naming `variable` and the range when the text is not a whole
/// number within it.
pub fn parse_count(variable: &str, text: &str, range: RangeInclusive<u64>) -> Result<u64> {
    match text.trim().parse::<u64>() {
        Ok(count) if range.contains(&count) => Ok(count),
        _ => Err(PhotonError::config(variable, text, count_form(&range))),
    }
}

/// Checks a count set in code (a builder call or a deserialized field) against `range`.
///
/// # Errors
/// [`PhotonError::Config`] naming `field` and the range.
pub fn check_count(field: &str, count: u64, range: RangeInclusive<u64>) -> Result<u64> {
    if range.contains(&count) {
        Ok(count)
    } else {
        Err(PhotonError::config(
            field,
            count.to_string(),
            count_form(&range),
        ))
    }
}

/// Parses one of a fixed set of words, in any case.
///
/// ```
/// use photon_core::config::parse_choice;
/// #[derive(Debug, Clone, Copy, PartialEq)]
/// enum Sync { Full, Normal }
/// let choices = [("full", Sync::Full), ("normal", Sync::Normal)];
/// assert_eq!(parse_choice("X", "Normal", &choices).unwrap(), Sync::Normal);
/// ```
///
/// # Errors
/// [`PhotonError::Config`] naming `variable` and listing the words.
pub fn parse_choice<T: Copy>(variable: &str, text: &str, choices: &[(&str, T)]) -> Result<T> {
    let wanted = text.trim();
    choices
        .iter()
        .find(|(word, _)| word.eq_ignore_ascii_case(wanted))
        .map(|(_, value)| *value)
        .ok_or_else(|| PhotonError::config(variable, text, choice_form(choices)))
}

/// `"a or b"`, `"a, b or c"`.
pub(crate) fn choice_form<T>(choices: &[(&str, T)]) -> String {
    either(choices.iter().map(|(word, _)| (*word).to_owned()).collect())
}

/// The words joined as alternatives: `"a or b"`, `"a, b or c"`.
pub(crate) fn either(words: Vec<String>) -> String {
    match words.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => "nothing".to_owned(),
    }
}

fn count_form(range: &RangeInclusive<u64>) -> String {
    if *range.end() == u64::MAX {
        format!("an integer of at least {}", range.start())
    } else {
        format!("an integer from {} to {}", range.start(), range.end())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(result: Result<impl std::fmt::Debug>) -> String {
        match result {
            Err(err @ PhotonError::Config { .. }) => err.to_string(),
            other => panic!("expected a configuration error, got {other:?}"),
        }
    }

    #[test]
    fn durations() {
        let cases = [
            ("0", Duration::ZERO),
            ("250ms", Duration::from_millis(250)),
            (" 30s ", Duration::from_secs(30)),
            ("90m", Duration::from_secs(5400)),
            ("12h", Duration::from_secs(43_200)),
            ("7d", Duration::from_secs(604_800)),
            ("1h 30m", Duration::from_secs(5400)),
            ("500us", Duration::from_micros(500)),
            ("1.5h", Duration::from_secs(5400)),
        ];
        for (text, expected) in cases {
            assert_eq!(
                parse_duration("PHOTON_X", text).unwrap(),
                expected,
                "{text}"
            );
        }
        assert_eq!(
            message(parse_duration("PHOTON_X_TIMEOUT", "10")),
            format!("invalid configuration PHOTON_X_TIMEOUT=\"10\": expected {DURATION_FORM}")
        );
        for bad in ["", "7 fortnights", "-1s", "s", "5 parsecs"] {
            assert!(
                message(parse_duration("PHOTON_X_TIMEOUT", bad)).contains("PHOTON_X_TIMEOUT"),
                "{bad}"
            );
        }
    }

    #[test]
    fn sizes() {
        let cases = [
            ("0", 0),
            ("512", 512),
            ("64KiB", 65_536),
            ("64kib", 65_536),
            ("1MiB", 1 << 20),
            ("1.5MiB", 3 << 19),
            ("1MB", 1_000_000),
            ("2G", 2_000_000_000),
            ("2 GiB", 2 << 30),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_size("PHOTON_X", text).unwrap(), expected, "{text}");
        }
        assert_eq!(
            message(parse_size("PHOTON_X_BYTES", "lots")),
            format!("invalid configuration PHOTON_X_BYTES=\"lots\": expected {SIZE_FORM}")
        );
        for bad in ["", "-1", "1XB", "99999999999PiB", "KiB"] {
            assert!(
                message(parse_size("PHOTON_X_BYTES", bad)).contains("PHOTON_X_BYTES"),
                "{bad}"
            );
        }
    }

    #[test]
    fn flags() {
        for text in ["true", "TRUE", "1", "yes", "Yes", "on", " ON "] {
            assert!(parse_flag("PHOTON_X", text).unwrap(), "{text}");
        }
        for text in ["false", "False", "0", "no", "NO", "off", "Off"] {
            assert!(!parse_flag("PHOTON_X", text).unwrap(), "{text}");
        }
        assert_eq!(
            message(parse_flag("PHOTON_X_SYNC_ACK", "maybe")),
            "invalid configuration PHOTON_X_SYNC_ACK=\"maybe\": expected true or false \
             (also 1/0, yes/no, on/off, in any case)"
        );
    }

    #[test]
    fn counts() {
        assert_eq!(parse_count("PHOTON_X", " 64 ", 1..=64).unwrap(), 64);
        assert_eq!(
            message(parse_count("PHOTON_X_SHARDS", "65", 1..=64)),
            "invalid configuration PHOTON_X_SHARDS=\"65\": expected an integer from 1 to 64"
        );
        assert_eq!(
            message(parse_count("PHOTON_X_READERS", "-1", 1..=u64::MAX)),
            "invalid configuration PHOTON_X_READERS=\"-1\": expected an integer of at least 1"
        );
        assert_eq!(check_count("shards", 4, 1..=64).unwrap(), 4);
        assert_eq!(
            message(check_count("shards", 0, 1..=64)),
            "invalid configuration shards=\"0\": expected an integer from 1 to 64"
        );
    }

    #[test]
    fn choices() {
        let choices = [("stream_seq", 1), ("tail_only", 2)];
        assert_eq!(parse_choice("PHOTON_X", "TAIL_ONLY", &choices).unwrap(), 2);
        assert_eq!(
            message(parse_choice("PHOTON_X_CURSOR", "offset", &choices)),
            "invalid configuration PHOTON_X_CURSOR=\"offset\": expected stream_seq or tail_only"
        );
        assert_eq!(choice_form(&[("a", ()), ("b", ()), ("c", ())]), "a, b or c");
    }
}
