//! The location cache: which storage servers hold which key range
//! (`DatabaseContext::locationCache` in `fdbclient/NativeAPI.actor.cpp`).
//!
//! Filled from `GetKeyServerLocationsReply`s; an entry is dropped when a storage server says
//! `wrong_shard_server` or every replica failed, so the next read asks a commit proxy again.
//! Lookups pause database-wide while the commit proxies say they are overloaded
//! ([`LocationBackoff`]).

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use crate::knobs::Knobs;
use crate::messages::storage::StorageServerInterface;
use crate::time::Instant;

pub use crate::knobs::LOCATION_CACHE_CAPACITY;

/// One shard: `[begin, end)` and the team that serves it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Shard {
    pub begin: Bytes,
    pub end: Bytes,
    pub servers: Vec<StorageServerInterface>,
}

impl Shard {
    pub(crate) fn contains(&self, key: &[u8]) -> bool {
        self.begin.as_ref() <= key && key < self.end.as_ref()
    }
}

/// Cached shard locations, keyed by shard begin. Entries never overlap.
#[derive(Debug)]
pub(crate) struct LocationCache {
    shards: BTreeMap<Bytes, Shard>,
    /// The most entries kept (the `location_cache_size` database option).
    capacity: usize,
}

impl Default for LocationCache {
    fn default() -> Self {
        LocationCache {
            shards: BTreeMap::new(),
            capacity: LOCATION_CACHE_CAPACITY,
        }
    }
}

impl LocationCache {
    /// Keeps at most `n` entries from now on (at least one: the shard a read was just told
    /// about must stay long enough for the read to use it).
    /// Every storage server a cached shard names, each once, by id (`DatabaseContext::
    /// server_interf`).
    pub(crate) fn servers(&self) -> BTreeMap<crate::uid::Uid, &StorageServerInterface> {
        let mut out = BTreeMap::new();
        for s in self.shards.values().flat_map(|s| &s.servers) {
            out.entry(s.unique_id).or_insert(s);
        }
        out
    }

    pub(crate) fn set_capacity(&mut self, n: usize) {
        self.capacity = n.max(1);
        while self.shards.len() > self.capacity {
            if let Some(k) = self.shards.keys().next().cloned() {
                self.shards.remove(&k);
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn new() -> Self {
        Self::default()
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.shards.len()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.shards.is_empty()
    }

    /// The shard holding `key`.
    pub(crate) fn lookup(&self, key: &[u8]) -> Option<&Shard> {
        self.shards
            .range::<[u8], _>((core::ops::Bound::Unbounded, core::ops::Bound::Included(key)))
            .next_back()
            .map(|(_, s)| s)
            .filter(|s| s.contains(key))
    }

    /// The shard holding the keys just before `key` (for reverse reads): `begin < key <= end`.
    pub(crate) fn lookup_before(&self, key: &[u8]) -> Option<&Shard> {
        self.shards
            .range::<[u8], _>((core::ops::Bound::Unbounded, core::ops::Bound::Excluded(key)))
            .next_back()
            .map(|(_, s)| s)
            .filter(|s| key <= s.end.as_ref())
    }

    /// Records a shard, replacing whatever overlapped it.
    pub(crate) fn insert(&mut self, shard: Shard) {
        if shard.begin >= shard.end || shard.servers.is_empty() {
            return;
        }
        let overlapping: Vec<Bytes> = self
            .shards
            .range::<[u8], _>((
                core::ops::Bound::Unbounded,
                core::ops::Bound::Excluded(shard.end.as_ref()),
            ))
            .rev()
            .take_while(|(_, s)| s.end > shard.begin)
            .map(|(k, _)| k.clone())
            .collect();
        for k in overlapping {
            self.shards.remove(&k);
        }
        if self.shards.len() >= self.capacity {
            // Evict the first entry: cheap, and any entry is as good as another here.
            if let Some(k) = self.shards.keys().next().cloned() {
                self.shards.remove(&k);
            }
        }
        self.shards.insert(shard.begin.clone(), shard);
    }

    /// Forgets the shard holding `key`.
    pub(crate) fn invalidate(&mut self, key: &[u8]) {
        if let Some(b) = self.lookup(key).map(|s| s.begin.clone()) {
            self.shards.remove(&b);
        }
    }

    /// Forgets the shard holding the keys before `key`.
    pub(crate) fn invalidate_before(&mut self, key: &[u8]) {
        if let Some(b) = self.lookup_before(key).map(|s| s.begin.clone()) {
            self.shards.remove(&b);
        }
    }

    /// Forgets every shard overlapping `[begin, end)` (`invalidateCache` of a range).
    pub(crate) fn invalidate_range(&mut self, begin: &[u8], end: &[u8]) {
        let overlapping: Vec<Bytes> = self
            .shards
            .range::<[u8], _>((core::ops::Bound::Unbounded, core::ops::Bound::Excluded(end)))
            .rev()
            .take_while(|(_, s)| s.end.as_ref() > begin)
            .map(|(k, _)| k.clone())
            .collect();
        for k in overlapping {
            self.shards.remove(&k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn shard(b: &'static [u8], e: &'static [u8]) -> Shard {
        Shard {
            begin: Bytes::from_static(b),
            end: Bytes::from_static(e),
            servers: vec![StorageServerInterface::default()],
        }
    }

    /// A cache holding `shards` (inserted in order), so each test lists the ones it starts
    /// from on one line.
    fn cache(shards: &[(&'static [u8], &'static [u8])]) -> LocationCache {
        let mut c = LocationCache::new();
        for &(b, e) in shards {
            c.insert(shard(b, e));
        }
        c
    }

    #[test]
    fn lookup_forward_and_backward() {
        let c = cache(&[(b"a", b"m"), (b"m", b"\xff\xff")]);
        assert_eq!(c.lookup(b"a").unwrap().begin.as_ref(), b"a");
        assert_eq!(c.lookup(b"l").unwrap().begin.as_ref(), b"a");
        assert_eq!(c.lookup(b"m").unwrap().begin.as_ref(), b"m");
        assert!(c.lookup(b"0").is_none());
        assert_eq!(c.lookup_before(b"m").unwrap().begin.as_ref(), b"a");
        assert_eq!(c.lookup_before(b"m\0").unwrap().begin.as_ref(), b"m");
        assert!(c.lookup_before(b"a").is_none());
    }

    #[test]
    fn insert_replaces_overlaps_and_invalidate_forgets() {
        let mut c = cache(&[(b"a", b"c"), (b"c", b"e"), (b"e", b"g"), (b"b", b"f")]);
        assert_eq!(c.len(), 1);
        assert!(c.lookup(b"a").is_none());
        assert!(c.lookup(b"e").is_some());
        c.invalidate(b"e");
        assert!(c.is_empty());
    }

    #[test]
    fn invalidate_range_forgets_overlapping_shards() {
        let mut c = cache(&[(b"a", b"c"), (b"c", b"e"), (b"e", b"g"), (b"g", b"i")]);
        c.invalidate_range(b"d", b"g");
        assert!(c.lookup(b"a").is_some());
        assert!(c.lookup(b"c").is_none());
        assert!(c.lookup(b"e").is_none());
        assert!(c.lookup(b"g").is_some());
        c.invalidate_range(b"b", b"b\0");
        assert!(c.lookup(b"a").is_none());
        assert_eq!(c.len(), 1);
    }
}

/// `DatabaseContext::backoffDelay` for key-location lookups: it starts at `DEFAULT_BACKOFF`
/// when a commit proxy answers `commit_proxy_memory_limit_exceeded`, doubles with each such
/// answer up to `RESOURCE_CONSTRAINED_MAX_BACKOFF`, and halves with each answered lookup
/// (gone below `DEFAULT_BACKOFF`). libfdb_c sleeps that long before every lookup; here
/// lookups wait until that long after the last overloaded answer, which paces them the same
/// while the proxies are overloaded without a timer per lookup.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LocationBackoff {
    pub(crate) delay: Duration,
    pub(crate) until: Option<Instant>,
    knobs: Knobs,
}

impl LocationBackoff {
    /// No pause yet; pauses as `knobs` say.
    pub(crate) fn new(knobs: &Knobs) -> Self {
        LocationBackoff {
            knobs: *knobs,
            ..LocationBackoff::default()
        }
    }

    /// A proxy was overloaded: the time lookups may resume.
    pub(crate) fn overloaded(&mut self, now: Instant) -> Instant {
        let k = &self.knobs;
        self.delay = if self.delay.is_zero() {
            k.default_backoff
        } else {
            k.grow(self.delay, k.resource_constrained_max_backoff)
        };
        let at = now + self.delay;
        self.until = Some(at);
        at
    }

    pub(crate) fn succeeded(&mut self) {
        self.delay = self.knobs.shrink(self.delay);
        if self.delay < self.knobs.default_backoff {
            self.delay = Duration::ZERO;
        }
    }

    pub(crate) fn holding(&self, now: Instant) -> bool {
        self.until.is_some_and(|t| now < t)
    }
}
