//! Tenants (foundationdb-rs's `tenant` module, behind `tenant-experimental`): `FdbTenant`
//! over fdb-api's tenant handle, and `TenantManagement` through the
//! `\xff\xff/management/tenant/map/` special keys, as the Java binding's tenant management
//! (which foundationdb-rs follows) does.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use fdb_api::ErrorCode;
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

use crate::binding_error::FdbBindingError;
use crate::database::{run_loop, transact_loop, DatabaseTransact, NoopHooks};
use crate::database::{Database, MaybeCommitted, RetryableTransaction, TransactOption};
use crate::error::{FdbError, FdbResult};
use crate::keyselector::KeySelector;
use crate::net::DbHandle;
use crate::options::TransactionOption;
use crate::transaction::{RangeOption, Transaction};

const MAP: &[u8] = b"\xff\xff/management/tenant/map/";
const MAP_END: &[u8] = b"\xff\xff/management/tenant/map0";

/// A tenant: transactions in it see only its keys.
pub struct FdbTenant {
    inner: fdb_api::Tenant<fdb_driver_mio::MioDriver>,
    db: Arc<DbHandle>,
}

// `Database::open_tenant` lives here, beside what it returns, so that the database's file
// needs nothing of the tenant's (which runs its transactions through the database's loops).
impl Database {
    /// A tenant (`fdb_database_open_tenant`): its id is looked up now, and its transactions
    /// read and write only its keys.
    pub fn open_tenant(&self, tenant_name: &[u8]) -> FdbResult<FdbTenant> {
        Ok(FdbTenant::new(
            self.inner.db.open_tenant(tenant_name),
            self.inner.clone(),
        ))
    }
}

impl FdbTenant {
    pub(crate) fn new(
        inner: fdb_api::Tenant<fdb_driver_mio::MioDriver>,
        db: Arc<DbHandle>,
    ) -> Self {
        FdbTenant { inner, db }
    }

    /// The tenant's name.
    pub fn get_name(&self) -> &[u8] {
        self.inner.name()
    }

    /// A new transaction in the tenant.
    pub fn create_trx(&self) -> FdbResult<Transaction> {
        Ok(Transaction::new(
            self.inner.create_transaction(),
            self.db.clone(),
            None,
        ))
    }

    /// [`Database::run`] in the tenant.
    pub async fn run<F, Fut, T>(&self, closure: F) -> Result<T, FdbBindingError>
    where
        F: Fn(RetryableTransaction, MaybeCommitted) -> Fut,
        Fut: Future<Output = Result<T, FdbBindingError>>,
    {
        run_loop(
            RetryableTransaction::new(self.create_trx()?),
            &NoopHooks,
            closure,
        )
        .await
    }

    /// [`Database::transact`] in the tenant.
    pub async fn transact<F>(&self, f: F, options: TransactOption) -> Result<F::Item, F::Error>
    where
        F: DatabaseTransact,
    {
        transact_loop(self.create_trx()?, f, options).await
    }
}

/// A tenant's entry in the tenant map.
#[derive(Serialize, Deserialize, Debug)]
pub struct TenantInfo {
    /// Its id.
    pub id: i64,
    /// Its key prefix.
    pub prefix: FDBTenantPrintableInfo,
    /// Its name.
    pub name: FDBTenantPrintableInfo,
}

/// Bytes as the tenant map's JSON gives them.
#[derive(Serialize, Deserialize, Debug)]
pub struct FDBTenantPrintableInfo {
    base64: String,
    printable: String,
}

/// The JSON of a tenant map row (FDB 7.3's; fields not named here are ignored). The lock
/// state is only required to be there and valid, as foundationdb-rs requires it.
#[derive(Deserialize)]
struct MapRow {
    id: i64,
    #[allow(dead_code)]
    lock_state: LockState,
    name: FDBTenantPrintableInfo,
    prefix: FDBTenantPrintableInfo,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
enum LockState {
    Unlocked,
    Locked,
    ReadOnly,
}

impl TryFrom<(&[u8], &[u8])> for TenantInfo {
    type Error = serde_json::Error;

    fn try_from((_key, value): (&[u8], &[u8])) -> Result<Self, Self::Error> {
        let row: MapRow = serde_json::from_slice(value)?;
        let _ = matches!(
            row.lock_state,
            LockState::Unlocked | LockState::Locked | LockState::ReadOnly
        );
        Ok(TenantInfo {
            id: row.id,
            prefix: row.prefix,
            name: row.name,
        })
    }
}

fn map_key(name: &[u8]) -> Vec<u8> {
    [MAP, name].concat()
}

/// Creating, reading, deleting and listing tenants.
#[derive(Debug)]
pub struct TenantManagement;

impl TenantManagement {
    /// Creates a tenant: `tenant_already_exists` (2132) if it exists when first checked.
    pub async fn create_tenant(db: &Database, tenant_name: &[u8]) -> Result<(), FdbError> {
        Self::change(db, tenant_name, true).await
    }

    /// Deletes a tenant: `tenant_not_found` (2131) if it does not exist when first checked.
    pub async fn delete_tenant(db: &Database, tenant_name: &[u8]) -> Result<(), FdbError> {
        Self::change(db, tenant_name, false).await
    }

    /// Existence is checked in the first attempt only: a retry after an unknown commit
    /// result must not fail because the first attempt did its work.
    async fn change(db: &Database, name: &[u8], create: bool) -> Result<(), FdbError> {
        let checked = AtomicBool::new(false);
        let key = map_key(name);
        let (checked, key) = (&checked, &key);
        db.run(|trx, _| async move {
            trx.set_option(TransactionOption::SpecialKeySpaceEnableWrites)?;
            if !checked.swap(true, Ordering::SeqCst) {
                let exists = trx.get(key, false).await?.is_some();
                match (create, exists) {
                    (true, true) => return Err(FdbError::of(ErrorCode(2132)).into()),
                    (false, false) => return Err(FdbError::of(ErrorCode(2131)).into()),
                    _ => {}
                }
            }
            if create {
                trx.set(key, &[]);
            } else {
                trx.clear(key);
            }
            Ok(())
        })
        .await
        .map_err(|e| {
            e.get_fdb_error()
                .unwrap_or(FdbError::of(ErrorCode::INTERNAL_ERROR))
        })
    }

    /// A tenant's entry, if it exists.
    pub async fn get_tenant(
        db: &Database,
        tenant_name: &[u8],
    ) -> Result<Option<Result<TenantInfo, serde_json::Error>>, FdbError> {
        let key = map_key(tenant_name);
        let key = &key;
        let value = db
            .run(|trx, _| async move {
                trx.set_option(TransactionOption::ReadSystemKeys)?;
                trx.set_option(TransactionOption::ReadLockAware)?;
                Ok(trx.get(key, false).await?)
            })
            .await
            .map_err(|e| {
                e.get_fdb_error()
                    .unwrap_or(FdbError::of(ErrorCode::INTERNAL_ERROR))
            })?;
        Ok(value.map(|v| TenantInfo::try_from((key.as_slice(), v.as_ref()))))
    }

    /// The entries of the tenants named after `begin` up to `end` (empty: all), at most
    /// `limit`.
    pub async fn list_tenant(
        db: &Database,
        begin: &[u8],
        end: &[u8],
        limit: Option<usize>,
    ) -> Result<Vec<Result<TenantInfo, serde_json::Error>>, FdbError> {
        let trx = db.create_trx()?;
        trx.set_option(TransactionOption::ReadSystemKeys)?;
        trx.set_option(TransactionOption::ReadLockAware)?;
        let end = if end.is_empty() {
            MAP_END.to_vec()
        } else {
            map_key(end)
        };
        let range = RangeOption {
            begin: KeySelector::first_greater_than(map_key(begin)),
            end: KeySelector::first_greater_than(end),
            limit,
            ..RangeOption::default()
        };
        trx.get_ranges_keyvalues(range, false)
            .map_ok(|kv| TenantInfo::try_from((kv.key(), kv.value())))
            .try_collect()
            .await
    }
}
