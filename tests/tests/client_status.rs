//! `get_client_status` (`fdb_database_get_client_status`): the JSON document libfdb_c builds
//! (`DatabaseContext::getClientStatus`). On the test cluster its values are checked against
//! the cluster itself (its id, coordinators, proxies, the storage servers a read met, the
//! connections); on a real cluster (`FDB_CLUSTER_FILE`) it is compared with libfdb_c's own
//! document, through the Python binding, after the same read: the same keys with the same
//! JSON types everywhere, and the same values where both describe the same cluster.

use std::time::Duration;

use fdb_driver_tokio::Database;
use fdb_protocol::cluster_file::ClusterFile;
use fdb_tests::cluster::TestCluster;
use fdb_tests::python::libfdb_c_answers;
use serde_json::Value;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

async fn status_after_a_read(db: &Database, key: &[u8]) -> Value {
    let tx = db.create_transaction();
    tokio::time::timeout(Duration::from_secs(30), tx.get(key))
        .await
        .expect("the read is answered")
        .expect("the read succeeds");
    let s = db.get_client_status().await.expect("a status");
    serde_json::from_str(&s.to_json()).expect("the document is JSON")
}

#[test]
fn the_status_describes_the_test_cluster() {
    let cluster = TestCluster::builder().storage_servers(2).start();
    let cf = ClusterFile::parse(&cluster.cluster_file_string()).unwrap();
    rt().block_on(async {
        let db = Database::from_cluster_file(cf.clone(), 5).unwrap();
        let before = db.get_client_status().await.unwrap();
        let v = status_after_a_read(&db, b"a").await;
        assert_eq!(v["Healthy"], true, "{v}");
        assert!(!before.healthy || before.commit_proxies.len() + before.grv_proxies.len() > 0);
        let id = db
            .create_transaction()
            .get(fdb_protocol::CLUSTER_ID_KEY)
            .await
            .unwrap()
            .expect("a cluster id");
        assert_eq!(v["ClusterID"], String::from_utf8(id.to_vec()).unwrap());
        let coordinators: Vec<String> = cf.coordinators.iter().map(|c| c.to_string()).collect();
        assert_eq!(v["Coordinators"], serde_json::json!(coordinators));
        assert_eq!(v["CurrentCoordinator"], coordinators[0]);
        let info = cluster.client_db_info();
        let grv: Vec<String> = info
            .grv_proxies
            .iter()
            .map(|p| p.get_consistent_read_version.endpoint.address().to_string())
            .collect();
        assert_eq!(v["GrvProxies"], serde_json::json!(grv));
        // The storage servers the read met: the team of its shard, by id.
        let mut team: Vec<(String, String)> = cluster
            .servers_of(b"a")
            .into_iter()
            .map(|i| {
                let s = cluster.storage_interface(i);
                let addr = s.get_value.endpoint.address().to_string();
                (s.unique_id.to_string(), addr)
            })
            .collect();
        team.sort();
        let got: Vec<(String, String)> = v["StorageServers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let f = |k: &str| s[k].as_str().unwrap().to_owned();
                (f("SSID"), f("Address"))
            })
            .collect();
        assert_eq!(got, team);
        // Every address once, connected, with traffic both ways and the server's protocol.
        let conns = v["Connections"].as_array().unwrap();
        assert!(!conns.is_empty());
        for c in conns {
            assert_eq!(c["Status"], "connected", "{c}");
            assert!(c["BytesSent"].as_u64().unwrap() > 0, "{c}");
            assert!(c["BytesReceived"].as_u64().unwrap() > 0, "{c}");
            assert_eq!(c["ProtocolVersion"], "fdb00b073000000", "{c}");
            assert_eq!(c["ConnectFailedCount"], 0);
        }
        assert_eq!(v["NumConnectionsFailed"], 0);

        // A coordinator that is down: its connection fails and the report is not healthy.
        let bad = ClusterFile::parse("down:down@127.0.0.1:1").unwrap();
        let db = Database::from_cluster_file(bad, 6).unwrap();
        let mut v = Value::Null;
        for _ in 0..100 {
            v = serde_json::from_str(&db.get_client_status().await.unwrap().to_json()).unwrap();
            if v["NumConnectionsFailed"] != 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(v["Healthy"], false, "{v}");
        assert_eq!(v["NumConnectionsFailed"], 1, "{v}");
        assert_eq!(v["Connections"][0]["Status"], "failed", "{v}");
        assert!(v["Connections"][0]["ConnectFailedCount"].as_u64().unwrap() >= 1);
        assert_eq!(v["ClusterID"], "0".repeat(32));
    });
}

/// `value`'s shape: each object's keys with the shapes of their values, an array's first
/// element, JSON types (an integer and a real are different types, as libfdb_c writes them).
fn shape(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), shape(v))).collect()),
        Value::Array(a) => Value::Array(a.iter().take(1).map(shape).collect()),
        Value::Number(n) if n.is_f64() => "real".into(),
        Value::Number(_) => "integer".into(),
        Value::String(_) => "string".into(),
        Value::Bool(_) => "bool".into(),
        Value::Null => "null".into(),
    }
}

const PYTHON: &str = r#"
import fdb, sys, time
fdb.api_version(730)
db = fdb.open(sys.argv[1])
tr = db.create_transaction()
tr.get(bytes.fromhex(sys.argv[2])).wait()
print(db.get_client_status().wait().decode())
"#;

#[test]
fn the_status_has_libfdb_c_shape_on_a_real_cluster() {
    let Some((path, _)) = fdb_tests::dual::real_cluster_file() else {
        eprintln!("FDB_CLUSTER_FILE not set: skipped");
        return;
    };
    let key = b"client_status/k";
    let ours = rt().block_on(async {
        let db = Database::open(Some(&path)).expect("open the real cluster");
        status_after_a_read(&db, key).await
    });
    let Some(theirs) = libfdb_c_answers(
        "client_status",
        PYTHON,
        [path.into_os_string(), fdb_tests::to_hex(key).into()],
    ) else {
        return;
    };
    let theirs: Value = serde_json::from_str(theirs.trim()).expect("libfdb_c's JSON");
    assert_eq!(
        shape(&ours),
        shape(&theirs),
        "ours: {ours}\nlibfdb_c: {theirs}"
    );
    for k in [
        "ClusterID",
        "Coordinators",
        "CurrentCoordinator",
        "GrvProxies",
        "CommitProxies",
        "StorageServers",
        "Healthy",
        "NumConnectionsFailed",
    ] {
        assert_eq!(ours[k], theirs[k], "{k}");
    }
    let conns = |v: &Value| -> Vec<(Value, Value)> {
        v["Connections"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["Address"].clone(), c["Status"].clone()))
            .collect()
    };
    assert_eq!(conns(&ours), conns(&theirs));
}
