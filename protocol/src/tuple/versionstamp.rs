//! 96-bit versionstamps as tuple elements (type code 0x33).
//!
//! The first 10 bytes are what FDB writes at commit for a versionstamp operation (the
//! big-endian commit version, then the batch index); the last 2 are the user's, ordering
//! several stamps of one transaction. Before commit the 10 bytes are all 0xff: an *incomplete*
//! versionstamp, which [`pack_with_versionstamp`](super::pack_with_versionstamp) locates for
//! `set_versionstamped_key` / `_value`.

use alloc::vec::Vec;
use core::fmt;

use super::pack::fixed;
use super::*;

/// A 96-bit versionstamp: 10 bytes of transaction version, 2 of user version.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Versionstamp {
    bytes: [u8; 12],
}

impl Versionstamp {
    /// A placeholder for the versionstamp of the committing transaction.
    pub fn incomplete(user_version: u16) -> Versionstamp {
        let mut bytes = [0xff; 12];
        bytes[10..].copy_from_slice(&user_version.to_be_bytes());
        Versionstamp { bytes }
    }

    /// A versionstamp as a committed transaction got it (`get_versionstamp`).
    pub fn complete(tr_version: [u8; 10], user_version: u16) -> Versionstamp {
        let mut bytes = [0u8; 12];
        bytes[..10].copy_from_slice(&tr_version);
        bytes[10..].copy_from_slice(&user_version.to_be_bytes());
        Versionstamp { bytes }
    }

    /// The 10 bytes FDB fills in at commit.
    pub fn transaction_version(&self) -> &[u8] {
        &self.bytes[..10]
    }

    /// The two user bytes after the transaction's 10.
    pub fn user_version(&self) -> u16 {
        u16::from_be_bytes([self.bytes[10], self.bytes[11]])
    }

    /// False while the transaction version is the all-0xff placeholder.
    pub fn is_complete(&self) -> bool {
        self.bytes[..10] != [0xff; 10]
    }

    /// Its 12 bytes.
    pub fn as_bytes(&self) -> &[u8; 12] {
        &self.bytes
    }
}

impl From<[u8; 12]> for Versionstamp {
    fn from(bytes: [u8; 12]) -> Self {
        Versionstamp { bytes }
    }
}

impl fmt::Debug for Versionstamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_complete() {
            write!(f, "Versionstamp(")?;
            for b in self.transaction_version() {
                write!(f, "{b:02x}")?;
            }
            write!(f, ", {})", self.user_version())
        } else {
            write!(f, "Versionstamp(incomplete, {})", self.user_version())
        }
    }
}

impl TuplePack for Versionstamp {
    fn pack(&self, w: &mut Vec<u8>, _depth: TupleDepth) -> VersionstampOffset {
        w.push(VERSIONSTAMP);
        let offset = w.len();
        w.extend_from_slice(&self.bytes);
        if self.is_complete() {
            VersionstampOffset::None
        } else {
            VersionstampOffset::OneIncomplete { offset }
        }
    }
}

impl TupleUnpack<'_> for Versionstamp {
    fn unpack(input: &[u8], _depth: TupleDepth) -> PackResult<(&[u8], Self)> {
        let (rest, bytes) = fixed(input, VERSIONSTAMP, "versionstamp")?;
        Ok((rest, Versionstamp { bytes }))
    }
}
