//! The bounds-checked, budgeted message reader.

use bytes::Bytes;
use core::cell::Cell;

use super::{DecodeError, Fb, Result};

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
    pub(super) fn check_len(&self, pos: usize, n: u32, size: usize) -> Result<()> {
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
