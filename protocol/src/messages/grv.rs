//! Read versions and global configuration (`fdbclient/include/fdbclient/CommitProxyInterface.h`,
//! `TagThrottle.actor.h`).
//!
//! Field lists here that look alike, within this file or across files, are separate FDB
//! wire definitions (each its C++ `serializer` call, see [`super`]): one changes without
//! the other, so they stay apart.

use alloc::vec::Vec;
use bytes::Bytes;

use super::commit::MutationRef;
use super::common::ReplyPromise;
use super::types::{KeyValue, SpanContext, Version, VersionVector};
use crate::uid::Uid;

crate::serializer::fb_table! {
    /// How many transactions of the batch carry one tag.
    pub struct TagCount {
        pub tag: Bytes,
        pub count: u32,
    }
}

crate::serializer::fb_message! {
    /// Asks a GRV proxy for a read version for `transaction_count` transactions at once.
    pub struct GetReadVersionRequest = 838566; {
        pub transaction_count: u32,
        /// Priority in the top byte (see the constants) plus option bits.
        pub flags: u32,
        pub tags: Vec<TagCount>,
        pub debug_id: Option<Uid>,
        pub reply: ReplyPromise,
        pub span_context: SpanContext,
        /// The client's newest known version (version vector); `-1` without it.
        pub max_version: Version,
    }
}

impl GetReadVersionRequest {
    /// Immediate priority (`PRIORITY_SYSTEM_IMMEDIATE`): not throttled by ratekeeper.
    pub const PRIORITY_SYSTEM_IMMEDIATE: u32 = 15 << 24;
    /// Default priority.
    pub const PRIORITY_DEFAULT: u32 = 8 << 24;
    /// Batch priority: throttled first under load.
    pub const PRIORITY_BATCH: u32 = 1 << 24;
    /// The proxy may answer without confirming it is still the live one (`causal_read_risky`).
    pub const FLAG_CAUSAL_READ_RISKY: u32 = 1;
    /// A provisional proxy (during a recovery) may answer.
    pub const FLAG_USE_PROVISIONAL_PROXIES: u32 = 2;
    /// Answer with the minimum known committed version instead of the newest one.
    pub const FLAG_USE_MIN_KNOWN_COMMITTED_VERSION: u32 = 4;
    /// The bits of `flags` that hold the priority.
    pub const FLAG_PRIORITY_MASK: u32 = Self::PRIORITY_SYSTEM_IMMEDIATE;
}

crate::serializer::fb_table! {
    /// Throttling limits for one tag.
    pub struct ClientTagThrottleLimits {
        pub tps_rate: f64,
        /// Seconds until the throttle expires: `ClientTagThrottleLimits::serialize` sends
        /// the expiration as a duration from the sender's now, so that clocks may differ.
        pub duration: f64,
    }
}

crate::serializer::fb_table! {
    /// `(tag, limits)` entry of [`GetReadVersionReply::tag_throttle_info`].
    pub struct TagThrottleEntry {
        pub tag: Bytes,
        pub limits: ClientTagThrottleLimits,
    }
}

crate::serializer::fb_message! {
    /// A read version.
    pub struct GetReadVersionReply = 15709388; {
        pub process_busy_time: i32,
        pub version: Version,
        pub locked: bool,
        pub metadata_version: Option<Bytes>,
        pub tag_throttle_info: Vec<TagThrottleEntry>,
        pub mid_shard_size: i64,
        pub rk_default_throttled: bool,
        pub rk_batch_throttled: bool,
        pub ss_version_vector_delta: VersionVector,
        pub proxy_id: Uid,
        pub proxy_tag_throttled_duration: f64,
    }
}

crate::serializer::fb_message! {
    /// Asks a GRV proxy for global configuration newer than `last_known`.
    pub struct GlobalConfigRefreshRequest = 2828131; {
        pub last_known: Version,
        pub reply: ReplyPromise,
    }
}

crate::serializer::fb_table! {
    /// `RangeResultRef`: rows plus where the read stopped.
    pub struct RangeResult {
        pub data: Vec<KeyValue>,
        pub more: bool,
        pub read_through: Option<Bytes>,
        pub read_to_begin: bool,
        pub read_through_end: bool,
    }
}

crate::serializer::fb_message! {
    /// Global configuration as of `version`.
    pub struct GlobalConfigRefreshReply = 12680327; {
        pub result: RangeResult,
        pub version: Version,
    }
}

/// Global-config history entries carry mutations; re-exported for convenience.
pub type GlobalConfigMutation = MutationRef;

/// Transaction priority for read versions (`TransactionPriority`): which flag bits of a
/// [`GetReadVersionRequest`] it sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Priority {
    /// `PRIORITY_BATCH`: throttled first when the cluster is busy.
    Batch,
    /// The normal priority.
    #[default]
    Default,
    /// `PRIORITY_SYSTEM_IMMEDIATE`: never throttled.
    SystemImmediate,
}

impl Priority {
    /// The request flag bits of this priority.
    pub(crate) fn flags(self) -> u32 {
        match self {
            Priority::Batch => GetReadVersionRequest::PRIORITY_BATCH,
            Priority::Default => GetReadVersionRequest::PRIORITY_DEFAULT,
            Priority::SystemImmediate => GetReadVersionRequest::PRIORITY_SYSTEM_IMMEDIATE,
        }
    }

    /// The priority of request flags (the batch's `TransactionPriority`).
    pub(crate) fn of_flags(flags: u32) -> Priority {
        match flags & GetReadVersionRequest::FLAG_PRIORITY_MASK {
            GetReadVersionRequest::PRIORITY_SYSTEM_IMMEDIATE => Priority::SystemImmediate,
            GetReadVersionRequest::PRIORITY_BATCH => Priority::Batch,
            _ => Priority::Default,
        }
    }
}
