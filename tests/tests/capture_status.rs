//! `\xff\xff/status/json` against the real capture: the leader info a coordinator sends names
//! the cluster controller, whose `databaseStatus` stream is where libfdb_c sent its
//! `StatusRequest`; and the client core reproduces that exchange.

use fdb_protocol::messages::coordination::ClusterControllerClientInterface;
use fdb_protocol::messages::{decode_any, AnyMessage};
use fdb_tests::{captures_dir, load_capture, Dir};

#[test]
fn leader_info_names_the_status_endpoint() {
    let cap = load_capture(&captures_dir().join("status_json.frames.jsonl"));
    let leader = cap
        .packets(Dir::ServerToClient)
        .find_map(|f| match decode_any(&f.message()).unwrap() {
            AnyMessage::Leader(l) => l.into_result().ok().and_then(|e| e.0),
            _ => None,
        })
        .expect("a LeaderInfo");
    let (version, cc) =
        ClusterControllerClientInterface::from_serialized_info(&leader.serialized_info).unwrap();
    assert_eq!(version, 0x0FDB00B073000000);
    let status_to = cap
        .packets(Dir::ClientToServer)
        .find(|f| matches!(decode_any(&f.message()), Ok(AnyMessage::StatusRequest(_))))
        .expect("a StatusRequest")
        .token();
    assert_eq!(
        cc.client_interface.database_status.endpoint.token,
        status_to
    );
    assert_eq!(
        cc.client_interface
            .database_status
            .endpoint
            .addresses
            .address
            .port,
        4500
    );
}

/// The core's status read against the capture: the same GetLeader / ProtocolInfo / Status
/// requests as libfdb_c (to the same endpoints), and a document with the cluster
/// controller's status under `cluster` and the client's view under `client`.
#[test]
fn status_json_replays_against_the_capture() {
    let mut r = fdb_tests::replay::Replay::new("status_json");
    let tx = r.tx();
    let q = r
        .sim
        .client
        .get(r.sim.now(), tx, b"\xff\xff/status/json", false);
    let Some(doc) = r.wait(q).unwrap() else {
        panic!("a document")
    };
    let v: serde_json::Value = serde_json::from_slice(&doc).expect("valid JSON");
    let want = &fdb_tests::replay::result_json("status_json");
    let keys: Vec<String> = v["cluster"].as_object().unwrap().keys().cloned().collect();
    for k in want["cluster_keys"].as_array().unwrap() {
        assert!(
            keys.contains(&k.as_str().unwrap().to_string()),
            "cluster.{k}"
        );
    }
    let client = &v["client"];
    assert_eq!(client["coordinators"]["quorum_reachable"], true);
    let c0 = &client["coordinators"]["coordinators"][0];
    assert_eq!(c0["address"], "127.0.0.1:4500");
    assert_eq!(c0["reachable"], true);
    assert_eq!(c0["protocol"], "fdb00b073000000");
    assert_eq!(client["database_status"]["available"], true);
    assert_eq!(
        r.sent().iter().filter(|s| **s == "StatusRequest").count(),
        1
    );
    r.all_used(&["StatusRequest", "ProtocolInfoRequest"]);
}
