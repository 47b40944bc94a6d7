//! `\xff\xff/global_config/`: writes with one client, reads with both.
//!
//! On a real cluster (`FDB_CLUSTER_FILE`): libfdb_c 7.3.77 (through the Python binding)
//! writes values of every type the view keeps (and one raw value it leaves out), then both
//! clients wait until their view shows them and must show the same rows; then our client
//! sets and clears some, and again both must show the same rows, and the system keys our
//! commit wrote (`\xff/globalConfig/k/`, the history trimmed to three entries) must be as
//! libfdb_c's commits leave them. A view only changes when the cluster controller sends the
//! history out, so each side reads until the rows it waits for are there (bounded).
//!
//! On the test cluster: the module reads empty at first; a write commits into the system keys;
//! a client opened afterwards reads it from the GRV proxy's refresh, and a client whose view
//! started before it (and every later set and clear) sees it through the history the test
//! cluster's controller sends out in `ClientDBInfo`, as fdbserver's does.

use std::time::{Duration, Instant};

use fdb_driver_mio::{Database, KeyValue};
use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::{tuple, TransactionOption, GLOBAL_CONFIG_MODULE};
use fdb_tests::cluster::TestCluster;
use fdb_tests::to_hex as hex;

fn lines(rows: &[KeyValue]) -> String {
    rows.iter()
        .map(|kv| format!("{}={}", hex(&kv.key), hex(&kv.value)))
        .collect::<Vec<_>>()
        .join(",")
}

/// The module's rows under `p` (names of this run), read until `done` says they are there.
fn read_until(db: &Database, p: &[u8], done: impl Fn(&[KeyValue]) -> bool) -> Vec<KeyValue> {
    let begin = [GLOBAL_CONFIG_MODULE.0, p].concat();
    let end = [&begin[..], b"\xff"].concat();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let tx = db.create_transaction();
        let rows = tx.get_range(&begin, &end, 0).unwrap();
        if done(&rows) || Instant::now() > deadline {
            return rows;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn has(rows: &[KeyValue], p: &[u8], name: &str) -> bool {
    let key = [GLOBAL_CONFIG_MODULE.0, p, name.as_bytes()].concat();
    rows.iter().any(|kv| kv.key.as_ref() == key.as_slice())
}

#[test]
fn the_module_on_the_test_cluster() {
    let cluster = TestCluster::start();
    let text = cluster.cluster_file_string();
    let db = Database::from_cluster_file(ClusterFile::parse(&text).unwrap(), 1).unwrap();
    let tx = db.create_transaction();
    let rows = tx
        .get_range(GLOBAL_CONFIG_MODULE.0, GLOBAL_CONFIG_MODULE.1, 0)
        .unwrap();
    assert!(rows.is_empty(), "{rows:?}");
    let tx = db.create_transaction();
    tx.set_option(TransactionOption::SpecialKeySpaceEnableWrites)
        .unwrap();
    tx.set(
        [GLOBAL_CONFIG_MODULE.0, b"x"].concat(),
        tuple::pack(&("v",)),
    );
    tx.commit().unwrap();
    let tx = db.create_transaction();
    tx.set_option(TransactionOption::ReadSystemKeys).unwrap();
    let v = tx.get(b"\xff/globalConfig/k/x").unwrap();
    assert_eq!(v.as_deref(), Some(&tuple::pack(&("v",))[..]));
    assert!(tx.get(b"\xff/globalConfig/v").unwrap().is_some());
    // A client that opens the database afterwards starts its view from the GRV proxy's
    // refresh, which holds what was written.
    let later = Database::from_cluster_file(ClusterFile::parse(&text).unwrap(), 1).unwrap();
    let rows = later
        .create_transaction()
        .get_range(GLOBAL_CONFIG_MODULE.0, GLOBAL_CONFIG_MODULE.1, 0)
        .unwrap();
    assert_eq!(
        lines(&rows),
        format!(
            "{}={}",
            hex(&[GLOBAL_CONFIG_MODULE.0, b"x"].concat()),
            hex(b"v")
        )
    );
    // The first client's view started before the write: it follows through the history.
    let x_row = lines(&rows);
    let rows = read_until(&db, b"", |rows| has(rows, b"", "x"));
    assert_eq!(lines(&rows), x_row);
    // A set and a clear by the later client reach the first one the same way.
    let tx = later.create_transaction();
    tx.set_option(TransactionOption::SpecialKeySpaceEnableWrites)
        .unwrap();
    tx.set([GLOBAL_CONFIG_MODULE.0, b"y"].concat(), tuple::pack(&(7,)));
    tx.clear([GLOBAL_CONFIG_MODULE.0, b"x"].concat());
    tx.commit().unwrap();
    let rows = read_until(&db, b"", |rows| has(rows, b"", "y") && !has(rows, b"", "x"));
    assert_eq!(
        lines(&rows),
        format!(
            "{}={}",
            hex(&[GLOBAL_CONFIG_MODULE.0, b"y"].concat()),
            hex(b"7")
        )
    );
}

const PYTHON: &str = r#"
import sys, time
import fdb
fdb.api_version(730)
db = fdb.open(sys.argv[1])
phase = sys.argv[2]
p = bytes.fromhex(sys.argv[3])
M = b"\xff\xff/global_config/"
def rows():
    tr = db.create_transaction()
    return list(tr.get_range(M + p, M + p + b"\xff"))
def has(rs, name):
    return any(kv.key == M + p + name for kv in rs)
def wait(done):
    deadline = time.time() + 60
    while True:
        rs = rows()
        if done(rs) or time.time() > deadline:
            return rs
        time.sleep(0.1)
def show(rs):
    print(",".join(kv.key.hex() + "=" + kv.value.hex() for kv in rs))
if phase == "write":
    tr = db.create_transaction()
    tr.options.set_special_key_space_enable_writes()
    tr[M + p + b"a"] = fdb.tuple.pack(("text",))
    tr[M + p + b"b"] = fdb.tuple.pack((-42,))
    tr[M + p + b"c"] = fdb.tuple.pack((0.1,))
    tr[M + p + b"d"] = fdb.tuple.pack((True,))
    tr[M + p + b"e"] = b"raw"
    tr[M + p + b"f"] = fdb.tuple.pack((fdb.tuple.SingleFloat(1.25),))
    tr[M + p + b"g"] = fdb.tuple.pack((False, 1))
    tr.commit().wait()
    show(wait(lambda rs: has(rs, b"a")))
else:
    show(wait(lambda rs: has(rs, b"h") and not has(rs, b"b")))
    tr = db.create_transaction()
    tr.options.set_read_system_keys()
    print(",".join(kv.key.hex() + "=" + kv.value.hex() for kv in tr.get_range(b"\xff/globalConfig/k/" + p, b"\xff/globalConfig/k/" + p + b"\xff")))
    print(len(list(tr.get_range(b"\xff/globalConfig/h/", b"\xff/globalConfig/h0"))))
"#;

#[test]
fn written_by_one_client_read_by_both_on_a_real_cluster() {
    let Some((path, _)) = fdb_tests::dual::real_cluster_file() else {
        println!("global_config_special_keys: FDB_CLUSTER_FILE not set; skipped");
        return;
    };
    let p = fdb_tests::dual::random_prefix("rust-fdb-gc");
    let run = |phase: &str| {
        let args = [path.clone().into_os_string(), phase.into(), hex(&p).into()];
        fdb_tests::python::libfdb_c_answers("global_config_special_keys", PYTHON, args)
    };
    let Some(theirs) = run("write") else {
        return;
    };
    let db = Database::open(Some(&path)).unwrap();
    let ours = read_until(&db, &p, |rows| has(rows, &p, "a"));
    assert_eq!(
        lines(&ours),
        theirs.trim(),
        "the view after libfdb_c's write"
    );
    let shown: Vec<(String, String)> = ours
        .iter()
        .map(|kv| {
            let name = String::from_utf8_lossy(&kv.key[GLOBAL_CONFIG_MODULE.0.len() + p.len()..]);
            (
                name.into_owned(),
                String::from_utf8_lossy(&kv.value).into_owned(),
            )
        })
        .collect();
    let expected = [
        ("a", "text"),
        ("b", "-42"),
        ("c", "0.100000"),
        ("d", "1"),
        ("f", "1.250000"),
        ("g", "0"),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(
        shown, expected,
        "every type as text, the raw value left out"
    );

    let tx = db.create_transaction();
    tx.set_option(TransactionOption::SpecialKeySpaceEnableWrites)
        .unwrap();
    let k = |name: &str| [GLOBAL_CONFIG_MODULE.0, &p, name.as_bytes()].concat();
    tx.set(k("h"), tuple::pack(&("ours",)));
    tx.clear(k("b"));
    tx.clear_range(k("c"), k("d"));
    tx.commit().unwrap();
    let Some(theirs) = run("read") else {
        return;
    };
    let mut theirs = theirs.lines();
    let ours = read_until(&db, &p, |rows| has(rows, &p, "h") && !has(rows, &p, "b"));
    assert_eq!(
        Some(lines(&ours).as_str()),
        theirs.next(),
        "the view after our write"
    );
    assert!(has(&ours, &p, "h") && !has(&ours, &p, "b") && !has(&ours, &p, "c"));
    let tx = db.create_transaction();
    tx.set_option(TransactionOption::ReadSystemKeys).unwrap();
    let kp = [b"\xff/globalConfig/k/".as_ref(), &p].concat();
    let system = tx.get_range(&kp, [&kp[..], b"\xff"].concat(), 0).unwrap();
    assert_eq!(
        Some(lines(&system).as_str()),
        theirs.next(),
        "the system keys"
    );
    let history = tx
        .get_range(b"\xff/globalConfig/h/", b"\xff/globalConfig/h0", 0)
        .unwrap();
    assert_eq!(Some(history.len().to_string().as_str()), theirs.next());
    assert!(history.len() <= 3, "the history is trimmed to three");

    // Leave the cluster's configuration as it was.
    let tx = db.create_transaction();
    tx.set_option(TransactionOption::SpecialKeySpaceEnableWrites)
        .unwrap();
    tx.clear_range(k(""), [&k("")[..], b"\xff"].concat());
    tx.commit().unwrap();
}
