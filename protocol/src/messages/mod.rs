//! The FDB 7.3 messages a client exchanges, with their real file identifiers and member
//! order (the order of the C++ `serializer(ar, ...)` calls).
//!
//! Each message lists its own fields even where two look alike: the list is FDB's wire
//! definition of that message, and one changes without the other.

pub mod common;
pub mod network;

pub use common::{fid, reply_error, EnsureTable, ErrorOr, ReplyPromise, Void};
pub use network::{
    AddressExclusion, Endpoint, IpAddress, NetworkAddress, NetworkAddressList, RequestStream,
};
pub mod commit;
pub mod coordination;
pub mod exclusion;
pub mod grv;
pub mod metrics;
pub mod registry;
pub mod storage;
pub mod types;
pub mod workers;

pub use registry::{decode_any, decode_reply, encode_reply, AnyMessage};
