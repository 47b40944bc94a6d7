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

mod fb;
mod memo;
mod reader;
mod vtable;
mod writer;

pub use fb::{load_alternative, union_slots, Fb};
pub use reader::{Reader, TableReader};
pub use vtable::{
    generate_vtable, Layout, Saved, VTable, VTableSet, VtCollector, CLIENT_VTABLE_ORDER,
};
pub use writer::{TableBuilder, Writer};

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

/// A serialized message type: a table with a file identifier (`'static`: its vtables are
/// worked out once per type, see `memo`).
pub trait Message: Fb + 'static {
    /// FDB's `file_identifier` of the type (the root's identifier on the wire).
    const FILE_IDENTIFIER: u32;
}

/// The root of every message is a table with one member (FDB's `FakeRoot`).
struct FakeRoot<'a, T>(&'a T);

/// Encodes `value` as a complete ObjectSerializer message with this file identifier.
pub fn encode_with<T: Fb + 'static>(value: &T, file_identifier: u32) -> Vec<u8> {
    encode_with_size(value, file_identifier, 0)
}

/// [`encode_with`] into a buffer made `size` bytes at once (an estimate of the encoded size:
/// too small only costs the doublings it would have cost anyway).
fn encode_with_size<T: Fb + 'static>(value: &T, file_identifier: u32, size: usize) -> Vec<u8> {
    let computed;
    let set = match memo::vtables_of::<T>() {
        Some(s) => s,
        None => {
            computed = memo::collect_root::<T>();
            &computed
        }
    };
    let mut w = Writer::new(set);
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

/// A value as FDB stores it with `ObjectWriter::toValue(.., IncludeVersion(version))`: the
/// protocol version, little-endian, then the message.
pub fn encode_value<M: Message>(m: &M, version: u64) -> Vec<u8> {
    let mut v = version.to_le_bytes().to_vec();
    v.extend_from_slice(&encode(m));
    v
}

/// Reads a value [`encode_value`] wrote (the protocol version in front is skipped, not
/// checked).
pub fn decode_value<M: Message>(value: &[u8]) -> Result<M> {
    let body = value
        .get(8..)
        .ok_or(DecodeError::OutOfBounds { pos: 0, len: 8 })?;
    decode(&Bytes::copy_from_slice(body))
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

        $crate::fb_table! { impl $name { $( $field: $ty ),* } }
    };
    // The encoding alone, for a type defined elsewhere (the data model's own types, which
    // sit below the messages).
    (impl $name:ident { $( $field:ident : $ty:ty ),* $(,)? }) => {
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

// Messages whose field lists look alike are FDB's wire structs, each its own table: a
// message is written as its field list only, through this macro or fb_table!.
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
