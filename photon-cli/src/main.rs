//! The `photon` command.

mod commands;

use clap::{Parser, Subcommand};

/// Photon: an embeddable pub/sub runtime.
#[derive(Debug, Parser)]
#[command(name = "photon", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Publishes keyed events in process, consumes them durably, drops the consumer half-way,
    /// resumes it, and shows that nothing was lost.
    Demo(commands::demo::DemoArgs),
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
    };
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}
