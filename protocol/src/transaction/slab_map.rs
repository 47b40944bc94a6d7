//! Maps whose values stay put: the live transactions and the operations in flight.

use alloc::collections::{btree_map, BTreeMap};
use core::ops::Index;
use slab::Slab;

/// A map from ids to values that are each in a slot that stays put while they live.
///
/// A transaction ([`super::state::Tx`]) is about a kilobyte, an operation ([`super::ops::Op`])
/// nearly as much. Kept as a `BTreeMap`'s values, each insert and remove moved the neighbours
/// in the node (kilobytes of `memmove` per transaction: 1–2 % of the client's samples in
/// `range100` and `set100`). The map holds slot numbers only, into a [`Slab`]: a value is
/// moved in once and taken out when it goes, and freed slots are reused, so a
/// value costs no allocation of its own. Iteration is in id order, as the `BTreeMap`'s was.
#[derive(Debug)]
pub(crate) struct SlabMap<K, V> {
    index: BTreeMap<K, usize>,
    slots: Slab<V>,
}

impl<K, V> Default for SlabMap<K, V> {
    fn default() -> Self {
        SlabMap {
            index: BTreeMap::new(),
            slots: Slab::new(),
        }
    }
}

impl<K: Ord + Copy, V> SlabMap<K, V> {
    /// Slots kept when the map empties; a larger slab (after a burst) is given back then.
    const KEPT_SLOTS: usize = 64;

    pub(crate) fn get(&self, id: &K) -> Option<&V> {
        self.slots.get(*self.index.get(id)?)
    }

    pub(crate) fn get_mut(&mut self, id: &K) -> Option<&mut V> {
        self.slots.get_mut(*self.index.get(id)?)
    }

    pub(crate) fn contains_key(&self, id: &K) -> bool {
        self.index.contains_key(id)
    }

    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    /// Adds `value` as `id` (replacing the value of that id, if any).
    pub(crate) fn insert(&mut self, id: K, value: V) {
        match self.index.get(&id) {
            Some(&i) => self.slots[i] = value,
            None => {
                let i = self.slots.insert(value);
                self.index.insert(id, i);
            }
        }
    }

    /// Takes the value of `id` out, if there is one.
    pub(crate) fn remove(&mut self, id: &K) -> Option<V> {
        let i = self.index.remove(id)?;
        let value = self.slots.try_remove(i);
        self.release();
        value
    }

    /// An emptied map gives back a slab grown by a burst.
    fn release(&mut self) {
        if self.index.is_empty() && self.slots.capacity() > Self::KEPT_SLOTS {
            self.slots = Slab::new();
        }
    }

    /// The ids and values, in id order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&K, &V)> + '_ {
        self.index
            .iter()
            .filter_map(|(k, &i)| Some((k, self.slots.get(i)?)))
    }

    pub(crate) fn keys(&self) -> btree_map::Keys<'_, K, usize> {
        self.index.keys()
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &V> + '_ {
        self.iter().map(|(_, v)| v)
    }

    /// Calls `f` with each id and its value, in id order (what `iter_mut` was: the slots
    /// cannot be lent mutably one by one from behind the index).
    pub(crate) fn for_each_mut(&mut self, mut f: impl FnMut(&K, &mut V)) {
        for (k, &i) in &self.index {
            if let Some(v) = self.slots.get_mut(i) {
                f(k, v);
            }
        }
    }
}

impl<K: Ord + Copy, V> Index<&K> for SlabMap<K, V> {
    type Output = V;

    fn index(&self, id: &K) -> &V {
        self.get(id).expect("a live id")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::TransactionId;
    use crate::time::Instant;
    use crate::transaction::state::Tx;
    use crate::uid::Uid;
    use alloc::vec::Vec;

    fn tx() -> Tx {
        Tx::new(Uid::default(), Instant::default(), &Default::default())
    }

    #[test]
    fn slots_are_reused_and_ids_stay_apart() {
        let mut t: SlabMap<TransactionId, Tx> = SlabMap::default();
        for i in 1..=3 {
            t.insert(TransactionId(i), tx());
        }
        let freed = t.index[&TransactionId(2)];
        t.remove(&TransactionId(2));
        assert!(!t.contains_key(&TransactionId(2)));
        assert!(t.get(&TransactionId(2)).is_none());
        t.insert(TransactionId(4), tx());
        assert_eq!(
            t.index[&TransactionId(4)],
            freed,
            "the freed slot was taken again"
        );
        assert_eq!(t.len(), 3);
        for i in [1, 3, 4] {
            assert!(t.get_mut(&TransactionId(i)).is_some());
        }
        for i in [1, 3, 4] {
            t.remove(&TransactionId(i));
        }
        assert_eq!(t.len(), 0);
        assert!(t.slots.is_empty());
    }

    #[test]
    fn iteration_is_in_id_order() {
        let mut m: SlabMap<u32, u32> = SlabMap::default();
        for k in [5, 1, 9, 3] {
            m.insert(k, k * 10);
        }
        m.remove(&1);
        m.insert(2, 20);
        assert_eq!(m.keys().copied().collect::<Vec<_>>(), [2, 3, 5, 9]);
        assert_eq!(m.values().copied().collect::<Vec<_>>(), [20, 30, 50, 90]);
        let mut seen = Vec::new();
        m.for_each_mut(|k, v| {
            *v += 1;
            seen.push(*k);
        });
        assert_eq!(seen, [2, 3, 5, 9]);
        assert_eq!(m[&9], 91);
        assert_eq!(m.remove(&5), Some(51));
        assert_eq!(m.remove(&5), None);
    }
}
