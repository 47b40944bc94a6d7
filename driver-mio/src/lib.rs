//! mio driver (sockets and timers around `fdb-protocol`). Grows with the connection issue.
pub use fdb_protocol as protocol;
