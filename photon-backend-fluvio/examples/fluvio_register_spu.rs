//! Registers a single SPU with a local Fluvio SC and waits until it is online.
//!
//! ```text
//! cargo run -q -p photon-backend-fluvio --example fluvio_register_spu -- \
//!     127.0.0.1:9003 [SPU_ID=5001] [PUBLIC=127.0.0.1:9010] [PRIVATE=127.0.0.1:9011]
//! ```
//!
//! Used by `scripts/fluvio-local.sh`. An SPU already registered under the id is kept.
//! Logs go to stderr; the exit status says whether the SPU came online within 60 s.

use std::time::{Duration, Instant};

use fluvio::metadata::customspu::CustomSpuSpec;
use fluvio::metadata::spu::SpuSpec;
use fluvio::{Fluvio, FluvioClusterConfig};
use fluvio_controlplane_metadata::spu::{EncryptionEnum, Endpoint, IngressAddr, IngressPort};

fn split(addr: &str) -> anyhow::Result<(String, u16)> {
    let (host, port) = addr
        .rsplit_once(':')
        .ok_or_else(|| anyhow::anyhow!("expected host:port, got {addr:?}"))?;
    Ok((host.to_owned(), port.parse()?))
}

async fn connect(sc: &str) -> anyhow::Result<Fluvio> {
    let config = FluvioClusterConfig::new(sc);
    let started = Instant::now();
    loop {
        match Fluvio::connect_with_config(&config).await {
            Ok(fluvio) => return Ok(fluvio),
            Err(err) if started.elapsed() < Duration::from_secs(30) => {
                eprintln!("waiting for the SC at {sc}: {err}");
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Err(err) => return Err(err),
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let sc = args.first().map_or("127.0.0.1:9003", String::as_str);
    let id: i32 = args.get(1).map_or(Ok(5001), |v| v.parse())?;
    let (public_host, public_port) = split(args.get(2).map_or("127.0.0.1:9010", String::as_str))?;
    let (private_host, private_port) = split(args.get(3).map_or("127.0.0.1:9011", String::as_str))?;

    let fluvio = connect(sc).await?;
    let admin = fluvio.admin().await;
    let known = admin.all::<SpuSpec>().await?;
    if known.iter().any(|spu| spu.spec.id == id) {
        eprintln!("spu {id} already registered");
    } else {
        let spec = CustomSpuSpec {
            id,
            public_endpoint: IngressPort {
                port: public_port,
                ingress: vec![IngressAddr {
                    hostname: None,
                    ip: Some(public_host),
                }],
                encryption: EncryptionEnum::PLAINTEXT,
            },
            private_endpoint: Endpoint {
                port: private_port,
                host: private_host,
                encryption: EncryptionEnum::PLAINTEXT,
            },
            rack: None,
            public_endpoint_local: None,
        };
        admin
            .create(format!("custom-spu-{id}"), false, spec)
            .await?;
        eprintln!("registered spu {id}");
    }
    let started = Instant::now();
    loop {
        let spus = admin.all::<SpuSpec>().await?;
        if spus
            .iter()
            .any(|spu| spu.spec.id == id && spu.status.is_online())
        {
            eprintln!("spu {id} online after {:?}", started.elapsed());
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(60) {
            anyhow::bail!("spu {id} not online after 60 s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
