//! A sans-IO FoundationDB 7.3 client protocol core.
//!
//! This crate speaks FDB's own wire protocol (FlowTransport framing and the ObjectSerializer)
//! without touching sockets, clocks or threads: drivers feed it bytes and time and carry out
//! what it asks for. Module names follow FDB's vocabulary.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod atomic;
pub mod client;
pub mod cluster_file;
pub mod connection;
pub mod error;
mod event;
pub mod framing;
#[doc(hidden)]
pub mod fuzzing;
mod grv;
mod ids;
pub mod location;
pub mod messages;
mod monitor;
mod net;
mod route;
pub mod ryw;
pub mod serializer;
pub mod status;
pub mod time;
pub mod transaction;
pub mod tuple;
pub mod uid;

pub use uid::Uid;
