//! The `photon` command.

mod commands;

use clap::{Parser, Subcommand};
use commands::backend::Backend;

/// Photon: an embeddable pub/sub runtime.
#[derive(Debug, Parser)]
#[command(name = "photon", version, about)]
struct Cli {
    /// Storage backend, configured by its `PHOTON_<ADAPTER>_*` variables.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "mem",
        env = "PHOTON_BACKEND"
    )]
    backend: Backend,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Publishes keyed events in process, consumes them durably, drops the consumer half-way,
    /// resumes it, and shows that nothing was lost.
    Demo(commands::demo::DemoArgs),
    /// Publishes one event.
    Publish(commands::events::PublishArgs),
    /// Follows a topic, printing events as JSON lines.
    Tail(commands::events::ReadArgs),
    /// Prints a topic's history as JSON lines and exits when caught up.
    Replay(commands::events::ReadArgs),
    /// Prints one event by id.
    Get(commands::events::GetArgs),
    /// Shows or raises a durable subscription's checkpoint.
    Checkpoints(commands::checkpoints::CheckpointArgs),
    /// Shows a consumer group's members, partition owners and positions.
    Groups(commands::groups::GroupArgs),
    /// Checks that the backend answers and shows its capabilities.
    Doctor,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Demo(args) => commands::demo::run(args).await,
        Command::Publish(args) => commands::events::publish(cli.backend, args).await,
        Command::Tail(args) => commands::events::tail(cli.backend, args).await,
        Command::Replay(args) => commands::events::replay(cli.backend, args).await,
        Command::Get(args) => commands::events::get(cli.backend, args).await,
        Command::Checkpoints(args) => commands::checkpoints::run(cli.backend, args).await,
        Command::Groups(args) => commands::groups::run(cli.backend, args).await,
        Command::Doctor => commands::doctor::run(cli.backend).await,
    };
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}
