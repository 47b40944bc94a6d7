//! Read versions: the transaction's own (`get_read_version`, [`ReadVersionOp`]: refused once
//! the transaction is failed or reset, else the read version below) and the one every read
//! waits for first, asked of the read-version batcher once per transaction
//! (after its tenant's id, refused early by a known tag throttle), and checked against the
//! database's floor before a storage read.

use bytes::Bytes;

use super::{OpId, OpKind, Wait};
use crate::error::ErrorCode;
use crate::event::{ClientError, Reply};
use crate::grv::GrvWaiter;
use crate::ids::{RequestId, TransactionId};
use crate::messages::grv::GetReadVersionRequest;
use crate::messages::types::TagSet;
use crate::messages::types::Version;
use crate::tag_throttle::TagThrottles;
use crate::time::Instant;
use crate::transaction::state::ReadVersion;
use crate::transaction::{fdb, Ctx, Transactions};

/// A `get_read_version` in flight: [`OpKind::ReadVersion`] (its state is the transaction's).
#[derive(Debug)]
pub(in crate::transaction) struct ReadVersionOp;

/// A read version, an error, or `None` while the op waits for it.
pub(super) type Awaited<T> = Option<Result<T, ClientError>>;

impl Transactions {
    /// The transaction's read version.
    pub(crate) fn tx_read_version(&mut self, cx: &mut Ctx<'_>, tx: TransactionId) -> RequestId {
        ReadVersionOp::start(self, cx, tx)
    }
}

/// The `get_read_version`'s steps.
impl ReadVersionOp {
    /// The checks, then the op.
    fn start(txs: &mut Transactions, cx: &mut Ctx<'_>, tx: TransactionId) -> RequestId {
        let req = cx.new_request();
        // Even after the commit (RYW's `getReadVersion` looks only at `resetPromise`).
        if let Some(t) = txs.txs.get(&tx) {
            let e = t.deferred.clone().or(t.finished.map(ClientError::Fdb));
            if let Some(e) = e {
                cx.finish(req, Err(e));
                return req;
            }
        }
        txs.insert_op(cx, req, tx, OpKind::ReadVersion(ReadVersionOp));
        req
    }

    /// Finishes with the transaction's read version once it has one.
    pub(super) fn advance(txs: &mut Transactions, cx: &mut Ctx<'_>, id: OpId) {
        let OpId { req, .. } = id;
        match txs.read_version_only(cx, id, false) {
            Some(Ok(v)) => txs.succeed_op(cx, req, Reply::Version(v)),
            Some(Err(e)) => txs.fail_op(cx, req, e),
            None => {}
        }
    }
}

/// The read version every operation waits for: the transaction's, shared by all its
/// operations, so these stay the transactions' own.
impl Transactions {
    /// The `tags` of a read request: the transaction's read tags (`auto_throttle_tag`) in
    /// the sampled fraction of reads (`sampleReadTags`), else none.
    pub(super) fn sampled_read_tags(&self, cx: &mut Ctx<'_>, tx: TransactionId) -> Option<TagSet> {
        if !cx.sample_read_tags() {
            return None;
        }
        let tags = self.txs.get(&tx).map(|t| t.options.read_tags.clone());
        Some(TagSet(tags.unwrap_or_default()))
    }

    /// The transaction's read version, asking for one if needed (`None`: wait).
    pub(super) fn read_version_for(
        &mut self,
        cx: &mut Ctx<'_>,
        id: OpId,
        for_commit: bool,
    ) -> Awaited<Version> {
        let OpId { req, tx } = id;
        if let Some(v) = self.table.ops.get(&req).and_then(|o| o.version) {
            return Some(Ok(v));
        }
        // A tenant transaction starts once its tenant id is known (`startTransaction`), but
        // asks for its read version first: a failed lookup leaves the read version asked
        // for (so `set_read_version` then fails with `read_version_already_set`).
        if self.tx_tenants.contains_key(&tx) {
            self.start_read_version(cx, tx, for_commit);
        }
        match self.tenant_ready(cx, req, tx)? {
            Ok(_) => {}
            Err(e) => return Some(Err(e)),
        }
        self.read_version_only(cx, id, for_commit)
    }

    /// The read version of a read sent to a storage server (a get, a range read, a key
    /// selector, a watch's first read): libfdb_c checks it against the database's floor
    /// first (`validateVersion`), which only a read version set by hand can fail.
    pub(super) fn read_version_to_read(&mut self, cx: &mut Ctx<'_>, id: OpId) -> Awaited<Version> {
        let r = self.read_version_for(cx, id, false)?;
        Some(r.and_then(|v| cx.grv.check_read_version(v).map(|()| v)))
    }

    /// The read version alone (`getReadVersion` does not wait for the tenant).
    // The same parameters as `read_version_for`, which is this after the tenant's lookup.
    pub(super) fn read_version_only(
        &mut self,
        cx: &mut Ctx<'_>,
        id: OpId,
        for_commit: bool,
    ) -> Awaited<Version> {
        let OpId { req, tx } = id;
        let t = self.txs.get_mut(&tx)?;
        match t.read_version {
            ReadVersion::Ready(v) => Some(Ok(v)),
            ReadVersion::Failed(e) => Some(fdb(e)),
            ReadVersion::Pending => {
                self.table.set_wait(req, Wait::ReadVersion);
                None
            }
            ReadVersion::None => {
                self.start_read_version(cx, tx, for_commit);
                match self.txs.get(&tx)?.read_version {
                    // Refused before asking (a remembered tag throttle).
                    ReadVersion::Failed(e) => Some(fdb(e)),
                    _ => {
                        self.table.set_wait(req, Wait::ReadVersion);
                        None
                    }
                }
            }
        }
    }

    /// Asks for the transaction's read version if nobody has yet.
    fn start_read_version(&mut self, cx: &mut Ctx<'_>, tx: TransactionId, for_commit: bool) {
        let Some(t) = self.txs.get_mut(&tx) else {
            return;
        };
        if t.read_version != ReadVersion::None {
            return;
        }
        // A tag throttle this database knows of refuses the transaction without a request
        // (`Transaction::getReadVersion`).
        if cx
            .throttles
            .refuse_before_grv(cx.now, t.options.priority, &t.options.tags)
        {
            t.read_version = ReadVersion::Failed(ErrorCode::TAG_THROTTLED);
            return;
        }
        t.read_version = ReadVersion::Pending;
        let mut flags = t.options.priority.flags();
        // A transaction that only writes asks for a causally risky read version at commit
        // (`Transaction::commitMutations`), as the captures show.
        if for_commit || t.options.causal_read_risky {
            flags |= GetReadVersionRequest::FLAG_CAUSAL_READ_RISKY;
        }
        if t.options.use_provisional_proxies {
            flags |= GetReadVersionRequest::FLAG_USE_PROVISIONAL_PROXIES;
        }
        cx.grv
            .queue_tagged(flags, GrvWaiter::Tx(tx), t.options.tags.clone());
    }

    pub(crate) fn on_tx_read_version(
        &mut self,
        now: Instant,
        tx: TransactionId,
        result: Result<Version, ClientError>,
        locked: bool,
        metadata_version: Option<Bytes>,
        throttles: &mut TagThrottles,
    ) {
        if let Some(t) = self.txs.get_mut(&tx) {
            // A locked database refuses transactions that are not lock-aware, then a
            // throttled tag fails the transaction (`extractReadVersion`).
            let result = match result {
                Ok(_) if locked && !t.options.lock_aware => {
                    Err(ClientError::Fdb(ErrorCode::DATABASE_LOCKED))
                }
                Ok(_) if throttles.refuse_after_grv(now, t.options.priority, &t.options.tags) => {
                    Err(ClientError::Fdb(ErrorCode::TAG_THROTTLED))
                }
                r => r,
            };
            if t.read_version == ReadVersion::Pending {
                t.read_version = match result {
                    Ok(v) => {
                        t.metadata_version = Some(metadata_version);
                        ReadVersion::Ready(v)
                    }
                    Err(e) => ReadVersion::Failed(e.code()),
                };
            }
        }
        self.table.wake_if(Wait::ReadVersion, |op| op.tx == tx);
    }
}
