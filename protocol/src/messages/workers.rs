//! The cluster's worker processes, behind the special keys `\xff\xff/worker_interfaces/`
//! (`fdbclient/include/fdbclient/ClusterInterface.h`, `ClientWorkerInterface.h`).
//!
//! A `GetClientWorkersRequest` to the cluster controller's `getClientWorkers` stream (its
//! `ClusterInterface`, from the coordinators' leader info) answers
//! `ErrorOr<std::vector<ClientWorkerInterface>>`. libfdb_c shows each worker at its address,
//! the value its interface in the old binary format ([`ClientWorkerInterface::binary_value`]),
//! which fdbcli's `kill` reads back.
//!
//! Field lists here that look alike, within this file or across files, are separate FDB
//! wire definitions (each its C++ `serializer` call, see [`super`]): one changes without
//! the other, so they stay apart.

use alloc::vec::Vec;
use bytes::Bytes;

use super::common::{fid, EnsureTable, ErrorOr, ReplyPromise};
use super::network::{IpAddress, NetworkAddress, RequestStream};
use crate::serializer::{decode_root, encode_with, file_identifier, DecodeError, Message};

crate::serializer::fb_message! {
    /// Asks the cluster controller for every worker's client interface.
    pub struct GetClientWorkersRequest = 10771791; {
        pub reply: ReplyPromise,
    }
}

crate::serializer::fb_message! {
    /// What a client may ask of a worker process: reboot, the profiler, failure injection.
    pub struct ClientWorkerInterface = 12418152; {
        pub reboot: RequestStream,
        pub profiler: RequestStream,
        pub set_failure_injection: RequestStream,
    }
}

/// `std::vector<T>`'s identifier wrapper (`FileIdentifierFor<std::vector<T>>`).
const STD_VECTOR: u32 = 5;

/// The file identifier of the reply to [`GetClientWorkersRequest`]:
/// `ErrorOr<std::vector<ClientWorkerInterface>>`.
pub const CLIENT_WORKERS_REPLY_FILE_IDENTIFIER: u32 = fid::reply(fid::compose(
    STD_VECTOR,
    ClientWorkerInterface::FILE_IDENTIFIER,
));

/// Decodes the reply to [`GetClientWorkersRequest`].
pub fn decode_client_workers(
    msg: &Bytes,
) -> Result<ErrorOr<Vec<ClientWorkerInterface>>, DecodeError> {
    let found = file_identifier(msg)?;
    if found != CLIENT_WORKERS_REPLY_FILE_IDENTIFIER {
        return Err(DecodeError::FileIdentifier {
            expected: CLIENT_WORKERS_REPLY_FILE_IDENTIFIER,
            found,
        });
    }
    Ok(
        match decode_root::<ErrorOr<EnsureTable<Vec<ClientWorkerInterface>>>>(msg)? {
            ErrorOr::Ok(EnsureTable(v)) => ErrorOr::Ok(v),
            ErrorOr::Err(e) => ErrorOr::Err(e),
        },
    )
}

/// Encodes the reply to [`GetClientWorkersRequest`] (what a cluster controller sends).
pub fn encode_client_workers(reply: &ErrorOr<Vec<ClientWorkerInterface>>) -> Vec<u8> {
    let wrapped = match reply {
        ErrorOr::Ok(v) => ErrorOr::Ok(EnsureTable(v.clone())),
        ErrorOr::Err(e) => ErrorOr::Err(*e),
    };
    encode_with(&wrapped, CLIENT_WORKERS_REPLY_FILE_IDENTIFIER)
}

/// `NetworkAddress` in the binary format: IPv6 flag, the address (4 bytes little-endian or
/// 16 bytes), port, flags, `fromHostname`.
fn binary_address(out: &mut Vec<u8>, a: &NetworkAddress) {
    match a.ip {
        IpAddress::V4(v) => {
            out.push(0);
            out.extend_from_slice(&v.to_le_bytes());
        }
        IpAddress::V6(b) => {
            out.push(1);
            out.extend_from_slice(&b);
        }
    }
    out.extend_from_slice(&a.port.to_le_bytes());
    out.extend_from_slice(&a.flags.to_le_bytes());
    out.push(u8::from(a.from_hostname));
}

impl ClientWorkerInterface {
    /// `BinaryWriter::toValue(interface, IncludeVersion())`: the protocol version `version`
    /// (without flag bits), then each stream's endpoint: its address, the optional secondary
    /// address (a presence byte, then the address), its token's two halves.
    pub fn binary_value(&self, version: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + 3 * 38);
        out.extend_from_slice(&version.to_le_bytes());
        for s in [&self.reboot, &self.profiler, &self.set_failure_injection] {
            let e = &s.endpoint;
            binary_address(&mut out, &e.addresses.address);
            match &e.addresses.secondary_address {
                Some(a) => {
                    out.push(1);
                    binary_address(&mut out, a);
                }
                None => out.push(0),
            }
            out.extend_from_slice(&e.token.first.to_le_bytes());
            out.extend_from_slice(&e.token.second.to_le_bytes());
        }
        out
    }

    /// The worker's address as libfdb_c keys it (`NetworkAddress::toString` of the reboot
    /// stream's primary address).
    pub fn address(&self) -> &NetworkAddress {
        self.reboot.endpoint.address()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::network::{Endpoint, NetworkAddressList};
    use crate::uid::Uid;

    /// A stream at `127.0.0.1:port`, built from the messages' own types (not the
    /// simulator's helper, which sits above them).
    fn stream(port: u16, first: u64, second: u64) -> RequestStream {
        let ip = core::net::IpAddr::V4(core::net::Ipv4Addr::LOCALHOST);
        RequestStream {
            endpoint: Endpoint {
                addresses: NetworkAddressList {
                    address: NetworkAddress::new(ip, port),
                    secondary_address: None,
                },
                token: Uid::new(first, second),
            },
        }
    }

    /// A worker interface as libfdb_c 7.3.77 showed it for a real cluster's process at
    /// 127.0.0.1:60109.
    #[test]
    fn binary_value_is_libfdb_cs() {
        let w = ClientWorkerInterface {
            reboot: stream(60109, 0xa22a_0d53_c17c_1237, 0x48f9_1faf_0000_0031),
            profiler: stream(60109, 0xcb08_8e0a_03ff_204d, 0x6946_950c_0000_003d),
            set_failure_injection: stream(60109, 0xe438_ded9_8109_d573, 0xeac1_a089_0000_0043),
        };
        let want = "00000073b000db0f000100007fcdea0000000037127cc1530d2aa231000000af1ff948000100007fcdea000000004d20ff030a8e08cb3d0000000c954669000100007fcdea0000000073d50981d9de38e44300000089a0c1ea";
        let got: alloc::string::String = w
            .binary_value(0x0FDB_00B0_7300_0000)
            .iter()
            .map(|b| alloc::format!("{b:02x}"))
            .collect();
        assert_eq!(got, want);
        assert_eq!(alloc::format!("{}", w.address()), "127.0.0.1:60109");
    }

    #[test]
    fn client_workers_round_trip_and_bad_replies() {
        let w = ClientWorkerInterface {
            reboot: stream(1, 1, 2),
            profiler: stream(1, 3, 4),
            set_failure_injection: stream(1, 5, 6),
        };
        let wire = Bytes::from(encode_client_workers(&ErrorOr::Ok(alloc::vec![w.clone()])));
        assert_eq!(
            decode_client_workers(&wire),
            Ok(ErrorOr::Ok(alloc::vec![w]))
        );
        let err = Bytes::from(encode_client_workers(&ErrorOr::Err(
            crate::error::ErrorCode::BROKEN_PROMISE,
        )));
        assert_eq!(
            decode_client_workers(&err),
            Ok(ErrorOr::Err(crate::error::ErrorCode::BROKEN_PROMISE))
        );
        for cut in 0..wire.len() {
            assert!(
                decode_client_workers(&wire.slice(..cut)).is_err(),
                "cut at {cut}"
            );
        }
        let req = GetClientWorkersRequest {
            reply: ReplyPromise {
                token: Uid::new(9, 9),
            },
        };
        let other = Bytes::from(encode_with(&req, GetClientWorkersRequest::FILE_IDENTIFIER));
        assert!(matches!(
            decode_client_workers(&other),
            Err(DecodeError::FileIdentifier { .. })
        ));
    }
}
