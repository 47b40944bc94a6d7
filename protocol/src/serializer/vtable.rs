//! Table layouts and vtables: where each member of a table sits, and the set of vtables a
//! message packs.

use alloc::vec::Vec;
use smallvec::SmallVec;

/// How a member occupies a table, after FDB's `fields_helper`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Stored inside the table (scalars and UIDs), `size` bytes aligned to `align`.
    Inline {
        /// Its size in bytes.
        size: u8,
        /// Its alignment.
        align: u8,
    },
    /// A `u32` offset to out-of-line data (tables, strings, vectors).
    Indirect,
    /// Two slots: a `u8` tag (0 = empty, i = alternative i-1) and a `u32` offset.
    Union,
    /// Takes no slot at all (FDB's `Arena`).
    Zero,
}

impl Layout {
    /// `fb_align<Member>`: what the member contributes to its table's alignment.
    pub(super) const fn align(self) -> usize {
        match self {
            Layout::Inline { align, .. } => align as usize,
            Layout::Indirect | Layout::Union => 4,
            Layout::Zero => 1,
        }
    }
    /// Size of one element of a vector of this type (`fb_size<T>`).
    pub(super) const fn elem_size(self) -> usize {
        match self {
            Layout::Inline { size, .. } => size as usize,
            _ => 4,
        }
    }
}

/// A vtable: `[vtable bytes, table bytes, slot offsets...]`.
pub type VTable = SmallVec<[u16; 24]>;

/// FDB's `generate_vtable`: slots are placed largest first (stable), each aligned, after the
/// 4-byte back pointer.
pub fn generate_vtable(layouts: &[Layout]) -> VTable {
    let mut slots: SmallVec<[(u16, u16); 24]> = SmallVec::new(); // (size, align)
    for l in layouts {
        match *l {
            Layout::Inline { size, align } => slots.push((size as u16, align as u16)),
            Layout::Indirect => slots.push((4, 4)),
            Layout::Union => {
                slots.push((1, 1));
                slots.push((4, 4));
            }
            Layout::Zero => {}
        }
    }
    let mut vt: VTable = SmallVec::from_elem(0, slots.len() + 2);
    if slots.is_empty() {
        vt[0] = 4;
        vt[1] = 4;
        return vt;
    }
    let mut order: SmallVec<[usize; 24]> = (0..slots.len()).collect();
    // Stable sort by size, largest first (insertion sort keeps it stable and alloc-free).
    for i in 1..order.len() {
        let mut j = i;
        while j > 0 && slots[order[j - 1]].0 < slots[order[j]].0 {
            order.swap(j - 1, j);
            j -= 1;
        }
    }
    vt[0] = (2 * slots.len() + 4) as u16;
    let mut offset: u16 = 0;
    for &i in &order {
        let (size, align) = slots[i];
        let at = offset.div_ceil(align) * align;
        offset = at + size;
        vt[i + 2] = at + 4;
    }
    vt[1] = offset + 4;
    vt
}

/// What saving a member produced, to be put into the parent's slot(s).
#[derive(Clone, Copy, Debug)]
pub enum Saved {
    /// Inline bytes (scalars), `len` of `bytes` used.
    Inline {
        /// The value's bytes (the first `len`).
        bytes: [u8; 16],
        /// How many are used.
        len: u8,
    },
    /// Out-of-line data at this writer position (counted from the end).
    Offset(u32),
    /// A union: tag and, unless empty, where its value is.
    Union {
        /// The alternative's tag (0: none).
        tag: u8,
        /// Where the alternative was written.
        target: Option<u32>,
    },
    /// Zero-size member.
    Nothing,
}

impl Saved {
    /// An inline value of these bytes (at most 16).
    pub fn inline(b: &[u8]) -> Saved {
        let mut bytes = [0u8; 16];
        bytes[..b.len()].copy_from_slice(b);
        Saved::Inline {
            bytes,
            len: b.len() as u8,
        }
    }
}

/// The set of vtables a message carries, in the order they are packed.
#[derive(Clone, Debug, Default)]
pub struct VTableSet {
    pub(super) tables: Vec<VTable>,
    offsets: Vec<u32>,
    /// `tables` as they are packed into a message (each `u16` little-endian, in order),
    /// worked out once rather than per message.
    pub(super) packed: Vec<u8>,
    /// Each table shape met in the type walk and its vtable's index in `tables`, so that
    /// writing a table needs no [`generate_vtable`].
    shapes: Vec<(SmallVec<[Layout; 12]>, usize)>,
}

/// Whether two vtables are the same, element by element. Vtables are a handful of `u16`s
/// that mostly differ in their first two (the vtable's and the table's sizes); comparing them
/// as slices calls `memcmp` for every pair, which is most of the cost of a lookup here (and
/// glibc's AVX-512 `memcmp` is very slow on short inputs near an unmapped page).
fn same_vtable(a: &[u16], b: &[u16]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

impl VTableSet {
    pub(super) fn offset_of(&self, vt: &[u16]) -> u32 {
        self.tables
            .iter()
            .position(|t| same_vtable(t, vt))
            .map(|i| self.offsets[i])
            .expect("every table's vtable is collected from its type")
    }
    /// The vtable of a table with these member layouts and its offset in the packed vtables,
    /// if the type walk met that shape.
    pub(super) fn shape(&self, layouts: &[Layout]) -> Option<(&VTable, u32)> {
        let &(_, i) = self.shapes.iter().find(|(l, _)| l.as_slice() == layouts)?;
        Some((&self.tables[i], self.offsets[i]))
    }

    /// The vtables, in packing order.
    pub fn tables(&self) -> &[VTable] {
        &self.tables
    }
}

/// Walks a message *type* and gathers every vtable reachable from it, as FDB's
/// `get_vtableset` does (absent optionals and unused union alternatives included).
#[derive(Default)]
pub struct VtCollector {
    tables: Vec<VTable>,
    /// Each shape added, with its vtable (the shape's index in `tables` is found at the end).
    shapes: Vec<(SmallVec<[Layout; 12]>, VTable)>,
}

impl VtCollector {
    /// Adds the vtable of a table with these member layouts (once).
    pub fn add(&mut self, layouts: &[Layout]) {
        if self.shapes.iter().any(|(l, _)| l.as_slice() == layouts) {
            return;
        }
        let vt = generate_vtable(layouts);
        if !self.tables.iter().any(|t| same_vtable(t, &vt)) {
            self.tables.push(vt.clone());
        }
        self.shapes.push((SmallVec::from_slice(layouts), vt));
    }

    /// Orders the vtables as libfdb_c packs them and computes their offsets.
    ///
    /// libfdb_c keeps its vtables in a `std::set` of pointers, so the packing order is the
    /// order of their addresses in the client binary: nothing in the source decides it. We
    /// reproduce it with a rank table learned from real captures ([`CLIENT_VTABLE_ORDER`]);
    /// shapes the table does not know go last in the order the type walk met them. Any order
    /// decodes the same; the rank only makes our bytes identical to libfdb_c's.
    pub fn finish(mut self) -> VTableSet {
        let rank = |vt: &VTable| {
            CLIENT_VTABLE_ORDER
                .iter()
                .position(|k| same_vtable(k, vt))
                .unwrap_or(usize::MAX)
        };
        // Each table's rank once, not once per comparison of the sort (stable: unknown shapes
        // keep the order the walk met them).
        let mut ranked: SmallVec<[(usize, VTable); 16]> =
            self.tables.drain(..).map(|vt| (rank(&vt), vt)).collect();
        ranked.sort_by_key(|(r, _)| *r);
        self.tables.extend(ranked.into_iter().map(|(_, vt)| vt));
        let mut offsets = Vec::with_capacity(self.tables.len());
        let mut at = 0u32;
        for t in &self.tables {
            offsets.push(at);
            at += 2 * t.len() as u32;
        }
        let tables = self.tables;
        let shapes = self
            .shapes
            .into_iter()
            .map(|(l, vt)| {
                let i = tables
                    .iter()
                    .position(|t| same_vtable(t, &vt))
                    .expect("every shape's vtable was added");
                (l, i)
            })
            .collect();
        let packed: Vec<u8> = tables
            .iter()
            .flat_map(|t| t.iter().flat_map(|v| v.to_le_bytes()))
            .collect();
        VTableSet {
            tables,
            offsets,
            packed,
            shapes,
        }
    }
}

/// The packing order of vtables in libfdb_c 7.3.77 (see [`VtCollector::finish`]), merged from
/// the order observed in every client message of `shared/fdb-captures`.
pub const CLIENT_VTABLE_ORDER: &[&[u16]] = &[
    &[10, 13, 12, 4, 8],
    &[8, 12, 4, 8],
    &[6, 8, 4],
    &[18, 20, 4, 16, 17, 8, 18, 12, 19],
    &[10, 13, 4, 8, 12],
    &[12, 13, 4, 8, 10, 12],
    &[8, 16, 12, 4],
    &[24, 36, 12, 16, 20, 4, 32, 33, 34, 24, 35, 28],
    &[10, 29, 4, 20, 28],
    &[6, 20, 4],
    &[10, 16, 4, 8, 12],
    &[8, 9, 8, 4],
    &[22, 49, 20, 24, 28, 4, 32, 36, 40, 44, 48],
    &[8, 16, 4, 12],
    &[20, 37, 12, 16, 20, 36, 24, 28, 32, 4],
    &[10, 28, 20, 4, 24],
    &[10, 13, 4, 12, 8],
    &[30, 54, 12, 16, 4, 20, 24, 52, 28, 32, 36, 40, 53, 44, 48],
    &[24, 42, 12, 4, 40, 16, 20, 24, 28, 41, 32, 36],
    &[22, 38, 12, 36, 16, 20, 37, 24, 28, 32, 4],
    &[26, 43, 12, 40, 16, 4, 41, 20, 42, 24, 28, 32, 36],
    &[28, 43, 4, 8, 12, 40, 16, 41, 20, 42, 24, 28, 32, 36],
    &[12, 24, 12, 4, 16, 20],
    // `GetMappedKeyValuesRequest` (the `mapped_range` capture).
    &[
        32, 58, 12, 16, 20, 4, 24, 28, 56, 32, 36, 40, 44, 57, 48, 52,
    ],
    &[10, 17, 4, 16, 12],
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vtable_generation_matches_fdb_unit_test() {
        // flow/flat_buffers.cpp "flow/FlatBuffers/test": get_vtable<uint8_t, uint8_t, int, int64_t, int>
        let b = Layout::Inline { size: 1, align: 1 };
        let i = Layout::Inline { size: 4, align: 4 };
        let l = Layout::Inline { size: 8, align: 8 };
        let vt = generate_vtable(&[b, b, i, l, i]);
        assert_eq!(vt.len(), 7);
        assert_eq!(vt[0], 14);
        assert_eq!(vt[1], 22);
        assert_eq!((vt[4] - 4) % 4, 0);
        assert_eq!((vt[5] - 4) % 8, 0);
        assert_eq!(generate_vtable(&[]).as_slice(), &[4, 4]);
        assert_eq!(generate_vtable(&[Layout::Indirect]).as_slice(), &[6, 8, 4]);
        assert_eq!(generate_vtable(&[Layout::Union]).as_slice(), &[8, 9, 8, 4]);
    }
}
