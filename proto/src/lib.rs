//! gRPC service definitions and messages of the FE <-> BE boundary.
//!
//! Everything the frontend and a backend say to each other is defined in
//! `proto/backend.proto`; this crate only compiles it.

#![allow(clippy::all)]

/// Version 1 of the Tethys FE/BE protocol.
pub mod v1 {
    tonic::include_proto!("tethys.v1");
}

pub use v1::*;
