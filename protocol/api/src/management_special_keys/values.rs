//! The values of the system keys the parts read and write, in flow's binary encoding: the
//! worker list and process classes, the logs, UIDs, the healthy zone. Pure functions, apart
//! from the random UIDs; kept apart so the read and commit paths share one codec.

use std::net::IpAddr;

/// `ProtocolVersion::withHealthyZoneValue()`, the version a healthy zone value starts with.
const HEALTHY_ZONE_VALUE_VERSION: u64 = 0x0FDB_00B0_6201_0001;
/// `ProtocolVersion::withNetworkAddressHostnameFlag()`: from it on, an address ends in a flag.
const HOSTNAME_FLAG_VERSION: u64 = 0x0FDB_00B0_7101_0000;

/// `ProcessClass::toString` of each class by its number (`ClassType`).
const CLASS_NAMES: [&str; 24] = [
    "unset",
    "storage",
    "transaction",
    "resolution",
    "test",
    "commit_proxy",
    "master",
    "stateless",
    "log",
    "cluster_controller",
    "router",
    "fast_restore",
    "data_distributor",
    "coordinator",
    "ratekeeper",
    "storage_cache",
    "backup",
    "grv_proxy",
    "blob_manager",
    "blob_worker",
    "encrypt_key_proxy",
    "consistency_scan",
    "blob_migrator",
    "sim_http_server",
];
/// `ProcessClass::TesterClass`, `CoordinatorClass`, `UnsetClass`, `DBSource`.
pub(super) const TESTER_CLASS: i16 = 4;
pub(super) const COORDINATOR_CLASS: i16 = 13;
pub(super) const UNSET_CLASS: i16 = 0;
pub(super) const DB_SOURCE: i16 = 2;

/// A process's class and where it was set (`ProcessClass`: `_class`, `_source`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct ProcessClass {
    pub(super) class: i16,
    pub(super) source: i16,
}

impl ProcessClass {
    pub(super) fn class_name(&self) -> &'static str {
        // `blob_migrator` has no name in `toString`.
        match usize::try_from(self.class) {
            Ok(22) | Err(_) => "invalid",
            Ok(i) => CLASS_NAMES.get(i).copied().unwrap_or("invalid"),
        }
    }

    pub(super) fn source_name(&self) -> &'static str {
        match self.source {
            0 => "command_line",
            1 => "configure_auto",
            2 => "set_class",
            _ => "invalid",
        }
    }
}

/// A little-endian reader of flow's binary serialization (`BinaryReader`).
pub(super) struct Binary<'a>(pub(super) &'a [u8]);

impl<'a> Binary<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.take(2)?.try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    pub(super) fn u64(&mut self) -> Option<u64> {
        le_u64(self.take(8)?)
    }
    pub(super) fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    /// A `NetworkAddress` of a value written at protocol `version`: `ip:port`.
    fn address(&mut self, version: u64) -> Option<(IpAddr, u16)> {
        let ip = if self.u8()? != 0 {
            let b: [u8; 16] = self.take(16)?.try_into().ok()?;
            IpAddr::from(b)
        } else {
            IpAddr::from(std::net::Ipv4Addr::from(self.u32()?))
        };
        let port = self.u16()?;
        let _flags = self.u16()?;
        if version >= HOSTNAME_FLAG_VERSION {
            self.u8()?;
        }
        Some((ip, port))
    }
    pub(super) fn class(&mut self) -> Option<ProcessClass> {
        Some(ProcessClass {
            class: self.u16()? as i16,
            source: self.u16()? as i16,
        })
    }
}

/// `decodeWorkerListValue`: a worker's process id, class and address (`ip:port` as
/// `formatIpPort` writes it).
pub(super) fn decode_worker(v: &[u8]) -> Option<(Option<Vec<u8>>, ProcessClass, String)> {
    let mut r = Binary(v);
    let version = r.u64()?;
    let mut process_id = None;
    for _ in 0..r.u64()? {
        let key = r.bytes()?;
        let value = if r.u8()? != 0 { Some(r.bytes()?) } else { None };
        if key == b"processid" {
            process_id = value.map(<[u8]>::to_vec);
        }
    }
    let class = r.class()?;
    let (ip, port) = r.address(version)?;
    Some((process_id, class, ip_port(ip, port)))
}

/// A worker's locality (`ProcessData::locality`): each key with its value, if any.
pub(super) type Locality = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// The locality of a worker list value (`decodeWorkerListValue`).
pub(super) fn decode_worker_locality(v: &[u8]) -> Option<Locality> {
    let mut r = Binary(v);
    r.u64()?;
    let mut out = Vec::new();
    for _ in 0..r.u64()? {
        let key = r.bytes()?.to_vec();
        let value = if r.u8()? != 0 {
            Some(r.bytes()?.to_vec())
        } else {
            None
        };
        out.push((key, value));
    }
    Some(out)
}

/// `formatIpPort`.
pub(super) fn ip_port(ip: IpAddr, port: u16) -> String {
    match ip {
        IpAddr::V4(ip) => format!("{ip}:{port}"),
        IpAddr::V6(ip) => format!("[{ip}]:{port}"),
    }
}

/// `decodeLogsValue`: the addresses of the current and the old logs.
pub(super) fn decode_logs(v: &[u8]) -> Option<Vec<(IpAddr, u16)>> {
    let mut r = Binary(v);
    let version = r.u64()?;
    let mut out = Vec::new();
    for _ in 0..2 {
        for _ in 0..r.u32()? {
            r.take(16)?;
            out.push(r.address(version)?);
        }
    }
    Some(out)
}

/// `ProcessClass(name, DBSource)`: the class a name stands for (`None`: none, as
/// `InvalidClass`).
pub(super) fn class_named(name: &[u8]) -> Option<i16> {
    if name == b"proxy" {
        return Some(5);
    }
    // `blob_migrator` has a number but no name.
    CLASS_NAMES
        .iter()
        .position(|n| n.as_bytes() == name && *n != "blob_migrator")
        .map(|i| i as i16)
}

pub(super) fn le_u64(b: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(..8)?.try_into().ok()?))
}

/// A UID as libfdb_c prints it (`UID::toString`): both halves, 16 hex digits each.
pub(super) fn uid_hex(first: u64, second: u64) -> String {
    format!("{first:016x}{second:016x}")
}

/// A UID as it is serialized: both halves, little-endian.
pub(super) fn uid_bytes(first: u64, second: u64) -> Vec<u8> {
    [first.to_le_bytes(), second.to_le_bytes()].concat()
}

/// `UID::fromString`: 32 hex digits.
pub(super) fn parse_uid(s: &[u8]) -> Option<(u64, u64)> {
    if s.len() != 32 || !s.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let s = std::str::from_utf8(s).ok()?;
    Some((
        u64::from_str_radix(&s[..16], 16).ok()?,
        u64::from_str_radix(&s[16..], 16).ok()?,
    ))
}

/// A fresh random UID (`deterministicRandom()->randomUniqueID()`).
pub(super) fn random_uid() -> (u64, u64) {
    (crate::engine::random_u64(), crate::engine::random_u64())
}

/// `decodeHealthyZoneValue`: the zone and the version its maintenance lasts until.
pub(super) fn decode_healthy_zone(v: &[u8]) -> Option<(Vec<u8>, i64)> {
    let len = u32::from_le_bytes(v.get(8..12)?.try_into().ok()?) as usize;
    let zone = v.get(12..12 + len)?.to_vec();
    let until = le_u64(v.get(12 + len..)?)? as i64;
    Some((zone, until))
}

/// `healthyZoneValue`.
pub(super) fn healthy_zone_value(zone: &[u8], until: i64) -> Vec<u8> {
    let mut v = HEALTHY_ZONE_VALUE_VERSION.to_le_bytes().to_vec();
    v.extend_from_slice(&(zone.len() as u32).to_le_bytes());
    v.extend_from_slice(zone);
    v.extend_from_slice(&until.to_le_bytes());
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_and_zones_round_trip() {
        assert_eq!(parse_uid(uid_hex(1, 0xabc).as_bytes()), Some((1, 0xabc)));
        assert_eq!(parse_uid(b"xyz"), None);
        let v = healthy_zone_value(b"zone", 42);
        assert_eq!(decode_healthy_zone(&v), Some((b"zone".to_vec(), 42)));
        assert_eq!(decode_healthy_zone(&v[..10]), None);
    }

    #[test]
    fn process_class_names_parse_as_libfdb_c_parses_them() {
        assert_eq!(class_named(b"storage"), Some(1));
        assert_eq!(class_named(b"proxy"), class_named(b"commit_proxy"));
        assert_eq!(class_named(b"blob_migrator"), None);
        assert_eq!(class_named(b"default"), None);
        let c = ProcessClass {
            class: 17,
            source: 2,
        };
        assert_eq!(
            (c.class_name(), c.source_name()),
            ("grv_proxy", "set_class")
        );
    }

    #[test]
    fn worker_list_values_decode() {
        // A worker of a one-process fdbserver 7.3: machineid, processid, zoneid; unset from
        // the command line; 127.0.0.1:48991.
        let v = b"\x01\x00\x01\x62\xb0\x00\xdb\x0f\x03\x00\x00\x00\x00\x00\x00\x00\
            \x09\x00\x00\x00machineid\x01\x06\x00\x00\x00m48991\
            \x09\x00\x00\x00processid\x01\x20\x00\x00\x00812c15f7c37601a52c67278f4f0fa0d6\
            \x06\x00\x00\x00zoneid\x01\x06\x00\x00\x00z48991\
            \x00\x00\x00\x00\x00\x01\x00\x00\x7f\x5f\xbf\x00\x00";
        let (id, class, addr) = decode_worker(v).unwrap();
        assert_eq!(
            id.as_deref(),
            Some(&b"812c15f7c37601a52c67278f4f0fa0d6"[..])
        );
        assert_eq!(
            (class.class_name(), class.source_name()),
            ("unset", "command_line")
        );
        assert_eq!(addr, "127.0.0.1:48991");
        assert_eq!(decode_worker(&v[..40]), None);
    }
}
