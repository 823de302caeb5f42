//! `photon-bench`: runs adapter scenarios and writes a JSON report and an SVG chart.

use std::path::PathBuf;

use clap::Parser;
use photon_bench::scenarios::{self, ADAPTERS};
use photon_bench::{BenchOptions, Report};

/// Measures Photon beside each adapter's raw client, in the same run.
#[derive(Debug, Parser)]
#[command(name = "photon-bench")]
struct Args {
    /// Adapters to run (default: every adapter whose server is reachable).
    #[arg(long = "adapter", value_delimiter = ',')]
    adapters: Vec<String>,
    /// Events per throughput measurement.
    #[arg(long, default_value_t = BenchOptions::default().events)]
    events: usize,
    /// Concurrent publishers.
    #[arg(long, default_value_t = BenchOptions::default().publishers)]
    publishers: usize,
    /// Latency samples.
    #[arg(long, default_value_t = BenchOptions::default().latency_samples)]
    latency_samples: usize,
    /// Payload bytes.
    #[arg(long, default_value_t = BenchOptions::default().payload_bytes)]
    payload_bytes: usize,
    /// Publish rounds on broker adapters (sides alternate first; medians are reported).
    #[arg(long, default_value_t = BenchOptions::default().rounds)]
    rounds: usize,
    /// Measure publish throughput only.
    #[arg(long)]
    publish_only: bool,
    /// Run the consumer group scenario instead: group handlers of 1, 2 and 4 members
    /// beside a durable handler on the same topic.
    #[arg(long)]
    groups: bool,
    /// Events of the consumer group scenario's topic.
    #[arg(long, default_value_t = BenchOptions::default().group_events)]
    group_events: usize,
    /// Where the JSON report goes.
    #[arg(long, default_value = "photon-bench/report/report.json")]
    out: PathBuf,
}

// Both sides of every scenario run on the same allocator; mimalloc keeps glibc's
// cross-thread free path from dominating the in-process figures.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let options = BenchOptions {
        events: args.events,
        publishers: args.publishers.max(1),
        latency_samples: args.latency_samples,
        payload_bytes: args.payload_bytes,
        rounds: args.rounds.max(1),
        publish_only: args.publish_only,
        group_events: args.group_events.max(1),
    };
    let adapters: Vec<String> = if args.adapters.is_empty() {
        ADAPTERS.iter().map(|a| (*a).to_owned()).collect()
    } else {
        args.adapters
    };
    let mut report = Report::default();
    for adapter in &adapters {
        eprintln!(
            "running {adapter} ({} events, {} publishers)…",
            options.events, options.publishers
        );
        let measured = if args.groups {
            scenarios::groups::run(adapter, &options).await
        } else {
            scenarios::run(adapter, &options).await
        };
        match measured {
            Ok(measurements) => report.measurements.extend(measurements),
            Err(err) => eprintln!("skipped: {adapter}: {err}"),
        }
    }
    print!("{}", report.table());
    if let Some(dir) = args.out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&args.out, serde_json::to_string_pretty(&report)?)?;
    std::fs::write(args.out.with_extension("svg"), report.svg_chart())?;
    eprintln!(
        "report: {} and {}",
        args.out.display(),
        args.out.with_extension("svg").display()
    );
    Ok(())
}
