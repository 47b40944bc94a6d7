//! The small in-process cluster the driver tests and the demo have always used, now a thin
//! wrapper over [`crate::cluster::TestCluster`] (a coordinator, GRV and commit proxies and three
//! storage servers on loopback, speaking the real wire protocol). It keeps the original API
//! (cluster string `mini:cluster@...`, drop every connection, hang every process, announce
//! another protocol version, count read-version requests); everything else is on
//! [`MiniCluster::cluster`] (or through `Deref`).

use std::net::SocketAddr;
use std::ops::Deref;
use std::thread;
use std::time::{Duration, Instant};

use fdb_protocol::framing::ProtocolVersion;

use crate::cluster::{RequestKind, TestCluster};

/// A running mini cluster. Stops when dropped.
pub struct MiniCluster {
    cluster: TestCluster,
}

impl MiniCluster {
    /// Starts on ephemeral loopback ports.
    pub fn start() -> MiniCluster {
        MiniCluster {
            cluster: TestCluster::builder().description("mini:cluster").start(),
        }
    }

    /// The cluster file contents for this cluster.
    pub fn cluster_string(&self) -> String {
        self.cluster.cluster_file_string()
    }

    /// The coordinator's address.
    pub fn addr(&self) -> SocketAddr {
        self.cluster.coordinator_addr()
    }

    /// Closes every open connection (the server keeps accepting new ones).
    pub fn drop_connections(&self) {
        self.cluster.drop_connections();
    }

    /// Announces `v` in the ConnectPacket of new connections.
    pub fn set_protocol_version(&self, v: ProtocolVersion) {
        self.cluster.set_protocol_version(v);
    }

    /// Stops answering (requests are still read), or resumes: every process at once.
    pub fn set_silent(&self, silent: bool) {
        self.cluster.set_all_silent(silent);
    }

    /// How many read-version requests arrived (a batched request counts once).
    pub fn grv_requests(&self) -> u64 {
        self.cluster.requests(RequestKind::GetReadVersion)
    }

    /// The full test cluster underneath (faults, data, counters).
    pub fn cluster(&self) -> &TestCluster {
        &self.cluster
    }
}

impl Deref for MiniCluster {
    type Target = TestCluster;
    fn deref(&self) -> &TestCluster {
        &self.cluster
    }
}

/// Waits up to `limit` for `f` to hold, polling.
pub fn eventually(limit: Duration, f: impl FnMut() -> bool) -> bool {
    eventually_every(limit, Duration::from_millis(5), f)
}

/// [`eventually`], asking only every `pause` (for checks that cost a real cluster work).
pub fn eventually_every(limit: Duration, pause: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        thread::sleep(pause);
    }
    f()
}
