//! The data model's vocabulary, below everything that moves it: key ranges, key selectors,
//! key-value rows and mutations (`fdbclient/FDBTypes.h`, `CommitTransaction.h`). Their
//! wire encodings live with the messages (`messages/types.rs`, `messages/commit.rs`), so
//! the read-your-writes structures and the atomic operations use these without reaching up
//! into the protocol's messages.

use alloc::vec::Vec;
use bytes::Bytes;

/// `metadataVersionKey`: bumped by a versionstamped write, read from the read version's
/// reply.
pub(crate) const METADATA_VERSION_KEY: &[u8] = b"\xff/metadataVersion";

/// A key range `[begin, end)`.
///
/// On the wire a single-key range `[k, k\0)` is sent as `(k\0, "")` and rebuilt by the
/// reader (`KeyRangeRef::serialize`): it saves one copy of the key.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyRange {
    /// The first key in the range.
    pub begin: Bytes,
    /// The first key after the range.
    pub end: Bytes,
}

impl KeyRange {
    /// `[begin, end)`.
    pub fn new(begin: impl Into<Bytes>, end: impl Into<Bytes>) -> Self {
        KeyRange {
            begin: begin.into(),
            end: end.into(),
        }
    }
    /// `[key, key\0)`: exactly one key. Both ends share one buffer, so the range and its
    /// clones cost two allocations however often they are copied.
    pub fn single_key(key: &[u8]) -> Self {
        let mut end = Vec::with_capacity(key.len() + 1);
        end.extend_from_slice(key);
        end.push(0);
        let end = Bytes::from(end);
        KeyRange {
            begin: end.slice(..key.len()),
            end,
        }
    }
    /// True when `end == begin + "\0"` (FDB's `equalsKeyAfter`).
    pub fn is_single_key(&self) -> bool {
        is_key_after(&self.begin, &self.end)
    }
}

/// `equalsKeyAfter(a, b)`: `b == a + "\0"`.
pub fn is_key_after(a: &[u8], b: &[u8]) -> bool {
    b.len() == a.len() + 1 && b[a.len()] == 0 && &b[..a.len()] == a
}

/// A key and its value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KeyValue {
    /// The key.
    pub key: Bytes,
    /// The value.
    pub value: Bytes,
}

/// A key selector: start at the last key `< key` (`<= key` when `or_equal`), then move
/// `offset` keys forward (FDB's `KeySelectorRef`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KeySelector {
    /// The anchor key.
    pub key: Bytes,
    /// Whether the anchor itself counts (`<=` rather than `<`).
    pub or_equal: bool,
    /// How many keys to move from the anchor.
    pub offset: i32,
}

impl KeySelector {
    /// The selector `(key, or_equal, offset)` as FDB resolves it.
    pub fn new(key: impl AsRef<[u8]>, or_equal: bool, offset: i32) -> Self {
        KeySelector {
            key: Bytes::copy_from_slice(key.as_ref()),
            or_equal,
            offset,
        }
    }
    /// The last key before `key`.
    pub fn last_less_than(key: impl AsRef<[u8]>) -> Self {
        Self::new(key, false, 0)
    }
    /// `key` if present, else the last key before it.
    pub fn last_less_or_equal(key: impl AsRef<[u8]>) -> Self {
        Self::new(key, true, 0)
    }
    /// The first key after `key`.
    pub fn first_greater_than(key: impl AsRef<[u8]>) -> Self {
        Self::new(key, true, 1)
    }
    /// `key` if present, else the first key after it.
    pub fn first_greater_or_equal(key: impl AsRef<[u8]>) -> Self {
        Self::new(key, false, 1)
    }
    /// The selector's key.
    pub fn key(&self) -> &[u8] {
        &self.key
    }
    /// Whether the key itself counts (`<=` rather than `<`).
    pub fn or_equal(&self) -> bool {
        self.or_equal
    }
    /// How many keys to move from the anchor.
    pub fn offset(&self) -> i32 {
        self.offset
    }
}

impl core::ops::Add<i32> for KeySelector {
    type Output = KeySelector;
    /// Moves the selector `n` keys further (FDB's `KeySelector + n`).
    fn add(mut self, n: i32) -> KeySelector {
        self.offset = self.offset.saturating_add(n);
        self
    }
}

impl core::ops::Sub<i32> for KeySelector {
    type Output = KeySelector;
    /// Moves the selector `n` keys back (FDB's `KeySelector - n`).
    fn sub(mut self, n: i32) -> KeySelector {
        self.offset = self.offset.saturating_sub(n);
        self
    }
}

impl KeyValue {
    /// The key.
    pub fn key(&self) -> &[u8] {
        &self.key
    }
    /// The value.
    pub fn value(&self) -> &[u8] {
        &self.value
    }
}

/// Mutation types (`MutationRef::Type`). The top two bits of the wire byte are checksum flags.
#[allow(missing_docs)]
pub mod mutation_type {
    pub const SET_VALUE: u8 = 0;
    pub const CLEAR_RANGE: u8 = 1;
    pub const ADD_VALUE: u8 = 2;
    pub const DEBUG_KEY_RANGE: u8 = 3;
    pub const DEBUG_KEY: u8 = 4;
    pub const NO_OP: u8 = 5;
    pub const AND: u8 = 6;
    pub const OR: u8 = 7;
    pub const XOR: u8 = 8;
    pub const APPEND_IF_FITS: u8 = 9;
    pub const AVAILABLE_FOR_REUSE: u8 = 10;
    pub const RESERVED_FOR_LOG_PROTOCOL_MESSAGE: u8 = 11;
    pub const MAX: u8 = 12;
    pub const MIN: u8 = 13;
    pub const SET_VERSIONSTAMPED_KEY: u8 = 14;
    pub const SET_VERSIONSTAMPED_VALUE: u8 = 15;
    pub const BYTE_MIN: u8 = 16;
    pub const BYTE_MAX: u8 = 17;
    pub const MIN_V2: u8 = 18;
    pub const AND_V2: u8 = 19;
    pub const COMPARE_AND_CLEAR: u8 = 20;
    pub const RESERVED_FOR_MUTATION_CHECKSUM: u8 = 21;
    pub const RESERVED_FOR_ACCUMULATIVE_CHECKSUM: u8 = 22;
    pub const ENCRYPTED: u8 = 23;
    /// Set when a checksum (4 bytes) is appended to `param2`.
    pub const CHECKSUM_FLAG: u8 = 0x80;
    /// Set when an accumulative-checksum index (2 bytes) follows the checksum.
    pub const ACCUMULATIVE_CHECKSUM_INDEX_FLAG: u8 = 0x40;
}

/// One mutation of a commit: `(type, param1, param2)`. For a clear, `[param1, param2)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MutationRef {
    /// The mutation type (`MutationRef::Type`: 0 set, 1 clear range, atomic ops above).
    pub kind: u8,
    /// The key, or the begin of a cleared range.
    pub param1: Bytes,
    /// The value or operand, or the end of a cleared range.
    pub param2: Bytes,
}

impl MutationRef {
    /// A mutation of type `kind`.
    pub fn new(kind: u8, param1: impl Into<Bytes>, param2: impl Into<Bytes>) -> Self {
        MutationRef {
            kind,
            param1: param1.into(),
            param2: param2.into(),
        }
    }
}
