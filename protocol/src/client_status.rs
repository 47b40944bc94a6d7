//! The client status (`fdb_database_get_client_status`): libfdb_c's JSON report of what a
//! database knows of its cluster — the coordinators, the proxies and storage servers it has
//! met, and how its connection to each of their addresses stands — built from the core's own
//! state with the field names and shapes of `DatabaseContext::getClientStatus`
//! (`fdbclient/ClientStatusReport.cpp`, 7.3).
//!
//! The report is healthy when the connection string names a coordinator, one is being asked,
//! the cluster information names GRV and commit proxies, and no reported address is failed.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;

use crate::cluster_file::Coordinator;
use crate::messages::NetworkAddress;
use crate::monitor::{wire_address, ClusterMonitor};
use crate::net::Network;
use crate::time::Instant;
use crate::uid::Uid;

/// libfdb_c's client status, field for field (JSON names in the docs).
#[derive(Clone, Debug, PartialEq)]
pub struct ClientStatus {
    /// `Healthy`.
    pub healthy: bool,
    /// `ClusterID`: the cluster's id from `ClientDBInfo` (zeros before the first one).
    pub cluster_id: String,
    /// `Coordinators`: the connection string's host names, then its addresses.
    pub coordinators: Vec<String>,
    /// `CurrentCoordinator`: the coordinator asked for the cluster's information.
    pub current_coordinator: Option<String>,
    /// `GrvProxies`: addresses.
    pub grv_proxies: Vec<String>,
    /// `CommitProxies`: addresses.
    pub commit_proxies: Vec<String>,
    /// `StorageServers`: those the location cache names, by id.
    pub storage_servers: Vec<StorageServerStatus>,
    /// `Connections`: one per address above (coordinators by address only), in FDB's
    /// address order.
    pub connections: Vec<ConnectionStatus>,
    /// `NumConnectionsFailed`.
    pub num_connections_failed: u32,
}

/// One storage server of [`ClientStatus::storage_servers`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StorageServerStatus {
    /// `SSID`.
    pub ssid: String,
    /// `Address`.
    pub address: String,
}

/// One address of [`ClientStatus::connections`].
#[derive(Clone, Debug, PartialEq)]
pub struct ConnectionStatus {
    /// `Address`.
    pub address: String,
    /// `Status`: `failed`, `disconnected`, `connecting` or `connected`.
    pub status: String,
    /// The counters, present once the address was connected to (libfdb_c has a `Peer`).
    pub peer: Option<PeerStatus>,
}

/// FlowTransport's counters for one address.
#[derive(Clone, Debug, PartialEq)]
pub struct PeerStatus {
    /// `ConnectFailedCount`.
    pub connect_failed_count: u32,
    /// `Compatible`.
    pub compatible: bool,
    /// `LastConnectTime`: seconds since the last connect started.
    pub last_connect_time: f64,
    /// `PingCount`: pings answered.
    pub ping_count: u32,
    /// `PingTimeoutCount`: pings unanswered in time while other data arrived.
    pub ping_timeout_count: u32,
    /// `BytesSampleTime`: seconds the byte counts cover (since the last connect: this client
    /// logs no peer metrics that would restart them).
    pub bytes_sample_time: f64,
    /// `BytesReceived`.
    pub bytes_received: u64,
    /// `BytesSent`.
    pub bytes_sent: u64,
    /// `ProtocolVersion`: the peer's, in hex without its flags.
    pub protocol_version: Option<String>,
}

/// FDB's `NetworkAddress` order (`operator<`): flags (TLS) first, then the IP (v4 before
/// v6), then the port.
pub(crate) fn address_order(a: &NetworkAddress) -> (bool, bool, [u8; 16], u16) {
    let (ip, v6) = a.ip.octets16();
    (a.is_tls(), v6, ip, a.port)
}

/// The addresses a report covers, each once, in FDB's order.
pub(crate) fn report_addresses<'a>(
    all: impl IntoIterator<Item = &'a NetworkAddress>,
) -> Vec<NetworkAddress> {
    let mut set = BTreeMap::new();
    for a in all {
        set.entry(address_order(a)).or_insert_with(|| a.clone());
    }
    set.into_values().collect()
}

/// The peer's protocol version as libfdb_c prints it: hex, the flag bits masked off.
pub(crate) fn protocol_hex(v: u64) -> String {
    format!("{:x}", v & 0x0FFF_FFFF_FFFF_FFFF)
}

/// `ClientReportGenerator::generateReport` over the core's state.
pub(crate) fn build(
    now: Instant,
    monitor: &ClusterMonitor,
    net: &Network,
    storage: Vec<(Uid, NetworkAddress)>,
) -> ClientStatus {
    let cluster = monitor.cluster();
    let mut addresses: Vec<NetworkAddress> = Vec::new();
    let mut coordinators: Vec<String> = Vec::new();
    let hosts = cluster
        .coordinators
        .iter()
        .filter(|c| matches!(c, Coordinator::Hostname { .. }));
    coordinators.extend(hosts.map(|c| format!("{c}")));
    for c in &cluster.coordinators {
        if let Coordinator::Address(a) = c {
            coordinators.push(format!("{c}"));
            addresses.push(wire_address(a));
        }
    }
    let current_coordinator = monitor.current_coordinator();
    let mut healthy = !coordinators.is_empty() && current_coordinator.is_some();
    let (cluster_id, grv_proxies, commit_proxies) = match monitor.info() {
        Some(info) => {
            let grv: Vec<NetworkAddress> = info
                .grv_proxies
                .iter()
                .map(|p| p.get_consistent_read_version.endpoint.address().clone())
                .collect();
            let commit: Vec<NetworkAddress> = info
                .commit_proxies
                .iter()
                .map(|p| p.commit.endpoint.address().clone())
                .collect();
            addresses.extend(grv.iter().cloned());
            addresses.extend(commit.iter().cloned());
            (info.cluster_id, grv, commit)
        }
        None => (Uid::default(), Vec::new(), Vec::new()),
    };
    healthy &= !grv_proxies.is_empty() && !commit_proxies.is_empty();
    let storage_servers = storage
        .iter()
        .map(|(id, a)| {
            addresses.push(a.clone());
            StorageServerStatus {
                ssid: format!("{id}"),
                address: format!("{a}"),
            }
        })
        .collect();
    let mut num_connections_failed = 0;
    let connections = report_addresses(&addresses)
        .into_iter()
        .map(|a| {
            let r = net.peer_report(now, &a);
            if r.status == "failed" {
                num_connections_failed += 1;
            }
            let secs = r.since_connect.as_secs_f64();
            ConnectionStatus {
                address: format!("{a}"),
                status: String::from(r.status),
                peer: r.stats.map(|s| PeerStatus {
                    connect_failed_count: s.connect_failed,
                    compatible: !s.incompatible,
                    last_connect_time: secs,
                    ping_count: s.pings.0,
                    ping_timeout_count: s.pings.1,
                    bytes_sample_time: secs,
                    bytes_received: s.bytes_received,
                    bytes_sent: s.bytes_sent,
                    protocol_version: s.protocol.map(protocol_hex),
                }),
            }
        })
        .collect();
    healthy &= num_connections_failed == 0;
    let show = |v: Vec<NetworkAddress>| v.iter().map(|a| format!("{a}")).collect();
    ClientStatus {
        healthy,
        cluster_id: format!("{cluster_id}"),
        coordinators,
        current_coordinator,
        grv_proxies: show(grv_proxies),
        commit_proxies: show(commit_proxies),
        storage_servers,
        connections,
        num_connections_failed,
    }
}

impl ClientStatus {
    /// The document as libfdb_c writes it: one JSON object, keys in sorted order.
    pub fn to_json(&self) -> String {
        let mut o = String::new();
        o.push('{');
        o.push_str("\"ClusterID\":");
        json_string(&mut o, &self.cluster_id);
        o.push_str(",\"CommitProxies\":");
        strings(&mut o, &self.commit_proxies);
        o.push_str(",\"Connections\":");
        array(&mut o, &self.connections, |o, c| c.write(o));
        o.push_str(",\"Coordinators\":");
        strings(&mut o, &self.coordinators);
        if let Some(c) = &self.current_coordinator {
            o.push_str(",\"CurrentCoordinator\":");
            json_string(&mut o, c);
        }
        o.push_str(",\"GrvProxies\":");
        strings(&mut o, &self.grv_proxies);
        let _ = write!(
            o,
            ",\"Healthy\":{},\"NumConnectionsFailed\":{},\"StorageServers\":",
            self.healthy, self.num_connections_failed
        );
        array(&mut o, &self.storage_servers, |o, s| {
            o.push_str("{\"Address\":");
            json_string(o, &s.address);
            o.push_str(",\"SSID\":");
            json_string(o, &s.ssid);
            o.push('}');
        });
        o.push('}');
        o
    }
}

impl ConnectionStatus {
    fn write(&self, o: &mut String) {
        o.push_str("{\"Address\":");
        json_string(o, &self.address);
        if let Some(p) = &self.peer {
            let _ = write!(
                o,
                ",\"BytesReceived\":{},\"BytesSampleTime\":{},\"BytesSent\":{},\
                 \"Compatible\":{},\"ConnectFailedCount\":{},\"LastConnectTime\":{},\
                 \"PingCount\":{},\"PingTimeoutCount\":{}",
                p.bytes_received,
                number(p.bytes_sample_time),
                p.bytes_sent,
                p.compatible,
                p.connect_failed_count,
                number(p.last_connect_time),
                p.ping_count,
                p.ping_timeout_count
            );
            if let Some(v) = &p.protocol_version {
                o.push_str(",\"ProtocolVersion\":");
                json_string(o, v);
            }
        }
        o.push_str(",\"Status\":");
        json_string(o, &self.status);
        o.push('}');
    }
}

/// A JSON number for a duration in seconds: always with a fraction, as json_spirit writes a
/// double, so that readers see a real.
fn number(v: f64) -> String {
    if !v.is_finite() {
        return String::from("0.0");
    }
    let s = format!("{v}");
    if s.contains('.') || s.contains('e') {
        s
    } else {
        format!("{s}.0")
    }
}

fn strings(o: &mut String, v: &[String]) {
    array(o, v, |o, s| json_string(o, s));
}

/// Writes `items` as a JSON array, each by `item`.
fn array<T>(o: &mut String, items: &[T], mut item: impl FnMut(&mut String, &T)) {
    o.push('[');
    for (i, t) in items.iter().enumerate() {
        if i > 0 {
            o.push(',');
        }
        item(o, t);
    }
    o.push(']');
}

/// Writes `s` as a JSON string (also the status document's).
pub(crate) fn json_string(o: &mut String, s: &str) {
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::IpAddress;
    use alloc::string::ToString;
    use alloc::vec;

    #[test]
    fn the_document_parses_with_libfdb_c_field_names() {
        let s = ClientStatus {
            healthy: true,
            cluster_id: "00".repeat(16),
            coordinators: vec!["127.0.0.1:4500".to_string()],
            current_coordinator: Some("127.0.0.1:4500".to_string()),
            grv_proxies: vec!["127.0.0.1:4500".to_string()],
            commit_proxies: vec![],
            storage_servers: vec![StorageServerStatus {
                ssid: "ab".to_string(),
                address: "127.0.0.1:4500".to_string(),
            }],
            connections: vec![ConnectionStatus {
                address: "127.0.0.1:4500".to_string(),
                status: "connected".to_string(),
                peer: Some(PeerStatus {
                    connect_failed_count: 0,
                    compatible: true,
                    last_connect_time: 2.0,
                    ping_count: 1,
                    ping_timeout_count: 0,
                    bytes_sample_time: 2.5,
                    bytes_received: 10,
                    bytes_sent: 20,
                    protocol_version: Some(protocol_hex(0x1FDB_00B0_7300_0000)),
                }),
            }],
            num_connections_failed: 0,
        };
        let v: serde_json::Value = serde_json::from_str(&s.to_json()).unwrap();
        assert_eq!(v["Connections"][0]["ProtocolVersion"], "fdb00b073000000");
        assert!(v["Connections"][0]["LastConnectTime"].is_f64());
        assert_eq!(v["StorageServers"][0]["SSID"], "ab");
        assert_eq!(v["Healthy"], true);
        assert_eq!(v["CommitProxies"], serde_json::json!([]));
    }

    #[test]
    fn addresses_in_fdb_order() {
        let a = |ip: u32, port: u16| NetworkAddress {
            ip: IpAddress::V4(ip),
            port,
            ..NetworkAddress::default()
        };
        let got = report_addresses(&[a(2, 1), a(1, 9), a(1, 2), a(1, 9)]);
        assert_eq!(got, vec![a(1, 2), a(1, 9), a(2, 1)]);
    }
}
