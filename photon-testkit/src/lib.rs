//! Photon's conformance suite, as a library so that any storage port (including third-party
//! ones) can run it against its real backend.
//!
//! A port crate's integration test provides a [`PortFactory`] and expands
//! [`conformance_tests!`], which makes one `#[tokio::test]` per scenario:
//!
//! ```ignore
//! photon_testkit::conformance_tests!(async { Some(MyFactory::new().await) });
//! ```
//!
//! The factory expression returns `None` when the backend is not reachable; the test then
//! prints `skipped: <why>` (see [`skip_or_fail`]) unless `PHOTON_TEST_REQUIRE` names the
//! adapter, in which case it fails.
//!
//! Every scenario works in a fresh namespace (unique topic and subscription names), asserts
//! exact counts, order and content, and waits with deadlines, never "at least one".

mod capability;
pub mod composition;
mod context;
pub mod crash;
mod credentials;
mod delayed_processes;
mod group_checks;
mod group_handlers;
pub mod group_processes;
pub mod group_restart;
mod mem;
pub mod outbox;
pub mod process;
pub mod scenarios;
pub mod sharded_resume;
pub mod transactional_crash;

pub use capability::Capability;
pub use context::{
    assert_quiet, assert_undecodable, injection_failed, plain_draft, skip_or_fail, take_exact,
    Context, PortFactory, UndecodableRecord, DEADLINE, REQUIRE_ENV,
};
pub use credentials::assert_refused_credentials;
pub use mem::MemFactory;
pub use scenarios::{run_all, run_scenario, Scenario, ScenarioFn, SCENARIOS};

/// Expands to one `#[tokio::test]` per conformance scenario (the list in
/// `scenarios/mod.rs`), each run by [`run_scenario`]: a scenario whose capabilities the port
/// lacks checks that the port refuses them with `PhotonError::Unsupported`.
///
/// `$factory` is an expression evaluating to a future of `Option<F>` where
/// `F: PortFactory`; `None` means the backend is absent and the test is skipped (or fails
/// under `PHOTON_TEST_REQUIRE`, which the factory checks with [`skip_or_fail`]). Besides the
/// scenarios it adds a `composition` test; `conformance_tests!(scenarios: $factory)` adds
/// the scenarios only (a second layout of a port, e.g. four shards, beside its main suite).
#[macro_export]
macro_rules! conformance_tests {
    (scenarios: $factory:expr) => {
        $crate::__photon_scenarios!(conformance_tests { @each $factory; });
    };
    ($factory:expr) => {
        $crate::__photon_scenarios!(conformance_tests { @each $factory; });

        /// Seeded random schedules of every operation, checked against one model
        /// (`photon_testkit::composition`): `PHOTON_COMPOSITION_CASES` schedules (default
        /// 4) from `PHOTON_COMPOSITION_SEED` (default 1).
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn composition() {
            let factory = $factory.await;
            if let Some(factory) = factory {
                $crate::composition::run_cases(::std::sync::Arc::new(factory), &[], 4).await;
            }
        }
    };
    (@each $factory:expr; $($module:ident :: $name:ident [$($capability:ident),*]),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let factory = $factory.await;
                if let Some(factory) = factory {
                    $crate::run_scenario(stringify!($name), ::std::sync::Arc::new(factory)).await;
                }
            }
        )*
    };
}
