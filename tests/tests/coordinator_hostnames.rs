//! `\xff\xff/configuration/coordinators/processes` when the cluster file names a coordinator by
//! host name: libfdb_c shows the address it resolves to (`tryResolveHostnames`), marked
//! `(fromHostname)` as `NetworkAddress::toString` does, while `\xff\xff/connection_string`
//! keeps the name as written.
//!
//! On the test cluster this client alone; on a real cluster (`FDB_CLUSTER_FILE`) the same
//! cluster file with `localhost` in place of `127.0.0.1`, read by both clients, which must
//! answer alike.

use std::path::Path;

use fdb_driver_mio::Database;
use fdb_protocol::cluster_file::ClusterFile;
use fdb_tests::cluster::TestCluster;

const PROCESSES: &[u8] = b"\xff\xff/configuration/coordinators/processes";
const CONNECTION_STRING: &[u8] = b"\xff\xff/connection_string";

/// The two answers, one per line.
fn ours(db: &Database) -> String {
    let tx = db.create_transaction();
    let show =
        |k: &[u8]| String::from_utf8_lossy(&tx.get(k).unwrap().unwrap_or_default()).into_owned();
    format!("{}\n{}\n", show(PROCESSES), show(CONNECTION_STRING))
}

/// A directory of this test's own (left in the system temp dir; the files are tiny).
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("fdb-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `text` with every coordinator on 127.0.0.1 named `localhost` instead, written beside the
/// test's other files.
fn by_name(text: &str, dir: &Path) -> std::path::PathBuf {
    let path = dir.join("fdb.cluster");
    std::fs::write(&path, text.trim().replace("127.0.0.1:", "localhost:")).unwrap();
    path
}

#[test]
fn a_host_name_shows_resolved_on_the_test_cluster() {
    let cluster = TestCluster::start();
    let text = cluster.cluster_file_string();
    let path = by_name(&text, &scratch("hostnames-test-cluster"));
    let db = Database::open(Some(&path)).unwrap();
    let addr = cluster.coordinator_addr();
    let named = std::fs::read_to_string(&path).unwrap();
    assert!(named.contains("@localhost:"), "{named}");
    assert_eq!(ours(&db), format!("{addr}(fromHostname)\n{named}\n"));
    assert_eq!(ClusterFile::parse(&named).unwrap().coordinators.len(), 1);
}

const PYTHON: &str = r#"
import sys, fdb
fdb.api_version(730)
db = fdb.open(sys.argv[1])
tr = db.create_transaction()
print(tr[b"\xff\xff/configuration/coordinators/processes"].decode())
print(tr[b"\xff\xff/connection_string"].decode())
print(tr[b"\xff\xff/management/auto_coordinators"].decode())
"#;

#[test]
fn the_same_as_libfdb_c_on_a_real_cluster() {
    let Some((real, _)) = fdb_tests::dual::real_cluster_file() else {
        println!(
            "coordinator_hostnames: FDB_CLUSTER_FILE not set; the libfdb_c comparison is skipped"
        );
        return;
    };
    let text = std::fs::read_to_string(&real).unwrap();
    if !text.contains("127.0.0.1:") {
        println!(
            "coordinator_hostnames: the real cluster's coordinators are not on 127.0.0.1; skipped"
        );
        return;
    }
    let path = by_name(&text, &scratch("hostnames-real"));
    let db = Database::open(Some(&path)).unwrap();
    // The coordinators `coordinators auto` would keep show resolved, and not marked.
    let tx = db.create_transaction();
    let auto = tx
        .get(b"\xff\xff/management/auto_coordinators")
        .unwrap()
        .unwrap_or_default();
    let mine = format!("{}{}\n", ours(&db), String::from_utf8_lossy(&auto));
    let Some(theirs) = fdb_tests::python::libfdb_c_answers(
        "coordinator_hostnames",
        PYTHON,
        [path.into_os_string()],
    ) else {
        return;
    };
    assert_eq!(mine, theirs);
    assert!(mine.starts_with("127.0.0.1:"), "{mine}");
}
