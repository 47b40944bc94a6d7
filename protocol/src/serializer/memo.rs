//! The vtables of each message type, computed once per process.
//!
//! Which vtables a message packs depends only on its type ([`VtCollector`] walks the type,
//! not the value), yet working them out (every reachable table's layout, deduplicated, ranked
//! against libfdb_c's order) cost more than writing a small request: ~10 % of the client's
//! CPU in a one-key read. The first encode of a type stores its [`VTableSet`] in a slot of a
//! fixed table; later encodes find it there. Slots are filled without locks and never freed
//! (one per message type the process encodes); when every slot is taken, sets are computed
//! per encode as before.

use alloc::boxed::Box;
use core::any::TypeId;
use once_cell::race::OnceBox;

use super::{Fb, VTableSet, VtCollector};

struct Memo {
    ty: TypeId,
    set: VTableSet,
}

/// More than the message types a client encodes (about 40); test suites that encode every
/// type may run past it, and then pay the walk per encode.
const SLOTS: usize = 128;

static MEMO: [OnceBox<Memo>; SLOTS] = [const { OnceBox::new() }; SLOTS];

/// The vtables a message whose root member is a `T` packs (FDB's `get_vtableset`).
pub(super) fn collect_root<T: Fb>() -> VTableSet {
    let mut c = VtCollector::default();
    c.add(&[T::LAYOUT]);
    T::collect_vtables(&mut c);
    c.finish()
}

/// [`collect_root`], from the memo; `None` once the memo is full and `T` is not in it.
pub(super) fn vtables_of<T: Fb + 'static>() -> Option<&'static VTableSet> {
    let ty = TypeId::of::<T>();
    for slot in &MEMO {
        let m = match slot.get() {
            Some(m) => m,
            None => {
                // Another thread may fill this slot first (with this type or another): then
                // its entry is the one looked at.
                let _ = slot.set(Box::new(Memo {
                    ty,
                    set: collect_root::<T>(),
                }));
                slot.get().expect("the slot was just set")
            }
        };
        if m.ty == ty {
            return Some(&m.set);
        }
    }
    None
}
