//! `\xff\xff/management/auto_coordinators`, the coordinators fdbcli's `coordinators auto`
//! would set: read by this client and by libfdb_c (the Python binding) on a real cluster
//! (`FDB_CLUSTER_FILE`) and compared as sets of addresses (libfdb_c picks at random when the
//! current ones are not fine). On a cluster whose coordinators are fine, both show them.
//!
//! On the test cluster, which keeps no worker list, the current coordinator is no worker and
//! nothing can be chosen: the read fails with the retriable "Too few fdbserver machines"
//! message.

use fdb_driver_mio::{Database, Error};
use fdb_protocol::cluster_file::ClusterFile;
use fdb_tests::cluster::TestCluster;

const KEY: &[u8] = b"\xff\xff/management/auto_coordinators";

fn sorted_set(s: &str) -> String {
    let mut v: Vec<&str> = s.trim().split(',').filter(|a| !a.is_empty()).collect();
    v.sort_unstable();
    v.join(",")
}

fn read(db: &Database) -> Result<String, (Error, String)> {
    let tx = db.create_transaction();
    match tx.get(KEY) {
        Ok(v) => Ok(String::from_utf8_lossy(&v.unwrap_or_default()).into_owned()),
        Err(e) => {
            let msg = tx.get(b"\xff\xff/error_message").ok().flatten();
            Err((
                e,
                String::from_utf8_lossy(&msg.unwrap_or_default()).into_owned(),
            ))
        }
    }
}

const PYTHON: &str = r#"
import sys, fdb
fdb.api_version(730)
db = fdb.open(sys.argv[1])
tr = db.create_transaction()
print(tr[b"\xff\xff/management/auto_coordinators"].decode())
tr2 = db.create_transaction()
print(tr2[b"\xff\xff/configuration/coordinators/processes"].decode())
"#;

#[test]
fn the_same_set_as_libfdb_c_on_a_real_cluster() {
    let Some((path, _)) = fdb_tests::dual::real_cluster_file() else {
        println!("auto_coordinators: FDB_CLUSTER_FILE not set; the libfdb_c comparison is skipped");
        return;
    };
    let db = Database::open(Some(&path)).unwrap();
    let Some(out) =
        fdb_tests::python::libfdb_c_answers("auto_coordinators", PYTHON, [path.into_os_string()])
    else {
        return;
    };
    let mut lines = out.lines();
    let theirs = sorted_set(lines.next().unwrap());
    let current = sorted_set(lines.next().unwrap());
    let ours = sorted_set(&read(&db).unwrap());
    assert_eq!(ours, theirs);
    assert!(!ours.is_empty());
    // The cluster the comparison runs on has fine coordinators: both keep them.
    if theirs == current {
        assert_eq!(ours, current);
    }
}

#[test]
fn no_worker_list_leaves_nothing_to_choose_on_the_test_cluster() {
    let cluster = TestCluster::builder().storage_servers(1).start();
    let text = cluster.cluster_file_string();
    let db = Database::from_cluster_file(ClusterFile::parse(&text).unwrap(), 1).unwrap();
    let (e, msg) = read(&db).unwrap_err();
    assert_eq!(e.code().map(|c| c.0), Some(2117));
    assert_eq!(
        msg,
        r#"{"command":"auto_coordinators","message":"Too few fdbserver machines to provide coordination at the current redundancy level","retriable":true}"#
    );
}
