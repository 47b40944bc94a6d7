//! Which protocol the client speaks, on the core's simulated network: learnt from the
//! coordinator's ConnectPacket (7.3 or 7.4), switched when the cluster moves, and refused with
//! a typed error when the cluster speaks one this client does not (never a hang).

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::framing::{ConnectPacket, ProtocolVersion};
use fdb_protocol::messages::coordination::{ClientDBInfo, CommitProxyInterface, GrvProxyInterface};
use fdb_protocol::messages::grv::GetReadVersionReply;
use fdb_protocol::messages::{
    AnyMessage, Endpoint, ErrorOr, NetworkAddress, NetworkAddressList, RequestStream,
};
use fdb_protocol::sim::{Request, Sim};
use fdb_protocol::uid::well_known;
use fdb_protocol::version::Protocol;
use fdb_protocol::{ClientConfig, ConnectionId, Event, Priority, Uid};

fn addr(s: &str) -> NetworkAddress {
    let sa: std::net::SocketAddr = s.parse().unwrap();
    NetworkAddress::new(sa.ip(), sa.port())
}

fn endpoint(a: &str, token: Uid) -> RequestStream {
    RequestStream {
        endpoint: Endpoint {
            addresses: NetworkAddressList {
                address: addr(a),
                secondary_address: None,
            },
            token,
        },
    }
}

const G1: Uid = Uid::new(0x1111, 0x1000);
const C1: Uid = Uid::new(0x2222, 0x2000);

fn db_info(id: u64) -> ClientDBInfo {
    ClientDBInfo {
        grv_proxies: vec![GrvProxyInterface {
            process_id: None,
            provisional: false,
            get_consistent_read_version: endpoint("10.0.0.9:4500", G1),
        }],
        commit_proxies: vec![CommitProxyInterface {
            process_id: None,
            provisional: false,
            commit: endpoint("10.0.0.9:4500", C1),
        }],
        id: Uid::new(id, id),
        ..Default::default()
    }
}

/// The ConnectPacket of a server speaking `v`.
fn hello(v: u64) -> Bytes {
    let mut b = BytesMut::new();
    ConnectPacket::client(ProtocolVersion(v)).encode(&mut b);
    b.freeze()
}

fn harness(server: u64) -> Sim {
    let mut h = Sim::new(ClientConfig::new(
        ClusterFile::parse("a:b@10.0.0.1:4500").unwrap(),
        11,
    ));
    h.set_auto_accept(false);
    h.set_hello(hello(server));
    h
}

fn connect_to(h: &mut Sim, want: &str) -> ConnectionId {
    let c = h.connects();
    assert_eq!(c.len(), 1, "one connect request expected, got {c:?}");
    assert_eq!(c[0].1.to_string(), want);
    c[0].0
}

fn open_database(h: &mut Sim) -> Request {
    h.take_requests()
        .into_iter()
        .find(|r| r.dest == well_known::CLIENT_LEADER_REG_OPEN_DATABASE)
        .expect("an OpenDatabaseCoordRequest")
}

/// The protocol version string the client announces in its `OpenDatabaseCoordRequest`.
fn announced(r: &Request) -> String {
    let AnyMessage::OpenDatabaseCoordRequest(o) = &r.msg else {
        panic!("{:?}", r.msg)
    };
    String::from_utf8(o.supported_versions[0].protocol_version.to_vec()).unwrap()
}

fn protocol_changes(h: &mut Sim) -> Vec<Protocol> {
    h.take_events()
        .into_iter()
        .filter_map(|e| match e {
            Event::ProtocolChanged { protocol } => Some(protocol),
            _ => None,
        })
        .collect()
}

#[test]
fn a_7_4_coordinator_is_answered_in_7_4_on_a_new_connection() {
    let mut h = harness(0x1FDB_00B0_7400_0000);
    let c1 = connect_to(&mut h, "10.0.0.1:4500");
    h.accept(c1);
    // The coordinator's ConnectPacket says 7.4: the client hangs up and reconnects at once,
    // in 7.4, and asks again.
    let c2 = connect_to(&mut h, "10.0.0.1:4500");
    assert_eq!(protocol_changes(&mut h), vec![Protocol::V7_4]);
    assert_ne!(c1, c2);
    h.accept(c2);
    assert_eq!(
        h.client_hello(c2).unwrap().protocol_version,
        0x1FDB_00B0_7400_0000
    );
    let open = open_database(&mut h);
    assert_eq!(open.conn, c2);
    assert_eq!(announced(&open), "fdb00b074000000");
    h.reply(&open, ErrorOr::Ok(db_info(1)));
    let grv = h.client.get_read_version(h.now(), Priority::Default);
    let pc = connect_to(&mut h, "10.0.0.9:4500");
    h.accept(pc);
    assert_eq!(
        h.client_hello(pc).unwrap().protocol_version,
        0x1FDB_00B0_7400_0000,
        "every new connection speaks 7.4"
    );
    let r = h
        .take_requests()
        .into_iter()
        .find(|r| r.dest == G1)
        .unwrap();
    h.reply(
        &r,
        ErrorOr::Ok(GetReadVersionReply {
            version: 7,
            ..Default::default()
        }),
    );
    assert_eq!(h.take(grv).unwrap().unwrap(), 7);
}

#[test]
fn a_7_3_coordinator_needs_no_switch() {
    let mut h = harness(0x1FDB_00B0_7300_0000);
    let c1 = connect_to(&mut h, "10.0.0.1:4500");
    h.accept(c1);
    assert_eq!(
        h.client_hello(c1).unwrap().protocol_version,
        0x1FDB_00B0_7300_0000,
        "7.3 until told otherwise"
    );
    let open = open_database(&mut h);
    assert_eq!(open.conn, c1);
    assert_eq!(announced(&open), "fdb00b073000000");
    assert!(protocol_changes(&mut h).is_empty());
}

#[test]
fn an_unsupported_cluster_fails_requests_with_incompatible_client() {
    // 7.2 (too old), 8.0 (too new), and 7.4 with other significant bits.
    for v in [
        0x1FDB_00B0_7200_0000u64,
        0x1FDB_00B0_8000_0000,
        0x1FDB_00B0_7401_0000,
    ] {
        let mut h = harness(v);
        let grv = h.client.get_read_version(h.now(), Priority::Default);
        let tx = h.client.create_transaction(h.now());
        let get = h.client.get(h.now(), tx, b"k", false);
        let c1 = connect_to(&mut h, "10.0.0.1:4500");
        h.accept(c1);
        assert!(protocol_changes(&mut h).is_empty());
        // libfdb_c's multi-version client with `fail_incompatible_client` says this; without
        // it, it waits forever. A typed error at once, never a hang.
        assert_eq!(
            h.take(grv).expect("finished").unwrap_err().code(),
            ErrorCode::INCOMPATIBLE_CLIENT,
            "{v:x}"
        );
        assert_eq!(
            h.take(get).expect("finished").unwrap_err().code(),
            ErrorCode::INCOMPATIBLE_CLIENT
        );
        // Later requests fail too, and the coordinators are asked again (the cluster may
        // move to a supported version), with the reconnection backoff: bounded work.
        let later = h.client.get_read_version(h.now(), Priority::Default);
        h.drive();
        assert_eq!(
            h.take(later).expect("finished").unwrap_err().code(),
            ErrorCode::INCOMPATIBLE_CLIENT
        );
        h.set_auto_accept(true);
        h.run_until(h.now() + Duration::from_secs(5));
        let connects = h.connects().len();
        assert!(connects < 40, "{connects} connects in 5 s");
    }
}

#[test]
fn an_unsupported_cluster_that_upgrades_to_a_supported_one_is_used_again() {
    let mut h = harness(0x1FDB_00B0_8000_0000);
    let c1 = connect_to(&mut h, "10.0.0.1:4500");
    h.accept(c1);
    let grv = h.client.get_read_version(h.now(), Priority::Default);
    h.drive();
    assert!(h.take(grv).unwrap().is_err());
    // The cluster now speaks 7.4.
    h.set_hello(hello(0x1FDB_00B0_7400_0000));
    h.set_auto_accept(true);
    h.run_until(h.now() + Duration::from_secs(3));
    assert_eq!(protocol_changes(&mut h), vec![Protocol::V7_4]);
    let open = open_database(&mut h);
    assert_eq!(announced(&open), "fdb00b074000000");
    h.reply(&open, ErrorOr::Ok(db_info(1)));
    let grv = h.client.get_read_version(h.now(), Priority::Default);
    let r = h
        .take_requests()
        .into_iter()
        .find(|r| r.dest == G1)
        .unwrap();
    h.reply(
        &r,
        ErrorOr::Ok(GetReadVersionReply {
            version: 9,
            ..Default::default()
        }),
    );
    assert_eq!(h.take(grv).unwrap().unwrap(), 9);
}

#[test]
fn an_upgrade_fails_commits_in_flight_with_cluster_version_changed_and_resends_reads() {
    let mut h = harness(0x1FDB_00B0_7300_0000);
    let c1 = connect_to(&mut h, "10.0.0.1:4500");
    h.accept(c1);
    let open = open_database(&mut h);
    h.reply(&open, ErrorOr::Ok(db_info(1)));
    let poll = open_database(&mut h);
    // A commit and a read version in flight at the 7.3 proxy.
    let tx = h.client.create_transaction(h.now());
    h.client.set(tx, b"k", b"v").unwrap();
    let commit = h.client.commit(h.now(), tx);
    let pc = connect_to(&mut h, "10.0.0.9:4500");
    h.accept(pc);
    let r = h.take_requests();
    h.reply(
        &r[0],
        ErrorOr::Ok(GetReadVersionReply {
            version: 10,
            ..Default::default()
        }),
    );
    let c = h.take_requests();
    assert_eq!(c[0].dest, C1);
    let grv = h.client.get_read_version(h.now(), Priority::Default);
    let g = h.take_requests();
    assert_eq!(g[0].dest, G1);
    // The coordinator restarts as 7.4 (the proxy's connection is still up).
    h.set_hello(hello(0x1FDB_00B0_7400_0000));
    h.close(poll.conn);
    h.set_auto_accept(true);
    h.run_until(h.now() + Duration::from_secs(2));
    assert_eq!(protocol_changes(&mut h), vec![Protocol::V7_4]);
    // The commit may have landed: libfdb_c's multi-version client reports that as
    // `cluster_version_changed`, which `on_error` retries at once.
    let err = h.take(commit).expect("finished").unwrap_err().code();
    assert_eq!(err, ErrorCode::CLUSTER_VERSION_CHANGED);
    assert!(err.is_maybe_committed());
    // The read version is asked again at once, on a new 7.4 connection; the coordinator is
    // asked again in 7.4 too.
    assert!(
        h.take(grv).is_none(),
        "a read version is retried, not failed"
    );
    let sent = h.take_requests();
    let open = sent
        .iter()
        .find(|r| r.dest == well_known::CLIENT_LEADER_REG_OPEN_DATABASE)
        .expect("the coordinator again");
    assert_eq!(announced(open), "fdb00b074000000");
    let r = sent
        .iter()
        .find(|r| r.dest == G1)
        .expect("the read version again")
        .clone();
    assert_ne!(r.conn, pc);
    assert_eq!(
        h.client_hello(r.conn).unwrap().protocol_version,
        0x1FDB_00B0_7400_0000
    );
    h.reply(
        &r,
        ErrorOr::Ok(GetReadVersionReply {
            version: 11,
            ..Default::default()
        }),
    );
    assert_eq!(h.take(grv).unwrap().unwrap(), 11);
}
