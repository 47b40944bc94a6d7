//! Shared value types (`fdbclient/include/fdbclient/FDBTypes.h`, `Tracing.h`, `TenantInfo.h`,
//! `TagThrottle.actor.h`, `VersionVector.h`).

use alloc::vec::Vec;
use bytes::Bytes;

use crate::serializer::{DecodeError, Fb, Layout, Reader, Result, Saved, VtCollector, Writer};
use crate::uid::Uid;

/// A version: FDB's clock, about a million per second.
pub type Version = i64;
/// `invalidVersion`.
pub const INVALID_VERSION: Version = -1;
/// `latestVersion`: "whatever is newest".
pub const LATEST_VERSION: Version = -2;

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

/// Undoes the single-key compression of ranges and clear mutations: `(k\0, "")` → `(k, k\0)`.
pub(crate) fn expand_single_key(first: Bytes, second: Bytes) -> Result<(Bytes, Bytes)> {
    if second.is_empty() && !first.is_empty() {
        if first[first.len() - 1] != 0 {
            return Err(DecodeError::InvalidValue(
                "single-key range must end in \\0",
            ));
        }
        let begin = first.slice(..first.len() - 1);
        return Ok((begin, first));
    }
    Ok((first, second))
}

impl Fb for KeyRange {
    const LAYOUT: Layout = Layout::Indirect;
    fn save(&self, w: &mut Writer) -> Saved {
        let mut t = w.begin_table(&[Layout::Indirect, Layout::Indirect]);
        if self.is_single_key() {
            t.push(self.end.save(w));
            t.push(w.save_bytes(&[]));
        } else {
            t.push(self.begin.save(w));
            t.push(self.end.save(w));
        }
        Saved::Offset(w.end_table(t))
    }
    fn load(r: Reader<'_>, pos: usize) -> Result<Self> {
        let mut t = r.table(pos)?;
        let (begin, end) = expand_single_key(t.field()?, t.field()?)?;
        if begin > end {
            return Err(DecodeError::InvalidValue("inverted key range"));
        }
        Ok(KeyRange { begin, end })
    }
    fn collect_vtables(c: &mut VtCollector) {
        c.add(&[Layout::Indirect, Layout::Indirect]);
    }
}

crate::fb_table! {
    /// A key and its value.
    pub struct KeyValue {
        pub key: Bytes,
        pub value: Bytes,
    }
}

crate::fb_table! {
    /// A key selector: start at the last key `< key` (`<= key` when `or_equal`), then move
    /// `offset` keys forward (FDB's `KeySelectorRef`).
    pub struct KeySelector {
        pub key: Bytes,
        pub or_equal: bool,
        pub offset: i32,
    }
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

crate::fb_table! {
    /// Tracing context carried by requests; all zero when tracing is off.
    pub struct SpanContext {
        pub trace_id: Uid,
        pub span_id: u64,
        pub flags: u8,
    }
}

crate::fb_table! {
    /// Which tenant a request is for (`fdbrpc/include/fdbrpc/TenantInfo.h`);
    /// `tenant_id == -1` means none.
    pub struct TenantInfo {
        pub tenant_id: i64,
        pub token: Option<WipedString>,
    }
}

crate::fb_table! {
    /// A secret string FDB wipes from memory after use (`flow/WipedString.h`); on the wire,
    /// a table holding the string.
    pub struct WipedString {
        pub value: Bytes,
    }
}

impl TenantInfo {
    /// The tenant id that names no tenant.
    pub const INVALID_TENANT: i64 = -1;
    /// No tenant: what a plain client sends.
    pub fn none() -> Self {
        TenantInfo {
            tenant_id: Self::INVALID_TENANT,
            token: None,
        }
    }
}

/// A storage team tag: a packed struct `{u16 id, i8 locality}` (`struct_like_traits<Tag>`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Tag {
    /// The locality (data centre or kind of log) the tag belongs to.
    pub locality: i8,
    /// The tag's number within its locality.
    pub id: u16,
}

impl Fb for Tag {
    const LAYOUT: Layout = Layout::Inline { size: 4, align: 2 };
    fn save(&self, _w: &mut Writer) -> Saved {
        let id = self.id.to_le_bytes();
        Saved::inline(&[id[0], id[1], self.locality as u8, 0])
    }
    fn load(r: Reader<'_>, pos: usize) -> Result<Self> {
        let b = r.array::<4>(pos)?;
        Ok(Tag {
            id: u16::from_le_bytes([b[0], b[1]]),
            locality: b[2] as i8,
        })
    }
}

/// Transaction tags (for throttling): one string packed as `len u8 | tag` repeated.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TagSet(pub Vec<Bytes>);

impl Fb for TagSet {
    const LAYOUT: Layout = Layout::Indirect;
    fn save(&self, w: &mut Writer) -> Saved {
        let mut b = Vec::new();
        for t in &self.0 {
            b.push(t.len().min(255) as u8);
            b.extend_from_slice(&t[..t.len().min(255)]);
        }
        w.save_bytes(&b)
    }
    fn load(r: Reader<'_>, pos: usize) -> Result<Self> {
        let blob = Bytes::load(r, pos)?;
        let mut tags = Vec::new();
        let mut i = 0;
        while i < blob.len() {
            let n = blob[i] as usize;
            if i + 1 + n > blob.len() {
                return Err(DecodeError::InvalidValue("tag set"));
            }
            tags.push(blob.slice(i + 1..i + 1 + n));
            i += 1 + n;
        }
        Ok(TagSet(tags))
    }
}

/// A version vector, kept in FDB's compact encoding (`VersionVector.h`).
///
/// Clients only meet it empty (the version-vector feature is off by default in 7.3): then it
/// is `u64 0 | i64 max_version`. Other encodings are carried through unchanged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionVector(pub Bytes);

impl VersionVector {
    /// An empty vector whose max version is `max_version`.
    pub fn empty(max_version: Version) -> Self {
        let mut b = [0u8; 16];
        b[8..].copy_from_slice(&max_version.to_le_bytes());
        VersionVector(Bytes::copy_from_slice(&b))
    }
    /// The max version, the encoding's last 8 bytes.
    pub fn max_version(&self) -> Option<Version> {
        let n = self.0.len();
        let b: [u8; 8] = self.0.get(n.checked_sub(8)?..)?.try_into().ok()?;
        Some(i64::from_le_bytes(b))
    }
    /// True when it lists no tags.
    pub fn is_empty(&self) -> bool {
        self.0.len() == 16 && self.0[..8] == [0; 8]
    }
}

impl Default for VersionVector {
    fn default() -> Self {
        VersionVector::empty(INVALID_VERSION)
    }
}

impl Fb for VersionVector {
    const LAYOUT: Layout = Layout::Indirect;
    fn save(&self, w: &mut Writer) -> Saved {
        w.save_bytes(&self.0)
    }
    fn load(r: Reader<'_>, pos: usize) -> Result<Self> {
        Ok(VersionVector(Bytes::load(r, pos)?))
    }
}
