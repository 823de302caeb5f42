//! The scenarios of the conformance catalogue, one async function each, registered once in
//! [`__photon_scenarios!`](crate::__photon_scenarios) with the capabilities they need.
//!
//! The runner reads the port's capabilities first. A scenario runs when the port claims
//! every capability it needs; otherwise the runner asserts, for each missing one, that the
//! port refuses its calls with `PhotonError::Unsupported` (see [`Capability`]), so a
//! missing capability is checked, never passed silently.

mod batches;
mod delayed;
mod delivery;
mod failures;
mod groups;
mod headers;
mod lifecycle;
mod payloads;
mod queries;
pub use queries::MALFORMED_EVENT_IDS;
mod replay;
mod security;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use photon_core::{Event, Result};

use crate::capability::Capability;
use crate::context::{Context, PortFactory};

/// A scenario's body: takes a fresh context, panics on a broken expectation.
pub type ScenarioFn = fn(Context) -> Pin<Box<dyn Future<Output = ()> + Send>>;

/// A registered scenario.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    /// Its name, also the name of its test.
    pub name: &'static str,
    /// What the port must claim for the scenario to run.
    pub requires: &'static [Capability],
    /// The scenario.
    pub run: ScenarioFn,
}

/// The one list of scenarios, in catalogue order, each with the capabilities it needs.
/// Expands `$callback!` from this crate with the list appended to `$prefix`; both
/// [`SCENARIOS`] and [`conformance_tests!`](crate::conformance_tests) are made from it.
#[doc(hidden)]
#[macro_export]
macro_rules! __photon_scenarios {
    ($callback:ident { $($prefix:tt)* }) => {
        $crate::$callback! { $($prefix)*
            delivery::round_trip [],
            delivery::live_delivery [],
            delivery::concurrent_publishers [],
            delivery::many_topics [],
            delivery::topic_isolation [],
            delivery::key_filter [],
            delivery::per_key_order [],
            delivery::late_subscriber [],
            delivery::seq_strictly_increasing [],
            payloads::payload_shapes [],
            payloads::limits_refused [],
            headers::headers_round_trip [],
            batches::publish_batch [],
            replay::after_seq_exact [],
            replay::checkpoint_monotonic [],
            replay::checkpoint_isolation [],
            replay::durable_resume [],
            replay::durable_resume_on_drop [],
            replay::resume_without_checkpoint [],
            replay::sharded_resume_loses_nothing [],
            replay::large_replay [],
            replay::gap_after_truncate [Truncate, Replay],
            replay::gap_while_reading [Truncate],
            replay::checkpoint_reset [CheckpointReset, Replay],
            queries::get_event [GetEvent],
            queries::listing [List],
            queries::catalog [Catalog],
            queries::truncate [Truncate],
            security::sealed_at_rest [],
            security::wrong_key_continues [],
            security::tampered_records_refused [],
            security::key_rotation [],
            lifecycle::concurrent_close [],
            lifecycle::subscriber_error_resume [],
            lifecycle::publisher_drop [],
            groups::groups_share_work [ConsumerGroups],
            groups::group_member_leaves [ConsumerGroups],
            groups::group_resumes_after_restart [ConsumerGroups],
            groups::group_leave_hands_over_quickly [ConsumerGroups],
            groups::group_lost_lease_is_fenced [ConsumerGroups],
            groups::group_read_ahead_bounded [ConsumerGroups],
            groups::group_member_takes_over_partitions [ConsumerGroups],
            groups::group_partitions_change [ConsumerGroups],
            failures::undecodable_record [],
            delayed::delayed_never_early [ConsumerGroups],
            delayed::delayed_survive_restart [ConsumerGroups],
            delayed::delayed_by_virtual_clock [ConsumerGroups],
            delayed::scheduled_under_load [ConsumerGroups],
            delayed::retry_after_requeues [ConsumerGroups],
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __photon_catalogue {
    ($($module:ident :: $name:ident [$($capability:ident),*]),* $(,)?) => {
        /// Every scenario, in catalogue order.
        pub const SCENARIOS: &[Scenario] = &[
            $(Scenario {
                name: stringify!($name),
                requires: &[$(Capability::$capability),*],
                run: |ctx| Box::pin($module::$name(ctx)),
            }),*
        ];
    };
}

crate::__photon_scenarios!(__photon_catalogue {});

/// How long one scenario may run: each wait inside it is bounded by
/// [`DEADLINE`](crate::context::DEADLINE), so a scenario still running after this is stuck
/// on something unbounded, a defect to report rather than to wait out.
pub const SCENARIO_BOUND: std::time::Duration = std::time::Duration::from_secs(300);

/// Runs one scenario by name in a fresh namespace: the scenario itself when the port
/// claims what it needs, else the refusal checks of the capabilities the port lacks.
///
/// # Panics
/// When the scenario or a refusal check fails, or the name is unknown.
pub async fn run_scenario(name: &str, factory: Arc<dyn PortFactory>) {
    let Some(scenario) = SCENARIOS.iter().find(|s| s.name == name) else {
        panic!("unknown conformance scenario {name:?}");
    };
    let ctx = Context::new(factory);
    let port = ctx.port().await;
    let missing: Vec<Capability> = scenario
        .requires
        .iter()
        .copied()
        .filter(|capability| !capability.claimed(port.as_ref()))
        .collect();
    if missing.is_empty() {
        // The port opened to read the capabilities is the scenario's first port.
        let port_label = port.label();
        ctx.hand_back(port);
        if tokio::time::timeout(SCENARIO_BOUND, (scenario.run)(ctx))
            .await
            .is_err()
        {
            panic!(
                "scenario {name} on {label} did not finish within {SCENARIO_BOUND:?}",
                label = port_label
            );
        }
        return;
    }
    for capability in &missing {
        capability.assert_refused(&ctx, &port).await;
    }
    println!(
        "{name}: {} lacks {missing:?} and refuses it with Unsupported",
        port.label()
    );
}

/// Runs every scenario in order, each as [`run_scenario`] does.
///
/// # Panics
/// At the first failing scenario.
pub async fn run_all(factory: Arc<dyn PortFactory>) {
    for scenario in SCENARIOS {
        run_scenario(scenario.name, factory.clone()).await;
    }
}

/// Publishes the events `{"i": i}` for `i` in `range`, event `i` under key `k{i % keys}`.
pub(crate) async fn publish_keyed(
    store: &photon_core::EventStore,
    topic: &str,
    range: std::ops::Range<i64>,
    keys: i64,
) {
    let keys: Vec<String> = (0..keys).map(|k| format!("k{k}")).collect();
    publish_over(store, topic, range, &keys).await;
}

/// Publishes `{"i": i}` for each `i` of `range`, keyed `keys[i % keys.len()]`.
pub(crate) async fn publish_over(
    store: &photon_core::EventStore,
    topic: &str,
    range: std::ops::Range<i64>,
    keys: &[String],
) {
    for i in range {
        let key = &keys[usize::try_from(i).expect("a non-negative i") % keys.len()];
        store
            .publish(
                topic,
                Some(key),
                serde_json::json!(null),
                serde_json::json!({"i": i}),
            )
            .await
            .unwrap();
    }
}

/// The first stored record of `topic`, read from the port (below sealing and decoding).
pub(crate) async fn first_raw_record(
    store: &photon_core::EventStore,
    topic: &str,
) -> photon_core::Record {
    let mut raw = store.port().subscribe(photon_core::SubscribeRequest {
        topic: topic.to_owned(),
        key: None,
        start: photon_core::StartAt::Beginning,
        durable: None,
    });
    crate::take_exact(&mut raw, 1).await.remove(0).unwrap()
}

/// The payloads `{"i": ..}` of the next `count` events of `stream`, per key in order.
pub(crate) async fn payloads_per_key(
    stream: &mut photon_core::EventStream,
    count: usize,
) -> std::collections::BTreeMap<String, Vec<i64>> {
    let mut per_key: std::collections::BTreeMap<String, Vec<i64>> = Default::default();
    for event in crate::take_exact(stream, count).await.into_iter().map(ok) {
        per_key
            .entry(event.topic_key.clone().unwrap())
            .or_default()
            .push(event.payload["i"].as_i64().unwrap());
    }
    per_key
}

pub(crate) fn ok(item: Result<Event>) -> Event {
    match item {
        Ok(event) => event,
        Err(err) => panic!("unexpected error item: {err}"),
    }
}
