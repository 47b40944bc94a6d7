//! The read-only special-key modules libfdb_c 7.3 fills from the cluster rather than from the
//! transaction (registered in `DatabaseContext`'s constructor, `fdbclient/NativeAPI.actor.cpp`;
//! `fdbclient/SpecialKeySpace.actor.cpp`):
//!
//! * `\xff\xff/cluster_id`: the cluster's id from `ClientDBInfo`, as 32 hex digits (a read
//!   waits for a `ClientDBInfo` with a valid id, as `getClusterId` does).
//! * `\xff\xff/metrics/data_distribution_stats/<begin key>`: one row per shard, JSON
//!   `{"shard_bytes":..,"shard_bytes_per_ksecond":..}` (`DDStatsRangeImpl`), from a
//!   `GetDDMetricsRequest` to a commit proxy for the read's keys without the prefix
//!   (`dd_not_found`, the distributor not recruited yet, asks again after
//!   `PREVENT_FAST_SPIN_DELAY`).
//! * `\xff\xff/metrics/health/`: `aggregate` (only once the worst durability lag is not 0),
//!   `log/<id>` and `storage/<id>` (`HealthMetricsRangeImpl`), from a
//!   `GetHealthMetricsRequest` to a GRV proxy, detailed when the read reaches `log/` or
//!   `storage/`. As libfdb_c (`DatabaseContext::getHealthMetrics`), the last answer is kept
//!   and read again for 0.5 s (`AGGREGATE_HEALTH_METRICS_MAX_STALENESS`); a detailed request
//!   is sent only when the last one is 5 s old (`DETAILED_HEALTH_METRICS_MAX_STALENESS`),
//!   and a detailed read takes the per-process figures of whatever came back, so within those
//!   5 s it shows no `log/` or `storage/` rows, as libfdb_c 7.3.77 does.
//! * `\xff\xff/worker_interfaces/<address>`: each worker's `ClientWorkerInterface` in the
//!   binary format (`WorkerInterfacesSpecialKeyImpl`), from a `GetClientWorkersRequest` to
//!   the cluster controller, found through the coordinators' leader info as
//!   `getWorkerInterfaces` finds it (the `verify` option of fdbcli's `kill` is not served:
//!   every worker is listed).
//!
//! A read whose selectors are both plain keys (`first_greater_or_equal`) asks each part of
//! the module for the keys between them only; any other selector makes libfdb_c resolve it
//! over the whole part, so the whole part is asked for. The rows then go to the
//! transaction's special key space ([`Given`]), which resolves the selectors and applies the
//! limits and direction as for any module.

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::fmt::Write;
use core::time::Duration;

use crate::error::ErrorCode;
use crate::event::ClientError;
use crate::framing::ProtocolVersion;
use crate::ids::{RequestId, TransactionId};
use crate::messages::coordination::{
    ClientDBInfo, ClusterControllerClientInterface, CommitProxyInterface, GetLeaderRequest,
    GrvProxyInterface,
};
use crate::messages::metrics::{
    GetDDMetricsReply, GetDDMetricsRequest, GetHealthMetricsReply, GetHealthMetricsRequest,
    HealthMetrics,
};
use crate::messages::types::{KeyRange, KeySelector, KeyValue};
use crate::messages::workers::{decode_client_workers, GetClientWorkersRequest};
use crate::messages::{
    decode_any, decode_reply, AnyMessage, EnsureTable, ErrorOr, NetworkAddress, ReplyPromise,
};
use crate::monitor::ClusterMonitor;
use crate::net::Io;
use crate::route::Route;
use crate::ryw::range_read::remove_or_equal;
use crate::time::Instant;
use crate::transaction::{Given, SpecialRead};
use crate::uid::Uid;

/// A module's `[begin, end)`.
type Module = (&'static [u8], &'static [u8]);

/// `\xff\xff/cluster_id`.
pub const CLUSTER_ID_KEY: &[u8] = b"\xff\xff/cluster_id";
const CLUSTER_ID_MODULE: (&[u8], &[u8]) = (b"\xff\xff/cluster_id", b"\xff\xff/cluster_id\x00");
/// The metrics module (`SpecialKeySpace::MODULE::METRICS`).
const METRICS_MODULE: (&[u8], &[u8]) = (b"\xff\xff/metrics/", b"\xff\xff/metrics0");
/// `ddStatsRange`.
pub const DD_STATS_PREFIX: &[u8] = b"\xff\xff/metrics/data_distribution_stats/";
const DD_STATS: (&[u8], &[u8]) = (
    DD_STATS_PREFIX,
    b"\xff\xff/metrics/data_distribution_stats/\xff\xff",
);
const HEALTH: (&[u8], &[u8]) = (b"\xff\xff/metrics/health/", b"\xff\xff/metrics/health0");
/// The aggregate row of the health metrics.
pub const HEALTH_AGGREGATE_KEY: &[u8] = b"\xff\xff/metrics/health/aggregate";
const HEALTH_LOG: (&[u8], &[u8]) = (
    b"\xff\xff/metrics/health/log/",
    b"\xff\xff/metrics/health/log0",
);
const HEALTH_STORAGE: (&[u8], &[u8]) = (
    b"\xff\xff/metrics/health/storage/",
    b"\xff\xff/metrics/health/storage0",
);
/// The worker interfaces module.
const WORKERS_MODULE: (&[u8], &[u8]) = (
    b"\xff\xff/worker_interfaces/",
    b"\xff\xff/worker_interfaces0",
);
/// `CLIENT_KNOBS->TOO_MANY`: the shard limit libfdb_c asks with.
const TOO_MANY: i32 = 1_000_000;
/// `FLOW_KNOBS->PREVENT_FAST_SPIN_DELAY`: before asking again after `dd_not_found` or a
/// request lost with its proxy.
const RETRY_DELAY: Duration = Duration::from_millis(10);

/// What one part of a module read asks the cluster for; each with the special keys
/// (`[begin, end)`, inside the part) whose rows it gives.
#[derive(Clone, Debug, PartialEq)]
enum Ask {
    ClusterId,
    DdStats(KeyRange),
    Health(KeyRange),
    Workers(KeyRange),
}

#[derive(Clone, Debug)]
enum PartState {
    /// To send at `at` (at once: `None`), or sent (`sent`).
    Waiting {
        at: Option<Instant>,
        sent: bool,
    },
    /// The leader info asked of the coordinators, `pending` of them yet to answer.
    Leader {
        pending: usize,
    },
    Done(Vec<KeyValue>),
}

#[derive(Clone, Debug)]
struct ModuleRead {
    tx: TransactionId,
    read: SpecialRead,
    module: Module,
    parts: Vec<(Ask, PartState)>,
    failed: Option<ClientError>,
}

/// A module read that has all it needs: the transaction's special key space finishes it.
#[derive(Debug)]
pub(crate) struct Finished {
    pub(crate) req: RequestId,
    pub(crate) tx: TransactionId,
    pub(crate) read: SpecialRead,
    pub(crate) result: Result<(Vec<KeyValue>, KeyRange), ClientError>,
}

impl Finished {
    /// The rows as the special key space takes them.
    pub(crate) fn given(&self) -> Option<Given<'_>> {
        match &self.result {
            Ok((rows, module)) => Some(Given {
                rows,
                covered: core::slice::from_ref(module),
            }),
            Err(_) => None,
        }
    }
}

/// The module filled from the cluster that holds both keys, if any.
fn module_of(begin: &[u8], end: &[u8]) -> Option<Module> {
    [CLUSTER_ID_MODULE, METRICS_MODULE, WORKERS_MODULE]
        .into_iter()
        .find(|(b, e)| *b <= begin && begin < *e && *b <= end && end <= *e)
}

/// `[begin, end)` clipped to `part`, when they meet.
fn clip(begin: &[u8], end: &[u8], part: (&[u8], &[u8])) -> Option<KeyRange> {
    let b = begin.max(part.0);
    let e = end.min(part.1);
    (b < e).then(|| KeyRange::new(Bytes::copy_from_slice(b), Bytes::copy_from_slice(e)))
}

/// What a read of `module` between `begin` and `end` asks for (`whole`: every part whole).
fn asks(module: (&[u8], &[u8]), begin: &[u8], end: &[u8], whole: bool) -> Vec<Ask> {
    if module == CLUSTER_ID_MODULE {
        return alloc::vec![Ask::ClusterId];
    }
    let (begin, end) = if whole { module } else { (begin, end) };
    if module == WORKERS_MODULE {
        return clip(begin, end, module)
            .map(Ask::Workers)
            .into_iter()
            .collect();
    }
    let mut out = Vec::new();
    if let Some(kr) = clip(begin, end, DD_STATS) {
        out.push(Ask::DdStats(kr));
    }
    if let Some(kr) = clip(begin, end, HEALTH) {
        out.push(Ask::Health(kr));
    }
    out
}

/// The module and parts a special-key read asks for, when it reads a module filled from
/// the cluster (both its keys inside one).
pub(crate) fn cluster_read(read: &SpecialRead) -> Option<(Module, bool)> {
    match read {
        SpecialRead::Get(key) => {
            let mut after = key.to_vec();
            after.push(0);
            module_of(key, &after).map(|m| (m, false))
        }
        SpecialRead::Range(b, e, _) => {
            let (mut b, mut e) = (b.clone(), e.clone());
            remove_or_equal(&mut b);
            remove_or_equal(&mut e);
            module_of(&b.key, &e.key).map(|m| (m, !(b.offset == 1 && e.offset == 1)))
        }
    }
}

fn selectors(read: &SpecialRead) -> (Bytes, Bytes) {
    match read {
        SpecialRead::Get(key) => {
            let mut after = key.to_vec();
            after.push(0);
            (key.clone(), Bytes::from(after))
        }
        SpecialRead::Range(b, e, _) => {
            let (mut b, mut e): (KeySelector, KeySelector) = (b.clone(), e.clone());
            remove_or_equal(&mut b);
            remove_or_equal(&mut e);
            (b.key, e.key)
        }
    }
}

/// Writes `x` as C++'s `ostream << setprecision(17) << x` does (`%.17g`), as json_spirit
/// writes a double.
pub(crate) fn write_g17(out: &mut String, x: f64) {
    if x.is_nan() {
        out.push_str(if x.is_sign_negative() { "-nan" } else { "nan" });
        return;
    }
    if x.is_infinite() {
        out.push_str(if x < 0.0 { "-inf" } else { "inf" });
        return;
    }
    if x == 0.0 {
        out.push_str(if x.is_sign_negative() { "-0" } else { "0" });
        return;
    }
    let sci = alloc::format!("{x:.16e}");
    let (mantissa, exp) = sci.split_once('e').expect("an exponent");
    let exp: i32 = exp.parse().expect("a number");
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').into()
        } else {
            s.into()
        }
    };
    if !(-4..17).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        let _ = write!(out, "{}e{sign}{:02}", trim(mantissa), exp.unsigned_abs());
    } else {
        let fixed = alloc::format!("{x:.*}", (16 - exp) as usize);
        out.push_str(&trim(&fixed));
    }
}

fn row(key: Vec<u8>, value: String) -> KeyValue {
    KeyValue {
        key: Bytes::from(key),
        value: Bytes::from(value),
    }
}

fn within(key: &[u8], kr: &KeyRange) -> bool {
    kr.begin.as_ref() <= key && key < kr.end.as_ref()
}

/// `healthMetricsToKVPairs`: the rows of `m` inside `kr`.
fn health_rows(m: &HealthMetrics, kr: &KeyRange) -> Vec<KeyValue> {
    let mut out = Vec::new();
    if within(HEALTH_AGGREGATE_KEY, kr) && m.worst_storage_durability_lag != 0 {
        let mut s = String::new();
        let _ = write!(
            s,
            "{{\"batch_limited\":{},\"limiting_storage_durability_lag\":{},\"limiting_storage_queue\":{},\"tps_limit\":",
            m.batch_limited, m.limiting_storage_durability_lag, m.limiting_storage_queue
        );
        write_g17(&mut s, m.tps_limit);
        let _ = write!(
            s,
            ",\"worst_log_queue\":{},\"worst_storage_durability_lag\":{},\"worst_storage_queue\":{}}}",
            m.worst_tlog_queue, m.worst_storage_durability_lag, m.worst_storage_queue
        );
        out.push(row(HEALTH_AGGREGATE_KEY.to_vec(), s));
    }
    let key = |prefix: &[u8], id: &Uid| {
        let mut k = prefix.to_vec();
        k.extend_from_slice(alloc::format!("{id}").as_bytes());
        k
    };
    for (id, q) in &m.tlog_queue {
        let k = key(HEALTH_LOG.0, id);
        if within(&k, kr) {
            out.push(row(k, alloc::format!("{{\"log_queue\":{q}}}")));
        }
    }
    for (id, st) in &m.storage_stats {
        let k = key(HEALTH_STORAGE.0, id);
        if within(&k, kr) {
            let mut s = String::from("{\"cpu_usage\":");
            write_g17(&mut s, st.cpu_usage);
            s.push_str(",\"disk_usage\":");
            write_g17(&mut s, st.disk_usage);
            let _ = write!(
                s,
                ",\"storage_durability_lag\":{},\"storage_queue\":{}}}",
                st.storage_durability_lag, st.storage_queue
            );
            out.push(row(k, s));
        }
    }
    out
}

fn meets(kr: &KeyRange, part: (&[u8], &[u8])) -> bool {
    kr.begin.as_ref() < part.1 && part.0 < kr.end.as_ref()
}

/// Every module read in flight.
#[derive(Debug, Default)]
pub(crate) struct ClusterReads {
    reads: BTreeMap<RequestId, ModuleRead>,
    health: HealthCache,
}

/// `AGGREGATE_HEALTH_METRICS_MAX_STALENESS`.
const AGGREGATE_STALENESS: Duration = Duration::from_millis(500);
/// `DETAILED_HEALTH_METRICS_MAX_STALENESS`.
const DETAILED_STALENESS: Duration = Duration::from_secs(5);

/// The database's last health metrics (`DatabaseContext::healthMetrics` and its times).
#[derive(Debug, Default)]
struct HealthCache {
    metrics: HealthMetrics,
    at: Option<Instant>,
    detailed_at: Option<Instant>,
}

/// Whether `t` is less than `d` before `now`.
fn fresh(t: Option<Instant>, now: Instant, d: Duration) -> bool {
    t.is_some_and(|t| now.saturating_since(t) < d)
}

impl HealthCache {
    /// The metrics as a read sees them: the per-process figures only for a detailed one.
    fn view(&self, detailed: bool) -> HealthMetrics {
        let mut m = self.metrics.clone();
        if !detailed {
            m.storage_stats.clear();
            m.tlog_queue.clear();
        }
        m
    }

    /// `healthMetrics.update(reply, detailed, true)`: the per-process figures are taken from
    /// the reply (empty unless the request was detailed) by a detailed read only.
    fn update(&mut self, now: Instant, reply: HealthMetrics, detailed: bool) {
        let keep = core::mem::take(&mut self.metrics);
        self.metrics = if detailed {
            reply
        } else {
            HealthMetrics {
                storage_stats: keep.storage_stats,
                tlog_queue: keep.tlog_queue,
                ..reply
            }
        };
        self.at = Some(now);
        if detailed {
            self.detailed_at = Some(now);
        }
    }
}

/// Whether a health read of `kr` is a detailed one (it reaches `log/` or `storage/`).
fn detailed_read(kr: &KeyRange) -> bool {
    meets(kr, HEALTH_LOG) || meets(kr, HEALTH_STORAGE)
}

impl ClusterReads {
    /// Starts `read` of `tx` as request `req`, if it reads a module filled from the cluster
    /// (`false` otherwise: the transaction's special key space answers it).
    pub(crate) fn start(&mut self, req: RequestId, tx: TransactionId, read: &SpecialRead) -> bool {
        let Some((module, whole)) = cluster_read(read) else {
            return false;
        };
        let (b, e) = selectors(read);
        let parts = asks(module, &b, &e, whole)
            .into_iter()
            .map(|a| {
                (
                    a,
                    PartState::Waiting {
                        at: None,
                        sent: false,
                    },
                )
            })
            .collect();
        self.reads.insert(
            req,
            ModuleRead {
                tx,
                read: read.clone(),
                module,
                parts,
                failed: None,
            },
        );
        true
    }

    /// How many reads are in flight.
    pub(crate) fn len(&self) -> usize {
        self.reads.len()
    }

    /// Gives up on `req`; `false` if it is not a module read.
    pub(crate) fn cancel(&mut self, req: RequestId) -> bool {
        self.reads.remove(&req).is_some()
    }

    /// The earliest time a part is to be asked again.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.reads
            .values()
            .flat_map(|r| r.parts.iter())
            .filter_map(|(_, st)| match st {
                PartState::Waiting { at, sent: false } => *at,
                _ => None,
            })
            .min()
    }

    /// Sends what is due (once the cluster is known) and takes out the reads that are done.
    pub(crate) fn poll(&mut self, io: &mut Io<'_>, monitor: &ClusterMonitor) -> Vec<Finished> {
        if let Some(info) = monitor.info() {
            let health = &self.health;
            for (req, r) in self.reads.iter_mut() {
                for (i, (ask, st)) in r.parts.iter_mut().enumerate() {
                    let PartState::Waiting { at, sent: false } = st else {
                        continue;
                    };
                    if at.is_some_and(|t| io.now < t) {
                        continue;
                    }
                    if let Some(next) = send(io, monitor, info, health, *req, i, ask) {
                        *st = next;
                    }
                }
            }
        }
        let done: Vec<RequestId> = self
            .reads
            .iter()
            .filter(|(_, r)| {
                r.failed.is_some() || r.parts.iter().all(|(_, s)| matches!(s, PartState::Done(_)))
            })
            .map(|(k, _)| *k)
            .collect();
        done.into_iter()
            .filter_map(|req| {
                let r = self.reads.remove(&req)?;
                let result = match r.failed {
                    Some(e) => Err(e),
                    None => {
                        let mut rows: Vec<KeyValue> = r
                            .parts
                            .into_iter()
                            .flat_map(|(_, s)| match s {
                                PartState::Done(rows) => rows,
                                PartState::Waiting { .. } | PartState::Leader { .. } => Vec::new(),
                            })
                            .collect();
                        rows.sort_by(|a, b| a.key.cmp(&b.key));
                        let (begin, end) = r.module;
                        let module = KeyRange {
                            begin: Bytes::from_static(begin),
                            end: Bytes::from_static(end),
                        };
                        Ok((rows, module))
                    }
                };
                Some(Finished {
                    req,
                    tx: r.tx,
                    read: r.read,
                    result,
                })
            })
            .collect()
    }

    /// Part `part` of read `req`, when it waits for the answer a reply (`leader`: to the
    /// leader info request) would be.
    fn part(
        &mut self,
        req: RequestId,
        part: usize,
        leader: bool,
    ) -> Option<(&Ask, &mut PartState)> {
        let r = self.reads.get_mut(&req)?;
        let (ask, st) = r.parts.get_mut(part)?;
        let waits = match st {
            PartState::Leader { .. } => leader,
            PartState::Waiting { sent: true, .. } => !leader,
            _ => false,
        };
        waits.then_some((&*ask, st))
    }

    /// A proxy, a coordinator (`leader`) or the cluster controller answered part `part` of
    /// read `req`.
    pub(crate) fn on_reply(
        &mut self,
        io: &mut Io<'_>,
        req: RequestId,
        part: usize,
        leader: bool,
        message: &Bytes,
    ) {
        let now = io.now;
        let Some((_, st)) = self.part(req, part, leader) else {
            return;
        };
        if let PartState::Leader { pending } = st {
            *pending = pending.saturating_sub(1);
            let left = *pending;
            let cc = match decode_any(message) {
                Ok(AnyMessage::Leader(ErrorOr::Ok(EnsureTable(Some(info))))) if !info.forward => {
                    ClusterControllerClientInterface::from_serialized_info(&info.serialized_info)
                        .ok()
                }
                _ => None,
            };
            if let Some((_, cc)) = cc {
                let ep = cc.client_interface.get_client_workers.endpoint;
                let token = io.token();
                let msg = GetClientWorkersRequest {
                    reply: ReplyPromise { token },
                };
                let route = Route::ClusterModule {
                    op: req,
                    part,
                    leader: false,
                };
                io.send(ep.address(), ep.token, &msg, token, route);
                *st = PartState::Waiting {
                    at: None,
                    sent: true,
                };
            } else if left == 0 {
                *st = PartState::Waiting {
                    at: Some(now + RETRY_DELAY),
                    sent: false,
                };
            }
            return;
        }
        let Some((ask, st)) = self.part(req, part, leader) else {
            return;
        };
        let outcome = match ask {
            Ask::DdStats(kr) => match decode_reply::<GetDDMetricsReply>(message) {
                Ok(ErrorOr::Ok(r)) => Ok(r
                    .storage_metrics_list
                    .iter()
                    .map(|m| {
                        let mut k = DD_STATS_PREFIX.to_vec();
                        k.extend_from_slice(&m.begin_key);
                        row(
                            k,
                            alloc::format!(
                                "{{\"shard_bytes\":{},\"shard_bytes_per_ksecond\":{}}}",
                                m.shard_bytes,
                                m.shard_bytes_per_ksecond
                            ),
                        )
                    })
                    .filter(|kv| within(&kv.key, kr))
                    .collect()),
                Ok(ErrorOr::Err(ErrorCode::DD_NOT_FOUND)) => {
                    *st = PartState::Waiting {
                        at: Some(now + RETRY_DELAY),
                        sent: false,
                    };
                    return;
                }
                Ok(ErrorOr::Err(e)) => Err(ClientError::Fdb(e)),
                Err(e) => Err(ClientError::Decode(e)),
            },
            Ask::Health(kr) => match decode_reply::<GetHealthMetricsReply>(message) {
                Ok(ErrorOr::Ok(r)) => match HealthMetrics::decode(&r.serialized) {
                    Ok(m) => {
                        let kr = kr.clone();
                        let detailed = detailed_read(&kr);
                        self.health.update(now, m, detailed);
                        let rows = health_rows(&self.health.view(detailed), &kr);
                        if let Some((_, st)) = self.part(req, part, leader) {
                            *st = PartState::Done(rows);
                        }
                        return;
                    }
                    Err(e) => Err(ClientError::Decode(e)),
                },
                Ok(ErrorOr::Err(e)) => Err(ClientError::Fdb(e)),
                Err(e) => Err(ClientError::Decode(e)),
            },
            Ask::Workers(kr) => match decode_client_workers(message) {
                Ok(ErrorOr::Ok(workers)) => {
                    let version = ProtocolVersion::V7_3.version();
                    let mut rows: Vec<KeyValue> = workers
                        .iter()
                        .map(|w| {
                            let mut k = WORKERS_MODULE.0.to_vec();
                            k.extend_from_slice(alloc::format!("{}", w.address()).as_bytes());
                            KeyValue {
                                key: Bytes::from(k),
                                value: Bytes::from(w.binary_value(version)),
                            }
                        })
                        .filter(|kv| within(&kv.key, kr))
                        .collect();
                    rows.sort_by(|a, b| a.key.cmp(&b.key));
                    Ok(rows)
                }
                // `brokenPromiseToNever`: the next cluster controller answers.
                Ok(ErrorOr::Err(ErrorCode::BROKEN_PROMISE)) => {
                    *st = PartState::Waiting {
                        at: Some(now + RETRY_DELAY),
                        sent: false,
                    };
                    return;
                }
                Ok(ErrorOr::Err(e)) => Err(ClientError::Fdb(e)),
                Err(e) => Err(ClientError::Decode(e)),
            },
            Ask::ClusterId => return,
        };
        match outcome {
            Ok(rows) => *st = PartState::Done(rows),
            Err(e) => {
                if let Some(r) = self.reads.get_mut(&req) {
                    r.failed = Some(e);
                }
            }
        }
    }

    /// Part `part` of read `req` will get no answer: asked again shortly (the load balancer
    /// tries another proxy; new proxies restart it, `onProxiesChanged`).
    pub(crate) fn on_lost(&mut self, now: Instant, req: RequestId, part: usize, leader: bool) {
        let Some((_, st)) = self.part(req, part, leader) else {
            return;
        };
        if let PartState::Leader { pending } = st {
            *pending = pending.saturating_sub(1);
            if *pending > 0 {
                return;
            }
        }
        *st = PartState::Waiting {
            at: Some(now + RETRY_DELAY),
            sent: false,
        };
    }
}

/// One proxy stream to ask, skipping those whose endpoint failed; `None` while there is none.
fn pick(
    io: &mut Io<'_>,
    mut endpoints: Vec<(NetworkAddress, Uid)>,
) -> Option<(NetworkAddress, Uid)> {
    let i = io.pick(&endpoints)?;
    Some(endpoints.swap_remove(i))
}

/// Asks for part `part` of read `req`: the new state, or `None` to wait (no proxy, or no
/// valid cluster id yet).
fn send(
    io: &mut Io<'_>,
    monitor: &ClusterMonitor,
    info: &ClientDBInfo,
    health: &HealthCache,
    req: RequestId,
    part: usize,
    ask: &Ask,
) -> Option<PartState> {
    let route = Route::ClusterModule {
        op: req,
        part,
        leader: false,
    };
    match ask {
        Ask::Workers(_) => {
            let key = Bytes::from(monitor.cluster().cluster_key());
            let mut pending = 0;
            for (_, addr) in monitor.coordinator_targets() {
                let Some(addr) = addr else { continue };
                let token = io.token();
                let msg = GetLeaderRequest {
                    key: key.clone(),
                    known_leader: Uid::default(),
                    reply: ReplyPromise { token },
                };
                let route = Route::ClusterModule {
                    op: req,
                    part,
                    leader: true,
                };
                io.send(
                    &addr,
                    crate::uid::well_known::CLIENT_LEADER_REG_GET_LEADER,
                    &msg,
                    token,
                    route,
                );
                pending += 1;
            }
            (pending > 0).then_some(PartState::Leader { pending })
        }
        Ask::ClusterId => {
            let id = info.cluster_id;
            (id != Uid::default()).then(|| {
                PartState::Done(alloc::vec![row(
                    CLUSTER_ID_KEY.to_vec(),
                    alloc::format!("{id}")
                )])
            })
        }
        Ask::DdStats(kr) => {
            let proxies = info
                .commit_proxies
                .iter()
                .map(|p| {
                    let e = &p.commit.endpoint;
                    (
                        e.address().clone(),
                        p.stream(CommitProxyInterface::GET_DD_METRICS),
                    )
                })
                .collect();
            let (addr, dest) = pick(io, proxies)?;
            let strip = |k: &Bytes| k.slice(DD_STATS_PREFIX.len().min(k.len())..);
            let token = io.token();
            let msg = GetDDMetricsRequest {
                keys: KeyRange::new(strip(&kr.begin), strip(&kr.end)),
                shard_limit: TOO_MANY,
                reply: ReplyPromise { token },
            };
            io.send(&addr, dest, &msg, token, route);
            Some(PartState::Waiting {
                at: None,
                sent: true,
            })
        }
        Ask::Health(kr) => {
            let detailed = detailed_read(kr);
            if fresh(health.at, io.now, AGGREGATE_STALENESS) {
                return Some(PartState::Done(health_rows(&health.view(detailed), kr)));
            }
            let proxies = info
                .grv_proxies
                .iter()
                .map(|p| {
                    let e = &p.get_consistent_read_version.endpoint;
                    (
                        e.address().clone(),
                        p.stream(GrvProxyInterface::GET_HEALTH_METRICS),
                    )
                })
                .collect();
            let (addr, dest) = pick(io, proxies)?;
            let token = io.token();
            let msg = GetHealthMetricsRequest {
                reply: ReplyPromise { token },
                detailed: detailed && !fresh(health.detailed_at, io.now, DETAILED_STALENESS),
            };
            io.send(&addr, dest, &msg, token, route);
            Some(PartState::Waiting {
                at: None,
                sent: true,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::metrics::StorageStats;

    fn g17(x: f64) -> String {
        let mut s = String::new();
        write_g17(&mut s, x);
        s
    }

    #[test]
    fn doubles_as_json_spirit_writes_them() {
        // Values libfdb_c 7.3.77 printed for a real cluster.
        assert_eq!(g17(507561.17099314946), "507561.17099314946");
        assert_eq!(g17(0.559_985_714_323_170_8), "0.55998571432317079");
        assert_eq!(g17(2.2116835782091884), "2.2116835782091884");
        assert_eq!(g17(8271694.2228510985), "8271694.2228510985");
        // `%.17g`: 17 significant digits, trailing zeros dropped, exponent below 1e-4 and
        // from 1e17.
        assert_eq!(g17(0.1), "0.10000000000000001");
        assert_eq!(g17(5.0), "5");
        assert_eq!(g17(0.0), "0");
        assert_eq!(g17(1e17), "1e+17");
        assert_eq!(g17(1.5e-5), "1.5e-05");
        assert_eq!(g17(1.0 / 3.0e5), "3.3333333333333333e-06");
        assert_eq!(g17(0.0001), "0.0001");
        assert_eq!(g17(-2.5), "-2.5");
        assert_eq!(g17(f64::INFINITY), "inf");
    }

    #[test]
    fn parts_follow_the_selectors() {
        let fge = |k: &[u8]| KeySelector::first_greater_or_equal(Bytes::copy_from_slice(k));
        let range = |b, e| SpecialRead::Range(b, e, Default::default());
        // Plain keys: the parts between them, clipped.
        let r = range(
            fge(b"\xff\xff/metrics/health/log/"),
            fge(b"\xff\xff/metrics0"),
        );
        let (m, whole) = cluster_read(&r).unwrap();
        assert_eq!((m, whole), (METRICS_MODULE, false));
        let (b, e) = selectors(&r);
        assert_eq!(
            asks(m, &b, &e, whole),
            alloc::vec![Ask::Health(KeyRange::new(
                Bytes::from_static(b"\xff\xff/metrics/health/log/"),
                Bytes::from_static(HEALTH.1)
            ))]
        );
        // Any other selector: every part, whole.
        let r = range(
            KeySelector::last_less_than(Bytes::from_static(b"\xff\xff/metrics/health/")),
            fge(b"\xff\xff/metrics0"),
        );
        let (m, whole) = cluster_read(&r).unwrap();
        assert!(whole);
        assert_eq!(asks(m, b"", b"", whole).len(), 2);
        // Outside the modules, or across one's end: not a cluster read.
        assert!(
            cluster_read(&range(fge(b"\xff\xff/metrics/"), fge(b"\xff\xff/metrics1"))).is_none()
        );
        assert!(cluster_read(&SpecialRead::Get(Bytes::from_static(
            b"\xff\xff/status/json"
        )))
        .is_none());
        let id = SpecialRead::Get(Bytes::from_static(CLUSTER_ID_KEY));
        assert_eq!(cluster_read(&id), Some((CLUSTER_ID_MODULE, false)));
    }

    #[test]
    fn health_rows_as_libfdb_c_writes_them() {
        let m = HealthMetrics {
            worst_storage_queue: 2018,
            limiting_storage_queue: 2018,
            worst_storage_durability_lag: 5_000_000,
            limiting_storage_durability_lag: 5_000_000,
            worst_tlog_queue: 258,
            tps_limit: 507561.17099314946,
            batch_limited: false,
            storage_stats: alloc::vec![(
                Uid::new(0x3532_35af_d43f_c358, 0x3d50_fa4b_7ca9_8773),
                StorageStats {
                    storage_queue: 2020,
                    storage_durability_lag: 5_000_000,
                    disk_usage: 0.559_985_714_323_170_8,
                    cpu_usage: 2.2116835782091884,
                },
            )],
            tlog_queue: alloc::vec![(Uid::new(0x06d7_0def_58d1_090e, 0xd2e3_6004_3d0e_6c24), 258)],
        };
        let all = KeyRange::new(Bytes::from_static(HEALTH.0), Bytes::from_static(HEALTH.1));
        let rows = health_rows(&m, &all);
        let text: Vec<(&[u8], &[u8])> =
            rows.iter().map(|kv| (&kv.key[..], &kv.value[..])).collect();
        assert_eq!(
            text,
            alloc::vec![
                (
                    HEALTH_AGGREGATE_KEY,
                    &b"{\"batch_limited\":false,\"limiting_storage_durability_lag\":5000000,\"limiting_storage_queue\":2018,\"tps_limit\":507561.17099314946,\"worst_log_queue\":258,\"worst_storage_durability_lag\":5000000,\"worst_storage_queue\":2018}"[..]
                ),
                (
                    &b"\xff\xff/metrics/health/log/06d70def58d1090ed2e360043d0e6c24"[..],
                    &b"{\"log_queue\":258}"[..]
                ),
                (
                    &b"\xff\xff/metrics/health/storage/353235afd43fc3583d50fa4b7ca98773"[..],
                    &b"{\"cpu_usage\":2.2116835782091884,\"disk_usage\":0.55998571432317079,\"storage_durability_lag\":5000000,\"storage_queue\":2020}"[..]
                ),
            ]
        );
        // No aggregate while the worst lag is 0; only the rows inside the range.
        let quiet = HealthMetrics {
            worst_storage_durability_lag: 0,
            ..m
        };
        let logs = KeyRange::new(
            Bytes::from_static(HEALTH_LOG.0),
            Bytes::from_static(HEALTH_LOG.1),
        );
        let rows = health_rows(&quiet, &logs);
        assert_eq!(rows.len(), 1);
        assert!(rows[0].key.starts_with(HEALTH_LOG.0));
        assert!(health_rows(&quiet, &all)
            .iter()
            .all(|kv| kv.key != HEALTH_AGGREGATE_KEY));
    }

    mod on_a_scripted_cluster {
        //! The reads against a scripted cluster on the simulated network: the coordinator
        //! answers `ClientDBInfo`; the proxies' and the cluster controller's requests wait
        //! for the test.

        use super::super::*;
        use crate::cluster_file::ClusterFile;
        use crate::event::RangeResult;
        use crate::messages::coordination::LeaderInfo;
        use crate::messages::metrics::DDMetricsRef;
        use crate::messages::workers::{encode_client_workers, ClientWorkerInterface};
        use crate::messages::{
            encode_reply, Endpoint, IpAddress, NetworkAddressList, RequestStream,
        };
        use crate::serializer::DecodeError;
        use crate::sim::{Request, Server, Sim, Wire};
        use crate::transaction::RangeOptions;
        use crate::ClientConfig;

        fn stream(port: u16, token: Uid) -> RequestStream {
            RequestStream {
                endpoint: Endpoint {
                    addresses: NetworkAddressList {
                        address: NetworkAddress {
                            ip: IpAddress::V4(0x7f00_0001),
                            port,
                            flags: 0,
                            from_hostname: false,
                        },
                        secondary_address: None,
                    },
                    token,
                },
            }
        }

        struct Cluster {
            info: ClientDBInfo,
        }

        impl Server for Cluster {
            fn serve(&mut self, wire: &mut Wire<'_>, req: Request) -> Option<Request> {
                match &req.msg {
                    AnyMessage::OpenDatabaseCoordRequest(r)
                        if r.known_client_info_id == Uid::default() =>
                    {
                        wire.reply(&req, ErrorOr::Ok(self.info.clone()));
                        None
                    }
                    AnyMessage::OpenDatabaseCoordRequest(_)
                    | AnyMessage::GetReadVersionRequest(_) => None,
                    _ => Some(req),
                }
            }
        }

        fn sim() -> Sim<Cluster> {
            let cluster_file = ClusterFile::parse("t:t@127.0.0.1:4500").unwrap();
            let info = ClientDBInfo {
                grv_proxies: alloc::vec![
                    GrvProxyInterface {
                        get_consistent_read_version: stream(4500, Uid::new(1, 0x10)),
                        ..Default::default()
                    },
                    GrvProxyInterface {
                        get_consistent_read_version: stream(4500, Uid::new(1, 0x30)),
                        ..Default::default()
                    },
                ],
                commit_proxies: alloc::vec![CommitProxyInterface {
                    commit: stream(4500, Uid::new(2, 0x20)),
                    ..Default::default()
                }],
                id: Uid::new(3, 3),
                cluster_id: Uid::new(0xabc, 0xdef),
                ..Default::default()
            };
            let mut s = Sim::with_server(ClientConfig::new(cluster_file, 7), Cluster { info });
            s.drive();
            s
        }

        fn fge(k: &[u8]) -> KeySelector {
            KeySelector::first_greater_or_equal(Bytes::copy_from_slice(k))
        }

        fn read(s: &mut Sim<Cluster>, b: &[u8], e: &[u8]) -> crate::event::Call<RangeResult> {
            let now = s.now();
            let tx = s.client.create_transaction(now);
            let call = s
                .client
                .get_range(now, tx, fge(b), fge(e), RangeOptions::default(), false);
            s.drive();
            call
        }

        fn take(s: &mut Sim<Cluster>, pick: impl FnMut(&Request) -> bool) -> Request {
            s.take_request(pick).expect("the request was sent")
        }

        fn is_dd(r: &Request) -> bool {
            matches!(r.msg, AnyMessage::GetDDMetricsRequest(_))
        }

        fn is_health(r: &Request) -> bool {
            matches!(r.msg, AnyMessage::GetHealthMetricsRequest(_))
        }

        #[test]
        fn dd_stats_ask_a_commit_proxy_and_wait_for_the_distributor() {
            let mut s = sim();
            let call = read(
                &mut s,
                DD_STATS_PREFIX,
                b"\xff\xff/metrics/data_distribution_stats0",
            );
            let req = take(&mut s, is_dd);
            let commit = &s.server.info.commit_proxies[0];
            assert_eq!(
                req.dest,
                commit.stream(CommitProxyInterface::GET_DD_METRICS)
            );
            let AnyMessage::GetDDMetricsRequest(m) = &req.msg else {
                unreachable!()
            };
            assert_eq!(&m.keys.begin[..], b"");
            assert_eq!(&m.keys.end[..], b"\xff\xff");
            assert_eq!(m.shard_limit, 1_000_000);
            // No distributor yet: asked again after `PREVENT_FAST_SPIN_DELAY`.
            s.reply::<GetDDMetricsReply>(&req, ErrorOr::Err(ErrorCode::DD_NOT_FOUND));
            assert!(s.requests().iter().all(|r| !is_dd(r)));
            assert!(s.take(call).is_none());
            s.advance_by(RETRY_DELAY);
            let req = take(&mut s, is_dd);
            let shard = |bytes, begin: &'static [u8]| DDMetricsRef {
                shard_bytes: bytes,
                begin_key: Bytes::from_static(begin),
                shard_bytes_per_ksecond: 7,
            };
            s.reply(
                &req,
                ErrorOr::Ok(GetDDMetricsReply {
                    storage_metrics_list: alloc::vec![shard(10, b""), shard(-1, b"m")],
                }),
            );
            let rows = s.take(call).expect("finished").expect("rows").rows;
            let rows: Vec<(&[u8], &[u8])> =
                rows.iter().map(|kv| (&kv.key[..], &kv.value[..])).collect();
            assert_eq!(
                rows,
                alloc::vec![
                    (
                        DD_STATS_PREFIX,
                        &b"{\"shard_bytes\":10,\"shard_bytes_per_ksecond\":7}"[..]
                    ),
                    (
                        &b"\xff\xff/metrics/data_distribution_stats/m"[..],
                        &b"{\"shard_bytes\":-1,\"shard_bytes_per_ksecond\":7}"[..]
                    ),
                ]
            );
        }

        #[test]
        fn bad_replies_are_typed_errors() {
            let mut s = sim();
            let call = read(&mut s, HEALTH.0, HEALTH.1);
            let req = take(&mut s, is_health);
            let grvs = &s.server.info.grv_proxies;
            assert!(grvs
                .iter()
                .any(|g| req.dest == g.stream(GrvProxyInterface::GET_HEALTH_METRICS)));
            assert!(matches!(&req.msg, AnyMessage::GetHealthMetricsRequest(m) if m.detailed));
            // A blob cut short inside a well-formed reply.
            s.reply(
                &req,
                ErrorOr::Ok(GetHealthMetricsReply {
                    serialized: Bytes::from_static(&[0, 0, 0, 0x73, 0xb0, 0, 0xdb, 0x0f, 1, 2]),
                }),
            );
            assert!(matches!(
                s.take(call),
                Some(Err(ClientError::Decode(DecodeError::OutOfBounds { .. })))
            ));
            // A reply of another type, then bytes that are no message at all.
            let call = read(&mut s, DD_STATS.0, DD_STATS.1);
            let req = take(&mut s, is_dd);
            s.reply(&req, ErrorOr::Ok(GetHealthMetricsReply::default()));
            assert!(matches!(
                s.take(call),
                Some(Err(ClientError::Decode(DecodeError::FileIdentifier { .. })))
            ));
            let call = read(&mut s, DD_STATS.0, DD_STATS.1);
            let req = take(&mut s, is_dd);
            s.reply_bytes(&req, &[0xff; 7]);
            assert!(matches!(s.take(call), Some(Err(ClientError::Decode(_)))));
            // An error other than `dd_not_found` fails the read.
            let call = read(&mut s, DD_STATS.0, DD_STATS.1);
            let req = take(&mut s, is_dd);
            s.reply::<GetDDMetricsReply>(&req, ErrorOr::Err(ErrorCode::OPERATION_FAILED));
            assert_eq!(
                s.take(call),
                Some(Err(ClientError::Fdb(ErrorCode::OPERATION_FAILED)))
            );
            assert!(s.client.census().status_reads == 0);
        }

        #[test]
        fn lost_requests_are_asked_again_and_the_aggregate_alone_is_not_detailed() {
            let mut s = sim();
            let now = s.now();
            let tx = s.client.create_transaction(now);
            let call = s.client.get(now, tx, HEALTH_AGGREGATE_KEY, false);
            s.drive();
            let req = take(&mut s, is_health);
            assert!(matches!(&req.msg, AnyMessage::GetHealthMetricsRequest(m) if !m.detailed));
            // That proxy's role ended: the other one is asked.
            s.broken_promise(&req);
            s.advance_by(RETRY_DELAY);
            let again = take(&mut s, is_health);
            assert_ne!(again.dest, req.dest);
            let req = again;
            let m = HealthMetrics {
                worst_storage_durability_lag: 1,
                tps_limit: 0.1,
                ..HealthMetrics::default()
            };
            s.reply(
                &req,
                ErrorOr::Ok(GetHealthMetricsReply {
                    serialized: Bytes::from(m.encode(0x0FDB_00B0_7300_0000)),
                }),
            );
            let v = s.take(call).expect("finished").expect("a value");
            assert_eq!(
                v.as_deref(),
                Some(&b"{\"batch_limited\":false,\"limiting_storage_durability_lag\":0,\"limiting_storage_queue\":0,\"tps_limit\":0.10000000000000001,\"worst_log_queue\":0,\"worst_storage_durability_lag\":1,\"worst_storage_queue\":0}"[..])
            );
            // The cluster id needs no request.
            let call = s.client.get(s.now(), tx, CLUSTER_ID_KEY, false);
            s.drive();
            let v = s.take(call).expect("finished").expect("a value");
            assert_eq!(v.as_deref(), Some(&b"0000000000000abc0000000000000def"[..]));
        }

        #[test]
        fn health_metrics_are_kept_as_libfdb_c_keeps_them() {
            let mut s = sim();
            let detailed = |r: &Request| match &r.msg {
                AnyMessage::GetHealthMetricsRequest(m) => m.detailed,
                _ => unreachable!(),
            };
            let full = HealthMetrics {
                worst_storage_durability_lag: 3,
                storage_stats: alloc::vec![(Uid::new(1, 1), Default::default())],
                tlog_queue: alloc::vec![(Uid::new(2, 2), 5)],
                ..HealthMetrics::default()
            };
            let answer = |s: &mut Sim<Cluster>, req: &Request, m: &HealthMetrics| {
                s.reply(
                    req,
                    ErrorOr::Ok(GetHealthMetricsReply {
                        serialized: Bytes::from(m.encode(0x0FDB_00B0_7300_0000)),
                    }),
                )
            };
            let count = |r: &RangeResult| r.rows.len();
            // A detailed read: aggregate, log and storage rows.
            let call = read(&mut s, HEALTH.0, HEALTH.1);
            let req = take(&mut s, is_health);
            assert!(detailed(&req));
            answer(&mut s, &req, &full);
            assert_eq!(count(&s.take(call).unwrap().unwrap()), 3);
            // Within 0.5 s: the same rows, no request.
            let call = read(&mut s, HEALTH.0, HEALTH.1);
            assert!(s.requests().iter().all(|r| !is_health(r)));
            assert_eq!(count(&s.take(call).unwrap().unwrap()), 3);
            // Later, within 5 s of the detailed answer: a request that is not detailed, whose
            // empty per-process figures the detailed read takes (the aggregate alone).
            s.advance_by(Duration::from_millis(600));
            let call = read(&mut s, HEALTH.0, HEALTH.1);
            let req = take(&mut s, is_health);
            assert!(!detailed(&req));
            let aggregate = HealthMetrics {
                storage_stats: Vec::new(),
                tlog_queue: Vec::new(),
                ..full.clone()
            };
            answer(&mut s, &req, &aggregate);
            assert_eq!(count(&s.take(call).unwrap().unwrap()), 1);
            // After 5 s: detailed again.
            s.advance_by(Duration::from_secs(5));
            let call = read(&mut s, HEALTH.0, HEALTH.1);
            let req = take(&mut s, is_health);
            assert!(detailed(&req));
            answer(&mut s, &req, &full);
            assert_eq!(count(&s.take(call).unwrap().unwrap()), 3);
        }

        #[test]
        fn worker_interfaces_through_the_leader() {
            let mut s = sim();
            let call = read(&mut s, WORKERS_MODULE.0, WORKERS_MODULE.1);
            let leader = take(&mut s, |r| matches!(r.msg, AnyMessage::GetLeaderRequest(_)));
            assert_eq!(
                leader.dest,
                crate::uid::well_known::CLIENT_LEADER_REG_GET_LEADER
            );
            // The cluster controller's interface, as a coordinator serializes it.
            let cc = ClusterControllerClientInterface {
                client_interface: crate::messages::coordination::ClusterInterface {
                    get_client_workers: stream(4600, Uid::new(9, 4)),
                    ..Default::default()
                },
            };
            let mut serialized = 0x0FDB_00B0_7300_0000u64.to_le_bytes().to_vec();
            serialized.extend(crate::serializer::encode_with(
                &cc,
                <ClusterControllerClientInterface as crate::serializer::Message>::FILE_IDENTIFIER,
            ));
            let info = LeaderInfo {
                change_id: Uid::new(1, 1),
                serialized_info: Bytes::from(serialized),
                forward: false,
            };
            let body = AnyMessage::Leader(ErrorOr::Ok(EnsureTable(Some(info)))).encode();
            s.reply_bytes(&leader, &body);
            let req = take(&mut s, |r| {
                matches!(r.msg, AnyMessage::GetClientWorkersRequest(_))
            });
            assert_eq!(req.dest, Uid::new(9, 4));
            let w = ClientWorkerInterface {
                reboot: stream(4700, Uid::new(5, 5)),
                profiler: stream(4700, Uid::new(6, 6)),
                set_failure_injection: stream(4700, Uid::new(7, 7)),
            };
            s.reply_bytes(
                &req,
                &encode_client_workers(&ErrorOr::Ok(alloc::vec![w.clone()])),
            );
            let rows = s.take(call).expect("finished").expect("rows").rows;
            assert_eq!(rows.len(), 1);
            assert_eq!(
                &rows[0].key[..],
                b"\xff\xff/worker_interfaces/127.0.0.1:4700"
            );
            assert_eq!(
                rows[0].value,
                Bytes::from(w.binary_value(0x0FDB_00B0_7300_0000))
            );
            // Garbage from the cluster controller is a typed error.
            let call = read(&mut s, WORKERS_MODULE.0, WORKERS_MODULE.1);
            let leader = take(&mut s, |r| matches!(r.msg, AnyMessage::GetLeaderRequest(_)));
            s.reply_bytes(&leader, &body);
            let req = take(&mut s, |r| {
                matches!(r.msg, AnyMessage::GetClientWorkersRequest(_))
            });
            s.reply_bytes(
                &req,
                &encode_reply(&ErrorOr::Ok(GetHealthMetricsReply::default())),
            );
            assert!(matches!(s.take(call), Some(Err(ClientError::Decode(_)))));
        }
    }
}
