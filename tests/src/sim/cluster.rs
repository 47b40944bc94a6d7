//! The simulated cluster as a test sees it: [`TestCluster`]'s checks and faults over the
//! same core, in the simulation. What a fault makes (closes, replies) goes out on the
//! simulated network when the world next runs.
//!
//! [`TestCluster`]: crate::cluster::TestCluster

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::framing::ProtocolVersion;
use fdb_protocol::messages::commit::{mutation_type as mt, MutationRef};
use fdb_protocol::messages::types::Version;

use crate::cluster::server::State;
use crate::cluster::{Injected, Recovery, ReleaseOrder, RequestKind, Role, ShardInfo};

/// A handle to the simulation's cluster (from [`super::Sim::cluster`], or [`super::cluster`]
/// inside a run). Each method is [`TestCluster`]'s of the same name.
///
/// [`TestCluster`]: crate::cluster::TestCluster
#[derive(Clone)]
pub struct SimCluster(pub(crate) Rc<RefCell<State>>);

impl SimCluster {
    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        f(&mut self.0.borrow_mut())
    }

    /// The cluster file contents (virtual addresses).
    pub fn cluster_file_string(&self) -> String {
        self.with(|st| st.cluster_file_string())
    }

    /// The shard map.
    pub fn shards(&self) -> Vec<ShardInfo> {
        self.with(|st| st.shards())
    }

    /// The storage servers holding `key`.
    pub fn servers_of(&self, key: &[u8]) -> Vec<usize> {
        self.with(|st| st.servers_of(key))
    }

    /// The newest committed version.
    pub fn version(&self) -> Version {
        self.with(|st| st.newest_version())
    }

    /// Every key and value as of the newest version, read directly.
    pub fn snapshot(&self) -> BTreeMap<Vec<u8>, Vec<u8>> {
        self.with(|st| st.snapshot())
    }

    /// The newest value of one key, read directly.
    pub fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.with(|st| st.get(key))
    }

    /// Commits `mutations` directly (no conflict check; watches fire).
    pub fn apply(&self, mutations: &[MutationRef]) -> Version {
        self.with(|st| st.apply_direct(mutations))
    }

    /// Sets one key directly.
    pub fn set(&self, key: &[u8], value: &[u8]) -> Version {
        self.apply(&[MutationRef::new(
            mt::SET_VALUE,
            Bytes::copy_from_slice(key),
            Bytes::copy_from_slice(value),
        )])
    }

    /// How many storage servers there are.
    pub fn storage_server_count(&self) -> usize {
        self.with(|st| st.storage_server_count())
    }

    /// How many requests of `kind` arrived.
    pub fn requests(&self, kind: RequestKind) -> u64 {
        self.with(|st| st.requests(kind))
    }

    /// How many requests of `kind` arrived at the processes that held `role`.
    pub fn requests_to(&self, role: Role, kind: RequestKind) -> u64 {
        self.with(|st| st.requests_to(role, kind))
    }

    /// Connections accepted so far.
    pub fn connections_accepted(&self) -> u64 {
        self.with(|st| st.connections_accepted())
    }

    /// How many recoveries the cluster went through.
    pub fn recoveries(&self) -> u64 {
        self.with(|st| st.recoveries())
    }

    /// Whether a role's process is up.
    pub fn is_alive(&self, role: Role) -> bool {
        self.with(|st| st.is_alive(role))
    }

    /// Faults: closes every open connection.
    pub fn drop_connections(&self) {
        self.with(|st| st.drop_connections_of(None))
    }

    /// Faults: closes the open connections of one role's process.
    pub fn drop_connections_of(&self, role: Role) {
        self.with(|st| st.drop_role_connections(role))
    }

    /// Faults: delays every reply to requests of `kind` (`None`: all) by `delay`.
    pub fn set_reply_delay(&self, kind: Option<RequestKind>, delay: Duration) {
        self.with(|st| st.set_reply_delay(kind, delay))
    }

    /// Faults: holds replies to requests of `kind` (`None`: all) until released.
    pub fn hold_replies(&self, kind: Option<RequestKind>) {
        self.with(|st| st.hold_replies(kind))
    }

    /// Faults: sends the held replies in `order`; how many.
    pub fn release_replies(&self, order: ReleaseOrder) -> usize {
        self.with(|st| st.release_replies(order))
    }

    /// Faults: the next `count` requests of `kind` get `what`.
    pub fn inject(&self, kind: RequestKind, count: u32, what: Injected) {
        self.with(|st| st.inject(kind, count, what))
    }

    /// Faults: the next `count` requests of `kind` fail with `error`.
    pub fn fail_next(&self, kind: RequestKind, count: u32, error: ErrorCode) {
        self.inject(kind, count, Injected::Error(error));
    }

    /// Faults: the next `count` commits answer `commit_unknown_result`, applied or not.
    pub fn commit_unknown_result_next(&self, count: u32, applied: bool) {
        self.inject(
            RequestKind::Commit,
            count,
            Injected::CommitUnknownResult { applied },
        );
    }

    /// Faults: removes every delay, hold, injection and silence; continues stopped
    /// processes.
    pub fn clear_faults(&self) {
        self.with(|st| st.clear_faults())
    }

    /// Faults: kills a role's process (its connections close, connects are refused).
    pub fn kill(&self, role: Role) {
        self.with(|st| {
            st.kill(role);
        })
    }

    /// Faults: the role ends while its process stays up (`broken_promise` for what it owed).
    pub fn end_role(&self, role: Role) {
        self.with(|st| st.end_role(role))
    }

    /// Faults: restarts a role's process at the same address (killing it first if up).
    pub fn restart(&self, role: Role) {
        self.with(|st| st.restart(role))
    }

    /// Faults: moves the shard holding `key` to storage server `to`.
    pub fn move_shard(&self, key: &[u8], to: usize) {
        self.with(|st| st.move_shard(key, to))
    }

    /// Faults: jumps the version forward.
    pub fn advance_version(&self, versions: i64) {
        self.with(|st| st.advance_version(versions))
    }

    /// Faults: a recovery in fdbserver 7.3.77's shape.
    pub fn recover(&self) {
        self.recover_with(&Recovery::default());
    }

    /// Faults: a recovery in `shape`.
    pub fn recover_with(&self, shape: &Recovery) {
        self.with(|st| st.recover_with(shape))
    }

    /// Faults: `SIGSTOP` of a role's process.
    pub fn sigstop(&self, role: Role) {
        self.with(|st| st.sigstop(role))
    }

    /// Faults: `SIGCONT` of the stopped processes that held `role`.
    pub fn sigcont(&self, role: Role) {
        self.with(|st| st.sigcont(role))
    }

    /// Faults: the protocol version announced to new connections.
    pub fn set_protocol_version(&self, v: ProtocolVersion) {
        self.with(|st| st.set_protocol_version(v))
    }

    /// Faults: `fdbcli coordinators`; the new connection string.
    pub fn change_coordinators(&self, keep: &[usize], add: usize) -> String {
        self.with(|st| st.change_coordinators(keep, add))
    }
}
