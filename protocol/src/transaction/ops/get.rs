//! A point read, `get`, whole: the checks when it is called, the writes' say on the key as
//! they were then (RYW's `read(GetValueReq)`), the `GetValueRequest` to a replica of the
//! key's shard (or the metadata version from the read version's reply), the reply decoded and
//! merged with the transaction's atomic ops, and the read conflict range RYW adds.

use bytes::Bytes;

use super::replica_check::CheckedRequest;
use super::{OpId, OpKind, Wait};
use crate::error::ErrorCode;
use crate::event::{ClientError, Reply};
use crate::ids::{RequestId, TransactionId};
use crate::keys::METADATA_VERSION_KEY;
use crate::messages::decode_reply;
use crate::messages::storage::{GetValueReply, GetValueRequest, StorageServerInterface};
use crate::messages::types::{KeyRange, Version, VersionVector};
use crate::messages::ReplyPromise;
use crate::route::Route;
use crate::ryw::{key_after, PointAnswer, PointView};
use crate::transaction::state::{max_key_size, ReadVersion};
use crate::transaction::{fdb, storage_error, Ctx, Transactions};

/// A get in flight: [`OpKind::Get`]'s state.
#[derive(Debug)]
pub(in crate::transaction) struct GetOp {
    pub(super) key: Bytes,
    snapshot: bool,
    /// The writes' say on `key` when the read was issued (`None`: RYW disabled).
    view: Option<PointView>,
}

/// A `GetValueReply`'s value, or its error (a watch's first read decodes the same reply).
pub(super) fn decode_value(message: &Bytes) -> Result<Option<Bytes>, ClientError> {
    storage_error(decode_reply::<GetValueReply>(message)).and_then(|r| match r.error {
        Some(e) => fdb(e),
        None => Ok(r.value),
    })
}

impl Transactions {
    /// Reads `key`, a plain key (the client routed special keys elsewhere). A snapshot read
    /// adds no read conflict range.
    pub(crate) fn get(
        &mut self,
        cx: &mut Ctx<'_>,
        tx: TransactionId,
        key: &[u8],
        snapshot: bool,
    ) -> RequestId {
        GetOp::start(self, cx, tx, key, snapshot)
    }
}

/// The get's steps, each lent the transactions.
impl GetOp {
    /// Starts a get: the checks, then the writes' view of the key as it is now.
    pub(super) fn start(
        txs: &mut Transactions,
        cx: &mut Ctx<'_>,
        tx: TransactionId,
        key: &[u8],
        snapshot: bool,
    ) -> RequestId {
        let req = cx.new_request();
        if let Err(e) = txs.check_read_key(tx, key) {
            cx.finish(req, Err(e));
            return req;
        }
        if key.len() > max_key_size(&txs.knobs, key) {
            // No key that long exists: absent, without a read or a conflict range.
            cx.finish(req, Ok(Reply::Value(None)));
            return req;
        }
        let key = Bytes::copy_from_slice(key);
        let mut view = None;
        if let Some(t) = txs.txs.get_mut(&tx) {
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
        txs.insert_op(
            cx,
            req,
            tx,
            OpKind::Get(GetOp {
                key,
                snapshot,
                view,
            }),
        );
        req
    }

    /// RYW's `read(GetValueReq)`: the merged view, as it was when the read was issued, answers
    /// what it knows; storage the rest.
    pub(super) fn advance(txs: &mut Transactions, cx: &mut Ctx<'_>, id: OpId) {
        let OpId { req, .. } = id;
        let Some(OpKind::Get(GetOp { key, view, .. })) = txs.table.ops.get(&req).map(|o| &o.kind)
        else {
            return;
        };
        let key = key.clone();
        match view.as_ref().map(|v| &v.answer) {
            Some(PointAnswer::Unreadable) => {
                txs.fail_op(cx, req, ClientError::Fdb(ErrorCode::ACCESSED_UNREADABLE))
            }
            Some(PointAnswer::Known(v)) => {
                let v = v.clone();
                GetOp::finish(txs, cx, req, v)
            }
            Some(PointAnswer::Stored(_)) | None => GetOp::read_stored(txs, cx, id, key),
        }
    }

    fn read_stored(txs: &mut Transactions, cx: &mut Ctx<'_>, id: OpId, key: Bytes) {
        let OpId { req, tx } = id;
        if key == METADATA_VERSION_KEY {
            // NativeAPI answers the metadata version from the read version's reply, or from
            // the database's cache of replies for a read version set by hand, without a read
            // (and without waiting for the tenant: the key is global).
            let version = match txs.read_version_only(cx, id, false) {
                Some(Ok(v)) => v,
                Some(Err(e)) => return txs.fail_op(cx, req, e),
                None => return,
            };
            let own = txs.txs.get(&tx).and_then(|t| match t.read_version {
                ReadVersion::Ready(v) if v == version => t.metadata_version.clone(),
                _ => None,
            });
            if let Some(mv) = own.or_else(|| cx.grv.cached_metadata_version(version)) {
                return GetOp::on_value(txs, cx, req, Ok(mv));
            }
        }
        let version = match txs.read_version_to_read(cx, id) {
            Some(Ok(v)) => v,
            Some(Err(e)) => return txs.fail_op(cx, req, e),
            None => return,
        };
        GetOp::send(txs, cx, id, key, version);
    }

    /// Sends a `GetValueRequest` for `key` to a replica of its shard (or looks the shard up
    /// first); `false` if the op now waits for the lookup.
    pub(super) fn send(
        txs: &mut Transactions,
        cx: &mut Ctx<'_>,
        id: OpId,
        key: Bytes,
        version: Version,
    ) -> bool {
        let OpId { req, tx } = id;
        let Some(server) = txs.pick_server(cx, req, tx, &key, false) else {
            return false;
        };
        let token = cx.rng.uid();
        let tags = txs.sampled_read_tags(cx, tx);
        let msg = GetValueRequest {
            key,
            version,
            tags,
            reply: ReplyPromise { token },
            span_context: txs.span(cx, tx),
            tenant_info: txs.tenant_info(tx),
            options: txs.read_options(cx.rng, tx),
            ss_latest_commit_versions: VersionVector::empty(-1),
        };
        txs.table.set_wait(req, Wait::Reply);
        cx.io().send(
            &server.addr,
            server.stream(StorageServerInterface::GET_VALUE),
            &msg,
            token,
            Route::Storage(req),
        );
        txs.keep_for_check(req, tx, || {
            let key = msg.key.clone();
            (CheckedRequest::Value(msg), key, false)
        });
        true
    }

    /// A storage server answered the `GetValueRequest`.
    pub(super) fn on_reply(
        txs: &mut Transactions,
        cx: &mut Ctx<'_>,
        req: RequestId,
        message: &Bytes,
    ) {
        GetOp::on_value(txs, cx, req, decode_value(message));
    }

    /// The replica consistency check failed the read with `e` (or relocates it).
    pub(super) fn on_failed(
        txs: &mut Transactions,
        cx: &mut Ctx<'_>,
        req: RequestId,
        e: ClientError,
    ) {
        GetOp::on_value(txs, cx, req, Err(e));
    }

    /// The value read (from storage, or the metadata version from the read version's reply):
    /// merged with the writes as they were when the read was issued.
    fn on_value(
        txs: &mut Transactions,
        cx: &mut Ctx<'_>,
        req: RequestId,
        r: Result<Option<Bytes>, ClientError>,
    ) {
        let Some(value) = txs.read_or_retry(cx, req, r) else {
            return;
        };
        let Some(op) = txs.table.ops.get(&req) else {
            return;
        };
        // One `key_after` for the snapshot cache and the read conflict range.
        let (value, end) = match (&op.kind, txs.txs.get_mut(&op.tx)) {
            (
                OpKind::Get(GetOp {
                    key,
                    view: Some(view),
                    ..
                }),
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
        GetOp::finish_with_end(txs, cx, req, value, end);
    }

    /// Completes a get with its value, adding the read conflict range RYW adds
    /// (`updateConflictMap`: only where the writes leave the value to storage).
    pub(super) fn finish(
        txs: &mut Transactions,
        cx: &mut Ctx<'_>,
        req: RequestId,
        value: Option<Bytes>,
    ) {
        GetOp::finish_with_end(txs, cx, req, value, None)
    }

    /// [`finish_get`](Self::finish_get) given the key's `key_after` when the caller has it.
    fn finish_with_end(
        txs: &mut Transactions,
        cx: &mut Ctx<'_>,
        req: RequestId,
        value: Option<Bytes>,
        end: Option<Bytes>,
    ) {
        let Some(op) = txs.table.ops.get(&req) else {
            return;
        };
        let tx = op.tx;
        let OpKind::Get(GetOp {
            key,
            snapshot,
            view,
        }) = &op.kind
        else {
            return;
        };
        let conflicts = !*snapshot && view.as_ref().is_some_and(|v| v.conflicts);
        let key = key.clone();
        let Some(t) = txs.txs.get_mut(&tx) else {
            return txs.fail_op(cx, req, ClientError::Fdb(ErrorCode::TRANSACTION_CANCELLED));
        };
        if conflicts {
            let end = end.unwrap_or_else(|| key_after(&key));
            t.read_conflicts.insert_owned(key, end);
        }
        txs.succeed_op(cx, req, Reply::Value(value));
    }
}
