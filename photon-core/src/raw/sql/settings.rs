//! The settings every SQL port has (batch and page sizes, the body limit, retention):
//! resolved from a builder's values, then the environment, then defaults, and checked.

use std::time::Duration;

use crate::config::{check_count, Env, EnvVar};
use crate::error::{PhotonError, Result};

/// Every count accepted, from 1.
const POSITIVE: std::ops::RangeInclusive<u64> = 1..=u64::MAX;

/// A port's retention sweep, as resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Deletes events older than this.
    pub max_age: Option<Duration>,
    /// Keeps at most this many newest events per topic.
    pub max_events: Option<u64>,
    /// Whether dead-letter topics are swept too.
    pub dead_letters: bool,
    /// Time between sweeps.
    pub interval: Duration,
}

/// The retention values a builder was given (`None`: from the environment, then the
/// default).
#[derive(Debug, Clone, Copy, Default)]
pub struct RetentionSet {
    /// See [`Retention::max_age`].
    pub max_age: Option<Duration>,
    /// See [`Retention::max_events`].
    pub max_events: Option<u64>,
    /// See [`Retention::dead_letters`].
    pub dead_letters: Option<bool>,
    /// See [`Retention::interval`].
    pub interval: Option<Duration>,
}

/// The port's variables of the retention settings.
#[derive(Debug, Clone, Copy)]
pub struct RetentionVars<'a> {
    /// Of [`Retention::max_age`].
    pub max_age: &'a EnvVar,
    /// Of [`Retention::max_events`].
    pub max_events: &'a EnvVar,
    /// Of [`Retention::dead_letters`].
    pub dead_letters: &'a EnvVar,
    /// Of [`Retention::interval`].
    pub interval: &'a EnvVar,
}

impl RetentionSet {
    /// The builder's values, then `env`'s variables, then `defaults`.
    ///
    /// # Errors
    /// [`PhotonError::Config`] naming the variable of a value that does not parse.
    pub fn resolve(
        self,
        env: &Env,
        vars: RetentionVars<'_>,
        defaults: Retention,
    ) -> Result<Retention> {
        Ok(Retention {
            max_age: match self.max_age {
                Some(age) => Some(age),
                None => env.duration(vars.max_age)?,
            },
            max_events: match self.max_events {
                Some(count) => Some(count),
                None => env.count(vars.max_events, POSITIVE)?,
            },
            dead_letters: match self.dead_letters {
                Some(apply) => apply,
                None => env
                    .flag(vars.dead_letters)?
                    .unwrap_or(defaults.dead_letters),
            },
            interval: match self.interval {
                Some(interval) => interval,
                None => env.duration(vars.interval)?.unwrap_or(defaults.interval),
            },
        })
    }
}

/// The largest accepted body: the builder's value, then `var`, then `default`.
///
/// # Errors
/// [`PhotonError::Config`] naming the variable of a size that does not parse.
pub fn max_payload_bytes(
    env: &Env,
    set: Option<usize>,
    var: &EnvVar,
    default: usize,
) -> Result<usize> {
    match set {
        Some(bytes) => Ok(bytes),
        None => Ok(env.size(var)?.map_or(default, |bytes| {
            usize::try_from(bytes).unwrap_or(usize::MAX)
        })),
    }
}

/// Refuses zero for the sizes every SQL port has and for `retention_max_events`.
///
/// # Errors
/// [`PhotonError::Config`] naming the field.
pub fn check_sizes(
    max_batch: usize,
    page_size: usize,
    max_payload_bytes: usize,
    retention_max_events: Option<u64>,
) -> Result<()> {
    check_count("max_batch", max_batch as u64, POSITIVE)?;
    check_count("page_size", page_size as u64, POSITIVE)?;
    check_count("max_payload_bytes", max_payload_bytes as u64, POSITIVE)?;
    if let Some(count) = retention_max_events {
        check_count("retention_max_events", count, POSITIVE)?;
    }
    Ok(())
}

/// Refuses a zero duration (a set one, for the optional ones): polling and sweeping at
/// once, or a timeout that fails every wait.
///
/// # Errors
/// [`PhotonError::Config`] naming the first field that is zero.
pub fn check_durations(durations: &[(&'static str, Option<Duration>)]) -> Result<()> {
    match durations
        .iter()
        .find(|(_, value)| value.is_some_and(|d| d.is_zero()))
    {
        Some((field, _)) => Err(PhotonError::config(
            *field,
            "0",
            "a duration greater than zero",
        )),
        None => Ok(()),
    }
}
