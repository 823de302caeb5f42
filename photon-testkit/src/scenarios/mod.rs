//! The scenarios of the conformance catalogue, one async function each.

mod delivery;
mod failures;
mod groups;
mod lifecycle;
mod payloads;
mod queries;
mod replay;
mod security;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use photon_core::{Event, Result};

use crate::context::{Context, PortFactory};

/// A scenario: takes a fresh context, panics on a broken expectation.
pub type Scenario = fn(Context) -> Pin<Box<dyn Future<Output = ()> + Send>>;

macro_rules! catalogue {
    ($($module:ident :: $name:ident),* $(,)?) => {
        /// Every scenario by name, in catalogue order.
        pub const SCENARIOS: &[(&str, Scenario)] = &[
            $((stringify!($name), |ctx| Box::pin($module::$name(ctx)))),*
        ];
    };
}

catalogue!(
    delivery::round_trip,
    delivery::live_delivery,
    delivery::concurrent_publishers,
    delivery::many_topics,
    delivery::topic_isolation,
    delivery::key_filter,
    delivery::per_key_order,
    delivery::late_subscriber,
    delivery::seq_strictly_increasing,
    payloads::payload_shapes,
    payloads::limits_refused,
    replay::after_seq_exact,
    replay::checkpoint_monotonic,
    replay::checkpoint_isolation,
    replay::durable_resume,
    replay::durable_resume_on_drop,
    replay::resume_without_checkpoint,
    replay::sharded_resume_loses_nothing,
    replay::gap_after_truncate,
    queries::get_event,
    queries::listing,
    queries::catalog,
    queries::truncate,
    security::sealed_at_rest,
    security::wrong_key_continues,
    security::tampered_records_refused,
    security::key_rotation,
    lifecycle::concurrent_close,
    lifecycle::subscriber_error_resume,
    lifecycle::publisher_drop,
    groups::groups_share_work,
    groups::group_member_leaves,
    groups::group_resumes_after_restart,
    groups::group_leave_hands_over_quickly,
    groups::group_lost_lease_is_fenced,
    groups::group_read_ahead_bounded,
    groups::group_member_takes_over_partitions,
    failures::undecodable_record,
);

/// Runs one scenario by name in a fresh namespace.
///
/// # Panics
/// When the scenario fails or the name is unknown.
pub async fn run_scenario(name: &str, factory: Arc<dyn PortFactory>) {
    let Some((_, scenario)) = SCENARIOS.iter().find(|(n, _)| *n == name) else {
        panic!("unknown conformance scenario {name:?}");
    };
    scenario(Context::new(factory)).await;
}

/// Runs every scenario in order.
///
/// # Panics
/// At the first failing scenario.
pub async fn run_all(factory: Arc<dyn PortFactory>) {
    for (_, scenario) in SCENARIOS {
        scenario(Context::new(factory.clone())).await;
    }
}

/// The event of a stream item, or a panic naming the error.
pub(crate) fn ok(item: Result<Event>) -> Event {
    match item {
        Ok(event) => event,
        Err(err) => panic!("unexpected error item: {err}"),
    }
}
