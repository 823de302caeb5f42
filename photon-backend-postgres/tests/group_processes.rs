//! Consumer groups across processes sharing one PostgreSQL schema: the multi-process group
//! tests of [`photon_testkit::group_processes`] (SIGKILLed members, a member frozen past
//! its lease), the children being this test binary run again. The location handed to the
//! children is the schema's name; the server is the test server of `common::url`.

mod common;

use std::path::Path;
use std::sync::Arc;

use futures::future::BoxFuture;
use photon_core::StoragePort;

use common::PgFactory;

fn open(schema: String) -> BoxFuture<'static, Arc<dyn StoragePort>> {
    Box::pin(async move { Arc::new(common::port_on(&schema).await) as _ })
}

/// A fresh schema (created before the children race to open it), with the factory that
/// drops it at the end.
async fn schema(_dir: &Path) -> Option<(String, PgFactory)> {
    let factory = PgFactory::new().await?;
    drop(factory.port().await.unwrap());
    Some((factory.schema.clone(), factory))
}

photon_testkit::group_process_tests! {
    role_env: "PHOTON_POSTGRES_TEST_GROUP_ROLE",
    open: open,
    setup: schema,
}
