//! One module per subcommand, plus the backend choice and the output mode they share.

pub mod backend;
pub mod checkpoints;
pub mod demo;
pub mod dlq;
pub mod doctor;
pub mod events;
pub mod groups;
pub mod keygen;
pub mod output;
pub mod serve;
pub mod topics;
