//! The `photon` command.
fn main() {}
