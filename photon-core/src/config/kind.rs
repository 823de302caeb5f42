//! The kinds of a setting: how a value is read from the environment and from a config
//! file, what is accepted, and how the docs describe it. A kind is a type, so that a
//! settings table ([`settings!`](crate::settings)) names it once per row and the builder's
//! setter, the config's field, the variable's parsing and the check all follow from it.

use std::fmt;
use std::marker::PhantomData;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::env::{Alias, Env, EnvVar};
use super::parse::{
    check_count, either, parse_choice, parse_count, parse_duration, parse_flag, parse_size,
};
use crate::error::{PhotonError, Result};

/// How a setting of one kind is read, set and checked.
pub trait Kind {
    /// The config's field type.
    type Value: Clone + fmt::Debug;
    /// What the builder's setter takes (the value itself, or the inner value of an
    /// optional setting).
    type Set;

    /// What is accepted, as the docs' tables say it (`duration`, `count ≥ 1`).
    fn form() -> String;
    /// The setter's value as the config holds it.
    fn set(value: Self::Set) -> Self::Value;
    /// The value of `var` in `env`, `None` when unset; its bounds are [`Kind::check`]'s.
    ///
    /// # Errors
    /// [`PhotonError::Config`] naming the variable of a value that does not parse.
    fn read(env: &Env, var: &EnvVar) -> Result<Option<Self::Value>>;
    /// A value written in a config file (as text: numbers and flags are written out),
    /// `field` naming it in the error; its bounds are [`Kind::check`]'s.
    ///
    /// # Errors
    /// [`PhotonError::Config`] naming the field.
    fn parse(field: &str, text: &str) -> Result<Self::Value>;
    /// Refuses a value that parses but cannot work, naming where it came from (`name`: the
    /// variable, the config file's field or the builder's setter); every value of a kind
    /// without bounds works. `settings!` applies it once to every value it resolves.
    ///
    /// # Errors
    /// [`PhotonError::Config`] naming `name`.
    fn check(_name: &str, _value: &Self::Value) -> Result<()> {
        Ok(())
    }
    /// The value a config file's `null` stands for, where the kind has one.
    fn null() -> Option<Self::Value> {
        None
    }
    /// Writes the value for the config's `Debug` (a kind holding a secret hides it).
    ///
    /// # Errors
    /// The formatter's.
    fn debug(value: &Self::Value, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(value, f)
    }
}

/// A value resolved for a setting of kind `K`: the builder's (`set`, named by the field)
/// or else `env`'s (named by the variable), checked; `None` when neither holds one.
///
/// # Errors
/// [`PhotonError::Config`] naming the field or the variable of a value that does not
/// parse or is refused by [`Kind::check`].
pub fn resolve<K: Kind>(
    field: &str,
    set: Option<K::Value>,
    env: &Env,
    var: &EnvVar,
) -> Result<Option<K::Value>> {
    let (value, name) = match set {
        Some(value) => (Some(value), field),
        None => (K::read(env, var)?, env.source(var)),
    };
    if let Some(value) = &value {
        K::check(name, value)?;
    }
    Ok(value)
}

/// A value shown in `Debug` as its kind says ([`Kind::debug`]).
pub struct DebugValue<'a, K: Kind>(pub &'a K::Value);

impl<K: Kind> fmt::Debug for DebugValue<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        K::debug(self.0, f)
    }
}

/// Free text, trimmed.
#[derive(Debug)]
pub enum Text {}

impl Kind for Text {
    type Value = String;
    type Set = String;

    fn form() -> String {
        "text".to_owned()
    }
    fn set(value: String) -> String {
        value
    }
    fn read(env: &Env, var: &EnvVar) -> Result<Option<String>> {
        env.text(var)
    }
    fn parse(_field: &str, text: &str) -> Result<String> {
        Ok(text.trim().to_owned())
    }
}

/// What text a [`Checked`] setting accepts: names, prefixes, URLs.
pub trait TextRule {
    /// What is accepted, as the docs' tables say it.
    fn form() -> String;
    /// Refuses text that cannot work, naming `name` (the variable, field or setter).
    ///
    /// # Errors
    /// [`PhotonError::Config`] naming `name`.
    fn check(name: &str, text: &str) -> Result<()>;
    /// The text as `Debug` shows it (a rule for text that holds secrets hides them).
    fn shown(text: &str) -> String {
        text.to_owned()
    }
}

/// Text, trimmed, that rule `R` accepts ([`TextRule`]).
#[derive(Debug)]
pub struct Checked<R>(PhantomData<R>);

impl<R: TextRule> Kind for Checked<R> {
    type Value = String;
    type Set = String;

    fn form() -> String {
        R::form()
    }
    fn set(value: String) -> String {
        value
    }
    fn read(env: &Env, var: &EnvVar) -> Result<Option<String>> {
        Text::read(env, var)
    }
    fn parse(field: &str, text: &str) -> Result<String> {
        Text::parse(field, text)
    }
    fn check(name: &str, text: &String) -> Result<()> {
        R::check(name, text)
    }
    fn debug(value: &String, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&R::shown(value), f)
    }
}

/// A file path.
#[derive(Debug)]
pub enum FilePath {}

impl Kind for FilePath {
    type Value = PathBuf;
    type Set = PathBuf;

    fn form() -> String {
        "path".to_owned()
    }
    fn set(value: PathBuf) -> PathBuf {
        value
    }
    fn read(env: &Env, var: &EnvVar) -> Result<Option<PathBuf>> {
        env.path(var)
    }
    fn parse(_field: &str, text: &str) -> Result<PathBuf> {
        Ok(PathBuf::from(text.trim()))
    }
}

/// A duration, zero included (a wait that may be none).
#[derive(Debug)]
pub enum AnyDuration {}

impl Kind for AnyDuration {
    type Value = Duration;
    type Set = Duration;

    fn form() -> String {
        "duration".to_owned()
    }
    fn set(value: Duration) -> Duration {
        value
    }
    fn read(env: &Env, var: &EnvVar) -> Result<Option<Duration>> {
        env.duration(var)
    }
    fn parse(field: &str, text: &str) -> Result<Duration> {
        parse_duration(field, text)
    }
}

/// A duration greater than zero (an interval or a timeout, which zero would break).
#[derive(Debug)]
pub enum PositiveDuration {}

impl Kind for PositiveDuration {
    type Value = Duration;
    type Set = Duration;

    fn form() -> String {
        "duration > 0".to_owned()
    }
    fn set(value: Duration) -> Duration {
        value
    }
    fn read(env: &Env, var: &EnvVar) -> Result<Option<Duration>> {
        AnyDuration::read(env, var)
    }
    fn parse(field: &str, text: &str) -> Result<Duration> {
        AnyDuration::parse(field, text)
    }
    fn check(name: &str, value: &Duration) -> Result<()> {
        if value.is_zero() {
            return Err(PhotonError::config(
                name,
                "0",
                "a duration greater than zero",
            ));
        }
        Ok(())
    }
}

/// A number from 0 to 1 (a share, such as a jitter).
#[derive(Debug)]
pub enum Fraction {}

impl Kind for Fraction {
    type Value = f64;
    type Set = f64;

    fn form() -> String {
        "number from 0 to 1".to_owned()
    }
    fn set(value: f64) -> f64 {
        value
    }
    fn read(env: &Env, var: &EnvVar) -> Result<Option<f64>> {
        env.read(var, |found| Self::parse(found.name, &found.text))
    }
    fn parse(field: &str, text: &str) -> Result<f64> {
        text.trim()
            .parse::<f64>()
            .map_err(|_| PhotonError::config(field, text, "a number from 0 to 1"))
    }
    fn check(name: &str, value: &f64) -> Result<()> {
        if (0.0..=1.0).contains(value) {
            Ok(())
        } else {
            Err(PhotonError::config(
                name,
                value.to_string(),
                "a number from 0 to 1",
            ))
        }
    }
}

/// A whole number in `MIN..=MAX`, held as `T`.
#[derive(Debug)]
pub struct Count<T, const MIN: u64 = 0, const MAX: u64 = { u64::MAX }>(PhantomData<T>);

impl<T, const MIN: u64, const MAX: u64> Count<T, MIN, MAX> {
    fn range() -> RangeInclusive<u64> {
        MIN..=MAX
    }
}

impl<T, const MIN: u64, const MAX: u64> Kind for Count<T, MIN, MAX>
where
    T: TryFrom<u64> + Copy + fmt::Debug,
    u64: TryFrom<T>,
{
    type Value = T;
    type Set = T;

    fn form() -> String {
        match (MIN, MAX) {
            (0, u64::MAX) => "count".to_owned(),
            (min, u64::MAX) => format!("count ≥ {min}"),
            (min, max) => format!("count {min} to {max}"),
        }
    }
    fn set(value: T) -> T {
        value
    }
    fn read(env: &Env, var: &EnvVar) -> Result<Option<T>> {
        env.count(var, Self::range())?
            .map(|count| narrow(var.name, count))
            .transpose()
    }
    fn parse(field: &str, text: &str) -> Result<T> {
        narrow(field, parse_count(field, text, Self::range())?)
    }
    fn check(name: &str, value: &T) -> Result<()> {
        let count = u64::try_from(*value).unwrap_or(u64::MAX);
        check_count(name, count, Self::range()).map(drop)
    }
}

/// A size in bytes, at least `MIN`, held as `T`.
#[derive(Debug)]
pub struct Size<T, const MIN: u64 = 0>(PhantomData<T>);

impl<T, const MIN: u64> Kind for Size<T, MIN>
where
    T: TryFrom<u64> + Copy + fmt::Debug,
    u64: TryFrom<T>,
{
    type Value = T;
    type Set = T;

    fn form() -> String {
        match MIN {
            0 => "size".to_owned(),
            min => format!("size ≥ {min}"),
        }
    }
    fn set(value: T) -> T {
        value
    }
    fn read(env: &Env, var: &EnvVar) -> Result<Option<T>> {
        env.size(var)?
            .map(|bytes| narrow(var.name, bytes))
            .transpose()
    }
    fn parse(field: &str, text: &str) -> Result<T> {
        narrow(field, parse_size(field, text)?)
    }
    fn check(name: &str, value: &T) -> Result<()> {
        let bytes = u64::try_from(*value).unwrap_or(u64::MAX);
        check_count(name, bytes, MIN..=u64::MAX).map(drop)
    }
}

fn narrow<T: TryFrom<u64>>(name: &str, value: u64) -> Result<T> {
    T::try_from(value)
        .map_err(|_| PhotonError::config(name, value.to_string(), "a value this platform can hold"))
}

/// `true` or `false`, in the flag words.
#[derive(Debug)]
pub enum Flag {}

impl Kind for Flag {
    type Value = bool;
    type Set = bool;

    fn form() -> String {
        "flag".to_owned()
    }
    fn set(value: bool) -> bool {
        value
    }
    fn read(env: &Env, var: &EnvVar) -> Result<Option<bool>> {
        env.flag(var)
    }
    fn parse(field: &str, text: &str) -> Result<bool> {
        parse_flag(field, text)
    }
}

/// A type set by one of a fixed list of words.
pub trait Choices: Copy + PartialEq + fmt::Debug + 'static {
    /// Each word and its value, in the order the docs list them.
    const CHOICES: &'static [(&'static str, Self)];
}

/// One of the words of `T` ([`Choices`]), in any case.
#[derive(Debug)]
pub struct Choice<T>(PhantomData<T>);

impl<T: Choices> Kind for Choice<T> {
    type Value = T;
    type Set = T;

    fn form() -> String {
        either(
            T::CHOICES
                .iter()
                .map(|(word, _)| format!("`{word}`"))
                .collect(),
        )
    }
    fn set(value: T) -> T {
        value
    }
    fn read(env: &Env, var: &EnvVar) -> Result<Option<T>> {
        env.choice(var, T::CHOICES)
    }
    fn parse(field: &str, text: &str) -> Result<T> {
        parse_choice(field, text, T::CHOICES)
    }
}

/// A setting that may be unset (`None`), else of kind `K`; a config file's `null` unsets.
#[derive(Debug)]
pub struct Optional<K>(PhantomData<K>);

impl<K: Kind> Kind for Optional<K> {
    type Value = Option<K::Value>;
    type Set = K::Value;

    fn form() -> String {
        K::form()
    }
    fn set(value: K::Value) -> Option<K::Value> {
        Some(value)
    }
    fn read(env: &Env, var: &EnvVar) -> Result<Option<Option<K::Value>>> {
        Ok(K::read(env, var)?.map(Some))
    }
    fn parse(field: &str, text: &str) -> Result<Option<K::Value>> {
        K::parse(field, text).map(Some)
    }
    fn check(name: &str, value: &Option<K::Value>) -> Result<()> {
        value.as_ref().map_or(Ok(()), |value| K::check(name, value))
    }
    fn null() -> Option<Option<K::Value>> {
        Some(None)
    }
    fn debug(value: &Option<K::Value>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match value {
            Some(value) => f
                .debug_tuple("Some")
                .field(&DebugValue::<K>(value))
                .finish(),
            None => f.write_str("None"),
        }
    }
}

/// A limit of kind `K` where zero means none: `None` (no limit) when unset, zero or a config
/// file's `null`.
#[derive(Debug)]
pub struct Limit<K>(PhantomData<K>);

impl<K: Kind> Limit<K>
where
    K::Value: Default + PartialEq,
{
    fn limit(value: K::Value) -> Option<K::Value> {
        (value != K::Value::default()).then_some(value)
    }
}

impl<K: Kind> Kind for Limit<K>
where
    K::Value: Default + PartialEq,
{
    type Value = Option<K::Value>;
    type Set = K::Value;

    fn form() -> String {
        format!("{}, `0` for none", K::form())
    }
    fn set(value: K::Value) -> Option<K::Value> {
        Self::limit(value)
    }
    fn read(env: &Env, var: &EnvVar) -> Result<Option<Option<K::Value>>> {
        Ok(K::read(env, var)?.map(Self::limit))
    }
    fn parse(field: &str, text: &str) -> Result<Option<K::Value>> {
        K::parse(field, text).map(Self::limit)
    }
    fn check(name: &str, value: &Option<K::Value>) -> Result<()> {
        value.as_ref().map_or(Ok(()), |value| K::check(name, value))
    }
    fn null() -> Option<Option<K::Value>> {
        Some(None)
    }
}

/// A value as a config file holds it, before its kind reads it.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum RawSetting {
    /// `true` or `false`.
    Flag(bool),
    /// A whole number.
    Whole(u64),
    /// A negative number (refused by every kind but text).
    Negative(i64),
    /// A number with a fraction (refused by every kind but text).
    Fraction(f64),
    /// Text.
    Text(String),
}

impl RawSetting {
    /// The value written as text, the form every kind parses.
    pub fn text(&self) -> String {
        match self {
            Self::Flag(flag) => flag.to_string(),
            Self::Whole(number) => number.to_string(),
            Self::Negative(number) => number.to_string(),
            Self::Fraction(number) => number.to_string(),
            Self::Text(text) => text.clone(),
        }
    }
}

/// A field a config file holds, `null` included (`Some(None)`): what `settings!`'s
/// `Deserialize` reads each field with, so that absent and `null` stay apart.
///
/// # Errors
/// The deserializer's error for a value that is neither text, a number nor a flag.
pub fn present<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> std::result::Result<Option<Option<RawSetting>>, D::Error> {
    Option::<RawSetting>::deserialize(deserializer).map(Some)
}

/// A config file's value of `field`, read and checked by kind `K`: absent is `None` (the
/// default applies), `null` is what the kind takes it for.
///
/// # Errors
/// [`PhotonError::Config`] naming the field.
pub fn from_file<K: Kind>(
    field: &str,
    raw: Option<Option<RawSetting>>,
) -> Result<Option<K::Value>> {
    match raw {
        None => Ok(None),
        Some(None) => K::null()
            .map(Some)
            .ok_or_else(|| PhotonError::config(field, "null", K::form())),
        Some(Some(raw)) => {
            let value = K::parse(field, &raw.text())?;
            K::check(field, &value)?;
            Ok(Some(value))
        }
    }
}

/// One row of a settings table, for the docs.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    /// The config's field and builder's setter.
    pub field: &'static str,
    /// The environment variable.
    pub variable: &'static str,
    /// What is accepted.
    pub form: fn() -> String,
    /// The default, as the docs show it.
    pub default: &'static str,
    /// The first line of the setting's documentation.
    pub summary: &'static str,
    /// The group the setting belongs to (`tls`, `retry`), empty at the config's top level.
    pub group: &'static str,
    /// Other names of the variable, still read.
    pub aliases: &'static [Alias],
}

impl Setting {
    /// Where a config file writes the setting: `field`, `group.field`, or `group` for the
    /// group's own switch (a setting with no field).
    pub fn path(&self) -> String {
        if self.group.is_empty() {
            self.field.to_owned()
        } else if self.field.is_empty() {
            // The group's own switch (a TLS object present in the file).
            self.group.to_owned()
        } else {
            format!("{}.{}", self.group, self.field)
        }
    }
}

/// The Markdown table of `settings`: variable, setting, kind, default, meaning; the
/// configuration page holds it as printed here.
pub fn markdown_table(settings: &[Setting]) -> String {
    let mut table =
        String::from("| variable | setting | kind | default | meaning |\n|---|---|---|---|---|\n");
    for setting in settings {
        // Names kept for good are shown; deprecated ones are listed with the renamed
        // variables.
        let also: Vec<String> = setting
            .aliases
            .iter()
            .filter(|alias| !alias.deprecated)
            .map(|alias| format!("`{}`", alias.name))
            .collect();
        let variable = if also.is_empty() {
            format!("`{}`", setting.variable)
        } else {
            format!("`{}` (also read: {})", setting.variable, also.join(", "))
        };
        table.push_str(&format!(
            "| {} | `{}` | {} | {} | {} |\n",
            variable,
            setting.path(),
            (setting.form)(),
            setting.default,
            setting.summary.trim()
        ));
    }
    table
}

/// Panics unless `page` (a file under the workspace root) holds `settings`' table as
/// [`markdown_table`] prints it: the test each port runs so that its docs cannot drift
/// from its settings table.
///
/// # Panics
/// When the file cannot be read or does not hold the table; the message shows the table.
pub fn assert_documented(page: &std::path::Path, settings: &[Setting]) {
    let text = std::fs::read_to_string(page)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", page.display()));
    let table = markdown_table(settings);
    assert!(
        text.contains(&table),
        "{} does not hold the settings table as the code has it; put this there:\n\n{table}",
        page.display()
    );
}
