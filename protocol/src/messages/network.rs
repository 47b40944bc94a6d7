//! Addresses and endpoints as they travel inside messages (`flow/include/flow/IPAddress.h`,
//! `NetworkAddress.h`, `fdbrpc/include/fdbrpc/FlowTransport.h`), and `interface_streams!`,
//! which names an interface's streams by their index among its endpoints.
//!
//! Field lists here that look alike, within this file or across files, are separate FDB
//! wire definitions (each its C++ `serializer` call, see [`super`]): one changes without
//! the other, so they stay apart.

use alloc::vec::Vec;
use bytes::Bytes;
use core::fmt;

use crate::serializer::{
    load_alternative, union_slots, DecodeError, Fb, Layout, Reader, Result, Saved, VtCollector,
    Writer,
};
use crate::uid::Uid;

/// An IP address: a table holding `std::variant<uint32_t, std::array<uint8_t, 16>>`.
/// The v4 alternative is a bare scalar; the v6 one is a 16-entry byte vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IpAddress {
    /// IPv4, the address as a big-endian number.
    V4(u32),
    /// IPv6, the sixteen address bytes.
    V6([u8; 16]),
}

impl IpAddress {
    /// The address as sixteen bytes (a v4 one in the first four, zeros after) and whether it
    /// is v6: what FDB compares addresses by.
    pub(crate) fn octets16(&self) -> ([u8; 16], bool) {
        match *self {
            IpAddress::V4(v) => {
                let mut b = [0u8; 16];
                b[..4].copy_from_slice(&v.to_be_bytes());
                (b, false)
            }
            IpAddress::V6(b) => (b, true),
        }
    }
}

impl Default for IpAddress {
    fn default() -> Self {
        IpAddress::V4(0)
    }
}

impl fmt::Display for IpAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpAddress::V4(v) => write!(f, "{}", core::net::Ipv4Addr::from(*v)),
            IpAddress::V6(b) => write!(f, "[{}]", core::net::Ipv6Addr::from(*b)),
        }
    }
}

impl From<core::net::IpAddr> for IpAddress {
    fn from(ip: core::net::IpAddr) -> Self {
        match ip {
            core::net::IpAddr::V4(v) => IpAddress::V4(u32::from(v)),
            core::net::IpAddr::V6(v) => IpAddress::V6(v.octets()),
        }
    }
}

impl From<IpAddress> for core::net::IpAddr {
    fn from(ip: IpAddress) -> Self {
        match ip {
            IpAddress::V4(v) => core::net::IpAddr::V4(v.into()),
            IpAddress::V6(b) => core::net::IpAddr::V6(b.into()),
        }
    }
}

impl Fb for IpAddress {
    const LAYOUT: Layout = Layout::Indirect;
    fn save(&self, w: &mut Writer) -> Saved {
        let mut t = w.begin_table(&[Layout::Union]);
        let s = match self {
            IpAddress::V4(v) => Saved::Union {
                tag: 1,
                target: Some(w.save_alternative(v)),
            },
            IpAddress::V6(b) => match w.save_vector(b.iter()) {
                Saved::Offset(o) => Saved::Union {
                    tag: 2,
                    target: Some(o),
                },
                _ => unreachable!("vectors are saved out of line"),
            },
        };
        t.push(s);
        Saved::Offset(w.end_table(t))
    }
    fn load(r: Reader<'_>, pos: usize) -> Result<Self> {
        let mut t = r.table(pos)?;
        match union_slots(&mut t)? {
            (0, _) => Ok(IpAddress::default()),
            (1, Some(p)) => Ok(IpAddress::V4(load_alternative(r, p)?)),
            (2, Some(p)) => {
                let v: Vec<u8> = Fb::load(r, p)?;
                let b: [u8; 16] = v
                    .as_slice()
                    .try_into()
                    .map_err(|_| DecodeError::InvalidValue("IPv6 address"))?;
                Ok(IpAddress::V6(b))
            }
            (tag, _) => Err(DecodeError::BadUnionTag { tag }),
        }
    }
    fn collect_vtables(c: &mut VtCollector) {
        c.add(&[Layout::Union]);
    }
}

crate::serializer::fb_table! {
    /// A process address. `flags`: 1 = private, 2 = TLS.
    pub struct NetworkAddress {
        pub ip: IpAddress,
        pub port: u16,
        pub flags: u16,
        pub from_hostname: bool,
    }
}

impl NetworkAddress {
    /// The address is the process's own (not public) one.
    pub const FLAG_PRIVATE: u16 = 1;
    /// The process speaks TLS at this address (`:tls` in a cluster file).
    pub const FLAG_TLS: u16 = 2;

    /// A plain (not TLS, public) address.
    pub fn new(ip: impl Into<IpAddress>, port: u16) -> Self {
        NetworkAddress {
            ip: ip.into(),
            port,
            flags: 0,
            from_hostname: false,
        }
    }
    /// Whether a connection to this address must speak TLS.
    pub fn is_tls(&self) -> bool {
        self.flags & Self::FLAG_TLS != 0
    }
}

impl fmt::Display for NetworkAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.ip, self.port)?;
        if self.is_tls() {
            write!(f, ":tls")?;
        }
        Ok(())
    }
}

crate::serializer::fb_table! {
    /// A process's addresses: the main one and, when it listens on both, the other of TLS/plain.
    pub struct NetworkAddressList {
        pub address: NetworkAddress,
        pub secondary_address: Option<NetworkAddress>,
    }
}

crate::serializer::fb_table! {
    /// Where a stream lives: addresses plus token.
    pub struct Endpoint {
        pub addresses: NetworkAddressList,
        pub token: Uid,
    }
}

impl NetworkAddressList {
    /// The address a client sends to: the main one, unless the process also listens on the
    /// other of TLS/plain and the main one is TLS. FDB's `Endpoint::choosePrimaryAddress`
    /// swaps the two when the main address's TLS differs from the local process's, and a
    /// client's local address (never bound) is the plain `0.0.0.0:0` — so libfdb_c, even
    /// with TLS configured, talks plain to a process that offers both.
    pub fn client_address(&self) -> &NetworkAddress {
        match &self.secondary_address {
            Some(other) if self.address.is_tls() => other,
            _ => &self.address,
        }
    }
}

impl Endpoint {
    /// Where a client sends this endpoint's requests ([`NetworkAddressList::client_address`]).
    pub fn address(&self) -> &NetworkAddress {
        self.addresses.client_address()
    }

    /// Stream `index` of the interface whose first stream is this endpoint.
    pub fn adjusted(&self, index: u32) -> Endpoint {
        Endpoint {
            addresses: self.addresses.clone(),
            token: self.token.adjusted(index),
        }
    }
}

crate::serializer::fb_table! {
    /// Processes to exclude (`AddressExclusion`): a whole machine when `port` is 0, else the
    /// one process at `ip:port`.
    pub struct AddressExclusion {
        pub ip: IpAddress,
        pub port: i32,
    }
}

impl AddressExclusion {
    /// Whether it names the process at `addr` (`AddressExclusion::excludes`).
    pub fn excludes(&self, addr: &NetworkAddress) -> bool {
        self.ip == addr.ip && (self.port == 0 || self.port == i32::from(addr.port))
    }
}

crate::serializer::fb_table! {
    /// A `RequestStream<T>`: serialized as its endpoint.
    pub struct RequestStream {
        pub endpoint: Endpoint,
    }
}

// Here beside `RequestStream` and `Endpoint`, whose tokens it adjusts, rather than in the
// folder's `mod.rs`, which re-exports the messages that use it.
/// An interface's stream indexes (FDB numbers an interface's endpoints from the token of the
/// one that travels, `$first`), each named with FDB's stream name, and `stream`, the token of
/// one of them.
macro_rules! interface_streams {
    ($iface:ident, through $first:ident { $($name:ident = $index:literal, $fdb:literal;)* }) => {
        impl $iface {
            $(
                #[doc = concat!("Index of the `", $fdb, "` stream among the interface's endpoints.")]
                pub const $name: u32 = $index;
            )*

            /// The token of stream `index` (one of the constants above).
            pub fn stream(&self, index: u32) -> $crate::uid::Uid {
                self.$first.endpoint.token.adjusted(index)
            }
        }
    };
}

pub(crate) use interface_streams;

crate::serializer::fb_table! {
    /// A process's locality: `std::map<key, Optional<value>>` as pairs (`fdbrpc/Locality.h`).
    pub struct LocalityEntry {
        pub key: Bytes,
        pub value: Option<Bytes>,
    }
}

crate::serializer::fb_table! {
    /// Where a process is (zone, machine, dc, process id ...).
    pub struct LocalityData {
        pub data: Vec<LocalityEntry>,
    }
}

impl LocalityData {
    /// The value under `key` (`dcid`, `zoneid`, ...): `None` when the key is absent or
    /// present without a value, which FDB treats alike.
    pub fn get(&self, key: &[u8]) -> Option<&Bytes> {
        self.data
            .iter()
            .find(|e| e.key.as_ref() == key)
            .and_then(|e| e.value.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16, tls: bool) -> NetworkAddress {
        NetworkAddress {
            flags: if tls { NetworkAddress::FLAG_TLS } else { 0 },
            ..NetworkAddress::new(core::net::IpAddr::from([127, 0, 0, 1]), port)
        }
    }

    #[test]
    fn a_client_prefers_the_plain_address_of_a_process_listening_on_both() {
        let both = NetworkAddressList {
            address: addr(4500, true),
            secondary_address: Some(addr(4501, false)),
        };
        assert_eq!(both.client_address(), &addr(4501, false));
        let plain_first = NetworkAddressList {
            address: addr(4501, false),
            secondary_address: Some(addr(4500, true)),
        };
        assert_eq!(plain_first.client_address(), &addr(4501, false));
        let tls_only = NetworkAddressList {
            address: addr(4500, true),
            secondary_address: None,
        };
        assert_eq!(tls_only.client_address(), &addr(4500, true));
    }
}
