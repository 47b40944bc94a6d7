//! The core's handle of a tenant, shared by the `Tenant` and each of its
//! transactions (which keep it open while they live): a leaf, so that transactions need not
//! know the tenant type that creates them.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use fdb_protocol::{Client, Instant, TenantHandle};

use crate::driver::{apply, Driver};

/// The core's handle of a tenant, opened on the loop on first use.
pub(crate) struct TenantCell {
    pub(crate) name: Bytes,
    pub(crate) handle: OnceLock<TenantHandle>,
}

impl TenantCell {
    pub(crate) fn handle(&self, c: &mut Client, now: Instant) -> TenantHandle {
        *self.handle.get_or_init(|| c.open_tenant(now, &self.name))
    }
}

/// What a `Tenant` shares with its transactions; the last one dropped closes the handle.
pub(crate) struct TenantInner<D: Driver> {
    pub(crate) driver: D,
    pub(crate) cell: Arc<TenantCell>,
}

impl<D: Driver> Drop for TenantInner<D> {
    fn drop(&mut self) {
        let cell = self.cell.clone();
        apply(&self.driver, move |c, _| {
            if let Some(h) = cell.handle.get() {
                c.close_tenant(*h);
            }
        });
    }
}
