//! The read-version batcher (`readVersionBatcher` in `fdbclient/NativeAPI.actor.cpp`): who
//! waits for a read version, grouped by the request flags (priority, causal risk).
//!
//! As libfdb_c's, each flag set's batch gathers the waiters that come during a window opened
//! by the first of them, and goes out when the window closes (or at `MAX_BATCH_SIZE` waiters,
//! [`MAX_GRV_BATCH`] unless a knob says otherwise), whatever is in flight. The window is half
//! the recent reply latency, smoothed (each reply moves it a tenth of the way to half its own
//! latency) and at most `GRV_BATCH_TIMEOUT` (5 ms unless a knob says otherwise); it starts at
//! zero, which sends at the driver's next turn what this one gathered (the client's deadline
//! is then now).
//! One difference: when no other open transaction could join the batch (every one of them is
//! already waiting for a read version, and no read version outside a transaction is asked), it
//! goes out at once, so that a lone transaction does not wait for company that cannot come.
//!
//! (Until 2026-12-06 a batch went out as soon as none of its flags was in flight. On a real
//! fdbserver 7.3 with 8 concurrent transactions that sent 0.37 read-version requests per
//! transaction where libfdb_c sent 0.27, each arriving on its own, and the cluster spent more
//! CPU per transaction on them: `tests/bench/BENCHMARKS.md`, "Read-version batching and the
//! server's work".)

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use crate::error::ErrorCode;
use crate::event::ClientError;
use crate::ids::{RequestId, TransactionId};
use crate::knobs::Knobs;
use crate::messages::coordination::ClientDBInfo;
use crate::messages::grv::{
    GetReadVersionReply, GetReadVersionRequest, TagCount, TagThrottleEntry,
};
use crate::messages::types::{SpanContext, Version, INVALID_VERSION};
use crate::messages::{decode_reply, ErrorOr, NetworkAddress, ReplyPromise};
use crate::net::Io;
use crate::route::Route;
use crate::time::Instant;
use crate::uid::Uid;

pub use crate::messages::grv::Priority;

pub use crate::knobs::MAX_GRV_BATCH;

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
#[derive(Debug)]
pub(crate) struct GrvBatcher {
    /// Waiting to be sent, by request flags.
    queue: BTreeMap<u32, VecDeque<Queued>>,
    /// Each flag set's window: its length now (`batchTime`), and when the open one closes.
    windows: BTreeMap<u32, Window>,
    /// Sent and not answered, by batch id: the flags, the waiters, the tags sent and when.
    in_flight: BTreeMap<u64, InFlight>,
    next_batch: u64,
    /// The smallest read version a GRV proxy of this cluster has given this database
    /// (`DatabaseContext::minAcceptableReadVersion`); `None` before the first one.
    floor: Option<Version>,
    /// `DatabaseContext::metadataVersionCache`: the metadata version at versions read-version
    /// and commit replies reported, oldest first, each newer than the last; it answers a
    /// transaction whose read version was set by hand.
    metadata_versions: VecDeque<(Version, Option<Bytes>)>,
    /// `MAX_BATCH_SIZE`: the most requests a batch carries.
    max_batch: usize,
    /// `GRV_BATCH_TIMEOUT`: the longest a window may grow.
    max_window: Duration,
}

impl Default for GrvBatcher {
    fn default() -> Self {
        GrvBatcher::new(&Knobs::default())
    }
}

/// A flag set's batching window.
#[derive(Debug, Default, Clone, Copy)]
struct Window {
    /// `batchTime`: how long a window stays open.
    length: Duration,
    /// When the open window closes; `None`: none open.
    closes: Option<Instant>,
    /// The client's timer found it closed: sent at the next flush. (A window of zero length
    /// closes when it opens, but is sent only then, a turn later, as libfdb_c's `delay(0)`
    /// fires on its run loop's next turn: the requests of the same turn ride together.)
    due: bool,
}

/// A batch sent and not answered.
#[derive(Debug)]
struct InFlight {
    flags: u32,
    waiters: Vec<Queued>,
    tags: Vec<TagCount>,
    sent: Instant,
}

/// `METADATA_VERSION_CACHE_SIZE`.
const METADATA_VERSION_CACHE_SIZE: usize = 1000;

impl GrvBatcher {
    /// Nothing waiting yet; batches as `knobs` say.
    pub(crate) fn new(knobs: &Knobs) -> Self {
        GrvBatcher {
            queue: BTreeMap::new(),
            windows: BTreeMap::new(),
            in_flight: BTreeMap::new(),
            next_batch: 0,
            floor: None,
            metadata_versions: VecDeque::new(),
            max_batch: knobs.max_batch_size,
            max_window: knobs.grv_batch_timeout,
        }
    }

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

    /// Transactions waiting for a read version, queued or in flight.
    fn transactions_waiting(&self) -> usize {
        let txs = |q: &mut dyn Iterator<Item = &Queued>| {
            q.filter(|(w, _)| matches!(w, GrvWaiter::Tx(_))).count()
        };
        self.queue
            .values()
            .map(|q| txs(&mut q.iter()))
            .chain(self.in_flight.values().map(|b| txs(&mut b.waiters.iter())))
            .sum()
    }

    /// The client's timer ran at `now`: every window closed by then is due.
    pub(crate) fn on_timeout(&mut self, now: Instant) {
        for w in self.windows.values_mut() {
            if w.closes.is_some_and(|c| c <= now) {
                w.due = true;
            }
        }
    }

    /// When the earliest open window with waiters closes.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.windows
            .iter()
            .filter(|(f, _)| self.queue.get(f).is_some_and(|q| !q.is_empty()))
            .filter_map(|(_, w)| w.closes)
            .min()
    }

    /// Opens a window for every flag set with waiters and none open, and sends the batch of
    /// every window that has closed (or is full). `open_transactions`: the transactions not
    /// destroyed, which could still join a batch unless already waiting.
    pub(crate) fn flush(
        &mut self,
        io: &mut Io<'_>,
        info: Option<&ClientDBInfo>,
        open_transactions: usize,
    ) {
        let Some(info) = info.filter(|i| !i.grv_proxies.is_empty()) else {
            // Nothing can be sent: no window is open until a proxy is known (the waiters
            // stay queued, and a closed window would only wake the driver for nothing).
            for w in self.windows.values_mut() {
                (w.closes, w.due) = (None, false);
            }
            return;
        };
        let now = io.now;
        // An application's read version outside a transaction always waits for its window:
        // more such calls may come, however many transactions are open.
        let asks = self
            .queue
            .values()
            .any(|q| q.iter().any(|(w, _)| matches!(w, GrvWaiter::Request(_))));
        let nobody_else = !asks && open_transactions <= self.transactions_waiting();
        let mut ready: Vec<u32> = Vec::new();
        for (f, q) in &self.queue {
            let w = self.windows.entry(*f).or_default();
            if q.is_empty() {
                (w.closes, w.due) = (None, false);
                continue;
            }
            let closes = *w.closes.get_or_insert(now + w.length);
            let closed = w.due || (!w.length.is_zero() && now >= closes);
            if nobody_else || q.len() >= self.max_batch || closed {
                ready.push(*f);
            }
        }
        for f in ready {
            let Some((addr, dest)) = grv_endpoint(io, info) else {
                // Every GRV proxy is gone: wait for the next ClientDBInfo, with no window
                // open (a closed one would only wake the driver for nothing).
                for w in self.windows.values_mut() {
                    (w.closes, w.due) = (None, false);
                }
                return;
            };
            let queue = self.queue.entry(f).or_default();
            let n = queue.len().min(self.max_batch);
            let waiters: Vec<Queued> = queue.drain(..n).collect();
            // The next waiter opens a new window (those left over a full batch, at once).
            let w = self.windows.entry(f).or_default();
            w.closes = (!queue.is_empty()).then(|| now + w.length);
            w.due = false;
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
            self.in_flight.insert(
                batch,
                InFlight {
                    flags: f,
                    waiters,
                    tags,
                    sent: now,
                },
            );
            io.send(&addr, dest, &req, token, Route::Grv(batch));
        }
    }

    /// A GRV proxy answered batch `batch` at `now`.
    pub(crate) fn on_reply(
        &mut self,
        now: Instant,
        batch: u64,
        message: &Bytes,
    ) -> Option<Answered> {
        let InFlight {
            flags,
            waiters,
            tags,
            sent,
        } = self.in_flight.remove(&batch)?;
        // The window moves a tenth of the way to half this reply's latency.
        let w = self.windows.entry(flags).or_default();
        let target = now.saturating_since(sent) / 2;
        w.length = (target / 10 + w.length * 9 / 10).min(self.max_window);
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
        let Some(InFlight { flags, waiters, .. }) = self.in_flight.remove(&batch) else {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ClientConfig;
    use crate::cluster_file::ClusterFile;
    use crate::knobs::GRV_BATCH_TIMEOUT;
    use crate::messages::coordination::GrvProxyInterface;
    use crate::messages::{AnyMessage, Endpoint, NetworkAddressList, RequestStream};
    use crate::sim::{Request, Sim};
    use crate::uid::well_known;

    const GRV: Uid = Uid::new(1, 0x10);

    /// A client whose cluster has one GRV proxy, bootstrapped.
    fn sim() -> Sim {
        sim_with(Knobs::default())
    }

    /// [`sim`] with `knobs`.
    fn sim_with(knobs: Knobs) -> Sim {
        let mut s = Sim::new(ClientConfig {
            knobs,
            ..ClientConfig::new(ClusterFile::parse("t:t@127.0.0.1:4500").unwrap(), 3)
        });
        let open = s
            .take_request(|r| r.dest == well_known::CLIENT_LEADER_REG_OPEN_DATABASE)
            .expect("the client asks a coordinator first");
        let endpoint = Endpoint {
            addresses: NetworkAddressList {
                address: NetworkAddress::new(
                    core::net::IpAddr::V4(core::net::Ipv4Addr::LOCALHOST),
                    4500,
                ),
                secondary_address: None,
            },
            token: GRV,
        };
        let info = ClientDBInfo {
            grv_proxies: alloc::vec![GrvProxyInterface {
                get_consistent_read_version: RequestStream { endpoint },
                ..Default::default()
            }],
            id: Uid::new(3, 3),
            ..Default::default()
        };
        s.reply(&open, ErrorOr::Ok(info));
        s
    }

    /// The read-version request sent, and how many transactions it carries.
    fn take_grv(s: &mut Sim) -> Option<(Request, u32)> {
        let r = s.take_request(|r| r.dest == GRV)?;
        let AnyMessage::GetReadVersionRequest(m) = &r.msg else {
            panic!("not a read version request: {:?}", r.msg);
        };
        let n = m.transaction_count;
        Some((r, n))
    }

    fn answer(s: &mut Sim, r: &Request) {
        let reply = GetReadVersionReply {
            version: 7,
            ..Default::default()
        };
        s.reply(r, ErrorOr::Ok(reply));
    }

    /// The window starts at zero (the next turn); an answer after 1 ms makes it 50 µs (a tenth of the way
    /// to half a millisecond). Then, with a third transaction open, the first to ask is held
    /// for the window and the second, asking within it, rides in the same batch. When every
    /// open transaction is waiting, nothing is held.
    #[test]
    fn a_window_gathers_concurrent_transactions_and_spares_a_lone_one() {
        let mut s = sim();
        let now = s.now();
        let [a, b] = s.create_transactions();
        let ca = s.client.tx_read_version(now, a);
        // Not sent in this call: `b` could still ask in this turn of the driver.
        assert_eq!(
            s.client.poll_timeout(),
            Some(now),
            "a zero window: the next turn"
        );
        let (r, n) = take_grv(&mut s).expect("sent on the next turn");
        assert_eq!(n, 1);
        s.advance_by(Duration::from_millis(1));
        answer(&mut s, &r);
        assert_eq!(s.take(ca), Some(Ok(7)));

        // `a` (open, its read version got) could still ask again: the window holds.
        let c = s.client.create_transaction(s.now());
        let cb = s.client.tx_read_version(s.now(), b);
        assert!(take_grv(&mut s).is_none(), "held while another could join");
        s.advance_by(Duration::from_micros(20));
        let cc = s.client.tx_read_version(s.now(), c);
        s.advance_by(Duration::from_micros(29));
        assert!(take_grv(&mut s).is_none(), "the window is 50 µs");
        s.advance_by(Duration::from_micros(1));
        let (r, n) = take_grv(&mut s).expect("sent when the window closes");
        assert_eq!(n, 2);
        answer(&mut s, &r);
        assert_eq!((s.take(cb), s.take(cc)), (Some(Ok(7)), Some(Ok(7))));

        // Every open transaction waiting: nobody else could join, so the batch goes at once.
        for t in [a, b, c] {
            s.client.destroy_transaction(s.now(), t);
        }
        let (d, e) = (
            s.client.create_transaction(s.now()),
            s.client.create_transaction(s.now()),
        );
        let cd = s.client.tx_read_version(s.now(), d);
        assert!(take_grv(&mut s).is_none(), "held: `e` could join");
        let ce = s.client.tx_read_version(s.now(), e);
        let (r, n) = take_grv(&mut s).expect("not held: nobody else is open");
        assert_eq!(n, 2);
        answer(&mut s, &r);
        assert_eq!((s.take(cd), s.take(ce)), (Some(Ok(7)), Some(Ok(7))));

        // The only open transaction asks: it goes at once.
        s.client.destroy_transaction(s.now(), d);
        s.client.destroy_transaction(s.now(), e);
        let f = s.client.create_transaction(s.now());
        let cf = s.client.tx_read_version(s.now(), f);
        let (r, n) = take_grv(&mut s).expect("a lone transaction is not held");
        assert_eq!(n, 1);
        answer(&mut s, &r);
        assert_eq!(s.take(cf), Some(Ok(7)));
    }

    /// `t` asks for a read version, sent at once and answered a second later (which grows
    /// the window to its cap).
    fn slow_answer(s: &mut Sim, t: TransactionId) {
        let now = s.now();
        let call = s.client.tx_read_version(now, t);
        s.advance_to(now);
        let (r, _) = take_grv(s).expect("a zero window sends on the next turn");
        s.advance_by(Duration::from_secs(1));
        answer(s, &r);
        assert_eq!(s.take(call), Some(Ok(7)));
    }

    /// `MAX_BATCH_SIZE` and `GRV_BATCH_TIMEOUT` from the knobs: a batch carries two at the
    /// most, and a window grows to 1 ms at the most.
    #[test]
    fn the_knobs_bound_the_batch_and_its_window() {
        let knobs = Knobs::default().with("max_batch_size", "2").unwrap();
        let mut s = sim_with(knobs.with("grv_batch_timeout", "0.001").unwrap());
        let [a, b, c, d, _open] = s.create_transactions();
        // A one-second answer would make the window 50 ms; it is capped at 1 ms.
        slow_answer(&mut s, a);
        // Three ask while another is open: two go at once, the third when its window closes.
        let asked: Vec<_> = [b, c, d]
            .map(|t| s.client.tx_read_version(s.now(), t))
            .into();
        let (first, n) = take_grv(&mut s).expect("a full batch goes at once");
        assert_eq!(n, 2);
        s.advance_by(Duration::from_micros(999));
        assert!(take_grv(&mut s).is_none());
        s.advance_by(Duration::from_micros(1));
        let (second, n) = take_grv(&mut s).expect("sent after 1 ms");
        assert_eq!(n, 1);
        answer(&mut s, &first);
        answer(&mut s, &second);
        for call in asked {
            assert_eq!(s.take(call), Some(Ok(7)));
        }
    }

    /// The window never grows past `GRV_BATCH_TIMEOUT`, and it does not wait for the batch
    /// before it: batches overlap, as libfdb_c's do.
    #[test]
    fn the_window_is_capped_and_batches_overlap() {
        let mut s = sim();
        let [a, b, c] = s.create_transactions();
        // A one-second answer would make the window 50 ms; it is capped at 5 ms.
        slow_answer(&mut s, a);

        let cb = s.client.tx_read_version(s.now(), b);
        s.advance_by(GRV_BATCH_TIMEOUT - Duration::from_micros(1));
        assert!(take_grv(&mut s).is_none());
        s.advance_by(Duration::from_micros(1));
        let (first, n) = take_grv(&mut s).expect("sent after 5 ms");
        assert_eq!(n, 1);
        // `c` asks while `b`'s batch is in flight: its own window, its own batch.
        let cc = s.client.tx_read_version(s.now(), c);
        s.advance_by(GRV_BATCH_TIMEOUT);
        let (second, n) = take_grv(&mut s).expect("sent with the first in flight");
        assert_eq!(n, 1);
        answer(&mut s, &second);
        answer(&mut s, &first);
        assert_eq!((s.take(cb), s.take(cc)), (Some(Ok(7)), Some(Ok(7))));
    }
}
