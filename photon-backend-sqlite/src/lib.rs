//! Photon crate `photon-backend-sqlite` (in progress).
