//! The tuple layer: foundationdb-rs's own `foundationdb-tuple` crate (pure Rust), so that
//! a program's `TuplePack` / `TupleUnpack` implementations and every type it names are the
//! same; plus the high-contention allocator.

pub mod hca;

pub use foundationdb_tuple::*;
