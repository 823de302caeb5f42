//! Consumer groups across processes connected to one Fluvio cluster: the multi-process
//! group tests of [`photon_testkit::group_processes`] (SIGKILLed members, a member frozen
//! past its lease), each under its own topic prefix. The children are this test binary run
//! again.

mod common;

photon_testkit::group_process_tests! {
    role_env: "PHOTON_FLUVIO_TEST_GROUP_ROLE",
    open: common::open_at,
    setup: common::location,
    tests: {
        group_members_survive_kills => members_survive_kills(1),
        frozen_member_is_fenced => frozen_member_is_fenced(1),
        group_members_survive_kills_three_shards => members_survive_kills(3),
        group_handlers_hold_through_joins_kills_and_freezes =>
            handlers_hold_through_joins_kills_and_freezes(1),
        group_handlers_hold_through_joins_kills_and_freezes_three_shards =>
            handlers_hold_through_joins_kills_and_freezes(3),
        /// Seeded schedules of joins, SIGKILLs and SIGSTOPs of member and publisher
        /// processes (`photon_testkit::composition::ProcessSchedule`), checked from the
        /// processes' logs.
        group_composition => composition(1),
        /// Delayed events through SIGKILLed publishing processes running the scheduler.
        delayed_survive_kills => delayed_survive_kills(1),
        delayed_survive_kills_three_shards => delayed_survive_kills(3),
    }
}
