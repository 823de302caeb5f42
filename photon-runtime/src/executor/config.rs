//! [`ExecutorConfig`]: parallelism, retries, dead letters and shutdown of the handler
//! executor, from one settings table (`photon_core::settings!`): builder call >
//! environment variable > default.

use std::time::Duration;

use photon_core::config::{Alias, AnyDuration, Checked, Choice, Count, Env, Fraction, TextRule};
use photon_core::{PhotonError, Result, StartPolicy};

/// Deprecated name of [`INITIAL_BACKOFF_ENV`], still read: a whole number of milliseconds.
#[deprecated(note = "use INITIAL_BACKOFF_ENV (PHOTON_EXECUTOR_INITIAL_BACKOFF, a duration)")]
pub const INITIAL_BACKOFF_MS_ENV: &str = "PHOTON_EXECUTOR_INITIAL_BACKOFF_MS";
/// Deprecated name of [`MAX_BACKOFF_ENV`], still read: a whole number of milliseconds.
#[deprecated(note = "use MAX_BACKOFF_ENV (PHOTON_EXECUTOR_MAX_BACKOFF, a duration)")]
pub const MAX_BACKOFF_MS_ENV: &str = "PHOTON_EXECUTOR_MAX_BACKOFF_MS";
/// Deprecated name of [`SHUTDOWN_TIMEOUT_ENV`], still read: a whole number of milliseconds.
#[deprecated(note = "use SHUTDOWN_TIMEOUT_ENV (PHOTON_EXECUTOR_SHUTDOWN_TIMEOUT, a duration)")]
pub const SHUTDOWN_TIMEOUT_MS_ENV: &str = "PHOTON_EXECUTOR_SHUTDOWN_TIMEOUT_MS";

photon_core::settings! {
    /// How a failed handler is retried: exponential backoff with jitter.
    ///
    /// Attempt `n` (1-based) that fails with a retryable error waits
    /// `min(initial_backoff * 2^(n-1), max_backoff)`, scaled by a random factor in
    /// `[1 - jitter, 1 + jitter]`, before attempt `n + 1`. Deserializable as the executor's
    /// `retry` (every value checked, a refused one named).
    #[derive(Copy)]
    pub struct RetryPolicy;

    /// Builds the executor's [`RetryPolicy`] from builder values, the
    /// `PHOTON_EXECUTOR_*` variables and the defaults ([`ExecutorConfigBuilder`] holds one).
    pub struct RetryPolicyBuilder;

    /// Attempts per event, the first included (1 = never retry).
    max_attempts: Count<u32, 1> = 5, env MAX_ATTEMPTS_ENV = "PHOTON_EXECUTOR_MAX_ATTEMPTS",
        shown "5";
    /// Delay before the first retry.
    initial_backoff: AnyDuration = Duration::from_millis(100),
        env INITIAL_BACKOFF_ENV = "PHOTON_EXECUTOR_INITIAL_BACKOFF",
        aliases [Alias::deprecated_millis("PHOTON_EXECUTOR_INITIAL_BACKOFF_MS")],
        shown "`100ms`";
    /// Longest delay between two attempts.
    max_backoff: AnyDuration = Duration::from_secs(10),
        env MAX_BACKOFF_ENV = "PHOTON_EXECUTOR_MAX_BACKOFF",
        aliases [Alias::deprecated_millis("PHOTON_EXECUTOR_MAX_BACKOFF_MS")],
        shown "`10s`";
    /// Relative jitter of retry delays, from 0 (none) to 1.
    jitter: Fraction = 0.2, env JITTER_ENV = "PHOTON_EXECUTOR_JITTER", shown "0.2";
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
        self.check_settings()
            .map_err(|err| photon_core::config::in_group("retry", err))
    }
}

/// A dead-letter suffix: not empty, and a topic name with it appended stays one
/// (`[a-z0-9._-]`).
#[derive(Debug)]
pub enum DeadLetterSuffix {}

impl TextRule for DeadLetterSuffix {
    fn form() -> String {
        "suffix of `[a-z0-9._-]`".to_owned()
    }
    fn check(name: &str, suffix: &str) -> Result<()> {
        if suffix.is_empty() {
            return Err(PhotonError::config(
                name,
                "",
                "a non-empty suffix of [a-z0-9._-], e.g. \".dlq\"",
            ));
        }
        photon_core::validate_topic_name(&format!("t{suffix}"))
            .map(|_| ())
            .map_err(|_| PhotonError::config(name, suffix, "characters from [a-z0-9._-]"))
    }
}

photon_core::settings! {
    /// Settings of the handler executor. Build with [`ExecutorConfig::builder`]; precedence
    /// is builder call > environment variable > default. Deserializable from a config file,
    /// in the dialect of [`photon_core::config`] (`"250ms"`), every value checked and a
    /// refused one named (`PhotonBuilder::executor_config` checks it again).
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
    pub struct ExecutorConfig;

    /// Builder of [`ExecutorConfig`] (builder call > environment variable > default).
    pub struct ExecutorConfigBuilder;

    /// Keys handled at the same time per subscription.
    parallelism: Count<usize, 1> = 8, env PARALLELISM_ENV = "PHOTON_EXECUTOR_PARALLELISM",
        shown "8";
    /// Events read ahead and not yet finished per subscription.
    ///
    /// Bounds memory and, with the flush policy, the duplicates after a crash.
    max_in_flight: Count<usize, 1> = 256,
        env MAX_IN_FLIGHT_ENV = "PHOTON_EXECUTOR_MAX_IN_FLIGHT", shown "256";
    /// Suffix appended to a topic to name its dead-letter topic (`orders` → `orders.dlq`).
    dead_letter_suffix: Checked<DeadLetterSuffix> [into] = ".dlq".to_owned(),
        env DEAD_LETTER_SUFFIX_ENV = "PHOTON_EXECUTOR_DEAD_LETTER_SUFFIX", shown "`.dlq`";
    /// How long shutdown waits for in-flight handlers before abandoning them.
    shutdown_timeout: AnyDuration = Duration::from_secs(30),
        env SHUTDOWN_TIMEOUT_ENV = "PHOTON_EXECUTOR_SHUTDOWN_TIMEOUT",
        aliases [Alias::deprecated_millis("PHOTON_EXECUTOR_SHUTDOWN_TIMEOUT_MS")],
        shown "`30s`";
    /// Where a durable handler without checkpoint starts (`beginning`: the oldest event).
    start_policy: Choice<StartPolicy> = StartPolicy::Beginning,
        env START_POLICY_ENV = "PHOTON_EXECUTOR_START_POLICY", shown "`beginning`";

    groups {
        /// Retries of failed handlers.
        retry: RetryPolicy => RetryPolicyBuilder;
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
        self.check_settings()
    }
}

/// The retry setters reach into the builder's [`RetryPolicyBuilder`].
impl ExecutorConfigBuilder {
    /// Attempts per event, the first included.
    ///
    /// ```
    /// let config = photon_runtime::ExecutorConfig::builder().max_attempts(1).build().unwrap();
    /// assert_eq!(config.retry.max_attempts, 1);
    /// ```
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.retry = self.retry.max_attempts(attempts);
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
        self.retry = self.retry.initial_backoff(delay);
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
        self.retry = self.retry.max_backoff(delay);
        self
    }

    /// Relative jitter of retry delays, from 0 (none) to 1.
    ///
    /// ```
    /// let config = photon_runtime::ExecutorConfig::builder().jitter(0.0).build().unwrap();
    /// assert_eq!(config.retry.jitter, 0.0);
    /// ```
    pub fn jitter(mut self, jitter: f64) -> Self {
        self.retry = self.retry.jitter(jitter);
        self
    }

    /// Resolves every field (builder > environment > default), each value checked.
    ///
    /// # Errors
    /// [`PhotonError::Config`] naming the variable or field and the accepted values.
    pub fn build(self) -> Result<ExecutorConfig> {
        self.resolve_with(&Env::process())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(builder: ExecutorConfigBuilder, pairs: &[(&str, &str)]) -> Result<ExecutorConfig> {
        builder.resolve_with(&Env::from_pairs(pairs.iter().copied()))
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
            (PARALLELISM_ENV, "many", "expected an integer of at least 1"),
            (MAX_ATTEMPTS_ENV, "0", "expected an integer of at least 1"),
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
        assert!(
            err.starts_with(
                "invalid configuration shutdown_timeout=\"30\": expected a duration with a unit"
            ),
            "{err}"
        );
        let err = serde_json::from_str::<ExecutorConfig>(r#"{"retry": {"jitter": 1.5}}"#)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("invalid configuration jitter=\"1.5\": expected a number from 0 to 1"),
            "{err}"
        );
    }

    #[test]
    fn the_configuration_page_holds_the_settings_table() {
        let page = std::path::Path::new(
            &std::env::var("CARGO_MANIFEST_DIR").expect("set by the test runner"),
        )
        .join("../docs/configuration.md");
        photon_core::config::assert_documented(&page, &ExecutorConfig::settings());
    }
}
