//! Conformance against real libfdb_c 7.4.6 <-> fdbserver 7.4.6 traffic
//! (`tests/data/fdb-captures-7.4`, see its README): every packet decodes; every client message
//! re-encoded in 7.4's shape is byte for byte what libfdb_c 7.4.6 sent; every server message
//! round-trips; and the client core, speaking 7.4, replays the scenarios request for request.

use bytes::Bytes;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::framing::ProtocolVersion;
use fdb_protocol::messages::{decode_any, AnyMessage};
use fdb_protocol::version::Protocol;
use fdb_tests::replay::Replay;
use fdb_tests::to_hex as hex;
use fdb_tests::{captures_v74_dir, load_captures_in, Dir};

const TXN_REQUESTS: &[&str] = &[
    "GetReadVersionRequest",
    "GetKeyServerLocationsRequest",
    "GetValueRequest",
    "GetKeyValuesRequest",
    "CommitTransactionRequest",
    "WatchValueRequest",
];

fn result(name: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(captures_v74_dir().join(format!("{name}.result.json")))
        .expect("result.json");
    serde_json::from_str::<serde_json::Value>(&text).expect("JSON")["result"].clone()
}

#[test]
fn every_7_4_packet_decodes_and_reencodes() {
    let caps = load_captures_in(&captures_v74_dir());
    assert!(caps.len() >= 10);
    let mut failures = Vec::new();
    let mut packets = 0;
    for cap in &caps {
        for f in &cap.frames {
            if f.is_connect {
                let v = ProtocolVersion(u64::from_le_bytes(
                    f.wire_bytes()[4..12].try_into().unwrap(),
                ));
                assert_eq!(Protocol::of(v), Some(Protocol::V7_4), "{}", cap.name);
                continue;
            }
            packets += 1;
            let msg = f.message();
            let m = match decode_any(&msg) {
                Ok(m) => m,
                Err(e) => {
                    failures.push(format!("{} {:?} seq {}: {e}", cap.name, f.dir, f.seq));
                    continue;
                }
            };
            match f.dir {
                Dir::ClientToServer => {
                    let again = m.encode_for(Protocol::V7_4);
                    if again != msg[..] {
                        failures.push(format!(
                            "{} c2s seq {} {}: re-encoding differs\n ours {}\n real {}",
                            cap.name,
                            f.seq,
                            m.name(),
                            hex(&again),
                            hex(&msg)
                        ));
                    }
                }
                Dir::ServerToClient => {
                    let back = decode_any(&Bytes::from(m.encode())).expect("our encoding decodes");
                    if back != m {
                        failures.push(format!("{} s2c seq {}: round trip", cap.name, f.seq));
                    }
                }
            }
        }
    }
    assert!(packets > 100, "{packets} packets");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// 7.4's `StatusRequest` carries `statusField`; 7.3's shape is 16 bytes shorter. The client
/// announces the 7.4 protocol and release to the coordinators.
#[test]
fn the_messages_that_differ_in_7_4() {
    let cap = fdb_tests::load_capture(&captures_v74_dir().join("status_json.frames.jsonl"));
    let (frame, m) = cap
        .packets(Dir::ClientToServer)
        .find_map(|f| match decode_any(&f.message()) {
            Ok(AnyMessage::StatusRequest(r)) => Some((f.clone(), r)),
            _ => None,
        })
        .expect("a StatusRequest");
    assert!(m.status_field.is_empty());
    assert_eq!(m.encode_for(Protocol::V7_4), frame.message()[..]);
    assert_eq!(frame.message().len(), 88 - 16);
    assert_eq!(
        m.encode_for(Protocol::V7_3).len(),
        frame.message().len() - 16
    );

    let open = cap
        .packets(Dir::ClientToServer)
        .find_map(|f| match decode_any(&f.message()) {
            Ok(AnyMessage::OpenDatabaseCoordRequest(r)) => Some(r),
            _ => None,
        })
        .expect("an OpenDatabaseCoordRequest");
    assert_eq!(
        &open.supported_versions[0].protocol_version[..],
        b"fdb00b074000000"
    );
    assert_eq!(&open.supported_versions[0].client_version[..], b"7.4.6");
}

#[test]
fn grv_replays_in_7_4() {
    let mut r = Replay::v74("grv");
    let q = r
        .sim
        .client
        .get_read_version(r.sim.now(), fdb_protocol::Priority::Default);
    let v = r.wait(q).unwrap();
    assert_eq!(v, result("grv")["read_version"].as_i64().unwrap());
    r.all_used(&["OpenDatabaseCoordRequest", "GetReadVersionRequest"]);
}

#[test]
fn get_replays_in_7_4() {
    let mut r = Replay::v74("get");
    let tx = r.tx();
    let v = r.get(tx, b"cap/get/exists", false).unwrap().unwrap();
    assert_eq!(v.len(), 100);
    assert_eq!(r.get(tx, b"cap/get/missing", false).unwrap(), None);
    r.all_used(TXN_REQUESTS);
}

#[test]
fn mutations_replay_in_7_4() {
    let mut r = Replay::v74("mutations");
    let (v, stamp) = r.commit_captured_mutations();
    let want = result("mutations");
    assert_eq!(v, want["committed_version"].as_i64().unwrap());
    assert_eq!(hex(&stamp), want["versionstamp"].as_str().unwrap());
    r.all_used(TXN_REQUESTS);
}

#[test]
fn conflict_replays_in_7_4() {
    let mut r = Replay::v74("conflict");
    let a = r.tx();
    let want = result("conflict");
    let read = r.get(a, b"cap/conflict/k", false).unwrap().unwrap();
    assert_eq!(read, want["a_read"].as_str().unwrap().as_bytes());
    let b = r.tx();
    r.sim
        .client
        .set(b, b"cap/conflict/k", b"written-by-B")
        .unwrap();
    assert_eq!(r.commit(b).unwrap(), want["b_committed"].as_i64().unwrap());
    r.sim
        .client
        .set(a, b"cap/conflict/k", b"written-by-A")
        .unwrap();
    let err = r.commit(a).unwrap_err();
    assert_eq!(
        err.code(),
        ErrorCode(want["a_error_code"].as_u64().unwrap() as u16)
    );
    r.all_used(TXN_REQUESTS);
}

/// The status read speaks 7.4 too: libfdb_c 7.4.6's GetLeader / ProtocolInfo / Status requests,
/// the `StatusRequest` with its `statusField`.
#[test]
fn status_json_replays_in_7_4() {
    let mut r = Replay::v74("status_json");
    let tx = r.tx();
    let q = r
        .sim
        .client
        .get(r.sim.now(), tx, b"\xff\xff/status/json", false);
    let doc = r.wait(q).unwrap().expect("a document");
    let v: serde_json::Value = serde_json::from_slice(&doc).expect("valid JSON");
    assert_eq!(v["cluster"]["protocol_version"], "fdb00b074000000");
    let c0 = &v["client"]["coordinators"]["coordinators"][0];
    assert_eq!(c0["protocol"], "fdb00b074000000");
    r.all_used(&["StatusRequest", "ProtocolInfoRequest"]);
}
