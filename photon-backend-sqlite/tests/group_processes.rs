//! Consumer groups across processes sharing one SQLite file: the multi-process group tests
//! of [`photon_testkit::group_processes`] (SIGKILLed members, a member frozen past its
//! lease), the children being this test binary run again.

mod common;

use std::path::Path;
use std::sync::Arc;

use futures::future::BoxFuture;
use photon_core::StoragePort;

fn open(db: String) -> BoxFuture<'static, Arc<dyn StoragePort>> {
    Box::pin(async move { Arc::new(common::open_port(Path::new(&db))) as _ })
}

/// A database file in `dir` whose schema exists before the children race to open it.
async fn database(dir: &Path) -> Option<(String, ())> {
    let db = dir.join("group.db");
    drop(common::open_port(&db));
    Some((db.display().to_string(), ()))
}

photon_testkit::group_process_tests! {
    role_env: "PHOTON_SQLITE_TEST_GROUP_ROLE",
    open: open,
    setup: database,
}
