//! Every message type a client sends or receives, by file identifier: what a connection uses
//! to turn a packet into a typed value, and what the capture tests and fuzzers drive. Besides
//! the wire messages it holds the ObjectSerializer values a client reads from and writes to
//! the database itself (the tenant metadata under `\xff/tenant/`, stored after an 8-byte
//! protocol version: [`decode_any`] takes the message after it; the idempotency ids' expired
//! version, stored without one).

use alloc::vec::Vec;
use bytes::Bytes;

use super::commit::*;
use super::common::{fid, EnsureTable, ErrorOr, Void};
use super::coordination::*;
use super::exclusion::*;
use super::grv::*;
use super::metrics::*;
use super::storage::*;
use super::workers::{
    ClientWorkerInterface, GetClientWorkersRequest, CLIENT_WORKERS_REPLY_FILE_IDENTIFIER,
};
use crate::serializer::{decode_root, encode_with, file_identifier, DecodeError, Message};

macro_rules! registry {
    (requests { $($req:ident),* $(,)? } one_way { $($one:ident),* $(,)? } replies { $($rep:ident),* $(,)? } values { $($val:ident),* $(,)? }) => {
        /// A decoded message of any known type. Replies carry FDB's `ErrorOr` envelope.
        #[derive(Clone, Debug, PartialEq)]
        #[allow(clippy::large_enum_variant)]
        pub enum AnyMessage {
            $( #[doc = concat!("A `", stringify!($req), "`.")] $req($req), )*
            $( #[doc = concat!("A `", stringify!($one), "` (one-way: no reply is asked).")] $one($one), )*
            $( #[doc = concat!("A `", stringify!($rep), "`, or the error sent instead.")] $rep(ErrorOr<$rep>), )*
            $( #[doc = concat!("A stored `", stringify!($val), "` (a database value, not a wire message).")] $val($val), )*
            /// The reply to `GetLeaderRequest`: `ErrorOr<Optional<LeaderInfo>>`.
            Leader(ErrorOr<EnsureTable<Option<LeaderInfo>>>),
            /// The reply to `GetClientWorkersRequest`:
            /// `ErrorOr<std::vector<ClientWorkerInterface>>`.
            ClientWorkers(ErrorOr<EnsureTable<Vec<ClientWorkerInterface>>>),
        }

        /// File identifier of the reply to `GetLeaderRequest` (wrapped twice, so the
        /// wrapper ids go in the top two nibbles).
        pub const LEADER_REPLY_FILE_IDENTIFIER: u32 =
            fid::reply(fid::compose(fid::OPTIONAL, LeaderInfo::FILE_IDENTIFIER));

        impl AnyMessage {
            /// The file identifier this message travels with.
            pub fn file_identifier(&self) -> u32 {
                match self {
                    $( AnyMessage::$req(_) => $req::FILE_IDENTIFIER, )*
                    $( AnyMessage::$one(_) => $one::FILE_IDENTIFIER, )*
                    $( AnyMessage::$rep(_) => fid::reply($rep::FILE_IDENTIFIER), )*
                    $( AnyMessage::$val(_) => $val::FILE_IDENTIFIER, )*
                    AnyMessage::Leader(_) => LEADER_REPLY_FILE_IDENTIFIER,
                    AnyMessage::ClientWorkers(_) => CLIENT_WORKERS_REPLY_FILE_IDENTIFIER,
                }
            }

            /// The type's name, for logs and summaries.
            pub fn name(&self) -> &'static str {
                match self {
                    $( AnyMessage::$req(_) => stringify!($req), )*
                    $( AnyMessage::$one(_) => stringify!($one), )*
                    $( AnyMessage::$rep(_) => concat!("ErrorOr<", stringify!($rep), ">"), )*
                    $( AnyMessage::$val(_) => stringify!($val), )*
                    AnyMessage::Leader(_) => "ErrorOr<Optional<LeaderInfo>>",
                    AnyMessage::ClientWorkers(_) => "ErrorOr<std::vector<ClientWorkerInterface>>",
                }
            }

            /// The token a request asks to be answered on (its `ReplyPromise`); `None` for a
            /// reply.
            pub fn reply_token(&self) -> Option<crate::uid::Uid> {
                match self {
                    $( AnyMessage::$req(m) => Some(m.reply.token), )*
                    _ => None,
                }
            }

            /// Encodes it as a complete ObjectSerializer message.
            /// The message as `protocol` writes it (the few messages whose shape differs
            /// between versions ask [`crate::version::Protocol`]; [`AnyMessage::encode`] is the
            /// newest shape).
            pub fn encode_for(&self, protocol: crate::version::Protocol) -> Vec<u8> {
                match self {
                    AnyMessage::StatusRequest(m) => m.encode_for(protocol),
                    m => m.encode(),
                }
            }

            /// The message in the newest protocol's shape.
            pub fn encode(&self) -> Vec<u8> {
                let fid = self.file_identifier();
                match self {
                    $( AnyMessage::$req(m) => encode_with(m, fid), )*
                    $( AnyMessage::$one(m) => encode_with(m, fid), )*
                    $( AnyMessage::$rep(m) => encode_with(m, fid), )*
                    $( AnyMessage::$val(m) => encode_with(m, fid), )*
                    AnyMessage::Leader(m) => encode_with(m, fid),
                    AnyMessage::ClientWorkers(m) => encode_with(m, fid),
                }
            }
        }

        /// Decodes a message by its file identifier. Unknown identifiers are an error
        /// ([`DecodeError::FileIdentifier`] with `expected` 0), never a panic.
        pub fn decode_any(msg: &Bytes) -> Result<AnyMessage, DecodeError> {
            let f = file_identifier(msg)?;
            $( if f == $req::FILE_IDENTIFIER { return Ok(AnyMessage::$req(decode_root(msg)?)); } )*
            $( if f == $one::FILE_IDENTIFIER { return Ok(AnyMessage::$one(decode_root(msg)?)); } )*
            $( if f == fid::reply($rep::FILE_IDENTIFIER) { return Ok(AnyMessage::$rep(decode_root(msg)?)); } )*
            $( if f == $val::FILE_IDENTIFIER { return Ok(AnyMessage::$val(decode_root(msg)?)); } )*
            if f == LEADER_REPLY_FILE_IDENTIFIER {
                return Ok(AnyMessage::Leader(decode_root(msg)?));
            }
            if f == CLIENT_WORKERS_REPLY_FILE_IDENTIFIER {
                return Ok(AnyMessage::ClientWorkers(decode_root(msg)?));
            }
            Err(DecodeError::FileIdentifier { expected: 0, found: f })
        }
    };
}

registry! {
    requests {
        OpenDatabaseCoordRequest,
        GetLeaderRequest,
        ProtocolInfoRequest,
        PingRequest,
        StatusRequest,
        GlobalConfigRefreshRequest,
        GetReadVersionRequest,
        CommitTransactionRequest,
        GetKeyServerLocationsRequest,
        GetValueRequest,
        GetKeyRequest,
        GetKeyValuesRequest,
        GetMappedKeyValuesRequest,
        WatchValueRequest,
        WaitMetricsRequest,
        SplitRangeRequest,
        GetTenantIdRequest,
        GetDDMetricsRequest,
        GetHealthMetricsRequest,
        GetClientWorkersRequest,
        ExclusionSafetyCheckRequest,
    }
    one_way {
        ExpireIdempotencyIdRequest,
    }
    replies {
        ClientDBInfo,
        ProtocolInfoReply,
        StatusReply,
        Void,
        GlobalConfigRefreshReply,
        GetReadVersionReply,
        CommitID,
        GetKeyServerLocationsReply,
        GetValueReply,
        GetKeyReply,
        GetKeyValuesReply,
        GetMappedKeyValuesReply,
        WatchValueReply,
        StorageMetrics,
        SplitRangeReply,
        GetTenantIdReply,
        GetDDMetricsReply,
        GetHealthMetricsReply,
        ExclusionSafetyCheckReply,
    }
    values {
        TenantMapEntry,
        TenantGroupEntry,
        IdempotencyIdsExpiredVersion,
    }
}

/// Encodes a reply as FDB sends it: `ErrorOr<EnsureTable<T>>` with the composed identifier.
pub fn encode_reply<T: Message>(reply: &ErrorOr<T>) -> Vec<u8> {
    encode_with(reply, fid::reply(T::FILE_IDENTIFIER))
}

/// Decodes a reply of a known type.
pub fn decode_reply<T: Message>(msg: &Bytes) -> Result<ErrorOr<T>, DecodeError> {
    let found = file_identifier(msg)?;
    let expected = fid::reply(T::FILE_IDENTIFIER);
    if found != expected {
        return Err(DecodeError::FileIdentifier { expected, found });
    }
    decode_root(msg)
}
