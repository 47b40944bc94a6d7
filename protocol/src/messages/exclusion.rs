//! The commit proxies' exclusion safety check (`fdbclient/include/fdbclient/CommitProxyInterface.h`):
//! before servers are marked failed, a client asks a commit proxy's `exclusionSafetyCheckReq`
//! stream ([`CommitProxyInterface::EXCLUSION_SAFETY_CHECK_REQ`](super::coordination::CommitProxyInterface::EXCLUSION_SAFETY_CHECK_REQ))
//! whether losing them would leave every storage team a replica; the proxy asks the data
//! distributor (`proxyCheckSafeExclusion`), and answers unsafe without one.
//!
//! Field lists here that look alike, within this file or across files, are separate FDB
//! wire definitions (each its C++ `serializer` call, see [`super`]): one changes without
//! the other, so they stay apart.

use alloc::vec::Vec;

use super::common::ReplyPromise;
use super::network::AddressExclusion;

crate::serializer::fb_message! {
    /// Asks whether the processes `exclusions` name can be marked failed.
    pub struct ExclusionSafetyCheckRequest = 13852702; {
        pub exclusions: Vec<AddressExclusion>,
        pub reply: ReplyPromise,
    }
}

crate::serializer::fb_message! {
    /// The answer to [`ExclusionSafetyCheckRequest`].
    pub struct ExclusionSafetyCheckReply = 11; {
        pub safe: bool,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::{decode_reply, encode_reply, ErrorOr, IpAddress};
    use crate::serializer::{decode_root, encode_with, Message};
    use crate::uid::Uid;
    use bytes::Bytes;

    #[test]
    fn the_safety_check_round_trips() {
        let req = ExclusionSafetyCheckRequest {
            exclusions: alloc::vec![
                AddressExclusion {
                    ip: IpAddress::V4(0x7f00_0001),
                    port: 4500,
                },
                AddressExclusion {
                    ip: IpAddress::V6([1; 16]),
                    port: 0,
                },
            ],
            reply: ReplyPromise {
                token: Uid::new(1, 2),
            },
        };
        let wire = Bytes::from(encode_with(
            &req,
            ExclusionSafetyCheckRequest::FILE_IDENTIFIER,
        ));
        assert_eq!(decode_root::<ExclusionSafetyCheckRequest>(&wire), Ok(req));
        for safe in [false, true] {
            let wire = Bytes::from(encode_reply(&ErrorOr::Ok(ExclusionSafetyCheckReply {
                safe,
            })));
            assert_eq!(
                decode_reply::<ExclusionSafetyCheckReply>(&wire),
                Ok(ErrorOr::Ok(ExclusionSafetyCheckReply { safe }))
            );
        }
    }
}
