//! The range read as a whole: selectors, merged writes, unreadable ranges, reverse reads, over
//! a toy storage server.

use super::*;
use crate::keys::mutation_type as mt;
use alloc::vec;

fn b(s: &[u8]) -> Bytes {
    Bytes::copy_from_slice(s)
}
fn kv(k: &[u8]) -> KeyValue {
    KeyValue {
        key: b(k),
        value: b(b"v"),
    }
}

/// Rows of `keys`, each with the value `v`.
fn rows(keys: &[&[u8]]) -> Vec<KeyValue> {
    keys.iter().map(|k| kv(k)).collect()
}

/// An unlimited forward read between two selectors, below `\xff`.
fn read(begin: KeySelector, end: KeySelector) -> RangeRead {
    RangeRead::new(
        begin,
        end,
        RangeLimits::new(RangeLimits::UNLIMITED, RangeLimits::UNLIMITED),
        false,
        b(b"\xff"),
    )
}

/// A toy storage server: answers a native read the way NativeAPI would over one shard.
fn storage(data: &[KeyValue], r: &NativeRead) -> NativeResult {
    let resolve = |sel: &KeySelector| -> usize {
        // Index of the key the selector names in `data` (0..=len).
        let ge = data.partition_point(|kv| kv.key < sel.key);
        let base = if sel.or_equal {
            data.partition_point(|kv| kv.key <= sel.key)
        } else {
            ge
        };
        (base as i64 + sel.offset as i64 - 1).clamp(0, data.len() as i64) as usize
    };
    let (lo, hi) = (resolve(&r.begin), resolve(&r.end));
    let mut rows: Vec<KeyValue> = if lo < hi {
        data[lo..hi].to_vec()
    } else {
        Vec::new()
    };
    if r.reverse {
        rows.reverse();
    }
    let mut limits = r.limits;
    let mut n = 0;
    while n < rows.len() && !limits.is_reached() {
        limits.decrement(&rows[n]);
        n += 1;
        if limits.has_satisfied_min_rows() {
            break;
        }
    }
    let more = n < rows.len();
    rows.truncate(n);
    NativeResult {
        rows,
        more,
        ..NativeResult::default()
    }
}

fn run(
    r: &mut RangeRead,
    cache: &mut SnapshotCache,
    writes: &WriteMap,
    data: &[KeyValue],
) -> (RywResult, Vec<NativeRead>) {
    let mut reads = Vec::new();
    loop {
        match r.step(cache, writes).expect("readable") {
            Step::Done(res) => return (res, reads),
            Step::Native(n) => {
                let res = storage(data, &n);
                reads.push(n);
                r.feed(cache, res);
            }
        }
    }
}

fn keys(r: &RywResult) -> Vec<Bytes> {
    r.rows.iter().map(|kv| kv.key.clone()).collect()
}

#[test]
fn selectors_are_sent_to_storage_and_the_rows_cached() {
    let data = rows(&[b"a", b"b", b"c", b"d", b"e"]);
    let mut cache = SnapshotCache::default();
    let writes = WriteMap::new();
    // [first_greater_than(a) + 1, last_less_than(e)): c, d.
    let mut r = read(
        KeySelector::new(b(b"a\x00"), false, 2),
        KeySelector::new(b(b"e"), false, 0),
    );
    let (res, reads) = run(&mut r, &mut cache, &writes, &data);
    assert_eq!(keys(&res), vec![b(b"c")]);
    assert_eq!(reads.len(), 1);
    assert_eq!(reads[0].begin, KeySelector::new(b(b"a\x00"), false, 1));
    // The same read again is answered from the cache.
    let mut r = read(
        KeySelector::new(b(b"c"), false, 1),
        KeySelector::new(b(b"d"), false, 1),
    );
    let (res, reads) = run(&mut r, &mut cache, &writes, &data);
    assert_eq!(keys(&res), vec![b(b"c")]);
    assert!(reads.is_empty(), "answered from the cache: {reads:?}");
}

#[test]
fn own_writes_merge_and_a_compare_and_clear_counts_for_selectors() {
    let data = rows(&[b"a", b"c"]);
    let mut cache = SnapshotCache::default();
    let mut writes = WriteMap::new();
    writes.mutate(b(b"b"), mt::SET_VALUE, b(b"w"), true);
    writes.mutate(b(b"bb"), mt::COMPARE_AND_CLEAR, b(b"x"), true);
    let mut r = read(
        KeySelector::new(b(b""), false, 1),
        KeySelector::new(b(b"\xff"), false, 1),
    );
    let (res, _) = run(&mut r, &mut cache, &writes, &data);
    assert_eq!(keys(&res), vec![b(b"a"), b(b"b"), b(b"c")]);
    // Now everything is known: first_greater_or_equal(b) + 2 (offset 3) lands on c because the
    // compare_and_clear key `bb` that holds nothing still counts as a key (without it,
    // it would land past the end).
    let mut k = KeyRead::new(KeySelector::new(b(b"b"), false, 3), b(b"\xff"));
    let key = match k.step(&cache, &writes).unwrap() {
        Step::Done(key) => key,
        Step::Native(n) => panic!("no read needed: {n:?}"),
    };
    assert_eq!(key, b(b"c"));
}

#[test]
fn a_versionstamped_range_fails_only_when_reached() {
    let data = rows(&[b"a", b"b"]);
    let mut cache = SnapshotCache::default();
    let mut writes = WriteMap::new();
    writes.add_unmodified_and_unreadable_range(b"m", b"n");
    let mut r = read(
        KeySelector::new(b(b""), false, 1),
        KeySelector::new(b(b"c"), false, 1),
    );
    let (res, _) = run(&mut r, &mut cache, &writes, &data);
    assert_eq!(keys(&res), vec![b(b"a"), b(b"b")]);
    let mut r = read(
        KeySelector::new(b(b""), false, 1),
        KeySelector::new(b(b"z"), false, 1),
    );
    let mut outcome = Ok(());
    for _ in 0..10 {
        match r.step(&cache, &writes) {
            Err(e) => {
                outcome = Err(e);
                break;
            }
            Ok(Step::Done(_)) => break,
            Ok(Step::Native(n)) => {
                let res = storage(&data, &n);
                r.feed(&mut cache, res);
            }
        }
    }
    assert_eq!(outcome, Err(Unreadable));
}

#[test]
fn reverse_reads_walk_back_from_the_end() {
    let data = rows(&[b"a", b"b", b"c", b"d"]);
    let mut cache = SnapshotCache::default();
    let writes = WriteMap::new();
    let mut r = RangeRead::new(
        KeySelector::new(b(b"a"), false, 1),
        KeySelector::new(b(b"d"), false, 1),
        RangeLimits::new(2, RangeLimits::UNLIMITED),
        true,
        b(b"\xff"),
    );
    let (res, _) = run(&mut r, &mut cache, &writes, &data);
    assert_eq!(keys(&res), vec![b(b"c"), b(b"b")]);
    assert!(res.more);
    let c = range_conflict(
        &KeySelector::new(b(b"a"), false, 1),
        &KeySelector::new(b(b"d"), false, 1),
        true,
        &res,
        &b(b"\xff"),
    )
    .unwrap();
    assert_eq!(c, (b(b"b"), b(b"d")));
}
