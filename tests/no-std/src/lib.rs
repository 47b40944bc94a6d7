//! `fdb-protocol` promises `no_std` + `alloc`. This crate is `no_std` and brings its own panic
//! handler: if the core or any of its dependencies links `std`, the build fails with a
//! duplicate `panic_impl` lang item. Build it with
//! `cargo check --manifest-path tests/no-std/Cargo.toml`.
#![no_std]

extern crate alloc;

use alloc::vec::Vec;
use core::time::Duration;

use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::time::Instant;
use fdb_protocol::{Client, ClientConfig};

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    loop {}
}

/// Starts a client on a cluster file and returns the first bytes it wants sent, so the
/// client's code paths are reached from a `no_std` caller.
pub fn first_transmit(cluster_file: &str) -> Option<Vec<u8>> {
    let cf = ClusterFile::parse(cluster_file).ok()?;
    let mut client = Client::new(ClientConfig::new(cf, 1), Instant(Duration::ZERO));
    client.handle_timeout(Instant(Duration::from_millis(1)));
    client.poll_transmit().map(|t| t.data.to_vec())
}

/// A tuple packed by the core's tuple layer.
pub fn pack_pair(a: &str, b: i64) -> Vec<u8> {
    fdb_protocol::tuple::pack(&(a, b))
}
