//! Photon crate `photon` (in progress).
