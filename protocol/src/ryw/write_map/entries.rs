//! The map's entries in key order: a skip list whose nodes all live in one vector and link
//! to each other by index. A batch of a thousand sets then costs a handful of allocations
//! (the vector doubling) where a `BTreeMap` took one per node, about one per six keys; a
//! step to the next or previous entry is one index, and a copy of the map (a write while a
//! read holds it) is two vectors.

use alloc::vec::Vec;
use bytes::Bytes;
use core::cmp::Ordering;

use super::WriteEntry;
use crate::ryw::cmp_bytes;

/// No node: the end of a level, or the list's head as a predecessor.
const NIL: u32 = u32::MAX;
/// Levels at most; with one node in four going up a level that is plenty for any
/// transaction (a transaction holds at most 10 MB of writes).
const MAX_LEVEL: usize = 16;
/// While the map is this small every new node gets one level: a short walk is as quick as
/// a search, and the upper links need no vector of their own.
const FLAT: usize = 16;
/// Room a copied map starts with: the first writes of a transaction fill it before the
/// vector grows (a node is about 100 bytes).
const FIRST_NODES: usize = 16;

#[derive(Clone, Debug)]
struct Node {
    key: Bytes,
    entry: WriteEntry,
    /// Level 0, both ways: walking the map never searches.
    next: u32,
    prev: u32,
    /// Where this node's links of levels 1 and up start in `Entries::tower`.
    tower: u32,
    height: u8,
}

/// An ordered map from keys to [`WriteEntry`]s; positions are node indices, stable until
/// the map is changed.
#[derive(Debug)]
pub(super) struct Entries {
    nodes: Vec<Node>,
    /// The links of levels 1 and up of the nodes taller than one level.
    tower: Vec<u32>,
    /// The first node of each level.
    head: [u32; MAX_LEVEL],
    /// Levels in use (at least 1).
    levels: usize,
    /// Removed nodes by height, chained through `next`, for the next insert of that height
    /// (their tower slots go with them).
    free: [u32; MAX_LEVEL],
    len: usize,
    /// The entries' key bytes, for sizing what the write-out builds from them.
    key_bytes: usize,
    /// Draws the node heights; a copy of the map draws what the original would have.
    rng: u64,
}

impl Clone for Entries {
    fn clone(&self) -> Self {
        // A map copied to take its first write (the blank one) gets room for a few more.
        let mut nodes = Vec::with_capacity(self.nodes.len().max(FIRST_NODES));
        nodes.extend(self.nodes.iter().cloned());
        Entries {
            nodes,
            tower: self.tower.clone(),
            head: self.head,
            levels: self.levels,
            free: self.free,
            len: self.len,
            key_bytes: self.key_bytes,
            rng: self.rng,
        }
    }
}

impl Entries {
    pub(super) fn new() -> Self {
        Entries {
            nodes: Vec::new(),
            tower: Vec::new(),
            head: [NIL; MAX_LEVEL],
            levels: 1,
            free: [NIL; MAX_LEVEL],
            len: 0,
            key_bytes: 0,
            rng: 0x2545_f491_4f6c_dd1d,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn key_bytes(&self) -> usize {
        self.key_bytes
    }

    pub(super) fn key(&self, at: u32) -> &Bytes {
        &self.nodes[at as usize].key
    }

    pub(super) fn entry(&self, at: u32) -> &WriteEntry {
        &self.nodes[at as usize].entry
    }

    pub(super) fn first(&self) -> Option<u32> {
        some(self.head[0])
    }

    pub(super) fn next(&self, at: u32) -> Option<u32> {
        some(self.nodes[at as usize].next)
    }

    pub(super) fn prev(&self, at: u32) -> Option<u32> {
        some(self.nodes[at as usize].prev)
    }

    /// The last entry whose key is at most `key`.
    pub(super) fn floor(&self, key: &[u8]) -> Option<u32> {
        some(self.last_where(|k| cmp_bytes(k, key).is_le(), None))
    }

    /// Sets `key`'s entry; a key already there keeps its buffer (as `BTreeMap::insert` does).
    pub(super) fn insert(&mut self, key: Bytes, entry: WriteEntry) {
        let mut preds = [NIL; MAX_LEVEL];
        let p = self.last_where(|k| cmp_bytes(k, &key).is_lt(), Some(&mut preds));
        let after = self.link(p, 0);
        if after != NIL && cmp_bytes(self.key(after), &key) == Ordering::Equal {
            self.nodes[after as usize].entry = entry;
            return;
        }
        let h = self.draw_height();
        if h > self.levels {
            // `preds` reads NIL (the head) there already.
            self.levels = h;
        }
        let at = self.new_node(key, entry, h);
        for (l, &p) in preds.iter().enumerate().take(h) {
            let n = self.link(p, l);
            self.set_link(at, l, n);
            self.set_link(p, l, at);
        }
        self.nodes[at as usize].prev = p;
        if after != NIL {
            self.nodes[after as usize].prev = at;
        }
        self.len += 1;
    }

    /// [`Entries::insert`] where the caller has just found `floor`, the last entry whose key
    /// is at most `key`: a node of one level (three in four) goes in after it without a
    /// second search.
    pub(super) fn insert_at(&mut self, floor: u32, key: Bytes, entry: WriteEntry) {
        let order = cmp_bytes(self.key(floor), &key);
        if order == Ordering::Equal {
            self.nodes[floor as usize].entry = entry;
            return;
        }
        let after = self.nodes[floor as usize].next;
        let fits = order.is_lt() && (after == NIL || cmp_bytes(self.key(after), &key).is_gt());
        if !fits || self.peek_height() > 1 {
            return self.insert(key, entry);
        }
        self.draw_height();
        let at = self.new_node(key, entry, 1);
        let node = &mut self.nodes[at as usize];
        node.next = after;
        node.prev = floor;
        self.nodes[floor as usize].next = at;
        if after != NIL {
            self.nodes[after as usize].prev = at;
        }
        self.len += 1;
    }

    /// Removes `key`'s entry, if any.
    pub(super) fn remove(&mut self, key: &[u8]) {
        self.remove_range(|k| cmp_bytes(k, key).is_lt(), |k| cmp_bytes(k, key).is_le());
    }

    /// Removes every entry from the first key that is not `before` on while `until` holds
    /// (keys in `[lo, hi)` for `k < lo` and `k < hi`).
    pub(super) fn remove_range(
        &mut self,
        before: impl Fn(&[u8]) -> bool,
        until: impl Fn(&[u8]) -> bool,
    ) {
        let mut preds = [NIL; MAX_LEVEL];
        let p = self.last_where(before, Some(&mut preds));
        let mut at = self.link(p, 0);
        while at != NIL && until(self.key(at)) {
            let node = &self.nodes[at as usize];
            let (h, next) = (usize::from(node.height), node.next);
            // Every node between `preds[l]` and this one on level `l` is gone already.
            for (l, &p) in preds.iter().enumerate().take(h) {
                let n = self.link(at, l);
                self.set_link(p, l, n);
            }
            self.release(at, h);
            at = next;
        }
        if at != NIL {
            self.nodes[at as usize].prev = p;
        }
        while self.levels > 1 && self.head[self.levels - 1] == NIL {
            self.levels -= 1;
        }
    }

    /// The last node whose key is `before` (`NIL`: none), and with `preds` that node on
    /// every level in use.
    fn last_where(
        &self,
        before: impl Fn(&[u8]) -> bool,
        mut preds: Option<&mut [u32; MAX_LEVEL]>,
    ) -> u32 {
        let mut p = NIL;
        for l in (0..self.levels).rev() {
            loop {
                let n = self.link(p, l);
                if n == NIL || !before(self.key(n)) {
                    break;
                }
                p = n;
            }
            if let Some(preds) = preds.as_deref_mut() {
                preds[l] = p;
            }
        }
        p
    }

    /// The next node on level `l` after `at` (`NIL`: after the head).
    fn link(&self, at: u32, l: usize) -> u32 {
        if at == NIL {
            self.head[l]
        } else if l == 0 {
            self.nodes[at as usize].next
        } else {
            self.tower[self.nodes[at as usize].tower as usize + l - 1]
        }
    }

    fn set_link(&mut self, at: u32, l: usize, to: u32) {
        if at == NIL {
            self.head[l] = to;
        } else if l == 0 {
            self.nodes[at as usize].next = to;
        } else {
            let t = self.nodes[at as usize].tower as usize;
            self.tower[t + l - 1] = to;
        }
    }

    /// One level, and one more with probability 1/4 each (xorshift; deterministic).
    fn draw_height(&mut self) -> usize {
        let h = self.peek_height();
        if self.len >= FLAT {
            self.rng = step(self.rng);
        }
        h
    }

    /// The height [`Entries::draw_height`] draws next.
    fn peek_height(&self) -> usize {
        if self.len < FLAT {
            return 1;
        }
        (1 + step(self.rng).trailing_zeros() as usize / 2).min(MAX_LEVEL)
    }

    fn new_node(&mut self, key: Bytes, entry: WriteEntry, h: usize) -> u32 {
        self.key_bytes += key.len();
        let reused = self.free[h - 1];
        if reused != NIL {
            let node = &mut self.nodes[reused as usize];
            self.free[h - 1] = node.next;
            node.key = key;
            node.entry = entry;
            return reused;
        }
        let tower = self.tower.len();
        if h > 1 {
            if self.tower.capacity() - tower < h - 1 {
                // About one link for every three nodes: grow with the node vector, not by
                // doubling from nothing.
                self.tower.reserve((h - 1).max(self.nodes.capacity() / 2));
            }
            self.tower.resize(tower + h - 1, NIL);
        }
        let at = u32::try_from(self.nodes.len()).expect("fewer than 2^32 write map entries");
        self.nodes.push(Node {
            key,
            entry,
            next: NIL,
            prev: NIL,
            tower: u32::try_from(tower).expect("fewer than 2^32 links"),
            height: h as u8,
        });
        at
    }

    /// Puts an unlinked node on its height's free list, letting go of its key and entry.
    fn release(&mut self, at: u32, h: usize) {
        let node = &mut self.nodes[at as usize];
        self.key_bytes -= node.key.len();
        node.key = Bytes::new();
        node.entry = WriteEntry::default();
        node.next = self.free[h - 1];
        node.prev = NIL;
        self.free[h - 1] = at;
        self.len -= 1;
    }
}

fn step(mut x: u64) -> u64 {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}

fn some(at: u32) -> Option<u32> {
    (at != NIL).then_some(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::collections::BTreeMap;
    use alloc::vec;

    fn entry(n: u8) -> WriteEntry {
        let mut e = WriteEntry::default();
        e.stack.push(super::super::RywMutation::new(
            crate::keys::mutation_type::SET_VALUE,
            Some(Bytes::from(vec![n])),
        ));
        e
    }

    fn contents(m: &Entries) -> Vec<(Bytes, WriteEntry)> {
        let mut out = Vec::new();
        let mut at = m.first();
        while let Some(i) = at {
            out.push((m.key(i).clone(), m.entry(i).clone()));
            at = m.next(i);
        }
        // Backwards, the same.
        let mut back = Vec::new();
        let mut at = out.last().map(|_| {
            let mut i = m.first().unwrap();
            while let Some(n) = m.next(i) {
                i = n;
            }
            i
        });
        while let Some(i) = at {
            back.push(m.key(i).clone());
            at = m.prev(i);
        }
        back.reverse();
        assert_eq!(back, out.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>());
        out
    }

    /// Random inserts, removals, range removals and floors against a `BTreeMap`, on few
    /// distinct keys (many hits) and many; copies taken along the way must not change.
    #[test]
    fn equals_a_btree_map() {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut draw = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        for (round, space) in [(0, 8u64), (1, 64), (2, 3000), (3, 40)]
            .into_iter()
            .cycle()
            .take(12)
        {
            let mut m = Entries::new();
            let mut model: BTreeMap<Bytes, WriteEntry> = BTreeMap::new();
            let key = |k: u64| Bytes::from(alloc::format!("k{k:05}").into_bytes());
            let mut copy: Option<(Entries, Vec<(Bytes, WriteEntry)>)> = None;
            for step in 0..4000 {
                match draw(10) {
                    0..=5 => {
                        let (k, e) = (key(draw(space)), entry(draw(200) as u8));
                        match m.floor(&k) {
                            Some(f) if draw(2) == 0 => m.insert_at(f, k.clone(), e.clone()),
                            _ => m.insert(k.clone(), e.clone()),
                        }
                        model.insert(k, e);
                    }
                    6 => {
                        let k = key(draw(space));
                        m.remove(&k);
                        model.remove(&k);
                    }
                    7 => {
                        let (a, b) = (key(draw(space)), key(draw(space)));
                        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                        m.remove_range(|k| k < &lo[..], |k| k < &hi[..]);
                        model.retain(|k, _| k < &lo || k >= &hi);
                    }
                    8 => {
                        let k = key(draw(space + 1));
                        let want = model.range(..=k.clone()).next_back().map(|(k, _)| k);
                        assert_eq!(m.floor(&k).map(|i| m.key(i)), want, "{round} {step}");
                    }
                    _ => {
                        if let Some((c, seen)) = &copy {
                            assert_eq!(&contents(c), seen);
                        }
                        copy = Some((m.clone(), contents(&m)));
                    }
                }
                assert_eq!(m.len(), model.len());
                assert_eq!(m.key_bytes(), model.keys().map(|k| k.len()).sum::<usize>());
            }
            let want: Vec<_> = model.into_iter().collect();
            assert_eq!(contents(&m), want, "round {round}");
        }
    }

    #[test]
    fn grows_by_doubling_only() {
        let mut m = Entries::new();
        for i in 0..1000u32 {
            m.insert(Bytes::from(i.to_be_bytes().to_vec()), WriteEntry::default());
        }
        assert_eq!(m.len(), 1000);
        assert!(m.levels > 2, "{}", m.levels);
        assert!(m.tower.len() < 600, "{}", m.tower.len());
    }
}
