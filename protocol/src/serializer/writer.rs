//! The back-to-front message writer.

use alloc::vec::Vec;
use smallvec::SmallVec;

use super::{generate_vtable, Fb, Layout, Saved, VTable, VTableSet};

/// A table being built: its bytes are kept aside until its children are written, because
/// FDB places a table *before* (at a lower address than) everything it points to.
pub struct TableBuilder {
    vt: VTable,
    align: usize,
    bytes: SmallVec<[u8; 64]>,
    offsets: SmallVec<[(u16, u32); 16]>,
    slot: usize,
    /// Where `vt` sits in the packed vtables, when the set knew the shape.
    vt_off: Option<u32>,
}

impl TableBuilder {
    /// Puts a saved member into the next slot(s).
    pub fn push(&mut self, s: Saved) {
        match s {
            Saved::Inline { bytes, len } => {
                let at = self.vt[2 + self.slot] as usize;
                self.bytes[at..at + len as usize].copy_from_slice(&bytes[..len as usize]);
                self.slot += 1;
            }
            Saved::Offset(target) => {
                self.offsets.push((self.vt[2 + self.slot], target));
                self.slot += 1;
            }
            Saved::Union { tag, target } => {
                let at = self.vt[2 + self.slot] as usize;
                self.bytes[at] = tag;
                if let Some(t) = target {
                    self.offsets.push((self.vt[3 + self.slot], t));
                }
                self.slot += 2;
            }
            Saved::Nothing => {}
        }
    }
}

/// Back-to-front message writer (FDB's `WriteToBuffer`).
pub struct Writer<'v> {
    /// Zero-filled; the message grows from the end towards the start.
    pub(super) buf: Vec<u8>,
    /// FDB's `current_buffer_size`: bytes used, counted from the end.
    current: usize,
    /// Where the first empty string or vector went; later empties point there too.
    empty_vector: Option<u32>,
    vtables: &'v VTableSet,
    /// Tables whose back pointer can only be filled once the vtables are placed.
    soffset_fixups: SmallVec<[(u32, u32); 32]>,
}

impl<'v> Writer<'v> {
    /// A writer that packs these vtables.
    pub fn new(vtables: &'v VTableSet) -> Self {
        Writer {
            buf: Vec::new(),
            current: 0,
            empty_vector: None,
            vtables,
            soffset_fixups: SmallVec::new(),
        }
    }

    fn reserve_to(&mut self, pos: usize) {
        if pos > self.buf.len() {
            let new_len = pos.max(self.buf.len() * 2).max(256);
            let mut nb = alloc::vec![0u8; new_len];
            let used = self.current;
            let old = self.buf.len();
            nb[new_len - used..].copy_from_slice(&self.buf[old - used..]);
            self.buf = nb;
        }
    }

    /// Writes `data` starting at position `pos` (counted from the end).
    fn put(&mut self, pos: usize, data: &[u8]) {
        self.reserve_to(pos);
        let at = self.buf.len() - pos;
        self.buf[at..at + data.len()].copy_from_slice(data);
        self.current = self.current.max(pos);
    }

    fn put_u32(&mut self, pos: usize, v: u32) {
        self.put(pos, &v.to_le_bytes());
    }

    /// Starts a table whose members have these layouts.
    pub fn begin_table(&self, layouts: &[Layout]) -> TableBuilder {
        // `from_slice` copies; `clone` and `from_elem` push element by element.
        let (vt, vt_off) = match self.vtables.shape(layouts) {
            Some((vt, off)) => (SmallVec::from_slice(vt), Some(off)),
            None => (generate_vtable(layouts), None),
        };
        let align = layouts.iter().map(|l| l.align()).fold(4, usize::max);
        let len = vt[1] as usize;
        const ZEROS: [u8; 64] = [0; 64];
        TableBuilder {
            vt,
            align,
            bytes: match ZEROS.get(..len) {
                Some(zeros) => SmallVec::from_slice(zeros),
                None => SmallVec::from_elem(0, len),
            },
            offsets: SmallVec::new(),
            slot: 0,
            vt_off,
        }
    }

    /// Places a finished table and returns its position.
    pub fn end_table(&mut self, t: TableBuilder) -> u32 {
        let len = t.bytes.len();
        let start = align_up(self.current + len - 4, t.align) + 4;
        self.put(start, &t.bytes);
        for &(slot, target) in &t.offsets {
            let field = start - slot as usize;
            self.put_u32(field, (field - target as usize) as u32);
        }
        let vt_off = t.vt_off.unwrap_or_else(|| self.vtables.offset_of(&t.vt));
        self.soffset_fixups.push((start as u32, vt_off));
        start as u32
    }

    /// A string (`StringRef`, `std::string`): `u32 len | bytes | pad to 4`.
    pub fn save_bytes(&mut self, data: &[u8]) -> Saved {
        if data.is_empty() {
            if let Some(e) = self.empty_vector {
                return Saved::Offset(e);
            }
        }
        let start = align_up(self.current + data.len() + 4, 4);
        self.put_u32(start, data.len() as u32);
        self.put(start - 4, data);
        if data.is_empty() {
            self.empty_vector = Some(start as u32);
        }
        Saved::Offset(start as u32)
    }

    /// A vector: `u32 count | elements`, elements inline or as offsets to their own data.
    pub fn save_vector<'a, T: Fb + 'a>(
        &mut self,
        items: impl ExactSizeIterator<Item = &'a T>,
    ) -> Saved {
        let n = items.len();
        if n == 0 {
            if let Some(e) = self.empty_vector {
                return Saved::Offset(e);
            }
        }
        let size = T::LAYOUT.elem_size();
        // Most vectors a client sends are short (mutations of one transaction, a few
        // conflict ranges): their members' places are kept on the stack.
        let saved: SmallVec<[Saved; 8]> = items.map(|it| it.save(self)).collect();
        let len = n * size;
        let align = if n == 0 { 4 } else { T::LAYOUT.align().max(4) };
        let start = align_up(self.current + len, align) + 4;
        self.put_u32(start, n as u32);
        for (i, s) in saved.iter().enumerate() {
            let pos = start - 4 - i * size;
            match *s {
                Saved::Inline { bytes, len } => self.put(pos, &bytes[..len as usize]),
                Saved::Offset(target) => self.put_u32(pos, (pos - target as usize) as u32),
                Saved::Union { .. } | Saved::Nothing => {
                    unreachable!(
                        "vectors of unions or zero-size members are not used by FDB clients"
                    )
                }
            }
        }
        if n == 0 {
            self.empty_vector = Some(start as u32);
        }
        Saved::Offset(start as u32)
    }

    /// A union alternative: tables and strings are already out of line; a scalar is written
    /// raw (unaligned) just below what is written so far, as FDB's `SaveAlternative` does.
    pub fn save_alternative<T: Fb>(&mut self, v: &T) -> u32 {
        match v.save(self) {
            Saved::Offset(t) => t,
            Saved::Inline { bytes, len } => {
                let pos = self.current + len as usize;
                self.put(pos, &bytes[..len as usize]);
                pos as u32
            }
            Saved::Union { .. } | Saved::Nothing => {
                unreachable!("a union alternative is never itself a union or zero-size")
            }
        }
    }

    /// Finishes the message: vtables, then the 8-byte header, padded to 8.
    pub(super) fn finish(self, root: u32, file_identifier: u32) -> Vec<u8> {
        let (mut buf, total) = self.finish_in_place(root, file_identifier);
        buf.drain(..buf.len() - total);
        buf
    }

    /// [`Writer::finish`], leaving the message where it was written: the buffer's last
    /// `total` bytes, returned with the buffer.
    pub(super) fn finish_in_place(mut self, root: u32, file_identifier: u32) -> (Vec<u8>, usize) {
        // The vtables one after another, the first at `vtable_start`.
        let vtables = self.vtables;
        let vtable_start = self.current + vtables.packed.len();
        self.put(vtable_start, &vtables.packed);
        let header_end = align_up(self.current + 8, 8);
        self.put_u32(header_end, (header_end - root as usize) as u32);
        self.put_u32(header_end - 4, file_identifier);
        for &(table, vt_off) in &self.soffset_fixups {
            let vt_pos = vtable_start as i64 - vt_off as i64;
            let rel = (vt_pos - table as i64) as i32;
            let at = self.buf.len() - table as usize;
            self.buf[at..at + 4].copy_from_slice(&rel.to_le_bytes());
        }
        (self.buf, self.current)
    }
}

const fn align_up(v: usize, a: usize) -> usize {
    v.div_ceil(a) * a
}
