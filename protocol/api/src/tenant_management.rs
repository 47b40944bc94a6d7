//! Tenant management, as the Python binding's `fdb.tenant_management` and fdbcli's `tenant`
//! commands offer it: create, delete, list, get and configure tenants (tenant groups) and
//! lock them, on a cluster whose `tenant_mode` allows them.
//!
//! libfdb_c does this through its `\xff\xff/management/tenant/map/<name>` special keys, a
//! client-side module that turns the writes into `TenantAPI::createTenantTransaction` /
//! `deleteTenantTransaction` (`fdbclient/TenantManagement.actor.h`, 7.3). Those special keys
//! work here too (through any transaction with `special_key_space_enable_writes`); these
//! functions are what their commit runs. They write the same system keys libfdb_c does, in one
//! transaction with `access_system_keys`:
//! `\xff/tenant/map/<id as 8 big-endian bytes>` (the `TenantMapEntry`),
//! `\xff/tenant/nameIndex/<tuple(name)>` = `tuple(id)`, `\xff/tenant/lastId` = `tuple(id)`,
//! `\xff/tenant/count` (a little-endian counter, `add`), and `\xff/tenant/lastModification`
//! (a versionstamp); a tenant in a group adds `\xff/tenant/tenantGroup/tenantIndex/<tuple(group,
//! id)>` (7.4: `tuple(group, name, id)`) and, for the group's first tenant, `\xff/tenant/tenantGroup/map/<group>` (see
//! [`fdb_protocol::tenant_map`]). The commit proxies and storage servers learn the tenant from
//! those mutations.
//!
//! Listing gives what libfdb_c's `\xff\xff/management/tenant/map/` range read gives: one row
//! per tenant, its key `\xff\xff/management/tenant/map/<name>` and its value the tenant's JSON,
//! byte for byte as libfdb_c 7.3 renders it (`{"id":..,"lock_state":..,"name":..,"prefix":..}`
//! plus `lock_id` and `tenant_group` when present), with the typed [`TenantEntry`] alongside.

use bytes::Bytes;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::tenant_map::{
    TenantGroupEntry, TENANT_COUNT_KEY, TENANT_GROUP_INDEX_PREFIX, TENANT_GROUP_MAP_PREFIX,
    TENANT_LAST_ID_KEY, TENANT_LAST_MODIFICATION_KEY, TENANT_MAP_PREFIX, TENANT_MAP_SPECIAL_PREFIX,
    TENANT_NAME_INDEX_PREFIX,
};
use fdb_protocol::version::Protocol;
use fdb_protocol::{tenant_prefix, tuple, MutationType, TransactionOption, Uid};

pub use fdb_protocol::tenant_map::{TenantEntry, TenantLockState};

use crate::database::Database;
use crate::driver::Driver;
use crate::error::Error;
use crate::transaction::Transaction;

const TENANT_MAP: &[u8] = TENANT_MAP_PREFIX;
const NAME_INDEX: &[u8] = TENANT_NAME_INDEX_PREFIX;
const LAST_ID: &[u8] = TENANT_LAST_ID_KEY;
const COUNT: &[u8] = TENANT_COUNT_KEY;
const LAST_MODIFICATION: &[u8] = TENANT_LAST_MODIFICATION_KEY;
const TENANT_MODE: &[u8] = b"\xff/conf/tenant_mode";

fn key(prefix: &[u8], rest: &[u8]) -> Vec<u8> {
    let mut k = prefix.to_vec();
    k.extend_from_slice(rest);
    k
}

fn name_key(name: &[u8]) -> Vec<u8> {
    key(NAME_INDEX, &tuple::pack(&(name.to_vec(),)))
}

fn decode_id(v: &[u8]) -> Result<i64, Error> {
    tuple::unpack::<(i64,)>(v)
        .map(|(id,)| id)
        .map_err(|_| Error::from(ErrorCode::INTERNAL_ERROR))
}

fn check_name(name: &[u8]) -> Result<(), Error> {
    if name.first() == Some(&0xff) {
        return Err(ErrorCode::INVALID_TENANT_NAME.into());
    }
    Ok(())
}

/// `checkTenantMode`: an absent or `0` tenant mode means tenants are disabled.
pub(crate) async fn check_tenant_mode<D: Driver>(tx: &Transaction<D>) -> Result<(), Error> {
    match tx.get(TENANT_MODE).await? {
        None => Err(ErrorCode::TENANTS_DISABLED.into()),
        Some(v) if v.as_ref() == b"0" => Err(ErrorCode::TENANTS_DISABLED.into()),
        Some(_) => Ok(()),
    }
}

/// Whether anything is stored under the prefix of tenant `id`.
async fn prefix_used<D: Driver>(tx: &Transaction<D>, id: i64) -> Result<bool, Error> {
    let p = tenant_prefix(id);
    let mut end = p.to_vec();
    // The prefix's strinc (an id is never all 0xff bytes: ids are positive).
    while end.last() == Some(&0xff) {
        end.pop();
    }
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    Ok(!tx.get_range(p, end, 1).await?.is_empty())
}

fn stamp_modification<D: Driver>(tx: &Transaction<D>) {
    // The ten bytes the versionstamp replaces, as libfdb_c fills them (a default
    // `Versionstamp`: version -1, batch 0), then their offset (0).
    let mut v = vec![0xffu8; 8];
    v.extend_from_slice(&[0, 0]);
    v.extend_from_slice(&0u32.to_le_bytes());
    tx.atomic_op(LAST_MODIFICATION, v, MutationType::SetVersionstampedValue);
}

fn internal<T>(_: T) -> Error {
    Error::from(ErrorCode::INTERNAL_ERROR)
}

/// A tenant's configuration: what `\xff\xff/management/tenant/configure/<tuple(name,
/// param)>` sets in libfdb_c (7.3 knows one parameter, `tenant_group`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TenantConfig {
    /// The tenant group (`None`: no group). A group exists while it has tenants; its name may
    /// not start with `\xff` (`invalid_tenant_group_name`, 2139).
    pub tenant_group: Option<Bytes>,
}

impl TenantConfig {
    /// A configuration putting the tenant in `group`.
    pub fn group(group: impl AsRef<[u8]>) -> Self {
        TenantConfig {
            tenant_group: Some(Bytes::copy_from_slice(group.as_ref())),
        }
    }
}

/// One row of a tenant listing, as libfdb_c's `\xff\xff/management/tenant/map/` range read
/// gives it (and `fdb.tenant_management.list_tenants` yields it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TenantRow {
    /// `\xff\xff/management/tenant/map/<name>`.
    pub key: Bytes,
    /// The tenant's JSON, as libfdb_c renders it.
    pub value: Bytes,
    /// The tenant, typed.
    pub entry: TenantEntry,
}

impl TenantRow {
    fn new(entry: TenantEntry) -> Self {
        TenantRow {
            key: Bytes::from(key(TENANT_MAP_SPECIAL_PREFIX, &entry.name)),
            value: Bytes::from(entry.to_json().into_bytes()),
            entry,
        }
    }

    /// The tenant's name.
    pub fn name(&self) -> &[u8] {
        &self.entry.name
    }

    /// The tenant's id.
    pub fn id(&self) -> i64 {
        self.entry.id
    }
}

fn check_group(config: &TenantConfig) -> Result<(), Error> {
    if config
        .tenant_group
        .as_ref()
        .is_some_and(|g| g.first() == Some(&0xff))
    {
        return Err(ErrorCode::INVALID_TENANT_GROUP_NAME.into());
    }
    Ok(())
}

/// A tenant's key in its group's index: `(group, id)` in 7.3; 7.4 puts the tenant's name
/// between them (`tenantGroupTenantIndex`), so the index lists a group's tenants by name.
fn group_index_key(group: &[u8], name: &[u8], id: i64, protocol: Protocol) -> Vec<u8> {
    let t = if protocol.tenant_group_index_has_name() {
        tuple::pack(&(group.to_vec(), name.to_vec(), id))
    } else {
        tuple::pack(&(group.to_vec(), id))
    };
    key(TENANT_GROUP_INDEX_PREFIX, &t)
}

/// The protocol the client speaks (the cluster's), which decides the system keys' layout.
async fn protocol<D: Driver>(tx: &Transaction<D>) -> Result<Protocol, Error> {
    crate::driver::query(tx.driver(), |c, _| c.protocol()).await
}

/// Reads the entry of tenant `id` (`None` if the map has none).
async fn entry_by_id<D: Driver>(
    tx: &Transaction<D>,
    id: i64,
) -> Result<Option<TenantEntry>, Error> {
    match tx.get(key(TENANT_MAP, &tenant_prefix(id))).await? {
        None => Ok(None),
        Some(v) => TenantEntry::from_map_value(&v).map(Some).map_err(internal),
    }
}

/// The tenant named `name` (`tryGetTenantTransaction`).
async fn entry_by_name<D: Driver>(
    tx: &Transaction<D>,
    name: &[u8],
) -> Result<Option<TenantEntry>, Error> {
    match tx.get(name_key(name)).await? {
        None => Ok(None),
        Some(v) => entry_by_id(tx, decode_id(&v)?).await,
    }
}

/// Puts tenant `id` into `group`'s index, creating the group if it has no entry yet.
async fn join_group<D: Driver>(
    tx: &Transaction<D>,
    group: &[u8],
    name: &[u8],
    id: i64,
) -> Result<(), Error> {
    tx.set(group_index_key(group, name, id, protocol(tx).await?), b"");
    let gk = key(TENANT_GROUP_MAP_PREFIX, group);
    if tx.get(&gk).await?.is_none() {
        tx.set(gk, TenantGroupEntry::default().encode_value());
    }
    Ok(())
}

/// Takes tenant `id` out of `group`'s index, and drops the group once it has no other tenant.
async fn leave_group<D: Driver>(
    tx: &Transaction<D>,
    group: &[u8],
    name: &[u8],
    id: i64,
) -> Result<(), Error> {
    let own = group_index_key(group, name, id, protocol(tx).await?);
    tx.clear(&own);
    let begin = key(TENANT_GROUP_INDEX_PREFIX, &tuple::pack(&(group.to_vec(),)));
    let mut after = group.to_vec();
    after.push(0);
    let end = key(TENANT_GROUP_INDEX_PREFIX, &tuple::pack(&(after,)));
    let rows = tx.get_range(begin, end, 2).await?;
    let others = rows
        .iter()
        .filter(|kv| kv.key.as_ref() != own.as_slice())
        .count();
    if others == 0 {
        tx.clear(key(TENANT_GROUP_MAP_PREFIX, group));
    }
    Ok(())
}

/// Creates a tenant in transaction `tx` (`createTenantTransaction`): returns `false` if a
/// tenant of that name exists already (nothing written).
pub async fn create_tenant_in<D: Driver>(tx: &Transaction<D>, name: &[u8]) -> Result<bool, Error> {
    create_tenant_with_in(tx, name, &TenantConfig::default()).await
}

/// [`create_tenant_in`] with a configuration (a tenant group): `invalid_tenant_group_name`
/// (2139) for a group starting with `\xff`.
pub async fn create_tenant_with_in<D: Driver>(
    tx: &Transaction<D>,
    name: &[u8],
    config: &TenantConfig,
) -> Result<bool, Error> {
    check_name(name)?;
    check_group(config)?;
    tx.set_option(TransactionOption::AccessSystemKeys)?;
    check_tenant_mode(tx).await?;
    if tx.get(name_key(name)).await?.is_some() {
        return Ok(false);
    }
    let last = match tx.get(LAST_ID).await? {
        Some(v) => decode_id(&v)?,
        None => 0,
    };
    let id = last + 1;
    if prefix_used(tx, id).await? {
        return Err(ErrorCode::TENANT_PREFIX_ALLOCATOR_CONFLICT.into());
    }
    let mut entry = TenantEntry::new(id, Bytes::copy_from_slice(name));
    entry.tenant_group = config.tenant_group.clone();
    tx.set(key(TENANT_MAP, &tenant_prefix(id)), entry.to_map_value());
    tx.set(name_key(name), tuple::pack(&(id,)));
    tx.set(LAST_ID, tuple::pack(&(id,)));
    if let Some(g) = &config.tenant_group {
        join_group(tx, g, name, id).await?;
    }
    tx.atomic_op(COUNT, 1i64.to_le_bytes(), MutationType::Add);
    stamp_modification(tx);
    // The count read back after the increment (so that several creations in one transaction
    // add up), against `MAX_TENANTS_PER_CLUSTER`.
    let count = tx.get(COUNT).await?.map_or(0, |v| decode_count(&v));
    if count > MAX_TENANTS_PER_CLUSTER {
        return Err(ErrorCode::CLUSTER_NO_CAPACITY.into());
    }
    Ok(true)
}

/// `MAX_TENANTS_PER_CLUSTER` (client knob, 7.3): more tenants fail with `cluster_no_capacity`.
pub const MAX_TENANTS_PER_CLUSTER: i64 = 1_000_000;

/// `\xff/tenant/count`: a little-endian counter (shorter values are zero-extended, as the
/// `add` atomic op reads them).
fn decode_count(v: &[u8]) -> i64 {
    let mut b = [0u8; 8];
    let n = v.len().min(8);
    b[..n].copy_from_slice(&v[..n]);
    i64::from_le_bytes(b)
}

/// Renames tenant `old` to `new` in `tx` (`renameTenantTransaction`, what a write of `new`
/// to `\xff\xff/management/tenant/rename/<old>` does in libfdb_c, and fdbcli's `tenant
/// rename`): `tenant_not_found` (2131) if there is no tenant `old`, `tenant_already_exists`
/// (2132) if `new` is taken. The tenant keeps its id, so its data and prefix stay.
pub async fn rename_tenant_in<D: Driver>(
    tx: &Transaction<D>,
    old: &[u8],
    new: &[u8],
) -> Result<(), Error> {
    tx.set_option(TransactionOption::AccessSystemKeys)?;
    check_tenant_mode(tx).await?;
    let Some(v) = tx.get(name_key(old)).await? else {
        return Err(ErrorCode::TENANT_NOT_FOUND.into());
    };
    let id = decode_id(&v)?;
    let mut entry = entry_by_id(tx, id)
        .await?
        .ok_or(Error::from(ErrorCode::TENANT_NOT_FOUND))?;
    if entry.name.as_ref() != old {
        return Err(ErrorCode::TENANT_NOT_FOUND.into());
    }
    if tx.get(name_key(new)).await?.is_some() {
        return Err(ErrorCode::TENANT_ALREADY_EXISTS.into());
    }
    entry.name = Bytes::copy_from_slice(new);
    tx.set(key(TENANT_MAP, &tenant_prefix(id)), entry.to_map_value());
    tx.set(name_key(new), tuple::pack(&(id,)));
    tx.clear(name_key(old));
    if let Some(g) = &entry.tenant_group {
        // 7.4's group index holds the name: the entry moves with it.
        let p = protocol(tx).await?;
        if p.tenant_group_index_has_name() {
            tx.clear(group_index_key(g, old, id, p));
            tx.set(group_index_key(g, new, id, p), b"");
        }
    }
    stamp_modification(tx);
    Ok(())
}

/// Deletes a tenant in transaction `tx` (`deleteTenantTransaction`): returns `false` if no
/// tenant has that name; fails with `tenant_not_empty` (2133) if it still holds keys. The
/// last tenant of a group takes the group with it.
pub async fn delete_tenant_in<D: Driver>(tx: &Transaction<D>, name: &[u8]) -> Result<bool, Error> {
    check_name(name)?;
    tx.set_option(TransactionOption::AccessSystemKeys)?;
    check_tenant_mode(tx).await?;
    let Some(v) = tx.get(name_key(name)).await? else {
        return Ok(false);
    };
    let id = decode_id(&v)?;
    let entry = entry_by_id(tx, id).await?;
    if prefix_used(tx, id).await? {
        return Err(ErrorCode::TENANT_NOT_EMPTY.into());
    }
    tx.clear(key(TENANT_MAP, &tenant_prefix(id)));
    tx.clear(name_key(name));
    tx.atomic_op(COUNT, (-1i64).to_le_bytes(), MutationType::Add);
    stamp_modification(tx);
    if let Some(g) = entry.and_then(|e| e.tenant_group) {
        leave_group(tx, &g, name, id).await?;
    }
    Ok(true)
}

/// Writes `updated` over `original` (`configureTenantTransaction`), moving the tenant between
/// groups when its group changed.
async fn rewrite_entry<D: Driver>(
    tx: &Transaction<D>,
    original: &TenantEntry,
    updated: &TenantEntry,
) -> Result<(), Error> {
    tx.set(
        key(TENANT_MAP, &tenant_prefix(updated.id)),
        updated.to_map_value(),
    );
    stamp_modification(tx);
    if original.tenant_group != updated.tenant_group {
        if let Some(g) = &original.tenant_group {
            leave_group(tx, g, &original.name, updated.id).await?;
        }
        if let Some(g) = &updated.tenant_group {
            join_group(tx, g, &updated.name, updated.id).await?;
        }
    }
    Ok(())
}

/// Sets tenant `name`'s configuration in `tx` (what libfdb_c does for a write to
/// `\xff\xff/management/tenant/configure/<tuple(name, "tenant_group")>`, or fdbcli's `tenant
/// configure`): `tenant_not_found` (2131) if there is no such tenant,
/// `invalid_tenant_group_name` (2139) for a group starting with `\xff`. Moving a tenant to
/// another group is allowed on a standalone cluster; a group left empty is removed.
pub async fn configure_tenant_in<D: Driver>(
    tx: &Transaction<D>,
    name: &[u8],
    config: &TenantConfig,
) -> Result<(), Error> {
    configure_tenant_by_in(tx, name, |_| Ok(config.clone())).await
}

/// [`configure_tenant_in`] with the configuration made from the tenant's current group (the
/// tenant module's `configure/` writes name parameters, not a whole configuration): the
/// entry is read once.
pub(crate) async fn configure_tenant_by_in<D: Driver>(
    tx: &Transaction<D>,
    name: &[u8],
    config_of: impl FnOnce(Option<Bytes>) -> Result<TenantConfig, Error>,
) -> Result<(), Error> {
    tx.set_option(TransactionOption::AccessSystemKeys)?;
    check_tenant_mode(tx).await?;
    let Some(original) = entry_by_name(tx, name).await? else {
        return Err(ErrorCode::TENANT_NOT_FOUND.into());
    };
    let config = &config_of(original.tenant_group.clone())?;
    check_group(config)?;
    let mut updated = original.clone();
    updated.tenant_group = config.tenant_group.clone();
    rewrite_entry(tx, &original, &updated).await
}

/// Changes tenant `name`'s lock state in `tx` (`TenantAPI::changeLockState`, as fdbcli's
/// `tenant lock` / `tenant unlock` run it): `tenant_not_found` (2131) if there is no such
/// tenant, `tenant_locked` (2144) if it is locked under another `lock_id` (also to unlock
/// it). Unlocking drops the lock id. Nothing is written if the tenant is already in that state
/// under that id.
pub async fn change_lock_state_in<D: Driver>(
    tx: &Transaction<D>,
    name: &[u8],
    state: TenantLockState,
    lock_id: Uid,
) -> Result<(), Error> {
    tx.set_option(TransactionOption::AccessSystemKeys)?;
    check_tenant_mode(tx).await?;
    let Some(original) = entry_by_name(tx, name).await? else {
        return Err(ErrorCode::TENANT_NOT_FOUND.into());
    };
    if original.lock_id == Some(lock_id) && original.lock_state == state {
        return Ok(());
    }
    if original.lock_id.is_some_and(|l| l != lock_id) {
        return Err(ErrorCode::TENANT_LOCKED.into());
    }
    // (`checkLockState`: unlocking a tenant that has no lock id rewrites it unchanged.)
    let mut updated = original.clone();
    updated.lock_state = state;
    updated.lock_id = (state != TenantLockState::Unlocked).then_some(lock_id);
    rewrite_entry(tx, &original, &updated).await
}

/// Tenants with names in `[begin, end)`, at most `limit` (0: all), in name order, read in `tx`
/// (`listTenantMetadataTransaction`).
pub async fn list_tenants_in<D: Driver>(
    tx: &Transaction<D>,
    begin: &[u8],
    end: &[u8],
    limit: usize,
) -> Result<Vec<TenantRow>, Error> {
    tx.set_option(TransactionOption::ReadSystemKeys)?;
    let rows = tx.get_range(name_key(begin), name_key(end), limit).await?;
    let mut out = Vec::with_capacity(rows.len());
    for kv in rows {
        let id = decode_id(&kv.value)?;
        // `getTenantTransaction`: a name whose entry is gone is `tenant_not_found`.
        let entry = entry_by_id(tx, id)
            .await?
            .ok_or(Error::from(ErrorCode::TENANT_NOT_FOUND))?;
        out.push(TenantRow::new(entry));
    }
    Ok(out)
}

/// Tenant `name`, read in `tx` (`None` if there is none).
pub async fn get_tenant_in<D: Driver>(
    tx: &Transaction<D>,
    name: &[u8],
) -> Result<Option<TenantEntry>, Error> {
    tx.set_option(TransactionOption::ReadSystemKeys)?;
    entry_by_name(tx, name).await
}

/// Creates a tenant (`fdb.tenant_management.create_tenant(db, name)`): fails with
/// `tenant_already_exists` (2132) if the first attempt finds the name taken (a retry after
/// a commit that may have succeeded accepts the tenant it finds), `invalid_tenant_name`
/// (2134) for a name starting with `\xff`, `tenants_disabled` (2136) when the cluster's
/// `tenant_mode` is disabled.
pub async fn create_tenant<D: Driver>(
    db: &Database<D>,
    name: impl AsRef<[u8]>,
) -> Result<(), Error> {
    create_tenant_with(db, name, &TenantConfig::default()).await
}

/// [`create_tenant`] with a configuration (fdbcli's `tenant create NAME tenant_group=G`).
pub async fn create_tenant_with<D: Driver>(
    db: &Database<D>,
    name: impl AsRef<[u8]>,
    config: &TenantConfig,
) -> Result<(), Error> {
    let name = name.as_ref().to_vec();
    run_refused_first(db, ErrorCode::TENANT_ALREADY_EXISTS, |tx| {
        let name = name.clone();
        async move { create_tenant_with_in(&tx, &name, config).await }
    })
    .await
}

/// Deletes an empty tenant (`fdb.tenant_management.delete_tenant(db, name)`): fails with
/// `tenant_not_found` (2131) if the first attempt finds no such tenant, `tenant_not_empty`
/// (2133) if it holds keys.
pub async fn delete_tenant<D: Driver>(
    db: &Database<D>,
    name: impl AsRef<[u8]>,
) -> Result<(), Error> {
    let name = name.as_ref().to_vec();
    run_refused_first(db, ErrorCode::TENANT_NOT_FOUND, |tx| {
        let name = name.clone();
        async move { delete_tenant_in(&tx, &name).await }
    })
    .await
}

/// Runs `step` (which says whether it made its change) in `db`'s retry loop, failing with
/// `refusal` when the first attempt made none: a later attempt that finds nothing to do
/// follows one whose commit may have succeeded.
async fn run_refused_first<D, F, Fut>(
    db: &Database<D>,
    refusal: ErrorCode,
    mut step: F,
) -> Result<(), Error>
where
    D: Driver,
    F: FnMut(Transaction<D>) -> Fut,
    Fut: core::future::Future<Output = Result<bool, Error>>,
{
    let mut first = true;
    db.run(|tx| {
        let was_first = std::mem::replace(&mut first, false);
        let attempt = step(tx);
        async move {
            if !attempt.await? && was_first {
                return Err(refusal.into());
            }
            Ok(())
        }
    })
    .await
}

/// Renames tenant `old` to `new` (`TenantAPI::renameTenant`, fdbcli's `tenant rename`):
/// `tenant_not_found` (2131) if there is no tenant `old`, `tenant_already_exists` (2132) if
/// `new` is taken. A retry after a commit that may have succeeded accepts a tenant already
/// renamed: the tenant is followed by the id the first attempt found.
pub async fn rename_tenant<D: Driver>(
    db: &Database<D>,
    old: impl AsRef<[u8]>,
    new: impl AsRef<[u8]>,
) -> Result<(), Error> {
    use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
    use std::sync::Arc;
    let (old, new) = (old.as_ref().to_vec(), new.as_ref().to_vec());
    // The id found by the first lookup (-1: none yet), and whether an attempt got past its
    // checks (so that a later one may find the rename done).
    let id = Arc::new(AtomicI64::new(-1));
    let tried = Arc::new(AtomicBool::new(false));
    db.run(|tx| {
        let (old, new, id, tried) = (old.clone(), new.clone(), id.clone(), tried.clone());
        async move {
            tx.set_option(TransactionOption::AccessSystemKeys)?;
            let tenant = match id.load(Ordering::Relaxed) {
                -1 => {
                    let Some(v) = tx.get(name_key(&old)).await? else {
                        return Err(ErrorCode::TENANT_NOT_FOUND.into());
                    };
                    let found = decode_id(&v)?;
                    id.store(found, Ordering::Relaxed);
                    found
                }
                known => known,
            };
            let entry = entry_by_id(&tx, tenant)
                .await?
                .ok_or(Error::from(ErrorCode::TENANT_NOT_FOUND))?;
            if tried.load(Ordering::Relaxed) && entry.name.as_ref() == new.as_slice() {
                return Ok(());
            }
            if entry.name.as_ref() != old.as_slice() {
                return Err(ErrorCode::TENANT_NOT_FOUND.into());
            }
            if let Some(v) = tx.get(name_key(&new)).await? {
                if decode_id(&v)? != tenant {
                    return Err(ErrorCode::TENANT_ALREADY_EXISTS.into());
                }
            }
            tried.store(true, Ordering::Relaxed);
            rename_tenant_in(&tx, &old, &new).await
        }
    })
    .await
}

/// [`configure_tenant_in`] in its own retry loop.
pub async fn configure_tenant<D: Driver>(
    db: &Database<D>,
    name: impl AsRef<[u8]>,
    config: &TenantConfig,
) -> Result<(), Error> {
    let name = name.as_ref();
    db.run(|tx| async move { configure_tenant_in(&tx, name, config).await })
        .await
}

/// Locks tenant `name` (`fdbcli tenant lock NAME w|rw UID`): [`TenantLockState::ReadOnly`]
/// refuses its commits, [`TenantLockState::Locked`] its reads too, with `tenant_locked`
/// (2144), except for `lock_aware` transactions. See [`change_lock_state_in`].
pub async fn lock_tenant<D: Driver>(
    db: &Database<D>,
    name: impl AsRef<[u8]>,
    state: TenantLockState,
    lock_id: Uid,
) -> Result<(), Error> {
    let name = name.as_ref();
    db.run(|tx| async move { change_lock_state_in(&tx, name, state, lock_id).await })
        .await
}

/// Unlocks tenant `name` locked under `lock_id` (`fdbcli tenant unlock NAME UID`):
/// `tenant_locked` (2144) if another id holds the lock.
pub async fn unlock_tenant<D: Driver>(
    db: &Database<D>,
    name: impl AsRef<[u8]>,
    lock_id: Uid,
) -> Result<(), Error> {
    lock_tenant(db, name, TenantLockState::Unlocked, lock_id).await
}

/// Tenants with names in `[begin, end)`, at most `limit` (0: all), in name order
/// (`fdb.tenant_management.list_tenants`): each as libfdb_c's
/// `\xff\xff/management/tenant/map/<name>` row, its value the tenant's JSON.
pub async fn list_tenants<D: Driver>(
    db: &Database<D>,
    begin: impl AsRef<[u8]>,
    end: impl AsRef<[u8]>,
    limit: usize,
) -> Result<Vec<TenantRow>, Error> {
    let (b, e) = (begin.as_ref(), end.as_ref());
    db.run(|tx| async move { list_tenants_in(&tx, b, e, limit).await })
        .await
}

/// Tenant `name` (fdbcli's `tenant get`), `None` if there is none.
pub async fn get_tenant<D: Driver>(
    db: &Database<D>,
    name: impl AsRef<[u8]>,
) -> Result<Option<TenantEntry>, Error> {
    let name = name.as_ref();
    db.run(|tx| async move { get_tenant_in(&tx, name).await })
        .await
}
