//! The versioned key-value store behind every storage server (MVCC over a version window),
//! with FDB's key-selector resolution (`findKey`) and range reads (`readRange`) from
//! `fdbserver/storageserver.actor.cpp`.

use std::collections::BTreeMap;
use std::ops::Bound;

use bytes::Bytes;
use fdb_protocol::messages::types::{KeySelector, KeyValue, Version};

/// What a row costs against a range read's byte limit: key + value + this. Measured on the
/// `range_large` capture (a real 7.3 storage server returns exactly `ceil(limit / (512 + 24))`
/// rows of 12-byte keys and 500-byte values).
pub const ROW_OVERHEAD_BYTES: usize = 24;

/// `keyAfter(k)`: `k + "\0"`.
pub fn key_after(k: &[u8]) -> Bytes {
    let mut v = Vec::with_capacity(k.len() + 1);
    v.extend_from_slice(k);
    v.push(0);
    Bytes::from(v)
}

/// A key's history: `(version, value)` ascending by version; `None` = cleared.
type History = Vec<(Version, Option<Bytes>)>;

fn value_at(h: &History, v: Version) -> Option<&Bytes> {
    h.iter()
        .rev()
        .find(|(ver, _)| *ver <= v)
        .and_then(|(_, val)| val.as_ref())
}

/// Multi-version store. Every write carries the commit version; reads name a version.
#[derive(Default)]
pub struct Store {
    data: BTreeMap<Bytes, History>,
}

impl Store {
    /// The value of `key` at version `v`.
    pub fn get(&self, key: &[u8], v: Version) -> Option<Bytes> {
        self.data.get(key).and_then(|h| value_at(h, v)).cloned()
    }

    /// The newest value of `key`.
    pub fn latest(&self, key: &[u8]) -> Option<Bytes> {
        self.data
            .get(key)
            .and_then(|h| h.last())
            .and_then(|(_, val)| val.clone())
    }

    /// Writes `value` (or clears, with `None`) at version `v`, which must be >= every version
    /// already written. Two writes at one version: the later wins.
    pub fn put(&mut self, key: Bytes, value: Option<Bytes>, v: Version) {
        if value.is_none() && self.latest(&key).is_none() {
            return; // clearing what is already absent changes nothing
        }
        let h = self.data.entry(key).or_default();
        match h.last_mut() {
            Some(last) if last.0 == v => last.1 = value,
            _ => h.push((v, value)),
        }
    }

    /// Clears `[begin, end)` at version `v`.
    pub fn clear_range(&mut self, begin: &[u8], end: &[u8], v: Version) {
        if begin >= end {
            return;
        }
        let keys: Vec<Bytes> = self
            .data
            .range::<[u8], _>((Bound::Included(begin), Bound::Excluded(end)))
            .filter(|(_, h)| h.last().is_some_and(|(_, val)| val.is_some()))
            .map(|(k, _)| k.clone())
            .collect();
        for k in keys {
            self.put(k, None, v);
        }
    }

    /// Live keys in `[begin, end)` at version `v`, ascending (or descending).
    pub fn live<'a>(
        &'a self,
        begin: &[u8],
        end: &[u8],
        v: Version,
        reverse: bool,
    ) -> Box<dyn Iterator<Item = (&'a Bytes, &'a Bytes)> + 'a> {
        if begin >= end {
            return Box::new(std::iter::empty());
        }
        let r = self
            .data
            .range::<[u8], _>((Bound::Included(begin), Bound::Excluded(end)));
        let f = move |(k, h): (&'a Bytes, &'a History)| value_at(h, v).map(|val| (k, val));
        if reverse {
            Box::new(r.rev().filter_map(f))
        } else {
            Box::new(r.filter_map(f))
        }
    }

    /// Forgets history no read can ask for any more: below `oldest`, only the value as of
    /// `oldest` is kept.
    pub fn forget_before(&mut self, oldest: Version) {
        self.data.retain(|_, h| {
            let keep_from = h.iter().rposition(|(ver, _)| *ver <= oldest).unwrap_or(0);
            h.drain(..keep_from);
            if h.first()
                .is_some_and(|(ver, val)| *ver <= oldest && val.is_none())
            {
                h.remove(0);
            }
            !h.is_empty()
        });
    }

    /// Every live key and value at version `v`.
    pub fn snapshot(&self, v: Version) -> BTreeMap<Vec<u8>, Vec<u8>> {
        self.data
            .iter()
            .filter_map(|(k, h)| value_at(h, v).map(|val| (k.to_vec(), val.to_vec())))
            .collect()
    }

    /// FDB's `findKey`: resolves `sel` at version `v` using only keys in `range` (the shard
    /// this server reads). Returns `(key, 0)` when found; otherwise a boundary of `range` and
    /// the offset still to walk from it: negative from `range.begin` backwards, positive from
    /// `range.end` forwards (the selector to continue with is then
    /// `firstGreaterOrEqual(key) + offset` or `+ offset - 1`).
    pub fn find_key(
        &self,
        sel: &KeySelector,
        begin: &[u8],
        end: &[u8],
        v: Version,
    ) -> (Bytes, i32) {
        let forward = sel.offset > 0;
        let skip_equal = sel.or_equal == forward;
        let distance: i64 = if forward {
            sel.offset as i64
        } else {
            1 - sel.offset as i64
        };
        let want = (distance + skip_equal as i64) as usize;
        let rows: Vec<&Bytes> = if forward {
            self.live(&sel.key, end, v, false)
                .take(want)
                .map(|(k, _)| k)
                .collect()
        } else {
            self.live(begin, &key_after(&sel.key), v, true)
                .take(want)
                .map(|(k, _)| k)
                .collect()
        };
        let mut index = (distance - 1) as usize;
        if skip_equal && rows.first().is_some_and(|k| k[..] == sel.key[..]) {
            index += 1;
        }
        if index < rows.len() {
            return (rows[index].clone(), 0);
        }
        let rest = (index - rows.len() + 1) as i32;
        if forward {
            (Bytes::copy_from_slice(end), rest)
        } else {
            (Bytes::copy_from_slice(begin), -rest)
        }
    }

    /// FDB's `readRange`: rows of `[begin, end)` at `v`, forwards when `limit > 0`, backwards
    /// when `limit < 0`, stopping once `|limit|` rows are read or the byte budget is spent (the
    /// row that crosses it is included). `more` is true exactly when a limit stopped it.
    pub fn read_range(
        &self,
        begin: &[u8],
        end: &[u8],
        limit: i32,
        limit_bytes: i32,
        v: Version,
    ) -> (Vec<KeyValue>, bool) {
        let mut rows_left = limit.unsigned_abs() as i64;
        let mut bytes_left = limit_bytes as i64;
        let mut out = Vec::new();
        if rows_left > 0 && bytes_left > 0 {
            for (k, val) in self.live(begin, end, v, limit < 0) {
                out.push(KeyValue {
                    key: k.clone(),
                    value: val.clone(),
                });
                rows_left -= 1;
                bytes_left -= (k.len() + val.len() + ROW_OVERHEAD_BYTES) as i64;
                if rows_left == 0 || bytes_left <= 0 {
                    break;
                }
            }
        }
        (out, rows_left == 0 || bytes_left <= 0)
    }

    /// What a storage server's byte sample holds for `[begin, end)` at `v`, keeping only the
    /// keys `keep` accepts (the server's own shards). FDB samples a key-value pair with
    /// probability `size / ((key + 100) * 250)` and weighs it `size / probability`
    /// (`isKeyValueInSample`); this sample is the limit of that: every pair, at its exact
    /// size `key + value`.
    pub fn byte_sample(
        &self,
        begin: &[u8],
        end: &[u8],
        v: Version,
        keep: impl Fn(&[u8]) -> bool,
    ) -> Vec<(Bytes, i64)> {
        self.live(begin, end, v, false)
            .filter(|(k, _)| keep(k))
            .map(|(k, val)| (k.clone(), (k.len() + val.len()) as i64))
            .filter(|(_, size)| *size > 0)
            .collect()
    }
}

/// `StorageServerMetrics::getSplitPoints` over a byte sample that starts at `begin` (and
/// reaches at least the first sampled key past `end`, if any): from `begin`, the next split
/// point is the sampled key in which the running total crosses `chunk_size` (skipped when it
/// is the current begin), as long as it is not past `end`. A negative `chunk_size` counts as
/// 0 (FDB would step backwards).
pub fn split_points(
    sample: &[(Bytes, i64)],
    begin: &[u8],
    end: &[u8],
    chunk_size: i64,
) -> Vec<Bytes> {
    let chunk = chunk_size.max(0);
    let mut out = Vec::new();
    let mut from = 0; // lower_bound(begin key) in the sample
    let mut begin_key: &[u8] = begin;
    loop {
        // `index(sumTo(lower_bound(begin)) + chunk)`.
        let mut acc = 0i64;
        let mut i = from;
        while i < sample.len() && acc.saturating_add(sample[i].1) <= chunk {
            acc += sample[i].1;
            i += 1;
        }
        if i < sample.len() && sample[i].0[..] == *begin_key {
            i += 1;
        }
        if i >= sample.len() || sample[i].0[..] > *end {
            return out;
        }
        out.push(sample[i].0.clone());
        begin_key = &sample[i].0;
        from = i;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(keys: &[&str]) -> Store {
        let mut s = Store::default();
        for k in keys {
            s.put(
                Bytes::copy_from_slice(k.as_bytes()),
                Some(Bytes::from_static(b"v")),
                10,
            );
        }
        s
    }

    fn sel(k: &str, or_equal: bool, offset: i32) -> KeySelector {
        KeySelector::new(Bytes::copy_from_slice(k.as_bytes()), or_equal, offset)
    }

    #[test]
    fn versions_and_clears() {
        let mut s = store(&["a", "b", "c"]);
        s.clear_range(b"a", b"c", 20);
        assert_eq!(s.get(b"a", 15), Some(Bytes::from_static(b"v")));
        assert_eq!(s.get(b"a", 20), None);
        assert_eq!(s.get(b"c", 20), Some(Bytes::from_static(b"v")));
        s.forget_before(25);
        assert_eq!(s.data.len(), 1);
    }

    #[test]
    fn find_key_inside_and_off_the_shard() {
        let s = store(&["b", "d", "f"]);
        let k = |sel: KeySelector| s.find_key(&sel, b"a", b"g", 10);
        assert_eq!(k(sel("d", false, 1)), (Bytes::from_static(b"d"), 0)); // fge
        assert_eq!(k(sel("d", true, 1)), (Bytes::from_static(b"f"), 0)); // fgt
        assert_eq!(k(sel("d", true, 0)), (Bytes::from_static(b"d"), 0)); // lle
        assert_eq!(k(sel("d", false, 0)), (Bytes::from_static(b"b"), 0)); // llt
        assert_eq!(k(sel("b", false, 0)), (Bytes::from_static(b"a"), -1));
        assert_eq!(k(sel("f", true, 1)), (Bytes::from_static(b"g"), 1));
        assert_eq!(k(sel("b", false, 3)), (Bytes::from_static(b"f"), 0));
        assert_eq!(k(sel("d", false, 3)), (Bytes::from_static(b"g"), 1));
        assert_eq!(k(sel("f", true, -2)), (Bytes::from_static(b"b"), 0));
        assert_eq!(k(sel("d", true, -2)), (Bytes::from_static(b"a"), -1));
    }

    /// FDB's own unit tests (`/fdbserver/StorageMetricSample/rangeSplitPoints/*` in
    /// `StorageMetrics.actor.cpp`), with the sample unit as 1.
    #[test]
    fn split_points_as_fdb_tests_them() {
        let sample = |w: [i64; 8]| -> Vec<(Bytes, i64)> {
            [
                "A", "Absolute", "Apple", "Bah", "Banana", "Bob", "But", "Cat",
            ]
            .iter()
            .zip(w)
            .map(|(k, w)| (Bytes::copy_from_slice(k.as_bytes()), w))
            .collect()
        };
        let big = sample([200, 800, 1000, 20, 80, 200, 100, 300]);
        let small = sample([20, 80, 10, 20, 80, 20, 10, 30]);
        let split = |s: &[(Bytes, i64)], chunk| -> Vec<String> {
            split_points(s, b"A", b"C", chunk)
                .iter()
                .map(|k| String::from_utf8(k.to_vec()).unwrap())
                .collect()
        };
        assert_eq!(split(&big, 2000), ["Bah"]);
        assert_eq!(split(&big, 600), ["Absolute", "Apple", "Bah"]);
        assert!(split(&big, 10000).is_empty());
        assert!(split(&small, 1000).is_empty());
        // Chunks are at most `chunk_size`, but for a single pair larger than that.
        assert_eq!(
            split(&big, 0),
            ["Absolute", "Apple", "Bah", "Banana", "Bob", "But"]
        );
        // A point equal to `end` is kept; one past it stops.
        assert_eq!(
            split_points(&big, b"A", b"Apple", 600),
            [
                Bytes::from_static(b"Absolute"),
                Bytes::from_static(b"Apple")
            ]
        );
        assert_eq!(
            split_points(&big, b"A", b"Ap", 600),
            [Bytes::from_static(b"Absolute")]
        );
    }

    #[test]
    fn byte_sample_is_every_live_pair() {
        let s = store(&["a", "bb", "c"]);
        let sample = s.byte_sample(b"a", b"z", 10, |k| k != b"c");
        assert_eq!(
            sample,
            vec![
                (Bytes::from_static(b"a"), 2),
                (Bytes::from_static(b"bb"), 3)
            ]
        );
    }

    #[test]
    fn read_range_limits() {
        let s = store(&["a", "b", "c", "d"]);
        let (rows, more) = s.read_range(b"a", b"z", 2, 1000, 10);
        assert_eq!(rows.len(), 2);
        assert!(more);
        let (rows, more) = s.read_range(b"a", b"z", 10, 1000, 10);
        assert_eq!(rows.len(), 4);
        assert!(!more);
        let (rows, more) = s.read_range(b"a", b"z", -10, 1, 10);
        assert_eq!(
            (rows[0].key.as_ref(), rows.len(), more),
            (&b"d"[..], 1, true)
        );
    }
}
