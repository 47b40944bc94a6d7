//! The checks and faults both runners offer, written once: [`TestCluster`] (loopback
//! sockets) and [`SimCluster`] (the simulation) each supply only `with`, which lends the
//! cluster core's [`State`](super::server::State), and expand [`checks_and_faults!`] in
//! their `impl`. A macro rather than a trait, so that the methods stay inherent: the tests
//! call them without importing anything. What a runner must do around the core (`kill` and
//! `restart` close and reopen sockets in [`TestCluster`]) stays in its own `impl`.
//!
//! [`TestCluster`]: super::TestCluster
//! [`SimCluster`]: crate::sim::SimCluster

/// Expands, inside `impl Runner { fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R
/// { .. } .. }`, the methods that only ask the cluster core.
macro_rules! checks_and_faults {
    () => {
        /// The cluster file contents: `description:id@coordinator[,coordinator...]`.
        /// After [`Self::change_coordinators`], the new one.
        pub fn cluster_file_string(&self) -> String {
            self.with(|st| st.cluster_file_string())
        }

        /// How many storage servers there are.
        pub fn storage_server_count(&self) -> usize {
            self.with(|st| st.storage_server_count())
        }

        /// The shard map.
        pub fn shards(&self) -> Vec<$crate::cluster::ShardInfo> {
            self.with(|st| st.shards())
        }

        /// The storage servers holding `key`.
        pub fn servers_of(&self, key: &[u8]) -> Vec<usize> {
            self.with(|st| st.servers_of(key))
        }

        // --- data --------------------------------------------------------------------------

        /// The newest committed version.
        pub fn version(&self) -> ::fdb_protocol::messages::types::Version {
            self.with(|st| st.newest_version())
        }

        /// Every key and value as of the newest version, read directly (no client involved).
        pub fn snapshot(&self) -> ::std::collections::BTreeMap<Vec<u8>, Vec<u8>> {
            self.with(|st| st.snapshot())
        }

        /// The newest value of one key, read directly.
        pub fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
            self.with(|st| st.get(key))
        }

        /// Commits `mutations` directly (no conflict check; watches fire) and returns the
        /// version.
        pub fn apply(
            &self,
            mutations: &[::fdb_protocol::messages::commit::MutationRef],
        ) -> ::fdb_protocol::messages::types::Version {
            self.with(|st| st.apply_direct(mutations))
        }

        /// Sets one key directly (see [`Self::apply`]).
        pub fn set(&self, key: &[u8], value: &[u8]) -> ::fdb_protocol::messages::types::Version {
            self.apply(&[::fdb_protocol::messages::commit::MutationRef::new(
                ::fdb_protocol::messages::commit::mutation_type::SET_VALUE,
                ::bytes::Bytes::copy_from_slice(key),
                ::bytes::Bytes::copy_from_slice(value),
            )])
        }

        // --- counters ----------------------------------------------------------------------

        /// How many requests of `kind` arrived (and were routed to a live role) so far.
        pub fn requests(&self, kind: $crate::cluster::RequestKind) -> u64 {
            self.with(|st| st.requests(kind))
        }

        /// How many requests of `kind` arrived at the processes that held `role` (a recovery
        /// may have moved the proxies: every process they were in counts).
        pub fn requests_to(
            &self,
            role: $crate::cluster::Role,
            kind: $crate::cluster::RequestKind,
        ) -> u64 {
            self.with(|st| st.requests_to(role, kind))
        }

        /// Connections accepted so far, by every process (a client that reconnects adds to
        /// it).
        pub fn connections_accepted(&self) -> u64 {
            self.with(|st| st.connections_accepted())
        }

        // --- faults ------------------------------------------------------------------------

        /// Faults: closes every open connection of every process (they keep accepting new
        /// ones).
        pub fn drop_connections(&self) {
            self.with(|st| st.drop_connections_of(None))
        }

        /// Faults: closes the open connections of one role's process.
        pub fn drop_connections_of(&self, role: $crate::cluster::Role) {
            self.with(|st| st.drop_role_connections(role))
        }

        /// Faults: delays every reply to requests of `kind` (`None`: of every kind without a
        /// delay of its own) by `delay`. `Duration::ZERO` removes the delay.
        pub fn set_reply_delay(
            &self,
            kind: Option<$crate::cluster::RequestKind>,
            delay: ::std::time::Duration,
        ) {
            self.with(|st| st.set_reply_delay(kind, delay))
        }

        /// Faults: from now on, replies to requests of `kind` (`None`: all) are held back
        /// until [`Self::release_replies`]; use it to reorder replies.
        pub fn hold_replies(&self, kind: Option<$crate::cluster::RequestKind>) {
            self.with(|st| st.hold_replies(kind))
        }

        /// Faults: stops holding replies and sends the held ones in `order` (those of a
        /// stopped process when it continues). Returns how many.
        pub fn release_replies(&self, order: $crate::cluster::ReleaseOrder) -> usize {
            self.with(|st| st.release_replies(order))
        }

        /// Faults: the next `count` requests of `kind` get `what` instead of being served.
        pub fn inject(
            &self,
            kind: $crate::cluster::RequestKind,
            count: u32,
            what: $crate::cluster::Injected,
        ) {
            self.with(|st| st.inject(kind, count, what))
        }

        /// Faults: the next `count` requests of `kind` fail with `error` (e.g.
        /// `ErrorCode::WRONG_SHARD_SERVER`, `FUTURE_VERSION`, `PROCESS_BEHIND`,
        /// `ALL_ALTERNATIVES_FAILED`).
        pub fn fail_next(
            &self,
            kind: $crate::cluster::RequestKind,
            count: u32,
            error: ::fdb_protocol::error::ErrorCode,
        ) {
            self.inject(kind, count, $crate::cluster::Injected::Error(error));
        }

        /// Faults: the next `count` commits answer `commit_unknown_result`, with the commit
        /// applied (if it resolves) or not.
        pub fn commit_unknown_result_next(&self, count: u32, applied: bool) {
            self.inject(
                $crate::cluster::RequestKind::Commit,
                count,
                $crate::cluster::Injected::CommitUnknownResult { applied },
            );
        }

        /// Faults: removes every delay, hold (sending what was held, in order), injection and
        /// silence, and continues stopped processes. Killed roles stay killed.
        pub fn clear_faults(&self) {
            self.with(|st| st.clear_faults())
        }

        /// Faults: the role ends while its process stays up, as roles end in an FDB recovery
        /// (a master or a transaction-system process failed) or when a storage server is
        /// removed. Like fdbserver, everything it still owes — held, delayed and parked
        /// replies, reads waiting for a version, watches — is answered with
        /// `broken_promise`; it comes back at once with new tokens (its old ones get
        /// `ENDPOINT_NOT_FOUND`), and new proxies publish a new `ClientDBInfo`. Connections
        /// stay open. Commits whose replies were held had been applied; parked ones
        /// ([`Injected::NoReply`]) had not.
        ///
        /// [`Injected::NoReply`]: crate::cluster::Injected::NoReply
        pub fn end_role(&self, role: $crate::cluster::Role) {
            self.with(|st| st.end_role(role))
        }

        /// Faults: several roles end at one instant, as [`end_role`](Self::end_role) ends one.
        /// Ending them one call at a time leaves a gap in which a client can move a read
        /// from the first ended role to the next and be answered by its old tokens.
        pub fn end_roles(&self, roles: impl IntoIterator<Item = $crate::cluster::Role>) {
            self.with(|st| roles.into_iter().for_each(|r| st.end_role(r)))
        }

        /// Faults: whether a role's process is up.
        pub fn is_alive(&self, role: $crate::cluster::Role) -> bool {
            self.with(|st| st.is_alive(role))
        }

        /// Faults: moves the shard holding `key` to storage server `to` (alone). Its old
        /// servers answer `wrong_shard_server` for it from now on; their watches on it fail
        /// the same way.
        pub fn move_shard(&self, key: &[u8], to: usize) {
            self.with(|st| st.move_shard(key, to))
        }

        /// Faults: jumps the version forward by `versions` (as a recovery does), so that
        /// reads and commits at older read versions become `transaction_too_old` at once.
        pub fn advance_version(&self, versions: i64) {
            self.with(|st| st.advance_version(versions))
        }

        /// Faults: a recovery of the transaction system in fdbserver 7.3.77's shape
        /// ([`Recovery::default`]); see [`Self::recover_with`].
        ///
        /// [`Recovery::default`]: crate::cluster::Recovery
        pub fn recover(&self) {
            self.recover_with(&$crate::cluster::Recovery::default());
        }

        /// Faults: a recovery, as a failed master, proxy or log makes one. The proxies end
        /// (what they owed is answered with `broken_promise`; commits stalled behind a
        /// stopped log survive or not, as `shape` says) and come back with new tokens — in a
        /// new process if theirs is stopped or dead. The `ClientDBInfo` first lists no
        /// proxies at all, then, `shape.without_proxies` later, the new ones, then is
        /// published again `shape.republish` times with the same proxies. The version jumps
        /// by `shape.version_jump` and the resolver starts empty: reads and commits at read
        /// versions from before the recovery are `transaction_too_old`. Logs on stopped
        /// processes are replaced. Storage servers keep their data, tokens and shards.
        pub fn recover_with(&self, shape: &$crate::cluster::Recovery) {
            self.with(|st| st.recover_with(shape))
        }

        /// How many recoveries the cluster went through (asked for, or after failure
        /// detection, or caused by a coordinator change).
        pub fn recoveries(&self) -> u64 {
            self.with(|st| st.recoveries())
        }

        /// Faults: `SIGSTOP` of a role's process. It keeps its sockets open (new connections
        /// are still accepted) and reads nothing, answers nothing — pings included — and its
        /// timers stand still; replies it owed go out late when it is continued
        /// ([`Self::sigcont`]), and what clients sent meanwhile is served then. If it holds
        /// the proxies or a log (see [`TestClusterBuilder::logs_on_storage`]), every commit
        /// and read version stalls, and after the builder's failure-detection delay the
        /// cluster recovers without it ([`Self::recover_with`] in the builder's shape; the
        /// proxies move to a new process). Unlike [`TestCluster::set_silent`], nothing is
        /// lost.
        ///
        /// [`TestClusterBuilder::logs_on_storage`]: crate::cluster::TestClusterBuilder::logs_on_storage
        /// [`TestCluster::set_silent`]: crate::cluster::TestCluster::set_silent
        pub fn sigstop(&self, role: $crate::cluster::Role) {
            self.with(|st| st.sigstop(role))
        }

        /// Faults: `SIGCONT` of every stopped process that held `role` (also one whose
        /// proxies a recovery moved elsewhere). It sends the replies it owed, late, and reads
        /// what waited in its sockets. A storage server then catches up for the builder's
        /// catch-up time, answering reads at versions past the one it stopped at only after
        /// that (`future_version` if they wait longer than the future-version delay). A log
        /// that no recovery replaced meanwhile lets the stalled commits and read versions
        /// through.
        pub fn sigcont(&self, role: $crate::cluster::Role) {
            self.with(|st| st.sigcont(role))
        }

        /// Faults: `fdbcli coordinators`: the coordinators become those of `keep` (indexes of
        /// [`Role::Coordinator`]) plus `add` new ones (new processes, numbered after the
        /// existing ones), under a connection string with the same description and a new
        /// random id. Every old coordinator forwards the old connection string's clients to
        /// the new one (`ClientDBInfo.forward`, a forwarding `LeaderInfo`; held long polls
        /// are answered with it at once) — chains of changes forward step by step — and the
        /// change makes a recovery in the builder's shape. Returns the new connection string.
        ///
        /// [`Role::Coordinator`]: crate::cluster::Role::Coordinator
        pub fn change_coordinators(&self, keep: &[usize], add: usize) -> String {
            self.with(|st| st.change_coordinators(keep, add))
        }

        /// Faults: the protocol version announced in the ConnectPacket of new connections.
        pub fn set_protocol_version(&self, v: ::fdb_protocol::framing::ProtocolVersion) {
            self.with(|st| st.set_protocol_version(v))
        }
    };
}

pub(crate) use checks_and_faults;
