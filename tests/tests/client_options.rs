//! Options with a client-side effect that 7.3's libfdb_c implements in RYW and NativeAPI:
//! `snapshot_ryw_disable` / `snapshot_ryw_enable` (transaction and database: a counter),
//! `bypass_unreadable`, `tag` / `auto_throttle_tag`.
//!
//! Each scenario runs on the test cluster and, with `FDB_CLUSTER_FILE` set, on a real cluster,
//! where the same steps also run through the Python binding over libfdb_c 7.3.77 and every
//! answer must be the same (without the binding that part prints a notice, unless
//! `FDB_SHARED_DIR` is set).

use std::time::Duration;

use bytes::Bytes;
use fdb_driver_tokio::{DatabaseOption, Error, MutationType, RangeOption};
use fdb_protocol::TransactionOption;
use fdb_tests::dual::Target;
use fdb_tests::to_hex as hex;

const LIMIT: Duration = Duration::from_secs(60);

fn value(r: Result<Option<Bytes>, Error>) -> String {
    match r {
        Ok(Some(v)) => hex(&v),
        Ok(None) => "-".into(),
        Err(e) => format!("E{}", e.code().map_or(0, |c| c.0)),
    }
}

fn rows(r: Result<Vec<fdb_driver_tokio::KeyValue>, Error>, prefix: &[u8]) -> String {
    match r {
        Ok(rows) => rows
            .iter()
            .map(|kv| format!("{}={}", hex(&kv.key[prefix.len()..]), hex(&kv.value)))
            .collect::<Vec<_>>()
            .join(","),
        Err(e) => format!("E{}", e.code().map_or(0, |c| c.0)),
    }
}

/// Runs `script` through the Python binding on the real cluster with the target's prefix as
/// its first argument (hex); its printed lines.
fn libfdb_c(t: &Target, tag: &str, script: &str) -> Option<Vec<String>> {
    let path = std::env::var("FDB_CLUSTER_FILE").ok()?;
    let out = fdb_tests::python::libfdb_c_answers(tag, script, [path, hex(&t.prefix)])?;
    Some(out.lines().map(str::to_string).collect())
}

const PY_PRELUDE: &str = r#"
import sys, fdb
fdb.api_version(730)
db = fdb.open(sys.argv[1])
p = bytes.fromhex(sys.argv[2])
def val(f):
    try:
        v = f.wait()
        return '-' if v is None or not v.present() else bytes(v).hex()
    except fdb.FDBError as e:
        return 'E%d' % e.code
def rows(tr, b, e):
    try:
        return ','.join(bytes(kv.key[len(p):]).hex() + '=' + bytes(kv.value).hex() for kv in tr.get_range(b, e))
    except fdb.FDBError as e:
        return 'E%d' % e.code
"#;

/// What snapshot reads see of the transaction's writes as the counter goes down and up.
async fn snapshot_ryw_answers(t: &Target) -> Vec<String> {
    let (a, b, c) = (t.k("s/a"), t.k("s/b"), t.k("s/c"));
    t.db.run(|tx| {
        let (a, b) = (a.clone(), b.clone());
        async move {
            tx.set(&a, b"stored-a");
            tx.set(&b, b"stored-b");
            Ok(())
        }
    })
    .await
    .unwrap();
    let (begin, end) = (t.k("s/"), t.k("s0"));
    let mut out = Vec::new();
    let tx = t.db.create_transaction();
    tx.set(&a, b"mine-a");
    tx.clear(&b);
    tx.set(&c, b"mine-c");
    let range = || RangeOption::from((begin.clone(), end.clone()));
    // Default (counter 1): snapshot reads see the writes.
    out.push(value(tx.snapshot().get(&a).await));
    // Twice down, once up: still at 0.
    tx.set_option(TransactionOption::SnapshotRywDisable)
        .unwrap();
    tx.set_option(TransactionOption::SnapshotRywDisable)
        .unwrap();
    tx.set_option(TransactionOption::SnapshotRywEnable).unwrap();
    out.push(value(tx.snapshot().get(&a).await));
    out.push(value(tx.snapshot().get(&b).await));
    out.push(value(tx.snapshot().get(&c).await));
    out.push(rows(tx.snapshot().get_range_all(range()).await, &t.prefix));
    // Ordinary reads still see them.
    out.push(value(tx.get(&a).await));
    out.push(rows(tx.get_range_all(range(), false).await, &t.prefix));
    // Back to 1.
    tx.set_option(TransactionOption::SnapshotRywEnable).unwrap();
    out.push(value(tx.snapshot().get(&a).await));
    out.push(rows(tx.snapshot().get_range_all(range()).await, &t.prefix));

    // The database's counter: transactions created afterwards start from it.
    let db = t.another_database(7);
    db.set_option(DatabaseOption::SnapshotRywDisable).unwrap();
    let tx = db.create_transaction();
    tx.set(&a, b"mine-a");
    out.push(value(tx.snapshot().get(&a).await));
    // Reset returns to the database's counter, not to 1.
    tx.set_option(TransactionOption::SnapshotRywEnable).unwrap();
    out.push(value(tx.snapshot().get(&a).await));
    tx.reset();
    tx.set(&a, b"mine-a");
    out.push(value(tx.snapshot().get(&a).await));
    db.set_option(DatabaseOption::SnapshotRywEnable).unwrap();
    let tx = db.create_transaction();
    tx.set(&a, b"mine-a");
    out.push(value(tx.snapshot().get(&a).await));
    out
}

const PY_SNAPSHOT_RYW: &str = r#"
a, b, c = p + b's/a', p + b's/b', p + b's/c'
begin, end = p + b's/', p + b's0'
out = []
@fdb.transactional
def fill(tr):
    tr[a] = b'stored-a'
    tr[b] = b'stored-b'
fill(db)
tr = db.create_transaction()
tr.set(a, b'mine-a'); tr.clear(b); tr.set(c, b'mine-c')
out.append(val(tr.snapshot.get(a)))
tr.options.set_snapshot_ryw_disable(); tr.options.set_snapshot_ryw_disable(); tr.options.set_snapshot_ryw_enable()
out.append(val(tr.snapshot.get(a)))
out.append(val(tr.snapshot.get(b)))
out.append(val(tr.snapshot.get(c)))
out.append(rows(tr.snapshot, begin, end))
out.append(val(tr.get(a)))
out.append(rows(tr, begin, end))
tr.options.set_snapshot_ryw_enable()
out.append(val(tr.snapshot.get(a)))
out.append(rows(tr.snapshot, begin, end))
db.options.set_snapshot_ryw_disable()
tr2 = db.create_transaction()
tr2.set(a, b'mine-a')
out.append(val(tr2.snapshot.get(a)))
tr2.options.set_snapshot_ryw_enable()
out.append(val(tr2.snapshot.get(a)))
tr2.reset()
tr2.set(a, b'mine-a')
out.append(val(tr2.snapshot.get(a)))
db.options.set_snapshot_ryw_enable()
tr3 = db.create_transaction()
tr3.set(a, b'mine-a')
out.append(val(tr3.snapshot.get(a)))
print('\n'.join(out))
"#;

#[test]
fn snapshot_ryw_disable_hides_the_writes_from_snapshot_reads() {
    fdb_tests::dual::run("rust-client-options", LIMIT, |t| async move {
        let ours = snapshot_ryw_answers(&t).await;
        let h = |s: &str| hex(s.as_bytes());
        let expected = vec![
            h("mine-a"),
            h("stored-a"),
            h("stored-b"),
            "-".into(),
            format!(
                "{}={},{}={}",
                h("s/a"),
                h("stored-a"),
                h("s/b"),
                h("stored-b")
            ),
            h("mine-a"),
            format!("{}={},{}={}", h("s/a"), h("mine-a"), h("s/c"), h("mine-c")),
            h("mine-a"),
            format!("{}={},{}={}", h("s/a"), h("mine-a"), h("s/c"), h("mine-c")),
            h("stored-a"),
            h("mine-a"),
            h("stored-a"),
            h("mine-a"),
        ];
        assert_eq!(ours, expected, "{}", t.name);
        if !t.exact {
            // The transaction of the Python run reads the same stored values.
            let script = [PY_PRELUDE, PY_SNAPSHOT_RYW].concat();
            if let Some(theirs) = libfdb_c(&t, "snapshot_ryw", &script) {
                assert_eq!(ours, theirs, "libfdb_c");
            }
        }
    });
}

/// Point reads, a range read and a selector over versionstamped writes, with and without
/// `bypass_unreadable`.
async fn bypass_answers(t: &Target) -> Vec<String> {
    // `k` lies where the versionstamped key below may land.
    let (v, k) = (t.k("u/v"), t.k("u/k\u{1}"));
    t.put(&k, b"stored-k").await;
    // A versionstamped value: "vs", 10 placeholder bytes, the offset 2.
    let param: Vec<u8> = [&b"vs"[..], &[0u8; 10], &[2, 0, 0, 0]].concat();
    // A versionstamped key under u/k: its possible range becomes unreadable.
    let vkey: Vec<u8> = [
        &t.k("u/k")[..],
        &[0u8; 10],
        &(t.k("u/k").len() as u32).to_le_bytes(),
    ]
    .concat();
    let (begin, end) = (t.k("u/"), t.k("u0"));
    let mut out = Vec::new();
    for bypass in [false, true] {
        let tx = t.db.create_transaction();
        if bypass {
            tx.set_option(TransactionOption::BypassUnreadable).unwrap();
        }
        tx.atomic_op(&v, &param, MutationType::SetVersionstampedValue);
        tx.atomic_op(&vkey, b"x", MutationType::SetVersionstampedKey);
        out.push(value(tx.get(&v).await));
        out.push(value(tx.snapshot().get(&v).await));
        out.push(value(tx.get(&k).await));
        out.push(rows(
            tx.get_range_all(RangeOption::from((begin.clone(), end.clone())), false)
                .await,
            &t.prefix,
        ));
    }
    out
}

const PY_BYPASS: &str = r#"
v, k = p + b'u/v', p + b'u/k\x01'
begin, end = p + b'u/', p + b'u0'
@fdb.transactional
def fill(tr):
    tr[k] = b'stored-k'
fill(db)
param = b'vs' + b'\x00' * 10 + b'\x02\x00\x00\x00'
base = p + b'u/k'
vkey = base + b'\x00' * 10 + len(base).to_bytes(4, 'little')
out = []
for bypass in [False, True]:
    tr = db.create_transaction()
    if bypass:
        tr.options.set_bypass_unreadable()
    tr.set_versionstamped_value(v, param)
    tr.set_versionstamped_key(vkey, b'x')
    out.append(val(tr.get(v)))
    out.append(val(tr.snapshot.get(v)))
    out.append(val(tr.get(k)))
    out.append(rows(tr, begin, end))
print('\n'.join(out))
"#;

#[test]
fn bypass_unreadable_lets_point_reads_through_versionstamped_writes() {
    fdb_tests::dual::run("rust-client-options", LIMIT, |t| async move {
        let ours = bypass_answers(&t).await;
        let param = hex(&[&b"vs"[..], &[0u8; 10], &[2, 0, 0, 0]].concat());
        let unreadable = "E1036".to_string();
        let expected = vec![
            unreadable.clone(),
            unreadable.clone(),
            unreadable.clone(),
            unreadable.clone(),
            // The versionstamped value as it was set, the stored value under the key's range;
            // the range read still fails.
            param.clone(),
            param,
            hex(b"stored-k"),
            unreadable,
        ];
        assert_eq!(ours, expected, "{}", t.name);
        if !t.exact {
            let script = [PY_PRELUDE, PY_BYPASS].concat();
            if let Some(theirs) = libfdb_c(&t, "bypass_unreadable", &script) {
                assert_eq!(ours, theirs, "libfdb_c");
            }
        }
    });
}

/// Tagged transactions read and commit; a tag too long or one tag too many fails the next
/// read.
async fn tag_answers(t: &Target) -> Vec<String> {
    let k = t.k("t/k");
    let mut out = Vec::new();
    let tx = t.db.create_transaction();
    tx.set_option(TransactionOption::Tag(b"opts_a".to_vec()))
        .unwrap();
    tx.set_option(TransactionOption::AutoThrottleTag(b"opts_b".to_vec()))
        .unwrap();
    out.push(value(tx.get(&k).await));
    tx.set(&k, b"tagged");
    out.push(match tx.commit().await {
        Ok(_) => "committed".into(),
        Err(e) => format!("E{}", e.code().map_or(0, |c| c.0)),
    });
    let tx = t.db.create_transaction();
    let _ = tx.set_option(TransactionOption::Tag(vec![b'x'; 256]));
    out.push(value(tx.get(&k).await));
    let tx = t.db.create_transaction();
    for i in 0..5 {
        tx.set_option(TransactionOption::Tag(format!("opts_{i}").into_bytes()))
            .unwrap();
    }
    let _ = tx.set_option(TransactionOption::Tag(b"opts_0".to_vec()));
    out.push(value(tx.get(&k).await));
    out
}

const PY_TAGS: &str = r#"
k = p + b't/py'  # a key of its own: ours committed t/k
out = []
tr = db.create_transaction()
tr.options.set_tag(b'opts_a')
tr.options.set_auto_throttle_tag(b'opts_b')
out.append(val(tr.get(k)))
tr.set(k, b'tagged')
try:
    tr.commit().wait(); out.append('committed')
except fdb.FDBError as e:
    out.append('E%d' % e.code)
def refused(tr, f):
    try:
        f()
    except fdb.FDBError as e:
        pass
    return val(tr.get(k))
tr2 = db.create_transaction()
out.append(refused(tr2, lambda: tr2.options.set_tag(b'x' * 256)))
tr3 = db.create_transaction()
for i in range(5):
    tr3.options.set_tag(b'opts_%d' % i)
out.append(refused(tr3, lambda: tr3.options.set_tag(b'opts_0')))
print('\n'.join(out))
"#;

#[test]
fn tagged_transactions_commit_and_tag_limits_fail_the_next_read() {
    fdb_tests::dual::run("rust-client-options", LIMIT, |t| async move {
        let ours = tag_answers(&t).await;
        let expected = vec![
            "-".to_string(),
            "committed".into(),
            "E2110".into(),
            "E2109".into(),
        ];
        assert_eq!(ours, expected, "{}", t.name);
        if !t.exact {
            let script = [PY_PRELUDE, PY_TAGS].concat();
            if let Some(theirs) = libfdb_c(&t, "tags", &script) {
                assert_eq!(ours, theirs, "libfdb_c");
            }
        }
    });
}
