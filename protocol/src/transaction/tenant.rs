//! Tenants (`fdbclient/NativeAPI.actor.cpp`, 7.3): a tenant handle looks its name up once, at
//! a commit proxy (`GetTenantIdRequest`, `lookupTenantImpl`), when it is opened; every
//! transaction created from it waits for that id before its first read or commit
//! (`TransactionState::startTransaction`) and keeps it for its whole life, resets included
//! (`cloneAndReset` keeps the tenant). The id never changes afterwards: a tenant deleted (or
//! deleted and created again) under an open handle is seen as `tenant_not_found` from the
//! storage servers and the commit proxies, as libfdb_c does. A failed lookup fails every
//! transaction of the handle with that error.
//!
//! Inside a tenant the transaction works on the keys the application sees; only at the
//! boundary does the prefix (the id as 8 big-endian bytes) appear: the location cache is
//! searched with prefixed keys and its shard bounds made tenant-relative
//! (`toPrefixRelativeRange`), storage requests carry the unprefixed keys and the tenant's
//! [`TenantInfo`] (the storage server adds and strips the prefix), and the commit prefixes its
//! mutations and conflict ranges itself (`applyTenantPrefix`).

use alloc::borrow::Cow;
use alloc::vec::Vec;
use bytes::Bytes;

use super::ops::wait::Wait;
use super::{Ctx, Transactions};
use crate::error::ErrorCode;
use crate::event::ClientError;
use crate::ids::{RequestId, TransactionId};
use crate::messages::commit::{mutation_type, GetTenantIdReply, GetTenantIdRequest, MutationRef};
use crate::messages::coordination::CommitProxyInterface;
use crate::messages::types::{KeyRange, TenantInfo, LATEST_VERSION};
use crate::messages::{decode_reply, ErrorOr, ReplyPromise};
use crate::route::Route;

/// `TenantMode::DISABLED`, as `ClientDBInfo` carries it.
const TENANT_MODE_DISABLED: u32 = 0;
/// `TenantMode::REQUIRED`.
const TENANT_MODE_REQUIRED: u32 = 2;

pub use crate::ids::TenantHandle;

/// Where a handle's id lookup stands.
#[derive(Clone, Debug)]
pub(super) enum Lookup {
    /// Not asked yet, or the request was lost: ask (again).
    Unsent,
    /// A `GetTenantIdRequest` is in flight.
    Sent,
    Ready(i64),
    Failed(ErrorCode),
}

#[derive(Debug)]
pub(super) struct TenantSlot {
    pub(super) name: Bytes,
    pub(super) lookup: Lookup,
}

/// The key prefix of tenant `id` (`TenantAPI::idToPrefix`).
pub fn tenant_prefix(id: i64) -> [u8; 8] {
    id.to_be_bytes()
}

/// `toPrefixRelativeRange`: the part of `[begin, end)` a tenant with `prefix` sees.
pub(super) fn relative_range(prefix: &[u8], begin: &[u8], end: &[u8]) -> (Bytes, Bytes) {
    let b = begin
        .strip_prefix(prefix)
        .map_or(Bytes::new(), Bytes::copy_from_slice);
    let e = end
        .strip_prefix(prefix)
        .map_or(Bytes::from_static(b"\xff\xff"), Bytes::copy_from_slice);
    (b, e)
}

impl Transactions {
    /// Opens a tenant handle and starts looking its name up.
    pub(crate) fn open_tenant(&mut self, cx: &mut Ctx<'_>, name: &[u8]) -> TenantHandle {
        self.next_tenant += 1;
        let h = TenantHandle(self.next_tenant);
        let lookup = if name.first() == Some(&0xff) {
            // libfdb_c's `open_tenant` refuses such a name (`invalid_tenant_name`).
            Lookup::Failed(ErrorCode::INVALID_TENANT_NAME)
        } else {
            Lookup::Unsent
        };
        self.tenants.insert(
            h,
            TenantSlot {
                name: Bytes::copy_from_slice(name),
                lookup,
            },
        );
        self.send_tenant_lookup(cx, h);
        h
    }

    /// The application dropped its handle (and every transaction made from it).
    pub(crate) fn close_tenant(&mut self, h: TenantHandle) {
        self.tenants.remove(&h);
    }

    /// The tenant's id once known (`None`: still looking, or no such handle).
    pub(crate) fn tenant_id(&self, h: TenantHandle) -> Option<Result<i64, ErrorCode>> {
        match self.tenants.get(&h)?.lookup {
            Lookup::Ready(id) => Some(Ok(id)),
            Lookup::Failed(e) => Some(Err(e)),
            _ => None,
        }
    }

    /// Binds a new transaction to a tenant.
    pub(crate) fn bind_tenant(&mut self, tx: TransactionId, h: TenantHandle) {
        self.tx_tenants.insert(tx, h);
    }

    fn send_tenant_lookup(&mut self, cx: &mut Ctx<'_>, h: TenantHandle) {
        let Some(slot) = self.tenants.get_mut(&h) else {
            return;
        };
        if !matches!(slot.lookup, Lookup::Unsent) {
            return;
        }
        // With no proxies known yet the lookup waits for the cluster (woken with the other
        // cluster waiters).
        let Some(proxy) = cx.pick_commit_proxy(CommitProxyInterface::GET_TENANT_ID) else {
            return;
        };
        let addr = proxy.commit.endpoint.address().clone();
        let dest = proxy.stream(CommitProxyInterface::GET_TENANT_ID);
        let token = cx.rng.uid();
        let msg = GetTenantIdRequest {
            reply: ReplyPromise { token },
            tenant_name: slot.name.clone(),
            min_tenant_version: LATEST_VERSION,
        };
        slot.lookup = Lookup::Sent;
        cx.io().send(&addr, dest, &msg, token, Route::TenantId(h));
    }

    pub(crate) fn on_tenant_id_reply(&mut self, h: TenantHandle, message: &Bytes) {
        let Some(slot) = self.tenants.get_mut(&h) else {
            return;
        };
        slot.lookup = match decode_reply::<GetTenantIdReply>(message) {
            Ok(ErrorOr::Ok(r)) => Lookup::Ready(r.tenant_id),
            // An overloaded proxy: ask again (`lookupTenantImpl` eats this error).
            Ok(ErrorOr::Err(ErrorCode::COMMIT_PROXY_MEMORY_LIMIT_EXCEEDED)) => Lookup::Unsent,
            Ok(ErrorOr::Err(e)) => Lookup::Failed(e),
            Err(_) => Lookup::Failed(ErrorCode::INTERNAL_ERROR),
        };
        self.wake_tenant_waiters(h);
    }

    /// The lookup got no answer: ask again (another proxy, or the same one later).
    pub(crate) fn on_tenant_id_lost(&mut self, h: TenantHandle) {
        if let Some(slot) = self.tenants.get_mut(&h) {
            slot.lookup = Lookup::Unsent;
        }
        self.wake_tenant_waiters(h);
    }

    fn wake_tenant_waiters(&mut self, h: TenantHandle) {
        let tx_tenants = &self.tx_tenants;
        self.table
            .wake_if(Wait::Tenant, |op| tx_tenants.get(&op.tx) == Some(&h));
    }

    /// Before an operation of `tx` touches data: its tenant's id (`Some(Ok(None))` without a
    /// tenant), or `None` after setting the op waiting for the lookup.
    pub(super) fn tenant_ready(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        tx: TransactionId,
    ) -> Option<Result<Option<i64>, ClientError>> {
        let mode = cx.info.map(|i| i.tenant_mode.mode);
        let Some(&h) = self.tx_tenants.get(&tx) else {
            if self.tenant_name_required(cx, tx) {
                return Some(Err(ClientError::Fdb(ErrorCode::TENANT_NAME_REQUIRED)));
            }
            return Some(Ok(None));
        };
        match self.tenants.get(&h).map(|s| &s.lookup) {
            // `getTenantInfo`: a tenant on a cluster with tenants disabled (known from
            // non-provisional proxies) is refused, once its id is known.
            Some(Lookup::Ready(_))
                if mode == Some(TENANT_MODE_DISABLED)
                    && cx
                        .info
                        .and_then(|i| i.grv_proxies.first())
                        .is_some_and(|p| !p.provisional) =>
            {
                Some(Err(ClientError::Fdb(ErrorCode::TENANTS_DISABLED)))
            }
            Some(Lookup::Ready(id)) => Some(Ok(Some(*id))),
            Some(Lookup::Failed(e)) => Some(Err(ClientError::Fdb(*e))),
            None => Some(Err(ClientError::Fdb(ErrorCode::TENANT_NOT_FOUND))),
            Some(Lookup::Unsent) | Some(Lookup::Sent) => {
                self.table.set_wait(req, Wait::Tenant);
                self.send_tenant_lookup(cx, h);
                None
            }
        }
    }

    /// `getTenantInfo`'s first rule: a cluster that requires tenants refuses a transaction
    /// outside any tenant, unless it has raw access (which the system-key options imply).
    pub(super) fn tenant_name_required(&self, cx: &Ctx<'_>, tx: TransactionId) -> bool {
        if self.tx_tenants.contains_key(&tx)
            || cx.info.map(|i| i.tenant_mode.mode) != Some(TENANT_MODE_REQUIRED)
        {
            return false;
        }
        !self.txs.get(&tx).is_some_and(|t| {
            t.options.raw_access || t.options.access_system_keys || t.options.read_system_keys
        })
    }

    /// The resolved tenant id of `tx` (`None` without a tenant or before the lookup).
    pub(super) fn tx_tenant(&self, tx: TransactionId) -> Option<i64> {
        let h = self.tx_tenants.get(&tx)?;
        match self.tenants.get(h)?.lookup {
            Lookup::Ready(id) => Some(id),
            _ => None,
        }
    }

    /// What storage requests of `tx` carry.
    /// With `authorization_token` set it carries the token too (NativeAPI's `getTenantInfo`
    /// sends it with or without a tenant), which an untrusted client (TLS without a trusted
    /// certificate) needs for every data request of its tenant.
    pub(super) fn tenant_info(&self, tx: TransactionId) -> TenantInfo {
        let token = self
            .txs
            .get(&tx)
            .and_then(|t| t.options.auth_token.clone())
            .map(|value| crate::messages::types::WipedString { value });
        TenantInfo {
            tenant_id: self.tx_tenant(tx).unwrap_or(TenantInfo::INVALID_TENANT),
            token,
        }
    }

    /// `key` of `tx` in the database's key space (for the location cache).
    pub(super) fn absolute<'k>(&self, tx: TransactionId, key: &'k [u8]) -> Cow<'k, [u8]> {
        match self.tx_tenant(tx) {
            Some(id) => {
                let mut k = Vec::with_capacity(8 + key.len());
                k.extend_from_slice(&tenant_prefix(id));
                k.extend_from_slice(key);
                Cow::Owned(k)
            }
            None => Cow::Borrowed(key),
        }
    }
}

/// `prefix` then `key`.
pub(super) fn with_prefix(prefix: &[u8], key: &[u8]) -> Bytes {
    let mut k = Vec::with_capacity(prefix.len() + key.len());
    k.extend_from_slice(prefix);
    k.extend_from_slice(key);
    Bytes::from(k)
}

/// `applyTenantPrefix`: every conflict range and mutation key of a commit moves into the
/// tenant; a versionstamped key's offset (its last 4 bytes) moves with it.
pub(super) fn prefix_commit(
    prefix: &[u8],
    reads: &mut [KeyRange],
    writes: &mut [KeyRange],
    mutations: &mut [MutationRef],
) {
    for r in reads.iter_mut().chain(writes.iter_mut()) {
        r.begin = with_prefix(prefix, &r.begin);
        r.end = with_prefix(prefix, &r.end);
    }
    for m in mutations.iter_mut() {
        if m.kind == mutation_type::SET_VERSIONSTAMPED_KEY && m.param1.len() >= 4 {
            let n = m.param1.len();
            let mut off = [0u8; 4];
            off.copy_from_slice(&m.param1[n - 4..]);
            let off = u32::from_le_bytes(off).wrapping_add(prefix.len() as u32);
            let mut k = with_prefix(prefix, &m.param1[..n - 4]).to_vec();
            k.extend_from_slice(&off.to_le_bytes());
            m.param1 = Bytes::from(k);
        } else {
            m.param1 = with_prefix(prefix, &m.param1);
        }
        if m.kind == mutation_type::CLEAR_RANGE {
            m.param2 = with_prefix(prefix, &m.param2);
        }
    }
}
