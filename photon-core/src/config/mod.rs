//! Photon's one configuration dialect, shared by every port and the runtime.
//!
//! Every setting resolves in the same order: a builder call, then its environment variable
//! (`PHOTON_<ADAPTER>_<FIELD>`), then its default. Values are written the same way
//! everywhere, in the environment and in config files read with serde:
//!
//! | kind | form | examples |
//! |---|---|---|
//! | duration | a number with a unit (humantime): `ms`, `s`, `m`, `h`, `d`, combinable; `0` | `250ms`, `30s`, `7d`, `1h 30m` |
//! | size | bytes, optionally with a unit (`KiB` = 1024, `KB` = 1000, up to `PiB`/`PB`), any case | `512`, `64KiB`, `1MB` |
//! | flag | `true`/`false`, `1`/`0`, `yes`/`no`, `on`/`off`, any case | `on` |
//! | count | a whole number within the setting's range | `16` |
//!
//! A blank variable counts as unset. A refused value is a [`PhotonError::Config`] naming
//! the variable (or builder field), the value and what is accepted. Where a setting was
//! renamed, the old name is still read ([`Alias`]); setting both to different values is
//! refused rather than silently picking one.
//!
//! This module is for port authors and the runtime; users meet it through each port's
//! builder, `from_env()` and config struct.
//!
//! [`PhotonError::Config`]: crate::PhotonError::Config

mod env;
mod kind;
mod parse;
mod settings;

pub use settings::{in_group, GroupBuilder};

pub use env::{Alias, AliasForm, Env, EnvVar, Found};
pub use kind::{
    assert_documented, from_file, markdown_table, present, resolve, AnyDuration, Checked, Choice,
    Choices, Count, DebugValue, FilePath, Flag, Fraction, Kind, Limit, Optional, PositiveDuration,
    RawSetting, Setting, Size, Text, TextRule,
};
pub use parse::{
    check_count, parse_choice, parse_count, parse_duration, parse_flag, parse_size, DURATION_FORM,
    FLAG_FORM, SIZE_FORM,
};
