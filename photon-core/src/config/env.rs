//! Reading settings from environment variables: one canonical name per setting, older
//! names kept as aliases, blank values treated as unset.

use std::collections::HashMap;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::time::Duration;

use super::parse::{parse_choice, parse_count, parse_duration, parse_flag, parse_size};
use crate::error::{PhotonError, Result};

/// An environment variable of a setting, with the older names that are still read.
///
/// ```
/// use photon_core::config::{Alias, EnvVar};
/// const POLL_INTERVAL: EnvVar = EnvVar::new("PHOTON_SQLITE_POLL_INTERVAL")
///     .aliases(&[Alias::deprecated_millis("PHOTON_SQLITE_POLL_INTERVAL_MS")]);
/// assert_eq!(POLL_INTERVAL.name, "PHOTON_SQLITE_POLL_INTERVAL");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnvVar {
    /// The name documented for the setting.
    pub name: &'static str,
    /// Other names read when `name` is unset.
    pub aliases: &'static [Alias],
}

impl EnvVar {
    /// A variable without aliases.
    pub const fn new(name: &'static str) -> Self {
        Self { name, aliases: &[] }
    }

    /// The same variable, also read under `aliases`.
    pub const fn aliases(self, aliases: &'static [Alias]) -> Self {
        Self {
            name: self.name,
            aliases,
        }
    }
}

/// Another name under which a setting is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Alias {
    /// The variable's name.
    pub name: &'static str,
    /// How its value is read.
    pub form: AliasForm,
    /// Whether reading it logs a deprecation warning naming the canonical variable.
    pub deprecated: bool,
}

/// How an alias's value is read: the dialect, or the bare number its name once promised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AliasForm {
    /// The same form as the canonical variable.
    Dialect,
    /// A bare whole number is this duration's multiple (`_MS`, `_US`, `_SECS` names); a
    /// value with a unit is read as a duration.
    Unit(Duration),
    /// A size whose one-letter suffixes `k`, `m`, `g` are binary (1024-based), as sizes
    /// were written before the dialect; other values are read as sizes.
    BinaryLetters,
}

impl Alias {
    /// A name kept for compatibility that is not deprecated (same form).
    pub const fn also(name: &'static str) -> Self {
        Self {
            name,
            form: AliasForm::Dialect,
            deprecated: false,
        }
    }

    /// A deprecated name read in the dialect.
    pub const fn deprecated(name: &'static str) -> Self {
        Self {
            name,
            form: AliasForm::Dialect,
            deprecated: true,
        }
    }

    /// A deprecated name whose bare numbers are milliseconds.
    pub const fn deprecated_millis(name: &'static str) -> Self {
        Self::deprecated_unit(name, Duration::from_millis(1))
    }

    /// A deprecated name whose bare numbers are seconds.
    pub const fn deprecated_secs(name: &'static str) -> Self {
        Self::deprecated_unit(name, Duration::from_secs(1))
    }

    /// A deprecated name whose bare numbers are microseconds.
    pub const fn deprecated_micros(name: &'static str) -> Self {
        Self::deprecated_unit(name, Duration::from_micros(1))
    }

    /// A deprecated name of a size with binary `k`, `m`, `g` suffixes.
    pub const fn deprecated_binary_letters(name: &'static str) -> Self {
        Self {
            name,
            form: AliasForm::BinaryLetters,
            deprecated: true,
        }
    }

    const fn deprecated_unit(name: &'static str, unit: Duration) -> Self {
        Self {
            name,
            form: AliasForm::Unit(unit),
            deprecated: true,
        }
    }
}

/// A value found in the environment, with the name it was found under (see [`Env::read`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The variable that held it (the canonical name or an alias).
    pub name: &'static str,
    /// The text as set.
    pub text: String,
    /// How to read it.
    pub form: AliasForm,
}

type Lookup = Box<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Where settings are looked up: the process environment, or a fixed set of pairs.
///
/// ```
/// use std::time::Duration;
/// use photon_core::config::{Env, EnvVar};
/// let env = Env::from_pairs([("PHOTON_X_TIMEOUT", "250ms")]);
/// let timeout = env.duration(&EnvVar::new("PHOTON_X_TIMEOUT")).unwrap();
/// assert_eq!(timeout, Some(Duration::from_millis(250)));
/// ```
pub struct Env {
    lookup: Lookup,
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Env").finish_non_exhaustive()
    }
}

impl Env {
    /// The process environment.
    pub fn process() -> Self {
        Self::from_fn(|name| std::env::var(name).ok())
    }

    /// Exactly these variables (tests, or settings read from elsewhere).
    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        let map: HashMap<String, String> = pairs
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        Self::from_fn(move |name| map.get(name).cloned())
    }

    /// Whatever `lookup` returns.
    pub fn from_fn(lookup: impl Fn(&str) -> Option<String> + Send + Sync + 'static) -> Self {
        Self {
            lookup: Box::new(lookup),
        }
    }

    fn get(&self, name: &str) -> Option<String> {
        (self.lookup)(name).filter(|text| !text.trim().is_empty())
    }

    /// The name `var`'s value is read under: its own when set, else the first alias set
    /// (`var`'s own when none is).
    pub fn source(&self, var: &EnvVar) -> &'static str {
        if self.get(var.name).is_some() {
            return var.name;
        }
        var.aliases
            .iter()
            .find(|alias| self.get(alias.name).is_some())
            .map_or(var.name, |alias| alias.name)
    }

    /// The value of `var` as `read` reads it: under its name, else under the first alias
    /// that is set. Blank values count as unset.
    ///
    /// # Errors
    /// What `read` returns for the value found; [`PhotonError::Config`] naming both
    /// variables when the name and an alias are set to different values.
    pub fn read<T: PartialEq>(
        &self,
        var: &EnvVar,
        read: impl Fn(&Found) -> Result<T>,
    ) -> Result<Option<T>> {
        let canonical = self.get(var.name).map(|text| Found {
            name: var.name,
            text,
            form: AliasForm::Dialect,
        });
        let alias = var.aliases.iter().find_map(|alias| {
            self.get(alias.name).map(|text| {
                let found = Found {
                    name: alias.name,
                    text,
                    form: alias.form,
                };
                (alias.deprecated, found)
            })
        });
        match (canonical, alias) {
            (Some(canonical), Some((_, older))) => {
                let value = read(&canonical)?;
                if read(&older)? == value {
                    Ok(Some(value))
                } else {
                    Err(PhotonError::config(
                        canonical.name,
                        canonical.text,
                        format!(
                            "the same value as {}={:?}, an older name of this setting (or unset it)",
                            older.name, older.text
                        ),
                    ))
                }
            }
            (Some(canonical), None) => read(&canonical).map(Some),
            (None, Some((deprecated, older))) => {
                if deprecated {
                    tracing::warn!(
                        "{} is deprecated and will be removed; set {} instead",
                        older.name,
                        var.name
                    );
                }
                read(&older).map(Some)
            }
            (None, None) => Ok(None),
        }
    }

    /// A text setting, trimmed.
    ///
    /// # Errors
    /// As [`Env::read`].
    pub fn text(&self, var: &EnvVar) -> Result<Option<String>> {
        self.read(var, |found| Ok(found.text.trim().to_owned()))
    }

    /// A path setting.
    ///
    /// # Errors
    /// As [`Env::read`].
    pub fn path(&self, var: &EnvVar) -> Result<Option<PathBuf>> {
        Ok(self.text(var)?.map(PathBuf::from))
    }

    /// A duration setting (see [`super::parse_duration`]).
    ///
    /// # Errors
    /// [`PhotonError::Config`] naming the variable that holds a value that is not a
    /// duration.
    pub fn duration(&self, var: &EnvVar) -> Result<Option<Duration>> {
        self.read(var, |found| {
            if let AliasForm::Unit(unit) = found.form {
                if let Ok(count) = found.text.trim().parse::<u32>() {
                    return Ok(unit * count);
                }
            }
            parse_duration(found.name, &found.text)
        })
    }

    /// A size setting in bytes (see [`super::parse_size`]).
    ///
    /// # Errors
    /// [`PhotonError::Config`] naming the variable that holds a value that is not a size.
    pub fn size(&self, var: &EnvVar) -> Result<Option<u64>> {
        self.read(var, |found| {
            if found.form == AliasForm::BinaryLetters {
                if let Some(bytes) = binary_letters(&found.text) {
                    return Ok(bytes);
                }
            }
            parse_size(found.name, &found.text)
        })
    }

    /// A flag setting (see [`super::parse_flag`]).
    ///
    /// # Errors
    /// [`PhotonError::Config`] naming the variable that holds a value that is not a flag.
    pub fn flag(&self, var: &EnvVar) -> Result<Option<bool>> {
        self.read(var, |found| parse_flag(found.name, &found.text))
    }

    /// A count setting within `range` (see [`super::parse_count`]).
    ///
    /// # Errors
    /// [`PhotonError::Config`] naming the variable and the range.
    pub fn count(&self, var: &EnvVar, range: RangeInclusive<u64>) -> Result<Option<u64>> {
        self.read(var, |found| {
            parse_count(found.name, &found.text, range.clone())
        })
    }

    /// One of a fixed set of words (see [`super::parse_choice`]).
    ///
    /// # Errors
    /// [`PhotonError::Config`] naming the variable and listing the words.
    pub fn choice<T: Copy + PartialEq>(
        &self,
        var: &EnvVar,
        choices: &[(&str, T)],
    ) -> Result<Option<T>> {
        self.read(var, |found| parse_choice(found.name, &found.text, choices))
    }
}

/// `64k`, `2G`: a whole number with one binary letter, the size form before the dialect.
fn binary_letters(text: &str) -> Option<u64> {
    let text = text.trim();
    let (digits, letter) = text.split_at(text.len().checked_sub(1)?);
    let shift = match letter.to_ascii_lowercase().as_str() {
        "k" => 10,
        "m" => 20,
        "g" => 30,
        _ => return None,
    };
    let bytes = digits.parse::<u64>().ok()?.checked_mul(1 << shift)?;
    (bytes < i64::MAX as u64).then_some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: EnvVar =
        EnvVar::new("PHOTON_T_TIMEOUT").aliases(&[Alias::deprecated_millis("PHOTON_T_TIMEOUT_MS")]);
    const LIMIT: EnvVar = EnvVar::new("PHOTON_T_RETENTION_MAX_BYTES")
        .aliases(&[Alias::deprecated_binary_letters("PHOTON_T_MAX_BYTES")]);
    const SHARDS: EnvVar =
        EnvVar::new("PHOTON_T_SHARDS").aliases(&[Alias::also("PHOTON_T_TOPIC_SHARDS")]);

    #[test]
    fn canonical_name_then_alias_then_unset() {
        let env = Env::from_pairs([("PHOTON_T_TIMEOUT", "2s"), ("PHOTON_T_TIMEOUT_MS", "2000")]);
        assert_eq!(
            env.duration(&TIMEOUT).unwrap(),
            Some(Duration::from_secs(2))
        );
        let env = Env::from_pairs([("PHOTON_T_TIMEOUT_MS", "250")]);
        assert_eq!(
            env.duration(&TIMEOUT).unwrap(),
            Some(Duration::from_millis(250))
        );
        let env = Env::from_pairs([("PHOTON_T_TIMEOUT_MS", "1m")]);
        assert_eq!(
            env.duration(&TIMEOUT).unwrap(),
            Some(Duration::from_secs(60))
        );
        let env = Env::from_pairs([("PHOTON_T_TIMEOUT", "  ")]);
        assert_eq!(env.duration(&TIMEOUT).unwrap(), None);
        let env = Env::from_pairs([("PHOTON_T_TOPIC_SHARDS", "4")]);
        assert_eq!(env.count(&SHARDS, 1..=8).unwrap(), Some(4));
    }

    #[test]
    fn errors_name_the_variable_that_was_set() {
        let env = Env::from_pairs([("PHOTON_T_TIMEOUT_MS", "soon")]);
        assert_eq!(
            env.duration(&TIMEOUT).unwrap_err().to_string(),
            format!(
                "invalid configuration PHOTON_T_TIMEOUT_MS=\"soon\": expected {}",
                super::super::parse::DURATION_FORM
            )
        );
        let env = Env::from_pairs([("PHOTON_T_TOPIC_SHARDS", "9")]);
        assert_eq!(
            env.count(&SHARDS, 1..=8).unwrap_err().to_string(),
            "invalid configuration PHOTON_T_TOPIC_SHARDS=\"9\": expected an integer from 1 to 8"
        );
    }

    #[test]
    fn disagreeing_names_are_refused() {
        let env = Env::from_pairs([("PHOTON_T_SHARDS", "2"), ("PHOTON_T_TOPIC_SHARDS", "4")]);
        assert_eq!(
            env.count(&SHARDS, 1..=8).unwrap_err().to_string(),
            "invalid configuration PHOTON_T_SHARDS=\"2\": expected the same value as \
             PHOTON_T_TOPIC_SHARDS=\"4\", an older name of this setting (or unset it)"
        );
        let env = Env::from_pairs([("PHOTON_T_SHARDS", "4"), ("PHOTON_T_TOPIC_SHARDS", "04")]);
        assert_eq!(env.count(&SHARDS, 1..=8).unwrap(), Some(4));
        let env = Env::from_pairs([("PHOTON_T_TIMEOUT", "1s"), ("PHOTON_T_TIMEOUT_MS", "900")]);
        assert_eq!(
            env.duration(&TIMEOUT).unwrap_err().to_string(),
            "invalid configuration PHOTON_T_TIMEOUT=\"1s\": expected the same value as \
             PHOTON_T_TIMEOUT_MS=\"900\", an older name of this setting (or unset it)"
        );
    }

    #[test]
    fn old_sizes_keep_binary_letters() {
        let env = Env::from_pairs([("PHOTON_T_MAX_BYTES", "2g")]);
        assert_eq!(env.size(&LIMIT).unwrap(), Some(2 << 30));
        let env = Env::from_pairs([("PHOTON_T_MAX_BYTES", "64K")]);
        assert_eq!(env.size(&LIMIT).unwrap(), Some(64 << 10));
        let env = Env::from_pairs([("PHOTON_T_MAX_BYTES", "1MB")]);
        assert_eq!(env.size(&LIMIT).unwrap(), Some(1_000_000));
        let env = Env::from_pairs([("PHOTON_T_RETENTION_MAX_BYTES", "2G")]);
        assert_eq!(env.size(&LIMIT).unwrap(), Some(2_000_000_000));
    }

    #[test]
    fn flags_and_choices() {
        let flag = EnvVar::new("PHOTON_T_SYNC_ACK");
        let env = Env::from_pairs([("PHOTON_T_SYNC_ACK", "Off")]);
        assert_eq!(env.flag(&flag).unwrap(), Some(false));
        let cursor = EnvVar::new("PHOTON_T_REPLAY_CURSOR");
        let env = Env::from_pairs([("PHOTON_T_REPLAY_CURSOR", "tail_only")]);
        assert_eq!(
            env.choice(&cursor, &[("stream_seq", 0), ("tail_only", 1)])
                .unwrap(),
            Some(1)
        );
    }
}
