//! ObjectSerializer: FDB's flatbuffers dialect (`flow/include/flow/flat_buffers.h`).
//!
//! A message is `u32 root offset | u32 file identifier | vtables | tables and out-of-line data`.
//! Every table points back to a vtable listing where each member sits inside it; members are
//! laid out largest-first, not in declaration order. Strings and vectors live out of line,
//! behind forward `u32` offsets relative to the field that holds them.
//!
//! The writer works back to front exactly like FDB's `WriteToBuffer`, so that what we encode is
//! byte-for-byte what libfdb_c sends: children are written before the table that points to them,
//! the first empty string/vector is shared by all later ones, and every table, vector and string
//! is padded to the alignment FDB uses. Positions inside the writer are counted *from the end* of
//! the message, as FDB does.
//!
//! The reader is schema-driven (a type says what it expects), bounds-checks every offset and
//! length against the buffer, and returns zero-copy [`Bytes`] slices for strings. Because the
//! schema is static, hostile offsets (loops, self references) cannot make it recurse deeper than
//! the type itself nests.

use alloc::vec::Vec;
use bytes::Bytes;
use core::cell::Cell;
use core::fmt;
use smallvec::SmallVec;

use crate::uid::Uid;

/// Why a message could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// A read at `pos` of `len` bytes falls outside the message.
    OutOfBounds {
        /// Where the read started.
        pos: usize,
        /// How many bytes it needed.
        len: usize,
    },
    /// A table's vtable is malformed (odd size, smaller than its header, or outside the buffer).
    BadVtable {
        /// Where the vtable is.
        pos: usize,
    },
    /// A union carried a tag this type does not have.
    BadUnionTag {
        /// The tag found.
        tag: u8,
    },
    /// A union that must hold a value (ErrorOr) was empty.
    EmptyUnion,
    /// A vector or string claims more elements than the message could hold.
    LengthTooLarge {
        /// The length the message claimed.
        len: u32,
    },
    /// The message is for another type.
    FileIdentifier {
        /// The identifier of the type asked for.
        expected: u32,
        /// The identifier the message carries.
        found: u32,
    },
    /// A field holds a value the type does not allow (e.g. an unknown enum value).
    InvalidValue(&'static str),
    /// The message reuses its parts so often that decoding it would produce far more data
    /// than it holds (offsets that share subtables can amplify a small message enormously).
    TooComplex,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::OutOfBounds { pos, len } => {
                write!(f, "read of {len} bytes at {pos} is outside the message")
            }
            DecodeError::BadVtable { pos } => write!(f, "malformed vtable at {pos}"),
            DecodeError::BadUnionTag { tag } => write!(f, "unknown union tag {tag}"),
            DecodeError::EmptyUnion => write!(f, "empty union where a value is required"),
            DecodeError::LengthTooLarge { len } => {
                write!(f, "length {len} exceeds the message size")
            }
            DecodeError::FileIdentifier { expected, found } => {
                write!(f, "file identifier {found}, expected {expected}")
            }
            DecodeError::InvalidValue(what) => write!(f, "invalid value for {what}"),
            DecodeError::TooComplex => write!(f, "message decodes to far more than its size"),
        }
    }
}

/// A decode result.
pub type Result<T> = core::result::Result<T, DecodeError>;

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
    const fn align(self) -> usize {
        match self {
            Layout::Inline { align, .. } => align as usize,
            Layout::Indirect | Layout::Union => 4,
            Layout::Zero => 1,
        }
    }
    /// Size of one element of a vector of this type (`fb_size<T>`).
    const fn elem_size(self) -> usize {
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
    tables: Vec<VTable>,
    offsets: Vec<u32>,
    packed_len: u32,
}

impl VTableSet {
    fn offset_of(&self, vt: &[u16]) -> u32 {
        self.tables
            .iter()
            .position(|t| t.as_slice() == vt)
            .map(|i| self.offsets[i])
            .expect("every table's vtable is collected from its type")
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
}

impl VtCollector {
    /// Adds the vtable of a table with these member layouts (once).
    pub fn add(&mut self, layouts: &[Layout]) {
        let vt = generate_vtable(layouts);
        if !self.tables.contains(&vt) {
            self.tables.push(vt);
        }
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
                .position(|k| *k == vt.as_slice())
                .unwrap_or(usize::MAX)
        };
        self.tables.sort_by_key(rank);
        let mut offsets = Vec::with_capacity(self.tables.len());
        let mut at = 0u32;
        for t in &self.tables {
            offsets.push(at);
            at += 2 * t.len() as u32;
        }
        VTableSet {
            tables: self.tables,
            offsets,
            packed_len: at,
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
    &[10, 17, 4, 16, 12],
];

/// A table being built: its bytes are kept aside until its children are written, because
/// FDB places a table *before* (at a lower address than) everything it points to.
pub struct TableBuilder {
    vt: VTable,
    align: usize,
    bytes: SmallVec<[u8; 64]>,
    offsets: SmallVec<[(u16, u32); 16]>,
    slot: usize,
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
    buf: Vec<u8>,
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
        let vt = generate_vtable(layouts);
        let align = layouts.iter().map(|l| l.align()).fold(4, usize::max);
        let len = vt[1] as usize;
        TableBuilder {
            vt,
            align,
            bytes: SmallVec::from_elem(0, len),
            offsets: SmallVec::new(),
            slot: 0,
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
        let vt_off = self.vtables.offset_of(&t.vt);
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
        let saved: Vec<Saved> = items.map(|it| it.save(self)).collect();
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
    fn finish(mut self, root: u32, file_identifier: u32) -> Vec<u8> {
        let packed = self.vtables.packed_len as usize;
        let vtable_start = self.current + packed;
        let mut at = vtable_start;
        for t in &self.vtables.tables {
            let bytes: SmallVec<[u8; 48]> = t.iter().flat_map(|v| v.to_le_bytes()).collect();
            self.put(at, &bytes);
            at -= bytes.len();
        }
        let header_end = align_up(self.current + 8, 8);
        self.put_u32(header_end, (header_end - root as usize) as u32);
        self.put_u32(header_end - 4, file_identifier);
        for &(table, vt_off) in &self.soffset_fixups {
            let vt_pos = vtable_start as i64 - vt_off as i64;
            let rel = (vt_pos - table as i64) as i32;
            let at = self.buf.len() - table as usize;
            self.buf[at..at + 4].copy_from_slice(&rel.to_le_bytes());
        }
        let total = self.current;
        let mut buf = self.buf;
        buf.drain(..buf.len() - total);
        buf
    }
}

const fn align_up(v: usize, a: usize) -> usize {
    v.div_ceil(a) * a
}

/// A read-only view of a message. Copying it is free (it shares the buffer and budget).
///
/// Every table, string and vector element read spends one unit of a budget equal to the
/// message length. A message FDB writes never reads one slot twice (only the shared empty
/// string does, and every reference to it is a distinct 4-byte slot), so honest messages fit;
/// a hostile one whose offsets share subtables to multiply the decoded size is refused with
/// [`DecodeError::TooComplex`] instead of exhausting memory.
#[derive(Clone, Copy)]
pub struct Reader<'a> {
    buf: &'a Bytes,
    budget: &'a Cell<usize>,
}

impl<'a> Reader<'a> {
    /// A reader over `buf`; `budget` should start at `buf.len()`.
    pub fn new(buf: &'a Bytes, budget: &'a Cell<usize>) -> Self {
        Reader { buf, budget }
    }

    /// Spends `n` units of the decoding budget.
    pub fn spend(&self, n: usize) -> Result<()> {
        let left = self.budget.get();
        if n > left {
            return Err(DecodeError::TooComplex);
        }
        self.budget.set(left - n);
        Ok(())
    }

    /// The message's length.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether the message is empty.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// `len` bytes at `pos`, checked against the message and the decode budget.
    pub fn bytes(&self, pos: usize, len: usize) -> Result<&'a [u8]> {
        let end = pos
            .checked_add(len)
            .ok_or(DecodeError::OutOfBounds { pos, len })?;
        self.buf
            .get(pos..end)
            .ok_or(DecodeError::OutOfBounds { pos, len })
    }

    /// `N` bytes at `pos`.
    pub fn array<const N: usize>(&self, pos: usize) -> Result<[u8; N]> {
        let b = self.bytes(pos, N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(b);
        Ok(out)
    }

    /// A little-endian `u16` at `pos`.
    pub fn u16(&self, pos: usize) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array(pos)?))
    }

    /// A little-endian `u32` at `pos`.
    pub fn u32(&self, pos: usize) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(pos)?))
    }

    /// Follows the forward offset stored at `pos`.
    pub fn follow(&self, pos: usize) -> Result<usize> {
        let rel = self.u32(pos)? as usize;
        let target = pos
            .checked_add(rel)
            .ok_or(DecodeError::OutOfBounds { pos, len: rel })?;
        if target >= self.buf.len() {
            return Err(DecodeError::OutOfBounds {
                pos: target,
                len: 1,
            });
        }
        Ok(target)
    }

    /// A zero-copy slice of the message.
    pub fn slice(&self, pos: usize, len: usize) -> Result<Bytes> {
        self.bytes(pos, len)?;
        Ok(self.buf.slice(pos..pos + len))
    }

    /// The table at absolute position `table`.
    pub fn table_at(&self, table: usize) -> Result<TableReader<'a>> {
        self.spend(1)?;
        let soff = i32::from_le_bytes(self.array(table)?) as i64;
        let vt = table as i64 - soff;
        if vt < 0 || vt as usize >= self.buf.len() {
            return Err(DecodeError::BadVtable { pos: table });
        }
        let vt = vt as usize;
        let vt_len = self.u16(vt)? as usize;
        let table_len = self.u16(vt + 2)? as usize;
        if vt_len < 4 || vt_len % 2 != 0 || vt + vt_len > self.buf.len() || table_len < 4 {
            return Err(DecodeError::BadVtable { pos: vt });
        }
        self.bytes(table, table_len)?;
        Ok(TableReader {
            r: *self,
            table,
            vt,
            slots: (vt_len - 4) / 2,
            table_len,
            next: 0,
        })
    }

    /// The table whose offset is stored at `pos`.
    pub fn table(&self, pos: usize) -> Result<TableReader<'a>> {
        let t = self.follow(pos)?;
        self.table_at(t)
    }

    /// Checks a count of `n` elements of `size` bytes starting at `pos`.
    fn check_len(&self, pos: usize, n: u32, size: usize) -> Result<()> {
        let bytes = (n as u64) * (size.max(1) as u64);
        if pos as u64 + bytes > self.buf.len() as u64 {
            return Err(DecodeError::LengthTooLarge { len: n });
        }
        Ok(())
    }
}

/// Walks the slots of one table in order.
pub struct TableReader<'a> {
    /// The message the table is in.
    pub r: Reader<'a>,
    table: usize,
    vt: usize,
    slots: usize,
    table_len: usize,
    next: usize,
}

impl<'a> TableReader<'a> {
    /// The position of the next slot's data, or `None` if the sender left it out (FDB then
    /// uses the member's default value, which is what lets old and new versions talk).
    pub fn next_slot(&mut self) -> Result<Option<usize>> {
        let i = self.next;
        self.next += 1;
        if i >= self.slots {
            return Ok(None);
        }
        let off = self.r.u16(self.vt + 4 + 2 * i)? as usize;
        if off < 4 {
            return Ok(None);
        }
        if off >= self.table_len {
            return Err(DecodeError::BadVtable { pos: self.vt });
        }
        Ok(Some(self.table + off))
    }

    /// Reads the next member.
    pub fn field<T: Fb>(&mut self) -> Result<T> {
        T::load_field(self)
    }
}

/// A type the ObjectSerializer can carry.
pub trait Fb: Sized + Default {
    /// How a value of this type sits in its table slot.
    const LAYOUT: Layout;
    /// Writes any out-of-line data and returns what goes into the parent's slot.
    fn save(&self, w: &mut Writer) -> Saved;
    /// Reads the value whose slot (inline data, or the offset to it) is at `pos`.
    fn load(r: Reader<'_>, pos: usize) -> Result<Self>;
    /// Reads this member from the next slot(s) of a table.
    fn load_field(t: &mut TableReader<'_>) -> Result<Self> {
        match Self::LAYOUT {
            Layout::Zero => Ok(Self::default()),
            _ => match t.next_slot()? {
                Some(p) => Self::load(t.r, p),
                None => Ok(Self::default()),
            },
        }
    }
    /// Adds the vtables of this type and of everything it contains.
    fn collect_vtables(_c: &mut VtCollector) {}
}

macro_rules! scalar {
    ($($t:ty),*) => {$(
        impl Fb for $t {
            const LAYOUT: Layout = Layout::Inline { size: core::mem::size_of::<$t>() as u8, align: core::mem::size_of::<$t>() as u8 };
            fn save(&self, _w: &mut Writer) -> Saved {
                Saved::inline(&self.to_le_bytes())
            }
            fn load(r: Reader<'_>, pos: usize) -> Result<Self> {
                Ok(<$t>::from_le_bytes(r.array(pos)?))
            }
        }
    )*};
}
scalar!(u8, i8, u16, i16, u32, i32, u64, i64, f64);

impl Fb for bool {
    const LAYOUT: Layout = Layout::Inline { size: 1, align: 1 };
    fn save(&self, _w: &mut Writer) -> Saved {
        Saved::inline(&[*self as u8])
    }
    fn load(r: Reader<'_>, pos: usize) -> Result<Self> {
        Ok(r.array::<1>(pos)?[0] != 0)
    }
}

/// UIDs are 16-byte scalars aligned to 8 (`scalar_traits<UID>` in `IRandom.h`).
impl Fb for Uid {
    const LAYOUT: Layout = Layout::Inline { size: 16, align: 8 };
    fn save(&self, _w: &mut Writer) -> Saved {
        Saved::inline(&self.to_bytes())
    }
    fn load(r: Reader<'_>, pos: usize) -> Result<Self> {
        let b = r.bytes(pos, 16)?;
        Ok(Uid::from_bytes(b).unwrap_or_default())
    }
}

/// Strings and byte strings (`StringRef`, `Key`, `Value`, `std::string`).
impl Fb for Bytes {
    const LAYOUT: Layout = Layout::Indirect;
    fn save(&self, w: &mut Writer) -> Saved {
        w.save_bytes(self)
    }
    fn load(r: Reader<'_>, pos: usize) -> Result<Self> {
        r.spend(1)?;
        let at = r.follow(pos)?;
        let n = r.u32(at)?;
        r.check_len(at + 4, n, 1)?;
        r.slice(at + 4, n as usize)
    }
}

/// Vectors (`VectorRef`, `std::vector`, `std::map` as a vector of pairs).
impl<T: Fb> Fb for Vec<T> {
    const LAYOUT: Layout = Layout::Indirect;
    fn save(&self, w: &mut Writer) -> Saved {
        w.save_vector(self.iter())
    }
    fn load(r: Reader<'_>, pos: usize) -> Result<Self> {
        let at = r.follow(pos)?;
        let n = r.u32(at)?;
        let size = T::LAYOUT.elem_size();
        r.check_len(at + 4, n, size)?;
        r.spend(n as usize)?;
        // Grow as elements prove real rather than trusting the count up front.
        let mut out = Vec::with_capacity((n as usize).min(1024));
        for i in 0..n as usize {
            out.push(T::load(r, at + 4 + i * size)?);
        }
        Ok(out)
    }
    fn collect_vtables(c: &mut VtCollector) {
        T::collect_vtables(c)
    }
}

/// Loads a union alternative whose offset slot is at `pos`.
pub fn load_alternative<T: Fb>(r: Reader<'_>, pos: usize) -> Result<T> {
    match T::LAYOUT {
        Layout::Inline { .. } => T::load(r, r.follow(pos)?),
        _ => T::load(r, pos),
    }
}

/// Reads the two slots of a union: the tag (0 if absent) and the value's offset slot.
pub fn union_slots(t: &mut TableReader<'_>) -> Result<(u8, Option<usize>)> {
    let tag_pos = t.next_slot()?;
    let off_pos = t.next_slot()?;
    let tag = match tag_pos {
        Some(p) => t.r.array::<1>(p)?[0],
        None => 0,
    };
    if tag != 0 && off_pos.is_none() {
        return Ok((0, None));
    }
    Ok((tag, off_pos))
}

/// `Optional<T>`: a union with one alternative.
impl<T: Fb> Fb for Option<T> {
    const LAYOUT: Layout = Layout::Union;
    fn save(&self, w: &mut Writer) -> Saved {
        match self {
            None => Saved::Union {
                tag: 0,
                target: None,
            },
            Some(v) => Saved::Union {
                tag: 1,
                target: Some(w.save_alternative(v)),
            },
        }
    }
    fn load(_r: Reader<'_>, _pos: usize) -> Result<Self> {
        Err(DecodeError::InvalidValue("union outside a table"))
    }
    fn load_field(t: &mut TableReader<'_>) -> Result<Self> {
        match union_slots(t)? {
            (0, _) => Ok(None),
            (1, Some(p)) => Ok(Some(load_alternative(t.r, p)?)),
            (tag, _) => Err(DecodeError::BadUnionTag { tag }),
        }
    }
    fn collect_vtables(c: &mut VtCollector) {
        T::collect_vtables(c)
    }
}

/// A serialized message type: a table with a file identifier.
pub trait Message: Fb {
    /// FDB's `file_identifier` of the type (the root's identifier on the wire).
    const FILE_IDENTIFIER: u32;
}

/// The root of every message is a table with one member (FDB's `FakeRoot`).
struct FakeRoot<'a, T>(&'a T);

fn collect_root<T: Fb>() -> VTableSet {
    let mut c = VtCollector::default();
    c.add(&[T::LAYOUT]);
    T::collect_vtables(&mut c);
    c.finish()
}

/// Encodes `value` as a complete ObjectSerializer message with this file identifier.
pub fn encode_with<T: Fb>(value: &T, file_identifier: u32) -> Vec<u8> {
    encode_with_size(value, file_identifier, 0)
}

/// [`encode_with`] into a buffer made `size` bytes at once (an estimate of the encoded size:
/// too small only costs the doublings it would have cost anyway).
fn encode_with_size<T: Fb>(value: &T, file_identifier: u32, size: usize) -> Vec<u8> {
    let set = collect_root::<T>();
    let mut w = Writer::new(&set);
    if size > 0 {
        w.buf = alloc::vec![0u8; size];
    }
    let root = FakeRoot(value);
    let mut t = w.begin_table(&[T::LAYOUT]);
    let s = root.0.save(&mut w);
    t.push(s);
    let root_pos = w.end_table(t);
    w.finish(root_pos, file_identifier)
}

/// Encodes a message.
pub fn encode<M: Message>(m: &M) -> Vec<u8> {
    encode_with(m, M::FILE_IDENTIFIER)
}

/// Encodes a message of about `size` bytes ([`encode`] for `0`).
pub(crate) fn encode_sized<M: Message>(m: &M, size: usize) -> Vec<u8> {
    encode_with_size(m, M::FILE_IDENTIFIER, size)
}

/// The file identifier in a message header.
pub fn file_identifier(buf: &[u8]) -> Result<u32> {
    let b = buf
        .get(4..8)
        .ok_or(DecodeError::OutOfBounds { pos: 4, len: 4 })?;
    Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Decodes the root member of a message without checking its file identifier.
pub fn decode_root<T: Fb>(buf: &Bytes) -> Result<T> {
    let budget = Cell::new(buf.len());
    let r = Reader::new(buf, &budget);
    let root = r.u32(0)? as usize;
    let mut t = r.table_at(root)?;
    T::load_field(&mut t)
}

/// Reads the root table of `buf` with `f`, under the same decode budget as [`decode_root`]
/// (for looking at one member without a type for the whole message).
pub fn decode_root_with<T>(
    buf: &Bytes,
    f: impl FnOnce(&mut TableReader<'_>) -> Result<T>,
) -> Result<T> {
    let budget = Cell::new(buf.len());
    let r = Reader::new(buf, &budget);
    let root = r.u32(0)? as usize;
    let mut t = r.table_at(root)?;
    f(&mut t)
}

/// Decodes a message, checking its file identifier.
pub fn decode<M: Message>(buf: &Bytes) -> Result<M> {
    let found = file_identifier(buf)?;
    if found != M::FILE_IDENTIFIER {
        return Err(DecodeError::FileIdentifier {
            expected: M::FILE_IDENTIFIER,
            found,
        });
    }
    decode_root(buf)
}

/// Declares a struct serialized as an FDB table. Members are listed in the order of the C++
/// `serializer(ar, ...)` call, which is the slot order.
#[macro_export]
macro_rules! fb_table {
    ($(#[$m:meta])* $vis:vis struct $name:ident { $( $(#[$fm:meta])* $fvis:vis $field:ident : $ty:ty ),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Debug, Default, PartialEq)]
        $vis struct $name { $(
            $(#[$fm])*
            #[doc = concat!("\n\nFDB's member `", stringify!($field), "`, in the position of its `serializer()` call.")]
            $fvis $field: $ty
        ),* }

        impl $crate::serializer::Fb for $name {
            const LAYOUT: $crate::serializer::Layout = $crate::serializer::Layout::Indirect;
            #[allow(unused_variables, unused_mut)]
            fn save(&self, w: &mut $crate::serializer::Writer) -> $crate::serializer::Saved {
                let mut t = w.begin_table(&[$(<$ty as $crate::serializer::Fb>::LAYOUT),*]);
                $( let s = <$ty as $crate::serializer::Fb>::save(&self.$field, w); t.push(s); )*
                $crate::serializer::Saved::Offset(w.end_table(t))
            }
            #[allow(unused_variables, unused_mut)]
            fn load(r: $crate::serializer::Reader<'_>, pos: usize) -> $crate::serializer::Result<Self> {
                let mut t = r.table(pos)?;
                Ok(Self { $( $field: t.field()?, )* })
            }
            fn collect_vtables(c: &mut $crate::serializer::VtCollector) {
                c.add(&[$(<$ty as $crate::serializer::Fb>::LAYOUT),*]);
                $( <$ty as $crate::serializer::Fb>::collect_vtables(c); )*
            }
        }
    };
}

/// Declares a [`Message`]: an [`fb_table!`] with a file identifier.
#[macro_export]
macro_rules! fb_message {
    ($(#[$m:meta])* $vis:vis struct $name:ident = $fid:expr; { $($body:tt)* }) => {
        $crate::fb_table! { $(#[$m])* $vis struct $name { $($body)* } }
        impl $crate::serializer::Message for $name {
            const FILE_IDENTIFIER: u32 = $fid;
        }
    };
}

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
