//! [`ExecutorConfig`]: parallelism, retries, dead letters and shutdown of the handler
//! executor, with environment fallbacks.

use std::time::Duration;

use photon_core::config::{check_count, de, Alias, Env, EnvVar};
use photon_core::{PhotonError, Result, StartPolicy};
use serde::Deserialize;

/// Environment variable: keys handled in parallel per subscription (a count ≥ 1).
pub const PARALLELISM_ENV: &str = "PHOTON_EXECUTOR_PARALLELISM";
/// Environment variable: events read ahead and not yet finished per subscription (≥ 1).
pub const MAX_IN_FLIGHT_ENV: &str = "PHOTON_EXECUTOR_MAX_IN_FLIGHT";
/// Environment variable: handler attempts per event before it is dead-lettered (≥ 1).
pub const MAX_ATTEMPTS_ENV: &str = "PHOTON_EXECUTOR_MAX_ATTEMPTS";
/// Environment variable: delay before the first retry, a duration (`100ms`).
pub const INITIAL_BACKOFF_ENV: &str = "PHOTON_EXECUTOR_INITIAL_BACKOFF";
/// Environment variable: longest delay between two attempts, a duration (`10s`).
pub const MAX_BACKOFF_ENV: &str = "PHOTON_EXECUTOR_MAX_BACKOFF";
/// Environment variable: relative jitter of retry delays, a number from 0 to 1.
pub const JITTER_ENV: &str = "PHOTON_EXECUTOR_JITTER";
/// Environment variable: how long shutdown waits for in-flight handlers, a duration (`30s`).
pub const SHUTDOWN_TIMEOUT_ENV: &str = "PHOTON_EXECUTOR_SHUTDOWN_TIMEOUT";
/// Environment variable: suffix of dead-letter topics (`orders` → `orders.dlq`).
pub const DEAD_LETTER_SUFFIX_ENV: &str = "PHOTON_EXECUTOR_DEAD_LETTER_SUFFIX";
/// Environment variable: where a durable handler without checkpoint starts, `beginning` or
/// `tail`.
pub const START_POLICY_ENV: &str = "PHOTON_EXECUTOR_START_POLICY";
/// Deprecated name of [`INITIAL_BACKOFF_ENV`], still read: a whole number of milliseconds.
#[deprecated(note = "use INITIAL_BACKOFF_ENV (PHOTON_EXECUTOR_INITIAL_BACKOFF, a duration)")]
pub const INITIAL_BACKOFF_MS_ENV: &str = "PHOTON_EXECUTOR_INITIAL_BACKOFF_MS";
/// Deprecated name of [`MAX_BACKOFF_ENV`], still read: a whole number of milliseconds.
#[deprecated(note = "use MAX_BACKOFF_ENV (PHOTON_EXECUTOR_MAX_BACKOFF, a duration)")]
pub const MAX_BACKOFF_MS_ENV: &str = "PHOTON_EXECUTOR_MAX_BACKOFF_MS";
/// Deprecated name of [`SHUTDOWN_TIMEOUT_ENV`], still read: a whole number of milliseconds.
#[deprecated(note = "use SHUTDOWN_TIMEOUT_ENV (PHOTON_EXECUTOR_SHUTDOWN_TIMEOUT, a duration)")]
pub const SHUTDOWN_TIMEOUT_MS_ENV: &str = "PHOTON_EXECUTOR_SHUTDOWN_TIMEOUT_MS";

const INITIAL_BACKOFF: EnvVar =
    EnvVar::new(INITIAL_BACKOFF_ENV).aliases(&[Alias::deprecated_millis(
        "PHOTON_EXECUTOR_INITIAL_BACKOFF_MS",
    )]);
const MAX_BACKOFF: EnvVar = EnvVar::new(MAX_BACKOFF_ENV)
    .aliases(&[Alias::deprecated_millis("PHOTON_EXECUTOR_MAX_BACKOFF_MS")]);
const SHUTDOWN_TIMEOUT: EnvVar =
    EnvVar::new(SHUTDOWN_TIMEOUT_ENV).aliases(&[Alias::deprecated_millis(
        "PHOTON_EXECUTOR_SHUTDOWN_TIMEOUT_MS",
    )]);
const START_POLICIES: [(&str, StartPolicy); 2] = [
    ("beginning", StartPolicy::Beginning),
    ("tail", StartPolicy::Tail),
];

/// How a failed handler is retried: exponential backoff with jitter.
///
/// Attempt `n` (1-based) that fails with a retryable error waits
/// `min(initial_backoff * 2^(n-1), max_backoff)`, scaled by a random factor in
/// `[1 - jitter, 1 + jitter]`, before attempt `n + 1`.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Attempts per event, the first included (1 = never retry).
    pub max_attempts: u32,
    /// Delay before the first retry.
    #[serde(deserialize_with = "de::duration")]
    pub initial_backoff: Duration,
    /// Longest delay between two attempts.
    #[serde(deserialize_with = "de::duration")]
    pub max_backoff: Duration,
    /// Relative jitter in `[0, 1]`.
    pub jitter: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(10),
            jitter: 0.2,
        }
    }
}

/// Builder-style setters, for a per-handler policy
/// ([`HandlerOptions::retry`](super::HandlerOptions::retry)): the struct is
/// `#[non_exhaustive]`, so code outside Photon starts from [`RetryPolicy::default`].
///
/// ```
/// use std::time::Duration;
/// use photon_runtime::RetryPolicy;
///
/// let policy = RetryPolicy::default()
///     .max_attempts(2)
///     .initial_backoff(Duration::from_millis(10))
///     .max_backoff(Duration::from_secs(1))
///     .jitter(0.0);
/// assert_eq!(policy.max_attempts, 2);
/// assert!(policy.validate().is_ok());
/// ```
impl RetryPolicy {
    /// Attempts per event, the first included (1 = never retry).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts;
        self
    }

    /// Delay before the first retry.
    pub fn initial_backoff(mut self, delay: Duration) -> Self {
        self.initial_backoff = delay;
        self
    }

    /// Longest delay between two attempts.
    pub fn max_backoff(mut self, delay: Duration) -> Self {
        self.max_backoff = delay;
        self
    }

    /// Relative jitter of the delays, from 0 (none) to 1.
    pub fn jitter(mut self, jitter: f64) -> Self {
        self.jitter = jitter;
        self
    }

    /// Checks the policy.
    ///
    /// # Errors
    /// [`PhotonError::Config`] naming `retry.max_attempts` (below 1) or `retry.jitter`
    /// (outside 0 to 1).
    pub fn validate(&self) -> Result<()> {
        check_count(
            "retry.max_attempts",
            u64::from(self.max_attempts),
            1..=u64::MAX,
        )?;
        if !(0.0..=1.0).contains(&self.jitter) {
            return Err(PhotonError::config(
                "retry.jitter",
                self.jitter.to_string(),
                "a number from 0 to 1",
            ));
        }
        Ok(())
    }
}

/// Settings of the handler executor. Build with [`ExecutorConfig::builder`]; precedence is
/// builder call > environment variable > default. Deserializable from a config file, with
/// durations in the dialect of [`photon_core::config`] (`"250ms"`); check a deserialized
/// config with [`ExecutorConfig::validate`] (`PhotonBuilder::executor_config` does).
///
/// | field | variable | default |
/// |---|---|---|
/// | `parallelism` | `PHOTON_EXECUTOR_PARALLELISM` | 8 |
/// | `max_in_flight` | `PHOTON_EXECUTOR_MAX_IN_FLIGHT` | 256 |
/// | `retry.max_attempts` | `PHOTON_EXECUTOR_MAX_ATTEMPTS` | 5 |
/// | `retry.initial_backoff` | `PHOTON_EXECUTOR_INITIAL_BACKOFF` (deprecated: `.._INITIAL_BACKOFF_MS`) | `100ms` |
/// | `retry.max_backoff` | `PHOTON_EXECUTOR_MAX_BACKOFF` (deprecated: `.._MAX_BACKOFF_MS`) | `10s` |
/// | `retry.jitter` | `PHOTON_EXECUTOR_JITTER` | 0.2 |
/// | `dead_letter_suffix` | `PHOTON_EXECUTOR_DEAD_LETTER_SUFFIX` | `.dlq` |
/// | `shutdown_timeout` | `PHOTON_EXECUTOR_SHUTDOWN_TIMEOUT` (deprecated: `.._SHUTDOWN_TIMEOUT_MS`) | `30s` |
/// | `start_policy` | `PHOTON_EXECUTOR_START_POLICY` (`beginning` or `tail`) | `beginning` |
///
/// ```
/// use std::time::Duration;
/// use photon_runtime::ExecutorConfig;
///
/// let config = ExecutorConfig::builder()
///     .parallelism(16)
///     .max_attempts(3)
///     .initial_backoff(Duration::from_millis(50))
///     .build()
///     .unwrap();
/// assert_eq!(config.parallelism, 16);
/// assert_eq!(config.retry.max_attempts, 3);
/// ```
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct ExecutorConfig {
    /// Keys handled at the same time per subscription (default 8).
    pub parallelism: usize,
    /// Events read ahead and not yet finished per subscription (default 256). Bounds memory
    /// and, with the flush policy, the duplicates after a crash.
    pub max_in_flight: usize,
    /// Retries of failed handlers.
    pub retry: RetryPolicy,
    /// Suffix appended to a topic to name its dead-letter topic (default `.dlq`).
    pub dead_letter_suffix: String,
    /// How long shutdown waits for in-flight handlers before abandoning them (default 30 s).
    #[serde(deserialize_with = "de::duration")]
    pub shutdown_timeout: Duration,
    /// Where a durable handler without checkpoint starts (default: the oldest event).
    pub start_policy: StartPolicy,
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        Self {
            parallelism: 8,
            max_in_flight: 256,
            retry: RetryPolicy::default(),
            dead_letter_suffix: ".dlq".to_owned(),
            shutdown_timeout: Duration::from_secs(30),
            start_policy: StartPolicy::Beginning,
        }
    }
}

impl ExecutorConfig {
    /// A builder; unset fields come from the environment, then the defaults.
    pub fn builder() -> ExecutorConfigBuilder {
        ExecutorConfigBuilder::default()
    }

    /// The defaults overridden by the `PHOTON_EXECUTOR_*` environment variables.
    ///
    /// # Errors
    /// [`PhotonError::Config`] naming the variable and the accepted values.
    pub fn from_env() -> Result<Self> {
        Self::builder().build()
    }

    /// The dead-letter topic of `topic`.
    pub fn dead_letter_topic(&self, topic: &str) -> String {
        format!("{topic}{}", self.dead_letter_suffix)
    }

    /// Checks the settings.
    ///
    /// # Errors
    /// [`PhotonError::Config`] naming the field and the accepted values.
    pub fn validate(&self) -> Result<()> {
        check_count("parallelism", self.parallelism as u64, 1..=u64::MAX)?;
        check_count("max_in_flight", self.max_in_flight as u64, 1..=u64::MAX)?;
        self.retry.validate()?;
        if self.dead_letter_suffix.is_empty() {
            return Err(PhotonError::config(
                "dead_letter_suffix",
                "",
                "a non-empty suffix of [a-z0-9._-], e.g. \".dlq\"",
            ));
        }
        photon_core::validate_topic_name(&self.dead_letter_topic("t")).map_err(|_| {
            PhotonError::config(
                "dead_letter_suffix",
                self.dead_letter_suffix.clone(),
                "characters from [a-z0-9._-]",
            )
        })
    }
}

/// Builder of [`ExecutorConfig`] (builder call > environment variable > default).
#[derive(Debug, Clone, Default)]
pub struct ExecutorConfigBuilder {
    parallelism: Option<usize>,
    max_in_flight: Option<usize>,
    max_attempts: Option<u32>,
    initial_backoff: Option<Duration>,
    max_backoff: Option<Duration>,
    jitter: Option<f64>,
    dead_letter_suffix: Option<String>,
    shutdown_timeout: Option<Duration>,
    start_policy: Option<StartPolicy>,
}

impl ExecutorConfigBuilder {
    /// Keys handled at the same time per subscription.
    ///
    /// ```
    /// let config = photon_runtime::ExecutorConfig::builder().parallelism(4).build().unwrap();
    /// assert_eq!(config.parallelism, 4);
    /// ```
    pub fn parallelism(mut self, parallelism: usize) -> Self {
        self.parallelism = Some(parallelism);
        self
    }

    /// Events read ahead and not yet finished per subscription.
    ///
    /// ```
    /// let config = photon_runtime::ExecutorConfig::builder().max_in_flight(64).build().unwrap();
    /// assert_eq!(config.max_in_flight, 64);
    /// ```
    pub fn max_in_flight(mut self, max_in_flight: usize) -> Self {
        self.max_in_flight = Some(max_in_flight);
        self
    }

    /// Attempts per event, the first included.
    ///
    /// ```
    /// let config = photon_runtime::ExecutorConfig::builder().max_attempts(1).build().unwrap();
    /// assert_eq!(config.retry.max_attempts, 1);
    /// ```
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = Some(attempts);
        self
    }

    /// Delay before the first retry.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let config = photon_runtime::ExecutorConfig::builder()
    ///     .initial_backoff(Duration::from_millis(5)).build().unwrap();
    /// assert_eq!(config.retry.initial_backoff, Duration::from_millis(5));
    /// ```
    pub fn initial_backoff(mut self, delay: Duration) -> Self {
        self.initial_backoff = Some(delay);
        self
    }

    /// Longest delay between two attempts.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let config = photon_runtime::ExecutorConfig::builder()
    ///     .max_backoff(Duration::from_secs(1)).build().unwrap();
    /// assert_eq!(config.retry.max_backoff, Duration::from_secs(1));
    /// ```
    pub fn max_backoff(mut self, delay: Duration) -> Self {
        self.max_backoff = Some(delay);
        self
    }

    /// Relative jitter of retry delays, from 0 (none) to 1.
    ///
    /// ```
    /// let config = photon_runtime::ExecutorConfig::builder().jitter(0.0).build().unwrap();
    /// assert_eq!(config.retry.jitter, 0.0);
    /// ```
    pub fn jitter(mut self, jitter: f64) -> Self {
        self.jitter = Some(jitter);
        self
    }

    /// Suffix naming dead-letter topics.
    ///
    /// ```
    /// let config = photon_runtime::ExecutorConfig::builder()
    ///     .dead_letter_suffix(".failed").build().unwrap();
    /// assert_eq!(config.dead_letter_topic("orders"), "orders.failed");
    /// ```
    pub fn dead_letter_suffix(mut self, suffix: impl Into<String>) -> Self {
        self.dead_letter_suffix = Some(suffix.into());
        self
    }

    /// How long shutdown waits for in-flight handlers.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let config = photon_runtime::ExecutorConfig::builder()
    ///     .shutdown_timeout(Duration::from_secs(5)).build().unwrap();
    /// assert_eq!(config.shutdown_timeout, Duration::from_secs(5));
    /// ```
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = Some(timeout);
        self
    }

    /// Where a durable handler without checkpoint starts.
    ///
    /// ```
    /// use photon_runtime::{ExecutorConfig, StartPolicy};
    /// let config = ExecutorConfig::builder().start_policy(StartPolicy::Tail).build().unwrap();
    /// assert_eq!(config.start_policy, StartPolicy::Tail);
    /// ```
    pub fn start_policy(mut self, policy: StartPolicy) -> Self {
        self.start_policy = Some(policy);
        self
    }

    /// Resolves every field (builder > environment > default) and validates.
    ///
    /// # Errors
    /// [`PhotonError::Config`] naming the variable or field and the accepted values.
    pub fn build(self) -> Result<ExecutorConfig> {
        self.resolve(&Env::process())
    }

    fn resolve(self, env: &Env) -> Result<ExecutorConfig> {
        let defaults = ExecutorConfig::default();
        let count = |set: Option<u64>, name: &'static str, default: u64| -> Result<u64> {
            match set {
                Some(value) => Ok(value),
                None => Ok(env
                    .count(&EnvVar::new(name), 1..=u64::from(u32::MAX))?
                    .unwrap_or(default)),
            }
        };
        let duration = |set: Option<Duration>, var: &EnvVar, default: Duration| match set {
            Some(value) => Ok(value),
            None => env.duration(var).map(|found| found.unwrap_or(default)),
        };
        let jitter = match self.jitter {
            Some(jitter) => jitter,
            None => env
                .read(&EnvVar::new(JITTER_ENV), |found| {
                    parse_jitter(found.name, &found.text)
                })?
                .unwrap_or(defaults.retry.jitter),
        };
        let config = ExecutorConfig {
            parallelism: count(
                self.parallelism.map(|v| v as u64),
                PARALLELISM_ENV,
                defaults.parallelism as u64,
            )? as usize,
            max_in_flight: count(
                self.max_in_flight.map(|v| v as u64),
                MAX_IN_FLIGHT_ENV,
                defaults.max_in_flight as u64,
            )? as usize,
            retry: RetryPolicy {
                max_attempts: count(
                    self.max_attempts.map(u64::from),
                    MAX_ATTEMPTS_ENV,
                    u64::from(defaults.retry.max_attempts),
                )? as u32,
                initial_backoff: duration(
                    self.initial_backoff,
                    &INITIAL_BACKOFF,
                    defaults.retry.initial_backoff,
                )?,
                max_backoff: duration(self.max_backoff, &MAX_BACKOFF, defaults.retry.max_backoff)?,
                jitter,
            },
            dead_letter_suffix: match self.dead_letter_suffix {
                Some(suffix) => suffix,
                None => env
                    .text(&EnvVar::new(DEAD_LETTER_SUFFIX_ENV))?
                    .unwrap_or(defaults.dead_letter_suffix),
            },
            shutdown_timeout: duration(
                self.shutdown_timeout,
                &SHUTDOWN_TIMEOUT,
                defaults.shutdown_timeout,
            )?,
            start_policy: match self.start_policy {
                Some(policy) => policy,
                None => env
                    .choice(&EnvVar::new(START_POLICY_ENV), &START_POLICIES)?
                    .unwrap_or(defaults.start_policy),
            },
        };
        config.validate()?;
        Ok(config)
    }
}

fn parse_jitter(variable: &str, text: &str) -> Result<f64> {
    match text.trim().parse::<f64>() {
        Ok(jitter) if (0.0..=1.0).contains(&jitter) => Ok(jitter),
        _ => Err(PhotonError::config(variable, text, "a number from 0 to 1")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(builder: ExecutorConfigBuilder, pairs: &[(&str, &str)]) -> Result<ExecutorConfig> {
        builder.resolve(&Env::from_pairs(pairs.iter().copied()))
    }

    #[test]
    fn zero_parallelism_names_the_field() {
        let err = resolve(ExecutorConfig::builder().parallelism(0), &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid configuration parallelism=\"0\": expected an integer of at least 1"
        );
    }

    #[test]
    fn bad_suffix_is_refused() {
        let err = resolve(ExecutorConfig::builder().dead_letter_suffix("/DLQ"), &[]).unwrap_err();
        assert!(
            matches!(err, PhotonError::Config { ref variable, .. } if variable == "dead_letter_suffix")
        );
    }

    #[test]
    fn every_variable_is_read_in_the_dialect() {
        let config = resolve(
            ExecutorConfig::builder(),
            &[
                (PARALLELISM_ENV, "12"),
                (MAX_IN_FLIGHT_ENV, "64"),
                (MAX_ATTEMPTS_ENV, "3"),
                (INITIAL_BACKOFF_ENV, "250ms"),
                (MAX_BACKOFF_ENV, "1m"),
                (JITTER_ENV, "0.5"),
                (SHUTDOWN_TIMEOUT_ENV, "5s"),
                (DEAD_LETTER_SUFFIX_ENV, ".failed"),
                (START_POLICY_ENV, "Tail"),
            ],
        )
        .unwrap();
        assert_eq!(
            (
                config.parallelism,
                config.max_in_flight,
                config.retry.max_attempts
            ),
            (12, 64, 3)
        );
        assert_eq!(config.retry.initial_backoff, Duration::from_millis(250));
        assert_eq!(config.retry.max_backoff, Duration::from_secs(60));
        assert_eq!(config.retry.jitter, 0.5);
        assert_eq!(config.shutdown_timeout, Duration::from_secs(5));
        assert_eq!(config.dead_letter_topic("orders"), "orders.failed");
        assert_eq!(config.start_policy, StartPolicy::Tail);
    }

    #[test]
    fn deprecated_millisecond_names_still_work() {
        let config = resolve(
            ExecutorConfig::builder(),
            &[
                ("PHOTON_EXECUTOR_INITIAL_BACKOFF_MS", "50"),
                ("PHOTON_EXECUTOR_MAX_BACKOFF_MS", "2000"),
                ("PHOTON_EXECUTOR_SHUTDOWN_TIMEOUT_MS", "1500"),
            ],
        )
        .unwrap();
        assert_eq!(config.retry.initial_backoff, Duration::from_millis(50));
        assert_eq!(config.retry.max_backoff, Duration::from_secs(2));
        assert_eq!(config.shutdown_timeout, Duration::from_millis(1500));
    }

    #[test]
    fn a_bad_environment_value_names_the_variable() {
        let cases = [
            (
                PARALLELISM_ENV,
                "many",
                "expected an integer from 1 to 4294967295",
            ),
            (
                MAX_ATTEMPTS_ENV,
                "0",
                "expected an integer from 1 to 4294967295",
            ),
            (
                INITIAL_BACKOFF_ENV,
                "100",
                "expected a duration with a unit",
            ),
            (JITTER_ENV, "2", "expected a number from 0 to 1"),
            (START_POLICY_ENV, "now", "expected beginning or tail"),
        ];
        for (variable, value, expected) in cases {
            let err = resolve(ExecutorConfig::builder(), &[(variable, value)]).unwrap_err();
            let prefix = format!("invalid configuration {variable}={value:?}: {expected}");
            assert!(err.to_string().starts_with(&prefix), "{err}");
        }
    }

    #[test]
    fn builder_wins_over_env_and_default() {
        let config = resolve(
            ExecutorConfig::builder().max_in_flight(3).jitter(0.5),
            &[(MAX_IN_FLIGHT_ENV, "64"), (JITTER_ENV, "0.1")],
        )
        .unwrap();
        assert_eq!(config.max_in_flight, 3);
        assert_eq!(config.retry.jitter, 0.5);
        assert_eq!(config.dead_letter_topic("a"), "a.dlq");
    }

    #[test]
    fn deserializes_in_the_dialect() {
        let config: ExecutorConfig = serde_json::from_str(
            r#"{"parallelism": 4, "retry": {"max_attempts": 2, "initial_backoff": "20ms"},
                "shutdown_timeout": "2s", "start_policy": "tail"}"#,
        )
        .unwrap();
        config.validate().unwrap();
        assert_eq!(config.parallelism, 4);
        assert_eq!(config.max_in_flight, 256);
        assert_eq!(config.retry.max_attempts, 2);
        assert_eq!(config.retry.initial_backoff, Duration::from_millis(20));
        assert_eq!(config.retry.max_backoff, Duration::from_secs(10));
        assert_eq!(config.shutdown_timeout, Duration::from_secs(2));
        assert_eq!(config.start_policy, StartPolicy::Tail);
        let err = serde_json::from_str::<ExecutorConfig>(r#"{"shutdown_timeout": 30}"#)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "invalid type: integer `30`, expected a string at line 1 column 23"
        );
    }
}
