//! Writes the certificates of a TLS test cluster into a directory.
//!
//! ```text
//! cargo run -q -p photon-backend-fluvio --example fluvio_tls_certs -- DIR [DOMAIN=fluvio.local]
//! ```
//!
//! `DIR/ca.pem` (a fresh CA), `DIR/server.pem` and `DIR/server-key.pem` (for the SC and the
//! SPUs: `DOMAIN`, `*.DOMAIN`, `localhost`, `127.0.0.1`), `DIR/client.pem` and
//! `DIR/client-key.pem` (a client certificate of the CA). Used by `scripts/fluvio-local.sh`
//! when `PHOTON_FLUVIO_TLS_DIR` names a directory without `ca.pem`. Test certificates only:
//! the keys are written unencrypted.

#[path = "../tests/common/certs.rs"]
mod certs;

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(dir) = args.first() else {
        return Err("usage: fluvio_tls_certs DIR [DOMAIN]".to_owned());
    };
    let domain = args.get(1).map_or(certs::TEST_DOMAIN, String::as_str);
    let files = certs::write_cluster_certs(std::path::Path::new(dir), domain)?;
    eprintln!(
        "wrote {}, {}, {}, {}, {} for {domain}",
        files.ca.display(),
        files.server.display(),
        files.server_key.display(),
        files.client.display(),
        files.client_key.display()
    );
    Ok(())
}
