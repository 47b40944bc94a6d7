//! Where reads go ([`Routing`]): the location cache and its lookups, replica choice, and what
//! the client learned of each server (a smoothed latency, a recent failure).

use crate::knobs::Knobs;
use alloc::collections::{BTreeMap, BTreeSet};
use core::time::Duration;

use bytes::Bytes;

use crate::location::{LocationBackoff, LocationCache, Shard};
use crate::messages::network::LocalityData;
use crate::messages::storage::StorageServerInterface;
use crate::messages::NetworkAddress;
use crate::time::Instant;
use crate::uid::Uid;

/// Where reads go, owned apart from the operations: the location cache, the lookups in
/// flight and their database-wide backoff, what is known of each storage server, and where
/// the client runs.
#[derive(Debug, Default)]
pub(super) struct Routing {
    pub(super) locations: LocationCache,
    /// Location lookups in flight: `(key, reverse)`.
    pub(super) locating: BTreeSet<(Bytes, bool)>,
    /// The database-wide pause of location lookups while commit proxies are overloaded.
    pub(super) location_backoff: LocationBackoff,
    pub(super) servers: BTreeMap<Uid, ServerStats>,
    /// Where the client runs (`machine_id`, `datacenter_id`), for replica choice.
    pub(super) locality: ClientLocality,
}

impl Routing {
    /// Nothing known yet; the cache holds `location_cache_eviction_size` shards and the
    /// lookups back off by the knobs' backoff.
    pub(super) fn new(knobs: &Knobs) -> Self {
        let mut routing = Routing {
            location_backoff: LocationBackoff::new(knobs),
            ..Routing::default()
        };
        routing
            .locations
            .set_capacity(knobs.location_cache_eviction_size);
        routing
    }

    /// The cached shard holding `key` (keys before it when `reverse`).
    pub(super) fn shard(&self, key: &[u8], reverse: bool) -> Option<&Shard> {
        if reverse {
            self.locations.lookup_before(key)
        } else {
            self.locations.lookup(key)
        }
    }

    /// Forgets the cached shard holding `key` (keys before it when `reverse`).
    pub(super) fn forget(&mut self, key: &[u8], reverse: bool) {
        if reverse {
            self.locations.invalidate_before(key);
        } else {
            self.locations.invalidate(key);
        }
    }

    /// A lookup's answer: its shards are cached and the lookups' backoff ends.
    pub(super) fn learn(&mut self, shards: impl IntoIterator<Item = Shard>) {
        for shard in shards {
            self.locations.insert(shard);
        }
        self.location_backoff.succeeded();
    }

    /// A proxy was overloaded: lookups pause until the returned time.
    pub(super) fn overloaded(&mut self, now: Instant) -> Instant {
        self.location_backoff.overloaded(now)
    }

    /// Whether lookups are paused (the proxies were overloaded).
    pub(super) fn lookups_held(&self, now: Instant) -> bool {
        self.location_backoff.holding(now)
    }

    /// Whether the lookup `(key, reverse)` is in flight.
    pub(super) fn locating(&self, k: &(Bytes, bool)) -> bool {
        self.locating.contains(k)
    }

    pub(super) fn start_locating(&mut self, k: (Bytes, bool)) {
        self.locating.insert(k);
    }

    pub(super) fn end_locating(&mut self, k: &(Bytes, bool)) {
        self.locating.remove(k);
    }

    /// What is known of server `id`.
    pub(super) fn stats(&self, id: &Uid) -> ServerStats {
        self.servers.get(id).copied().unwrap_or_default()
    }

    /// Server `id` answered after `latency`: smooth it in, and forget a past failure.
    pub(super) fn answered(&mut self, id: Uid, latency: Duration) {
        let s = self.servers.entry(id).or_default();
        s.latency = Some(match s.latency {
            Some(old) => (old * 4 + latency) / 5,
            None => latency,
        });
        s.failed_until = None;
    }

    /// Whether server `id` failed and is still avoided at `now`.
    pub(super) fn is_down(&self, id: &Uid, now: Instant) -> bool {
        self.servers
            .get(id)
            .and_then(|s| s.failed_until)
            .is_some_and(|t| t > now)
    }

    /// Server `id` failed: avoid it until `until`.
    pub(super) fn failed(&mut self, id: Uid, until: Instant) {
        self.servers.entry(id).or_default().failed_until = Some(until);
    }

    /// Load balancing over the replicas of the shard holding `key` (absolute) (keys before it when
    /// `reverse`), or `None` if that shard's location is not cached: the first attempt goes
    /// to the healthy replica with the lowest smoothed latency (untried ones first, so every
    /// replica gets measured), among those in the client's datacenter if any of them is
    /// healthy (`datacenter_id`); retries rotate through the others. Replicas whose connection
    /// failed recently are avoided while another is available. Nothing is cloned or
    /// allocated: this runs for every read.
    pub(super) fn choose(
        &self,
        now: Instant,
        key: &[u8],
        reverse: bool,
        start: usize,
        attempt: usize,
    ) -> Option<Replica> {
        let shard = self.shard(key, reverse)?;
        let servers = &shard.servers;
        let n = servers.len();
        let stats = &self.servers;
        let at = |j: usize| start.wrapping_add(attempt).wrapping_add(j) % n;
        let healthy = |i: usize| !self.is_down(&servers[i].unique_id, now);
        // A first attempt stays in the client's datacenter while a replica there is healthy
        // (`loadBalance` over `countBest()`); retries may go anywhere.
        let locality = &self.locality;
        let local = |i: usize| attempt == 0 && locality.same_dc(&servers[i].locality);
        let any_local = (0..n).any(|i| local(i) && healthy(i));
        let any_healthy = any_local || (0..n).any(|j| healthy(at(j)));
        let mut candidates = (0..n)
            .map(at)
            .filter(|&i| (!any_healthy || healthy(i)) && (!any_local || local(i)));
        let pick = if attempt == 0 {
            candidates.min_by_key(|&i| {
                stats
                    .get(&servers[i].unique_id)
                    .and_then(|s| s.latency)
                    .unwrap_or(Duration::ZERO)
            })
        } else {
            candidates.next()
        }?;
        Some(Replica::of(&servers[pick]))
    }
}

/// `LOCATION_CACHE` lookups ask for up to this many shards at once.
pub(super) const LOCATION_LIMIT: i32 = 100;

/// What the client learned about one storage server (`QueueModel` and the failure monitor,
/// much simplified): a smoothed latency, and whether its connection failed recently.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct ServerStats {
    pub(super) latency: Option<Duration>,
    pub(super) failed_until: Option<Instant>,
}

/// What a request needs of a storage server: its id (for load balancing), address, and the
/// token its streams derive from.
#[derive(Clone, Debug)]
pub(super) struct Replica {
    pub(super) id: Uid,
    pub(super) addr: NetworkAddress,
    pub(super) base: Uid,
}

impl Replica {
    pub(super) fn of(s: &StorageServerInterface) -> Self {
        Replica {
            id: s.unique_id,
            addr: s.get_value.endpoint.address().clone(),
            base: s.get_value.endpoint.token,
        }
    }

    pub(super) fn stream(&self, index: u32) -> Uid {
        self.base.adjusted(index)
    }
}

/// A replica whose connection failed is avoided this long, if another one is available.
pub(super) const FAILED_SERVER_AVOIDANCE: Duration = Duration::from_secs(1);
/// The relocation delay grows from `WRONG_SHARD_SERVER_DELAY` up to this.
pub(super) const MAX_RELOCATION_DELAY: Duration = Duration::from_secs(1);

/// Where this client runs, as the `machine_id` and `datacenter_id` database options name it,
/// for location-aware load balancing (`loadBalanceDistance`, `fdbrpc/Locality.cpp`).
///
/// With 7.3's knobs only the datacenter counts (`LOAD_BALANCE_DC_ID_LOCALITY_ENABLED` is on,
/// `LOAD_BALANCE_ZONE_ID_LOCALITY_ENABLED` off), so the machine id is kept but changes no
/// choice. The replicas are ranked when each read picks one, so unlike libfdb_c (which sorts
/// them when it caches a shard's location, and so drops its location cache when either
/// option is set) nothing cached depends on it.
#[derive(Clone, Debug, Default)]
pub(super) struct ClientLocality {
    pub(super) zone_id: Option<Bytes>,
    pub(super) dc_id: Option<Bytes>,
}

impl ClientLocality {
    /// Whether a server at `locality` is in this client's datacenter (`SAME_DC`); never when
    /// the client's datacenter is not set.
    pub(super) fn same_dc(&self, locality: &LocalityData) -> bool {
        self.dc_id
            .as_ref()
            .is_some_and(|dc| locality.get(b"dcid") == Some(dc))
    }
}
