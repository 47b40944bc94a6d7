//! `get_addresses_for_key` (`fdb_transaction_get_addresses_for_key`): on the test cluster the
//! answer is exactly the team its shard map names for the key, on both drivers, and follows a
//! shard move at once (libfdb_c reads the team as of the read version, never a cached one);
//! keys at or past `\xff\xff` have no team. On a real cluster (`FDB_CLUSTER_FILE`) the answer
//! equals libfdb_c's own, through the Python binding's `fdb.locality.get_addresses_for_key`
//! (needs `foundationdb==7.3.77` and libfdb_c on the library path; without them that part
//! prints a notice, unless `FDB_SHARED_DIR` is set, as in CI, where it is required).

use std::time::Duration;

use fdb_protocol::cluster_file::ClusterFile;
use fdb_tests::cluster::TestCluster;

/// What the test cluster says the team of `key` is, as addresses.
fn team(cluster: &TestCluster, key: &[u8]) -> Vec<String> {
    cluster
        .servers_of(key)
        .into_iter()
        .map(|i| {
            cluster
                .storage_interface(i)
                .get_value
                .endpoint
                .addresses
                .address
                .to_string()
        })
        .collect()
}

const KEYS: [&[u8]; 6] = [b"", b"a", b"h", b"q", b"zzz", b"\xff/keyServers/"];

#[test]
fn the_team_of_the_shard_map_on_both_drivers() {
    let cluster = TestCluster::builder().storage_servers(4).start();
    let cf = ClusterFile::parse(&cluster.cluster_file_string()).unwrap();
    let teams: Vec<Vec<String>> = KEYS.iter().map(|k| team(&cluster, k)).collect();
    assert!(
        teams.iter().any(|t| t != &teams[1]),
        "the test cluster's shards have different teams: {teams:?}"
    );

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let db = fdb_driver_tokio::Database::from_cluster_file(cf.clone(), 1).unwrap();
        let tx = db.create_transaction();
        for (k, want) in KEYS.iter().zip(&teams) {
            let got = tokio::time::timeout(Duration::from_secs(30), tx.get_addresses_for_key(k))
                .await
                .expect("answered")
                .expect("addresses");
            assert_eq!(&got, want, "tokio, key {k:?}");
        }
        for k in [&b"\xff\xff"[..], b"\xff\xff/status/json", b"\xff\xff\xff"] {
            let got = tx.get_addresses_for_key(k).await.unwrap();
            assert!(got.is_empty(), "no team past \\xff\\xff: {got:?}");
        }
    });

    let db = fdb_driver_mio::Database::from_cluster_file(cf, 2).unwrap();
    let tx = db.create_transaction();
    for (k, want) in KEYS.iter().zip(&teams) {
        assert_eq!(
            &tx.get_addresses_for_key(k).unwrap(),
            want,
            "mio, key {k:?}"
        );
    }
    // The transaction got its read version on the way, as libfdb_c's does.
    assert!(tx.get_read_version().unwrap() > 0);
}

#[test]
fn a_moved_shard_is_answered_with_its_new_team() {
    let cluster = TestCluster::builder().storage_servers(4).start();
    let cf = ClusterFile::parse(&cluster.cluster_file_string()).unwrap();
    let db = fdb_driver_mio::Database::from_cluster_file(cf, 3).unwrap();
    let before = db.create_transaction().get_addresses_for_key(b"h").unwrap();
    assert_eq!(before, team(&cluster, b"h"));
    // A read puts the shard in the location cache; then the shard moves elsewhere.
    db.run(|tx| tx.get(b"h")).unwrap();
    let from = cluster.servers_of(b"h");
    let to = (0..cluster.storage_server_count())
        .find(|i| !from.contains(i))
        .expect("a server outside the team");
    cluster.move_shard(b"h", to);
    let after = db.create_transaction().get_addresses_for_key(b"h").unwrap();
    assert_eq!(
        after,
        team(&cluster, b"h"),
        "the new team, not the cached one"
    );
    assert_ne!(after, before);
}

#[test]
fn a_cancelled_transaction_answers_nothing() {
    let cluster = TestCluster::start();
    let cf = ClusterFile::parse(&cluster.cluster_file_string()).unwrap();
    let db = fdb_driver_mio::Database::from_cluster_file(cf, 4).unwrap();
    let tx = db.create_transaction();
    tx.cancel();
    let err = tx.get_addresses_for_key(b"a").unwrap_err();
    assert_eq!(
        err.code(),
        Some(fdb_protocol::error::ErrorCode::TRANSACTION_CANCELLED)
    );
}

const PYTHON: &str = r#"
import sys
import fdb
fdb.api_version(730)
db = fdb.open(sys.argv[1])
tr = db.create_transaction()
for h in sys.argv[2:]:
    addrs = fdb.locality.get_addresses_for_key(tr, bytes.fromhex(h)).wait()
    print(" ".join(a.decode() for a in addrs))
"#;

#[test]
fn the_same_answer_as_libfdb_c_on_a_real_cluster() {
    let Some((path, cf)) = fdb_tests::dual::real_cluster_file() else {
        println!("addresses: FDB_CLUSTER_FILE not set; the libfdb_c comparison is skipped");
        return;
    };
    let keys: [&[u8]; 5] = [
        b"",
        b"a",
        b"m/some/key",
        b"\xff/conf/",
        b"\xff\xff/status/json",
    ];
    let hexes: Vec<String> = keys.iter().map(|k| fdb_tests::to_hex(k)).collect();
    let args = std::iter::once(path.into_os_string()).chain(hexes.into_iter().map(Into::into));
    let Some(out) = fdb_tests::python::libfdb_c_answers("addresses", PYTHON, args) else {
        return;
    };
    let theirs: Vec<Vec<String>> = out
        .lines()
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect();
    let db = fdb_driver_mio::Database::from_cluster_file(cf, 5).unwrap();
    let tx = db.create_transaction();
    let ours: Vec<Vec<String>> = keys
        .iter()
        .map(|k| tx.get_addresses_for_key(k).unwrap())
        .collect();
    assert_eq!(ours, theirs, "keys {keys:?}");
    assert!(!ours[0].is_empty() && ours[4].is_empty());
}
