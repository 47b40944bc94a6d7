//! The [`Fb`] trait and its implementations for scalars, UIDs, strings, vectors and optionals.

use alloc::vec::Vec;
use bytes::Bytes;

use super::{DecodeError, Layout, Reader, Result, Saved, TableReader, VtCollector, Writer};
use crate::uid::Uid;

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
