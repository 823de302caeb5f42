//! One module per subcommand.

pub mod backend;
pub mod checkpoints;
pub mod demo;
pub mod doctor;
pub mod events;
pub mod groups;
