//! The special keys filled from the cluster, replayed against a capture of libfdb_c 7.3.77
//! reading them from a real single-process fdbserver 7.3.77 (`cluster_special_keys`:
//! `\xff\xff/cluster_id`, then the whole of `\xff\xff/metrics/data_distribution_stats/`,
//! `\xff\xff/metrics/health/` and `\xff\xff/worker_interfaces/` in one transaction). Every
//! request the core sends must be libfdb_c's, field for field and to the same endpoint
//! (`GetDDMetricsRequest` to the commit proxy's stream 9 with keys `["", "\xff\xff")` and
//! shard limit 1,000,000; a detailed `GetHealthMetricsRequest` to the GRV proxy's stream 2;
//! `GetLeaderRequest`, then `GetClientWorkersRequest` to the cluster controller's stream 4);
//! and the rows built from the captured replies must be byte for byte the ones libfdb_c gave.

use fdb_protocol::{KeySelector, RangeOptions};
use fdb_tests::replay::{result_json, Replay};
use fdb_tests::to_hex as hex;

const CAPTURE: &str = "cluster_special_keys";
/// The capture's cluster: one process, coordinator and every role.
const CLUSTER: &str = "local:888f726af1413dd4@127.0.0.1:60109";

fn rows(r: &mut Replay, begin: &[u8], end: &[u8]) -> serde_json::Value {
    let tx = r.tx();
    let now = r.sim.now();
    let call = r.sim.client.get_range(
        now,
        tx,
        KeySelector::first_greater_or_equal(begin),
        KeySelector::first_greater_or_equal(end),
        RangeOptions::default(),
        false,
    );
    let got = r.wait(call).expect("rows");
    assert!(!got.more);
    serde_json::Value::Array(
        got.rows
            .iter()
            .map(|kv| serde_json::json!([hex(&kv.key), hex(&kv.value)]))
            .collect(),
    )
}

#[test]
fn cluster_special_keys_replay_against_the_capture() {
    let want = &result_json(CAPTURE);
    let mut r = Replay::with_cluster(CAPTURE, CLUSTER);
    let tx = r.tx();
    let now = r.sim.now();
    let call = r.sim.client.get(now, tx, b"\xff\xff/cluster_id", false);
    let id = r.wait(call).expect("a read").expect("a value");
    assert_eq!(
        std::str::from_utf8(&id).unwrap(),
        want["cluster_id"].as_str().unwrap()
    );
    let dd = rows(
        &mut r,
        b"\xff\xff/metrics/data_distribution_stats/",
        b"\xff\xff/metrics/data_distribution_stats0",
    );
    assert_eq!(dd, want["dd"]);
    let health = rows(
        &mut r,
        b"\xff\xff/metrics/health/",
        b"\xff\xff/metrics/health0",
    );
    assert_eq!(health, want["health"]);
    assert!(
        health.as_array().unwrap().len() >= 3,
        "aggregate, log and storage rows"
    );
    let workers = rows(
        &mut r,
        b"\xff\xff/worker_interfaces/",
        b"\xff\xff/worker_interfaces0",
    );
    assert_eq!(workers, want["workers"]);
    // libfdb_c's `monitorLeader` also sent a second `GetLeaderRequest` with the leader it
    // had learnt (a long poll for a change, never answered and dropped with the read); this
    // client asks the coordinators once per read.
    r.all_used(&[
        "GetDDMetricsRequest",
        "GetHealthMetricsRequest",
        "GetClientWorkersRequest",
    ]);
}
