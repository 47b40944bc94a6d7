//! The one router of the special key space (`\xff\xff` .. `\xff\xff\xff`).
//!
//! Every point read and range read is routed once, here, before anything else looks at its
//! key: a plain key pays one prefix test and goes to the transactions. A special key goes to
//! whoever serves its module:
//!
//! | module | served by |
//! |---|---|
//! | `\xff\xff/management/tenant/` | fdb-api: it reads the tenant map, then hands the rows in ([`SpecialModule::Tenants`]) |
//! | the rest of `\xff\xff/management/`, `\xff\xff/configuration/` | fdb-api: from the system keys, then the rows are handed in ([`SpecialModule::Management`]) |
//! | `\xff\xff/status/json` | the status read ([`Client::status_json`]) |
//! | `\xff\xff/cluster_id`, `metrics/`, `worker_interfaces/` | a part that asks the cluster (`crate::special_cluster`) |
//! | `\xff\xff/global_config/` | the global configuration view (`crate::global_config`) |
//! | the transaction module, connection string, cluster file path, error message, tracing | the transaction's own state (`crate::transaction`'s `special.rs`) |
//!
//! The first two need reads of the database, so only the async API layer can serve them; it
//! asks [`route_key`] / [`route_range`] and passes the answer on to
//! [`Client::get_routed`] / [`Client::get_range_routed`], so the key is tested once in all.

use alloc::vec::Vec;
use bytes::Bytes;

use super::{Call, Client, Outcome};
use crate::error::ErrorCode;
use crate::event::{ClientError, RangeResult};
use crate::ids::TransactionId;
use crate::messages::types::{KeyRange, KeySelector, KeyValue};
use crate::time::Instant;
use crate::transaction::TENANT_MANAGEMENT_RANGE;
use crate::transaction::{
    is_special_key, is_special_range, RangeOptions, SpecialRead, SpecialWrite,
};

/// Who serves a special key's module (see the table above).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpecialModule {
    /// `\xff\xff/management/tenant/`: the API layer reads the tenant map first.
    Tenants,
    /// The management and configuration modules: the API layer reads their system keys first.
    Management,
    /// Everything else in the space: this client answers it.
    Client,
}

/// `\xff\xff/management/`, `\xff\xff/configuration/`: the modules served from system keys.
const SYSTEM_KEY_MODULES: [(&[u8], &[u8]); 2] = [
    (b"\xff\xff/management/", b"\xff\xff/management0"),
    (b"\xff\xff/configuration/", b"\xff\xff/configuration0"),
];

/// The management or configuration module holding `key`.
pub fn system_key_module(key: &[u8]) -> Option<(&'static [u8], &'static [u8])> {
    SYSTEM_KEY_MODULES
        .into_iter()
        .find(|(b, e)| *b <= key && key < *e)
}

/// Where a point read of `key` goes: `None` for a plain key (one prefix test).
pub fn route_key(key: &[u8]) -> Option<SpecialModule> {
    if !is_special_key(key) {
        return None;
    }
    let (tb, te) = TENANT_MANAGEMENT_RANGE;
    Some(if tb <= key && key < te {
        SpecialModule::Tenants
    } else if system_key_module(key).is_some() {
        SpecialModule::Management
    } else {
        SpecialModule::Client
    })
}

/// Where a range read between two selectors goes: `None` when it begins at a plain key.
///
/// The tenant module takes only plain-key selectors inside it (a selector that is no plain
/// key may walk out into the rest of the management module, which then reads every part it
/// may reach); the management and configuration modules take a read whose end stays inside
/// the module its begin is in.
pub fn route_range(begin: &KeySelector, end: &KeySelector) -> Option<SpecialModule> {
    if !is_special_key(&begin.key) {
        return None;
    }
    let (tb, te) = TENANT_MANAGEMENT_RANGE;
    let (b, e) = (begin.key.as_ref(), end.key.as_ref());
    let plain = begin.offset == 1 && end.offset == 1;
    if plain && tb <= b && b < te && tb <= e && e <= te {
        return Some(SpecialModule::Tenants);
    }
    Some(match system_key_module(b) {
        Some((mb, me)) if mb <= e && e <= me => SpecialModule::Management,
        _ => SpecialModule::Client,
    })
}

impl Client {
    /// [`Client::get`] with the key already routed: `module` must be [`route_key`]`(key)`.
    /// A module the API layer serves, reaching here without its rows, reads as the special
    /// key space reads a module it does not serve.
    pub fn get_routed(
        &mut self,
        now: Instant,
        tx: TransactionId,
        key: &[u8],
        snapshot: bool,
        module: Option<SpecialModule>,
    ) -> Call<Option<Bytes>> {
        if module.is_some() {
            if key == crate::status::STATUS_JSON_KEY && self.txs.exists(tx) {
                return self.status_json(now);
            }
            self.refresh_special();
            let read = SpecialRead::Get(Bytes::copy_from_slice(key));
            if let Some(call) = self.cluster_module_read(now, tx, read) {
                return call;
            }
            return self.call(now, |txs, cx| txs.special_get_op(cx, tx, key, snapshot));
        }
        self.call(now, |txs, cx| txs.get(cx, tx, key, snapshot))
    }

    /// [`Client::get_range`] with the read already routed: `module` must be
    /// [`route_range`]`(&begin, &end)`.
    // `get_range`'s arguments and its route: the door a caller that routed already takes.
    #[allow(clippy::too_many_arguments)]
    pub fn get_range_routed(
        &mut self,
        now: Instant,
        tx: TransactionId,
        begin: KeySelector,
        end: KeySelector,
        opts: RangeOptions,
        snapshot: bool,
        module: Option<SpecialModule>,
    ) -> Call<RangeResult> {
        if module.is_some() {
            self.refresh_special();
            let read = SpecialRead::Range(begin.clone(), end.clone(), opts);
            if let Some(call) = self.cluster_module_read(now, tx, read) {
                return call;
            }
            // A read whose end leaves the space is no special read: it fails as any read
            // past the legal keys does.
            if is_special_range(&begin.key, &end.key) {
                return self.call(now, |txs, cx| {
                    txs.special_range_op(cx, tx, begin, end, opts, snapshot)
                });
            }
        }
        self.call(now, |txs, cx| {
            txs.get_range(cx, tx, begin, end, opts, snapshot)
        })
    }

    /// The special keys show the connection string in use (it changes with forwards).
    pub(super) fn refresh_special(&mut self) {
        let cs = alloc::string::ToString::to_string(self.monitor.cluster());
        if self.txs.special.connection_string != cs.as_bytes() {
            self.txs.special.connection_string = Bytes::from(cs);
        }
    }

    /// A special-key read of a module filled from the cluster (`\xff\xff/cluster_id`, the
    /// metrics, the worker interfaces, the global configuration): asks the cluster, then
    /// answers from the transaction's special key space (see `special_cluster`,
    /// `global_config`). `None`: not such a read.
    pub(super) fn cluster_module_read<T: Outcome>(
        &mut self,
        now: Instant,
        tx: TransactionId,
        read: SpecialRead,
    ) -> Option<Call<T>> {
        let global_config = crate::global_config::is_module_read(&read);
        // Only `\xff\xff/cluster_id` supports tenants (`supportsTenants`).
        let in_tenants = match crate::special_cluster::cluster_read(&read) {
            _ if global_config => false,
            Some((module, _)) => module.0 == crate::special_cluster::CLUSTER_ID_KEY,
            None => return None,
        };
        if !self.txs.exists(tx) {
            return None;
        }
        if self.txs.in_tenant(tx) && !in_tenants {
            return Some(self.refused(now, ErrorCode::ILLEGAL_TENANT_ACCESS));
        }
        Some(self.start_part(now, |parts, req| match global_config {
            true => parts.global_config.start(req, tx, read),
            false => {
                parts.cluster_reads.start(req, tx, &read);
            }
        }))
    }

    /// Where the connection record is, shown at `\xff\xff/cluster_file_path`: the path of
    /// the cluster file the database was opened from, or (`None`, opened from a connection
    /// string) the id of libfdb_c's memory record, a random UID
    /// (`ClusterConnectionMemoryRecord`'s `randomUniqueID()`, as `UID::toString` writes it).
    pub fn set_cluster_file_path(&mut self, path: Option<&str>) {
        let location = match path {
            Some(p) => Bytes::copy_from_slice(p.as_bytes()),
            None => Bytes::from(alloc::string::ToString::to_string(&self.rng.uid())),
        };
        self.txs.special.cluster_file_path = Some(location);
    }

    /// A special-key range read that reaches the tenant module
    /// (`\xff\xff/management/tenant/`), answered with `tenants`: the module's rows as the
    /// caller read them from the database (each `\xff\xff/management/tenant/map/<name>` and
    /// the tenant's JSON, as libfdb_c's `TenantRangeImpl` builds them). Selectors, limits and
    /// direction apply as to any special-key read.
    // `get_range`'s arguments and the rows: a door of its own, one line over `get_range_with_rows`.
    pub fn get_range_with_tenants(
        &mut self,
        now: Instant,
        tx: TransactionId,
        begin: KeySelector,
        end: KeySelector,
        opts: RangeOptions,
        tenants: Vec<KeyValue>,
    ) -> Call<RangeResult> {
        let covered = alloc::vec![tenant_module()];
        self.get_range_with_rows(now, tx, begin, end, opts, tenants, covered)
    }

    /// A special-key range read in the management or configuration module
    /// (`\xff\xff/management/`, `\xff\xff/configuration/`) answered with `rows`: the
    /// module's rows in `covered` as the caller read them from the database (each part as
    /// libfdb_c's module for it builds them). A read reaching a part of those modules outside
    /// `covered` fails with `special_keys_no_module_found`; selectors, limits and direction
    /// apply as to any special-key read.
    #[allow(clippy::too_many_arguments)]
    pub fn get_range_with_rows(
        &mut self,
        now: Instant,
        tx: TransactionId,
        begin: KeySelector,
        end: KeySelector,
        opts: RangeOptions,
        rows: Vec<KeyValue>,
        covered: Vec<KeyRange>,
    ) -> Call<RangeResult> {
        self.refresh_special();
        let read = SpecialRead::Range(begin, end, opts);
        self.call(now, |txs, cx| {
            txs.special_read_with_rows(cx, tx, read, &rows, &covered)
        })
    }

    /// A special-key point read answered with rows of the management or configuration module
    /// (see [`Client::get_range_with_rows`]).
    pub fn get_with_rows(
        &mut self,
        now: Instant,
        tx: TransactionId,
        key: &[u8],
        rows: Vec<KeyValue>,
        covered: Vec<KeyRange>,
    ) -> Call<Option<Bytes>> {
        self.refresh_special();
        let read = SpecialRead::Get(Bytes::copy_from_slice(key));
        self.call(now, |txs, cx| {
            txs.special_read_with_rows(cx, tx, read, &rows, &covered)
        })
    }

    /// The special-key writes `tx` holds (left in place), and whether the transaction reads
    /// its own writes: the management modules show them in their reads.
    pub fn special_writes(
        &self,
        tx: TransactionId,
    ) -> Result<(Vec<SpecialWrite>, bool), ClientError> {
        self.txs.special_writes(tx)
    }

    /// A special-key point read answered with the tenant module's rows (see
    /// [`Client::get_range_with_tenants`]).
    pub fn get_with_tenants(
        &mut self,
        now: Instant,
        tx: TransactionId,
        key: &[u8],
        tenants: Vec<KeyValue>,
    ) -> Call<Option<Bytes>> {
        let covered = alloc::vec![tenant_module()];
        self.get_with_rows(now, tx, key, tenants, covered)
    }

    /// The writes into the special key space's write modules this client serves (the
    /// tenant module and the management parts, with `special_key_space_enable_writes`), taken
    /// out of the transaction: a driver carries them
    /// out as ordinary writes before it commits, as libfdb_c's `SpecialKeySpace::commit`
    /// does. A commit that still holds some fails with `unsupported_operation`.
    pub fn take_special_writes(
        &mut self,
        tx: TransactionId,
    ) -> Result<Vec<SpecialWrite>, ClientError> {
        self.txs.take_special_writes(tx)
    }

    /// Sets what `\xff\xff/error_message` reads until the transaction is reset: why a
    /// special-key commit failed with `special_keys_api_failure`.
    pub fn set_special_error_message(&mut self, tx: TransactionId, msg: Bytes) {
        self.txs.set_special_error(tx, msg);
    }
}

/// `\xff\xff/management/tenant/`, as a range.
fn tenant_module() -> KeyRange {
    let (b, e) = crate::transaction::TENANT_MANAGEMENT_RANGE;
    KeyRange {
        begin: Bytes::from_static(b),
        end: Bytes::from_static(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(key: &[u8]) -> KeySelector {
        KeySelector::first_greater_or_equal(Bytes::copy_from_slice(key))
    }

    #[test]
    fn a_point_read_goes_to_its_module() {
        assert_eq!(route_key(b"apple"), None);
        assert_eq!(route_key(b"\xff/conf/x"), None);
        assert_eq!(route_key(b"\xff\xff\xff"), None);
        let tenants = route_key(b"\xff\xff/management/tenant/map/a");
        assert_eq!(tenants, Some(SpecialModule::Tenants));
        let lock = route_key(b"\xff\xff/management/db_locked");
        assert_eq!(lock, Some(SpecialModule::Management));
        let conf = route_key(b"\xff\xff/configuration/coordinators/processes");
        assert_eq!(conf, Some(SpecialModule::Management));
        for key in [
            &b"\xff\xff/status/json"[..],
            b"\xff\xff/transaction/x",
            b"\xff\xff",
        ] {
            assert_eq!(route_key(key), Some(SpecialModule::Client));
        }
    }

    #[test]
    fn a_range_read_goes_where_its_begin_and_end_allow() {
        assert_eq!(route_range(&sel(b"a"), &sel(b"\xff\xff/x")), None);
        let map = (
            sel(b"\xff\xff/management/tenant/map/"),
            sel(b"\xff\xff/management/tenant/map0"),
        );
        assert_eq!(route_range(&map.0, &map.1), Some(SpecialModule::Tenants));
        // A selector that is no plain key may leave the tenant module.
        let last = KeySelector::last_less_than(map.0.key.clone());
        let walked = route_range(&last, &map.1);
        assert_eq!(walked, Some(SpecialModule::Management));
        let whole = route_range(&sel(b"\xff\xff/management/"), &sel(b"\xff\xff/management0"));
        assert_eq!(whole, Some(SpecialModule::Management));
        // Across two modules: the core's space decides (it refuses a cross-module read).
        let across = route_range(
            &sel(b"\xff\xff/management/"),
            &sel(b"\xff\xff/transaction0"),
        );
        assert_eq!(across, Some(SpecialModule::Client));
    }
}
