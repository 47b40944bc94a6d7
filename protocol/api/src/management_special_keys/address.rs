//! Process addresses as libfdb_c parses them (`AddressExclusion`, `NetworkAddress`): the
//! exclusions, the space check and `setclass` all name processes this way.

use std::net::IpAddr;

/// An address to exclude (`AddressExclusion`): a whole machine (`port` 0) or one process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct AddressExclusion {
    ip: IpAddr,
    port: u16,
}

impl AddressExclusion {
    /// `AddressExclusion::parse`: an IP alone, or `ip:port` (`[ip]:port` for IPv6); a
    /// `:tls` suffix is refused.
    pub(super) fn parse(s: &[u8]) -> Option<AddressExclusion> {
        let s = std::str::from_utf8(s).ok()?;
        if let Ok(ip) = s.parse::<IpAddr>() {
            return Some(AddressExclusion { ip, port: 0 });
        }
        let (ip, port) = parse_network_address(s)?;
        if s.ends_with(":tls") {
            return None;
        }
        Some(AddressExclusion { ip, port })
    }

    /// As it travels in messages (`ExclusionSafetyCheckRequest`).
    pub(super) fn wire(&self) -> fdb_protocol::messages::AddressExclusion {
        fdb_protocol::messages::AddressExclusion {
            ip: self.ip.into(),
            port: i32::from(self.port),
        }
    }

    /// Whether it excludes the process at `ip:port` (`addressExcluded`).
    pub(super) fn excludes(&self, ip: IpAddr, port: u16) -> bool {
        self.ip == ip && (self.port == 0 || self.port == port)
    }
}

impl std::fmt::Display for AddressExclusion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.ip, self.port) {
            (ip, 0) => write!(f, "{ip}"),
            (IpAddr::V4(ip), port) => write!(f, "{ip}:{port}"),
            (IpAddr::V6(ip), port) => write!(f, "[{ip}]:{port}"),
        }
    }
}

/// `NetworkAddress::parse`: `ip:port`, `[ip6]:port`, either with `:tls` after.
pub(super) fn parse_network_address(s: &str) -> Option<(IpAddr, u16)> {
    let s = s.split("(fromHostname)").next().unwrap_or(s);
    let s = s.strip_suffix(":tls").unwrap_or(s);
    if let Some(rest) = s.strip_prefix('[') {
        let (ip, port) = rest.split_once("]:")?;
        return Some((ip.parse().ok()?, port.parse().ok()?));
    }
    let (ip, port) = s.rsplit_once(':')?;
    if !port.bytes().all(|b| b.is_ascii_digit()) || port.is_empty() {
        return None;
    }
    Some((IpAddr::V4(ip.parse().ok()?), port.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_as_libfdb_c_parses_them() {
        let p = |s: &str| AddressExclusion::parse(s.as_bytes()).map(|a| a.to_string());
        assert_eq!(p("127.0.0.2:4500").as_deref(), Some("127.0.0.2:4500"));
        assert_eq!(p("127.0.0.2").as_deref(), Some("127.0.0.2"));
        assert_eq!(p("[::1]:4500").as_deref(), Some("[::1]:4500"));
        assert_eq!(p("127.0.0.2:4500:tls"), None);
        assert_eq!(p("nonsense"), None);
        assert_eq!(p("1.2.3.4:"), None);
    }
}
