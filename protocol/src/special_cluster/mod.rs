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

use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::fmt::Write;
use core::time::Duration;

use crate::error::ErrorCode;
use crate::event::ClientError;
use crate::ids::{RequestId, TransactionId};
use crate::messages::coordination::{
    ClusterControllerClientInterface, CommitProxyInterface, GrvProxyInterface,
};
use crate::messages::metrics::{
    GetDDMetricsReply, GetDDMetricsRequest, GetHealthMetricsReply, GetHealthMetricsRequest,
    HealthMetrics,
};
use crate::messages::types::{KeyRange, KeySelector, KeyValue};
use crate::messages::workers::{decode_client_workers, GetClientWorkersRequest};
use crate::messages::{decode_any, decode_reply, AnyMessage, EnsureTable, ErrorOr};
use crate::part::{requests_in, Answer, Leg, Part, PartCx, Requests, PREVENT_FAST_SPIN_DELAY};
use crate::route::Loss;
use crate::ryw::range_read::remove_or_equal;
use crate::time::Instant;
use crate::transaction::SpecialRead;
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

/// Which question of a module read a reply answers: part `part`'s, or (`leader`) the
/// coordinators' leader info it asked first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Question {
    part: usize,
    leader: bool,
}

impl Leg for Question {
    fn to_leg(self) -> u32 {
        2 * self.part as u32 + u32::from(self.leader)
    }

    fn from_leg(leg: u32) -> Option<Self> {
        Some(Question {
            part: (leg / 2) as usize,
            leader: leg % 2 == 1,
        })
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
    reads: Requests<ModuleRead>,
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
        self.reads.start(
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

    /// Part `part` of read `req`, when it waits for the answer a reply (`leader`: to the
    /// leader info request) would be.
    fn part(&mut self, req: RequestId, q: Question) -> Option<(&Ask, &mut PartState)> {
        let r = self.reads.get_mut(req)?;
        let (ask, st) = r.parts.get_mut(q.part)?;
        let waits = match st {
            PartState::Leader { .. } => q.leader,
            PartState::Waiting { sent: true, .. } => !q.leader,
            _ => false,
        };
        waits.then_some((&*ask, st))
    }

    /// The coordinators answered who leads, for part `part` of read `req`: the cluster
    /// controller is asked for the workers, or the part is asked again once none knew.
    fn on_leader(&mut self, cx: &mut PartCx<'_>, req: RequestId, part: usize, message: &Bytes) {
        let now = cx.now();
        let Some((_, st)) = self.part(req, Question { part, leader: true }) else {
            return;
        };
        let PartState::Leader { pending } = st else {
            return;
        };
        *pending = pending.saturating_sub(1);
        let left = *pending;
        let cc = match decode_any(message) {
            Ok(AnyMessage::Leader(ErrorOr::Ok(EnsureTable(Some(info))))) if !info.forward => {
                ClusterControllerClientInterface::from_serialized_info(&info.serialized_info).ok()
            }
            _ => None,
        };
        if let Some((_, cc)) = cc {
            let ep = cc.client_interface.get_client_workers.endpoint;
            let q = Question {
                part,
                leader: false,
            };
            let ask = |reply| GetClientWorkersRequest { reply };
            cx.ask(ep.address(), ep.token, req, q, ask);
            *st = PartState::Waiting {
                at: None,
                sent: true,
            };
        } else if left == 0 {
            *st = PartState::Waiting {
                at: Some(now + PREVENT_FAST_SPIN_DELAY),
                sent: false,
            };
        }
    }
}

impl Part for ClusterReads {
    type Leg = Question;

    requests_in!(reads);

    /// The earliest time a part is to be asked again.
    fn poll_timeout(&self) -> Option<Instant> {
        self.reads.next_timer(|r| {
            r.parts.iter().filter_map(|(_, st)| match st {
                PartState::Waiting { at, sent: false } => *at,
                _ => None,
            })
        })
    }

    /// Sends what is due (once the cluster is known) and answers the reads that are done.
    fn poll(&mut self, cx: &mut PartCx<'_>) {
        if cx.monitor.info().is_some() {
            let health = &self.health;
            for (req, r) in self.reads.iter_mut() {
                for (i, (ask, st)) in r.parts.iter_mut().enumerate() {
                    let PartState::Waiting { at, sent: false } = st else {
                        continue;
                    };
                    if at.is_some_and(|t| cx.now() < t) {
                        continue;
                    }
                    if let Some(next) = send(cx, health, req, i, ask) {
                        *st = next;
                    }
                }
            }
        }
        let done = self.reads.take_done(|r| {
            r.failed.is_some() || r.parts.iter().all(|(_, s)| matches!(s, PartState::Done(_)))
        });
        for (req, r) in done {
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
            cx.answer(Answer {
                req,
                tx: r.tx,
                read: r.read,
                result,
            });
        }
    }

    /// A proxy, a coordinator (`leader`) or the cluster controller answered part `part` of
    /// read `req`.
    fn on_reply(&mut self, cx: &mut PartCx<'_>, req: RequestId, q: Question, message: &Bytes) {
        if q.leader {
            return self.on_leader(cx, req, q.part, message);
        }
        let now = cx.now();
        let Some((ask, st)) = self.part(req, q) else {
            return;
        };
        let retry = PartState::Waiting {
            at: Some(now + PREVENT_FAST_SPIN_DELAY),
            sent: false,
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
                    *st = retry;
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
                        if let Some((_, st)) = self.part(req, q) {
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
                    let version = cx.io.net.protocol().version().version();
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
                    *st = retry;
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
                if let Some(r) = self.reads.get_mut(req) {
                    r.failed = Some(e);
                }
            }
        }
    }

    /// Part `part` of read `req` will get no answer: asked again shortly (the load balancer
    /// tries another proxy; new proxies restart it, `onProxiesChanged`).
    fn on_lost(&mut self, cx: &mut PartCx<'_>, req: RequestId, q: Question, why: Loss) {
        tracing::debug!(?why, "re-sending a special-key module request");
        let now = cx.now();
        let Some((_, st)) = self.part(req, q) else {
            return;
        };
        if let PartState::Leader { pending } = st {
            *pending = pending.saturating_sub(1);
            if *pending > 0 {
                return;
            }
        }
        *st = PartState::Waiting {
            at: Some(now + PREVENT_FAST_SPIN_DELAY),
            sent: false,
        };
    }

    /// Every question of a module read is lost with new proxies (as `onProxiesChanged`
    /// restarts the read), the coordinators' and cluster controller's too.
    fn asks_proxies(_q: Question) -> bool {
        true
    }
}

/// Asks for part `part` of read `req`: the new state, or `None` to wait (no proxy, or no
/// valid cluster id yet).
fn send(
    cx: &mut PartCx<'_>,
    health: &HealthCache,
    req: RequestId,
    part: usize,
    ask: &Ask,
) -> Option<PartState> {
    let (monitor, info) = (cx.monitor, cx.monitor.info()?);
    let q = Question {
        part,
        leader: false,
    };
    let sent = PartState::Waiting {
        at: None,
        sent: true,
    };
    match ask {
        Ask::Workers(_) => {
            let key = Bytes::from(monitor.cluster().cluster_key());
            let mut pending = 0;
            for (_, addr) in monitor.coordinator_targets() {
                let Some(addr) = addr else { continue };
                let leader = Question { part, leader: true };
                cx.ask_leader(&addr, &key, req, leader);
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
            let proxies = info.commit_proxy_streams(CommitProxyInterface::GET_DD_METRICS);
            let strip = |k: &Bytes| k.slice(DD_STATS_PREFIX.len().min(k.len())..);
            let ask = |reply| GetDDMetricsRequest {
                keys: KeyRange::new(strip(&kr.begin), strip(&kr.end)),
                shard_limit: TOO_MANY,
                reply,
            };
            cx.ask_one(&proxies, req, q, ask).then_some(sent)
        }
        Ask::Health(kr) => {
            let detailed = detailed_read(kr);
            let now = cx.now();
            if fresh(health.at, now, AGGREGATE_STALENESS) {
                return Some(PartState::Done(health_rows(&health.view(detailed), kr)));
            }
            let proxies = info.grv_proxy_streams(GrvProxyInterface::GET_HEALTH_METRICS);
            let ask = |reply| GetHealthMetricsRequest {
                reply,
                detailed: detailed && !fresh(health.detailed_at, now, DETAILED_STALENESS),
            };
            cx.ask_one(&proxies, req, q, ask).then_some(sent)
        }
    }
}

#[cfg(test)]
mod tests;
