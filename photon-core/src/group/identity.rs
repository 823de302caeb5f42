//! Member names that stay the same when a process restarts where it ran before, so that a
//! restarted member gets its partitions back (static membership) instead of joining as a
//! stranger and moving partitions around.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// Environment variable naming this process's group members (e.g. a pod or instance name
/// that a supervisor keeps across restarts).
pub const MEMBER_ENV: &str = "PHOTON_GROUP_MEMBER";

/// This process's member name: [`MEMBER_ENV`] when set, else `<hostname>-<pid>`.
///
/// The hostname keeps processes of different containers apart even when each runs as
/// PID 1, and a container restarted under its name (PID 1 again) reuses its member name.
pub fn default_member() -> String {
    match std::env::var(MEMBER_ENV) {
        Ok(name) if !name.trim().is_empty() => name.trim().to_owned(),
        _ => format!("{}-{}", hostname(), std::process::id()),
    }
}

/// The name of this process's next member of `group` on `topic`: [`default_member`] for the
/// first, then `<name>-2`, `<name>-3`, ... A process that joins its members in the same
/// order after a restart gives each the name it had.
pub fn nth_member(group: &str, topic: &str) -> String {
    static JOINED: OnceLock<Mutex<HashMap<(String, String), u32>>> = OnceLock::new();
    let joined = JOINED.get_or_init(Mutex::default);
    // Only a counter is bumped under this lock: a panic cannot leave it torn.
    let mut joined = joined
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let count = joined
        .entry((group.to_owned(), topic.to_owned()))
        .or_insert(0);
    *count += 1;
    let base = default_member();
    match *count {
        1 => base,
        n => format!("{base}-{n}"),
    }
}

fn hostname() -> String {
    let from_env = std::env::var("HOSTNAME").ok();
    let from_kernel = || std::fs::read_to_string("/proc/sys/kernel/hostname").ok();
    let from_etc = || std::fs::read_to_string("/etc/hostname").ok();
    from_env
        .or_else(from_kernel)
        .or_else(from_etc)
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "host".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_of_one_group_get_distinct_stable_names() {
        let first = nth_member("identity-g", "identity-t");
        let second = nth_member("identity-g", "identity-t");
        let other = nth_member("identity-other", "identity-t");
        assert_eq!(first, default_member());
        assert_eq!(second, format!("{first}-2"));
        assert_eq!(other, first);
        assert!(
            first.ends_with(&format!("-{}", std::process::id()))
                || std::env::var(MEMBER_ENV).is_ok()
        );
    }
}
