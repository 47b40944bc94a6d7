//! The read-version batcher (`readVersionBatcher` in `fdbclient/NativeAPI.actor.cpp`): who
//! waits for a read version, grouped by the request flags (priority, causal risk), so that
//! requests arriving while one is in flight ride together in the next. Unlike libfdb_c, a batch
//! goes out as soon as none of its flags is in flight instead of after an adaptive window: lower
//! latency when idle, the same batching under load.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;
use bytes::Bytes;

use crate::error::ErrorCode;
use crate::event::ClientError;
use crate::ids::{RequestId, TransactionId};
use crate::messages::coordination::ClientDBInfo;
use crate::messages::grv::{
    GetReadVersionReply, GetReadVersionRequest, TagCount, TagThrottleEntry,
};
use crate::messages::types::{SpanContext, Version, INVALID_VERSION};
use crate::messages::{decode_reply, ErrorOr, NetworkAddress, ReplyPromise};
use crate::net::Io;
use crate::route::Route;
use crate::uid::Uid;

pub use crate::messages::grv::Priority;

/// `MAX_BATCH_SIZE`: most transactions one GRV request may carry.
pub const MAX_GRV_BATCH: usize = 1000;

/// Who waits for a read version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GrvWaiter {
    /// An application's read version ([`Client::get_read_version`](crate::Client::get_read_version)).
    Request(RequestId),
    /// A transaction's first read or its commit.
    Tx(TransactionId),
}

/// A read version for the waiters of one batch: the version (or why not), whether the
/// database is locked, and what the tag throttles learn from the reply.
pub(crate) struct Answered {
    pub(crate) waiters: Vec<GrvWaiter>,
    pub(crate) result: Result<Version, ClientError>,
    pub(crate) locked: bool,
    /// The batch's priority, its tag counts and the reply's `tagThrottleInfo`.
    pub(crate) priority: Priority,
    pub(crate) tags: Vec<TagCount>,
    pub(crate) throttles: Vec<TagThrottleEntry>,
    /// The reply's `metadataVersion`: `\xff/metadataVersion` at the read version.
    pub(crate) metadata_version: Option<Bytes>,
}

/// A waiter and the transaction tags it asks with (`TransactionOptions::tags`).
type Queued = (GrvWaiter, Vec<Bytes>);

/// `readVersionBatcher`'s tag map: how many transactions of the batch carry each tag.
fn count_tags(waiters: &[Queued]) -> Vec<TagCount> {
    let mut counts: BTreeMap<Bytes, u32> = BTreeMap::new();
    for (_, tags) in waiters {
        for t in tags {
            *counts.entry(t.clone()).or_default() += 1;
        }
    }
    counts
        .into_iter()
        .map(|(tag, count)| TagCount { tag, count })
        .collect()
}

/// The batcher's state.
#[derive(Debug, Default)]
pub(crate) struct GrvBatcher {
    /// Waiting to be sent, by request flags.
    queue: BTreeMap<u32, VecDeque<Queued>>,
    /// Sent and not answered, by batch id: the flags, the waiters and the tags sent.
    in_flight: BTreeMap<u64, (u32, Vec<Queued>, Vec<TagCount>)>,
    next_batch: u64,
    /// The smallest read version a GRV proxy of this cluster has given this database
    /// (`DatabaseContext::minAcceptableReadVersion`); `None` before the first one.
    floor: Option<Version>,
    /// `DatabaseContext::metadataVersionCache`: the metadata version at versions read-version
    /// and commit replies reported, oldest first, each newer than the last; it answers a
    /// transaction whose read version was set by hand.
    metadata_versions: VecDeque<(Version, Option<Bytes>)>,
}

/// `METADATA_VERSION_CACHE_SIZE`.
const METADATA_VERSION_CACHE_SIZE: usize = 1000;

impl GrvBatcher {
    /// `waiter` wants a read version with these request flags.
    pub(crate) fn queue(&mut self, flags: u32, waiter: GrvWaiter) {
        self.queue_tagged(flags, waiter, Vec::new());
    }

    /// As [`GrvBatcher::queue`], for a transaction with tags.
    pub(crate) fn queue_tagged(&mut self, flags: u32, waiter: GrvWaiter, tags: Vec<Bytes>) {
        self.queue
            .entry(flags)
            .or_default()
            .push_back((waiter, tags));
    }

    fn flags_in_flight(&self, flags: u32) -> bool {
        self.in_flight.values().any(|(f, _, _)| *f == flags)
    }

    /// Sends a batch for every flag set with waiters and none in flight.
    pub(crate) fn flush(&mut self, io: &mut Io<'_>, info: Option<&ClientDBInfo>) {
        let Some(info) = info.filter(|i| !i.grv_proxies.is_empty()) else {
            return;
        };
        let ready: Vec<u32> = self
            .queue
            .iter()
            .filter(|(f, q)| !q.is_empty() && !self.flags_in_flight(**f))
            .map(|(f, _)| *f)
            .collect();
        for f in ready {
            let Some((addr, dest)) = grv_endpoint(io, info) else {
                // Every GRV proxy is gone: wait for the next ClientDBInfo.
                return;
            };
            let queue = self.queue.entry(f).or_default();
            let n = queue.len().min(MAX_GRV_BATCH);
            let waiters: Vec<Queued> = queue.drain(..n).collect();
            let token = io.token();
            let tags = count_tags(&waiters);
            let req = GetReadVersionRequest {
                transaction_count: waiters.len() as u32,
                flags: f,
                tags: tags.clone(),
                debug_id: None,
                reply: ReplyPromise { token },
                // libfdb_c always sends a fresh span id, with a zero trace id when unsampled.
                span_context: SpanContext {
                    trace_id: Uid::default(),
                    span_id: io.rng.next_u64(),
                    flags: 0,
                },
                max_version: INVALID_VERSION,
            };
            self.next_batch += 1;
            let batch = self.next_batch;
            self.in_flight.insert(batch, (f, waiters, tags));
            io.send(&addr, dest, &req, token, Route::Grv(batch));
        }
    }

    /// A GRV proxy answered batch `batch`.
    pub(crate) fn on_reply(&mut self, batch: u64, message: &Bytes) -> Option<Answered> {
        let (flags, waiters, tags) = self.in_flight.remove(&batch)?;
        let mut locked = false;
        let mut throttles = Vec::new();
        let mut metadata_version = None;
        let result = match decode_reply::<GetReadVersionReply>(message) {
            Ok(ErrorOr::Ok(r)) => {
                locked = r.locked;
                throttles = r.tag_throttle_info;
                self.served(r.version);
                self.note_metadata_version(r.version, r.metadata_version.clone());
                metadata_version = r.metadata_version;
                Ok(r.version)
            }
            Ok(ErrorOr::Err(e)) => Err(ClientError::Fdb(e)),
            Err(e) => Err(ClientError::Decode(e)),
        };
        Some(Answered {
            waiters: waiters.into_iter().map(|(w, _)| w).collect(),
            result,
            locked,
            priority: Priority::of_flags(flags),
            tags,
            throttles,
            metadata_version,
        })
    }

    /// Remembers the metadata version a reply reported at `version`, if newer than the
    /// newest remembered (as libfdb_c's ring does, an older one is dropped).
    pub(crate) fn note_metadata_version(&mut self, version: Version, value: Option<Bytes>) {
        if self
            .metadata_versions
            .back()
            .is_some_and(|(v, _)| *v >= version)
        {
            return;
        }
        if self.metadata_versions.len() == METADATA_VERSION_CACHE_SIZE {
            self.metadata_versions.pop_front();
        }
        self.metadata_versions.push_back((version, value));
    }

    /// The metadata version at exactly `version`, if a reply reported it (`Some(None)`: the
    /// key was unset then).
    pub(crate) fn cached_metadata_version(&self, version: Version) -> Option<Option<Bytes>> {
        let i = self
            .metadata_versions
            .binary_search_by_key(&version, |(v, _)| *v)
            .ok()?;
        Some(self.metadata_versions[i].1.clone())
    }

    /// A GRV proxy gave this database read version `version` (a batch's reply, or the
    /// committed version asked after an unknown commit result).
    pub(crate) fn served(&mut self, version: Version) {
        self.floor = Some(self.floor.map_or(version, |f| f.min(version)));
    }

    /// Whether a read at `version` may be sent: libfdb_c refuses, with `transaction_too_old`,
    /// a read below the smallest read version the database has got from a GRV proxy, and
    /// every read before its first one (`DatabaseContext::validateVersion`).
    pub(crate) fn check_read_version(&self, version: Version) -> Result<(), ClientError> {
        match self.floor {
            Some(f) if version >= f => Ok(()),
            _ => Err(ClientError::Fdb(ErrorCode::TRANSACTION_TOO_OLD)),
        }
    }

    /// The database now talks to another cluster: no read version seen so far counts
    /// (`switchConnectionRecordImpl`).
    pub(crate) fn forget_floor(&mut self) {
        self.floor = None;
    }

    /// Every waiter not yet sent, taken out of the queue (to be failed).
    pub(crate) fn take_queued(&mut self) -> Vec<GrvWaiter> {
        core::mem::take(&mut self.queue)
            .into_values()
            .flatten()
            .map(|(w, _)| w)
            .collect()
    }

    /// Batch `batch` got no answer. Asking for a read version is idempotent: its waiters go
    /// back to the front of their queue for another proxy, as the load balancer would.
    pub(crate) fn on_lost(&mut self, batch: u64) {
        let Some((flags, waiters, _)) = self.in_flight.remove(&batch) else {
            return;
        };
        tracing::debug!(transactions = waiters.len(), "re-sending read version");
        let q = self.queue.entry(flags).or_default();
        for w in waiters.into_iter().rev() {
            q.push_front(w);
        }
    }
}

/// A GRV proxy's read-version endpoint to ask, skipping proxies whose endpoint is gone;
/// `None` while there is none (wait for the next `ClientDBInfo`).
pub(crate) fn grv_endpoint(io: &mut Io<'_>, info: &ClientDBInfo) -> Option<(NetworkAddress, Uid)> {
    let endpoint = |i: usize| {
        let e = &info.grv_proxies[i].get_consistent_read_version.endpoint;
        (e.address(), e.token)
    };
    let i = io.pick_among(info.grv_proxies.len(), endpoint)?;
    let (addr, token) = endpoint(i);
    Some((addr.clone(), token))
}
