//! Refused credentials are a permanent, typed error naming the server and the user, never
//! the password, returned at once: a caller that retries while `is_retryable()` would
//! otherwise loop for ever on the same refusal. The test server trusts 127.0.0.1, so the
//! refusal here is of a role that does not exist (SQLSTATE 28000); a wrong password
//! (28P01) is read the same way.

mod common;

use common::PgFactory;
use photon_backend_postgres::PostgresStoragePort;

/// `url` with another user and password.
fn as_user(url: &str, user: &str, password: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a postgres:// URL");
    let host_and_more = rest.split_once('@').map_or(rest, |(_, after)| after);
    format!("{scheme}://{user}:{password}@{host_and_more}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_credentials_are_permanent_and_name_server_and_user() {
    let Some(factory) = PgFactory::new().await else {
        return;
    };
    let url = as_user(&factory.url, "photon_no_such_role", "s3cret-never-shown");
    let expected: tokio_postgres::Config = common::without_tls(&url).parse().unwrap();
    let expected_server = match (&expected.get_hosts()[0], expected.get_ports()) {
        (tokio_postgres::config::Host::Tcp(host), [port, ..]) => format!("{host}:{port}"),
        (tokio_postgres::config::Host::Tcp(host), []) => format!("{host}:5432"),
        (other, _) => panic!("a TCP test server, not {other:?}"),
    };

    let error = PostgresStoragePort::builder()
        .url(url)
        .schema(factory.schema.clone())
        .build()
        .await
        .unwrap_err();
    let message = photon_testkit::assert_refused_credentials(
        &error,
        "postgres",
        &expected_server,
        "user \"photon_no_such_role\"",
        "s3cret-never-shown",
    );
    assert!(message.contains("(28000)"), "{message}");
}
