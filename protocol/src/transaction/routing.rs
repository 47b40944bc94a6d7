//! Where a read goes: the location cache and key-location lookups through the commit proxies
//! (with the database-wide backoff while they are overloaded), replica choice by smoothed
//! latency with failed replicas avoided, failover to the next replica, and relocation after
//! `wrong_shard_server` / `all_alternatives_failed`. The state is
//! [`Routing`](super::replicas::Routing)'s; this file lends
//! it what an operation knows (its key, its tenant, its attempts).

use alloc::vec::Vec;
use bytes::Bytes;

use super::ops::wait::{Timer, Wait};
use super::replicas::{Replica, FAILED_SERVER_AVOIDANCE, LOCATION_LIMIT, MAX_RELOCATION_DELAY};
use super::state::ReadVersion;
use super::{Ctx, Transactions};
use crate::error::ErrorCode;
use crate::event::ClientError;
use crate::ids::{RequestId, TransactionId};
use crate::location::Shard;
use crate::messages::commit::{GetKeyServerLocationsReply, GetKeyServerLocationsRequest};
use crate::messages::coordination::CommitProxyInterface;
use crate::messages::types::{SpanContext, TenantInfo};
use crate::messages::{decode_reply, ErrorOr, ReplyPromise};
use crate::route::Route;

impl Transactions {
    pub(super) fn span(&mut self, cx: &mut Ctx<'_>, tx: TransactionId) -> SpanContext {
        let t = self.txs.get(&tx);
        // `span_parent` continues the application's trace: its trace id and sampling flag.
        let (trace_id, flags) = match t.and_then(|t| t.options.span_parent.as_ref()) {
            Some(p) => (p.trace_id, p.flags),
            None => (t.map(|t| t.trace_id).unwrap_or_default(), 0),
        };
        SpanContext {
            trace_id,
            span_id: cx.rng.next_u64(),
            flags,
        }
    }

    /// The replica to ask for `key` (keys before it when `reverse`), or `None` after asking a
    /// commit proxy where the key lives (the op then waits).
    pub(super) fn pick_server(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        tx: TransactionId,
        key: &[u8],
        reverse: bool,
    ) -> Option<Replica> {
        if let Some(r) = self.choose_replica(cx, req, key, reverse) {
            return Some(r);
        }
        self.table.set_wait(req, Wait::Location);
        self.request_location(cx, tx, key, reverse);
        None
    }

    /// [`Routing::choose`] for operation `req` (its key is its transaction's), which then
    /// remembers the server it asks and when.
    pub(super) fn choose_replica(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        key: &[u8],
        reverse: bool,
    ) -> Option<Replica> {
        let now = cx.now;
        let (key, start, attempt) = match self.table.ops.get(&req) {
            Some(o) => (self.absolute(o.tx, key), o.start, o.attempt),
            None => (alloc::borrow::Cow::Borrowed(key), 0, 0),
        };
        let replica = self.routing.choose(now, &key, reverse, start, attempt)?;
        if let Some(op) = self.table.ops.get_mut(&req) {
            op.server = Some((replica.id, now));
        }
        Some(replica)
    }

    /// A reply came from the op's server: update its latency.
    pub(super) fn server_answered(&mut self, cx: &mut Ctx<'_>, req: RequestId) {
        let now = cx.now;
        if let Some((id, sent)) = self.table.ops.get_mut(&req).and_then(|o| o.server.take()) {
            self.routing.answered(id, now.saturating_since(sent));
        }
    }

    /// The cached shard holding `key` of `tx` (keys before it when `reverse`); in a tenant,
    /// `key` is the tenant's and the location cache is searched with the prefixed key.
    pub(super) fn shard_of(&self, tx: TransactionId, key: &[u8], reverse: bool) -> Option<&Shard> {
        self.routing.shard(&self.absolute(tx, key), reverse)
    }

    /// [`Self::shard_of`]'s bounds as `tx` sees them (tenant-relative in a tenant).
    pub(super) fn shard_bounds(
        &self,
        tx: TransactionId,
        key: &[u8],
        reverse: bool,
    ) -> Option<(Bytes, Bytes)> {
        let sh = self.shard_of(tx, key, reverse)?;
        Some(match self.tx_tenant(tx) {
            Some(id) => {
                super::tenant::relative_range(&super::tenant::tenant_prefix(id), &sh.begin, &sh.end)
            }
            None => (sh.begin.clone(), sh.end.clone()),
        })
    }

    pub(super) fn request_location(
        &mut self,
        cx: &mut Ctx<'_>,
        tx: TransactionId,
        key: &[u8],
        reverse: bool,
    ) {
        if self.routing.lookups_held(cx.now) {
            return; // woken when the backoff ends
        }
        // In a tenant, libfdb_c 7.3 asks with the tenant's key and its `TenantInfo`
        // (`getKeyLocation_internal`); the proxy prefixes it, checks the tenant
        // (`tenant_not_found`) and answers absolute shard bounds clamped to the tenant
        // (`clampRangeToTenant`). The cache holds absolute bounds, so lookups are tracked by
        // the prefixed key.
        let k = (Bytes::copy_from_slice(&self.absolute(tx, key)), reverse);
        let tenant = self.tenant_info(tx);
        if self.routing.locating(&k) {
            return;
        }
        // Skips proxies whose endpoint is gone; with none left, wait for new proxies.
        let Some(proxy) = cx.pick_commit_proxy(CommitProxyInterface::GET_KEY_SERVERS_LOCATIONS)
        else {
            return;
        };
        let addr = proxy.commit.endpoint.address().clone();
        let dest = proxy.stream(CommitProxyInterface::GET_KEY_SERVERS_LOCATIONS);
        let min_version = match self.txs.get(&tx).map(|t| t.read_version) {
            Some(ReadVersion::Ready(v)) => v,
            _ => -1,
        };
        let token = cx.rng.uid();
        let begin = if tenant.tenant_id == TenantInfo::INVALID_TENANT {
            k.0.clone()
        } else {
            Bytes::copy_from_slice(key)
        };
        let msg = GetKeyServerLocationsRequest {
            begin,
            end: None,
            limit: LOCATION_LIMIT,
            reverse,
            reply: ReplyPromise { token },
            span_context: self.span(cx, tx),
            tenant,
            min_tenant_version: min_version,
        };
        self.routing.start_locating(k.clone());
        cx.io().send(
            &addr,
            dest,
            &msg,
            token,
            Route::Locations {
                key: k.0,
                reverse: k.1,
            },
        );
    }

    pub(crate) fn on_locations(
        &mut self,
        cx: &mut Ctx<'_>,
        key: Bytes,
        reverse: bool,
        message: &Bytes,
    ) {
        self.routing.end_locating(&(key.clone(), reverse));
        let e = match decode_reply::<GetKeyServerLocationsReply>(message) {
            Ok(ErrorOr::Ok(r)) => {
                self.routing.learn(r.results.into_iter().map(|loc| Shard {
                    begin: loc.range.begin,
                    end: loc.range.end,
                    servers: loc.servers,
                }));
                self.table.wake(Wait::Location);
                return;
            }
            Ok(ErrorOr::Err(e)) if e == ErrorCode::COMMIT_PROXY_MEMORY_LIMIT_EXCEEDED => {
                // `getKeyLocation_internal` eats an overloaded proxy's answer: the database
                // backs off (`updateBackoff`) and every lookup asks again after it.
                let at = self.routing.overloaded(cx.now);
                tracing::debug!(
                    delay_ms = at.saturating_since(cx.now).as_millis() as u64,
                    "commit proxy overloaded: location lookups back off"
                );
                self.table.add_timer(at, Timer::Locations);
                return;
            }
            Ok(ErrorOr::Err(e)) => ClientError::Fdb(e),
            Err(e) => ClientError::Decode(e),
        };
        // Any other answer fails the reads that needed this lookup, and only them; reads
        // waiting for other lookups ask again.
        let waiting: Vec<RequestId> = self
            .table
            .ops
            .iter()
            .filter(|(_, o)| o.wait == Wait::Location)
            .map(|(id, _)| *id)
            .collect();
        for id in waiting {
            // (An op's key is its tenant's; the lookup's is absolute.)
            let same = self.op_key(id).is_some_and(|(k, r)| {
                let tx = self.table.ops.get(&id).map(|o| o.tx);
                let abs = match tx {
                    Some(tx) => self.absolute(tx, &k).into_owned(),
                    None => k.to_vec(),
                };
                abs == key && r == reverse
            });
            if same {
                self.fail_op(cx, id, e.clone());
            } else {
                self.table.set_wait(id, Wait::Ready);
            }
        }
    }

    /// The shard's location was wrong or all its replicas failed: forget it and try again
    /// after `WRONG_SHARD_SERVER_DELAY`.
    pub(super) fn relocate(&mut self, cx: &mut Ctx<'_>, req: RequestId, key: &[u8], reverse: bool) {
        let key = match self.table.ops.get(&req) {
            Some(o) => Bytes::copy_from_slice(&self.absolute(o.tx, key)),
            None => Bytes::copy_from_slice(key),
        };
        self.routing.forget(&key, reverse);
        let mut delay = self.table.knobs.wrong_shard_server_delay;
        if let Some(op) = self.table.ops.get_mut(&req) {
            op.attempt = 0;
            op.wait = Wait::Timer;
            // Repeated failures back off (`allAlternativesFailedDelay`).
            for _ in 0..op.relocations.min(16) {
                delay = (delay * 2).min(MAX_RELOCATION_DELAY);
            }
            op.relocations += 1;
        }
        let at = cx.now + delay;
        self.table.add_timer(at, Timer::Op(req));
    }

    /// The key an op's storage request was about, for relocation.
    pub(super) fn op_key(&self, req: RequestId) -> Option<(Bytes, bool)> {
        self.table.ops.get(&req)?.kind.storage_key()
    }

    pub(crate) fn on_storage_lost(&mut self, cx: &mut Ctx<'_>, req: RequestId) {
        // Try the next replica; after all of them, relocate (`all_alternatives_failed`).
        let Some((key, reverse)) = self.op_key(req) else {
            return;
        };
        let n = match self.table.ops.get(&req) {
            Some(o) => self.shard_of(o.tx, &key, reverse),
            None => None,
        }
        .map_or(1, |s| s.servers.len());
        let until = cx.now + FAILED_SERVER_AVOIDANCE;
        let Some(op) = self.table.ops.get_mut(&req) else {
            return;
        };
        op.kind.request_lost();
        // The op and the routing are apart: one borrow serves both.
        if let Some((id, _)) = op.server.take() {
            self.routing.failed(id, until);
        }
        op.attempt += 1;
        if op.attempt >= n {
            self.relocate(cx, req, &key, reverse);
        } else {
            self.table.set_wait(req, Wait::Ready);
        }
    }

    /// What a read of operation `req` got, or `None` when its error was retried or failed it.
    pub(super) fn read_or_retry<T>(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        r: Result<T, ClientError>,
    ) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                if !self.retried_read_error(cx, req, &e) {
                    self.fail_op(cx, req, e);
                }
                None
            }
        }
    }

    /// Handles the read errors the client retries by itself; `true` if it did.
    pub(super) fn retried_read_error(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        e: &ClientError,
    ) -> bool {
        let ClientError::Fdb(code) = e else {
            return false;
        };
        if *code == ErrorCode::WRONG_SHARD_SERVER || *code == ErrorCode::ALL_ALTERNATIVES_FAILED {
            if let Some((key, reverse)) = self.op_key(req) {
                self.relocate(cx, req, &key, reverse);
                return true;
            }
        }
        if *code == ErrorCode::BROKEN_PROMISE
            || *code == ErrorCode::REQUEST_MAYBE_DELIVERED
            || *code == ErrorCode::SERVER_OVERLOADED
        {
            self.on_storage_lost(cx, req);
            return true;
        }
        false
    }

    /// Ops waiting for the cluster or for locations ask again (new proxies, or a lookup that
    /// was lost).
    pub(crate) fn wake_cluster_waiters(&mut self) {
        self.table.wake(Wait::Cluster);
        // Lookups sent to proxies that went away will never be answered.
        self.table.wake(Wait::Location);
        self.table.wake(Wait::Tenant);
    }

    /// A location lookup got no answer: whoever waited for it asks again.
    pub(crate) fn on_locations_lost(&mut self, key: Bytes, reverse: bool) {
        self.routing.end_locating(&(key, reverse));
        self.wake_cluster_waiters();
    }
}
