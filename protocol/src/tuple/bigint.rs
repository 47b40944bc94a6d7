//! Integers beyond 64 bits: the tuple layer's arbitrary-precision integers (type codes 0x0b
//! and 0x1d), up to 255 bytes of magnitude as in the Python and Java bindings.

use alloc::vec::Vec;
use core::cmp::Ordering;
use core::fmt;

use super::pack::{parse_int, write_int};
use super::*;

/// A signed integer of up to [`BigInt::MAX_BYTES`] bytes of magnitude: what the tuple layer
/// can hold. Only a sign and big-endian magnitude bytes, for conversion to and from any bignum
/// crate (`num_bigint::BigInt::from_bytes_be(sign, big.magnitude())`).
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct BigInt {
    /// Never true for zero.
    negative: bool,
    /// Big-endian, without leading zeros; empty for zero.
    magnitude: Vec<u8>,
}

impl BigInt {
    /// The most magnitude bytes a packed integer can have (its length is one byte).
    pub const MAX_BYTES: usize = 255;

    /// The integer `±magnitude` (big-endian); `None` beyond [`BigInt::MAX_BYTES`] bytes
    /// (leading zeros do not count).
    pub fn from_magnitude(negative: bool, magnitude: &[u8]) -> Option<BigInt> {
        let skip = magnitude.iter().take_while(|&&b| b == 0).count();
        let magnitude = &magnitude[skip..];
        if magnitude.len() > Self::MAX_BYTES {
            return None;
        }
        Some(BigInt {
            negative: negative && !magnitude.is_empty(),
            magnitude: magnitude.to_vec(),
        })
    }

    /// Whether the integer is below zero.
    pub fn is_negative(&self) -> bool {
        self.negative
    }

    /// The absolute value, big-endian, without leading zeros (empty for zero).
    pub fn magnitude(&self) -> &[u8] {
        &self.magnitude
    }

    /// The value as an `i64`, when it fits.
    pub fn to_i64(&self) -> Option<i64> {
        i64::try_from(self.to_i128()?).ok()
    }

    /// The value as an `i128`, when it fits.
    pub fn to_i128(&self) -> Option<i128> {
        super::pack::signed_i128(self.negative, self.magnitude_u128()?)
    }

    /// The value as a `u128`, when it is non-negative and fits.
    pub fn to_u128(&self) -> Option<u128> {
        if self.negative {
            None
        } else {
            self.magnitude_u128()
        }
    }

    fn magnitude_u128(&self) -> Option<u128> {
        if self.magnitude.len() > 16 {
            return None;
        }
        Some(
            self.magnitude
                .iter()
                .fold(0u128, |m, &b| (m << 8) | b as u128),
        )
    }

    fn from_u128(negative: bool, m: u128) -> BigInt {
        let bytes = m.to_be_bytes();
        let skip = (m.leading_zeros() / 8) as usize;
        BigInt {
            negative: negative && m != 0,
            magnitude: bytes[skip..].to_vec(),
        }
    }
}

impl From<i64> for BigInt {
    fn from(v: i64) -> Self {
        BigInt::from_u128(v < 0, v.unsigned_abs() as u128)
    }
}

impl From<u64> for BigInt {
    fn from(v: u64) -> Self {
        BigInt::from_u128(false, v as u128)
    }
}

impl From<i128> for BigInt {
    fn from(v: i128) -> Self {
        BigInt::from_u128(v < 0, v.unsigned_abs())
    }
}

impl From<u128> for BigInt {
    fn from(v: u128) -> Self {
        BigInt::from_u128(false, v)
    }
}

impl Ord for BigInt {
    fn cmp(&self, other: &Self) -> Ordering {
        // Longer magnitudes are larger; equal lengths compare bytewise.
        let by_magnitude = self
            .magnitude
            .len()
            .cmp(&other.magnitude.len())
            .then_with(|| self.magnitude.cmp(&other.magnitude));
        match (self.negative, other.negative) {
            (false, false) => by_magnitude,
            (true, true) => by_magnitude.reverse(),
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
        }
    }
}

impl PartialOrd for BigInt {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Debug for BigInt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(v) = self.to_i128() {
            return write!(f, "BigInt({v})");
        }
        write!(f, "BigInt({}0x", if self.negative { "-" } else { "" })?;
        for b in &self.magnitude {
            write!(f, "{b:02x}")?;
        }
        write!(f, ")")
    }
}

impl TuplePack for BigInt {
    fn pack(&self, w: &mut Vec<u8>, depth: TupleDepth) -> VersionstampOffset {
        write_int(w, self.negative, &self.magnitude, depth);
        VersionstampOffset::None
    }
}

impl TupleUnpack<'_> for BigInt {
    fn unpack(input: &[u8], _depth: TupleDepth) -> PackResult<(&[u8], Self)> {
        let (rest, raw) = parse_int(input)?;
        // At most 255 bytes: a length byte cannot say more.
        let magnitude = raw.magnitude_bytes();
        Ok((
            rest,
            BigInt {
                negative: raw.negative && !magnitude.is_empty(),
                magnitude,
            },
        ))
    }
}
