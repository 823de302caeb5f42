//! [`ExecutorConfig`]: parallelism, retries, dead letters and shutdown of the handler
//! executor, with environment fallbacks.

use std::time::Duration;

use photon_core::{PhotonError, Result, StartPolicy};

/// Environment variable: keys handled in parallel per subscription (integer ≥ 1).
pub const PARALLELISM_ENV: &str = "PHOTON_EXECUTOR_PARALLELISM";
/// Environment variable: events read ahead and not yet finished per subscription (≥ 1).
pub const MAX_IN_FLIGHT_ENV: &str = "PHOTON_EXECUTOR_MAX_IN_FLIGHT";
/// Environment variable: handler attempts per event before it is dead-lettered (≥ 1).
pub const MAX_ATTEMPTS_ENV: &str = "PHOTON_EXECUTOR_MAX_ATTEMPTS";
/// Environment variable: delay before the first retry, in milliseconds.
pub const INITIAL_BACKOFF_MS_ENV: &str = "PHOTON_EXECUTOR_INITIAL_BACKOFF_MS";
/// Environment variable: longest delay between two attempts, in milliseconds.
pub const MAX_BACKOFF_MS_ENV: &str = "PHOTON_EXECUTOR_MAX_BACKOFF_MS";
/// Environment variable: how long shutdown waits for in-flight handlers, in milliseconds.
pub const SHUTDOWN_TIMEOUT_MS_ENV: &str = "PHOTON_EXECUTOR_SHUTDOWN_TIMEOUT_MS";
/// Environment variable: suffix of dead-letter topics (`orders` → `orders.dlq`).
pub const DEAD_LETTER_SUFFIX_ENV: &str = "PHOTON_EXECUTOR_DEAD_LETTER_SUFFIX";

/// How a failed handler is retried: exponential backoff with jitter.
///
/// Attempt `n` (1-based) that fails with a retryable error waits
/// `min(initial_backoff * 2^(n-1), max_backoff)`, scaled by a random factor in
/// `[1 - jitter, 1 + jitter]`, before attempt `n + 1`.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Attempts per event, the first included (1 = never retry).
    pub max_attempts: u32,
    /// Delay before the first retry.
    pub initial_backoff: Duration,
    /// Longest delay between two attempts.
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

/// Settings of the handler executor. Build with [`ExecutorConfig::builder`]; precedence is
/// builder call > environment variable > default.
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
#[derive(Debug, Clone, PartialEq)]
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
        let positive = |field: &str, value: u64| {
            if value == 0 {
                Err(PhotonError::config(field, "0", "an integer of at least 1"))
            } else {
                Ok(())
            }
        };
        positive("parallelism", self.parallelism as u64)?;
        positive("max_in_flight", self.max_in_flight as u64)?;
        positive("retry.max_attempts", u64::from(self.retry.max_attempts))?;
        if !(0.0..=1.0).contains(&self.retry.jitter) {
            return Err(PhotonError::config(
                "retry.jitter",
                self.retry.jitter.to_string(),
                "a number from 0 to 1",
            ));
        }
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
        let defaults = ExecutorConfig::default();
        let config = ExecutorConfig {
            parallelism: pick(self.parallelism, PARALLELISM_ENV, defaults.parallelism)?,
            max_in_flight: pick(
                self.max_in_flight,
                MAX_IN_FLIGHT_ENV,
                defaults.max_in_flight,
            )?,
            retry: RetryPolicy {
                max_attempts: pick(
                    self.max_attempts,
                    MAX_ATTEMPTS_ENV,
                    defaults.retry.max_attempts,
                )?,
                initial_backoff: pick_ms(
                    self.initial_backoff,
                    INITIAL_BACKOFF_MS_ENV,
                    defaults.retry.initial_backoff,
                )?,
                max_backoff: pick_ms(
                    self.max_backoff,
                    MAX_BACKOFF_MS_ENV,
                    defaults.retry.max_backoff,
                )?,
                jitter: self.jitter.unwrap_or(defaults.retry.jitter),
            },
            dead_letter_suffix: match self.dead_letter_suffix {
                Some(suffix) => suffix,
                None => {
                    std::env::var(DEAD_LETTER_SUFFIX_ENV).unwrap_or(defaults.dead_letter_suffix)
                }
            },
            shutdown_timeout: pick_ms(
                self.shutdown_timeout,
                SHUTDOWN_TIMEOUT_MS_ENV,
                defaults.shutdown_timeout,
            )?,
            start_policy: self.start_policy.unwrap_or(defaults.start_policy),
        };
        config.validate()?;
        Ok(config)
    }
}

fn pick<T: std::str::FromStr>(set: Option<T>, variable: &str, default: T) -> Result<T> {
    if let Some(value) = set {
        return Ok(value);
    }
    match std::env::var(variable) {
        Ok(text) => text
            .trim()
            .parse()
            .map_err(|_| PhotonError::config(variable, text, "an integer of at least 1")),
        Err(_) => Ok(default),
    }
}

fn pick_ms(set: Option<Duration>, variable: &str, default: Duration) -> Result<Duration> {
    if let Some(value) = set {
        return Ok(value);
    }
    match std::env::var(variable) {
        Ok(text) => text
            .trim()
            .parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|_| PhotonError::config(variable, text, "a whole number of milliseconds")),
        Err(_) => Ok(default),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_parallelism_names_the_field() {
        let err = ExecutorConfig::builder()
            .parallelism(0)
            .build()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid configuration parallelism=\"0\": expected an integer of at least 1"
        );
    }

    #[test]
    fn bad_suffix_is_refused() {
        let err = ExecutorConfig::builder()
            .dead_letter_suffix("/DLQ")
            .build()
            .unwrap_err();
        assert!(
            matches!(err, PhotonError::Config { ref variable, .. } if variable == "dead_letter_suffix")
        );
    }

    #[test]
    fn a_bad_environment_value_names_the_variable() {
        // A variable only this test reads, so that tests running in parallel are unaffected.
        std::env::set_var("PHOTON_EXECUTOR_TEST_ONLY_PARALLELISM", "many");
        let err = pick::<usize>(None, "PHOTON_EXECUTOR_TEST_ONLY_PARALLELISM", 1).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid configuration PHOTON_EXECUTOR_TEST_ONLY_PARALLELISM=\"many\": expected an integer of at least 1"
        );
        std::env::set_var("PHOTON_EXECUTOR_TEST_ONLY_PARALLELISM", "12");
        assert_eq!(
            pick::<usize>(None, "PHOTON_EXECUTOR_TEST_ONLY_PARALLELISM", 1).unwrap(),
            12
        );
        assert_eq!(
            pick::<usize>(Some(3), "PHOTON_EXECUTOR_TEST_ONLY_PARALLELISM", 1).unwrap(),
            3
        );
    }

    #[test]
    fn builder_wins_over_default() {
        let config = ExecutorConfig::builder()
            .max_in_flight(3)
            .jitter(0.5)
            .build()
            .unwrap();
        assert_eq!(config.max_in_flight, 3);
        assert_eq!(config.retry.jitter, 0.5);
        assert_eq!(config.dead_letter_topic("a"), "a.dlq");
    }
}
