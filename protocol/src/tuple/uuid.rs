//! RFC 4122 UUIDs as tuple elements (type code 0x30): 16 bytes in network order.

use alloc::vec::Vec;
use core::fmt;

use super::pack::fixed;
use super::*;

/// A UUID: its 16 bytes, big-endian, which is also how it sorts.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Uuid([u8; 16]);

impl Uuid {
    /// A UUID of these 16 bytes (big-endian, as packed).
    pub const fn from_bytes(bytes: [u8; 16]) -> Uuid {
        Uuid(bytes)
    }

    /// Its 16 bytes.
    pub const fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// The UUID with this 128-bit value (`uuid.UUID(int=...)` in Python).
    pub const fn from_u128(v: u128) -> Uuid {
        Uuid(v.to_be_bytes())
    }

    /// Its value as one number.
    pub const fn as_u128(&self) -> u128 {
        u128::from_be_bytes(self.0)
    }
}

impl From<[u8; 16]> for Uuid {
    fn from(bytes: [u8; 16]) -> Self {
        Uuid(bytes)
    }
}

impl fmt::Debug for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The usual hyphenated form.
impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                write!(f, "-")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl TuplePack for Uuid {
    fn pack(&self, w: &mut Vec<u8>, _depth: TupleDepth) -> VersionstampOffset {
        w.push(UUID);
        w.extend_from_slice(&self.0);
        VersionstampOffset::None
    }
}

impl TupleUnpack<'_> for Uuid {
    fn unpack(input: &[u8], _depth: TupleDepth) -> PackResult<(&[u8], Self)> {
        let (rest, bytes) = fixed(input, UUID, "UUID")?;
        Ok((rest, Uuid(bytes)))
    }
}
