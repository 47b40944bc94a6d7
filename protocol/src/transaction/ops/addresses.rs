//! `get_addresses_for_key`, whole: the addresses of the storage servers holding a key, as
//! `getAddressesForKeyActor` (`fdbclient/NativeAPI.actor.cpp`, 7.3) answers it.
//!
//! RYW checks the transaction is usable (not committing, not reset or cancelled). NativeAPI
//! then starts the transaction (its tenant and read version), then reads the key's team
//! from `\xff/keyServers/` and the servers' interfaces from `\xff/serverList/` at that
//! version. The commit proxy's location answer names the same team (the shard's source
//! servers, in the same order), so the key is looked up there — always afresh, never from the
//! location cache, which may still hold a team the shard has since moved away from (libfdb_c's
//! answer is as of the read version). Each address is the server's primary address with its port (`include_port_in_address`
//! is on from API version 630) and `:tls` when it is a TLS one. A key at or past `\xff\xff`
//! (after the tenant prefix) has no team: the list is empty.

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bytes::Bytes;

use super::{OpId, OpKind, Wait};
use crate::event::Reply;
use crate::ids::{RequestId, TransactionId};
use crate::ryw::ALL_KEYS_END;
use crate::transaction::{Ctx, Transactions};

/// A `get_addresses_for_key` in flight: [`OpKind::Addresses`]'s state.
#[derive(Debug)]
pub(in crate::transaction) struct AddressesOp {
    pub(super) key: Bytes,
    /// Its location lookup was sent (the answer must come from a fresh one).
    asked: bool,
}

impl Transactions {
    /// `fdb_transaction_get_addresses_for_key`. Finishes with [`Reply::Addresses`].
    pub(crate) fn get_addresses_for_key(
        &mut self,
        cx: &mut Ctx<'_>,
        tx: TransactionId,
        key: &[u8],
    ) -> RequestId {
        AddressesOp::start(self, cx, tx, key)
    }
}

/// The addresses' steps.
impl AddressesOp {
    /// The checks, then the op.
    fn start(txs: &mut Transactions, cx: &mut Ctx<'_>, tx: TransactionId, key: &[u8]) -> RequestId {
        let req = cx.new_request();
        // RYW's checks: not during the commit, not once reset or cancelled.
        if let Err(e) = txs.check_usable(tx) {
            cx.finish(req, Err(e));
            return req;
        }
        let key = Bytes::copy_from_slice(key);
        txs.insert_op(
            cx,
            req,
            tx,
            OpKind::Addresses(AddressesOp { key, asked: false }),
        );
        req
    }

    /// The read version, then a fresh location lookup of the key, then its team's addresses.
    /// Takes the whole of the transactions: it reads the read version, the tenant and the
    /// location cache.
    pub(super) fn advance(txs: &mut Transactions, cx: &mut Ctx<'_>, id: OpId) {
        let OpId { req, tx } = id;
        let Some(OpKind::Addresses(AddressesOp { key, asked })) =
            txs.table.ops.get(&req).map(|o| &o.kind)
        else {
            return;
        };
        let (key, asked) = (key.clone(), *asked);
        match txs.read_version_for(cx, id, false) {
            Some(Ok(_)) => {}
            Some(Err(e)) => return txs.fail_op(cx, req, e),
            None => return,
        }
        let absolute = Bytes::copy_from_slice(&txs.absolute(tx, &key));
        if absolute >= ALL_KEYS_END {
            return txs.succeed_op(cx, req, Reply::Addresses(Vec::new()));
        }
        if !asked {
            // The lookup refreshes the cache; the op reads it once that lookup has answered.
            txs.routing.forget(&absolute, false);
            if let Some(OpKind::Addresses(AddressesOp { asked, .. })) =
                txs.table.ops.get_mut(&req).map(|o| &mut o.kind)
            {
                *asked = true;
            }
        } else if txs.routing.locating(&(absolute, false)) {
            return txs.table.set_wait(req, Wait::Location);
        }
        let addresses: Option<Vec<String>> = txs.shard_of(tx, &key, false).map(|sh| {
            sh.servers
                .iter()
                .map(|s| s.get_value.endpoint.addresses.address.to_string())
                .collect()
        });
        match addresses {
            Some(a) => txs.succeed_op(cx, req, Reply::Addresses(a)),
            None => {
                txs.table.set_wait(req, Wait::Location);
                txs.request_location(cx, tx, &key, false);
            }
        }
    }
}

impl Transactions {
    /// The storage servers the location cache knows, by id, with the address requests go to.
    pub(crate) fn known_storage_servers(
        &self,
    ) -> alloc::vec::Vec<(crate::uid::Uid, crate::messages::NetworkAddress)> {
        self.routing
            .locations
            .servers()
            .into_iter()
            .map(|(id, s)| (id, s.get_value.endpoint.address().clone()))
            .collect()
    }
}
