//! Tenant management, as the Python binding's `fdb.tenant_management` offers it: create,
//! delete and list tenants of a cluster whose `tenant_mode` allows them.
//!
//! libfdb_c does this through its `\xff\xff/management/tenant/map/<name>` special keys, a
//! client-side module that turns the writes into `TenantAPI::createTenantTransaction` /
//! `deleteTenantTransaction` (`fdbclient/TenantManagement.actor.h`, 7.3). This client writes
//! the same system keys itself, in one transaction with `access_system_keys`:
//! `\xff/tenant/map/<id as 8 big-endian bytes>` (the [`TenantMapEntry`]),
//! `\xff/tenant/nameIndex/<tuple(name)>` = `tuple(id)`, `\xff/tenant/lastId` = `tuple(id)`,
//! `\xff/tenant/count` (a little-endian counter, `add`), and `\xff/tenant/lastModification`
//! (a versionstamp). The commit proxies and storage servers learn the tenant from those
//! mutations.

use bytes::Bytes;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::messages::commit::TenantMapEntry;
use fdb_protocol::{tenant_prefix, tuple, MutationType, TransactionOption};

use crate::database::Database;
use crate::driver::Driver;
use crate::error::Error;
use crate::transaction::Transaction;

const TENANT_MAP: &[u8] = b"\xff/tenant/map/";
const NAME_INDEX: &[u8] = b"\xff/tenant/nameIndex/";
const LAST_ID: &[u8] = b"\xff/tenant/lastId";
const COUNT: &[u8] = b"\xff/tenant/count";
const LAST_MODIFICATION: &[u8] = b"\xff/tenant/lastModification";
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
async fn check_tenant_mode<D: Driver>(tx: &Transaction<D>) -> Result<(), Error> {
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
    // Ten bytes for the versionstamp, then its offset (0).
    let mut v = vec![0u8; 10];
    v.extend_from_slice(&0u32.to_le_bytes());
    tx.atomic_op(LAST_MODIFICATION, v, MutationType::SetVersionstampedValue);
}

/// Creates a tenant in transaction `tx` (`createTenantTransaction`): returns `false` if a
/// tenant of that name exists already (nothing written).
pub async fn create_tenant_in<D: Driver>(tx: &Transaction<D>, name: &[u8]) -> Result<bool, Error> {
    check_name(name)?;
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
    let entry = TenantMapEntry {
        id,
        tenant_name: Bytes::copy_from_slice(name),
        lock_state: 0,
        lock_id: None,
        tenant_group: None,
        configuration_sequence_num: 0,
    };
    tx.set(key(TENANT_MAP, &tenant_prefix(id)), entry.encode_value());
    tx.set(name_key(name), tuple::pack(&(id,)));
    tx.set(LAST_ID, tuple::pack(&(id,)));
    tx.atomic_op(COUNT, 1i64.to_le_bytes(), MutationType::Add);
    stamp_modification(tx);
    Ok(true)
}

/// Deletes a tenant in transaction `tx` (`deleteTenantTransaction`): returns `false` if no
/// tenant has that name; fails with `tenant_not_empty` (2133) if it still holds keys.
pub async fn delete_tenant_in<D: Driver>(tx: &Transaction<D>, name: &[u8]) -> Result<bool, Error> {
    check_name(name)?;
    tx.set_option(TransactionOption::AccessSystemKeys)?;
    check_tenant_mode(tx).await?;
    let Some(v) = tx.get(name_key(name)).await? else {
        return Ok(false);
    };
    let id = decode_id(&v)?;
    if prefix_used(tx, id).await? {
        return Err(ErrorCode::TENANT_NOT_EMPTY.into());
    }
    tx.clear(key(TENANT_MAP, &tenant_prefix(id)));
    tx.clear(name_key(name));
    tx.atomic_op(COUNT, (-1i64).to_le_bytes(), MutationType::Add);
    stamp_modification(tx);
    Ok(true)
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
    let name = name.as_ref().to_vec();
    let mut first = true;
    db.run(|tx| {
        let name = name.clone();
        let was_first = std::mem::replace(&mut first, false);
        async move {
            if !create_tenant_in(&tx, &name).await? && was_first {
                return Err(ErrorCode::TENANT_ALREADY_EXISTS.into());
            }
            Ok(())
        }
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
    let mut first = true;
    db.run(|tx| {
        let name = name.clone();
        let was_first = std::mem::replace(&mut first, false);
        async move {
            if !delete_tenant_in(&tx, &name).await? && was_first {
                return Err(ErrorCode::TENANT_NOT_FOUND.into());
            }
            Ok(())
        }
    })
    .await
}

/// Tenants with names in `[begin, end)`, at most `limit`, as `(name, id)` in name order
/// (`fdb.tenant_management.list_tenants`; the Python binding gives each tenant's JSON
/// description instead of its id).
pub async fn list_tenants<D: Driver>(
    db: &Database<D>,
    begin: impl AsRef<[u8]>,
    end: impl AsRef<[u8]>,
    limit: usize,
) -> Result<Vec<(Bytes, i64)>, Error> {
    let (b, e) = (name_key(begin.as_ref()), name_key(end.as_ref()));
    db.run(|tx| {
        let (b, e) = (b.clone(), e.clone());
        async move {
            tx.set_option(TransactionOption::ReadSystemKeys)?;
            let rows = tx.get_range(b, e, limit).await?;
            let mut out = Vec::with_capacity(rows.len());
            for kv in rows {
                let k = kv.key.strip_prefix(NAME_INDEX).unwrap_or(&kv.key);
                let (name,) = tuple::unpack::<(Vec<u8>,)>(k)
                    .map_err(|_| Error::from(ErrorCode::INTERNAL_ERROR))?;
                out.push((Bytes::from(name), decode_id(&kv.value)?));
            }
            Ok(out)
        }
    })
    .await
}
