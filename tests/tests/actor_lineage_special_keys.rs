//! `\xff\xff/actor_lineage/`: the reads libfdb_c 7.3.77 refuses for their keys (no index or
//! host, an unknown index, a field that does not parse), with `\xff\xff/error_message`; and
//! `\xff\xff/management/profiling/`, which libfdb_c registers below API version 720 only:
//! at 730 a read finds no rows and a write no module.
//!
//! The same script runs against our client and libfdb_c (through the Python binding) on a
//! real cluster (`FDB_CLUSTER_FILE`), and on the test cluster against libfdb_c's recorded
//! answers. Well-formed lineage reads are left out: libfdb_c asks the named process, so its
//! answer depends on what listens there.

use fdb_driver_mio::{Database, Transaction};
use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::TransactionOption;
use fdb_tests::cluster::TestCluster;

const LINEAGE: &str = "\\xff\\xff/actor_lineage/";

/// The reads: `[begin, end)` after the module's prefix; `get` for a point read of `begin`.
const READS: &[(&str, &str)] = &[
    ("state/", "state0"),
    ("", "state/x"),
    ("other/1.2.3.4:5", "other/1.2.3.4:5/x"),
    ("time/1.2.3.4:5", "time/1.2.3.4:5/1"),
    ("state/1.2.3.4:5/DISK", "state/1.2.3.4:5/running"),
    ("state/1.2.3.4:5/disk/bad", "state/1.2.3.4:5/running"),
    (
        "state/1.2.3.4:5/disk/2024-01-02T03:04:05+0000/x",
        "state/1.2.3.4:5/running",
    ),
    ("state//x", "state/1.2.3.4:5/running"),
    ("state/1.2.3.4", "state/1.2.3.4:5/running"),
    ("state/nonsense", "state/nonsense/running"),
    ("state/1.2.3.4:5", "get"),
    ("state/zzz", "state/1.2.3.4:5/running"),
];

fn key(s: &str) -> Vec<u8> {
    [b"\xff\xff/actor_lineage/".as_ref(), s.as_bytes()].concat()
}

fn answer(tx: &Transaction, r: Result<String, fdb_driver_mio::Error>) -> String {
    match r {
        Ok(s) => s,
        Err(e) => {
            let msg = match tx.get(b"\xff\xff/error_message") {
                Ok(Some(v)) => String::from_utf8_lossy(&v).into_owned(),
                Ok(None) => "-".into(),
                Err(e) => format!("E{}", e.code().map_or(0, |c| c.0)),
            };
            format!("E{} {msg}", e.code().map_or(0, |c| c.0))
        }
    }
}

fn our_answers(db: &Database) -> Vec<String> {
    let mut out = Vec::new();
    for (b, e) in READS {
        let tx = db.create_transaction();
        let r = if *e == "get" {
            tx.get(key(b)).map(|v| format!("{v:?}"))
        } else {
            tx.get_range(key(b), key(e), 0)
                .map(|rows| format!("{} row(s)", rows.len()))
        };
        out.push(answer(&tx, r));
    }
    let tx = db.create_transaction();
    let r = tx
        .get_range(
            b"\xff\xff/management/profiling/",
            b"\xff\xff/management/profiling0",
            0,
        )
        .map(|rows| format!("{} row(s)", rows.len()));
    out.push(answer(&tx, r));
    let tx = db.create_transaction();
    tx.set_option(TransactionOption::SpecialKeySpaceEnableWrites)
        .unwrap();
    tx.set(
        b"\xff\xff/management/profiling/client_txn_sample_rate",
        b"0.5",
    );
    let r = tx.commit().map(|_| "committed".to_string());
    out.push(answer(&tx, r));
    out
}

fn python() -> String {
    let reads: Vec<String> = READS
        .iter()
        .map(|(b, e)| format!("({b:?}, {e:?})"))
        .collect();
    format!(
        r#"
import sys
import fdb
fdb.api_version(730)
db = fdb.open(sys.argv[1])
A = b"{LINEAGE}"
def answer(tr, f):
    try:
        return f()
    except fdb.FDBError as e:
        try:
            v = tr.get(b"\xff\xff/error_message").wait()
            msg = "-" if not v.present() else bytes(v).decode()
        except fdb.FDBError as e2:
            msg = "E%d" % e2.code
        return "E%d %s" % (e.code, msg)
out = []
for b, e in [{reads}]:
    tr = db.create_transaction()
    if e == "get":
        out.append(answer(tr, lambda: repr(tr.get(A + b.encode()).wait())))
    else:
        out.append(answer(tr, lambda: "%d row(s)" % len(list(tr.get_range(A + b.encode(), A + e.encode())))))
tr = db.create_transaction()
out.append(answer(tr, lambda: "%d row(s)" % len(list(tr.get_range(b"\xff\xff/management/profiling/", b"\xff\xff/management/profiling0")))))
tr = db.create_transaction()
tr.options.set_special_key_space_enable_writes()
tr[b"\xff\xff/management/profiling/client_txn_sample_rate"] = b"0.5"
def commit():
    tr.commit().wait()
    return "committed"
out.append(answer(tr, commit))
for line in out:
    print(line)
"#,
        reads = reads.join(", ")
    )
}

const PARSE: &str =
    r#"E2117 {"command":"read actor_lineage","message":"failed to parse key","retriable":false}"#;

/// libfdb_c 7.3.77's answers.
const LIBFDB_C: &[&str] = &[
    r#"E2117 {"command":"read actor_lineage","message":"missing required parameters (index, host)","retriable":false}"#,
    r#"E2117 {"command":"read actor_lineage","message":"missing required parameters (index, host)","retriable":false}"#,
    r#"E2117 {"command":"read actor_lineage","message":"invalid index in actor_lineage","retriable":false}"#,
    PARSE,
    PARSE,
    PARSE,
    PARSE,
    PARSE,
    PARSE,
    PARSE,
    PARSE,
    "0 row(s)",
    "0 row(s)",
    "E2115 E2115",
];

#[test]
fn the_same_answers_as_libfdb_c_on_the_test_cluster() {
    let cluster = TestCluster::start();
    let text = cluster.cluster_file_string();
    let db = Database::from_cluster_file(ClusterFile::parse(&text).unwrap(), 1).unwrap();
    let ours = our_answers(&db);
    for (i, (o, t)) in ours.iter().zip(LIBFDB_C).enumerate() {
        assert_eq!(o, t, "answer {i}");
    }
    assert_eq!(ours.len(), LIBFDB_C.len());
}

#[test]
fn the_same_answers_as_libfdb_c_on_a_real_cluster() {
    let Some((path, _)) = fdb_tests::dual::real_cluster_file() else {
        println!("actor_lineage_special_keys: FDB_CLUSTER_FILE not set; skipped");
        return;
    };
    let args = [path.clone().into_os_string()];
    let Some(out) =
        fdb_tests::python::libfdb_c_answers("actor_lineage_special_keys", &python(), args)
    else {
        return;
    };
    let theirs: Vec<&str> = out.lines().collect();
    assert_eq!(theirs, LIBFDB_C, "libfdb_c answers as recorded");
    let db = Database::open(Some(&path)).unwrap();
    let ours = our_answers(&db);
    for (i, (o, t)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(o, t, "answer {i}");
    }
    assert_eq!(ours.len(), theirs.len());
}
