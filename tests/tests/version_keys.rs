//! fdbcli's `advanceversion` and `versionepoch` through the special keys:
//! `\xff\xff/management/min_required_commit_version` and `\xff\xff/management/version_epoch`,
//! written with `special_key_space_enable_writes` and carried out at commit into
//! `\xff/minRequiredCommitVersion` and `\xff/versionEpoch`, with libfdb_c's refusals (a version
//! that does not parse, one below the read version or past the allowed maximum, advancing
//! while an epoch is set: `special_keys_api_failure` and the JSON message) and its quirks (the
//! epoch is written as 8 little-endian bytes and read back in decimal; a shorter one fails
//! the commit with `serialization_failed`; the version key reads back the transaction's own
//! write, the epoch does not).
//!
//! The same script runs on the test cluster, and on a real cluster (`FDB_CLUSTER_FILE`)
//! through this client and through the Python binding over libfdb_c 7.3.77, whose answers must
//! be the same. On the real cluster a set of either key makes the cluster recover (its commit
//! then usually reports `commit_unknown_result`), and after advancing, the read version is
//! above the version asked for. The script leaves both keys cleared, as it found them.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use fdb_driver_mio::{Database, Error, Transaction};
use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::TransactionOption;
use fdb_tests::cluster::TestCluster;

const VERSION: &[u8] = b"\xff\xff/management/min_required_commit_version";
const EPOCH: &[u8] = b"\xff\xff/management/version_epoch";

/// What the script answers on either client, one line a step, the same wherever versions and
/// clock times differ.
const ANSWERS: [&str; 17] = [
    r#"2117 {"command":"advanceversion","message":"Invalid version(int64_t) argument: abc","retriable":false}"#,
    r#"2117 {"command":"advanceversion","message":"Invalid version(int64_t) argument:  5","retriable":false}"#,
    r#"2117 {"command":"advanceversion","message":"Current read version is larger than the given version","retriable":false}"#,
    r#"2117 {"command":"advanceversion","message":"The given version is larger than the maximum allowed value(2**63-1-version_per_second*3600*24*365*1000)","retriable":false}"#,
    r#"2117 {"command":"advanceversion","message":"Invalid version(int64_t) argument: 99999999999999999999","retriable":false}"#,
    "1044",
    "own write xyz",
    "epoch -",
    "cleared -",
    "committed",
    "advanced true true",
    "committed",
    "epoch true true",
    r#"2117 {"command":"advanceversion","message":"Illegal to modify the version while the version epoch is enabled","retriable":false}"#,
    "committed",
    "committed",
    "both - -",
];

fn writer(db: &Database) -> Transaction {
    let tx = db.create_transaction();
    tx.set_option(TransactionOption::SpecialKeySpaceEnableWrites)
        .unwrap();
    tx
}

/// Sets (or clears) `key` and commits: the error code, with the message of an API failure; a
/// commit that went through, or whose outcome the recovery it caused hid, is "committed".
/// Other retryable errors (the cluster still recovering from the step before) are retried.
fn attempt(db: &Database, key: &[u8], value: Option<&[u8]>) -> String {
    let tx = db.create_transaction();
    loop {
        tx.set_option(TransactionOption::SpecialKeySpaceEnableWrites)
            .unwrap();
        match value {
            Some(v) => tx.set(key, v),
            None => tx.clear(key),
        }
        let e = match tx.commit() {
            Ok(_) => return "committed".into(),
            Err(e) => e,
        };
        let code = e.code().unwrap_or(ErrorCode::INVALID);
        match code.0 {
            1021 => return "committed".into(),
            2117 => {
                let msg = tx.get(b"\xff\xff/error_message").unwrap().unwrap();
                return format!("2117 {}", String::from_utf8_lossy(&msg));
            }
            _ => {}
        }
        if tx.on_error(code).is_err() {
            return code.0.to_string();
        }
    }
}

fn text(v: Option<Bytes>) -> String {
    v.map_or("-".into(), |v| String::from_utf8_lossy(&v).into_owned())
}

/// Reads in a fresh transaction, retrying while the cluster recovers.
fn eventually<T>(db: &Database, f: impl Fn(&Transaction) -> Result<T, Error>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let tx = db.create_transaction();
        tx.set_option(TransactionOption::ReadSystemKeys).unwrap();
        match f(&tx) {
            Ok(v) => return v,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => panic!("the cluster did not come back: {e}"),
        }
    }
}

fn our_answers(db: &Database, real: bool) -> Vec<String> {
    let mut out = Vec::new();
    for v in [
        "abc",
        " 5",
        "5",
        &i64::MAX.to_string(),
        "99999999999999999999",
    ] {
        out.push(attempt(db, VERSION, Some(v.as_bytes())));
    }
    out.push(attempt(db, EPOCH, Some(b"1")));
    let tx = writer(db);
    tx.set(VERSION, b"xyz");
    out.push(format!("own write {}", text(tx.get(VERSION).unwrap())));
    tx.set(EPOCH, 7i64.to_le_bytes());
    out.push(format!("epoch {}", text(tx.get(EPOCH).unwrap())));
    tx.clear(VERSION);
    out.push(format!("cleared {}", text(tx.get(VERSION).unwrap())));
    drop(tx);

    let rv = eventually(db, |tx| tx.get_read_version());
    let v = rv + 2_000_000;
    out.push(attempt(db, VERSION, Some(v.to_string().as_bytes())));
    let (shown, kept, now) = eventually(db, |tx| {
        Ok((
            text(tx.get(VERSION)?),
            tx.get(b"\xff/minRequiredCommitVersion")?,
            tx.get_read_version()?,
        ))
    });
    out.push(format!(
        "advanced {} {}",
        shown == (v + 1).to_string(),
        kept.as_deref() == Some(&(v + 1).to_le_bytes()[..])
    ));
    if real {
        // The recovery started above the version asked for.
        assert!(now > v, "read version {now} after advancing to {v}");
    }

    let rv = eventually(db, |tx| tx.get_read_version());
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let epoch = secs - rv / 1_000_000;
    let written = [&epoch.to_le_bytes()[..], b"zz"].concat();
    out.push(attempt(db, EPOCH, Some(&written)));
    let (shown, kept) = eventually(db, |tx| {
        Ok((text(tx.get(EPOCH)?), tx.get(b"\xff/versionEpoch")?))
    });
    out.push(format!(
        "epoch {} {}",
        shown == epoch.to_string(),
        kept.as_deref() == Some(&epoch.to_le_bytes()[..])
    ));
    out.push(attempt(db, VERSION, Some(b"5")));
    out.push(attempt(db, EPOCH, None));
    out.push(attempt(db, VERSION, None));
    let (a, b) = eventually(db, |tx| Ok((text(tx.get(VERSION)?), text(tx.get(EPOCH)?))));
    out.push(format!("both {a} {b}"));
    out
}

const PYTHON: &str = r#"
import struct, sys, time
import fdb
fdb.api_version(730)
db = fdb.open(sys.argv[1])
VERSION = b'\xff\xff/management/min_required_commit_version'
EPOCH = b'\xff\xff/management/version_epoch'

def writer():
    tr = db.create_transaction()
    tr.options.set_special_key_space_enable_writes()
    return tr

def attempt(key, value):
    tr = db.create_transaction()
    while True:
        tr.options.set_special_key_space_enable_writes()
        if value is None:
            tr.clear(key)
        else:
            tr[key] = value
        try:
            tr.commit().wait()
            return 'committed'
        except fdb.FDBError as e:
            if e.code == 1021:
                return 'committed'
            if e.code == 2117:
                return '%d %s' % (e.code, tr[b'\xff\xff/error_message'].value.decode())
            try:
                tr.on_error(e).wait()
            except fdb.FDBError:
                return str(e.code)

def text(v):
    return '-' if v is None else v.decode()

def eventually(f):
    deadline = time.time() + 60
    while True:
        tr = db.create_transaction()
        tr.options.set_read_system_keys()
        try:
            return f(tr)
        except fdb.FDBError:
            if time.time() > deadline:
                raise
            time.sleep(0.1)

out = []
for v in [b'abc', b' 5', b'5', str(2**63 - 1).encode(), b'99999999999999999999']:
    out.append(attempt(VERSION, v))
out.append(attempt(EPOCH, b'1'))
tr = writer()
tr[VERSION] = b'xyz'
out.append('own write ' + text(tr[VERSION].value))
tr[EPOCH] = struct.pack('<q', 7)
out.append('epoch ' + text(tr[EPOCH].value))
tr.clear(VERSION)
out.append('cleared ' + text(tr[VERSION].value))
tr.cancel()

rv = eventually(lambda tr: tr.get_read_version().wait())
v = rv + 2000000
out.append(attempt(VERSION, str(v).encode()))
shown, kept = eventually(lambda tr: (text(tr[VERSION].value), tr[b'\xff/minRequiredCommitVersion'].value))
out.append('advanced %s %s' % (str(shown == str(v + 1)).lower(), str(kept == struct.pack('<q', v + 1)).lower()))

rv = eventually(lambda tr: tr.get_read_version().wait())
epoch = int(time.time()) - rv // 1000000
out.append(attempt(EPOCH, struct.pack('<q', epoch) + b'zz'))
shown, kept = eventually(lambda tr: (text(tr[EPOCH].value), tr[b'\xff/versionEpoch'].value))
out.append('epoch %s %s' % (str(shown == str(epoch)).lower(), str(kept == struct.pack('<q', epoch)).lower()))
out.append(attempt(VERSION, b'5'))
out.append(attempt(EPOCH, None))
out.append(attempt(VERSION, None))
a, b = eventually(lambda tr: (text(tr[VERSION].value), text(tr[EPOCH].value)))
out.append('both %s %s' % (a, b))
print('\n'.join(out))
"#;

#[test]
fn version_keys_on_the_test_cluster() {
    let cluster = TestCluster::builder().storage_servers(1).start();
    let text = cluster.cluster_file_string();
    let db = Database::from_cluster_file(ClusterFile::parse(&text).unwrap(), 1).unwrap();
    assert_eq!(our_answers(&db, false), ANSWERS);
}

#[test]
fn the_same_answers_as_libfdb_c_on_a_real_cluster() {
    let Some((path, _)) = fdb_tests::dual::real_cluster_file() else {
        println!("version_keys: FDB_CLUSTER_FILE not set; the real-cluster comparison is skipped");
        return;
    };
    let db = Database::open(Some(&path)).unwrap();
    assert_eq!(our_answers(&db, true), ANSWERS);
    let Some(out) =
        fdb_tests::python::libfdb_c_answers("version_keys", PYTHON, [path.into_os_string()])
    else {
        return;
    };
    assert_eq!(out.lines().collect::<Vec<_>>(), ANSWERS);
}
