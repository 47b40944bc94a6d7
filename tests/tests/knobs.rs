//! libfdb_c's knobs (`knob` network option, `FDB_NETWORK_OPTION_KNOB`): the limits a program
//! sets through them hold as libfdb_c holds them. With `value_size_limit=1000`,
//! `key_size_limit=100` and `transaction_size_limit=5000`: a longer value or key fails its
//! commit (`value_too_large`, `key_too_large`), a `size_limit` above the knob is refused
//! (`invalid_option_value`), a commit past it is `transaction_too_large`, and a read of a key
//! longer than any that can exist finds nothing. With the defaults every step succeeds.
//!
//! The same steps run on the test cluster, and on a real cluster (`FDB_CLUSTER_FILE`) through
//! this client and through the Python binding over libfdb_c 7.3.77, whose answers must be the
//! same.

use std::path::Path;

use fdb_driver_mio::{Database, Error, Transaction};
use fdb_protocol::knobs::Knobs;
use fdb_protocol::TransactionOption;
use fdb_tests::cluster::TestCluster;

const KNOBS: [&str; 3] = [
    "value_size_limit=1000",
    "key_size_limit=100",
    "transaction_size_limit=5000",
];

/// One line a step: the commit's error code, 0 when it committed.
const ANSWERS: [&str; 9] = ["0", "2103", "0", "2102", "2006", "0", "2101", "0", "0"];

fn long_key(len: usize) -> Vec<u8> {
    let mut key = b"knobs/".to_vec();
    key.resize(len, b'k');
    key
}

fn our_answers(db: &Database) -> Vec<String> {
    let step = |f: &dyn Fn(&Transaction) -> Result<(), Error>| -> String {
        let tx = db.create_transaction();
        match f(&tx).and_then(|()| tx.commit().map(|_| ())) {
            Ok(()) => "0".to_string(),
            Err(e) => e.code().map_or_else(|| format!("{e}"), |c| c.0.to_string()),
        }
    };
    let write = |f: &dyn Fn(&Transaction)| {
        step(&|tx| {
            f(tx);
            Ok(())
        })
    };
    vec![
        write(&|tx| tx.set(b"knobs/a", vec![b'v'; 1000])),
        write(&|tx| tx.set(b"knobs/a", vec![b'v'; 1001])),
        write(&|tx| tx.set(long_key(100), b"")),
        write(&|tx| tx.set(long_key(101), b"")),
        step(&|tx| tx.set_option(TransactionOption::SizeLimit(5001))),
        step(&|tx| tx.set_option(TransactionOption::SizeLimit(5000))),
        write(&|tx| {
            for i in 0..6 {
                tx.set(format!("knobs/{i}"), vec![b'v'; 900]);
            }
        }),
        step(&|tx| match tx.get(long_key(200))? {
            None => Ok(()),
            Some(_) => panic!("a key past every limit was found"),
        }),
        write(&|tx| tx.clear_range(b"knobs/", b"knobs0")),
    ]
}

fn knobs() -> Knobs {
    let mut knobs = Knobs::default();
    for k in KNOBS {
        knobs.set_option(k).unwrap().unwrap();
    }
    knobs
}

fn open(path: &Path, knobs: Knobs) -> Database {
    Database::open_with(Some(path), fdb_api::TlsConfig::new(), knobs).unwrap()
}

const PYTHON: &str = r#"
import sys
import fdb
fdb.api_version(730)
for knob in sys.argv[2:]:
    fdb.options.set_knob(knob)
db = fdb.open(sys.argv[1])
out = []
def step(f):
    tr = db.create_transaction()
    try:
        f(tr)
        tr.commit().wait()
        out.append("0")
    except fdb.FDBError as e:
        out.append(str(e.code))
def key(n):
    return b"knobs/" + b"k" * (n - 6)
def many(tr):
    for i in range(6):
        tr.set(b"knobs/%d" % i, b"v" * 900)
def absent(tr):
    assert not tr.get(key(200)).wait().present()
step(lambda tr: tr.set(b"knobs/a", b"v" * 1000))
step(lambda tr: tr.set(b"knobs/a", b"v" * 1001))
step(lambda tr: tr.set(key(100), b""))
step(lambda tr: tr.set(key(101), b""))
step(lambda tr: tr.options.set_size_limit(5001))
step(lambda tr: tr.options.set_size_limit(5000))
step(many)
step(absent)
step(lambda tr: tr.clear_range(b"knobs/", b"knobs0"))
print("\n".join(out))
"#;

#[test]
fn knobs_set_the_limits_on_the_test_cluster() {
    let cluster = TestCluster::builder().storage_servers(1).start();
    let dir = std::env::temp_dir().join(format!("fdb-knobs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = cluster.write_cluster_file(&dir);
    assert_eq!(our_answers(&open(&path, knobs())), ANSWERS);
    // Without the knobs every step goes through.
    let defaults = our_answers(&open(&path, Knobs::default()));
    assert_eq!(defaults, ["0"; 9]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_same_answers_as_libfdb_c_on_a_real_cluster() {
    let Some((path, _)) = fdb_tests::dual::real_cluster_file() else {
        println!("knobs: FDB_CLUSTER_FILE not set; the real-cluster comparison is skipped");
        return;
    };
    assert_eq!(our_answers(&open(&path, knobs())), ANSWERS);
    let mut args = vec![path.into_os_string()];
    args.extend(KNOBS.map(Into::into));
    let Some(out) = fdb_tests::python::libfdb_c_answers("knobs", PYTHON, args) else {
        return;
    };
    assert_eq!(out.lines().collect::<Vec<_>>(), ANSWERS);
}
