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
