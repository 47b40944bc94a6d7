//! What a read needs to pick a storage server: the replica's endpoints, and what the client
//! learned of each server (a smoothed latency, a recent failure).

use core::time::Duration;

use bytes::Bytes;

use crate::messages::network::LocalityData;
use crate::messages::NetworkAddress;
use crate::time::Instant;
use crate::uid::Uid;

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
