//! A sans-IO FoundationDB 7.3 client protocol core.
//!
//! This crate speaks FDB's own wire protocol (FlowTransport framing and the ObjectSerializer)
//! without touching sockets, clocks or threads: drivers feed it bytes and time and carry out
//! what it asks for. [`Client`] is the state machine a driver runs (its contract is in the
//! docs of [`Client`]'s module, repeated on the type); the other public modules are the data
//! model it speaks — wire messages, framing, the serializer, cluster files, FDB's errors, the
//! tuple layer — usable on their own. Module names follow FDB's vocabulary.
#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

extern crate alloc;

pub mod atomic;
mod census;
mod client;
pub mod client_status;
pub mod cluster_file;
mod connection;
pub mod error;
mod event;
mod exclusion_check;
pub mod framing;
#[doc(hidden)]
pub mod fuzzing;
mod global_config;
mod grv;
mod ids;
mod keys;
pub mod knobs;
mod location;
pub mod messages;
mod monitor;
mod net;
mod part;
mod quorum_check;
mod route;
mod ryw;
pub mod serializer;
pub mod sim;
mod special_cluster;
mod status;
mod tag_throttle;
pub mod tenant_map;
pub mod time;
mod transaction;
pub mod tuple;
pub mod uid;
pub mod version;

pub use atomic::MutationType;
pub use census::Census;
pub use client::{
    route_key as route_special_key, route_range as route_special_range, system_key_module, Client,
    ClientConfig, SpecialModule,
};
pub use client_status::ClientStatus;
pub use connection::{
    ConnectionError, CONNECTION_MONITOR_IDLE_TIMEOUT, CONNECTION_MONITOR_LOOP_TIME,
    CONNECTION_MONITOR_TIMEOUT,
};
pub use event::{
    Call, ClientError, Committed, Completion, Event, MappedRangeResult, Outcome, RangeResult,
    Transmit,
};
pub use global_config::{
    history_value, GLOBAL_CONFIG_HISTORY_PREFIX, GLOBAL_CONFIG_KEYS_PREFIX, GLOBAL_CONFIG_MODULE,
    GLOBAL_CONFIG_VERSION_KEY,
};
pub use grv::{Priority, MAX_GRV_BATCH};
pub use ids::{ConnectionId, RequestId, TransactionId};
pub use location::LOCATION_CACHE_CAPACITY;
pub use messages::storage::{
    GetRangeReqAndResult, GetValueReqAndResult, MappedKeyValue, MappedReqAndResult,
};
pub use messages::types::{KeySelector, KeyValue, Version};
pub use monitor::{
    COORDINATOR_RECONNECTION_DELAY, MAX_COMMIT_PROXY_CONNECTIONS, MAX_GRV_PROXY_CONNECTIONS,
};
pub use net::{
    CONNECT_TIMEOUT, INITIAL_RECONNECTION_TIME, MAX_RECONNECTION_TIME, RECONNECTION_RESET_TIME,
    RECONNECTION_TIME_GROWTH_RATE,
};
pub use special_cluster::{CLUSTER_ID_KEY, DD_STATS_PREFIX, HEALTH_AGGREGATE_KEY};
pub use status::{STATUS_JSON_KEY, STATUS_TIMEOUT};
pub use time::Instant;
pub use transaction::{
    check_conflict_range, tenant_prefix, ConflictRangeType, DatabaseOption, Prefix, RangeCursor,
    RangeOption, RangeOptions, SpecialWrite, StreamingMode, TenantHandle, TransactionOption,
    ABSOLUTE_MAX_WATCHES, CONFLICTING_KEYS_PREFIX, KEY_SIZE_LIMIT, MAX_OUTSTANDING_WATCHES,
    REPLY_BYTE_LIMIT, SYSTEM_KEY_SIZE_LIMIT, TENANT_MANAGEMENT_RANGE, TENANT_PREFIX_SIZE,
    TRACING_MODULE, TRANSACTION_SIZE_LIMIT, VALUE_SIZE_LIMIT,
};
pub use uid::Uid;

/// Where the commit proxies keep idempotency ids (`\xff\x02/idmp/`), and how a row names
/// one: for tools and tests that read them back.
pub mod idempotency {
    pub use crate::transaction::{find_id_in_row, id_row_key, EXPIRED_VERSION_KEY, ID_ROWS_PREFIX};
}

/// The README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
