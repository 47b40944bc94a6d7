//! `\xff/metadataVersion` as libfdb_c serves it: a read is answered from the read version's
//! reply (or, for a read version set by hand, from the replies the database remembers), needs
//! no `read_system_keys`, and adds a read conflict range unless snapshot; only a versionstamp
//! of the whole value may write it (`client_invalid_operation` otherwise, whatever the
//! options), after which the transaction's own reads of it fail with `accessed_unreadable`,
//! snapshot reads included, unless reading your writes is disabled. The same script runs on
//! the test cluster and, with `FDB_CLUSTER_FILE`, on a real cluster, where its outcomes must
//! equal those of the Python binding over libfdb_c on the same cluster.

use std::time::Duration;

use fdb_driver_tokio::{Database, MutationType, TransactionOption};
use fdb_tests::dual::{self, Target};
use fdb_tests::python::libfdb_c_answers;

const KEY: &[u8] = b"\xff/metadataVersion";
const BUMP: [u8; 14] = [0; 14];

/// A write of the script, by name.
type Write = (&'static str, fn(&fdb_driver_tokio::Transaction));

/// An outcome as a line: `err <code>`, `none`, `stamp@commit` (the first read after the bump
/// saw the versionstamp of its commit), `same` (the value that read saw), or the value.
fn line(
    name: &str,
    r: Result<Option<bytes::Bytes>, fdb_driver_tokio::Error>,
    bumped: &[u8],
    commit: i64,
) -> String {
    let what = match r {
        Err(e) => format!("err {}", e.code().map_or(-1, |c| c.0 as i64)),
        Ok(None) => "none".to_owned(),
        Ok(Some(v)) if v.len() == 10 && v[..8] == commit.to_be_bytes() && name == "read" => {
            "stamp@commit".to_owned()
        }
        Ok(Some(v)) if v[..] == *bumped => "same".to_owned(),
        Ok(Some(v)) => format!("value {}", fdb_tests::to_hex(&v)),
    };
    format!("{name}: {what}")
}

/// The script on this client; `key` is a key of the target's own.
async fn script(db: &Database, key: &[u8]) -> Vec<String> {
    // Bump, then read what the bump wrote.
    let tx = db.create_transaction();
    tx.atomic_op(KEY, BUMP, MutationType::SetVersionstampedValue);
    let commit = tx.commit().await.expect("the bump commits");
    let tx = db.create_transaction();
    let after = tx.get(KEY).await.expect("read after the bump");
    let bumped = after.clone().expect("the bump set it").to_vec();
    let mut out = vec![line("read", Ok(after), &bumped, commit)];

    let tx = db.create_transaction();
    out.push(line(
        "snapshot",
        tx.snapshot_get(KEY).await,
        &bumped,
        commit,
    ));

    let tx = db.create_transaction();
    tx.atomic_op(KEY, BUMP, MutationType::SetVersionstampedValue);
    out.push(line("read_own", tx.get(KEY).await, &bumped, commit));
    let tx = db.create_transaction();
    tx.atomic_op(KEY, BUMP, MutationType::SetVersionstampedValue);
    out.push(line(
        "read_own_snapshot",
        tx.snapshot_get(KEY).await,
        &bumped,
        commit,
    ));
    let tx = db.create_transaction();
    tx.set_option(TransactionOption::ReadYourWritesDisable)
        .unwrap();
    tx.atomic_op(KEY, BUMP, MutationType::SetVersionstampedValue);
    out.push(line(
        "read_own_ryw_disabled",
        tx.get(KEY).await,
        &bumped,
        commit,
    ));

    // Writes other than the bump fail at the next read, system-key options or not.
    for (name, access) in [("", false), ("_access_system_keys", true)] {
        let writes: [Write; 4] = [
            ("set", |tx| tx.set(KEY, b"x")),
            ("add", |tx| tx.atomic_op(KEY, [1u8], MutationType::Add)),
            ("stamp_offset", |tx| {
                let mut p = [0u8; 14];
                p[10] = 1;
                tx.atomic_op(KEY, p, MutationType::SetVersionstampedValue)
            }),
            ("clear", |tx| tx.clear(KEY)),
        ];
        for (w, f) in writes {
            let tx = db.create_transaction();
            if access {
                tx.set_option(TransactionOption::AccessSystemKeys).unwrap();
            }
            f(&tx);
            out.push(line(
                &format!("{w}{name}"),
                tx.get(key).await,
                &bumped,
                commit,
            ));
        }
    }

    // A read version set by hand: the database remembers the metadata version of the
    // versions it was served.
    let v = db.create_transaction().get_read_version().await.unwrap();
    let tx = db.create_transaction();
    tx.set_read_version(v);
    out.push(line("set_read_version", tx.get(KEY).await, &bumped, commit));

    // A range read is an ordinary system-key read.
    let tx = db.create_transaction();
    let mut end = KEY.to_vec();
    end.push(0);
    let r = tx.get_range(KEY, &end, 10).await;
    out.push(format!(
        "range: {}",
        match r {
            Ok(kvs) => format!("{} rows", kvs.len()),
            Err(e) => format!("err {}", e.code().map_or(-1, |c| c.0 as i64)),
        }
    ));

    // The read conflicts with a bump committed meanwhile; a snapshot read does not.
    for snapshot in [false, true] {
        let tx = db.create_transaction();
        let r = if snapshot {
            tx.snapshot_get(KEY).await
        } else {
            tx.get(KEY).await
        };
        r.expect("read");
        let other = db.create_transaction();
        other.atomic_op(KEY, BUMP, MutationType::SetVersionstampedValue);
        other.commit().await.expect("the other bump commits");
        tx.set(key, b"v");
        let r = tx.commit().await.map(|_| None);
        let name = if snapshot {
            "conflict_snapshot"
        } else {
            "conflict"
        };
        out.push(line(name, r, &bumped, commit));
    }
    out
}

/// The same script through the Python binding over libfdb_c.
const PYTHON: &str = r#"
import fdb, sys
fdb.api_version(730)
db = fdb.open(sys.argv[1])
K = b'\xff/metadataVersion'
Z = b'\x00' * 14
key = bytes.fromhex(sys.argv[2])
def line(name, f, bumped=None, commit=None):
    try:
        v = f()
        if v is None or (hasattr(v, 'present') and not v.present()):
            w = 'none'
        else:
            v = bytes(v)
            if len(v) == 10 and v[:8] == commit.to_bytes(8, 'big') and name == 'read':
                w = 'stamp@commit'
            elif v == bumped:
                w = 'same'
            else:
                w = 'value ' + v.hex()
    except fdb.FDBError as e:
        w = 'err %d' % e.code
    print('%s: %s' % (name, w))
tr = db.create_transaction(); tr.set_versionstamped_value(K, Z); tr.commit().wait()
commit = tr.get_committed_version()
tr = db.create_transaction(); bumped = bytes(tr.get(K).wait())
L = lambda n, f: line(n, f, bumped, commit)
L('read', lambda: bumped)
tr = db.create_transaction(); L('snapshot', lambda: tr.snapshot.get(K).wait())
tr = db.create_transaction(); tr.set_versionstamped_value(K, Z); L('read_own', lambda: tr.get(K).wait())
tr = db.create_transaction(); tr.set_versionstamped_value(K, Z); L('read_own_snapshot', lambda: tr.snapshot.get(K).wait())
tr = db.create_transaction(); tr.options.set_read_your_writes_disable(); tr.set_versionstamped_value(K, Z)
L('read_own_ryw_disabled', lambda: tr.get(K).wait())
def stamp_offset(tr):
    tr.set_versionstamped_value(K, b'\x00' * 10 + b'\x01\x00\x00\x00')
for name, access in [('', False), ('_access_system_keys', True)]:
    for w, f in [('set', lambda tr: tr.set(K, b'x')), ('add', lambda tr: tr.add(K, b'\x01')),
                 ('stamp_offset', stamp_offset), ('clear', lambda tr: tr.clear(K))]:
        tr = db.create_transaction()
        if access:
            tr.options.set_access_system_keys()
        try:
            f(tr)
        except fdb.FDBError:
            pass
        L(w + name, lambda: tr.get(key).wait())
t0 = db.create_transaction(); v = t0.get_read_version().wait()
tr = db.create_transaction(); tr.set_read_version(v); L('set_read_version', lambda: tr.get(K).wait())
tr = db.create_transaction()
try:
    print('range: %d rows' % len(tr.get_range(K, K + b'\x00', 10).to_list()))
except fdb.FDBError as e:
    print('range: err %d' % e.code)
for snapshot in [False, True]:
    tr = db.create_transaction()
    (tr.snapshot.get(K) if snapshot else tr.get(K)).wait()
    o = db.create_transaction(); o.set_versionstamped_value(K, Z); o.commit().wait()
    tr[key] = b'v'
    L('conflict_snapshot' if snapshot else 'conflict', lambda: tr.commit().wait())
"#;

/// What libfdb_c answers, the binding's exceptions as FDB's codes (the stamp offset's low
/// byte first: 10 little-endian).
fn expected() -> Vec<String> {
    [
        "read: stamp@commit",
        "snapshot: same",
        "read_own: err 1036",
        "read_own_snapshot: err 1036",
        "read_own_ryw_disabled: same",
        "set: err 2000",
        "add: err 2000",
        "stamp_offset: err 2000",
        "clear: err 2004",
        "set_access_system_keys: err 2000",
        "add_access_system_keys: err 2000",
        "stamp_offset_access_system_keys: err 2000",
        "clear_access_system_keys: none",
        "set_read_version: same",
        "range: err 2004",
        "conflict: err 1020",
        "conflict_snapshot: none",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

#[test]
fn the_metadata_version_as_libfdb_c_serves_it() {
    dual::run(
        "metadata_version",
        Duration::from_secs(60),
        |t: Target| async move {
            let key = t.k("k");
            let got = script(&t.db, &key).await;
            assert_eq!(got, expected(), "{}", t.name);
            if t.exact {
                return;
            }
            let (path, _) = dual::real_cluster_file().expect("a real cluster");
            let Some(py) = libfdb_c_answers(
                "metadata_version",
                PYTHON,
                // A key of its own: this client's script wrote `key`.
                [path.into_os_string(), fdb_tests::to_hex(&t.k("py")).into()],
            ) else {
                return;
            };
            let py: Vec<String> = py.lines().map(str::to_owned).collect();
            assert_eq!(got, py, "this client and libfdb_c on the real cluster");
        },
    );
}

/// No storage server is asked: the read version's reply carries the metadata version, and
/// the database remembers it for a read version set by hand; a version it was never served
/// is read from storage.
#[test]
fn the_metadata_version_comes_from_read_version_replies() {
    use fdb_tests::cluster::{RequestKind, TestCluster};
    let cluster = TestCluster::start();
    let cf =
        fdb_protocol::cluster_file::ClusterFile::parse(&cluster.cluster_file_string()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let db = Database::from_cluster_file(cf, 11).unwrap();
        let tx = db.create_transaction();
        tx.atomic_op(KEY, BUMP, MutationType::SetVersionstampedValue);
        tx.commit().await.unwrap();
        let first = db.create_transaction().get_read_version().await.unwrap();
        // Another commit, so that the next read version is a later one.
        let tx = db.create_transaction();
        tx.set(b"k", b"v");
        tx.commit().await.unwrap();

        cluster.reset_counters();
        let tx = db.create_transaction();
        let v = tx.get(KEY).await.unwrap().expect("bumped");
        let latest = tx.get_read_version().await.unwrap();
        assert!(latest > first + 1);
        assert_eq!(cluster.requests(RequestKind::GetValue), 0);
        assert_eq!(cluster.requests(RequestKind::GetReadVersion), 1);

        let tx = db.create_transaction();
        tx.set_read_version(first);
        assert_eq!(tx.get(KEY).await.unwrap().as_ref(), Some(&v));
        assert_eq!(cluster.requests(RequestKind::GetValue), 0);

        let tx = db.create_transaction();
        tx.set_read_version(first + 1);
        assert_eq!(tx.get(KEY).await.unwrap().as_ref(), Some(&v));
        assert_eq!(
            cluster.requests(RequestKind::GetValue),
            1,
            "never served: read"
        );
    });
}
