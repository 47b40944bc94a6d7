//! Tenants (FDB 7.3): [`Database::open_tenant`] gives a [`Tenant`] whose transactions read
//! and write only the tenant's keys, and [`tenant_management`](crate::tenant_management)
//! creates, deletes and lists tenants as the Python binding's `fdb.tenant_management` does.

use std::future::Future;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use crate::database::Database;
use crate::driver::{apply, query, Driver};
use crate::error::Error;
use crate::tenant_handle::{TenantCell, TenantInner};
use crate::transact::{MaybeCommitted, TransactError, TransactOption};
use crate::transaction::Transaction;

/// A tenant of the database (`fdb_database_open_tenant`). Cheap to clone. Its id is looked
/// up once, when it is opened, and kept: if the tenant is deleted (even if a tenant of the
/// same name is created again), this handle's transactions fail with `tenant_not_found`
/// (2131), as libfdb_c's do; open the tenant again to see the new one.
pub struct Tenant<D: Driver> {
    pub(crate) inner: Arc<TenantInner<D>>,
}

impl<D: Driver> Clone for Tenant<D> {
    fn clone(&self) -> Self {
        Tenant {
            inner: self.inner.clone(),
        }
    }
}

impl<D: Driver> Tenant<D> {
    pub(crate) fn open(driver: D, name: &[u8]) -> Self {
        let cell = Arc::new(TenantCell {
            name: Bytes::copy_from_slice(name),
            handle: OnceLock::new(),
        });
        // The lookup starts now, as `Tenant`'s constructor starts `lookupTenant`.
        let c2 = cell.clone();
        apply(&driver, move |c, now| {
            c2.handle(c, now);
        });
        Tenant {
            inner: Arc::new(TenantInner { driver, cell }),
        }
    }

    /// The tenant's name.
    pub fn name(&self) -> &[u8] {
        &self.inner.cell.name
    }

    /// The tenant's id (`fdb_tenant_get_id`): the outcome of the lookup made when this
    /// handle was opened, kept for its life; `tenant_not_found` (2131) if no tenant had the
    /// name then (even if one is created later), `invalid_tenant_name` (2134) for a name
    /// starting with `\xff`.
    pub async fn get_id(&self) -> Result<i64, Error> {
        loop {
            let cell = self.inner.cell.clone();
            let known = query(&self.inner.driver, move |c, now| {
                let h = cell.handle(c, now);
                c.tenant_id(h)
            })
            .await?;
            if let Some(id) = known {
                return id.map_err(Error::from);
            }
            // Still looking: a read in the tenant waits for the lookup before anything else
            // (its own outcome does not matter, the lookup's does).
            let _ = self.create_transaction().snapshot_get(b"").await;
        }
    }

    /// A new transaction in this tenant: the keys it reads and writes are the tenant's
    /// (stored under its prefix, which the application never sees).
    pub fn create_transaction(&self) -> Transaction<D> {
        Transaction::new_in(self.inner.driver.clone(), Some(self.inner.clone()))
    }

    /// [`Database::run`] in this tenant.
    pub async fn run<T, F, Fut>(&self, f: F) -> Result<T, Error>
    where
        F: FnMut(Transaction<D>) -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        crate::database::run_in(self.create_transaction(), f).await
    }

    /// [`Database::transact`] in this tenant.
    pub async fn transact<T, E, F, Fut>(&self, options: TransactOption, f: F) -> Result<T, E>
    where
        E: TransactError,
        F: FnMut(Transaction<D>, MaybeCommitted) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        crate::transact::transact_in(self.create_transaction(), options, f).await
    }
}

impl<D: Driver> Database<D> {
    /// Opens a tenant (`fdb_database_open_tenant`); nothing is checked until it is used: a
    /// missing tenant fails its transactions with `tenant_not_found`.
    pub fn open_tenant(&self, name: impl AsRef<[u8]>) -> Tenant<D> {
        Tenant::open(self.driver().clone(), name.as_ref())
    }
}
