//! The `photon` command.

mod commands;

use clap::{CommandFactory, Parser, Subcommand};
use commands::backend::Backend;
use commands::output::{exit_code, Output, EXIT_CODES};

const EXAMPLES: &str = "\
Examples:
  photon demo
  export PHOTON_BACKEND=sqlite PHOTON_SQLITE_PATH=orders.db
  photon publish orders '{\"total\": 12}' --key customer-7
  cat orders.jsonl | photon publish orders --key-field customer
  photon tail orders --last 20 --follow
  photon topics
  photon lag
  photon lag billing orders
  photon groups billing-workers orders --output json
  photon dlq list orders
  photon dlq replay orders --all
  photon checkpoints
  photon checkpoints billing orders --set 120
  photon checkpoints billing orders --reset --yes
  photon serve --bind 127.0.0.1:9470 --allow-replay --group billing-workers:orders
  photon keygen --id k2 --ring \"$PHOTON_TRANSPORT_KEYS\"
  photon completions bash > /etc/bash_completion.d/photon";

/// Photon: an embeddable pub/sub runtime. Every command but `demo` and `keygen` works on a
/// durable backend, chosen with --backend or PHOTON_BACKEND and configured by its
/// PHOTON_<ADAPTER>_* variables.
#[derive(Debug, Parser)]
#[command(name = "photon", version, about, long_about = None, after_help = format!("{EXAMPLES}\n\n{EXIT_CODES}"))]
struct Cli {
    /// Storage backend (`mem` keeps nothing after the command: only `demo` runs on it).
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "mem",
        env = "PHOTON_BACKEND"
    )]
    backend: Backend,
    /// Output: `text` for people, `json` (one JSON value per line) for scripts.
    #[arg(
        long,
        short = 'o',
        global = true,
        value_enum,
        default_value = "text",
        env = "PHOTON_OUTPUT"
    )]
    output: Output,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Publishes keyed events in process, consumes them durably, drops the consumer half-way,
    /// resumes it, and shows that nothing was lost.
    Demo(commands::demo::DemoArgs),
    /// Publishes one event, or one per line of standard input.
    Publish(commands::events::PublishArgs),
    /// Prints a topic's newest events; with --follow, keeps printing new ones.
    Tail(commands::events::TailArgs),
    /// Prints a topic's history as JSON lines and exits when caught up.
    Replay(commands::events::ReplayArgs),
    /// Prints one event by id.
    Get(commands::events::GetArgs),
    /// Lists the topics the backend holds, with head, size and shards.
    Topics,
    /// Shows how far durable subscriptions are behind their topics' heads.
    Lag(commands::checkpoints::LagArgs),
    /// Lists checkpoints, or shows, moves or removes one durable subscription's checkpoint.
    Checkpoints(commands::checkpoints::CheckpointArgs),
    /// Shows a consumer group's members, partition owners and positions.
    Groups(commands::groups::GroupArgs),
    /// Lists, shows and replays dead letters.
    #[command(subcommand)]
    Dlq(commands::dlq::DlqCommand),
    /// Makes a new transport key for PHOTON_TRANSPORT_KEYS.
    Keygen(commands::keygen::KeygenArgs),
    /// Prints a shell completion script.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Checks that the backend answers and shows its capabilities.
    Doctor,
    /// Serves /metrics (Prometheus), a JSON API under /api/ and the ops page at /.
    Serve(commands::serve::ServeArgs),
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
    let (backend, output) = (cli.backend, cli.output);
    let outcome = match cli.command {
        Command::Demo(args) => commands::demo::run(args).await,
        Command::Publish(args) => commands::events::publish(backend, output, args).await,
        Command::Tail(args) => commands::events::tail(backend, args).await,
        Command::Replay(args) => commands::events::replay(backend, args).await,
        Command::Get(args) => commands::events::get(backend, args).await,
        Command::Topics => commands::topics::run(backend, output).await,
        Command::Lag(args) => commands::checkpoints::lag(backend, output, args).await,
        Command::Checkpoints(args) => commands::checkpoints::run(backend, output, args).await,
        Command::Groups(args) => commands::groups::run(backend, output, args).await,
        Command::Dlq(command) => commands::dlq::run(backend, output, command).await,
        Command::Keygen(args) => commands::keygen::run(output, args),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "photon", &mut std::io::stdout());
            Ok(())
        }
        Command::Doctor => commands::doctor::run(backend, output).await,
        Command::Serve(args) => commands::serve::run(backend, output, args).await,
    };
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            output.error(&err);
            std::process::ExitCode::from(exit_code(&err))
        }
    }
}
