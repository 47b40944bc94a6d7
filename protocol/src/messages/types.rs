//! Shared value types (`fdbclient/include/fdbclient/FDBTypes.h`, `Tracing.h`, `TenantInfo.h`,
//! `TagThrottle.actor.h`, `VersionVector.h`).
//!
//! Field lists here that look alike, within this file or across files, are separate FDB
//! wire definitions (each its C++ `serializer` call, see [`super`]): one changes without
//! the other, so they stay apart.

use alloc::vec::Vec;
use bytes::Bytes;

use crate::serializer::{DecodeError, Fb, Layout, Reader, Result, Saved, VtCollector, Writer};
use crate::uid::Uid;

pub use crate::keys::{is_key_after, KeyRange, KeySelector, KeyValue};

/// A version: FDB's clock, about a million per second.
pub type Version = i64;
/// `invalidVersion`.
pub const INVALID_VERSION: Version = -1;
/// `latestVersion`: "whatever is newest".
pub const LATEST_VERSION: Version = -2;

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

crate::serializer::fb_table! { impl KeyValue { key: Bytes, value: Bytes } }

crate::serializer::fb_table! { impl KeySelector { key: Bytes, or_equal: bool, offset: i32 } }

crate::serializer::fb_table! {
    /// Tracing context carried by requests; all zero when tracing is off.
    pub struct SpanContext {
        pub trace_id: Uid,
        pub span_id: u64,
        pub flags: u8,
    }
}

crate::serializer::fb_table! {
    /// Which tenant a request is for (`fdbrpc/include/fdbrpc/TenantInfo.h`);
    /// `tenant_id == -1` means none.
    pub struct TenantInfo {
        pub tenant_id: i64,
        pub token: Option<WipedString>,
    }
}

crate::serializer::fb_table! {
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
