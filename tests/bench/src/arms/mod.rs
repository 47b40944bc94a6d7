//! The arms: the clients compared. Each runs a workload with a number of closed-loop workers
//! and returns what the harness measured.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use fdb_protocol::cluster_file::ClusterFile;

use crate::harness::{Counts, Probes, RunStats};
use crate::workload::{KeySet, Workload};

pub mod floor;
#[cfg(feature = "libfdb_c")]
pub mod libfdb_c;
pub mod rust_mio;
pub mod rust_mio_threads;
pub mod rust_tokio;

pub const RUST_TOKIO: &str = "rust-tokio";
pub const RUST_MIO: &str = "rust-mio";
pub const RUST_MIO_THREADS: &str = "rust-mio-threads";
pub const FLOOR: &str = "floor";
pub const LIBFDB_C: &str = "libfdb_c";
pub const ALL: [&str; 5] = [RUST_TOKIO, RUST_MIO, RUST_MIO_THREADS, FLOOR, LIBFDB_C];

/// Whether this build has the libfdb_c arm.
pub const HAVE_LIBFDB_C: bool = cfg!(feature = "libfdb_c");

/// What every arm may use.
pub struct Ctx {
    pub cluster: ClusterFile,
    /// A cluster file on disk naming the same cluster (libfdb_c opens it by path).
    #[cfg_attr(not(feature = "libfdb_c"), allow(dead_code))]
    pub cluster_path: PathBuf,
    pub floor: SocketAddr,
    pub keys: Arc<KeySet>,
    /// The target serves data and the read key spaces are populated.
    pub data_ready: bool,
    /// Why `data_ready` is false.
    pub data_missing: Option<String>,
    pub rt: Arc<tokio::runtime::Runtime>,
    /// What is read around each window: the in-process cluster's request counters (none on
    /// a real cluster) and the cluster processes' CPU time.
    pub probes: Probes,
}

impl Ctx {
    /// The common reason a cluster client cannot run `w`, if any.
    pub fn data_skip(&self, w: Workload) -> Option<String> {
        if w.needs_data() && !self.data_ready {
            Some(
                self.data_missing
                    .clone()
                    .unwrap_or_else(|| "the key spaces are not populated".into()),
            )
        } else {
            None
        }
    }
}

pub trait Arm {
    fn name(&self) -> &'static str;
    /// `Some(reason)` when this arm cannot run `w` (reported as a skip, never as numbers).
    fn skip_reason(&self, ctx: &Ctx, w: Workload) -> Option<String>;
    /// One run: `counts.workers` closed-loop workers, warmup, then measured transactions.
    fn run(
        &mut self,
        ctx: &Ctx,
        w: Workload,
        counts: Counts,
        seed: u64,
    ) -> Result<RunStats, String>;
}

/// Builds the named arm.
pub fn make(name: &str) -> Result<Box<dyn Arm>, String> {
    match name {
        RUST_TOKIO => Ok(Box::new(rust_tokio::TokioArm)),
        RUST_MIO => Ok(Box::new(rust_mio::MioArm)),
        RUST_MIO_THREADS => Ok(Box::new(rust_mio_threads::MioThreadsArm)),
        FLOOR => Ok(Box::new(floor::FloorArm::default())),
        #[cfg(feature = "libfdb_c")]
        LIBFDB_C => Ok(Box::new(libfdb_c::FdbCArm::boot()?)),
        #[cfg(not(feature = "libfdb_c"))]
        LIBFDB_C => Err(
            "the libfdb_c arm needs a build with `--features libfdb_c` (and libfdb_c installed)"
                .into(),
        ),
        other => Err(format!("unknown arm {other:?} (known: {})", ALL.join(", "))),
    }
}

/// Fills the read key spaces (outside any measured window) with this client.
pub fn populate(ctx: &Ctx) -> Result<(), String> {
    rust_tokio::populate(ctx)
}

/// Clears the benchmark's key prefix after the runs.
pub fn cleanup(ctx: &Ctx) -> Result<(), String> {
    rust_tokio::cleanup(ctx)
}
