//! What a range read asks for, as the bindings spell it: two key selectors and the limits of
//! `fdb_transaction_get_range`, built from Rust's range syntax (`a..b`, `a..=b`, `a..`, `..b`,
//! `..`), from a pair of keys or selectors, from a key prefix, or from a tuple [`Subspace`].

use alloc::vec::Vec;
use core::ops::{Range, RangeFrom, RangeFull, RangeInclusive, RangeTo, RangeToInclusive};

use super::scan::{RangeCursor, RangeOptions, StreamingMode};
use crate::event::RangeResult;
use crate::messages::types::KeySelector;
use crate::tuple::Subspace;

/// The end of the normal key space: an open range stops here.
const NORMAL_KEYS_END: &[u8] = b"\xff";

/// A range read: `[begin, end)` between two key selectors, with the caller's limits.
///
/// ```
/// use fdb_protocol::{KeySelector, Prefix, RangeOption, StreamingMode};
///
/// let all_users: RangeOption = Prefix("user/").into();
/// let some: RangeOption = (&b"a"[..]..&b"m"[..]).into();
/// let last_ten = RangeOption { limit: Some(10), ..RangeOption::from("log/".."log0") }.rev();
/// let from_a = RangeOption::from(b"a".to_vec()..);
/// assert_eq!(from_a.end, KeySelector::first_greater_or_equal(b"\xff"));
/// assert_eq!(some.mode, StreamingMode::Iterator);
/// # let _ = (all_users, last_ten);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct RangeOption {
    /// The first key of the range (resolved).
    pub begin: KeySelector,
    /// The key after the range (resolved).
    pub end: KeySelector,
    /// Most rows in all; `None` for no limit.
    pub limit: Option<usize>,
    /// A soft cap on the bytes of one batch (keys and values); 0 for none.
    pub target_bytes: usize,
    /// How eagerly each batch is fetched.
    pub mode: StreamingMode,
    /// Rows from the end of the range backwards.
    pub reverse: bool,
}

impl Default for RangeOption {
    /// The empty range `["", "")`, in the default (`iterator`) mode.
    fn default() -> Self {
        RangeOption {
            begin: KeySelector::first_greater_or_equal(b""),
            end: KeySelector::first_greater_or_equal(b""),
            limit: None,
            target_bytes: 0,
            mode: StreamingMode::Iterator,
            reverse: false,
        }
    }
}

impl RangeOption {
    /// Every key starting with `prefix` (`[prefix, strinc(prefix))`; the empty prefix is the
    /// whole normal key space).
    pub fn prefix(prefix: impl AsRef<[u8]>) -> RangeOption {
        let p = prefix.as_ref();
        RangeOption::from((p, prefix_end(p).as_slice()))
    }

    /// The same range read the other way round.
    pub fn rev(mut self) -> Self {
        self.reverse = !self.reverse;
        self
    }

    /// The arguments of the `iteration`-th `fdb_transaction_get_range` call of this read
    /// (1-based; it only matters to the `iterator` mode).
    pub fn batch(&self, iteration: usize) -> RangeOptions {
        RangeOptions {
            limit: self.limit.unwrap_or(0),
            target_bytes: self.target_bytes,
            mode: self.mode,
            iteration: u32::try_from(iteration).unwrap_or(u32::MAX),
            reverse: self.reverse,
        }
    }

    /// The read batch by batch, as the bindings' iterators walk it.
    pub fn cursor(self) -> RangeCursor {
        let opts = self.batch(1);
        RangeCursor::new(self.begin, self.end, opts)
    }

    /// The rest of the range after `batch` (the first batch of this range): `None` when the
    /// read is complete (no more rows, or the limit reached). foundationdb-rs's
    /// `RangeOption::next_range`; [`RangeOption::cursor`] does the same and counts iterations.
    pub fn next_range(mut self, batch: &RangeResult) -> Option<Self> {
        let last = batch.rows.last().filter(|_| batch.more)?;
        if let Some(limit) = self.limit.as_mut() {
            *limit = limit.saturating_sub(batch.rows.len());
            if *limit == 0 {
                return None;
            }
        }
        if self.reverse {
            self.end = KeySelector::first_greater_or_equal(&last.key);
        } else {
            self.begin = KeySelector::first_greater_than(&last.key);
        }
        Some(self)
    }
}

/// `strinc`: the first key after every key starting with `prefix` (trailing `\xff` bytes
/// dropped, the last byte incremented). A prefix of only `\xff` bytes (or none) ends where the
/// normal key space ends for the empty prefix, and at `prefix + \xff` otherwise.
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let trimmed = match prefix.iter().rposition(|&b| b != 0xff) {
        Some(i) => &prefix[..=i],
        None if prefix.is_empty() => return NORMAL_KEYS_END.to_vec(),
        None => {
            let mut e = prefix.to_vec();
            e.push(0xff);
            return e;
        }
    };
    let mut e = trimmed.to_vec();
    if let Some(last) = e.last_mut() {
        *last += 1;
    }
    e
}

/// Every key that starts with the wrapped prefix, as a [`RangeOption`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prefix<K>(pub K);

impl<K: AsRef<[u8]>> From<Prefix<K>> for RangeOption {
    fn from(p: Prefix<K>) -> Self {
        RangeOption::prefix(p.0)
    }
}

impl From<&Subspace> for RangeOption {
    /// The keys of a tuple subspace (`Subspace::range`: the prefix's `\x00..\xff`).
    fn from(s: &Subspace) -> Self {
        let (b, e) = s.range();
        RangeOption::from((b, e))
    }
}

impl From<(KeySelector, KeySelector)> for RangeOption {
    fn from((begin, end): (KeySelector, KeySelector)) -> Self {
        RangeOption {
            begin,
            end,
            ..RangeOption::default()
        }
    }
}

impl From<Range<KeySelector>> for RangeOption {
    fn from(r: Range<KeySelector>) -> Self {
        RangeOption::from((r.start, r.end))
    }
}

impl<K: AsRef<[u8]>> From<(K, K)> for RangeOption {
    /// `[begin, end)`.
    fn from((begin, end): (K, K)) -> Self {
        RangeOption::from((
            KeySelector::first_greater_or_equal(begin),
            KeySelector::first_greater_or_equal(end),
        ))
    }
}

impl<K: AsRef<[u8]>> From<Range<K>> for RangeOption {
    /// `begin..end`: `[begin, end)`.
    fn from(r: Range<K>) -> Self {
        RangeOption::from((r.start, r.end))
    }
}

impl<K: AsRef<[u8]>> From<RangeInclusive<K>> for RangeOption {
    /// `begin..=end`: `[begin, end]` (up to the first key after `end`).
    fn from(r: RangeInclusive<K>) -> Self {
        let (begin, end) = r.into_inner();
        RangeOption::from((
            KeySelector::first_greater_or_equal(begin),
            KeySelector::first_greater_than(end),
        ))
    }
}

impl<K: AsRef<[u8]>> From<RangeFrom<K>> for RangeOption {
    /// `begin..`: from `begin` to the end of the normal key space (`\xff`).
    fn from(r: RangeFrom<K>) -> Self {
        RangeOption::from((r.start.as_ref(), NORMAL_KEYS_END))
    }
}

impl<K: AsRef<[u8]>> From<RangeTo<K>> for RangeOption {
    /// `..end`: from the first key to `end`.
    fn from(r: RangeTo<K>) -> Self {
        RangeOption::from((&b""[..], r.end.as_ref()))
    }
}

impl<K: AsRef<[u8]>> From<RangeToInclusive<K>> for RangeOption {
    /// `..=end`: from the first key through `end`.
    fn from(r: RangeToInclusive<K>) -> Self {
        RangeOption::from((
            KeySelector::first_greater_or_equal(b""),
            KeySelector::first_greater_than(r.end),
        ))
    }
}

impl From<RangeFull> for RangeOption {
    /// `..`: the whole normal key space `["", \xff)`.
    fn from(_: RangeFull) -> Self {
        RangeOption::from((&b""[..], NORMAL_KEYS_END))
    }
}

impl From<crate::messages::types::KeyRange> for RangeOption {
    fn from(r: crate::messages::types::KeyRange) -> Self {
        RangeOption::from((r.begin, r.end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use bytes::Bytes;

    fn sel(k: &[u8]) -> KeySelector {
        KeySelector::first_greater_or_equal(k)
    }

    #[test]
    fn rust_ranges_become_selectors() {
        let r = RangeOption::from(&b"a"[..]..&b"c"[..]);
        assert_eq!((r.begin, r.end), (sel(b"a"), sel(b"c")));
        let r = RangeOption::from(&b"a"[..]..=&b"c"[..]);
        assert_eq!(r.end, KeySelector::first_greater_than(b"c"));
        let r = RangeOption::from("k"..);
        assert_eq!((r.begin, r.end), (sel(b"k"), sel(b"\xff")));
        let r = RangeOption::from(..vec![5u8]);
        assert_eq!((r.begin, r.end), (sel(b""), sel(&[5])));
        let r = RangeOption::from(..=b"z".as_slice());
        assert_eq!(r.end, KeySelector::first_greater_than(b"z"));
        let r = RangeOption::from(..);
        assert_eq!((r.begin, r.end), (sel(b""), sel(b"\xff")));
        let r = RangeOption::from((sel(b"x"), sel(b"y")));
        assert_eq!(
            (r.limit, r.reverse, r.mode),
            (None, false, StreamingMode::Iterator)
        );
    }

    #[test]
    fn prefixes_end_at_strinc() {
        assert_eq!(RangeOption::prefix(b"ab").end, sel(b"ac"));
        assert_eq!(RangeOption::prefix(b"a\xff\xff").end, sel(b"b"));
        assert_eq!(RangeOption::prefix(b"").end, sel(b"\xff"));
        assert_eq!(RangeOption::prefix(b"\xff").end, sel(b"\xff\xff"));
        let p: RangeOption = Prefix("user/").into();
        assert_eq!((p.begin, p.end), (sel(b"user/"), sel(b"user0")));
        let s = Subspace::from_bytes(b"s".to_vec());
        let r = RangeOption::from(&s);
        assert_eq!((r.begin, r.end), (sel(b"s\x00"), sel(b"s\xff")));
    }

    #[test]
    fn next_range_continues_after_the_last_row_within_the_limit() {
        let kv = |k: &'static [u8]| crate::messages::types::KeyValue {
            key: Bytes::from_static(k),
            value: Bytes::new(),
        };
        let r = RangeOption {
            limit: Some(3),
            ..RangeOption::from(&b"a"[..]..&b"z"[..])
        };
        let batch = RangeResult {
            rows: vec![kv(b"b"), kv(b"c")],
            more: true,
        };
        let next = r.clone().next_range(&batch).expect("more to read");
        assert_eq!(next.begin, KeySelector::first_greater_than(b"c"));
        assert_eq!(next.limit, Some(1));
        let done = RangeResult {
            rows: vec![kv(b"b")],
            more: false,
        };
        assert!(r.clone().next_range(&done).is_none());
        let rev = r.rev().next_range(&batch).expect("more to read");
        assert_eq!(rev.end, sel(b"c"));
        assert_eq!(rev.begin, sel(b"a"));
    }
}
