//! The live transactions by id.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::ops::Index;

use super::state::Tx;
use crate::ids::TransactionId;

/// The transactions by id, each in a slot that stays put while it lives.
///
/// A [`Tx`] is about a kilobyte. Kept as a `BTreeMap`'s values, each insert and remove moved
/// its neighbours in the node (several kilobytes of `memmove` per transaction, 1–2 % of the
/// client's samples in `range100` and `set100`). The map now holds slot numbers only; a
/// transaction is moved in once and dropped where it is, and freed slots are reused, so no
/// transaction costs an allocation of its own.
#[derive(Debug, Default)]
pub(crate) struct TxTable {
    index: BTreeMap<TransactionId, usize>,
    slots: Vec<Option<Tx>>,
    free: Vec<usize>,
}

impl TxTable {
    /// Slots kept when the table empties; a larger slab (after a burst of transactions) is
    /// given back then.
    const KEPT_SLOTS: usize = 64;

    pub(crate) fn get(&self, id: &TransactionId) -> Option<&Tx> {
        self.slots[*self.index.get(id)?].as_ref()
    }

    pub(crate) fn get_mut(&mut self, id: &TransactionId) -> Option<&mut Tx> {
        self.slots[*self.index.get(id)?].as_mut()
    }

    pub(crate) fn contains_key(&self, id: &TransactionId) -> bool {
        self.index.contains_key(id)
    }

    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    /// Adds `tx` as `id` (replacing the transaction of that id, if any).
    pub(crate) fn insert(&mut self, id: TransactionId, tx: Tx) {
        if let Some(&i) = self.index.get(&id) {
            self.slots[i] = Some(tx);
            return;
        }
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some(tx);
                i
            }
            None => {
                self.slots.push(Some(tx));
                self.slots.len() - 1
            }
        };
        self.index.insert(id, i);
    }

    /// Drops the transaction `id`, if it lives.
    pub(crate) fn remove(&mut self, id: &TransactionId) {
        let Some(i) = self.index.remove(id) else {
            return;
        };
        self.slots[i] = None;
        if self.index.is_empty() && self.slots.capacity() > Self::KEPT_SLOTS {
            self.slots = Vec::new();
            self.free = Vec::new();
        } else if self.index.is_empty() {
            self.slots.clear();
            self.free.clear();
        } else {
            self.free.push(i);
        }
    }
}

impl Index<&TransactionId> for TxTable {
    type Output = Tx;

    fn index(&self, id: &TransactionId) -> &Tx {
        self.get(id).expect("a live transaction")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Instant;
    use crate::uid::Uid;

    fn tx() -> Tx {
        Tx::new(Uid::default(), Instant::default())
    }

    #[test]
    fn slots_are_reused_and_ids_stay_apart() {
        let mut t = TxTable::default();
        for i in 1..=3 {
            t.insert(TransactionId(i), tx());
        }
        t.remove(&TransactionId(2));
        assert!(!t.contains_key(&TransactionId(2)));
        assert!(t.get(&TransactionId(2)).is_none());
        t.insert(TransactionId(4), tx());
        assert_eq!(t.slots.len(), 3, "the freed slot was taken again");
        assert_eq!(t.len(), 3);
        for i in [1, 3, 4] {
            assert!(t.get_mut(&TransactionId(i)).is_some());
        }
        for i in [1, 3, 4] {
            t.remove(&TransactionId(i));
        }
        assert_eq!(t.len(), 0);
        assert!(t.slots.is_empty() && t.free.is_empty());
    }
}
