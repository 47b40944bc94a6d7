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
    with_writer::<T, _>(|mut w| {
        let root = write_root(&mut w, value);
        w.finish(root, file_identifier)
    })
}

/// Encodes `m` in `scratch` (all zeros, as it is left again afterwards; at least `size`
/// bytes) and hands the message to `f`: a sender that copies each message into its
/// connection's buffer anyway allocates nothing per message this way.
pub(crate) fn encode_in<M: Message, R>(
    m: &M,
    scratch: &mut Vec<u8>,
    size: usize,
    f: impl FnOnce(&[u8]) -> R,
) -> R {
    if scratch.len() < size {
        scratch.resize(size, 0);
    }
    let (mut buf, total) = with_writer::<M, _>(|mut w| {
        w.buf = core::mem::take(scratch);
        let root = write_root(&mut w, m);
        w.finish_in_place(root, M::FILE_IDENTIFIER)
    });
    let start = buf.len() - total;
    let out = f(&buf[start..]);
    // A large commit's buffer is let go rather than kept for every later message.
    if buf.len() <= SCRATCH_KEPT {
        buf[start..].fill(0);
        *scratch = buf;
    }
    out
}

/// The largest scratch buffer [`encode_in`] keeps between messages.
const SCRATCH_KEPT: usize = 64 * 1024;

/// Runs `f` with a writer that packs `T`'s vtables (from the memo, or worked out now).
fn with_writer<T: Fb + 'static, R>(f: impl FnOnce(Writer<'_>) -> R) -> R {
    let computed;
    let set = match memo::vtables_of::<T>() {
        Some(s) => s,
        None => {
            computed = memo::collect_root::<T>();
            &computed
        }
    };
    f(Writer::new(set))
}

/// Writes `value` as the root's one member (FDB's `FakeRoot`), returning the root's place.
fn write_root<T: Fb>(w: &mut Writer<'_>, value: &T) -> u32 {
    let root = FakeRoot(value);
    let mut t = w.begin_table(&[T::LAYOUT]);
    let s = root.0.save(w);
    t.push(s);
    w.end_table(t)
}

/// Encodes a message.
pub fn encode<M: Message>(m: &M) -> Vec<u8> {
    encode_with(m, M::FILE_IDENTIFIER)
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

        $crate::serializer::fb_table! { impl $name { $( $field: $ty ),* } }
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
        $crate::serializer::fb_table! { $(#[$m])* $vis struct $name { $($body)* } }
        impl $crate::serializer::Message for $name {
            const FILE_IDENTIFIER: u32 = $fid;
        }
    };
}

// The declaring macros by this module's path too, so that the types declared with them
// (the messages, the data model) name the serializer they use, not the crate root. They are
// taken by their own names here, where they are defined, not from the crate root where
// `#[macro_export]` also puts them: the serializer depends on nothing above it.
pub use {fb_message, fb_table};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::storage::GetValueReply;
    use bytes::Bytes;

    fn reply(value_len: usize, penalty: f64) -> GetValueReply {
        GetValueReply {
            penalty,
            error: None,
            value: (value_len > 0).then(|| Bytes::from(alloc::vec![7u8; value_len])),
            cached: value_len % 2 == 1,
        }
    }

    /// One scratch buffer for messages of every size, growing and let go, gives each the
    /// bytes `encode` gives it, and is left zeroed.
    #[test]
    fn encoding_in_scratch_matches_encode() {
        let mut scratch = Vec::new();
        for (i, len) in [0, 5, 300, 1, 5_000, 2, 100_000, 3, 0]
            .into_iter()
            .enumerate()
        {
            let m = reply(len, i as f64);
            let n = encode_in(&m, &mut scratch, 64, |b| {
                assert_eq!(b, &encode(&m)[..], "message {i} of {len} value bytes");
                b.len()
            });
            assert!(n > len);
            assert!(scratch.iter().all(|&b| b == 0), "scratch zeroed after {i}");
            assert!(scratch.len() <= SCRATCH_KEPT);
        }
    }
}
