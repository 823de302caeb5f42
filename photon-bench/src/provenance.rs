//! Where and how a report's figures were taken: commit, time, host, server versions and
//! the options of the run.

use std::collections::BTreeMap;
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::measure::BenchOptions;

/// What a report's figures depend on besides the code.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// `git rev-parse HEAD` where the run started, or `unknown`.
    pub commit: String,
    /// When the run started, RFC 3339 in UTC.
    pub date: String,
    /// The machine.
    pub host: Host,
    /// Version of each server the run talked to, by adapter (`nats`, `fluvio`); `unknown`
    /// where the server did not say.
    pub server_versions: BTreeMap<String, String>,
    /// The options of the run.
    pub options: RunOptions,
}

/// The machine a run used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Host {
    /// Cores this process may run on.
    pub cores: usize,
    /// CPU model from `/proc/cpuinfo`, if readable.
    pub cpu: Option<String>,
    /// `MemTotal` of `/proc/meminfo` in bytes, if readable.
    pub memory_total_bytes: Option<u64>,
    /// `MemAvailable` of `/proc/meminfo` in bytes when the run started, if readable.
    pub memory_available_bytes: Option<u64>,
    /// `/proc/loadavg` when the run started, if readable.
    pub load_start: Option<LoadAverage>,
    /// `/proc/loadavg` when the run ended, if readable.
    pub load_end: Option<LoadAverage>,
}

/// The kernel's load averages over 1, 5 and 15 minutes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LoadAverage {
    /// Over the last minute.
    pub one: f64,
    /// Over the last 5 minutes.
    pub five: f64,
    /// Over the last 15 minutes.
    pub fifteen: f64,
}

/// The options a run was started with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunOptions {
    /// `compare` (each adapter beside its raw client) or `groups`.
    pub scenario: String,
    /// Adapters asked for, in order.
    pub adapters: Vec<String>,
    /// `release` or `debug`.
    pub profile: String,
    /// Handler executor parallelism (`PHOTON_EXECUTOR_PARALLELISM`).
    pub executor_parallelism: usize,
    /// What the telemetry rows turned on (`--telemetry`; empty in reports that predate
    /// them).
    #[serde(default)]
    pub telemetry: String,
    /// Sizes of the run.
    #[serde(flatten)]
    pub sizes: BenchOptions,
}

impl Provenance {
    /// Reads commit, time and host as the run starts; `load_end` and the server versions
    /// are filled in as the run goes.
    pub fn at_start(options: RunOptions) -> Self {
        Self {
            commit: git_commit(),
            date: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            host: Host::now(),
            server_versions: BTreeMap::new(),
            options,
        }
    }

    /// Reads the load average as the run ends.
    pub fn finish(&mut self) {
        self.host.load_end = read("/proc/loadavg").and_then(|text| parse_loadavg(&text));
    }
}

impl Host {
    /// This machine now (`load_end` unset).
    pub fn now() -> Self {
        let meminfo = read("/proc/meminfo");
        let meminfo = meminfo.as_deref();
        Self {
            cores: std::thread::available_parallelism().map_or(1, usize::from),
            cpu: read("/proc/cpuinfo").and_then(|text| parse_cpu_model(&text)),
            memory_total_bytes: meminfo.and_then(|text| parse_meminfo(text, "MemTotal")),
            memory_available_bytes: meminfo.and_then(|text| parse_meminfo(text, "MemAvailable")),
            load_start: read("/proc/loadavg").and_then(|text| parse_loadavg(&text)),
            load_end: None,
        }
    }
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// The commit checked out in the current directory, or `unknown` (no git, no repository).
pub fn git_commit() -> String {
    Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|output| output.status.success())
        .and_then(|output| String::from_utf8(output.stdout).ok())
        .map(|commit| commit.trim().to_owned())
        .filter(|commit| !commit.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The first three fields of `/proc/loadavg`.
pub fn parse_loadavg(text: &str) -> Option<LoadAverage> {
    let mut fields = text.split_whitespace().map(str::parse::<f64>);
    Some(LoadAverage {
        one: fields.next()?.ok()?,
        five: fields.next()?.ok()?,
        fifteen: fields.next()?.ok()?,
    })
}

/// A `/proc/meminfo` field in bytes (the file gives kB).
pub fn parse_meminfo(text: &str, field: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        if name.trim() != field {
            return None;
        }
        let kilobytes: u64 = value.trim().trim_end_matches("kB").trim().parse().ok()?;
        kilobytes.checked_mul(1024)
    })
}

/// The first `model name` of `/proc/cpuinfo`.
pub fn parse_cpu_model(text: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        (name.trim() == "model name").then(|| value.trim().to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_proc_files() {
        assert_eq!(
            parse_loadavg("2.51 1.75 0.98 3/412 12345\n"),
            Some(LoadAverage {
                one: 2.51,
                five: 1.75,
                fifteen: 0.98
            })
        );
        assert_eq!(parse_loadavg("2.51 x"), None);
        let meminfo = "MemTotal:        8038312 kB\nMemFree:  1 kB\nMemAvailable:    5120000 kB\n";
        assert_eq!(parse_meminfo(meminfo, "MemTotal"), Some(8_231_231_488));
        assert_eq!(parse_meminfo(meminfo, "MemAvailable"), Some(5_242_880_000));
        assert_eq!(parse_meminfo(meminfo, "SwapTotal"), None);
        let cpuinfo = "processor\t: 0\nmodel name\t: Example CPU @ 2.0GHz\nprocessor\t: 1\nmodel name\t: Other\n";
        assert_eq!(
            parse_cpu_model(cpuinfo).as_deref(),
            Some("Example CPU @ 2.0GHz")
        );
    }

    #[test]
    fn the_commit_is_a_hash_or_unknown() {
        let commit = git_commit();
        assert!(
            commit == "unknown"
                || (commit.len() == 40 && commit.chars().all(|c| c.is_ascii_hexdigit())),
            "{commit}"
        );
    }
}
