//! UIDs and endpoint tokens.
//!
//! FDB names every endpoint by a 128-bit UID (`flow/include/flow/IRandom.h`), written on the
//! wire as two little-endian u64s, `first` then `second`. Interfaces send only the token of their
//! first stream; the others are *derived* from it (`Endpoint::getAdjustedEndpoint` in
//! `fdbrpc/include/fdbrpc/FlowTransport.h`), which is why [`Uid::adjusted`] exists.

use core::fmt;

/// A 128-bit identifier (`UID` in FDB). Also the token that addresses an endpoint.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Uid {
    /// The first half (`u64::MAX` for well-known endpoints).
    pub first: u64,
    /// The second half.
    pub second: u64,
}

impl Uid {
    /// A UID from its halves.
    pub const fn new(first: u64, second: u64) -> Self {
        Uid { first, second }
    }

    /// The token of a well-known endpoint: every process listens on these without being told.
    pub const fn well_known(id: u64) -> Self {
        Uid {
            first: u64::MAX,
            second: id,
        }
    }

    /// True for tokens made by [`Uid::well_known`].
    pub const fn is_well_known(&self) -> bool {
        self.first == u64::MAX
    }

    /// The token of stream `index` of an interface whose first stream has this token.
    ///
    /// FDB adds `index` to the top half of `first` and to the low 32 bits of `second`
    /// (wrapping within those 32 bits), so all streams of one interface share a prefix.
    pub const fn adjusted(&self, index: u32) -> Self {
        let first = self.first.wrapping_add((index as u64) << 32);
        let low = (self.second as u32).wrapping_add(index);
        let second = (self.second & 0xffff_ffff_0000_0000) | low as u64;
        Uid { first, second }
    }

    /// The 16 wire bytes.
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.first.to_le_bytes());
        b[8..].copy_from_slice(&self.second.to_le_bytes());
        b
    }

    /// Reads the 16 wire bytes; `None` if `b` is shorter than 16.
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        let first = u64::from_le_bytes(b.get(..8)?.try_into().ok()?);
        let second = u64::from_le_bytes(b.get(8..16)?.try_into().ok()?);
        Some(Uid { first, second })
    }
}

impl fmt::Debug for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Uid({self})")
    }
}

/// FDB prints UIDs as 32 hex digits, `first` then `second`.
impl fmt::Display for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}{:016x}", self.first, self.second)
    }
}

/// Well-known endpoint ids (`fdbrpc/include/fdbrpc/WellKnownEndpoints.h`, `FlowTransport.h`).
pub mod well_known {
    use super::Uid;
    /// Where a process answers a packet for a token it does not know.
    pub const ENDPOINT_NOT_FOUND: Uid = Uid::well_known(0);
    /// The connection monitor's ping.
    pub const PING_PACKET: Uid = Uid::well_known(1);
    /// Sent back when a request lacks the authorization the endpoint needs.
    pub const UNAUTHORIZED_ENDPOINT: Uid = Uid::well_known(2);
    /// Coordinator: who is the cluster controller (used for status).
    pub const CLIENT_LEADER_REG_GET_LEADER: Uid = Uid::well_known(3);
    /// Coordinator: long-poll for `ClientDBInfo` (proxies).
    pub const CLIENT_LEADER_REG_OPEN_DATABASE: Uid = Uid::well_known(4);
    /// The protocol version of a process, readable by any version.
    pub const PROTOCOL_INFO: Uid = Uid::well_known(10);
    /// Coordinator: the cluster description is mutable.
    pub const CLIENT_LEADER_REG_DESCRIPTOR_MUTABLE: Uid = Uid::well_known(12);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adjusted_matches_capture() {
        // grv.frames.jsonl: GRV proxy base token and its refreshGlobalConfig stream (index 3).
        let base = Uid::from_bytes(&hex("0772d9970cac4df8710000003b5f5460")).unwrap();
        let want = Uid::from_bytes(&hex("0772d9970fac4df8740000003b5f5460")).unwrap();
        assert_eq!(base.adjusted(3), want);
        assert_eq!(base.adjusted(0), base);
    }

    #[test]
    fn adjusted_wraps_low_half_only() {
        let u = Uid::new(5, 0x1234_5678_ffff_ffff);
        let a = u.adjusted(2);
        assert_eq!(a.second, 0x1234_5678_0000_0001);
        assert_eq!(a.first, 5 + (2u64 << 32));
    }

    #[test]
    fn bytes_roundtrip_and_display() {
        let u = Uid::new(0x0102030405060708, 0x1112131415161718);
        assert_eq!(Uid::from_bytes(&u.to_bytes()), Some(u));
        assert_eq!(u.to_bytes()[0], 0x08);
        assert_eq!(alloc::format!("{u}"), "01020304050607081112131415161718");
        assert_eq!(Uid::from_bytes(&[0; 15]), None);
        assert!(well_known::PING_PACKET.is_well_known());
    }

    fn hex(s: &str) -> alloc::vec::Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }
}
