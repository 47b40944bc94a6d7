//! What the client knows about failed endpoints and addresses, as FDB's
//! `SimpleFailureMonitor` does, and the choice among alternatives it drives
//! (`basicLoadBalance`).

use alloc::collections::BTreeSet;

use super::peer::AddrKey;
use crate::messages::NetworkAddress;
use crate::time::Rng;
use crate::uid::Uid;

/// `SimpleFailureMonitor` forgets its failed endpoints past this many.
const MAX_FAILED_ENDPOINTS: usize = 100_000;

/// Failed endpoints (gone for good: their process said it does not know them, or their role
/// ended) and addresses whose last connection failed.
#[derive(Debug, Default)]
pub(crate) struct FailureMonitor {
    endpoints: BTreeSet<(AddrKey, Uid)>,
    addresses: BTreeSet<AddrKey>,
}

impl FailureMonitor {
    /// `endpointNotFound`: endpoint `dest` at `addr` is gone. Well-known endpoints are never
    /// marked: a coordinator that lost one will serve it again.
    pub(crate) fn endpoint_gone(&mut self, addr: &NetworkAddress, dest: Uid) {
        if dest.is_well_known() {
            return;
        }
        if self.endpoints.len() >= MAX_FAILED_ENDPOINTS {
            self.endpoints.clear();
        }
        self.endpoints.insert((AddrKey::of(addr), dest));
    }

    /// Whether a process told us it does not know this endpoint.
    pub(crate) fn endpoint_failed(&self, addr: &NetworkAddress, token: Uid) -> bool {
        self.endpoints.contains(&(AddrKey::of(addr), token))
    }

    /// The last connection to `addr` failed (`true`) or one succeeded (`false`).
    pub(crate) fn set_address_failed(&mut self, addr: &NetworkAddress, failed: bool) {
        let key = AddrKey::of(addr);
        if failed {
            self.addresses.insert(key);
        } else {
            self.addresses.remove(&key);
        }
    }

    /// Whether the last connection to `addr` failed and none succeeded since.
    pub(crate) fn address_failed(&self, addr: &NetworkAddress) -> bool {
        self.addresses.contains(&AddrKey::of(addr))
    }

    /// Picks one of `endpoints` like `basicLoadBalance`: never one whose endpoint is known
    /// gone (`None` if all are: wait for new ones), preferably one whose address did not just
    /// fail.
    pub(crate) fn pick(&self, endpoints: &[(NetworkAddress, Uid)], rng: &mut Rng) -> Option<usize> {
        self.pick_among(endpoints.len(), |i| (&endpoints[i].0, endpoints[i].1), rng)
    }

    /// [`pick`](Self::pick) over `n` endpoints given by index, for callers that hold them in
    /// their own shape (the proxies of a `ClientDBInfo`). Counted, then walked again for the
    /// chosen one: picking is on every request's path, so it allocates nothing.
    pub(crate) fn pick_among<'e>(
        &self,
        n: usize,
        endpoint: impl Fn(usize) -> (&'e NetworkAddress, Uid),
        rng: &mut Rng,
    ) -> Option<usize> {
        let alive = |i: &usize| {
            let (addr, token) = endpoint(*i);
            !self.endpoint_failed(addr, token)
        };
        let healthy = |i: &usize| alive(i) && !self.address_failed(endpoint(*i).0);
        let n_alive = (0..n).filter(alive).count();
        if n_alive == 0 {
            return None;
        }
        let n_healthy = (0..n).filter(healthy).count();
        if n_healthy == 0 {
            (0..n).filter(alive).nth(rng.below(n_alive))
        } else {
            (0..n).filter(healthy).nth(rng.below(n_healthy))
        }
    }

    /// Forgets the failed state of addresses not in `keep` (a pruned backoff table).
    pub(crate) fn retain_addresses(&mut self, keep: impl Fn(&AddrKey) -> bool) {
        self.addresses.retain(keep);
    }
}
