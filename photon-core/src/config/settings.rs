//! [`settings!`](crate::settings): one table per config, from which the environment
//! constants, the config struct (with its serde reading and its default), the builder
//! (its setters and the resolution builder > environment > default), the checks and the
//! docs' table are all made.

/// A config's settings table. Each row is one setting:
///
/// ```text
/// /// Summary line (the docs' table shows it).
/// /// More lines (rustdoc only).
/// field: Kind [into] = default, env NAME_ENV = "PHOTON_PORT_FIELD" [, aliases [Alias, ..]]
///     [, file aliases ["old_field", ..]], shown "`default`";
/// ```
///
/// After the rows, an optional `groups { /// Summary. \n field: Group => GroupBuilder; .. }`
/// nests configs made by another `settings!` (a config file writes them as an object under
/// the field; the docs' table names their settings `field.setting`); the builder resolves
/// each group's builder ([`GroupBuilder`]; one written by hand serves too), and the port
/// writes the setters that reach into it.
///
/// It makes:
/// - `pub const NAME_ENV: &str`, the variable, documented with the setting's text and
///   default (constants follow one rule in every port: the setting's name, then `_ENV`);
/// - the config struct (`Clone`, `PartialEq`; more derives go with its attributes): a
///   public field per setting, of the kind's value type; `Default`;
///   `Deserialize` that reads every field in Photon's dialect (the same words as the
///   environment), refuses unknown fields and checks each value, naming the field;
///   `Debug` as each kind shows its value (a secret hidden); `SETTINGS`, the table for the
///   docs; and `check_settings`, the checks of values set in
///   code;
/// - the builder: a setter per setting (taking `impl Into<_>` when the row says `into`),
///   and `resolve_with(&Env)`, builder value > variable (or an alias) > default, each value set
///   or read checked once ([`resolve`](crate::config::resolve)).
///
/// Kinds are the types of [`crate::config`] that implement [`Kind`](crate::config::Kind); a port's own words are a
/// [`Choices`](crate::config::Choices) type read with [`Choice`](crate::config::Choice).
/// The crate using the macro depends on `serde`.
///
/// ```
/// use std::time::Duration;
/// use photon_core::config::{Count, Env, PositiveDuration};
///
/// photon_core::settings! {
///     /// Configuration of a port.
///     pub struct PortConfig;
///     /// Builds a [`PortConfig`].
///     pub struct PortBuilder;
///
///     /// Records per page.
///     page_size: Count<usize, 1> = 512, env PAGE_SIZE_ENV = "PHOTON_DEMO_PAGE_SIZE", shown "512";
///     /// How often to look for appends.
///     poll_interval: PositiveDuration = Duration::from_millis(100),
///         env POLL_INTERVAL_ENV = "PHOTON_DEMO_POLL_INTERVAL", shown "`100ms`";
/// }
///
/// let env = Env::from_pairs([(POLL_INTERVAL_ENV, "20ms")]);
/// let config = PortBuilder::new().page_size(64).resolve_with(&env).unwrap();
/// assert_eq!((config.page_size, config.poll_interval), (64, Duration::from_millis(20)));
/// let refused = PortBuilder::new().page_size(0).resolve_with(&env).unwrap_err();
/// assert_eq!(refused.to_string(), "invalid configuration page_size=\"0\": expected an integer of at least 1");
/// let from_file: PortConfig = serde_json::from_str(r#"{"poll_interval": "1s"}"#).unwrap();
/// assert_eq!(from_file.poll_interval, Duration::from_secs(1));
/// ```
#[macro_export]
macro_rules! settings {
    (
        $(#[$config_meta:meta])*
        pub struct $Config:ident;
        $(#[$builder_meta:meta])*
        pub struct $Builder:ident;
        $(
            #[doc = $summary:literal]
            $(#[doc = $doc:literal])*
            $field:ident : $kind:ty $([$into:ident])? = $default:expr,
                env $ENV:ident = $var:literal $(, aliases [$($alias:expr),* $(,)?])?
                $(, file aliases [$($file_alias:literal),* $(,)?])?,
                shown $shown:literal;
        )*
        $(
            groups {
                $(
                    #[doc = $group_summary:literal]
                    $(#[doc = $group_doc:literal])*
                    $group:ident : $Group:ty => $GroupBuilder:ty;
                )*
            }
        )?
    ) => {
        $(
            #[doc = $summary]
            $(#[doc = $doc])*
            #[doc = ""]
            #[doc = concat!("Setting `", stringify!($field), "`; default ", $shown, ".")]
            pub const $ENV: &str = $var;
        )*

        $(#[$config_meta])*
        #[derive(Clone, PartialEq)]
        #[non_exhaustive]
        pub struct $Config {
            $(
                #[doc = $summary]
                $(#[doc = $doc])*
                pub $field: <$kind as $crate::config::Kind>::Value,
            )*
            $($(
                #[doc = $group_summary]
                $(#[doc = $group_doc])*
                pub $group: $Group,
            )*)?
        }

        impl ::core::fmt::Debug for $Config {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.debug_struct(stringify!($Config))
                    $(.field(
                        stringify!($field),
                        &$crate::config::DebugValue::<$kind>(&self.$field),
                    ))*
                    $($(.field(stringify!($group), &self.$group))*)?
                    .finish()
            }
        }

        impl ::core::default::Default for $Config {
            fn default() -> Self {
                Self {
                    $($field: $default,)*
                    $($($group: <$Group as ::core::default::Default>::default(),)*)?
                }
            }
        }

        impl $Config {
            /// Every setting: field, variable, kind, default and summary, for the docs.
            pub const SETTINGS: &'static [$crate::config::Setting] = &[
                $($crate::config::Setting {
                    field: stringify!($field),
                    variable: $var,
                    form: <$kind as $crate::config::Kind>::form,
                    default: $shown,
                    summary: $summary,
                    group: "",
                    aliases: &[$($($alias),*)?],
                },)*
            ];

            /// [`SETTINGS`](Self::SETTINGS), then each group's settings (named by the
            /// group), for the docs.
            pub fn settings() -> ::std::vec::Vec<$crate::config::Setting> {
                #[allow(unused_mut)]
                let mut settings = Self::SETTINGS.to_vec();
                $($(
                    settings.extend(<$GroupBuilder as $crate::config::GroupBuilder>::group_settings().into_iter().map(|setting| {
                        $crate::config::Setting { group: stringify!($group), ..setting }
                    }));
                )*)?
                settings
            }

            /// Refuses values that parse but cannot work (zero sizes and intervals, counts
            /// out of range), naming the field.
            ///
            /// # Errors
            /// [`PhotonError::Config`]($crate::PhotonError::Config) naming the field.
            pub fn check_settings(&self) -> $crate::Result<()> {
                $(<$kind as $crate::config::Kind>::check(stringify!($field), &self.$field)?;)*
                $($(
                    <$GroupBuilder as $crate::config::GroupBuilder>::check_group(&self.$group)
                        .map_err(|err| {
                            <$GroupBuilder as $crate::config::GroupBuilder>::named_in(
                                stringify!($group),
                                err,
                            )
                        })?;
                )*)?
                Ok(())
            }
        }

        impl<'de> serde::Deserialize<'de> for $Config {
            fn deserialize<D: serde::Deserializer<'de>>(
                deserializer: D,
            ) -> ::core::result::Result<Self, D::Error> {
                #[derive(serde::Deserialize)]
                #[serde(deny_unknown_fields)]
                struct Raw {
                    $(
                        #[serde(default, deserialize_with = "photon_core::config::present")]
                        $($(#[serde(alias = $file_alias)])*)?
                        $field: Option<Option<$crate::config::RawSetting>>,
                    )*
                    $($(
                        #[serde(default)]
                        $group: Option<$Group>,
                    )*)?
                }
                let raw = <Raw as serde::Deserialize>::deserialize(deserializer)?;
                let defaults = Self::default();
                Ok(Self {
                    $($field: $crate::config::from_file::<$kind>(stringify!($field), raw.$field)
                        .map_err(<D::Error as serde::de::Error>::custom)?
                        .unwrap_or(defaults.$field),)*
                    $($($group: raw.$group.unwrap_or(defaults.$group),)*)?
                })
            }
        }

        $(#[$builder_meta])*
        ///
        /// | setting | variable | default |
        /// |---|---|---|
        $(#[doc = concat!(
            "| [`", stringify!($field), "`](Self::", stringify!($field), ") | `", $var, "` | ",
            $shown, " |"
        )])*
        #[derive(Clone, Default)]
        #[must_use]
        pub struct $Builder {
            $($field: Option<<$kind as $crate::config::Kind>::Value>,)*
            $($($group: $GroupBuilder,)*)?
        }

        impl ::core::fmt::Debug for $Builder {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.debug_struct(stringify!($Builder))
                    $(.field(
                        stringify!($field),
                        &self.$field.as_ref().map($crate::config::DebugValue::<$kind>),
                    ))*
                    $($(.field(stringify!($group), &self.$group))*)?
                    .finish()
            }
        }

        impl $Builder {
            /// A builder with nothing set.
            pub fn new() -> Self {
                Self::default()
            }

            $(
                $crate::__settings_setter! {
                    $($into)?;
                    #[doc = $summary]
                    $(#[doc = $doc])*
                    $field: $kind
                }
            )*

            /// Builder values, then `env`'s variables, then the defaults; each value set or
            /// read is checked once, named by its field or its variable.
            ///
            /// # Errors
            /// [`PhotonError::Config`]($crate::PhotonError::Config) naming the variable or
            /// the field of a value that is not accepted.
            pub fn resolve_with(self, env: &$crate::config::Env) -> $crate::Result<$Config> {
                let defaults = $Config::default();
                Ok($Config {
                    $($field: {
                        const VAR: $crate::config::EnvVar = $crate::config::EnvVar::new($var)
                            $(.aliases(&[$($alias),*]))?;
                        $crate::config::resolve::<$kind>(stringify!($field), self.$field, env, &VAR)?
                            .unwrap_or(defaults.$field)
                    },)*
                    $($($group: $crate::config::GroupBuilder::resolve_group(self.$group, env)
                        .map_err(|err| {
                            <$GroupBuilder as $crate::config::GroupBuilder>::named_in(
                                stringify!($group),
                                err,
                            )
                        })?,)*)?
                })
            }
        }

        impl $crate::config::GroupBuilder for $Builder {
            type Value = $Config;

            fn resolve_group(self, env: &$crate::config::Env) -> $crate::Result<$Config> {
                self.resolve_with(env)
            }
            fn group_settings() -> ::std::vec::Vec<$crate::config::Setting> {
                $Config::settings()
            }
            fn check_group(value: &$Config) -> $crate::Result<()> {
                value.check_settings()
            }
        }
    };
}

/// The builder of a group of settings nested in a config ([`settings!`]'s `groups`): every
/// builder `settings!` makes is one, and a port writes one by hand for a group whose
/// settings depend on each other (a TLS switch that a CA file turns on).
pub trait GroupBuilder: Default + Clone + ::core::fmt::Debug {
    /// The group's resolved value, the config's field.
    type Value;

    /// Builder values, then `env`'s variables, then the defaults, each checked.
    ///
    /// # Errors
    /// [`PhotonError::Config`](crate::PhotonError::Config) naming the variable or field of
    /// a refused value.
    fn resolve_group(self, env: &crate::config::Env) -> crate::Result<Self::Value>;
    /// The group's settings, for the docs.
    fn group_settings() -> Vec<crate::config::Setting>;
    /// Checks a value read from a config file or set in code, naming the field.
    ///
    /// # Errors
    /// [`PhotonError::Config`](crate::PhotonError::Config) naming the field.
    fn check_group(value: &Self::Value) -> crate::Result<()>;
    /// An error of the group as the config reports it: by default a field it names is put
    /// under the group ([`in_group`]); a builder whose errors already name the setting as
    /// users write it (a setter, a variable) returns them as they are.
    fn named_in(group: &str, err: crate::PhotonError) -> crate::PhotonError {
        in_group(group, err)
    }
}

/// `err` with a field it names put under `group` (`max_attempts` becomes
/// `retry.max_attempts`); a variable it names (`PHOTON_..`, upper case) stays as it is.
pub fn in_group(group: &str, err: crate::PhotonError) -> crate::PhotonError {
    match err {
        crate::PhotonError::Config {
            variable,
            value,
            expected,
        } if !variable.chars().any(|c| c.is_ascii_uppercase()) => crate::PhotonError::Config {
            variable: format!("{group}.{variable}"),
            value,
            expected,
        },
        other => other,
    }
}

/// A setter of [`settings!`]: taking the value, or `impl Into` of it for rows marked `into`.
#[doc(hidden)]
#[macro_export]
macro_rules! __settings_setter {
    (into; $(#[$meta:meta])* $field:ident : $kind:ty) => {
        $(#[$meta])*
        pub fn $field(
            mut self,
            value: impl Into<<$kind as $crate::config::Kind>::Set>,
        ) -> Self {
            self.$field = Some(<$kind as $crate::config::Kind>::set(value.into()));
            self
        }
    };
    (; $(#[$meta:meta])* $field:ident : $kind:ty) => {
        $(#[$meta])*
        pub fn $field(mut self, value: <$kind as $crate::config::Kind>::Set) -> Self {
            self.$field = Some(<$kind as $crate::config::Kind>::set(value));
            self
        }
    };
}
