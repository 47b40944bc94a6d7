//! The tenant metadata a 7.3 cluster keeps under `\xff/tenant/` (`fdbclient/Tenant.h`,
//! `TenantMetadataSpecification`), as values a client reads and writes, and the JSON libfdb_c
//! shows for a tenant in `\xff\xff/management/tenant/map/<name>` (`TenantMapEntry::toJson`).
//!
//! The layout, as fdbserver 7.3.77 holds it (read back raw after libfdb_c's management calls):
//!
//! * `\xff/tenant/map/<id as 8 big-endian bytes>`: the [`TenantMapEntry`], version-prefixed;
//! * `\xff/tenant/nameIndex/<tuple(name)>` = `tuple(id)`;
//! * `\xff/tenant/lastId` = `tuple(id)`, `\xff/tenant/count` (little-endian, `add`),
//!   `\xff/tenant/lastModification` (a versionstamp);
//! * `\xff/tenant/tenantGroup/map/<group, raw>`: a [`TenantGroupEntry`] (no fields), while
//!   the group has tenants;
//! * `\xff/tenant/tenantGroup/tenantIndex/<tuple(group, id)>` = empty (7.4: `tuple(group,
//!   name, id)`, see [`crate::version::Protocol::tenant_group_index_has_name`]).
//!
//! [`TenantEntry`] is the checked, typed view of a map entry; [`TenantEntry::to_json`] renders
//! it byte for byte as libfdb_c does: keys in sorted order (`json_spirit::mObject` is a
//! `std::map`), no spaces, binary fields as `{"base64", "printable"}` where the base64 is
//! libb64's (a newline after every 72 characters, the final newline dropped — so a name of a
//! multiple of 54 bytes keeps a trailing `\n`) and the printable form escapes `\` as `\\` and
//! every byte outside 32..=126 as `\xNN`.

use alloc::string::String;
use bytes::Bytes;
use core::fmt;

pub use crate::messages::commit::TenantGroupEntry;
use crate::messages::commit::TenantMapEntry;
use crate::serializer::DecodeError;
use crate::uid::Uid;

/// `\xff/tenant/map/`: tenant map entries by id.
pub const TENANT_MAP_PREFIX: &[u8] = b"\xff/tenant/map/";
/// `\xff/tenant/nameIndex/`: ids by tuple-packed name.
pub const TENANT_NAME_INDEX_PREFIX: &[u8] = b"\xff/tenant/nameIndex/";
/// `\xff/tenant/lastId`: the last id handed out (tuple-packed).
pub const TENANT_LAST_ID_KEY: &[u8] = b"\xff/tenant/lastId";
/// `\xff/tenant/count`: the number of tenants (little-endian, atomic adds).
pub const TENANT_COUNT_KEY: &[u8] = b"\xff/tenant/count";
/// `\xff/tenant/lastModification`: a versionstamp set by every tenant change.
pub const TENANT_LAST_MODIFICATION_KEY: &[u8] = b"\xff/tenant/lastModification";
/// `\xff/tenant/tenantGroup/map/`: one [`TenantGroupEntry`] per group, keyed by its raw name.
pub const TENANT_GROUP_MAP_PREFIX: &[u8] = b"\xff/tenant/tenantGroup/map/";
/// `\xff/tenant/tenantGroup/tenantIndex/`: `tuple(group, id)` for each tenant of a group.
pub const TENANT_GROUP_INDEX_PREFIX: &[u8] = b"\xff/tenant/tenantGroup/tenantIndex/";
/// `\xff\xff/management/tenant/map/`: where libfdb_c shows each tenant's JSON, by name.
pub const TENANT_MAP_SPECIAL_PREFIX: &[u8] = b"\xff\xff/management/tenant/map/";

/// `TenantAPI::TenantLockState`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum TenantLockState {
    /// Reads and writes work.
    #[default]
    Unlocked,
    /// Reads work; commits with a tenant fail with `tenant_locked` (2144) unless `lock_aware`
    /// (`fdbcli tenant lock NAME w`).
    ReadOnly,
    /// Reads and commits fail with `tenant_locked` unless `lock_aware` (`tenant lock NAME rw`).
    Locked,
}

impl TenantLockState {
    /// The state a map entry stores as `lock_state`; `None` for anything but 0, 1, 2.
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            0 => Some(Self::Unlocked),
            1 => Some(Self::ReadOnly),
            2 => Some(Self::Locked),
            _ => None,
        }
    }

    /// Its stored byte.
    pub fn as_u8(self) -> u8 {
        match self {
            Self::Unlocked => 0,
            Self::ReadOnly => 1,
            Self::Locked => 2,
        }
    }

    /// Its JSON spelling (`tenantLockStateToString`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unlocked => "unlocked",
            Self::ReadOnly => "read only",
            Self::Locked => "locked",
        }
    }
}

/// Why a tenant map value is not a tenant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TenantEntryError {
    /// The value does not decode as a `TenantMapEntry`.
    Decode(DecodeError),
    /// A negative id (FDB gives such an entry no prefix).
    NegativeId(i64),
    /// A lock state other than 0, 1, 2.
    LockState(u8),
}

impl fmt::Display for TenantEntryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Decode(e) => write!(f, "tenant map entry does not decode: {e}"),
            Self::NegativeId(id) => write!(f, "tenant map entry with negative id {id}"),
            Self::LockState(s) => write!(f, "tenant map entry with lock state {s}"),
        }
    }
}

impl From<DecodeError> for TenantEntryError {
    fn from(e: DecodeError) -> Self {
        Self::Decode(e)
    }
}

/// A tenant, as its map entry describes it (checked: a non-negative id, a known lock state).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TenantEntry {
    /// The id; the key prefix is its 8 big-endian bytes.
    pub id: i64,
    /// The name.
    pub name: Bytes,
    /// The tenant group, if it is in one.
    pub tenant_group: Option<Bytes>,
    /// The lock state.
    pub lock_state: TenantLockState,
    /// The id of the lock (present while locked).
    pub lock_id: Option<Uid>,
    /// `configurationSequenceNum` (metacluster bookkeeping; 0 on a standalone cluster).
    pub configuration_sequence_num: i64,
}

impl TenantEntry {
    /// A new unlocked tenant outside any group.
    pub fn new(id: i64, name: impl Into<Bytes>) -> Self {
        TenantEntry {
            id,
            name: name.into(),
            tenant_group: None,
            lock_state: TenantLockState::Unlocked,
            lock_id: None,
            configuration_sequence_num: 0,
        }
    }

    /// The tenant's key prefix.
    pub fn prefix(&self) -> [u8; 8] {
        self.id.to_be_bytes()
    }

    /// Checks a decoded map entry.
    pub fn from_map_entry(e: &TenantMapEntry) -> Result<Self, TenantEntryError> {
        if e.id < 0 {
            return Err(TenantEntryError::NegativeId(e.id));
        }
        let lock_state = TenantLockState::from_u8(e.lock_state)
            .ok_or(TenantEntryError::LockState(e.lock_state))?;
        Ok(TenantEntry {
            id: e.id,
            name: e.tenant_name.clone(),
            tenant_group: e.tenant_group.clone(),
            lock_state,
            lock_id: e.lock_id,
            configuration_sequence_num: e.configuration_sequence_num,
        })
    }

    /// Reads a `\xff/tenant/map/` value.
    pub fn from_map_value(value: &[u8]) -> Result<Self, TenantEntryError> {
        Self::from_map_entry(&TenantMapEntry::decode_value(value)?)
    }

    /// The map entry this describes.
    pub fn to_map_entry(&self) -> TenantMapEntry {
        TenantMapEntry {
            id: self.id,
            tenant_name: self.name.clone(),
            lock_state: self.lock_state.as_u8(),
            lock_id: self.lock_id,
            tenant_group: self.tenant_group.clone(),
            configuration_sequence_num: self.configuration_sequence_num,
        }
    }

    /// The `\xff/tenant/map/` value (what fdbserver stores, byte for byte).
    pub fn to_map_value(&self) -> alloc::vec::Vec<u8> {
        self.to_map_entry().encode_value()
    }

    /// The JSON libfdb_c 7.3 gives this tenant (`TenantMapEntry::toJson`), byte for byte.
    pub fn to_json(&self) -> String {
        let mut s = String::with_capacity(160 + 3 * self.name.len());
        s.push_str("{\"id\":");
        push_i64(&mut s, self.id);
        if let Some(lock_id) = &self.lock_id {
            s.push_str(",\"lock_id\":\"");
            // 32 lowercase hex digits: nothing to escape.
            let _ = fmt::Write::write_fmt(&mut s, format_args!("{lock_id}"));
            s.push('"');
        }
        s.push_str(",\"lock_state\":\"");
        s.push_str(self.lock_state.as_str());
        s.push_str("\",\"name\":");
        push_binary(&mut s, &self.name);
        s.push_str(",\"prefix\":");
        push_binary(&mut s, &self.prefix());
        if let Some(g) = &self.tenant_group {
            s.push_str(",\"tenant_group\":");
            push_binary(&mut s, g);
        }
        s.push('}');
        s
    }
}

fn push_i64(s: &mut String, v: i64) {
    let _ = fmt::Write::write_fmt(s, format_args!("{v}"));
}

/// `binaryToJson`: `{"base64":"...","printable":"..."}`, escaped as json_spirit escapes.
fn push_binary(s: &mut String, b: &[u8]) {
    s.push_str("{\"base64\":\"");
    let b64 = libb64(b);
    // The only character of libb64's output JSON escapes is its newline.
    for c in b64.chars() {
        if c == '\n' {
            s.push_str("\\n");
        } else {
            s.push(c);
        }
    }
    s.push_str("\",\"printable\":\"");
    for &c in b {
        match c {
            // `printable` doubles the backslash; JSON doubles both.
            b'\\' => s.push_str("\\\\\\\\"),
            b'"' => s.push_str("\\\""),
            32..=126 => s.push(c as char),
            _ => {
                // `\xNN`, its backslash escaped for JSON.
                const HEX: &[u8; 16] = b"0123456789abcdef";
                s.push_str("\\\\x");
                s.push(HEX[(c >> 4) as usize] as char);
                s.push(HEX[(c & 15) as usize] as char);
            }
        }
    }
    s.push_str("\"}");
}

/// libb64's encoding as FDB uses it (`base64::encoder::from_string`, then its last character
/// removed): standard alphabet with padding, a newline after every 18 complete 3-byte groups.
pub fn libb64(b: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(b.len() * 4 / 3 + b.len() / 54 + 4);
    let mut groups = 0;
    let mut chunks = b.chunks_exact(3);
    for g in &mut chunks {
        let n = (g[0] as u32) << 16 | (g[1] as u32) << 8 | g[2] as u32;
        for shift in [18, 12, 6, 0] {
            out.push(ALPHABET[((n >> shift) & 63) as usize] as char);
        }
        groups += 1;
        if groups == 18 {
            out.push('\n');
            groups = 0;
        }
    }
    match *chunks.remainder() {
        [a] => {
            out.push(ALPHABET[(a >> 2) as usize] as char);
            out.push(ALPHABET[((a & 3) << 4) as usize] as char);
            out.push_str("==");
        }
        [a, b] => {
            out.push(ALPHABET[(a >> 2) as usize] as char);
            out.push(ALPHABET[(((a & 3) << 4) | (b >> 4)) as usize] as char);
            out.push(ALPHABET[((b & 15) << 2) as usize] as char);
            out.push('=');
        }
        _ => {}
    }
    // libb64 ends with a newline that FDB cuts off: nothing else is cut.
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libb64_breaks_lines_as_fdb_does() {
        assert_eq!(libb64(b""), "");
        assert_eq!(libb64(b"g1"), "ZzE=");
        assert_eq!(libb64(b"\0\0\0\0\0\0\0\x01"), "AAAAAAAAAAE=");
        let n54 = [b'5'; 54];
        let s = libb64(&n54);
        assert_eq!(s.len(), 73);
        assert!(s.ends_with('\n'));
        let s = libb64(&[b'5'; 55]);
        assert_eq!(s.find('\n'), Some(72));
        assert!(s.ends_with("NQ=="));
    }

    #[test]
    fn json_of_a_plain_entry() {
        let e = TenantEntry::new(1, Bytes::from_static(b"p-plain"));
        assert_eq!(
            e.to_json(),
            r#"{"id":1,"lock_state":"unlocked","name":{"base64":"cC1wbGFpbg==","printable":"p-plain"},"prefix":{"base64":"AAAAAAAAAAE=","printable":"\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x01"}}"#
        );
    }

    #[test]
    fn hostile_entries_are_typed_errors() {
        let mut m = TenantEntry::new(1, Bytes::from_static(b"x")).to_map_entry();
        m.lock_state = 7;
        assert_eq!(
            TenantEntry::from_map_entry(&m),
            Err(TenantEntryError::LockState(7))
        );
        m.lock_state = 0;
        m.id = -5;
        assert_eq!(
            TenantEntry::from_map_entry(&m),
            Err(TenantEntryError::NegativeId(-5))
        );
        assert!(matches!(
            TenantEntry::from_map_value(b"\x00\x01"),
            Err(TenantEntryError::Decode(_))
        ));
    }
}
