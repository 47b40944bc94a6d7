//! The management and configuration special keys (`\xff\xff/management/`,
//! `\xff\xff/configuration/`) beyond the tenant module: the parts libfdb_c 7.3 runs in the
//! client (`fdbclient/SpecialKeySpace.actor.cpp`) and fdbcli drives.
//!
//! Reads: each part's rows are read here from the system keys they stand for and handed to
//! the core, which applies selectors, limits and direction as for any special key; the
//! transaction's own writes into a part show in its reads (`rywGetRange`) unless it has
//! `read_your_writes_disable`.
//!
//! | part | rows |
//! |---|---|
//! | `excluded/`, `failed/`, `excluded_locality/`, `failed_locality/` | `\xff/conf/<part>/...`, empty values |
//! | `options/` | the options this transaction set (`excluded/force`, ...) |
//! | `db_locked` | the lock's UID, as 32 hex digits |
//! | `consistency_check_suspended` | present (empty) when suspended |
//! | `maintenance/<zone>` | the seconds left, `0` for `IgnoreSSFailures` |
//! | `data_distribution/mode`, `rebalance_ignored` | the mode (`-1` unset); present when set |
//! | `in_progress_exclusion/<addr>` | excluded storage servers and logs still in the cluster |
//! | `min_required_commit_version`, `version_epoch` | the version, in decimal |
//! | `\xff\xff/configuration/coordinators/` | `cluster_description` and `processes` (sorted) |
//! | `\xff\xff/configuration/process/class_type/<addr>`, `class_source/` | each worker's class, and where it was set |
//!
//! A read reaching the one part this client does not serve, `auto_coordinators` (fdbcli's
//! `coordinators auto` proposal), fails with `special_keys_no_module_found`. The coordinators are shown as the connection string names
//! them: a hostname is not resolved, where libfdb_c shows the address it resolves to.
//!
//! Writes (with `special_key_space_enable_writes`) are carried out at commit, before the
//! commit itself, each part in key order as `SpecialKeySpace::commit` runs them, into the
//! same system keys libfdb_c writes. A part that refuses its writes fails the commit with
//! `special_keys_api_failure` and leaves libfdb_c's JSON in `\xff\xff/error_message`; a lock
//! held by another UID fails it with `database_locked`. Excluding servers without
//! `options/excluded/force` first checks, over the status document, that the exclusion leaves
//! enough space (`checkExclusion`); marking servers failed without `options/failed/force` also
//! needs the commit proxies' safety check, which this client does not make: that commit fails
//! with `unsupported_operation` (set the force option to mark them failed). A set of
//! `\xff\xff/configuration/process/class_type/<addr>` to a class (`default`: the class the
//! process was started with) is fdbcli's `setclass`; a clear there is refused as it is made.
//! Coordinator changes and the version keys are refused with `unsupported_operation` when
//! written.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use bytes::Bytes;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::messages::storage::StorageServerInterface;
use fdb_protocol::messages::types::KeyRange;
use fdb_protocol::{
    ConflictRangeType, KeySelector, KeyValue, MutationType, RangeOptions, RangeResult,
    SpecialWrite, TransactionOption, TENANT_MANAGEMENT_RANGE,
};

use crate::driver::{query, submit, Driver, Pending};
use crate::error::Error;
use crate::transaction::Transaction;

const MANAGEMENT: (&[u8], &[u8]) = (b"\xff\xff/management/", b"\xff\xff/management0");
const CONFIGURATION: (&[u8], &[u8]) = (b"\xff\xff/configuration/", b"\xff\xff/configuration0");

/// The parts of the two modules libfdb_c 7.3 registers (API version 730).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    Options,
    /// An exclusion list: by address (`locality` false) or locality, failed or not.
    Exclusion {
        failed: bool,
        locality: bool,
    },
    DbLocked,
    ConsistencyCheck,
    Maintenance,
    DataDistribution,
    /// `\xff\xff/configuration/process/class_type/` (`source` false) or `class_source/`:
    /// each worker's process class, by address.
    ProcessClass {
        source: bool,
    },
    /// `\xff\xff/configuration/coordinators/`: the connection string's description and
    /// coordinators.
    Coordinators,
    Tenant,
    /// `in_progress_exclusion/`: the excluded servers and logs still holding data.
    InProgress,
    /// A version kept in a system key, shown in decimal (`min_required_commit_version`,
    /// `version_epoch`).
    VersionKey(&'static [u8]),
    /// Registered by libfdb_c, not served here.
    NotServed,
}

/// The parts, by key order.
#[rustfmt::skip]
const PARTS: [(&[u8], &[u8], Part); 17] = [
    (b"\xff\xff/configuration/coordinators/", b"\xff\xff/configuration/coordinators0", Part::Coordinators),
    (b"\xff\xff/configuration/process/class_source/", b"\xff\xff/configuration/process/class_source0", Part::ProcessClass { source: true }),
    (b"\xff\xff/configuration/process/class_type/", b"\xff\xff/configuration/process/class_type0", Part::ProcessClass { source: false }),
    (b"\xff\xff/management/auto_coordinators", b"\xff\xff/management/auto_coordinators\x00", Part::NotServed),
    (b"\xff\xff/management/consistency_check_suspended", b"\xff\xff/management/consistency_check_suspended\x00", Part::ConsistencyCheck),
    (b"\xff\xff/management/data_distribution/", b"\xff\xff/management/data_distribution0", Part::DataDistribution),
    (b"\xff\xff/management/db_locked", b"\xff\xff/management/db_locked\x00", Part::DbLocked),
    (b"\xff\xff/management/excluded/", b"\xff\xff/management/excluded0", Part::Exclusion { failed: false, locality: false }),
    (b"\xff\xff/management/excluded_locality/", b"\xff\xff/management/excluded_locality0", Part::Exclusion { failed: false, locality: true }),
    (b"\xff\xff/management/failed/", b"\xff\xff/management/failed0", Part::Exclusion { failed: true, locality: false }),
    (b"\xff\xff/management/failed_locality/", b"\xff\xff/management/failed_locality0", Part::Exclusion { failed: true, locality: true }),
    (b"\xff\xff/management/in_progress_exclusion/", b"\xff\xff/management/in_progress_exclusion0", Part::InProgress),
    (b"\xff\xff/management/maintenance/", b"\xff\xff/management/maintenance0", Part::Maintenance),
    (b"\xff\xff/management/min_required_commit_version", b"\xff\xff/management/min_required_commit_version\x00", Part::VersionKey(b"\xff/minRequiredCommitVersion")),
    (b"\xff\xff/management/options/", b"\xff\xff/management/options0", Part::Options),
    (TENANT_MANAGEMENT_RANGE.0, TENANT_MANAGEMENT_RANGE.1, Part::Tenant),
    (b"\xff\xff/management/version_epoch", b"\xff\xff/management/version_epoch\x00", Part::VersionKey(b"\xff/versionEpoch")),
];

// The system keys the parts stand for (`fdbclient/SystemData.cpp`).
const CONF_PREFIX: &[u8] = b"\xff/conf/";
const DB_LOCKED_KEY: &[u8] = b"\xff/dbLocked";
const CONSISTENCY_CHECK_SUSPENDED_KEY: &[u8] = b"\xff\x02/ConsistencyCheck/Suspend";
const HEALTHY_ZONE_KEY: &[u8] = b"\xff\x02/healthyZone";
const IGNORE_SS_FAILURES_ZONE: &[u8] = b"IgnoreSSFailures";
const REBALANCE_DD_IGNORE_KEY: &[u8] = b"\xff\x02/rebalanceDDIgnored";
const DATA_DISTRIBUTION_MODE_KEY: &[u8] = b"\xff/dataDistributionMode";
const MOVE_KEYS_LOCK_OWNER_KEY: &[u8] = b"\xff/moveKeysLock/Owner";
const MOVE_KEYS_LOCK_WRITE_KEY: &[u8] = b"\xff/moveKeysLock/Write";
/// `dataDistributionModeLock`, `UID(6345, 3425)`.
const DATA_DISTRIBUTION_MODE_LOCK: (u64, u64) = (6345, 3425);
/// `ProtocolVersion::withHealthyZoneValue()`, the version a healthy zone value starts with.
const HEALTHY_ZONE_VALUE_VERSION: u64 = 0x0FDB_00B0_6201_0001;
/// `CLIENT_KNOBS->CORE_VERSIONSPERSECOND`.
const VERSIONS_PER_SECOND: i64 = 1_000_000;
/// `LocalityData::ExcludeLocalityPrefix`.
const LOCALITY_PREFIX: &str = "locality_";
const SERVER_LIST: (&[u8], &[u8]) = (b"\xff/serverList/", b"\xff/serverList0");
const LOGS_KEY: &[u8] = b"\xff/logs";
const WORKER_LIST: (&[u8], &[u8]) = (b"\xff/worker/", b"\xff/worker0");
const PROCESS_CLASSES: (&[u8], &[u8]) = (b"\xff/processClass/", b"\xff/processClass0");
/// `processClassChangeKey`: changed with every `setclass`.
const PROCESS_CLASS_CHANGE_KEY: &[u8] = b"\xff/processClassChanges";
/// `ProtocolVersion::withProcessClassValue()`, the version a process class value starts with.
const PROCESS_CLASS_VALUE_VERSION: u64 = 0x0FDB_00B0_6201_0001;
/// `ProtocolVersion::withNetworkAddressHostnameFlag()`: from it on, an address ends in a flag.
const HOSTNAME_FLAG_VERSION: u64 = 0x0FDB_00B0_7101_0000;

/// `ProcessClass::toString` of each class by its number (`ClassType`).
const CLASS_NAMES: [&str; 24] = [
    "unset",
    "storage",
    "transaction",
    "resolution",
    "test",
    "commit_proxy",
    "master",
    "stateless",
    "log",
    "cluster_controller",
    "router",
    "fast_restore",
    "data_distributor",
    "coordinator",
    "ratekeeper",
    "storage_cache",
    "backup",
    "grv_proxy",
    "blob_manager",
    "blob_worker",
    "encrypt_key_proxy",
    "consistency_scan",
    "blob_migrator",
    "sim_http_server",
];
/// `ProcessClass::TesterClass`, `UnsetClass`, `DBSource`.
const TESTER_CLASS: i16 = 4;
const UNSET_CLASS: i16 = 0;
const DB_SOURCE: i16 = 2;

/// A process's class and where it was set (`ProcessClass`: `_class`, `_source`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct ProcessClass {
    class: i16,
    source: i16,
}

impl ProcessClass {
    fn class_name(&self) -> &'static str {
        // `blob_migrator` has no name in `toString`.
        match usize::try_from(self.class) {
            Ok(22) | Err(_) => "invalid",
            Ok(i) => CLASS_NAMES.get(i).copied().unwrap_or("invalid"),
        }
    }

    fn source_name(&self) -> &'static str {
        match self.source {
            0 => "command_line",
            1 => "configure_auto",
            2 => "set_class",
            _ => "invalid",
        }
    }
}

/// A little-endian reader of flow's binary serialization (`BinaryReader`).
struct Binary<'a>(&'a [u8]);

impl<'a> Binary<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.take(2)?.try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        le_u64(self.take(8)?)
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    /// A `NetworkAddress` of a value written at protocol `version`: `ip:port`.
    fn address(&mut self, version: u64) -> Option<(IpAddr, u16)> {
        let ip = if self.u8()? != 0 {
            let b: [u8; 16] = self.take(16)?.try_into().ok()?;
            IpAddr::from(b)
        } else {
            IpAddr::from(std::net::Ipv4Addr::from(self.u32()?))
        };
        let port = self.u16()?;
        let _flags = self.u16()?;
        if version >= HOSTNAME_FLAG_VERSION {
            self.u8()?;
        }
        Some((ip, port))
    }
    fn class(&mut self) -> Option<ProcessClass> {
        Some(ProcessClass {
            class: self.u16()? as i16,
            source: self.u16()? as i16,
        })
    }
}

/// `decodeWorkerListValue`: a worker's process id, class and address (`ip:port` as
/// `formatIpPort` writes it).
fn decode_worker(v: &[u8]) -> Option<(Option<Vec<u8>>, ProcessClass, String)> {
    let mut r = Binary(v);
    let version = r.u64()?;
    let mut process_id = None;
    for _ in 0..r.u64()? {
        let key = r.bytes()?;
        let value = if r.u8()? != 0 { Some(r.bytes()?) } else { None };
        if key == b"processid" {
            process_id = value.map(<[u8]>::to_vec);
        }
    }
    let class = r.class()?;
    let (ip, port) = r.address(version)?;
    Some((process_id, class, ip_port(ip, port)))
}

/// `formatIpPort`.
fn ip_port(ip: IpAddr, port: u16) -> String {
    match ip {
        IpAddr::V4(ip) => format!("{ip}:{port}"),
        IpAddr::V6(ip) => format!("[{ip}]:{port}"),
    }
}

/// `decodeLogsValue`: the addresses of the current and the old logs.
fn decode_logs(v: &[u8]) -> Option<Vec<(IpAddr, u16)>> {
    let mut r = Binary(v);
    let version = r.u64()?;
    let mut out = Vec::new();
    for _ in 0..2 {
        for _ in 0..r.u32()? {
            r.take(16)?;
            out.push(r.address(version)?);
        }
    }
    Some(out)
}

/// `ExclusionInProgressActor`: the addresses of the storage servers and logs the exclusions
/// (by address and by locality, failed or not) cover, or logs without an address, sorted.
async fn in_progress<D: Driver>(tx: &Transaction<D>) -> Result<Vec<String>, Error> {
    for o in [
        TransactionOption::ReadSystemKeys,
        TransactionOption::PrioritySystemImmediate,
        TransactionOption::LockAware,
    ] {
        tx.set_option(o)?;
    }
    let list = |part: &str| {
        let b = [CONF_PREFIX, part.as_bytes(), b"/"].concat();
        let e = [CONF_PREFIX, part.as_bytes(), b"0"].concat();
        let tx = tx.clone();
        async move {
            let rows = tx.get_range(&b, &e, 0).await?;
            Ok::<_, Error>(
                rows.into_iter()
                    .map(|kv| kv.key[b.len()..].to_vec())
                    .collect::<Vec<_>>(),
            )
        }
    };
    let mut addresses: Vec<AddressExclusion> = Vec::new();
    for part in ["excluded", "failed"] {
        addresses.extend(
            list(part)
                .await?
                .iter()
                .filter_map(|a| AddressExclusion::parse(a)),
        );
    }
    let mut localities: Vec<(String, String)> = Vec::new();
    for part in ["excluded_locality", "failed_locality"] {
        for l in list(part).await? {
            let l = String::from_utf8_lossy(&l).into_owned();
            let l = l.strip_prefix(LOCALITY_PREFIX).unwrap_or(&l);
            if let Some((k, v)) = l.split_once(':') {
                localities.push((k.to_owned(), v.to_owned()));
            }
        }
    }
    let excluded = |ip: IpAddr, port: u16| addresses.iter().any(|a| a.excludes(ip, port));
    let mut found: Vec<String> = Vec::new();
    for kv in tx.get_range(SERVER_LIST.0, SERVER_LIST.1, 0).await? {
        // The protocol version, then the interface as a flatbuffer.
        let body = Bytes::copy_from_slice(kv.value.get(8..).unwrap_or_default());
        let ssi = fdb_protocol::serializer::decode_root::<StorageServerInterface>(&body)
            .map_err(|_| Error::from(ErrorCode::SERIALIZATION_FAILED))?;
        let list = &ssi.get_value.endpoint.addresses;
        let mut all = vec![&list.address];
        all.extend(list.secondary_address.iter());
        let by_locality = localities.iter().any(|(k, v)| {
            ssi.locality
                .data
                .iter()
                .any(|e| e.key.as_ref() == k.as_bytes() && e.value.as_deref() == Some(v.as_bytes()))
        });
        for a in all {
            let ip = IpAddr::from(a.ip);
            if by_locality || excluded(ip, a.port) {
                found.push(ip_port(ip, a.port));
            }
        }
    }
    if let Some(v) = tx.get(LOGS_KEY).await? {
        let logs = decode_logs(&v).ok_or(Error::from(ErrorCode::SERIALIZATION_FAILED))?;
        for (ip, port) in logs {
            let unset = ip == IpAddr::from([0, 0, 0, 0]) && port == 0;
            if unset || excluded(ip, port) {
                found.push(ip_port(ip, port));
            }
        }
    }
    found.sort();
    found.dedup();
    Ok(found)
}

/// `getWorkers`: every worker but testers, with its class as the database sets it (when
/// set with `setclass`, or when the worker's own is unset), sorted by address as strings,
/// each address once.
async fn workers<D: Driver>(tx: &Transaction<D>) -> Result<Vec<(String, ProcessClass)>, Error> {
    let classes = tx
        .get_range(PROCESS_CLASSES.0, PROCESS_CLASSES.1, 0)
        .await?;
    let list = tx.get_range(WORKER_LIST.0, WORKER_LIST.1, 0).await?;
    let class_of = |id: &Option<Vec<u8>>| {
        let id = id.as_deref()?;
        classes.iter().find_map(|kv| {
            let mut k = Binary(&kv.key[PROCESS_CLASSES.0.len()..]);
            if k.bytes()? != id {
                return None;
            }
            let mut v = Binary(&kv.value);
            v.u64()?;
            v.class()
        })
    };
    // (A value that does not decode fails the read, as `BinaryReader` throws
    // `serialization_failed`.)
    let mut out = Vec::new();
    for kv in list {
        let (id, mut class, addr) =
            decode_worker(&kv.value).ok_or(Error::from(ErrorCode::SERIALIZATION_FAILED))?;
        let db_class = class_of(&id).unwrap_or_default();
        if db_class.source == DB_SOURCE || class.class == UNSET_CLASS {
            class = db_class;
        }
        if class.class != TESTER_CLASS {
            out.push((addr, class));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out.dedup_by(|a, b| a.0 == b.0);
    Ok(out)
}

/// The module (management or configuration) holding `key`.
fn module_of(key: &[u8]) -> Option<(&'static [u8], &'static [u8])> {
    [MANAGEMENT, CONFIGURATION]
        .into_iter()
        .find(|(b, e)| *b <= key && key < *e)
}

/// Whether a point read is answered here.
pub(crate) fn reads_key(key: &[u8]) -> bool {
    module_of(key).is_some()
}

/// Whether a range read between these selectors is answered here: both keys in one of the
/// two modules.
pub(crate) fn reads_range(begin: &KeySelector, end: &KeySelector) -> bool {
    match module_of(&begin.key) {
        Some((b, e)) => b <= end.key.as_ref() && end.key.as_ref() <= e,
        None => false,
    }
}

/// The ranges of `module` whose rows are given in full: all of it but the parts not served.
fn covered(module: (&[u8], &[u8])) -> Vec<KeyRange> {
    let mut out = Vec::new();
    let mut at = module.0;
    for (b, e, part) in PARTS {
        if part == Part::NotServed && module.0 <= b && e <= module.1 {
            if at < b {
                out.push(range(at, b));
            }
            at = e;
        }
    }
    if at < module.1 {
        out.push(range(at, module.1));
    }
    out
}

fn range(b: &[u8], e: &[u8]) -> KeyRange {
    KeyRange {
        begin: Bytes::copy_from_slice(b),
        end: Bytes::copy_from_slice(e),
    }
}

fn row(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> KeyValue {
    KeyValue {
        key: Bytes::from(key.into()),
        value: Bytes::from(value.into()),
    }
}

/// `key` with `from` replaced by `to` (`from` must begin it).
fn swap_prefix(key: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    [to, key.strip_prefix(from).unwrap_or(b"")].concat()
}

/// `rywGetRange`: `rows` (sorted, inside `[b, e)`) as the transaction's writes in `[b, e)`
/// leave them: a written range hides what was read there, and a set shows its value.
fn with_writes(rows: Vec<KeyValue>, writes: &[SpecialWrite], b: &[u8], e: &[u8]) -> Vec<KeyValue> {
    let inside: Vec<&SpecialWrite> = writes
        .iter()
        .filter(|w| w.begin.as_ref() < e && b < w.end.as_ref())
        .collect();
    let mut out: Vec<KeyValue> = rows
        .into_iter()
        .filter(|kv| !inside.iter().any(|w| w.begin <= kv.key && kv.key < w.end))
        .collect();
    for w in inside {
        if let Some(v) = &w.value {
            if b <= w.begin.as_ref() && w.begin.as_ref() < e {
                out.push(KeyValue {
                    key: w.begin.clone(),
                    value: v.clone(),
                });
            }
        }
    }
    out.sort_by(|x, y| x.key.cmp(&y.key));
    out
}

/// The write covering `key`, if any (`getSpecialKeySpaceWriteMap()[key]`).
fn write_at<'a>(writes: &'a [SpecialWrite], key: &[u8]) -> Option<&'a SpecialWrite> {
    writes
        .iter()
        .find(|w| w.begin.as_ref() <= key && key < w.end.as_ref())
}

fn le_u64(b: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(..8)?.try_into().ok()?))
}

/// A UID as libfdb_c prints it (`UID::toString`): both halves, 16 hex digits each.
fn uid_hex(first: u64, second: u64) -> String {
    format!("{first:016x}{second:016x}")
}

/// A UID as it is serialized: both halves, little-endian.
fn uid_bytes(first: u64, second: u64) -> Vec<u8> {
    [first.to_le_bytes(), second.to_le_bytes()].concat()
}

/// `UID::fromString`: 32 hex digits.
fn parse_uid(s: &[u8]) -> Option<(u64, u64)> {
    if s.len() != 32 || !s.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let s = std::str::from_utf8(s).ok()?;
    Some((
        u64::from_str_radix(&s[..16], 16).ok()?,
        u64::from_str_radix(&s[16..], 16).ok()?,
    ))
}

/// A fresh random UID (`deterministicRandom()->randomUniqueID()`): splitmix64 over a
/// process-wide counter seeded from the process's entropy.
fn random_uid() -> (u64, u64) {
    static STATE: OnceLock<AtomicU64> = OnceLock::new();
    let next = || {
        let s = STATE
            .get_or_init(|| AtomicU64::new(crate::engine::entropy_seed()))
            .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed);
        let mut z = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    (next(), next())
}

/// `decodeHealthyZoneValue`: the zone and the version its maintenance lasts until.
fn decode_healthy_zone(v: &[u8]) -> Option<(Vec<u8>, i64)> {
    let len = u32::from_le_bytes(v.get(8..12)?.try_into().ok()?) as usize;
    let zone = v.get(12..12 + len)?.to_vec();
    let until = le_u64(v.get(12 + len..)?)? as i64;
    Some((zone, until))
}

/// `healthyZoneValue`.
fn healthy_zone_value(zone: &[u8], until: i64) -> Vec<u8> {
    let mut v = HEALTHY_ZONE_VALUE_VERSION.to_le_bytes().to_vec();
    v.extend_from_slice(&(zone.len() as u32).to_le_bytes());
    v.extend_from_slice(zone);
    v.extend_from_slice(&until.to_le_bytes());
    v
}

// ----- reads -----

/// The rows of `part` (`[pb, pe)`) in `[b, e)`.
async fn part_rows<D: Driver>(
    tx: &Transaction<D>,
    part: Part,
    (pb, _pe): (&[u8], &[u8]),
    (b, e): (&[u8], &[u8]),
    writes: &[SpecialWrite],
    ryw: bool,
) -> Result<Vec<KeyValue>, Error> {
    let own = |rows: Vec<KeyValue>| {
        if ryw {
            with_writes(rows, writes, b, e)
        } else {
            rows
        }
    };
    match part {
        Part::Options => Ok(writes
            .iter()
            .filter(|w| w.value.is_some() && b <= w.begin.as_ref() && w.begin.as_ref() < e)
            .map(|w| row(w.begin.to_vec(), Vec::new()))
            .collect()),
        Part::Exclusion { .. } => {
            tx.set_option(TransactionOption::ReadSystemKeys)?;
            let sb = swap_prefix(b, MANAGEMENT.0, CONF_PREFIX);
            let se = swap_prefix(e, MANAGEMENT.0, CONF_PREFIX);
            let rows = tx
                .get_range(&sb, &se, 0)
                .await?
                .into_iter()
                .map(|kv| KeyValue {
                    key: Bytes::from(swap_prefix(&kv.key, CONF_PREFIX, MANAGEMENT.0)),
                    value: kv.value,
                })
                .collect();
            Ok(own(rows))
        }
        Part::DbLocked | Part::ConsistencyCheck => {
            if let Some(w) = write_at(writes, pb).filter(|_| ryw) {
                return Ok(w.value.iter().map(|v| row(pb, v.to_vec())).collect());
            }
            tx.set_option(TransactionOption::LockAware)?;
            tx.set_option(TransactionOption::ReadSystemKeys)?;
            if part == Part::DbLocked {
                let v = tx.get(DB_LOCKED_KEY).await?;
                let uid = v.as_deref().and_then(|v| {
                    let uid = v.get(10..26)?;
                    Some(uid_hex(le_u64(uid)?, le_u64(&uid[8..])?))
                });
                Ok(uid.into_iter().map(|u| row(pb, u)).collect())
            } else {
                tx.set_option(TransactionOption::PrioritySystemImmediate)?;
                let v = tx.get(CONSISTENCY_CHECK_SUSPENDED_KEY).await?;
                let suspended = v
                    .as_deref()
                    .and_then(|v| v.first())
                    .is_some_and(|b| *b != 0);
                Ok(if suspended {
                    vec![row(pb, "")]
                } else {
                    Vec::new()
                })
            }
        }
        Part::Maintenance => {
            tx.set_option(TransactionOption::LockAware)?;
            tx.set_option(TransactionOption::ReadSystemKeys)?;
            let mut rows = Vec::new();
            if let Some(v) = tx.get(HEALTHY_ZONE_KEY).await? {
                if let Some((zone, until)) = decode_healthy_zone(&v) {
                    let rv = tx.get_read_version().await?;
                    let ignore = zone == IGNORE_SS_FAILURES_ZONE;
                    let key = [pb, &zone].concat();
                    if (ignore || until > rv) && b <= key.as_slice() && key.as_slice() < e {
                        let secs = if ignore {
                            0
                        } else {
                            (until - rv) / VERSIONS_PER_SECOND
                        };
                        rows.push(row(key, secs.to_string()));
                    }
                }
            }
            Ok(own(rows))
        }
        Part::DataDistribution => {
            tx.set_option(TransactionOption::ReadSystemKeys)?;
            let mut rows = Vec::new();
            let inside = |k: &[u8]| b <= k && k < e;
            let untouched = |k: &[u8]| !ryw || write_at(writes, k).is_none();
            let mode_key = [pb, b"mode"].concat();
            if inside(&mode_key) && untouched(&mode_key) {
                let v = tx.get(DATA_DISTRIBUTION_MODE_KEY).await?;
                let mode = v
                    .as_deref()
                    .and_then(|v| Some(i32::from_le_bytes(v.get(..4)?.try_into().ok()?)))
                    .unwrap_or(-1);
                rows.push(row(mode_key, mode.to_string()));
            }
            let ignored_key = [pb, b"rebalance_ignored"].concat();
            if inside(&ignored_key)
                && untouched(&ignored_key)
                && tx.get(REBALANCE_DD_IGNORE_KEY).await?.is_some()
            {
                rows.push(row(ignored_key, ""));
            }
            Ok(own(rows))
        }
        Part::InProgress => Ok(in_progress(tx)
            .await?
            .into_iter()
            .map(|a| row([pb, a.as_bytes()].concat(), ""))
            .filter(|kv| b <= kv.key.as_ref() && kv.key.as_ref() < e)
            .collect()),
        Part::VersionKey(key) => {
            tx.set_option(TransactionOption::LockAware)?;
            tx.set_option(TransactionOption::ReadSystemKeys)?;
            let v = tx.get(key).await?;
            let v = v
                .as_deref()
                .and_then(le_u64)
                .map(|v| (v as i64).to_string());
            Ok(v.into_iter().map(|v| row(pb, v)).collect())
        }
        Part::ProcessClass { source } => {
            tx.set_option(TransactionOption::ReadSystemKeys)?;
            let rows = workers(tx)
                .await?
                .into_iter()
                .map(|(addr, class)| {
                    let v = if source {
                        class.source_name()
                    } else {
                        class.class_name()
                    };
                    row([pb, addr.as_bytes()].concat(), v)
                })
                .filter(|kv| b <= kv.key.as_ref() && kv.key.as_ref() < e)
                .collect();
            Ok(if source { rows } else { own(rows) })
        }
        Part::Coordinators => {
            // `coordinatorsGetRangeActor`: the description, and the coordinators sorted as
            // strings, from the connection string in use.
            let cs = tx
                .get(b"\xff\xff/connection_string")
                .await?
                .unwrap_or_default();
            let cs = String::from_utf8_lossy(&cs);
            let (description, addresses) = match cs.split_once('@') {
                Some((key, addresses)) => (key.split(':').next().unwrap_or(""), addresses),
                None => ("", ""),
            };
            let mut coordinators: Vec<&str> = addresses
                .split(',')
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .collect();
            coordinators.sort_unstable();
            let mut rows = Vec::new();
            for (name, v) in [
                ("cluster_description", description.to_owned()),
                ("processes", coordinators.join(",")),
            ] {
                let key = [pb, name.as_bytes()].concat();
                if b <= key.as_slice() && key.as_slice() < e {
                    rows.push(row(key, v));
                }
            }
            Ok(own(rows))
        }
        Part::Tenant => crate::tenant_special_keys::rows_between(tx, b, e).await,
        Part::NotServed => Ok(Vec::new()),
    }
}

/// Every row of the served parts in `[b, e)` (inside `module`).
async fn rows_in<D: Driver>(
    tx: &Transaction<D>,
    module: (&[u8], &[u8]),
    b: &[u8],
    e: &[u8],
) -> Result<Vec<KeyValue>, Error> {
    let (writes, ryw) = tx.special_writes().await?;
    let mut rows = Vec::new();
    for (pb, pe, part) in PARTS {
        if !(module.0 <= pb && pe <= module.1) {
            continue;
        }
        let (x, y) = (b.max(pb), e.min(pe));
        if x < y {
            rows.extend(part_rows(tx, part, (pb, pe), (x, y), &writes, ryw).await?);
        }
    }
    Ok(rows)
}

impl<D: Driver> Transaction<D> {
    /// A point read in the management or configuration module.
    pub(crate) fn management_get(&self, key: &[u8]) -> Pending<D, Option<Bytes>> {
        let key = key.to_vec();
        let tx = self.clone();
        Pending::local(async move {
            tx.check_outside_tenants()?;
            let module = module_of(&key).expect("checked by reads_key");
            let after = [&key[..], b"\x00"].concat();
            let rows = rows_in(&tx, module, &key, &after).await?;
            let covered = covered(module);
            tx.call(move |c, now, id| c.get_with_rows(now, id, &key, rows, covered))
                .await
        })
    }

    /// A range read's batch in the management or configuration module: the rows between the
    /// two keys when both selectors are plain keys (offset 1), the whole module's otherwise.
    pub(crate) fn management_range(
        &self,
        begin: KeySelector,
        end: KeySelector,
        opts: RangeOptions,
    ) -> Pending<D, RangeResult> {
        let tx = self.clone();
        Pending::local(async move {
            tx.check_outside_tenants()?;
            let module = module_of(&begin.key).expect("checked by reads_range");
            let (b, e) = if begin.offset == 1 && end.offset == 1 {
                (begin.key.to_vec(), end.key.to_vec())
            } else {
                (module.0.to_vec(), module.1.to_vec())
            };
            let rows = rows_in(&tx, module, &b, &e).await?;
            let covered = covered(module);
            tx.call(move |c, now, id| {
                c.get_range_with_rows(now, id, begin, end, opts, rows, covered)
            })
            .await
        })
    }

    /// The management parts are not for a transaction inside a tenant (`supportsTenants`).
    fn check_outside_tenants(&self) -> Result<(), Error> {
        if self.in_tenant() {
            return Err(ErrorCode::ILLEGAL_TENANT_ACCESS.into());
        }
        Ok(())
    }

    async fn special_writes(&self) -> Result<(Vec<SpecialWrite>, bool), Error> {
        let id = self.flushed_id();
        query(self.driver(), move |c, now| {
            let id = id(c, now);
            c.special_writes(id)
        })
        .await?
        .map_err(Error::Client)
    }
}

// ----- commits -----

/// `ManagementAPIError::toJsonString(false, command, message)`, as json_spirit writes it
/// (keys sorted, `raw_utf8`).
pub(crate) fn api_error(command: &str, message: &str) -> String {
    fn esc(s: &str) -> String {
        let mut out = String::with_capacity(s.len());
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c => out.push(c),
            }
        }
        out
    }
    format!(
        r#"{{"command":"{}","message":"{}","retriable":false}}"#,
        esc(command),
        esc(message)
    )
}

/// An address to exclude (`AddressExclusion`): a whole machine (`port` 0) or one process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct AddressExclusion {
    ip: IpAddr,
    port: u16,
}

impl AddressExclusion {
    /// `AddressExclusion::parse`: an IP alone, or `ip:port` (`[ip]:port` for IPv6); a
    /// `:tls` suffix is refused.
    fn parse(s: &[u8]) -> Option<AddressExclusion> {
        let s = std::str::from_utf8(s).ok()?;
        if let Ok(ip) = s.parse::<IpAddr>() {
            return Some(AddressExclusion { ip, port: 0 });
        }
        let (ip, port) = parse_network_address(s)?;
        if s.ends_with(":tls") {
            return None;
        }
        Some(AddressExclusion { ip, port })
    }

    /// Whether it excludes the process at `ip:port` (`addressExcluded`).
    fn excludes(&self, ip: IpAddr, port: u16) -> bool {
        self.ip == ip && (self.port == 0 || self.port == port)
    }
}

impl std::fmt::Display for AddressExclusion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.ip, self.port) {
            (ip, 0) => write!(f, "{ip}"),
            (IpAddr::V4(ip), port) => write!(f, "{ip}:{port}"),
            (IpAddr::V6(ip), port) => write!(f, "[{ip}]:{port}"),
        }
    }
}

/// `NetworkAddress::parse`: `ip:port`, `[ip6]:port`, either with `:tls` after.
fn parse_network_address(s: &str) -> Option<(IpAddr, u16)> {
    let s = s.split("(fromHostname)").next().unwrap_or(s);
    let s = s.strip_suffix(":tls").unwrap_or(s);
    if let Some(rest) = s.strip_prefix('[') {
        let (ip, port) = rest.split_once("]:")?;
        return Some((ip.parse().ok()?, port.parse().ok()?));
    }
    let (ip, port) = s.rsplit_once(':')?;
    if !port.bytes().all(|b| b.is_ascii_digit()) || port.is_empty() {
        return None;
    }
    Some((IpAddr::V4(ip.parse().ok()?), port.parse().ok()?))
}

/// Fails the commit with `special_keys_api_failure`, leaving `message` in
/// `\xff\xff/error_message`.
async fn api_failure<D: Driver>(tx: &Transaction<D>, msg: String) -> Error {
    if let Err(e) = tx.set_special_error_message(Bytes::from(msg)).await {
        return e;
    }
    ErrorCode::SPECIAL_KEYS_API_FAILURE.into()
}

/// The writes into `[b, e)`.
fn writes_in<'a>(
    writes: &'a [SpecialWrite],
    b: &'a [u8],
    e: &'a [u8],
) -> impl Iterator<Item = &'a SpecialWrite> + 'a {
    writes
        .iter()
        .filter(move |w| b <= w.begin.as_ref() && w.end.as_ref() <= e)
}

/// Carries out the writes into the management parts (all but the tenant module's), in key
/// order, before the commit (`SpecialKeySpace::commit`).
pub(crate) async fn commit_writes<D: Driver>(
    tx: &Transaction<D>,
    writes: &[SpecialWrite],
) -> Result<(), Error> {
    for (pb, pe, part) in PARTS {
        if writes_in(writes, pb, pe).next().is_none() {
            continue;
        }
        let msg = match part {
            Part::Exclusion { failed, locality } => {
                commit_exclusion(tx, writes, (pb, pe), failed, locality).await?
            }
            Part::DbLocked => commit_lock(tx, writes, pb).await?,
            Part::ConsistencyCheck => {
                for o in [
                    TransactionOption::PrioritySystemImmediate,
                    TransactionOption::LockAware,
                    TransactionOption::AccessSystemKeys,
                ] {
                    tx.set_option(o)?;
                }
                let suspended = write_at(writes, pb).is_some_and(|w| w.value.is_some());
                tx.set(CONSISTENCY_CHECK_SUSPENDED_KEY, [u8::from(suspended)]);
                None
            }
            Part::Maintenance => commit_maintenance(tx, writes, (pb, pe)).await?,
            Part::ProcessClass { source: false } => {
                commit_process_class(tx, writes, (pb, pe)).await?
            }
            Part::DataDistribution => commit_data_distribution(tx, writes, (pb, pe)),
            // The options are for the other parts; the tenant module commits on its own.
            Part::Options
            | Part::Tenant
            | Part::Coordinators
            | Part::ProcessClass { source: true }
            | Part::InProgress
            | Part::VersionKey(_)
            | Part::NotServed => None,
        };
        if let Some(msg) = msg {
            return Err(api_failure(tx, msg).await);
        }
    }
    Ok(())
}

/// `excludeCommitActor` / `excludeLocalityCommitActor`, then `includeServers` /
/// `includeLocalities`.
async fn commit_exclusion<D: Driver>(
    tx: &Transaction<D>,
    writes: &[SpecialWrite],
    (pb, pe): (&[u8], &[u8]),
    failed: bool,
    locality: bool,
) -> Result<Option<String>, Error> {
    let command = if failed { "exclude failed" } else { "exclude" };
    let mut addresses = Vec::new();
    let mut localities = Vec::new();
    for w in writes_in(writes, pb, pe).filter(|w| w.value.is_some()) {
        let name = &w.begin[pb.len()..];
        let shown = String::from_utf8_lossy(name);
        if locality {
            if shown.starts_with(LOCALITY_PREFIX) && shown.contains(':') {
                localities.push(shown.into_owned());
            } else {
                let msg = format!("ERROR: '{shown}' is not a valid locality\n");
                return Ok(Some(api_error(command, &msg)));
            }
        } else {
            match AddressExclusion::parse(name) {
                Some(a) => addresses.push(a),
                None => {
                    let mut msg =
                        format!("ERROR: '{shown}' is not a valid network endpoint address\n");
                    if shown.contains(":tls") {
                        msg.push_str(
                            "        Do not include the `:tls' suffix when naming a process\n",
                        );
                    }
                    return Ok(Some(api_error(command, &msg)));
                }
            }
        }
    }
    if locality {
        for o in [
            TransactionOption::RawAccess,
            TransactionOption::PrioritySystemImmediate,
            TransactionOption::LockAware,
        ] {
            tx.set_option(o)?;
        }
    }
    let part = &pb[MANAGEMENT.0.len()..];
    let force_key = [
        b"\xff\xff/management/options/",
        part.strip_suffix(b"/").unwrap_or(part),
        b"/force",
    ]
    .concat();
    let force = write_at(writes, &force_key).is_some_and(|w| w.value.is_some());
    let any = !addresses.is_empty() || !localities.is_empty();
    if any && !force {
        if let Some(msg) = check_exclusion(tx, &addresses, &localities, failed).await? {
            return Ok(Some(msg));
        }
        if failed {
            // `checkSafeExclusions` asks the commit proxies; this client does not.
            return Err(ErrorCode::UNSUPPORTED_OPERATION.into());
        }
    }
    for o in [
        TransactionOption::AccessSystemKeys,
        TransactionOption::PrioritySystemImmediate,
        TransactionOption::LockAware,
        TransactionOption::UseProvisionalProxies,
    ] {
        tx.set_option(o)?;
    }
    let sys_prefix = swap_prefix(pb, MANAGEMENT.0, CONF_PREFIX);
    let sys_end = [&sys_prefix[..sys_prefix.len() - 1], b"0"].concat();
    // `\xff/conf/excluded` and the like: changed with every change of its list.
    let version_key = &sys_prefix[..sys_prefix.len() - 1];
    let existing = tx.get_range(&sys_prefix, &sys_end, 0).await?;
    let known = |name: &[u8]| {
        existing.iter().any(|kv| {
            let have = &kv.key[sys_prefix.len()..];
            if locality {
                have == name
            } else {
                AddressExclusion::parse(have).is_some()
                    && AddressExclusion::parse(have) == AddressExclusion::parse(name)
            }
        })
    };
    let names: Vec<Vec<u8>> = if locality {
        localities.iter().map(|l| l.clone().into_bytes()).collect()
    } else {
        addresses
            .iter()
            .map(|a| a.to_string().into_bytes())
            .collect()
    };
    let mut new = false;
    for name in names.iter().filter(|n| !known(n)) {
        tx.set([&sys_prefix[..], name].concat(), b"");
        new = true;
    }
    if new {
        let (a, b) = random_uid();
        let end = [version_key, b"\x00"].concat();
        tx.add_conflict_range(version_key, &end, ConflictRangeType::Read)?;
        tx.set(version_key, uid_hex(a, b));
    }
    // The includes: the clears.
    for o in [
        TransactionOption::PrioritySystemImmediate,
        TransactionOption::LockAware,
        TransactionOption::UseProvisionalProxies,
        TransactionOption::RawAccess,
        TransactionOption::CausalWriteRisky,
    ] {
        tx.set_option(o)?;
    }
    let (a, b) = random_uid();
    let stamp = uid_hex(a, b);
    for w in writes_in(writes, pb, pe).filter(|w| w.value.is_none()) {
        let end = [version_key, b"\x00"].concat();
        tx.add_conflict_range(version_key, &end, ConflictRangeType::Read)?;
        tx.set(version_key, &stamp);
        let cb = swap_prefix(&w.begin, MANAGEMENT.0, CONF_PREFIX);
        let ce = swap_prefix(&w.end, MANAGEMENT.0, CONF_PREFIX);
        tx.clear_range(cb, ce);
    }
    Ok(None)
}

/// `checkExclusion`: whether excluding `addresses` and `localities` leaves enough space, over
/// the status document. `Some(message)` when it does not (or cannot tell).
async fn check_exclusion<D: Driver>(
    tx: &Transaction<D>,
    addresses: &[AddressExclusion],
    localities: &[String],
    failed: bool,
) -> Result<Option<String>, Error> {
    let command = if failed { "exclude failed" } else { "exclude" };
    let cannot = || cannot_tell(command);
    let doc = submit(tx.driver(), |c, now| c.status_json(now)).await?;
    let Ok(status) = serde_json::from_slice::<serde_json::Value>(&doc.unwrap_or_default()) else {
        return Ok(cannot());
    };
    Ok(exclusion_verdict(&status, addresses, localities, failed))
}

/// `checkExclusion`'s answer when the status document does not tell.
fn cannot_tell(command: &str) -> Option<String> {
    Some(api_error(
        command,
        "ERROR: Could not calculate the impact of this exclude on the total available space in the cluster.\n\
         Please try the exclude again in 30 seconds.\n\
         Call set(\"0xff0xff/management/options/exclude/force\", ...) first to exclude without checking available space.\n",
    ))
}

/// `checkExclusion`'s verdict over a status document (see [`check_exclusion`]).
fn exclusion_verdict(
    status: &serde_json::Value,
    addresses: &[AddressExclusion],
    localities: &[String],
    failed: bool,
) -> Option<String> {
    let command = if failed { "exclude failed" } else { "exclude" };
    let cannot = || cannot_tell(command);
    let Some(processes) = status
        .get("cluster")
        .and_then(|c| c.get("processes"))
        .and_then(|p| p.as_object())
    else {
        return cannot();
    };
    let parsed: Vec<(&str, &str)> = localities
        .iter()
        .filter_map(|l| l.strip_prefix(LOCALITY_PREFIX).unwrap_or(l).split_once(':'))
        .collect();
    let (mut ss_total, mut ss_excluded) = (0u64, 0u64);
    let (mut used, mut free, mut available) = (0i64, 0i64, 0i64);
    let (mut used_kept, mut free_kept) = (0i64, 0i64);
    let mut disks: Vec<String> = Vec::new();
    let int = |v: &serde_json::Value, k: &str| v.get(k).and_then(|x| x.as_i64());
    for process in processes.values() {
        let locality = process.get("locality").and_then(|l| l.as_object());
        let mut excluded = process
            .get("excluded")
            .and_then(|e| e.as_bool())
            .unwrap_or(false);
        if !excluded {
            let Some(addr) = process.get("address").and_then(|a| a.as_str()) else {
                return cannot();
            };
            let Some((ip, port)) = parse_network_address(addr) else {
                return cannot();
            };
            excluded = addresses.iter().any(|a| a.excludes(ip, port));
            if let (false, Some(loc)) = (excluded, locality) {
                excluded = parsed
                    .iter()
                    .any(|(k, v)| loc.get(*k).and_then(|x| x.as_str()) == Some(*v));
            }
        }
        let disk = match locality {
            Some(_) => process
                .get("disk_id")
                .and_then(|d| d.as_str())
                .unwrap_or(""),
            None => "",
        };
        let Some(roles) = process.get("roles").and_then(|r| r.as_array()) else {
            return cannot();
        };
        for role in roles {
            if role.get("role").and_then(|r| r.as_str()) != Some("storage") {
                continue;
            }
            ss_total += 1;
            if excluded {
                ss_excluded += 1;
            }
            let (Some(u), Some(f), Some(a)) = (
                int(role, "kvstore_used_bytes"),
                int(role, "kvstore_free_bytes"),
                int(role, "kvstore_available_bytes"),
            ) else {
                return cannot();
            };
            used += u;
            free += f;
            available += a;
            if !excluded {
                used_kept += u;
                if disk.is_empty() || !disks.iter().any(|d| d == disk) {
                    free_kept += f;
                    if !disk.is_empty() {
                        disks.push(disk.to_owned());
                    }
                }
            }
        }
    }
    if ss_excluded > 0 {
        let ratio = (used + free - available) as f64 / ((used_kept + free_kept) as f64).max(1.0);
        if ss_excluded == ss_total || ratio > 0.9 {
            return Some(api_error(
                command,
                "ERROR: This exclude may cause the total available space in the cluster to drop below 10%.\n\
                 Call set(\"0xff0xff/management/options/exclude/force\", ...) first to exclude without checking available space.\n",
            ));
        }
    }
    None
}

/// `LockDatabaseImpl::commit`: a set locks the database with the UID written (nothing if it
/// holds that lock already), a clear unlocks it.
async fn commit_lock<D: Driver>(
    tx: &Transaction<D>,
    writes: &[SpecialWrite],
    key: &[u8],
) -> Result<Option<String>, Error> {
    let id = write_at(writes, key).and_then(|w| w.value.clone());
    let uid = match &id {
        Some(v) => match parse_uid(v) {
            Some(uid) => Some(uid),
            None => {
                let msg = format!("Invalid UID hex string: {}", String::from_utf8_lossy(v));
                return Ok(Some(api_error("lock", &msg)));
            }
        },
        None => None,
    };
    tx.set_option(TransactionOption::LockAware)?;
    tx.set_option(TransactionOption::AccessSystemKeys)?;
    let held = tx.get(DB_LOCKED_KEY).await?;
    match (uid, held) {
        (Some((a, b)), Some(v)) => {
            if v.get(10..26) != Some(&uid_bytes(a, b)[..]) {
                return Err(ErrorCode::DATABASE_LOCKED.into());
            }
        }
        (Some((a, b)), None) => {
            // The versionstamp goes in front of the UID (`0123456789` holds its place).
            let param = [&b"0123456789"[..], &uid_bytes(a, b), &[0, 0, 0, 0]].concat();
            tx.atomic_op(DB_LOCKED_KEY, param, MutationType::SetVersionstampedValue);
            tx.add_conflict_range(b"", b"\xff", ConflictRangeType::Write)?;
        }
        (None, Some(_)) => tx.clear(DB_LOCKED_KEY),
        (None, None) => {}
    }
    Ok(None)
}

/// `ProcessClass(name, DBSource)`: the class a name stands for (`None`: none, as
/// `InvalidClass`).
fn class_named(name: &[u8]) -> Option<i16> {
    if name == b"proxy" {
        return Some(5);
    }
    // `blob_migrator` has a number but no name.
    CLASS_NAMES
        .iter()
        .position(|n| n.as_bytes() == name && *n != "blob_migrator")
        .map(|i| i as i16)
}

/// `ProcessClassRangeImpl::commit`: each address set to a class (`default`: the one the
/// process was started with), for every worker the address covers.
async fn commit_process_class<D: Driver>(
    tx: &Transaction<D>,
    writes: &[SpecialWrite],
    (pb, pe): (&[u8], &[u8]),
) -> Result<Option<String>, Error> {
    let mut sets = Vec::new();
    for w in writes_in(writes, pb, pe) {
        let Some(v) = &w.value else { continue };
        let name = &w.begin[pb.len()..];
        let Some(addr) = AddressExclusion::parse(name) else {
            let shown = String::from_utf8_lossy(name);
            let mut msg = format!("ERROR: '{shown}' is not a valid network endpoint address\n");
            if shown.contains(":tls") {
                msg.push_str("        Do not include the `:tls' suffix when naming a process\n");
            }
            return Ok(Some(api_error("setclass", &msg)));
        };
        let class = class_named(v);
        if class.is_none() && v.as_ref() != b"default" {
            let msg = format!(
                "ERROR: '{}' is not a valid process class\n",
                String::from_utf8_lossy(v)
            );
            return Ok(Some(api_error("setclass", &msg)));
        }
        sets.push((addr, class));
    }
    for o in [
        TransactionOption::PrioritySystemImmediate,
        TransactionOption::LockAware,
        TransactionOption::UseProvisionalProxies,
        TransactionOption::RawAccess,
        TransactionOption::AccessSystemKeys,
    ] {
        tx.set_option(o)?;
    }
    let list = tx.get_range(WORKER_LIST.0, WORKER_LIST.1, 0).await?;
    let mut workers = Vec::new();
    for kv in &list {
        let (id, class, addr) =
            decode_worker(&kv.value).ok_or(Error::from(ErrorCode::SERIALIZATION_FAILED))?;
        // `getWorkers` leaves the testers out.
        if class.class != TESTER_CLASS {
            workers.push((id, parse_network_address(&addr)));
        }
    }
    for (addr, class) in sets {
        let mut changed = false;
        for (id, at) in &workers {
            let (Some(id), Some((ip, port))) = (id, at) else {
                continue;
            };
            if !addr.excludes(*ip, *port) {
                continue;
            }
            // `processClassKeyFor`: the process id as a length-prefixed string.
            let mut key = PROCESS_CLASSES.0.to_vec();
            key.extend_from_slice(&(id.len() as u32).to_le_bytes());
            key.extend_from_slice(id);
            match class {
                Some(c) => {
                    let mut v = PROCESS_CLASS_VALUE_VERSION.to_le_bytes().to_vec();
                    v.extend_from_slice(&c.to_le_bytes());
                    v.extend_from_slice(&DB_SOURCE.to_le_bytes());
                    tx.set(key, v);
                }
                None => tx.clear(key),
            }
            changed = true;
        }
        if changed {
            let (a, b) = random_uid();
            tx.set(PROCESS_CLASS_CHANGE_KEY, uid_hex(a, b));
        }
    }
    Ok(None)
}

/// `maintenanceCommitActor`: one zone in maintenance for the seconds written, or a clear of
/// the zone in maintenance.
async fn commit_maintenance<D: Driver>(
    tx: &Transaction<D>,
    writes: &[SpecialWrite],
    (pb, pe): (&[u8], &[u8]),
) -> Result<Option<String>, Error> {
    for o in [
        TransactionOption::LockAware,
        TransactionOption::AccessSystemKeys,
        TransactionOption::PrioritySystemImmediate,
    ] {
        tx.set_option(o)?;
    }
    let zone_now = tx
        .get(HEALTHY_ZONE_KEY)
        .await?
        .and_then(|v| decode_healthy_zone(&v));
    let mut set: Option<(Vec<u8>, f64)> = None;
    for w in writes_in(writes, pb, pe) {
        match &w.value {
            Some(v) => {
                if set.is_some() {
                    return Ok(Some(api_error(
                        "maintenance",
                        "Multiple zones given for maintenance, only one allowed at the same time",
                    )));
                }
                let seconds = std::str::from_utf8(v)
                    .ok()
                    .and_then(|s| s.parse::<f64>().ok())
                    // boost::bad_lexical_cast escapes the actor: `unknown_error`.
                    .ok_or(Error::from(ErrorCode::UNKNOWN_ERROR))?;
                set = Some((w.begin[pb.len()..].to_vec(), seconds));
            }
            None => {
                if let (None, Some((zone, _))) = (&set, &zone_now) {
                    let key = [pb, zone].concat();
                    if w.begin.as_ref() <= key.as_slice() && key.as_slice() < w.end.as_ref() {
                        tx.clear(HEALTHY_ZONE_KEY);
                    }
                }
            }
        }
    }
    if let Some((zone, seconds)) = set {
        if zone_now
            .as_ref()
            .is_some_and(|(z, _)| z == IGNORE_SS_FAILURES_ZONE)
        {
            return Ok(Some(api_error(
                "maintenance",
                "Maintenance mode cannot be used while data distribution is disabled for storage server failures.",
            )));
        }
        if seconds < 0.0 {
            let msg = format!(
                "The specified maintenance time {} is a negative value",
                lexical_double(seconds)
            );
            return Ok(Some(api_error("maintenance", &msg)));
        }
        let rv = tx.get_read_version().await?;
        let until = (rv as f64 + seconds * VERSIONS_PER_SECOND as f64) as i64;
        tx.set(HEALTHY_ZONE_KEY, healthy_zone_value(&zone, until));
    }
    Ok(None)
}

/// `boost::lexical_cast<std::string>(double)`: 17 significant digits, as `%.17g` prints.
fn lexical_double(d: f64) -> String {
    if d == d.trunc() && d.abs() < 1e17 {
        return format!("{d:.0}");
    }
    let s = format!("{d:.16e}");
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-5..17).contains(&exp) {
        let digits = (16 - exp).max(0) as usize;
        let fixed = format!("{d:.digits$}");
        let fixed = fixed.trim_end_matches('0').trim_end_matches('.');
        fixed.to_owned()
    } else {
        let m = mantissa.trim_end_matches('0').trim_end_matches('.');
        format!("{m}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
    }
}

/// `DataDistributionImpl::commit`: `mode` to 0, 1 or 2, `rebalance_ignored` to its value;
/// clears clear them.
fn commit_data_distribution<D: Driver>(
    tx: &Transaction<D>,
    writes: &[SpecialWrite],
    (pb, pe): (&[u8], &[u8]),
) -> Option<String> {
    let _ = tx.set_option(TransactionOption::AccessSystemKeys);
    let mode_key = [pb, b"mode"].concat();
    let ignored_key = [pb, b"rebalance_ignored"].concat();
    let single = |w: &SpecialWrite, k: &[u8]| {
        w.begin.as_ref() == k && w.end.len() == k.len() + 1 && w.end.starts_with(k)
    };
    let mut msg = None;
    for w in writes_in(writes, pb, pe) {
        let Some(v) = &w.value else {
            if w.begin.as_ref() <= mode_key.as_slice() && mode_key.as_slice() < w.end.as_ref() {
                tx.clear(DATA_DISTRIBUTION_MODE_KEY);
            } else if w.begin.as_ref() <= ignored_key.as_slice()
                && ignored_key.as_slice() < w.end.as_ref()
            {
                tx.clear(REBALANCE_DD_IGNORE_KEY);
            }
            continue;
        };
        if single(w, &mode_key) {
            match std::str::from_utf8(v).ok().and_then(|s| s.parse::<i32>().ok()) {
                Some(mode @ 0..=2) => {
                    let (a, b) = DATA_DISTRIBUTION_MODE_LOCK;
                    tx.set(MOVE_KEYS_LOCK_OWNER_KEY, uid_bytes(a, b));
                    let (a, b) = random_uid();
                    tx.set(MOVE_KEYS_LOCK_WRITE_KEY, uid_bytes(a, b));
                    tx.set(DATA_DISTRIBUTION_MODE_KEY, mode.to_le_bytes());
                }
                Some(_) => {
                    msg = Some(api_error(
                        "datadistribution",
                        "Please set the value of the data_distribution/mode to 0(disable) or 1(enable), other values are not allowed",
                    ))
                }
                None => {
                    let m = format!(
                        "Invalid datadistribution mode(int): {}",
                        String::from_utf8_lossy(v)
                    );
                    msg = Some(api_error("datadistribution", &m));
                }
            }
        } else if single(w, &ignored_key) {
            tx.set(REBALANCE_DD_IGNORE_KEY, v);
        } else {
            msg = Some(api_error(
                "datadistribution",
                "Changing invalid keys, please read the documentation to check valid keys in the range",
            ));
        }
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_are_json_spirits() {
        assert_eq!(
            api_error("lock", "a \"b\"\n"),
            r#"{"command":"lock","message":"a \"b\"\n","retriable":false}"#
        );
    }

    #[test]
    fn addresses_parse_as_libfdb_c_parses_them() {
        let p = |s: &str| AddressExclusion::parse(s.as_bytes()).map(|a| a.to_string());
        assert_eq!(p("127.0.0.2:4500").as_deref(), Some("127.0.0.2:4500"));
        assert_eq!(p("127.0.0.2").as_deref(), Some("127.0.0.2"));
        assert_eq!(p("[::1]:4500").as_deref(), Some("[::1]:4500"));
        assert_eq!(p("127.0.0.2:4500:tls"), None);
        assert_eq!(p("nonsense"), None);
        assert_eq!(p("1.2.3.4:"), None);
    }

    #[test]
    fn the_space_check_counts_storage_servers_as_check_exclusion_does() {
        let storage = |used: i64, free: i64, available: i64| {
            serde_json::json!({"role": "storage", "kvstore_used_bytes": used,
                "kvstore_free_bytes": free, "kvstore_available_bytes": available})
        };
        let doc = |procs: Vec<(&str, &str, serde_json::Value)>| {
            let mut m = serde_json::Map::new();
            for (i, (addr, zone, role)) in procs.into_iter().enumerate() {
                m.insert(
                    format!("p{i}"),
                    serde_json::json!({"address": addr, "locality": {"zoneid": zone},
                        "roles": [role, {"role": "log"}]}),
                );
            }
            serde_json::json!({"cluster": {"processes": m}})
        };
        let a = |s: &str| AddressExclusion::parse(s.as_bytes()).unwrap();
        let two = doc(vec![
            ("10.0.0.1:4500", "z1", storage(100, 900, 900)),
            ("10.0.0.2:4500:tls", "z2", storage(100, 900, 900)),
        ]);
        // One of two half-empty servers: fine. Both: refused. By locality or machine too.
        assert_eq!(
            exclusion_verdict(&two, &[a("10.0.0.1:4500")], &[], false),
            None
        );
        let both = exclusion_verdict(&two, &[a("10.0.0.1"), a("10.0.0.2:4500")], &[], false);
        assert!(both.unwrap().contains("drop below 10%"));
        let zone = [
            "locality_zoneid:z1".to_owned(),
            "locality_zoneid:z2".to_owned(),
        ];
        assert!(exclusion_verdict(&two, &[], &zone, true)
            .unwrap()
            .starts_with(r#"{"command":"exclude failed""#));
        // Nearly full servers: excluding one leaves too little space.
        let full = doc(vec![
            ("10.0.0.1:4500", "z1", storage(950, 50, 40)),
            ("10.0.0.2:4500", "z2", storage(950, 50, 40)),
        ]);
        assert!(exclusion_verdict(&full, &[a("10.0.0.1:4500")], &[], false).is_some());
        // A role without its space, or no processes: cannot tell.
        let broken = doc(vec![(
            "10.0.0.1:4500",
            "z1",
            serde_json::json!({"role": "storage"}),
        )]);
        let cannot = exclusion_verdict(&broken, &[a("10.0.0.9:1")], &[], false).unwrap();
        assert!(cannot.contains("Could not calculate"));
        assert!(exclusion_verdict(&serde_json::json!({}), &[], &[], false).is_some());
    }

    #[test]
    fn uids_and_zones_round_trip() {
        assert_eq!(parse_uid(uid_hex(1, 0xabc).as_bytes()), Some((1, 0xabc)));
        assert_eq!(parse_uid(b"xyz"), None);
        let v = healthy_zone_value(b"zone", 42);
        assert_eq!(decode_healthy_zone(&v), Some((b"zone".to_vec(), 42)));
        assert_eq!(decode_healthy_zone(&v[..10]), None);
    }

    #[test]
    fn own_writes_hide_and_add_rows_as_ryw_get_range_does() {
        let kv = |k: &str, v: &str| row(k, v);
        let w = |b: &str, e: &str, v: Option<&str>| SpecialWrite {
            begin: Bytes::copy_from_slice(b.as_bytes()),
            end: Bytes::copy_from_slice(e.as_bytes()),
            value: v.map(|v| Bytes::copy_from_slice(v.as_bytes())),
        };
        let read = vec![kv("a", "1"), kv("c", "3"), kv("e", "5")];
        let writes = [
            w("b", "b\0", Some("2")),
            w("c", "d", None),
            w("e", "e\0", Some("new")),
            w("x", "x\0", Some("outside")),
        ];
        let got = with_writes(read, &writes, b"a", b"f");
        assert_eq!(got, [kv("a", "1"), kv("b", "2"), kv("e", "new")]);
    }

    #[test]
    fn process_class_names_parse_as_libfdb_c_parses_them() {
        assert_eq!(class_named(b"storage"), Some(1));
        assert_eq!(class_named(b"proxy"), class_named(b"commit_proxy"));
        assert_eq!(class_named(b"blob_migrator"), None);
        assert_eq!(class_named(b"default"), None);
        let c = ProcessClass {
            class: 17,
            source: 2,
        };
        assert_eq!(
            (c.class_name(), c.source_name()),
            ("grv_proxy", "set_class")
        );
    }

    #[test]
    fn worker_list_values_decode() {
        // A worker of a one-process fdbserver 7.3: machineid, processid, zoneid; unset from
        // the command line; 127.0.0.1:48991.
        let v = b"\x01\x00\x01\x62\xb0\x00\xdb\x0f\x03\x00\x00\x00\x00\x00\x00\x00\
            \x09\x00\x00\x00machineid\x01\x06\x00\x00\x00m48991\
            \x09\x00\x00\x00processid\x01\x20\x00\x00\x00812c15f7c37601a52c67278f4f0fa0d6\
            \x06\x00\x00\x00zoneid\x01\x06\x00\x00\x00z48991\
            \x00\x00\x00\x00\x00\x01\x00\x00\x7f\x5f\xbf\x00\x00";
        let (id, class, addr) = decode_worker(v).unwrap();
        assert_eq!(
            id.as_deref(),
            Some(&b"812c15f7c37601a52c67278f4f0fa0d6"[..])
        );
        assert_eq!(
            (class.class_name(), class.source_name()),
            ("unset", "command_line")
        );
        assert_eq!(addr, "127.0.0.1:48991");
        assert_eq!(decode_worker(&v[..40]), None);
    }

    #[test]
    fn doubles_print_as_boost_prints_them() {
        assert_eq!(lexical_double(-5.0), "-5");
        assert_eq!(lexical_double(-1.5), "-1.5");
        assert_eq!(lexical_double(-0.1), "-0.10000000000000001");
    }

    #[test]
    fn the_parts_not_served_are_holes() {
        let c = covered(MANAGEMENT);
        let at = |k: &[u8]| {
            c.iter()
                .any(|r| r.begin.as_ref() <= k && k < r.end.as_ref())
        };
        assert!(at(b"\xff\xff/management/excluded/1.2.3.4"));
        assert!(at(b"\xff\xff/management/tenant/map/x"));
        assert!(at(b"\xff\xff/management/in_progress_exclusion/x"));
        assert!(!at(b"\xff\xff/management/auto_coordinators"));
        let c = covered(CONFIGURATION);
        let at = |k: &[u8]| {
            c.iter()
                .any(|r| r.begin.as_ref() <= k && k < r.end.as_ref())
        };
        assert!(at(b"\xff\xff/configuration/coordinators/processes"));
        assert!(at(b"\xff\xff/configuration/process/class_type/1.2.3.4:5"));
    }
}
