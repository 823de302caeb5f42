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

mod context;
pub mod crash;
pub mod group_processes;
pub mod group_restart;
pub mod scenarios;

pub use context::{
    assert_quiet, skip_or_fail, take_exact, Context, PortFactory, DEADLINE, REQUIRE_ENV,
};
pub use scenarios::{run_all, run_scenario, SCENARIOS};

/// Expands to one `#[tokio::test]` per conformance scenario.
///
/// `$factory` is an expression evaluating to a future of `Option<F>` where
/// `F: PortFactory`; `None` means the backend is absent and the test is skipped (or fails
/// under `PHOTON_TEST_REQUIRE`, which the factory checks with [`skip_or_fail`]).
#[macro_export]
macro_rules! conformance_tests {
    ($factory:expr) => {
        $crate::conformance_tests!(@each $factory;
            round_trip, live_delivery, concurrent_publishers, many_topics, topic_isolation,
            key_filter, per_key_order, late_subscriber, payload_shapes, limits_refused,
            after_seq_exact, checkpoint_monotonic, checkpoint_isolation, durable_resume,
            durable_resume_on_drop, resume_without_checkpoint, sharded_resume_loses_nothing, get_event, listing, catalog, truncate,
            sealed_at_rest, wrong_key_continues, tampered_records_refused, key_rotation,
            concurrent_close, subscriber_error_resume, publisher_drop, seq_strictly_increasing,
            groups_share_work, group_member_leaves, group_resumes_after_restart,
            group_leave_hands_over_quickly, group_lost_lease_is_fenced, group_read_ahead_bounded,
            group_member_takes_over_partitions,
            undecodable_record,
            gap_after_truncate
        );
    };
    (@each $factory:expr; $($name:ident),* $(,)?) => {
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
