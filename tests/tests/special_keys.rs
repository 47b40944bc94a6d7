//! The special key space a client serves itself (`\xff\xff`): the transaction module's
//! `read_conflict_range/` and `write_conflict_range/` after reads, writes, clears, atomic
//! ops and explicit conflict ranges; `\xff\xff/connection_string` and
//! `\xff\xff/cluster_file_path`; selectors, limits and reverse reads inside a module; and the
//! errors (`special_keys_no_module_found`, `special_keys_cross_module_read`, relaxed reads).
//!
//! On the test cluster the rows are checked against what the operations imply. On a real
//! cluster (`FDB_CLUSTER_FILE`) the same script runs through the Python binding over libfdb_c
//! 7.3.77 and every answer must be byte for byte the same (needs `foundationdb==7.3.77`;
//! without it that part prints a notice, unless `FDB_SHARED_DIR` is set, as in CI).

use fdb_driver_mio::{ConflictRangeType, Database, KeySelector, MutationType, RangeOptions};
use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::TransactionOption;
use fdb_tests::cluster::TestCluster;
use fdb_tests::to_hex as hex;

const READS: &[u8] = b"\xff\xff/transaction/read_conflict_range/";
const READS_END: &[u8] = b"\xff\xff/transaction/read_conflict_range0";
const WRITES: &[u8] = b"\xff\xff/transaction/write_conflict_range/";
const WRITES_END: &[u8] = b"\xff\xff/transaction/write_conflict_range0";

fn cat(a: &[u8], b: &[u8]) -> Vec<u8> {
    [a, b].concat()
}

/// The answers of the script, one line each: rows as `key=value,...` in hex, a value, `-`
/// for none, or `E<code>`.
fn our_answers(db: &Database, p: &[u8]) -> Vec<String> {
    let tx = db.create_transaction();
    tx.get(cat(p, b"a")).unwrap();
    tx.set(cat(p, b"b"), b"1");
    tx.clear_range(cat(p, b"c"), cat(p, b"d"));
    tx.get_range(cat(p, b"e"), cat(p, b"f"), 0).unwrap();
    tx.add_conflict_range(cat(p, b"g"), cat(p, b"g\x00"), ConflictRangeType::Read)
        .unwrap();
    tx.add_conflict_range(cat(p, b"h"), cat(p, b"i"), ConflictRangeType::Write)
        .unwrap();
    tx.snapshot_get(cat(p, b"j")).unwrap();
    tx.atomic_op(cat(p, b"k"), [1, 0, 0, 0], MutationType::Add);
    tx.get(cat(p, b"b")).unwrap(); // answered from the writes: no conflict range

    let rows = |r: Result<Vec<fdb_driver_mio::KeyValue>, fdb_driver_mio::Error>| match r {
        Ok(rows) => rows
            .iter()
            .map(|kv| format!("{}={}", hex(&kv.key), hex(&kv.value)))
            .collect::<Vec<_>>()
            .join(","),
        Err(e) => format!("E{}", e.code().map_or(0, |c| c.0)),
    };
    let value = |r: Result<Option<bytes::Bytes>, fdb_driver_mio::Error>| match r {
        Ok(Some(v)) => hex(&v),
        Ok(None) => "-".to_string(),
        Err(e) => format!("E{}", e.code().map_or(0, |c| c.0)),
    };
    let batch = |b: KeySelector, e: KeySelector, limit: usize, reverse: bool| {
        let opts = RangeOptions {
            limit,
            reverse,
            mode: fdb_driver_mio::StreamingMode::WantAll,
            ..RangeOptions::default()
        };
        rows(tx.get_range_batch(b, e, opts, false).map(|r| r.rows))
    };
    let fge = KeySelector::first_greater_or_equal;
    let mut out = vec![
        rows(tx.get_range(READS, READS_END, 0)),
        rows(tx.get_range(WRITES, WRITES_END, 0)),
        rows(tx.get_range(
            b"\xff\xff/transaction/".as_ref(),
            b"\xff\xff/transaction0".as_ref(),
            0,
        )),
        batch(fge(READS), fge(READS_END), 3, true),
        batch(
            KeySelector::first_greater_than(cat(READS, &cat(p, b"a"))),
            KeySelector::new(READS_END, false, -1),
            0,
            false,
        ),
        batch(KeySelector::new(READS, false, -5), fge(READS), 0, false),
        value(tx.get(b"\xff\xff/transaction/nothing_here")),
        value(tx.get(b"\xff\xff/nothing_here")),
        rows(tx.get_range(
            b"\xff\xff/transaction/".as_ref(),
            b"\xff\xff/transaction1".as_ref(),
            0,
        )),
        rows(tx.get_range(b"\xff\xff/zz".as_ref(), b"\xff\xff/zzz".as_ref(), 0)),
        value(tx.get(b"\xff\xff/error_message")),
    ];
    tx.set_option(TransactionOption::SpecialKeySpaceRelaxed)
        .unwrap();
    out.push(rows(tx.get_range(
        b"\xff\xff/transaction/read_conflict_range0".as_ref(),
        b"\xff\xff/transaction/write_conflict_range/c".as_ref(),
        0,
    )));
    out
}

#[test]
fn the_transaction_module_on_the_test_cluster() {
    let cluster = TestCluster::start();
    let text = cluster.cluster_file_string();
    let db = Database::from_cluster_file(ClusterFile::parse(&text).unwrap(), 1).unwrap();
    let got = our_answers(&db, b"");
    let row = |k: &[u8], v: &str| format!("{}={}", hex(k), hex(v.as_bytes()));
    let rows = |prefix: &[u8], keys: &[(&[u8], &str)]| {
        keys.iter()
            .map(|(k, v)| row(&cat(prefix, k), v))
            .collect::<Vec<_>>()
            .join(",")
    };
    let reads: &[(&[u8], &str)] = &[
        (b"a", "1"),
        (b"a\x00", "0"),
        (b"e", "1"),
        (b"f", "0"),
        (b"g", "1"),
        (b"g\x00", "0"),
    ];
    let writes: &[(&[u8], &str)] = &[
        (b"b", "1"),
        (b"b\x00", "0"),
        (b"c", "1"),
        (b"d", "0"),
        (b"h", "1"),
        (b"i", "0"),
        (b"k", "1"),
        (b"k\x00", "0"),
    ];
    assert_eq!(got[0], rows(READS, reads), "read conflict ranges");
    assert_eq!(got[1], rows(WRITES, writes), "write conflict ranges");
    assert_eq!(got[2], format!("{},{}", got[0], got[1]), "the whole module");
    let last3: Vec<&str> = got[0].split(',').rev().take(3).collect();
    assert_eq!(got[3], last3.join(","), "reverse, limit 3");
    // From after `a`'s begin to two rows before the module's end (`g` excluded).
    let middle: Vec<&str> = got[0].split(',').skip(1).take(3).collect();
    assert_eq!(got[4], middle.join(","), "selectors inside the module");
    assert_eq!(
        got[5], "",
        "a selector before the module clamps to its begin"
    );
    assert_eq!(got[6], "-", "a key inside a module with no row");
    assert_eq!(got[7], "E2113", "outside every module");
    assert_eq!(got[8], "E2112", "across modules");
    assert_eq!(got[9], "E2113", "a range outside every module");
    assert_eq!(got[10], "-", "no error message");
    assert_eq!(
        got[11],
        rows(WRITES, &writes[..2]),
        "relaxed: across modules"
    );

    let tx = db.create_transaction();
    let cs = tx.get(b"\xff\xff/connection_string").unwrap().unwrap();
    assert_eq!(std::str::from_utf8(&cs).unwrap(), text);
    let id = tx.get(b"\xff\xff/cluster_file_path").unwrap().unwrap();
    assert_eq!(
        id.len(),
        32,
        "a connection string's record is an id: {id:?}"
    );

    let dir = std::env::temp_dir().join(format!("special-keys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("fdb.cluster");
    std::fs::write(&file, &text).unwrap();
    let db = Database::open(Some(&file)).unwrap();
    let tx = db.create_transaction();
    let path = tx.get(b"\xff\xff/cluster_file_path").unwrap().unwrap();
    assert_eq!(path.as_ref(), file.to_str().unwrap().as_bytes());
    std::fs::remove_dir_all(&dir).unwrap();
}

const PYTHON: &str = r#"
import sys
import fdb
fdb.api_version(730)
db = fdb.open(sys.argv[1])
p = bytes.fromhex(sys.argv[2])
READS = b"\xff\xff/transaction/read_conflict_range/"
READS_END = b"\xff\xff/transaction/read_conflict_range0"
WRITES = b"\xff\xff/transaction/write_conflict_range/"
WRITES_END = b"\xff\xff/transaction/write_conflict_range0"
tr = db.create_transaction()
tr.get(p + b"a").wait()
tr[p + b"b"] = b"1"
tr.clear_range(p + b"c", p + b"d")
list(tr.get_range(p + b"e", p + b"f"))
tr.add_read_conflict_range(p + b"g", p + b"g\x00")
tr.add_write_conflict_range(p + b"h", p + b"i")
tr.snapshot.get(p + b"j").wait()
tr.add(p + b"k", b"\x01\x00\x00\x00")
tr.get(p + b"b").wait()
def rows(f):
    try:
        return ",".join(kv.key.hex() + "=" + kv.value.hex() for kv in f())
    except fdb.FDBError as e:
        return "E%d" % e.code
def value(f):
    try:
        v = f().wait()
        return "-" if not v.present() else bytes(v).hex()
    except fdb.FDBError as e:
        return "E%d" % e.code
W = fdb.StreamingMode.want_all
fge = fdb.KeySelector.first_greater_or_equal
out = [
    rows(lambda: list(tr.get_range(READS, READS_END))),
    rows(lambda: list(tr.get_range(WRITES, WRITES_END))),
    rows(lambda: list(tr.get_range(b"\xff\xff/transaction/", b"\xff\xff/transaction0"))),
    rows(lambda: list(tr.get_range(fge(READS), fge(READS_END), limit=3, reverse=True, streaming_mode=W))),
    rows(lambda: list(tr.get_range(fdb.KeySelector.first_greater_than(READS + p + b"a"), fdb.KeySelector(READS_END, False, -1), streaming_mode=W))),
    rows(lambda: list(tr.get_range(fdb.KeySelector(READS, False, -5), fge(READS), streaming_mode=W))),
    value(lambda: tr.get(b"\xff\xff/transaction/nothing_here")),
    value(lambda: tr.get(b"\xff\xff/nothing_here")),
    rows(lambda: list(tr.get_range(b"\xff\xff/transaction/", b"\xff\xff/transaction1"))),
    rows(lambda: list(tr.get_range(b"\xff\xff/zz", b"\xff\xff/zzz"))),
    value(lambda: tr.get(b"\xff\xff/error_message")),
]
tr.options.set_special_key_space_relaxed()
out.append(rows(lambda: list(tr.get_range(READS_END, WRITES + b"c"))))
cs = tr.get(b"\xff\xff/connection_string").wait()
out.append(bytes(cs).hex())
out.append(bytes(tr.get(b"\xff\xff/cluster_file_path").wait()).hex())
for line in out:
    print(line)
"#;

#[test]
fn the_same_answers_as_libfdb_c_on_a_real_cluster() {
    let Some((path, _)) = fdb_tests::dual::real_cluster_file() else {
        println!("special_keys: FDB_CLUSTER_FILE not set; the libfdb_c comparison is skipped");
        return;
    };
    let prefix = fdb_tests::dual::random_prefix("rust-fdb-special");
    let args = [path.clone().into_os_string(), hex(&prefix).into()];
    let Some(out) = fdb_tests::python::libfdb_c_answers("special_keys", PYTHON, args) else {
        return;
    };
    let theirs: Vec<String> = out.lines().map(str::to_string).collect();
    let db = Database::open(Some(&path)).unwrap();
    let mut ours = our_answers(&db, &prefix);
    let tx = db.create_transaction();
    let cs = tx.get(b"\xff\xff/connection_string").unwrap().unwrap();
    ours.push(hex(&cs));
    let file = tx.get(b"\xff\xff/cluster_file_path").unwrap().unwrap();
    ours.push(hex(&file));
    for (i, (o, t)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(o, t, "answer {i}");
    }
    assert_eq!(ours.len(), theirs.len());
}
