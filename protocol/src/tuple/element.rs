//! [`Element`]: one tuple element of any type, for tuples whose shape is known only at run time.

use alloc::borrow::Cow;
use alloc::vec::Vec;
use core::cmp::Ordering;

use super::pack::*;
use super::*;

/// A tuple element of any of the tuple layer's types. Compares (and is equal) the way the
/// packed bytes compare: by type first (null < bytes < string < nested tuple < integer <
/// float < double < false < true < UUID < versionstamp), then by value, floats in IEEE total
/// order (`-0.0 < 0.0`, NaNs by their bits). `Int(5)` equals `BigInt(5.into())`.
#[derive(Clone, Debug)]
pub enum Element<'a> {
    /// The null element (type code `0x00`).
    Nil,
    /// A byte string (`0x01`).
    Bytes(Bytes<'a>),
    /// A Unicode string (`0x02`).
    String(Cow<'a, str>),
    /// A nested tuple (`0x05`).
    Tuple(Vec<Element<'a>>),
    /// An integer that fits 64 bits; decoding gives `Int` for every such value.
    Int(i64),
    /// An integer beyond `i64`; decoding gives `BigInt` only for those.
    BigInt(BigInt),
    /// A single-precision float (`0x20`).
    Float(f32),
    /// A double-precision float (`0x21`).
    Double(f64),
    /// A boolean (`0x26` / `0x27`).
    Bool(bool),
    /// A UUID (`0x30`).
    Uuid(Uuid),
    /// A 96-bit versionstamp (`0x33`).
    Versionstamp(Versionstamp),
}

impl<'a> Element<'a> {
    /// The same element owning all its data.
    pub fn into_owned(self) -> Element<'static> {
        match self {
            Element::Nil => Element::Nil,
            Element::Bytes(b) => Element::Bytes(Bytes(Cow::Owned(b.into_owned()))),
            Element::String(s) => Element::String(Cow::Owned(s.into_owned())),
            Element::Tuple(v) => Element::Tuple(v.into_iter().map(Element::into_owned).collect()),
            Element::Int(v) => Element::Int(v),
            Element::BigInt(v) => Element::BigInt(v),
            Element::Float(v) => Element::Float(v),
            Element::Double(v) => Element::Double(v),
            Element::Bool(v) => Element::Bool(v),
            Element::Uuid(v) => Element::Uuid(v),
            Element::Versionstamp(v) => Element::Versionstamp(v),
        }
    }

    /// Whether this is the null element.
    pub fn is_nil(&self) -> bool {
        matches!(self, Element::Nil)
    }

    /// The byte string, if it is one.
    pub fn as_bytes(&self) -> Option<&Bytes<'a>> {
        match self {
            Element::Bytes(b) => Some(b),
            _ => None,
        }
    }

    /// The string, if it is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Element::String(s) => Some(s),
            _ => None,
        }
    }

    /// The nested tuple, if it is one.
    pub fn as_tuple(&self) -> Option<&[Element<'a>]> {
        match self {
            Element::Tuple(v) => Some(v),
            _ => None,
        }
    }

    /// The integer, when it fits 64 bits (also from a `BigInt` that does).
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Element::Int(v) => Some(*v),
            Element::BigInt(v) => v.to_i64(),
            _ => None,
        }
    }

    /// The integer beyond 64 bits, if it is one.
    pub fn as_bigint(&self) -> Option<&BigInt> {
        match self {
            Element::BigInt(v) => Some(v),
            _ => None,
        }
    }

    /// The float, if it is one.
    pub fn as_f32(&self) -> Option<f32> {
        match self {
            Element::Float(v) => Some(*v),
            _ => None,
        }
    }

    /// The double, if it is one.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Element::Double(v) => Some(*v),
            _ => None,
        }
    }

    /// The boolean, if it is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Element::Bool(v) => Some(*v),
            _ => None,
        }
    }

    /// The UUID, if it is one.
    pub fn as_uuid(&self) -> Option<&Uuid> {
        match self {
            Element::Uuid(v) => Some(v),
            _ => None,
        }
    }

    /// The versionstamp, if it is one.
    pub fn as_versionstamp(&self) -> Option<&Versionstamp> {
        match self {
            Element::Versionstamp(v) => Some(v),
            _ => None,
        }
    }

    /// How many incomplete versionstamps this element holds, nested tuples included.
    pub fn count_incomplete_versionstamp(&self) -> usize {
        match self {
            Element::Versionstamp(v) if !v.is_complete() => 1,
            Element::Tuple(v) => v.iter().map(Element::count_incomplete_versionstamp).sum(),
            _ => 0,
        }
    }

    /// The type code that orders this element among other types (integers share one).
    fn rank(&self) -> u8 {
        match self {
            Element::Nil => NIL,
            Element::Bytes(_) => BYTES,
            Element::String(_) => STRING,
            Element::Tuple(_) => NESTED,
            Element::Int(_) | Element::BigInt(_) => INT_ZERO,
            Element::Float(_) => FLOAT,
            Element::Double(_) => DOUBLE,
            Element::Bool(_) => FALSE,
            Element::Uuid(_) => UUID,
            Element::Versionstamp(_) => VERSIONSTAMP,
        }
    }
}

/// `i` against a `BigInt`: a `BigInt` outside `i64` is beyond every `i64` on its side.
fn cmp_int_big(i: i64, b: &BigInt) -> Ordering {
    match b.to_i64() {
        Some(b) => i.cmp(&b),
        None if b.is_negative() => Ordering::Greater,
        None => Ordering::Less,
    }
}

impl Ord for Element<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        use Element as E;
        self.rank()
            .cmp(&other.rank())
            .then_with(|| match (self, other) {
                (E::Bytes(a), E::Bytes(b)) => a.cmp(b),
                (E::String(a), E::String(b)) => a.as_bytes().cmp(b.as_bytes()),
                (E::Tuple(a), E::Tuple(b)) => a.iter().cmp(b.iter()),
                (E::Int(a), E::Int(b)) => a.cmp(b),
                (E::BigInt(a), E::BigInt(b)) => a.cmp(b),
                (E::Int(a), E::BigInt(b)) => cmp_int_big(*a, b),
                (E::BigInt(a), E::Int(b)) => cmp_int_big(*b, a).reverse(),
                (E::Float(a), E::Float(b)) => f32_to_key(*a).cmp(&f32_to_key(*b)),
                (E::Double(a), E::Double(b)) => f64_to_key(*a).cmp(&f64_to_key(*b)),
                (E::Bool(a), E::Bool(b)) => a.cmp(b),
                (E::Uuid(a), E::Uuid(b)) => a.cmp(b),
                (E::Versionstamp(a), E::Versionstamp(b)) => a.cmp(b),
                // Equal ranks are the same type, and two nulls are equal.
                _ => Ordering::Equal,
            })
    }
}

impl PartialOrd for Element<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Element<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Element<'_> {}

impl TuplePack for Element<'_> {
    fn pack(&self, w: &mut Vec<u8>, depth: TupleDepth) -> VersionstampOffset {
        match self {
            Element::Nil => {
                write_nil(w, depth);
                VersionstampOffset::None
            }
            Element::Bytes(v) => v.pack(w, depth),
            Element::String(v) => v.pack(w, depth),
            Element::Tuple(v) => pack_seq(v, w, depth),
            Element::Int(v) => v.pack(w, depth),
            Element::BigInt(v) => v.pack(w, depth),
            Element::Float(v) => v.pack(w, depth),
            Element::Double(v) => v.pack(w, depth),
            Element::Bool(v) => v.pack(w, depth),
            Element::Uuid(v) => v.pack(w, depth),
            Element::Versionstamp(v) => v.pack(w, depth),
        }
    }
}

impl<'de> TupleUnpack<'de> for Element<'de> {
    /// At the root, the whole tuple as an [`Element::Tuple`]; below it, one element.
    fn unpack(input: &'de [u8], depth: TupleDepth) -> PackResult<(&'de [u8], Self)> {
        if depth.depth() == 0 {
            let (rest, v) = unpack_seq(input, depth)?;
            return Ok((rest, Element::Tuple(v)));
        }
        let code = *input.first().ok_or(PackError::Truncated)?;
        Ok(match code {
            NIL => (parse_nil(input, depth)?, Element::Nil),
            BYTES => {
                let (rest, b) = parse_bytes(input)?;
                (rest, Element::Bytes(Bytes(b)))
            }
            STRING => {
                let (rest, s) = parse_string(input)?;
                (rest, Element::String(s))
            }
            NESTED => {
                let (rest, v) = unpack_seq(input, depth)?;
                (rest, Element::Tuple(v))
            }
            c if is_int_code(c) => {
                let (rest, big) = BigInt::unpack(input, depth)?;
                let e = match big.to_i64() {
                    Some(v) => Element::Int(v),
                    None => Element::BigInt(big),
                };
                (rest, e)
            }
            FLOAT => {
                let (rest, v) = parse_f32(input)?;
                (rest, Element::Float(v))
            }
            DOUBLE => {
                let (rest, v) = parse_f64(input)?;
                (rest, Element::Double(v))
            }
            FALSE => (&input[1..], Element::Bool(false)),
            TRUE => (&input[1..], Element::Bool(true)),
            UUID => {
                let (rest, v) = Uuid::unpack(input, depth)?;
                (rest, Element::Uuid(v))
            }
            VERSIONSTAMP => {
                let (rest, v) = Versionstamp::unpack(input, depth)?;
                (rest, Element::Versionstamp(v))
            }
            c => return Err(PackError::UnknownTypeCode(c)),
        })
    }
}

/// The plain variants: each wraps its value as it is.
macro_rules! from_plain {
    ($($t:ty => $variant:ident),* $(,)?) => {
        $(impl From<$t> for Element<'_> {
            fn from(v: $t) -> Self {
                Element::$variant(v)
            }
        })*
    };
}

from_plain! {
    i64 => Int,
    bool => Bool,
    f32 => Float,
    f64 => Double,
    Uuid => Uuid,
    Versionstamp => Versionstamp,
}

impl From<BigInt> for Element<'_> {
    fn from(v: BigInt) -> Self {
        match v.to_i64() {
            Some(i) => Element::Int(i),
            None => Element::BigInt(v),
        }
    }
}

impl<'a> From<&'a str> for Element<'a> {
    fn from(v: &'a str) -> Self {
        Element::String(Cow::Borrowed(v))
    }
}

impl From<alloc::string::String> for Element<'_> {
    fn from(v: alloc::string::String) -> Self {
        Element::String(Cow::Owned(v))
    }
}

impl<'a> From<&'a [u8]> for Element<'a> {
    fn from(v: &'a [u8]) -> Self {
        Element::Bytes(Bytes(Cow::Borrowed(v)))
    }
}

impl From<Vec<u8>> for Element<'_> {
    fn from(v: Vec<u8>) -> Self {
        Element::Bytes(Bytes(Cow::Owned(v)))
    }
}

impl<'a> From<Vec<Element<'a>>> for Element<'a> {
    fn from(v: Vec<Element<'a>>) -> Self {
        Element::Tuple(v)
    }
}
