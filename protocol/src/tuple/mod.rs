//! The tuple layer: FDB's order-preserving encoding of typed tuples into keys and values
//! (`design/tuple.md` in FDB's source), byte for byte what the other bindings write.
//!
//! Packed tuples sort the way the tuples themselves sort, so a range of keys is a range of
//! tuples: everything that starts with `("user", 42)` lies between [`range`]'s two keys.
//! [`Subspace`] puts a fixed prefix in front of every key it packs.
//!
//! The API has the shape of the `foundationdb-tuple` crate (foundationdb-rs), so code written
//! against it mostly carries over: [`pack`] / [`unpack`], the [`TuplePack`] / [`TupleUnpack`]
//! traits (implemented for Rust tuples, integers, strings, byte strings, floats, `bool`,
//! `Option`, `Vec`), the dynamic [`Element`], [`Versionstamp`] and [`Subspace`]. The
//! differences: [`TuplePack::pack`] appends to a `Vec<u8>` (this crate is `no_std`, so there is
//! no `io::Write`), [`pack_with_versionstamp`] returns an error instead of panicking, integers
//! beyond 64 bits use this module's [`BigInt`] (no `num-bigint` dependency), and
//! `unpack::<Element>` always returns an [`Element::Tuple`].
//!
//! Decoding hostile bytes is bounded: nested tuples deeper than [`MAX_DEPTH`] are refused,
//! every length is checked against the input, and every failure is a [`PackError`].
//!
//! ```
//! use fdb_protocol::tuple::{pack, unpack, Element, Subspace, Versionstamp};
//!
//! let key = pack(&("user", 42, b"\x00raw".to_vec()));
//! assert_eq!(key, b"\x02user\x00\x15\x2a\x01\x00\xffraw\x00");
//! let (name, id, raw): (String, i64, Vec<u8>) = unpack(&key).unwrap();
//! assert_eq!((name.as_str(), id, raw.as_slice()), ("user", 42, &b"\x00raw"[..]));
//!
//! // Dynamic elements, nested tuples with nulls inside.
//! let t: Element = unpack(b"\x05\x15\x01\x00\xff\x00").unwrap();
//! assert_eq!(t, Element::Tuple(vec![Element::Tuple(vec![Element::Int(1), Element::Nil])]));
//!
//! // A subspace: a prefix, and the range of everything below it.
//! let users = Subspace::from("users");
//! let k = users.pack(&(7, "name"));
//! assert!(users.contains(&k));
//! assert_eq!(users.unpack::<(i64, String)>(&k).unwrap(), (7, "name".to_string()));
//! let (begin, end) = users.range();
//! assert!(begin < k && k < end);
//!
//! // A key for set_versionstamped_key: the stamp's offset follows in 4 little-endian bytes.
//! let vk = users.pack_with_versionstamp(&(Versionstamp::incomplete(3),)).unwrap();
//! assert_eq!(&vk[vk.len() - 4..], &8u32.to_le_bytes()); // after b"\x02users\x00\x33"
//! ```

use alloc::borrow::Cow;
use alloc::vec::Vec;
use core::fmt;

mod bigint;
mod element;
mod pack;
mod subspace;
mod uuid;
mod versionstamp;

pub use bigint::BigInt;
pub use element::Element;
pub use pack::{TuplePack, TupleUnpack};
pub use subspace::Subspace;
pub use uuid::Uuid;
pub use versionstamp::Versionstamp;

// Type codes (`design/tuple.md`).
pub(crate) const NIL: u8 = 0x00;
pub(crate) const BYTES: u8 = 0x01;
pub(crate) const STRING: u8 = 0x02;
pub(crate) const NESTED: u8 = 0x05;
pub(crate) const NEG_INT_START: u8 = 0x0b;
pub(crate) const INT_ZERO: u8 = 0x14;
pub(crate) const POS_INT_END: u8 = 0x1d;
pub(crate) const FLOAT: u8 = 0x20;
pub(crate) const DOUBLE: u8 = 0x21;
pub(crate) const FALSE: u8 = 0x26;
pub(crate) const TRUE: u8 = 0x27;
pub(crate) const UUID: u8 = 0x30;
pub(crate) const VERSIONSTAMP: u8 = 0x33;
/// Follows a 0x00 inside byte strings, and a null inside nested tuples, so that neither is
/// read as a terminator.
pub(crate) const ESCAPE: u8 = 0xff;

/// How deeply tuples may nest inside a packed tuple before decoding refuses it. Far beyond
/// anything a key (10 kB) or a layer needs, and shallow enough that a hostile value of
/// nothing but `0x05` bytes cannot exhaust the stack.
pub const MAX_DEPTH: usize = 256;

/// Why a tuple could not be packed or unpacked.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PackError {
    /// The input ends inside an element, or a nested tuple has no terminator.
    Truncated,
    /// An element starts with a byte that is no type code of the tuple layer.
    UnknownTypeCode(u8),
    /// An element (or a nested tuple's end) of another kind than the one being decoded.
    UnexpectedType {
        /// What the caller asked for.
        expected: &'static str,
        /// The type code found.
        found: u8,
    },
    /// Bytes left over after the value being decoded.
    TrailingBytes,
    /// Nested tuples deeper than [`MAX_DEPTH`].
    TooDeep,
    /// A string element that is not UTF-8.
    BadUtf8,
    /// An integer that does not fit the integer type being decoded.
    IntOutOfRange,
    /// [`Subspace::unpack`] of a key outside the subspace.
    NotInSubspace,
    /// [`pack_with_versionstamp`] of a tuple without an incomplete versionstamp.
    NoIncompleteVersionstamp,
    /// [`pack_with_versionstamp`] of a tuple with more than one incomplete versionstamp.
    MultipleIncompleteVersionstamps,
    /// The incomplete versionstamp's offset does not fit the 4-byte offset suffix.
    VersionstampOffsetTooLarge,
}

impl fmt::Display for PackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PackError::Truncated => write!(f, "packed tuple ends inside an element"),
            PackError::UnknownTypeCode(c) => write!(f, "unknown tuple type code {c:#04x}"),
            PackError::UnexpectedType { expected, found } => {
                write!(f, "expected {expected}, found type code {found:#04x}")
            }
            PackError::TrailingBytes => write!(f, "bytes left after the packed tuple"),
            PackError::TooDeep => write!(f, "tuples nested deeper than {MAX_DEPTH}"),
            PackError::BadUtf8 => write!(f, "string element is not UTF-8"),
            PackError::IntOutOfRange => write!(f, "integer does not fit the requested type"),
            PackError::NotInSubspace => write!(f, "key is not in the subspace"),
            PackError::NoIncompleteVersionstamp => {
                write!(f, "no incomplete versionstamp in the tuple")
            }
            PackError::MultipleIncompleteVersionstamps => {
                write!(f, "more than one incomplete versionstamp in the tuple")
            }
            PackError::VersionstampOffsetTooLarge => {
                write!(f, "versionstamp offset does not fit in 32 bits")
            }
        }
    }
}

impl core::error::Error for PackError {}

/// `Result` of the tuple layer.
pub type PackResult<T> = Result<T, PackError>;

/// Where packing is within the tuple being packed: depth 0 is the outermost tuple (whose
/// elements are written bare), its elements are at depth 1, and anything deeper sits inside a
/// nested tuple, where a null must be escaped. Implementations of [`TuplePack`] and
/// [`TupleUnpack`] pass `depth.increment()` to their elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TupleDepth {
    depth: usize,
    /// Write ±(2^64 − 1) the way the Python binding does (see [`pack_like_python`]).
    python_ints: bool,
}

impl TupleDepth {
    pub(crate) const fn root(python_ints: bool) -> Self {
        TupleDepth {
            depth: 0,
            python_ints,
        }
    }

    /// One level deeper.
    pub fn increment(self) -> Self {
        TupleDepth {
            depth: self.depth + 1,
            ..self
        }
    }

    /// The current depth; 0 is the outermost tuple.
    pub fn depth(self) -> usize {
        self.depth
    }

    pub(crate) fn python_ints(self) -> bool {
        self.python_ints
    }
}

/// Where the single incomplete versionstamp of a packed tuple sits, if any: what
/// `set_versionstamped_key` / `_value` need to know.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VersionstampOffset {
    /// No incomplete versionstamp.
    None,
    /// One, whose 10-byte transaction version starts at `offset` in the output buffer.
    OneIncomplete {
        /// Where the incomplete versionstamp's 10 bytes start.
        offset: usize,
    },
    /// More than one: unusable for a versionstamp operation.
    MultipleIncomplete,
}

impl VersionstampOffset {
    /// Both parts of one tuple together.
    pub fn combine(self, other: VersionstampOffset) -> VersionstampOffset {
        use VersionstampOffset::*;
        match (self, other) {
            (None, x) | (x, None) => x,
            _ => MultipleIncomplete,
        }
    }
}

impl core::ops::AddAssign for VersionstampOffset {
    fn add_assign(&mut self, rhs: Self) {
        *self = self.combine(rhs);
    }
}

/// A byte string element: borrowed from the packed input when it holds no escaped `0x00`.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Bytes<'a>(pub Cow<'a, [u8]>);

impl Bytes<'_> {
    /// The bytes, owned.
    pub fn into_owned(self) -> Vec<u8> {
        self.0.into_owned()
    }
}

impl fmt::Debug for Bytes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "b\"")?;
        for &b in self.0.iter() {
            if b.is_ascii_graphic() && b != b'\\' && b != b'"' {
                write!(f, "{}", b as char)?;
            } else {
                write!(f, "\\x{b:02x}")?;
            }
        }
        write!(f, "\"")
    }
}

impl core::ops::Deref for Bytes<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl AsRef<[u8]> for Bytes<'_> {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl<'a> From<&'a [u8]> for Bytes<'a> {
    fn from(b: &'a [u8]) -> Self {
        Bytes(Cow::Borrowed(b))
    }
}

impl From<Vec<u8>> for Bytes<'static> {
    fn from(b: Vec<u8>) -> Self {
        Bytes(Cow::Owned(b))
    }
}

impl<'a> From<&'a str> for Bytes<'a> {
    fn from(s: &'a str) -> Self {
        Bytes(Cow::Borrowed(s.as_bytes()))
    }
}

/// Packs `v` as a tuple key. A Rust tuple, `Vec` or [`Element::Tuple`] is the tuple itself;
/// any other value is packed as the one-element tuple holding it. An incomplete
/// [`Versionstamp`] is written as its placeholder; versionstamp operations need
/// [`pack_with_versionstamp`].
pub fn pack<T: TuplePack + ?Sized>(v: &T) -> Vec<u8> {
    let mut out = Vec::new();
    pack_into(v, &mut out);
    out
}

/// Appends `v`'s packing to `out`, telling where an incomplete versionstamp landed.
pub fn pack_into<T: TuplePack + ?Sized>(v: &T, out: &mut Vec<u8>) -> VersionstampOffset {
    v.pack(out, TupleDepth::root(false))
}

/// Packs `v` for `set_versionstamped_key` / `set_versionstamped_value`: the tuple must hold
/// exactly one incomplete versionstamp, whose offset follows as 4 little-endian bytes (the
/// format of API version 520 and later, which FDB 7.3 requires).
pub fn pack_with_versionstamp<T: TuplePack + ?Sized>(v: &T) -> PackResult<Vec<u8>> {
    let mut out = Vec::new();
    pack_into_with_versionstamp(v, &mut out)?;
    Ok(out)
}

/// [`pack_with_versionstamp`] appending to `out`; the offset counts from the start of `out`,
/// so bytes already there are a prefix of the versionstamped key. On error `out` is unchanged.
pub fn pack_into_with_versionstamp<T: TuplePack + ?Sized>(
    v: &T,
    out: &mut Vec<u8>,
) -> PackResult<()> {
    with_versionstamp_offset(out, |out| v.pack(out, TupleDepth::root(false)))
}

/// [`pack_into`] writing the two integers 2^64 − 1 and −(2^64 − 1) the way the Python
/// binding does, as 8-byte arbitrary-precision integers (`1d 08 ff..ff`, `0b f7 00..00`)
/// where the spec, Java, Go, Ruby and foundationdb-rs write `1c ff..ff` and `0c 00..00` (what
/// [`pack`] writes). Every other value packs identically. Only for matching bytes the Python
/// binding wrote, e.g. against its reference tester; both forms decode to the same value.
pub fn pack_into_like_python<T: TuplePack + ?Sized>(
    v: &T,
    out: &mut Vec<u8>,
) -> VersionstampOffset {
    v.pack(out, TupleDepth::root(true))
}

/// [`pack_into_with_versionstamp`] with the Python binding's integers (see
/// [`pack_into_like_python`]).
pub fn pack_into_with_versionstamp_like_python<T: TuplePack + ?Sized>(
    v: &T,
    out: &mut Vec<u8>,
) -> PackResult<()> {
    with_versionstamp_offset(out, |out| v.pack(out, TupleDepth::root(true)))
}

fn with_versionstamp_offset(
    out: &mut Vec<u8>,
    pack: impl FnOnce(&mut Vec<u8>) -> VersionstampOffset,
) -> PackResult<()> {
    let start = out.len();
    let result = match pack(out) {
        VersionstampOffset::None => Err(PackError::NoIncompleteVersionstamp),
        VersionstampOffset::MultipleIncomplete => Err(PackError::MultipleIncompleteVersionstamps),
        VersionstampOffset::OneIncomplete { offset } => u32::try_from(offset)
            .map_err(|_| PackError::VersionstampOffsetTooLarge)
            .map(|o| out.extend_from_slice(&o.to_le_bytes())),
    };
    if result.is_err() {
        out.truncate(start);
    }
    result
}

/// Unpacks a whole packed tuple into `T`; bytes left over are an error.
pub fn unpack<'de, T: TupleUnpack<'de>>(input: &'de [u8]) -> PackResult<T> {
    T::unpack_root(input)
}

/// The range of keys of every tuple that extends `v` by at least one element (FDB's
/// `Tuple.range`): `pack(v) + 0x00` up to `pack(v) + 0xff`.
pub fn range<T: TuplePack + ?Sized>(v: &T) -> (Vec<u8>, Vec<u8>) {
    Subspace::from_bytes(pack(v)).range()
}
