//! Read versions of transactions, and point reads (`get`): the value at the read version,
//! merged with the transaction's own writes, adding a read conflict range unless snapshot.

use super::state::max_key_size;
use bytes::Bytes;

use super::op::{OpKind, Wait};
use super::state::ReadVersion;
use super::{fdb, Ctx, Transactions};
use crate::error::ErrorCode;
use crate::event::{ClientError, Reply};
use crate::grv::GrvWaiter;
use crate::ids::{RequestId, TransactionId};
use crate::keys::METADATA_VERSION_KEY;
use crate::messages::grv::GetReadVersionRequest;
use crate::messages::storage::{GetValueRequest, StorageServerInterface};
use crate::messages::types::{KeyRange, TagSet};
use crate::messages::types::{Version, VersionVector};
use crate::messages::ReplyPromise;
use crate::route::Route;
use crate::ryw::{key_after, PointAnswer, PointView};
use crate::tag_throttle::TagThrottles;
use crate::time::Instant;

impl Transactions {
    /// The transaction's read version.
    pub(crate) fn tx_read_version(&mut self, cx: &mut Ctx<'_>, tx: TransactionId) -> RequestId {
        let req = cx.new_request();
        // Even after the commit (RYW's `getReadVersion` looks only at `resetPromise`).
        if let Some(t) = self.txs.get(&tx) {
            let e = t.deferred.clone().or(t.finished.map(ClientError::Fdb));
            if let Some(e) = e {
                cx.finish(req, Err(e));
                return req;
            }
        }
        self.insert_op(cx, req, tx, OpKind::ReadVersion);
        req
    }

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
        req: RequestId,
        tx: TransactionId,
        for_commit: bool,
    ) -> Option<Result<Version, ClientError>> {
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
        self.read_version_only(cx, req, tx, for_commit)
    }

    /// The read version of a read sent to a storage server (a get, a range read, a key
    /// selector, a watch's first read): libfdb_c checks it against the database's floor
    /// first (`validateVersion`), which only a read version set by hand can fail.
    pub(super) fn read_version_to_read(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        tx: TransactionId,
    ) -> Option<Result<Version, ClientError>> {
        let r = self.read_version_for(cx, req, tx, false)?;
        Some(r.and_then(|v| cx.grv.check_read_version(v).map(|()| v)))
    }

    /// The read version alone (`getReadVersion` does not wait for the tenant).
    pub(super) fn read_version_only(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        tx: TransactionId,
        for_commit: bool,
    ) -> Option<Result<Version, ClientError>> {
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

    /// Reads `key`, a plain key (the client routed special keys elsewhere). A snapshot read
    /// adds no read conflict range.
    pub(crate) fn get(
        &mut self,
        cx: &mut Ctx<'_>,
        tx: TransactionId,
        key: &[u8],
        snapshot: bool,
    ) -> RequestId {
        let req = cx.new_request();
        if let Err(e) = self.check_read_key(tx, key) {
            cx.finish(req, Err(e));
            return req;
        }
        if key.len() > max_key_size(key) {
            // No key that long exists: absent, without a read or a conflict range.
            cx.finish(req, Ok(Reply::Value(None)));
            return req;
        }
        let key = Bytes::copy_from_slice(key);
        let mut view = None;
        if let Some(t) = self.txs.get_mut(&tx) {
            if t.options.ryw_disabled {
                // NativeAPI's `get` adds its conflict range as the read starts.
                if !snapshot {
                    t.native
                        .read_conflicts
                        .push(KeyRange::new(key.clone(), key_after(&key)));
                }
            } else {
                // The writes as they are now decide the read, not as they will be when it
                // completes.
                let bypass = t.options.bypass_unreadable;
                let writes = t.writes_seen(snapshot).unwrap_or_default();
                view = Some(PointView::reading(&t.cache, &writes, &key, bypass));
            }
        }
        self.insert_op(
            cx,
            req,
            tx,
            OpKind::Get {
                key,
                snapshot,
                view,
            },
        );
        req
    }

    // ----- point reads -----

    /// RYW's `read(GetValueReq)`: the merged view, as it was when the read was issued, answers
    /// what it knows; storage the rest.
    pub(super) fn advance_get(&mut self, cx: &mut Ctx<'_>, req: RequestId, tx: TransactionId) {
        let Some(OpKind::Get { key, view, .. }) = self.table.ops.get(&req).map(|o| &o.kind) else {
            return;
        };
        let key = key.clone();
        match view.as_ref().map(|v| &v.answer) {
            Some(PointAnswer::Unreadable) => {
                self.fail_op(cx, req, ClientError::Fdb(ErrorCode::ACCESSED_UNREADABLE))
            }
            Some(PointAnswer::Known(v)) => {
                let v = v.clone();
                self.finish_get(cx, req, v)
            }
            Some(PointAnswer::Stored(_)) | None => self.read_stored(cx, req, tx, key),
        }
    }

    fn read_stored(&mut self, cx: &mut Ctx<'_>, req: RequestId, tx: TransactionId, key: Bytes) {
        if key == METADATA_VERSION_KEY {
            // NativeAPI answers the metadata version from the read version's reply, or from
            // the database's cache of replies for a read version set by hand, without a read
            // (and without waiting for the tenant: the key is global).
            let version = match self.read_version_only(cx, req, tx, false) {
                Some(Ok(v)) => v,
                Some(Err(e)) => return self.fail_op(cx, req, e),
                None => return,
            };
            let own = self.txs.get(&tx).and_then(|t| match t.read_version {
                ReadVersion::Ready(v) if v == version => t.metadata_version.clone(),
                _ => None,
            });
            if let Some(mv) = own.or_else(|| cx.grv.cached_metadata_version(version)) {
                return self.on_get_reply(cx, req, Ok(mv));
            }
        }
        let version = match self.read_version_to_read(cx, req, tx) {
            Some(Ok(v)) => v,
            Some(Err(e)) => return self.fail_op(cx, req, e),
            None => return,
        };
        self.send_get_value(cx, req, tx, key, version);
    }

    /// Sends a `GetValueRequest` for `key` to a replica of its shard (or looks the shard up
    /// first); `false` if the op now waits for the lookup.
    pub(super) fn send_get_value(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        tx: TransactionId,
        key: Bytes,
        version: Version,
    ) -> bool {
        let Some(server) = self.pick_server(cx, req, tx, &key, false) else {
            return false;
        };
        let token = cx.rng.uid();
        let tags = self.sampled_read_tags(cx, tx);
        let msg = GetValueRequest {
            key,
            version,
            tags,
            reply: ReplyPromise { token },
            span_context: self.span(cx, tx),
            tenant_info: self.tenant_info(tx),
            options: self.read_options(cx.rng, tx),
            ss_latest_commit_versions: VersionVector::empty(-1),
        };
        self.table.set_wait(req, Wait::Reply);
        cx.send(
            &server.addr,
            server.stream(StorageServerInterface::GET_VALUE),
            &msg,
            token,
            Route::Storage(req),
        );
        true
    }

    pub(super) fn on_get_reply(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        r: Result<Option<Bytes>, ClientError>,
    ) {
        let value = match r {
            Ok(v) => v,
            Err(e) => {
                if !self.retried_read_error(cx, req, &e) {
                    self.fail_op(cx, req, e);
                }
                return;
            }
        };
        let Some(op) = self.table.ops.get(&req) else {
            return;
        };
        // One `key_after` for the snapshot cache and the read conflict range.
        let (value, end) = match (&op.kind, self.txs.get_mut(&op.tx)) {
            (
                OpKind::Get {
                    key,
                    view: Some(view),
                    ..
                },
                Some(t),
            ) => {
                let end = key_after(key);
                t.cache.insert_point(key, &end, value.clone());
                // The transaction's atomic ops made before the read apply over what storage
                // holds.
                (view.over_stored(value), Some(end))
            }
            _ => (value, None),
        };
        self.finish_get_with_end(cx, req, value, end);
    }

    /// Completes a get with its value, adding the read conflict range RYW adds
    /// (`updateConflictMap`: only where the writes leave the value to storage).
    pub(super) fn finish_get(&mut self, cx: &mut Ctx<'_>, req: RequestId, value: Option<Bytes>) {
        self.finish_get_with_end(cx, req, value, None)
    }

    /// [`finish_get`](Self::finish_get) given the key's `key_after` when the caller has it.
    fn finish_get_with_end(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        value: Option<Bytes>,
        end: Option<Bytes>,
    ) {
        let Some(op) = self.table.ops.get(&req) else {
            return;
        };
        let tx = op.tx;
        let OpKind::Get {
            key,
            snapshot,
            view,
        } = &op.kind
        else {
            return;
        };
        let conflicts = !*snapshot && view.as_ref().is_some_and(|v| v.conflicts);
        let key = key.clone();
        let Some(t) = self.txs.get_mut(&tx) else {
            return self.fail_op(cx, req, ClientError::Fdb(ErrorCode::TRANSACTION_CANCELLED));
        };
        if conflicts {
            let end = end.unwrap_or_else(|| key_after(&key));
            t.read_conflicts.insert_owned(key, end);
        }
        self.succeed_op(cx, req, Reply::Value(value));
    }
}
