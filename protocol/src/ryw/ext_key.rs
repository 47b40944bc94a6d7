//! Segment boundaries as RYW names them (`ExtStringRef` in `SnapshotCache.h`): a stored key
//! followed by some zero bytes. `k\0` is the end of the single-key segment `[k, k\0)`; keeping
//! it as `(k, 1)` lets iterators walk row by row without building a new key for every row.

use bytes::{Bytes, BytesMut};
use core::cmp::Ordering;

/// A key borrowed from the write map, the snapshot cache or a selector, plus trailing zeros.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ExtKey<'a> {
    base: &'a Bytes,
    zeros: usize,
}

impl<'a> ExtKey<'a> {
    pub(crate) fn new(base: &'a Bytes, zeros: usize) -> Self {
        ExtKey { base, zeros }
    }

    pub(crate) fn of(base: &'a Bytes) -> Self {
        ExtKey { base, zeros: 0 }
    }

    pub(crate) fn len(self) -> usize {
        self.base.len() + self.zeros
    }

    /// The smallest key after this one.
    pub(crate) fn key_after(self) -> Self {
        ExtKey {
            base: self.base,
            zeros: self.zeros + 1,
        }
    }

    /// Is `self` exactly `s` followed by one zero byte?
    pub(crate) fn is_key_after(self, s: ExtKey<'_>) -> bool {
        if self.len() != s.len() + 1 {
            return false;
        }
        if self.zeros == 0 && self.base.last() != Some(&0) {
            return false;
        }
        self.starts_with(s)
    }

    fn starts_with(self, s: ExtKey<'_>) -> bool {
        if self.len() < s.len() {
            return false;
        }
        let common = self.base.len().min(s.base.len());
        // Past the shorter base, the prefix must be zeros on both sides.
        let tail_self = &self.base[common..self.base.len().min(s.len())];
        let tail_s = &s.base[common..];
        tail_self.iter().all(|&b| b == 0)
            && tail_s.iter().all(|&b| b == 0)
            && self.base[..common] == s.base[..common]
    }

    /// The key as bytes: no copy unless zeros must be appended.
    pub(crate) fn to_bytes(self) -> Bytes {
        if self.zeros == 0 {
            return self.base.clone();
        }
        let mut v = alloc::vec::Vec::with_capacity(self.len());
        v.extend_from_slice(self.base);
        v.resize(self.len(), 0);
        Bytes::from(v)
    }

    /// The key as bytes, a slice of `arena` where zeros must be appended (many keys, few
    /// allocations).
    pub(crate) fn to_bytes_in(self, arena: &mut KeyArena) -> Bytes {
        if self.zeros == 0 {
            return self.base.clone();
        }
        arena.build(self)
    }

    /// Compares with a plain key.
    pub(crate) fn cmp_key(self, key: &[u8]) -> Ordering {
        compare(self.base, self.zeros, key, 0)
    }
}

/// The empty key, its pointer into a static. `Bytes::new()` and `b""` point at address 1,
/// and glibc's AVX-512 `memcmp` (Debian 12's 2.36) still does its masked load there when the
/// length is 0: the load touches the unmapped first page and costs a microcode assist,
/// 40–200 ns instead of 2 ns. The sentinels at the start of the write map and the snapshot
/// cache are compared in every search of those maps (`BTreeMap` calls `memcmp`), so they
/// take this one.
pub(crate) fn empty_key() -> Bytes {
    static NUL: [u8; 1] = [0];
    Bytes::from_static(&NUL[..0])
}

/// `a.cmp(b)` for keys, without calling `memcmp` for short ones: the keys RYW compares are
/// mostly a few dozen bytes, where the call costs more than the comparison, and glibc's
/// AVX-512 `memcmp` (Debian 12's 2.36) takes ~200 ns instead of ~2 ns when a short input ends
/// within 32 bytes of an unmapped page (its masked load faults in the microcode), which the
/// newest allocation of a thread's heap often does.
pub(crate) fn cmp_bytes(a: &[u8], b: &[u8]) -> Ordering {
    let common = a.len().min(b.len());
    if common > 64 {
        return a.cmp(b);
    }
    let (x, y) = (&a[..common], &b[..common]);
    let mut i = 0;
    while i + 8 <= common {
        let (u, v) = (be_u64(&x[i..i + 8]), be_u64(&y[i..i + 8]));
        if u != v {
            return u.cmp(&v);
        }
        i += 8;
    }
    if i < common {
        if common >= 8 {
            // The last eight bytes, overlapping some found equal already, in one compare
            // instead of a byte loop: sorted keys share long prefixes, so the difference is
            // mostly in this tail (a range reply's order check: ~90 -> ~40 instructions a key).
            let t = common - 8;
            let (u, v) = (be_u64(&x[t..]), be_u64(&y[t..]));
            if u != v {
                return u.cmp(&v);
            }
        } else {
            for (p, q) in x.iter().zip(y) {
                if p != q {
                    return p.cmp(q);
                }
            }
        }
    }
    a.len().cmp(&b.len())
}

fn be_u64(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(b);
    u64::from_be_bytes(w)
}

fn compare(a: &[u8], az: usize, b: &[u8], bz: usize) -> Ordering {
    let common = a.len().min(b.len());
    match cmp_bytes(&a[..common], &b[..common]) {
        Ordering::Equal => {}
        o => return o,
    }
    // The longer base continues against the other side's zeros.
    if a[common..].iter().any(|&x| x != 0) {
        return Ordering::Greater;
    }
    if b[common..].iter().any(|&x| x != 0) {
        return Ordering::Less;
    }
    (a.len() + az).cmp(&(b.len() + bz))
}

/// Chunks the keys with appended zeros are cut from ([`ExtKey::to_bytes_in`]): a walk that
/// writes out a key's end `k\0` for each of many keys allocates once per chunk, not per key.
#[derive(Debug, Default)]
pub(crate) struct KeyArena {
    buf: BytesMut,
    /// The size of the current chunk (`buf.capacity()` is only what is left of it).
    chunk: usize,
}

impl KeyArena {
    // A commit's conflict-range ends for fifty keys of a few dozen bytes fit the first chunk
    // (each chunk is two allocations: the buffer and its shared header).
    const FIRST_CHUNK: usize = 4096;
    const MAX_CHUNK: usize = 64 * 1024;

    /// An arena whose first chunk holds `bytes` (within the usual chunk sizes): a walk that
    /// knows roughly what it will build takes one chunk, not a doubling series of them.
    pub(crate) fn for_bytes(bytes: usize) -> Self {
        KeyArena {
            buf: BytesMut::new(),
            // The first `build` doubles this.
            chunk: bytes.clamp(Self::FIRST_CHUNK, Self::MAX_CHUNK).div_ceil(2),
        }
    }

    fn build(&mut self, k: ExtKey<'_>) -> Bytes {
        let n = k.len();
        if self.buf.capacity() - self.buf.len() < n {
            self.chunk = (self.chunk * 2)
                .clamp(Self::FIRST_CHUNK, Self::MAX_CHUNK)
                .max(n);
            self.buf = BytesMut::with_capacity(self.chunk);
        }
        self.buf.extend_from_slice(k.base);
        self.buf.resize(self.buf.len() + k.zeros, 0);
        self.buf.split().freeze()
    }
}

impl PartialEq for ExtKey<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for ExtKey<'_> {}

impl PartialOrd for ExtKey<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ExtKey<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        compare(self.base, self.zeros, other.base, other.zeros)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    /// `cmp_bytes` orders as slices do, at every length around its 8-byte steps and its
    /// 64-byte cut-over.
    #[test]
    fn cmp_bytes_orders_as_slices_do() {
        let mut keys: Vec<Vec<u8>> = Vec::new();
        for len in [0usize, 1, 7, 8, 9, 15, 16, 17, 22, 63, 64, 65, 80] {
            let base: Vec<u8> = (0..len).map(|i| b'a' + (i % 7) as u8).collect();
            keys.push(base.clone());
            for at in [0, len / 2, len.saturating_sub(1)] {
                if at < len {
                    for d in [0u8, 0xff] {
                        let mut k = base.clone();
                        k[at] = d;
                        keys.push(k);
                    }
                }
            }
        }
        for a in &keys {
            for b in &keys {
                assert_eq!(cmp_bytes(a, b), a.cmp(b), "{a:?} vs {b:?}");
            }
        }
    }

    /// Every pair of short keys with up to two zeros compares as the bytes they stand for.
    #[test]
    fn compares_like_the_keys_it_stands_for() {
        let bases: Vec<Bytes> = [
            &b""[..],
            b"\x00",
            b"a",
            b"a\x00",
            b"a\x00\x00",
            b"\x00a",
            b"ab",
        ]
        .iter()
        .map(|b| Bytes::copy_from_slice(b))
        .collect();
        let mut all = Vec::new();
        for b in &bases {
            for z in 0..3 {
                all.push((ExtKey::new(b, z), ExtKey::new(b, z).to_bytes()));
            }
        }
        for (x, xb) in &all {
            for (y, yb) in &all {
                assert_eq!(x.cmp(y), xb.cmp(yb), "{xb:?} vs {yb:?}");
                assert_eq!(x.cmp_key(yb), xb.cmp(yb));
                let after = xb.len() == yb.len() + 1 && xb.ends_with(&[0]) && xb.starts_with(yb);
                assert_eq!(x.is_key_after(*y), after, "{xb:?} after {yb:?}");
            }
        }
        // Built in an arena, the same bytes.
        let mut arena = KeyArena::default();
        for (x, xb) in &all {
            assert_eq!(&x.to_bytes_in(&mut arena), xb);
        }
        // Chunks grow: many keys take a few chunks, each twice the last.
        let long = Bytes::from(alloc::vec![7u8; 100]);
        for _ in 0..1000 {
            assert_eq!(ExtKey::new(&long, 1).to_bytes_in(&mut arena).len(), 101);
        }
        assert!(arena.chunk >= 8 * KeyArena::FIRST_CHUNK, "{}", arena.chunk);
    }
}
