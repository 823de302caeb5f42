//! `photon-bench`: runs adapter scenarios and writes a JSON report and its SVG charts;
//! `photon-bench chart` draws the charts of existing reports again.

use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};
use photon_bench::scenarios::{self, ADAPTERS};
use photon_bench::telemetry::{self, Telemetry};
use photon_bench::{chart, BenchOptions, Provenance, Report, RunOptions};
use photon_runtime::ExecutorConfig;

/// Measures Photon beside each adapter's raw client, in the same run.
#[derive(Debug, Parser)]
#[command(name = "photon-bench")]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// Adapters to run (default: every adapter; one whose server is unreachable is skipped).
    #[arg(long = "adapter", value_delimiter = ',')]
    adapters: Vec<String>,
    /// Events per throughput measurement.
    #[arg(long, default_value_t = BenchOptions::default().events)]
    events: usize,
    /// Concurrent publishers.
    #[arg(long, default_value_t = BenchOptions::default().publishers)]
    publishers: usize,
    /// Round trips sampled per side, over all rounds together (p99.9 is reported from
    /// 10,000 on, p99 from 1,000).
    #[arg(long, default_value_t = BenchOptions::default().latency_samples)]
    latency_samples: usize,
    /// Payload bytes.
    #[arg(long, default_value_t = BenchOptions::default().payload_bytes)]
    payload_bytes: usize,
    /// Rounds of every measurement (the sides take turns at going first; the report keeps
    /// every round and their median).
    #[arg(long, default_value_t = BenchOptions::default().rounds)]
    rounds: usize,
    /// Measure publish throughput only.
    #[arg(long)]
    publish_only: bool,
    /// Run the consumer group scenario instead: group handlers of 1, 2 and 4 members
    /// beside a durable handler on the same topic.
    #[arg(long)]
    groups: bool,
    /// Events of the consumer group scenario's topic: enough that the members' joins and
    /// first rebalance (a few heartbeats) are a small part of each measurement.
    #[arg(long, default_value_t = BenchOptions::default().group_events)]
    group_events: usize,
    /// What the telemetry rows (`end_to_end_telemetry`, `executor_telemetry`) turn on
    /// beside the same work with telemetry off.
    #[arg(long, value_enum, default_value_t)]
    telemetry: Telemetry,
    /// Where the JSON report goes; the charts go beside it (default:
    /// `photon-bench/report/report.json`, or `groups.json` with `--groups`).
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Draws the charts of one or more reports (their rows together).
    Chart {
        /// A report written by a run; repeat to combine, for example the main run's and
        /// the `--groups` run's.
        #[arg(long = "from", required = true)]
        from: Vec<PathBuf>,
        /// Where the charts go (default: beside the first report).
        #[arg(long)]
        to: Option<PathBuf>,
    },
}

// Both sides of every scenario run on the same allocator; mimalloc keeps glibc's
// cross-thread free path from dominating the in-process figures.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    if let Some(Command::Chart { from, to }) = &args.command {
        return redraw(from, to.as_deref());
    }
    telemetry::choose(args.telemetry)?;
    let options = BenchOptions {
        events: args.events.max(1),
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
    let mut report = Report::new(Provenance::at_start(RunOptions {
        scenario: if args.groups { "groups" } else { "compare" }.to_owned(),
        adapters: adapters.clone(),
        profile: if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
        .to_owned(),
        executor_parallelism: ExecutorConfig::from_env()?.parallelism,
        telemetry: args.telemetry.name(),
        sizes: options,
    }));
    for adapter in &adapters {
        eprintln!(
            "running {adapter} ({} events, {} publishers, {} rounds)…",
            options.events, options.publishers, options.rounds
        );
        let measured = if args.groups {
            scenarios::groups::run(adapter, &options).await
        } else {
            scenarios::run(adapter, &options).await
        };
        match measured {
            Ok(figures) => report.add(adapter, figures),
            Err(err) => eprintln!("skipped: {adapter}: {err}"),
        }
    }
    report.provenance.finish();
    print!("{}", report.table());
    let default_name = if args.groups {
        "groups.json"
    } else {
        "report.json"
    };
    let out = args
        .out
        .unwrap_or_else(|| Path::new("photon-bench/report").join(default_name));
    let directory = out.parent().unwrap_or(Path::new(".")).to_path_buf();
    std::fs::create_dir_all(&directory)?;
    std::fs::write(&out, serde_json::to_string_pretty(&report)?)?;
    eprintln!("report: {}", out.display());
    for path in chart::write(&report, &directory)? {
        eprintln!("chart: {}", path.display());
    }
    Ok(())
}

/// Reads the reports `from`, and draws their rows together into `to`.
fn redraw(from: &[PathBuf], to: Option<&Path>) -> Result<(), Box<dyn std::error::Error>> {
    let mut combined: Option<Report> = None;
    for path in from {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let report: Report = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not a photon-bench report: {e}", path.display()))?;
        match &mut combined {
            None => combined = Some(report),
            Some(combined) => {
                combined.throughput.extend(report.throughput);
                combined.latency.extend(report.latency);
            }
        }
    }
    let report = combined.ok_or("no report given")?;
    let directory = match to {
        Some(to) => to.to_path_buf(),
        None => from
            .first()
            .and_then(|path| path.parent())
            .unwrap_or(Path::new("."))
            .to_path_buf(),
    };
    for path in chart::write(&report, &directory)? {
        eprintln!("chart: {}", path.display());
    }
    Ok(())
}
