//! Connection-level faults, FDB's way: reconnection backoff, connect timeouts, the
//! endpoint-not-found notice, coordinators given by host name, and coordinator forwarding.
//!
//! The first part drives the sans-IO core alone on the core's simulated network
//! (`fdb_protocol::sim`: a fake clock, connections accepted, refused and closed by the test,
//! no sockets), so delays are checked exactly. The second part runs both drivers against a
//! scripted coordinator that forwards to the in-process test cluster.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::framing::{
    encode_packet, ConnectPacket, FrameDecoder, Incoming, ProtocolVersion,
};
use fdb_protocol::knobs::Knobs;
use fdb_protocol::messages::commit::CommitID;
use fdb_protocol::messages::coordination::{
    ClientDBInfo, CommitProxyInterface, GrvProxyInterface, Hostname,
};
use fdb_protocol::messages::grv::GetReadVersionReply;
use fdb_protocol::messages::{
    decode_any, encode_reply, AnyMessage, Endpoint, EnsureTable, ErrorOr, NetworkAddress,
    NetworkAddressList, RequestStream, Void,
};
use fdb_protocol::serializer::encode_with;
use fdb_protocol::sim::{Request, Sim};
use fdb_protocol::time::Instant;
use fdb_protocol::uid::well_known;
use fdb_protocol::ConnectionError;
use fdb_protocol::Uid;
use fdb_protocol::{
    Call, ClientConfig, ConnectionId, Event, Outcome, Priority, INITIAL_RECONNECTION_TIME,
    MAX_RECONNECTION_TIME, RECONNECTION_TIME_GROWTH_RATE,
};

/// `UID::file_identifier`: the endpoint-not-found notice is a bare UID.
const UID_FILE_IDENTIFIER: u32 = 15597147;

fn t(s: f64) -> Instant {
    Instant::from_secs_f64(s)
}

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

/// A `ClientDBInfo` with one GRV proxy and one commit proxy, both at `proxy`.
fn db_info(id: u64, proxy: &str, grv: Uid, commit: Uid) -> ClientDBInfo {
    ClientDBInfo {
        grv_proxies: vec![GrvProxyInterface {
            process_id: None,
            provisional: false,
            get_consistent_read_version: endpoint(proxy, grv),
        }],
        commit_proxies: vec![CommitProxyInterface {
            process_id: None,
            provisional: false,
            commit: endpoint(proxy, commit),
        }],
        id: Uid::new(id, id),
        ..Default::default()
    }
}

/// The client core on the simulated network, every connection left to the test.
fn harness(cluster: &str, seed: u64) -> Sim {
    harness_with(cluster, seed, Knobs::default())
}

/// [`harness`] with `knobs`.
fn harness_with(cluster: &str, seed: u64, knobs: Knobs) -> Sim {
    let mut h = Sim::new(ClientConfig {
        knobs,
        ..ClientConfig::new(ClusterFile::parse(cluster).unwrap(), seed)
    });
    h.set_auto_accept(false);
    h
}

/// Refuses `conn` and steps from deadline to deadline until the core asks to connect again:
/// how long that took, and the new connection.
fn refused_then_again(h: &mut Sim, conn: ConnectionId) -> (f64, ConnectionId) {
    let failed_at = h.now();
    h.refuse(conn);
    let mut again = h.connects();
    while again.is_empty() {
        let at = h.client.poll_timeout().unwrap();
        assert!(at.saturating_since(failed_at) < Duration::from_secs(5));
        h.advance_to(at);
        let _ = h.take_requests();
        again = h.connects();
    }
    assert_eq!(again.len(), 1);
    (
        h.now().saturating_since(failed_at).as_secs_f64(),
        again[0].0,
    )
}

/// The reconnection knobs pace the retries instead of flow's defaults: from 0.1 s, ×1.5 a
/// failure, up to 0.3 s (each jittered ±10 %).
#[test]
fn reconnect_delay_follows_the_knobs() {
    let knobs = Knobs::default()
        .with("initial_reconnection_time", "0.1")
        .unwrap()
        .with("reconnection_time_growth_rate", "1.5")
        .unwrap()
        .with("max_reconnection_time", "0.3")
        .unwrap();
    let mut h = harness_with("a:b@10.0.0.1:4500", 1, knobs);
    h.bootstrap("10.0.0.1:4500", &db_info(1, "10.0.0.9:4500", G1, C1));
    let _req = h.client.get_read_version(h.now(), Priority::Default);
    let mut conn = h.connect_to("10.0.0.9:4500");
    for want in [0.15, 0.225, 0.3, 0.3] {
        let (waited, again) = refused_then_again(&mut h, conn);
        assert!(
            waited >= want * 0.9 - 1e-9 && waited <= want * 1.1 + 1e-9,
            "waited {waited}, delay {want}"
        );
        conn = again;
    }
}

/// `coordinator_reconnection_delay`: after every coordinator failed, the next round waits
/// this long (1 s by default).
#[test]
fn a_round_of_coordinators_waits_the_knob() {
    let mut knobs = Knobs::default();
    knobs.set("coordinator_reconnection_delay", "0.25").unwrap();
    for (knobs, want) in [(knobs, 0.25), (Knobs::default(), 1.0)] {
        let mut h = harness_with("a:b@10.0.0.1:4500", 1, knobs);
        let conn = h.connect_to("10.0.0.1:4500");
        let (waited, _) = refused_then_again(&mut h, conn);
        assert!(
            (want..want + 0.01).contains(&waited),
            "waited {waited}, want {want}"
        );
    }
}

/// The steps these tests repeat, on top of the simulation.
trait Steps {
    /// The one connection the client asks for, which must be to `want`.
    fn connect_to(&mut self, want: &str) -> ConnectionId;
    /// Bootstraps against the coordinator at `coord` with `info`; returns the pending long
    /// poll.
    fn bootstrap(&mut self, coord: &str, info: &ClientDBInfo) -> Request;
    /// Lets time pass up to `to`; returns what the client sent meanwhile.
    fn sent_until(&mut self, to: Instant) -> Vec<Request>;
    /// The one completion that came, which must be `call`'s: its value or error code.
    fn only<T: Outcome>(&mut self, call: Call<T>) -> Result<T, ErrorCode>;
}

impl Steps for Sim {
    fn connect_to(&mut self, want: &str) -> ConnectionId {
        let c = self.connects();
        assert_eq!(c.len(), 1, "one connect request expected, got {c:?}");
        assert_eq!(c[0].1.to_string(), want);
        c[0].0
    }

    fn bootstrap(&mut self, coord: &str, info: &ClientDBInfo) -> Request {
        let cc = self.connect_to(coord);
        self.accept(cc);
        let s = self.take_requests();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].dest, well_known::CLIENT_LEADER_REG_OPEN_DATABASE);
        self.reply(&s[0], ErrorOr::Ok(info.clone()));
        self.take_requests()
            .into_iter()
            .find(|s| matches!(s.msg, AnyMessage::OpenDatabaseCoordRequest(_)))
            .expect("the long poll follows")
    }

    fn sent_until(&mut self, to: Instant) -> Vec<Request> {
        self.run_until(to);
        self.take_requests()
    }

    fn only<T: Outcome>(&mut self, call: Call<T>) -> Result<T, ErrorCode> {
        let mut done = self.take_completions();
        assert_eq!(done.len(), 1, "exactly one completion: {done:?}");
        call.take(done.remove(0)).map_err(|e| e.code())
    }
}

fn grv_reply(version: i64) -> ErrorOr<GetReadVersionReply> {
    ErrorOr::Ok(GetReadVersionReply {
        version,
        ..Default::default()
    })
}

/// The endpoint-not-found notice wrapped in a one-member table, as the test cluster writes it
/// (what a real fdbserver sends, a bare UID, is [`Sim::endpoint_not_found`]).
fn endpoint_not_found_wrapped(token: Uid) -> Vec<u8> {
    encode_with(&EnsureTable(token), UID_FILE_IDENTIFIER)
}

const G1: Uid = Uid::new(0x1111, 0x1000);
const C1: Uid = Uid::new(0x2222, 0x2000);
const G2: Uid = Uid::new(0x3333, 0x3000);
const C2: Uid = Uid::new(0x4444, 0x4000);

#[test]
fn reconnect_delay_grows_by_flow_knobs_and_requests_wait() {
    let mut h = harness("a:b@10.0.0.1:4500", 1);
    h.bootstrap("10.0.0.1:4500", &db_info(1, "10.0.0.9:4500", G1, C1));
    let req = h.client.get_read_version(h.now(), Priority::Default);
    let mut conn = h.connect_to("10.0.0.9:4500");
    // The proxy refuses connections: each retry waits last_connect + delay (jittered ±10%),
    // the delay growing ×1.2 from 50 ms up to 500 ms.
    let mut delay = INITIAL_RECONNECTION_TIME;
    for round in 0..20 {
        delay = delay
            .mul_f64(RECONNECTION_TIME_GROWTH_RATE)
            .min(MAX_RECONNECTION_TIME);
        let failed_at = h.now();
        h.refuse(conn);
        // Step from deadline to deadline (pings on the coordinator connection come in
        // between) until the core asks to connect again.
        let mut again = h.connects();
        while again.is_empty() {
            let at = h.client.poll_timeout().unwrap();
            assert!(
                at.saturating_since(failed_at) < Duration::from_secs(1),
                "round {round}: no reconnect"
            );
            h.advance_to(at);
            assert!(
                h.take_requests().is_empty(),
                "round {round}: nothing but pings"
            );
            again = h.connects();
        }
        let waited = h.now().saturating_since(failed_at).as_secs_f64();
        let want = delay.as_secs_f64();
        assert!(
            waited >= want * 0.9 - 1e-9 && waited <= want * 1.1 + 1e-9,
            "round {round}: waited {waited}, delay {want}"
        );
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].1.to_string(), "10.0.0.9:4500");
        conn = again[0].0;
    }
    assert_eq!(delay, MAX_RECONNECTION_TIME);
    // It connects at last: the read version that waited is sent on the new connection.
    h.accept(conn);
    let s = h.take_requests();
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].dest, G1);
    h.reply(&s[0], grv_reply(77));
    assert_eq!(h.only(req), Ok(77));

    // A connection that lived longer than RECONNECTION_RESET_TIME resets the delay: after it
    // fails, the next connection starts at once.
    assert!(h.sent_until(h.now() + Duration::from_secs(6)).is_empty());
    h.close(conn);
    let _ = h.take_events();
    let _req = h.client.get_read_version(h.now(), Priority::Default);
    // The read version is sent when its batching window closes (5 ms at most; this one grew
    // to the cap on the slow answer above), well inside the smallest reconnection delay.
    h.advance_by(Duration::from_millis(5));
    let c = h.connects();
    assert_eq!(
        c.len(),
        1,
        "reconnects immediately after a long-lived connection"
    );

    // ... and the delay after that failure is the initial one again, grown once.
    let failed_at = h.now();
    h.refuse(c[0].0);
    while h.connects().is_empty() {
        let at = h.client.poll_timeout().unwrap();
        h.advance_to(at);
        let _ = h.take_requests();
    }
    let waited = h.now().saturating_since(failed_at);
    let want = INITIAL_RECONNECTION_TIME.mul_f64(RECONNECTION_TIME_GROWTH_RATE);
    assert!(waited >= want.mul_f64(0.9) && waited <= want.mul_f64(1.1));
}

#[test]
fn a_connect_that_hangs_times_out() {
    let mut h = harness("a:b@10.0.0.1:4500,10.0.0.2:4500", 3);
    let first = h.connects();
    assert_eq!(first.len(), 1);
    // The driver never reports the connect: after CONNECT_TIMEOUT (2 s) the core closes it
    // and asks the other coordinator.
    h.advance_to(t(1.9));
    assert!(h.take_events().is_empty());
    h.advance_to(t(2.0));
    let ev = h.take_events();
    assert!(ev.contains(&Event::Close {
        conn: first[0].0,
        reason: ConnectionError::Timeout
    }));
    let next = ev
        .iter()
        .find_map(|e| match e {
            Event::Connect { addr, .. } => Some(addr.clone()),
            _ => None,
        })
        .expect("the other coordinator");
    assert_ne!(next, first[0].1);
}

#[test]
fn grv_to_an_unknown_endpoint_waits_for_new_proxies() {
    for wrapped in [false, true] {
        let mut h = harness("a:b@10.0.0.1:4500", 5);
        let poll = h.bootstrap("10.0.0.1:4500", &db_info(1, "10.0.0.9:4500", G1, C1));
        let req = h.client.get_read_version(h.now(), Priority::Default);
        let pc = h.connect_to("10.0.0.9:4500");
        h.accept(pc);
        let s = h.take_requests();
        assert_eq!(s[0].dest, G1);
        // The proxy process restarted: it does not know G1 any more.
        if wrapped {
            h.send(
                pc,
                well_known::ENDPOINT_NOT_FOUND,
                &endpoint_not_found_wrapped(G1),
            );
        } else {
            h.endpoint_not_found(&s[0]);
        }
        // Not re-sent to the same dead endpoint, and not failed either.
        assert!(h.sent_until(h.now() + Duration::from_secs(2)).is_empty());
        assert!(h.take_completions().is_empty());
        // New proxies arrive on the long poll: the read version goes to them.
        h.reply(&poll, ErrorOr::Ok(db_info(2, "10.0.0.9:4500", G2, C2)));
        let s = h.take_requests();
        let grv = s
            .iter()
            .find(|s| matches!(s.msg, AnyMessage::GetReadVersionRequest(_)))
            .expect("re-sent");
        assert_eq!((grv.conn, grv.dest), (pc, G2));
        h.reply(grv, grv_reply(99));
        assert_eq!(h.only(req), Ok(99));
    }
}

#[test]
fn new_proxies_resend_grvs_in_flight() {
    let mut h = harness("a:b@10.0.0.1:4500", 6);
    let poll = h.bootstrap("10.0.0.1:4500", &db_info(1, "10.0.0.9:4500", G1, C1));
    let req = h.client.get_read_version(h.now(), Priority::Default);
    let pc = h.connect_to("10.0.0.9:4500");
    h.accept(pc);
    let old = h.take_requests();
    assert_eq!(old[0].dest, G1);
    h.reply(&poll, ErrorOr::Ok(db_info(2, "10.0.0.9:4500", G2, C2)));
    let s = h.take_requests();
    let grv = s
        .iter()
        .find(|s| matches!(s.msg, AnyMessage::GetReadVersionRequest(_)))
        .expect("re-sent to the new proxy (`onProxiesChanged`)");
    assert_eq!(grv.dest, G2);
    // The old proxy's late answer is ignored; the new one's counts.
    h.reply(&old[0], grv_reply(1));
    assert!(h.take_completions().is_empty());
    h.reply(grv, grv_reply(2));
    assert_eq!(h.only(req), Ok(2));
}

#[test]
fn the_proxy_subset_is_kept_while_the_proxies_stay() {
    // Five GRV proxies: the client talks to three (`MAX_GRV_PROXY_CONNECTIONS`), and keeps the
    // same three when a new ClientDBInfo lists the same proxies (`shrinkProxyList`), so a read
    // version in flight is not re-sent.
    let mut info = db_info(1, "10.0.0.9:4500", G1, C1);
    info.grv_proxies = (0..5u64)
        .map(|i| GrvProxyInterface {
            process_id: None,
            provisional: false,
            get_consistent_read_version: endpoint(&format!("10.0.1.{i}:4500"), Uid::new(i + 1, 7)),
        })
        .collect();
    let mut h = harness("a:b@10.0.0.1:4500", 12);
    let poll = h.bootstrap("10.0.0.1:4500", &info);
    h.take_events();
    let proxies = h.client.cluster_info().expect("the cluster's proxies");
    assert_eq!(proxies.grv_proxies.len(), 3);
    assert_eq!(proxies.commit_proxies.len(), 1);
    let req = h.client.get_read_version(h.now(), Priority::Default);
    let pc = h.connects()[0].0;
    h.accept(pc);
    let grv = h.take_requests();
    assert_eq!(grv.len(), 1);
    info.id = Uid::new(2, 2);
    h.reply(&poll, ErrorOr::Ok(info));
    assert!(
        h.take_requests()
            .iter()
            .all(|s| !matches!(s.msg, AnyMessage::GetReadVersionRequest(_))),
        "same proxies: nothing re-sent"
    );
    h.reply(&grv[0], grv_reply(5));
    assert_eq!(h.only(req), Ok(5));
}

#[test]
fn commit_to_an_unknown_endpoint_is_commit_unknown_result() {
    let mut h = harness("a:b@10.0.0.1:4500", 7);
    let poll = h.bootstrap("10.0.0.1:4500", &db_info(1, "10.0.0.9:4500", G1, C1));
    let tx = h.client.create_transaction(h.now());
    h.client.set(tx, b"k", b"v").unwrap();
    let req = h.client.commit(h.now(), tx);
    let pc = h.connect_to("10.0.0.9:4500");
    h.accept(pc);
    let s = h.take_requests();
    h.reply(&s[0], grv_reply(10));
    let s = h.take_requests();
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].dest, C1);
    assert!(matches!(s[0].msg, AnyMessage::CommitTransactionRequest(_)));
    // libfdb_c: the endpoint failure wakes `tryGetReply` with `request_maybe_delivered`,
    // which an at-most-once commit turns into `commit_unknown_result` -- but only after a
    // dummy transaction on the commit's self-conflict key has committed
    // (`commitDummyTransaction`), so the original can no longer land later. With the only
    // commit proxy gone, that waits for new proxies.
    let sc_key = match &s[0].msg {
        AnyMessage::CommitTransactionRequest(r) => {
            r.transaction.write_conflict_ranges[1].begin.clone()
        }
        _ => unreachable!(),
    };
    assert!(sc_key.starts_with(b"\xff/SC/"));
    h.endpoint_not_found(&s[0]);
    let s = h.take_requests();
    let grv = s
        .iter()
        .find(|s| s.dest == G1)
        .expect("the dummy's read version");
    h.reply(grv, grv_reply(20));
    assert!(h.sent_until(h.now() + Duration::from_secs(1)).is_empty());
    assert!(
        h.take_completions().is_empty(),
        "not before the dummy commit"
    );
    h.reply(&poll, ErrorOr::Ok(db_info(2, "10.0.0.9:4500", G2, C2)));
    let s = h.take_requests();
    let dummy = s.iter().find(|s| s.dest == C2).expect("the dummy commit");
    let AnyMessage::CommitTransactionRequest(r) = &dummy.msg else {
        panic!("{:?}", dummy.msg)
    };
    assert!(r.transaction.mutations.is_empty());
    assert_eq!(r.transaction.read_conflict_ranges.len(), 1);
    assert_eq!(r.transaction.read_conflict_ranges[0].begin, sc_key);
    assert_eq!(
        r.transaction.write_conflict_ranges,
        r.transaction.read_conflict_ranges
    );
    h.reply(
        dummy,
        ErrorOr::Ok(CommitID {
            version: 25,
            ..Default::default()
        }),
    );
    assert_eq!(
        h.only(req).map(|c| c.version),
        Err(ErrorCode::COMMIT_UNKNOWN_RESULT)
    );
    // The retry goes to the new proxy.
    let retry = h
        .client
        .on_error(h.now(), tx, ErrorCode::COMMIT_UNKNOWN_RESULT);
    assert!(h.sent_until(h.now() + Duration::from_secs(1)).is_empty());
    assert_eq!(h.only(retry), Ok(()));
    h.client.set(tx, b"k", b"v").unwrap();
    let req = h.client.commit(h.now(), tx);
    let s = h.take_requests();
    let grv = s.iter().find(|s| s.dest == G2).expect("read version");
    h.reply(grv, grv_reply(30));
    let s = h.take_requests();
    let commit = s
        .iter()
        .find(|s| s.dest == C2)
        .expect("commit to the new proxy");
    h.reply(
        commit,
        ErrorOr::Ok(CommitID {
            version: 30,
            ..Default::default()
        }),
    );
    assert_eq!(h.only(req).map(|c| c.version), Ok(30));
}

#[test]
fn hostname_coordinators_are_resolved_by_the_driver() {
    let mut h = harness("a:b@coord.example:4500:tls", 8);
    let ev = h.take_events();
    assert_eq!(
        ev,
        vec![Event::Resolve {
            host: "coord.example".into(),
            port: 4500
        }],
        "nothing connects before the name is resolved"
    );
    let ips: Vec<std::net::IpAddr> = vec!["10.0.0.5".parse().unwrap()];
    h.client
        .handle_resolved(h.now(), "coord.example", 4500, &ips);
    let c = h.connects();
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].1.to_string(), "10.0.0.5:4500:tls");
    assert!(c[0].1.from_hostname);
    h.accept(c[0].0);
    let s = h.take_requests();
    let AnyMessage::OpenDatabaseCoordRequest(req) = &s[0].msg else {
        panic!()
    };
    // As libfdb_c: the host names travel as such, the address list holds only IP coordinators.
    assert!(req.coordinators.is_empty());
    assert_eq!(
        req.hostnames,
        vec![Hostname {
            host: Bytes::from_static(b"coord.example"),
            service: Bytes::from_static(b"4500"),
            is_tls: true,
        }]
    );
    // A connection failure drops the resolved address (`removeCachedDNS`): the next round,
    // after COORDINATOR_RECONNECTION_DELAY, resolves again.
    h.close(c[0].0);
    let _ = h.take_events();
    assert_eq!(h.client.poll_timeout(), Some(t(1.0)));
    h.advance_to(t(1.0));
    assert_eq!(
        h.take_events(),
        vec![Event::Resolve {
            host: "coord.example".into(),
            port: 4500
        }]
    );
    // A failed lookup counts as a failed coordinator (`lookup_failed`).
    h.client
        .handle_resolved(h.now(), "coord.example", 4500, &[]);
    // That was a full round: the driver is told, to re-read its cluster file.
    assert_eq!(h.take_events(), vec![Event::CoordinatorsUnreachable]);
    assert_eq!(h.client.poll_timeout(), Some(t(2.0)));
    h.advance_to(t(2.0));
    assert!(matches!(h.take_events()[..], [Event::Resolve { .. }]));
}

#[test]
fn mixed_coordinators_list_addresses_and_hostnames_in_file_order() {
    let mut h = harness("a:b@10.0.0.2:4500,coord.example:4500,10.0.0.1:4500", 9);
    // Whichever comes first after the shuffle, the request lists the IP coordinators in
    // connection-string order.
    let mut ev = h.take_events();
    if let [Event::Resolve { host, port }] = &ev[..] {
        h.client
            .handle_resolved(h.now(), host, *port, &["10.0.0.3".parse().unwrap()]);
        ev = h.take_events();
    }
    let Event::Connect { conn, .. } = ev[0] else {
        panic!("{ev:?}")
    };
    h.accept(conn);
    let s = h.take_requests();
    let AnyMessage::OpenDatabaseCoordRequest(req) = &s[0].msg else {
        panic!()
    };
    let listed: Vec<String> = req.coordinators.iter().map(|a| a.to_string()).collect();
    assert_eq!(listed, ["10.0.0.2:4500", "10.0.0.1:4500"]);
    assert_eq!(req.hostnames.len(), 1);
}

/// A client of the one coordinator `10.0.0.1:4500`, whose first answer forwards it to `to`.
fn forwarded(seed: u64, to: &'static [u8]) -> Sim {
    let mut h = harness("a:b@10.0.0.1:4500", seed);
    let cc = h.connect_to("10.0.0.1:4500");
    h.accept(cc);
    let s = h.take_requests();
    let fwd = ClientDBInfo {
        forward: Some(Bytes::from_static(to)),
        ..Default::default()
    };
    h.reply(&s[0], ErrorOr::Ok(fwd));
    h
}

#[test]
fn forward_is_followed_and_then_persisted() {
    let mut h = forwarded(10, b"a:b@10.0.0.2:4500,10.0.0.3:4500");
    let new = ClusterFile::parse("a:b@10.0.0.2:4500,10.0.0.3:4500").unwrap();
    let old = ClusterFile::parse("a:b@10.0.0.1:4500").unwrap();
    let ev = h.take_events();
    assert_eq!(h.client.cluster(), &new);
    // Not confirmed yet: the cluster file still holds the old string, and a driver that
    // reads it again must not take that for a change.
    assert_eq!(h.client.confirmed_cluster(), &old);
    // The client asks one of the new coordinators, telling it the new connection string.
    let (conn, at) = ev
        .iter()
        .find_map(|e| match e {
            Event::Connect { conn, addr } => Some((*conn, addr.to_string())),
            _ => None,
        })
        .expect("connects to a new coordinator");
    assert!(at == "10.0.0.2:4500" || at == "10.0.0.3:4500", "{at}");
    h.accept(conn);
    let s = h.take_requests();
    let AnyMessage::OpenDatabaseCoordRequest(req) = &s[0].msg else {
        panic!()
    };
    let listed: Vec<String> = req.coordinators.iter().map(|a| a.to_string()).collect();
    assert_eq!(listed, ["10.0.0.2:4500", "10.0.0.3:4500"]);
    assert_eq!(&req.cluster_key[..], b"a:b");
    assert!(
        !h.events()
            .iter()
            .any(|e| matches!(e, Event::ClusterFileChanged { .. })),
        "not persisted before a new coordinator answers"
    );
    // The first answer from the new coordinators makes it the cluster file's contents.
    h.reply(&s[0], ErrorOr::Ok(db_info(1, "10.0.0.9:4500", G1, C1)));
    let ev = h.take_events();
    assert!(ev.contains(&Event::ClusterFileChanged {
        cluster: new.clone()
    }));
    assert_eq!(h.client.confirmed_cluster(), &new);
    assert_eq!(
        new.file_contents(),
        "# DO NOT EDIT!\n# This file is auto-generated, it is not to be edited by hand\n\
         a:b@10.0.0.2:4500,10.0.0.3:4500\n"
    );
}

/// A forward whose new coordinators all fail a round stays followed: the round ends in
/// `CoordinatorsUnreachable`, and the string to compare the cluster file with is still the
/// old one, which the file holds, so a driver does not switch back (libfdb_c's intermediate
/// record is never out of date). Switching back sent a client to the old coordinators,
/// which forwarded it again, round after round.
#[test]
fn a_forward_not_confirmed_survives_a_failed_round() {
    let mut h = forwarded(12, b"a:b@10.0.0.2:4500");
    let old = ClusterFile::parse("a:b@10.0.0.1:4500").unwrap();
    let new = ClusterFile::parse("a:b@10.0.0.2:4500").unwrap();
    let conn = h
        .take_events()
        .iter()
        .find_map(|e| match e {
            Event::Connect { conn, .. } => Some(*conn),
            _ => None,
        })
        .expect("connects to the new coordinator");
    let now = h.now();
    h.client.handle_connect_failed(conn, now);
    assert!(h.take_events().contains(&Event::CoordinatorsUnreachable));
    assert_eq!(h.client.cluster(), &new);
    assert_eq!(h.client.confirmed_cluster(), &old);
}

#[test]
fn a_garbage_forward_counts_as_a_failed_coordinator() {
    let h = forwarded(11, b"not a connection string");
    assert_eq!(
        h.client.cluster(),
        &ClusterFile::parse("a:b@10.0.0.1:4500").unwrap()
    );
    assert_eq!(h.client.poll_timeout().map(|t| t >= h.now()), Some(true));
}

// ----- both drivers, forwarded by a scripted coordinator to the test cluster -----

mod forwarding {
    use super::*;
    use fdb_tests::cluster::TestCluster;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// A coordinator that answers every `OpenDatabaseCoordRequest` with `forward = to`.
    fn forwarder(to: String) -> std::net::SocketAddr {
        forwarder_counting(to, Default::default())
    }

    /// [`forwarder`], counting the requests it forwards in `asked`.
    fn forwarder_counting(
        to: String,
        asked: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    ) -> std::net::SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let at = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                let to = to.clone();
                let asked = asked.clone();
                std::thread::spawn(move || {
                    let mut d = FrameDecoder::new(true, true);
                    let mut buf = [0u8; 4096];
                    let mut hello = BytesMut::new();
                    ConnectPacket::client(ProtocolVersion::V7_3).encode(&mut hello);
                    if s.write_all(&hello).is_err() {
                        return;
                    }
                    loop {
                        let n = match s.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        d.feed(&buf[..n]);
                        while let Ok(Some(f)) = d.next_frame() {
                            let Incoming::Packet(p) = f else { continue };
                            let reply = match decode_any(&p.message) {
                                Ok(AnyMessage::OpenDatabaseCoordRequest(r)) => {
                                    asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                                    let info = ClientDBInfo {
                                        forward: Some(Bytes::from(to.clone())),
                                        ..Default::default()
                                    };
                                    (r.reply.token, encode_reply(&ErrorOr::Ok(info)))
                                }
                                Ok(AnyMessage::PingRequest(r)) => {
                                    (r.reply.token, encode_reply(&ErrorOr::Ok(Void {})))
                                }
                                _ => continue,
                            };
                            let mut out = BytesMut::new();
                            encode_packet(&mut out, reply.0, &reply.1, true);
                            if s.write_all(&out).is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        at
    }

    fn setup(name: &str) -> (TestCluster, std::path::PathBuf, ClusterFile) {
        let c = TestCluster::builder().description("fwd:test").start();
        let real = c.cluster_file_string();
        let path = naming(forwarder(real.clone()), name);
        (c, path, ClusterFile::parse(&real).unwrap())
    }

    /// A cluster file of its own naming the forwarder at `fwd` as the coordinator.
    fn naming(fwd: std::net::SocketAddr, name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "fdb-forward-{name}-{}-{}",
            std::process::id(),
            fwd.port()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("fdb.cluster");
        std::fs::write(&path, format!("# old coordinators\nfwd:test@{fwd}\n")).unwrap();
        path
    }

    /// Forwarded to a coordinator that is down: failed rounds follow, and the cluster file
    /// still holds the forwarder's string. The driver must not read that as a change and go
    /// back to the forwarder, which would forward it again, round after round (the CI flake
    /// of `a_coordinator_change_is_followed_and_the_cluster_file_rewritten`).
    #[test]
    fn mio_stays_with_a_forward_whose_coordinators_are_down() {
        let dead = TcpListener::bind("127.0.0.1:0").unwrap();
        let dead_addr = dead.local_addr().unwrap();
        drop(dead);
        let asked: std::sync::Arc<std::sync::atomic::AtomicUsize> = Default::default();
        let fwd = forwarder_counting(format!("fwd:test@{dead_addr}"), asked.clone());
        let path = naming(fwd, "down");
        let db = fdb_driver_mio::Database::open_file_with_seed(&path, 3).unwrap();
        // Three rounds at least (COORDINATOR_RECONNECTION_DELAY is 1 s).
        assert!(db
            .read_version_with(Priority::Default, Duration::from_millis(3500))
            .is_err());
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(
            db.cluster().unwrap().to_string(),
            format!("fwd:test@{dead_addr}")
        );
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    fn rewritten(path: &std::path::Path, want: &ClusterFile) -> bool {
        fdb_tests::testkit::eventually(Duration::from_secs(5), || {
            std::fs::read_to_string(path).ok() == Some(want.file_contents())
        })
    }

    #[test]
    fn mio_follows_a_forward_and_rewrites_the_cluster_file() {
        let (_c, path, real) = setup("mio");
        let db = fdb_driver_mio::Database::open_file_with_seed(&path, 1).unwrap();
        db.read_version_with(Priority::Default, Duration::from_secs(10))
            .unwrap();
        assert_eq!(&db.cluster().unwrap(), &real);
        assert!(rewritten(&path, &real));
        // The rewritten file opens the cluster directly.
        let again = fdb_driver_mio::Database::open_file_with_seed(&path, 2).unwrap();
        again
            .read_version_with(Priority::Default, Duration::from_secs(10))
            .unwrap();
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    #[test]
    fn tokio_follows_a_forward_and_rewrites_the_cluster_file() {
        let (_c, path, real) = setup("tokio");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let db = fdb_driver_tokio::Database::open_file_with_seed(&path, 1).unwrap();
            tokio::time::timeout(Duration::from_secs(10), db.read_version())
                .await
                .unwrap()
                .unwrap();
            assert_eq!(db.cluster().await.unwrap(), real);
        });
        assert!(rewritten(&path, &real));
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }
}

/// A locked database answers read versions with `locked`: transactions that are not
/// lock-aware fail with `database_locked` (`extractReadVersion`); lock-aware ones proceed,
/// and their commits say so.
#[test]
fn a_locked_database_refuses_transactions_that_are_not_lock_aware() {
    let mut h = harness("a:b@10.0.0.1:4500", 12);
    let _ = h.bootstrap("10.0.0.1:4500", &db_info(1, "10.0.0.9:4500", G1, C1));
    let plain = h.client.create_transaction(h.now());
    let aware = h.client.create_transaction(h.now());
    h.client
        .set_option(h.now(), aware, fdb_protocol::TransactionOption::LockAware)
        .unwrap();
    let r1 = h.client.tx_read_version(h.now(), plain);
    let r2 = h.client.tx_read_version(h.now(), aware);
    let pc = h.connect_to("10.0.0.9:4500");
    h.accept(pc);
    let locked = || {
        ErrorOr::Ok(GetReadVersionReply {
            version: 77,
            locked: true,
            ..Default::default()
        })
    };
    // Lock-aware or not, each flag set has its own batch (as libfdb_c has a batcher per
    // flag set): each goes out and is answered.
    let mut done = Vec::new();
    while done.len() < 2 {
        let s = h.take_requests();
        let grvs: Vec<_> = s.iter().filter(|s| s.dest == G1).collect();
        assert!(!grvs.is_empty(), "a read version request");
        for grv in grvs {
            h.reply(grv, locked());
        }
        done.extend(h.take_completions());
    }
    assert_eq!(done.len(), 2);
    let of = |call: Call<i64>| {
        let c = done
            .iter()
            .find(|c| c.request() == call.id())
            .expect("completed");
        call.take(c.clone()).map_err(|e| e.code())
    };
    assert_eq!(of(r1), Err(ErrorCode::DATABASE_LOCKED));
    assert_eq!(of(r2), Ok(77));
    h.client.set(aware, b"k", b"v").unwrap();
    let _commit = h.client.commit(h.now(), aware);
    let s = h.take_requests();
    let AnyMessage::CommitTransactionRequest(c) = &s.iter().find(|s| s.dest == C1).unwrap().msg
    else {
        panic!()
    };
    assert!(c.transaction.lock_aware);
    assert_eq!(c.flags & 1, 1, "FLAG_IS_LOCK_AWARE");
}
