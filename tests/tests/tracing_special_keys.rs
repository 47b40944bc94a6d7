//! `\xff\xff/tracing/` (the transaction's span context: `transaction_id`, `token`): its rows,
//! what survives `on_error` and `reset`, the writes that set them and the ones libfdb_c
//! refuses (too late, a bad id or token, a clear, without
//! `special_key_space_enable_writes`).
//!
//! The same script runs against our client and, through the Python binding, libfdb_c 7.3.77
//! on a real cluster (`FDB_CLUSTER_FILE`); every answer must be the same. Random ids and
//! tokens are compared by shape (`hex32`, `dec`), the ones the script sets byte for byte. On
//! the test cluster the answers are checked against the ones libfdb_c gave.

use fdb_driver_mio::{Database, Error, Transaction};
use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::TransactionOption;
use fdb_tests::cluster::TestCluster;

const TRACING: &[u8] = b"\xff\xff/tracing/";
const TRACING_END: &[u8] = b"\xff\xff/tracing0";
const ID: &[u8] = b"\xff\xff/tracing/transaction_id";
const TOKEN: &[u8] = b"\xff\xff/tracing/token";

/// A value as the script prints it: set by the script (`=` and the text), or random.
fn shape(v: &[u8]) -> String {
    let s = String::from_utf8_lossy(v);
    let hex32 = s.len() == 32 && s.bytes().all(|c| c.is_ascii_hexdigit());
    let dec = !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()) && s != "0";
    if hex32 && !s.starts_with("0123") && !s.starts_with("1234") && !s.starts_with("0023") {
        "hex32".into()
    } else if dec {
        "dec".into()
    } else {
        format!("={s}")
    }
}

fn code(e: &Error) -> String {
    format!("E{}", e.code().map_or(0, |c| c.0))
}

/// The module's rows: `key:shape` each, or the error.
fn rows(tx: &Transaction) -> String {
    match tx.get_range(TRACING, TRACING_END, 0) {
        Ok(rows) => rows
            .iter()
            .map(|kv| {
                let name = String::from_utf8_lossy(&kv.key[TRACING.len()..]).into_owned();
                format!("{name}:{}", shape(&kv.value))
            })
            .collect::<Vec<_>>()
            .join(","),
        Err(e) => code(&e),
    }
}

fn error_message(tx: &Transaction) -> String {
    match tx.get(b"\xff\xff/error_message") {
        Ok(Some(v)) => String::from_utf8_lossy(&v).into_owned(),
        Ok(None) => "-".into(),
        Err(e) => code(&e),
    }
}

fn writable(db: &Database) -> Transaction {
    let tx = db.create_transaction();
    tx.set_option(TransactionOption::SpecialKeySpaceEnableWrites)
        .unwrap();
    tx
}

fn our_answers(db: &Database, key: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let tx = db.create_transaction();
    out.push(rows(&tx));
    let both = |tx: &Transaction| {
        (
            tx.get(ID).unwrap().unwrap_or_default(),
            tx.get(TOKEN).unwrap().unwrap_or_default(),
        )
    };
    let first = both(&tx);
    tx.on_error(ErrorCode(1020)).unwrap();
    out.push(format!("kept:{}", both(&tx) == first));
    tx.reset();
    out.push(format!("reset:{}", both(&tx).0 != first.0));

    for id in [
        &b"0123456789abcdef0123456789abcdef"[..],
        b"0x23456789abcdef0123456789abcdef",
        b" 123456789abcdef0123456789abcdef",
        b"0123456789abcdef0123456789abcdeg",
        b"0123456789ABCDEF0123456789ABCDEF",
        b"0123",
        b"0123456789abcdefXXXXXXXXXXXXXXXX",
    ] {
        let tx = writable(db);
        tx.set(ID, id);
        out.push(rows(&tx));
    }
    for token in [&b"false"[..], b"true", b"maybe"] {
        let tx = writable(db);
        tx.set(TOKEN, b"false");
        tx.set(TOKEN, token);
        out.push(rows(&tx));
    }
    let tx = writable(db);
    tx.set(b"\xff\xff/tracing/footoken", b"false");
    tx.set(b"\xff\xff/tracing/other", b"false");
    out.push(rows(&tx));
    let tx = db.create_transaction();
    out.push(match tx.get_range(TOKEN, b"\xff\xff/tracing/tokeo", 0) {
        Ok(r) => format!("{} row(s)", r.len()),
        Err(e) => code(&e),
    });
    let tx = writable(db);
    tx.clear(TOKEN);
    out.push(format!("{} {}", rows(&tx), error_message(&tx)));
    let tx = writable(db);
    tx.clear_range(TRACING, TRACING_END);
    out.push(rows(&tx));
    // After a write: kept, and the commit refuses it.
    let tx = writable(db);
    tx.set(key, b"v");
    tx.set(TOKEN, b"false");
    out.push(rows(&tx));
    out.push(error_message(&tx));
    out.push(match tx.commit() {
        Ok(_) => "committed".into(),
        Err(e) => code(&e),
    });
    // After a read (waited for): its read conflict range counts, too late as well.
    let tx = writable(db);
    tx.get(key).unwrap();
    tx.set(TOKEN, b"false");
    out.push(rows(&tx));
    tx.set(key, b"v");
    out.push(match tx.commit() {
        Ok(_) => "committed".into(),
        Err(e) => code(&e),
    });
    let tx = db.create_transaction();
    tx.set(TOKEN, b"false");
    out.push(rows(&tx));
    out
}

const PYTHON: &str = r#"
import sys
import fdb
fdb.api_version(730)
db = fdb.open(sys.argv[1])
key = bytes.fromhex(sys.argv[2])
TRACING = b"\xff\xff/tracing/"
TRACING_END = b"\xff\xff/tracing0"
ID = b"\xff\xff/tracing/transaction_id"
TOKEN = b"\xff\xff/tracing/token"
def shape(v):
    s = v.decode("latin-1")
    hex32 = len(s) == 32 and all(c in "0123456789abcdefABCDEF" for c in s)
    dec = s != "" and s.isdigit() and s != "0"
    if hex32 and not s.startswith("0123") and not s.startswith("1234") and not s.startswith("0023"):
        return "hex32"
    if dec:
        return "dec"
    return "=" + s
def code(e):
    return "E%d" % e.code
def rows(tr):
    try:
        return ",".join(kv.key[len(TRACING):].decode() + ":" + shape(kv.value) for kv in tr.get_range(TRACING, TRACING_END))
    except fdb.FDBError as e:
        return code(e)
def error_message(tr):
    try:
        v = tr.get(b"\xff\xff/error_message").wait()
        return "-" if not v.present() else bytes(v).decode()
    except fdb.FDBError as e:
        return code(e)
def writable():
    tr = db.create_transaction()
    tr.options.set_special_key_space_enable_writes()
    return tr
out = []
tr = db.create_transaction()
out.append(rows(tr))
def both(tr):
    return (bytes(tr.get(ID).wait()), bytes(tr.get(TOKEN).wait()))
first = both(tr)
tr.on_error(fdb.FDBError(1020)).wait()
out.append("kept:%s" % ("true" if both(tr) == first else "false"))
tr.reset()
out.append("reset:%s" % ("true" if both(tr)[0] != first[0] else "false"))
for i in [b"0123456789abcdef0123456789abcdef", b"0x23456789abcdef0123456789abcdef", b" 123456789abcdef0123456789abcdef",
          b"0123456789abcdef0123456789abcdeg", b"0123456789ABCDEF0123456789ABCDEF", b"0123", b"0123456789abcdefXXXXXXXXXXXXXXXX"]:
    tr = writable()
    tr[ID] = i
    out.append(rows(tr))
for t in [b"false", b"true", b"maybe"]:
    tr = writable()
    tr[TOKEN] = b"false"
    tr[TOKEN] = t
    out.append(rows(tr))
tr = writable()
tr[b"\xff\xff/tracing/footoken"] = b"false"
tr[b"\xff\xff/tracing/other"] = b"false"
out.append(rows(tr))
tr = db.create_transaction()
try:
    out.append("%d row(s)" % len(list(tr.get_range(TOKEN, b"\xff\xff/tracing/tokeo"))))
except fdb.FDBError as e:
    out.append(code(e))
tr = writable()
tr.clear(TOKEN)
out.append(rows(tr) + " " + error_message(tr))
tr = writable()
tr.clear_range(TRACING, TRACING_END)
out.append(rows(tr))
tr = writable()
tr[key] = b"v"
tr[TOKEN] = b"false"
out.append(rows(tr))
out.append(error_message(tr))
try:
    tr.commit().wait()
    out.append("committed")
except fdb.FDBError as e:
    out.append(code(e))
tr = writable()
tr.get(key).wait()
tr[TOKEN] = b"false"
out.append(rows(tr))
tr[key] = b"v"
try:
    tr.commit().wait()
    out.append("committed")
except fdb.FDBError as e:
    out.append(code(e))
tr = db.create_transaction()
tr[TOKEN] = b"false"
out.append(rows(tr))
for line in out:
    print(line)
"#;

/// What libfdb_c 7.3.77 answered to the script on a real cluster.
const LIBFDB_C: &[&str] = &[
    "token:dec,transaction_id:hex32",
    "kept:true",
    "reset:true",
    "token:dec,transaction_id:=0123456789abcdef0123456789abcdef",
    "token:dec,transaction_id:=0023456789abcdef0123456789abcdef",
    "token:dec,transaction_id:=123456789abcdef00123456789abcdef",
    "token:dec,transaction_id:=0123456789abcdef00123456789abcde",
    "token:dec,transaction_id:=0123456789abcdef0123456789abcdef",
    "E4100",
    "E4100",
    "token:=0,transaction_id:hex32",
    "token:dec,transaction_id:hex32",
    "E2117",
    "token:=0,transaction_id:hex32",
    "1 row(s)",
    "E2117 E2117",
    "E2117",
    "token:dec,transaction_id:hex32",
    r#"{"command":"configure trace","message":"tracing options must be set first","retriable":false}"#,
    "E2117",
    "token:dec,transaction_id:hex32",
    "E2117",
    "E2114",
];

#[test]
fn the_tracing_module_on_the_test_cluster() {
    let cluster = TestCluster::start();
    let text = cluster.cluster_file_string();
    let db = Database::from_cluster_file(ClusterFile::parse(&text).unwrap(), 1).unwrap();
    let ours = our_answers(&db, b"tracing-key");
    for (i, (o, t)) in ours.iter().zip(LIBFDB_C).enumerate() {
        assert_eq!(o, t, "answer {i}");
    }
    assert_eq!(ours.len(), LIBFDB_C.len());
}

#[test]
fn the_same_answers_as_libfdb_c_on_a_real_cluster() {
    let Some((path, _)) = fdb_tests::dual::real_cluster_file() else {
        println!(
            "tracing_special_keys: FDB_CLUSTER_FILE not set; the libfdb_c comparison is skipped"
        );
        return;
    };
    let mut key = fdb_tests::dual::random_prefix("rust-fdb-tracing");
    key.extend_from_slice(b"k");
    let _clear = fdb_tests::dual::ClearOnDrop::prefix(
        ClusterFile::parse(&std::fs::read_to_string(&path).unwrap()).unwrap(),
        &key,
    );
    let args = [
        path.clone().into_os_string(),
        fdb_tests::to_hex(&key).into(),
    ];
    let Some(out) = fdb_tests::python::libfdb_c_answers("tracing_special_keys", PYTHON, args)
    else {
        return;
    };
    let theirs: Vec<&str> = out.lines().collect();
    assert_eq!(theirs, LIBFDB_C, "libfdb_c answers as recorded");
    let db = Database::open(Some(&path)).unwrap();
    let ours = our_answers(&db, &key);
    for (i, (o, t)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(o, t, "answer {i}");
    }
    assert_eq!(ours.len(), theirs.len());
}
