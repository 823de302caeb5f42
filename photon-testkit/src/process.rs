//! Child processes of multi-process tests: each killed with SIGKILL when dropped, and a
//! seeded generator for the points at which a test kills them.

use std::process::{Child, ExitStatus};

/// A child process that is killed when dropped, so that a failing test (a panic in the
/// parent) leaves no publisher, consumer or member running behind it.
#[derive(Debug)]
pub struct Spawned(Child);

impl Spawned {
    /// Takes charge of `child`.
    pub fn new(child: Child) -> Self {
        Self(child)
    }

    /// The child's process id.
    pub fn id(&self) -> u32 {
        self.0.id()
    }

    /// Whether the child has not exited yet.
    pub fn is_running(&mut self) -> bool {
        matches!(self.0.try_wait(), Ok(None))
    }

    /// SIGKILLs the child and reaps it.
    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }

    /// Waits for the child to exit.
    ///
    /// # Panics
    /// When the child cannot be waited for.
    pub fn wait(&mut self) -> ExitStatus {
        self.0.wait().expect("a child to wait for")
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if self.is_running() {
            self.kill();
        }
    }
}

/// A small seeded generator (xorshift) for kill points: a failing run can be repeated
/// with the seed it printed.
#[derive(Debug, Clone)]
pub struct Random(u64);

impl Random {
    /// A generator from `seed` (0 is replaced, as xorshift would stay at 0).
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    /// The next number below `bound` (0 when `bound` is 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound.max(1)
    }
}

/// The runtime a child process of a multi-process test runs on: two workers, as the
/// parent's `#[tokio::test]` has.
///
/// # Panics
/// When the runtime cannot start.
#[must_use]
pub fn child_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}
