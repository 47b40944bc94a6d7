//! Changing the coordinators through `\xff\xff/configuration/coordinators/` on a real
//! 3-process cluster of its own (`cluster.sh` in a temporary directory), libfdb_c (the Python
//! binding) and this client each running the same script, every answer compared: the refused
//! changes (an invalid address, an unreachable one, a duplicate, a bad description, a clear),
//! the move to one coordinator and back to three the way fdbcli's `coordinators` makes it
//! (commit, retry on the error, until the "No change" message), and the reads after.
//!
//! Each client has a cluster file of its own, which it must rewrite as it follows the cluster:
//! this client is open while libfdb_c moves the coordinators twice and must still work after,
//! and libfdb_c opens its file again after this client's two moves. The coordinators end where
//! they started; the cluster is stopped and removed when the test ends.
//!
//! Runs when `cluster.sh` is found (`$FDB_SHARED_DIR`, else `../shared/fdb` beside the project)
//! and the Python binding loads; skipped with a notice otherwise.

use std::path::{Path, PathBuf};

use fdb_driver_mio::{Database, Error, Transaction};
use fdb_protocol::cluster_file::{ClusterFile, Coordinator};
use fdb_protocol::TransactionOption;
use fdb_tests::real::{ClusterScript, RealCluster};

const PREFIX: &[u8] = b"\xff\xff/configuration/coordinators/";

/// The coordinators a cluster file names, sorted as strings (as the special key shows them).
fn coordinators_in(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap();
    let cs = ClusterFile::parse_file_bytes(&bytes).unwrap();
    let mut v: Vec<String> = cs
        .coordinators
        .iter()
        .map(|c| match c {
            Coordinator::Address(a) => a.to_string(),
            Coordinator::Hostname { host, port, .. } => format!("{host}:{port}"),
        })
        .collect();
    v.sort();
    v.join(",")
}

fn shown(r: Result<Option<bytes::Bytes>, Error>) -> String {
    match r {
        Ok(Some(v)) => String::from_utf8_lossy(&v).into_owned(),
        Ok(None) => "-".into(),
        Err(e) => format!("E{}", e.code().map_or(0, |c| c.0)),
    }
}

/// fdbcli's `changeCoordinators` loop: set, commit, retry what `on_error` retries, until the
/// commit fails with `special_keys_api_failure`; then whether it retried, and the message.
fn change(db: &Database, key: &str, value: Option<&str>) -> String {
    let tx = db.create_transaction();
    let k = [PREFIX, key.as_bytes()].concat();
    for retries in 0..30 {
        tx.set_option(TransactionOption::SpecialKeySpaceEnableWrites)
            .unwrap();
        match value {
            Some(v) => tx.set(&k, v.as_bytes()),
            None => tx.clear(&k),
        }
        let e = match tx.commit() {
            Ok(_) => return "committed".into(),
            Err(e) => e,
        };
        let code = e.code().map_or(0, |c| c.0);
        if code == 2117 {
            let msg = shown(tx.get(b"\xff\xff/error_message"));
            return format!("retried={} E{code} {msg}", retries > 0);
        }
        if let Err(e) = tx.on_error(e.code().unwrap()) {
            return format!("E{}", e.code().map_or(0, |c| c.0));
        }
    }
    "too many retries".into()
}

/// A write and a read back through the client: it still reaches the cluster.
fn works(db: &Database, tag: &str) -> String {
    let key = format!("coordinators_change/{tag}").into_bytes();
    let r = db.run(|tx: &Transaction| {
        tx.set(&key, b"v");
        Ok(())
    });
    if let Err(e) = r {
        return format!("write E{}", e.code().map_or(0, |c| c.0));
    }
    shown(db.create_transaction().get(&key))
}

fn read(db: &Database, key: &str) -> String {
    shown(
        db.create_transaction()
            .get([PREFIX, key.as_bytes()].concat()),
    )
}

/// The script through this client; `all` is the three coordinators, `one` the first.
fn our_answers(db: &Database, file: &Path, one: &str, all: &str) -> Vec<String> {
    let mut out = vec![
        read(db, "processes"),
        read(db, "cluster_description"),
        change(db, "processes", Some("foo")),
        change(db, "processes", Some("127.0.0.1:1")),
        change(db, "processes", Some(&format!("{one},{one}"))),
        change(db, "cluster_description", Some("a-b")),
        change(db, "processes", None),
        change(db, "processes", Some(one)),
        read(db, "processes"),
        coordinators_in(file),
        works(db, "ours"),
        change(db, "processes", Some(all)),
        read(db, "processes"),
        coordinators_in(file),
        change(db, "processes", Some(all)),
    ];
    out.push(works(db, "ours_after"));
    out
}

const PYTHON: &str = r#"
import sys, fdb
fdb.api_version(730)
path, one, all = sys.argv[1], sys.argv[2], sys.argv[3]
db = fdb.open(path)
P = b'\xff\xff/configuration/coordinators/'
def shown(f):
    try:
        v = f.wait()
        return '-' if v is None else bytes(v).decode()
    except fdb.FDBError as e:
        return 'E%d' % e.code
def read(key):
    tr = db.create_transaction()
    return shown(tr.get(P + key))
def change(key, value):
    tr = db.create_transaction()
    for retries in range(30):
        try:
            tr.options.set_special_key_space_enable_writes()
            if value is None:
                tr.clear(P + key)
            else:
                tr[P + key] = value.encode()
            tr.commit().wait()
            return 'committed'
        except fdb.FDBError as e:
            if e.code == 2117:
                return 'retried=%s E2117 %s' % ('true' if retries > 0 else 'false', shown(tr.get(b'\xff\xff/error_message')))
            try:
                tr.on_error(e).wait()
            except fdb.FDBError as e2:
                return 'E%d' % e2.code
    return 'too many retries'
def coordinators_in():
    line = [l for l in open(path).read().splitlines() if l and not l.startswith('#')][0]
    return ','.join(sorted(line.split('@')[1].split(',')))
def works(tag):
    key = b'coordinators_change/' + tag.encode()
    @fdb.transactional
    def w(tr):
        tr[key] = b'v'
    try:
        w(db)
    except fdb.FDBError as e:
        return 'write E%d' % e.code
    tr = db.create_transaction()
    return shown(tr.get(key))
if len(sys.argv) > 4:
    print(works('theirs_after'))
    print(coordinators_in())
    sys.exit(0)
out = [read(b'processes'), read(b'cluster_description'),
    change(b'processes', 'foo'), change(b'processes', '127.0.0.1:1'),
    change(b'processes', one + ',' + one), change(b'cluster_description', 'a-b'),
    change(b'processes', None), change(b'processes', one), read(b'processes'),
    coordinators_in(), works('theirs'), change(b'processes', all), read(b'processes'),
    coordinators_in(), change(b'processes', all), works('theirs_after')]
for l in out:
    print(l)
"#;

fn copy_file(from: &Path, dir: &Path, name: &str) -> PathBuf {
    let to = dir.join(name);
    std::fs::copy(from, &to).unwrap();
    to
}

#[test]
fn coordinators_move_and_back_as_with_libfdb_c() {
    let script = match ClusterScript::find() {
        Ok(Some(s)) => s,
        Ok(None) => {
            println!("coordinators_change: no cluster.sh (FDB_SHARED_DIR); skipped");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let cluster = match RealCluster::start(&script, 3, "memory") {
        Ok(c) => c,
        Err(e) if !script.required => {
            println!("coordinators_change: no 3-process cluster ({e}); skipped");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let servers = cluster.cluster_file();
    let start = coordinators_in(&servers);
    let one = start.split(',').next().unwrap().to_owned();
    // Named out of order: the change sorts them.
    let all: String = start.split(',').rev().collect::<Vec<_>>().join(",");
    let ours_file = copy_file(&servers, cluster.dir(), "ours.cluster");
    let theirs_file = copy_file(&servers, cluster.dir(), "theirs.cluster");
    let db = Database::open_file_with_seed(&ours_file, 7).unwrap();
    assert_eq!(works(&db, "before"), "v");

    let Some(out) = fdb_tests::python::libfdb_c_answers(
        "coordinators_change",
        PYTHON,
        [theirs_file.as_os_str(), one.as_ref(), all.as_ref()],
    ) else {
        return;
    };
    let theirs: Vec<&str> = out.lines().collect();
    // This client stayed open while libfdb_c moved the cluster twice.
    assert_eq!(
        works(&db, "after_theirs"),
        "v",
        "ours after libfdb_c's moves"
    );
    assert_eq!(coordinators_in(&ours_file), start);

    let ours = our_answers(&db, &ours_file, &one, &all);
    for (i, (o, t)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(o, t, "answer {i}");
    }
    assert_eq!(ours.len(), theirs.len());
    // What the script implies, beyond agreeing.
    assert_eq!(ours[0], start);
    assert!(ours[2].contains("'foo' is not a valid network endpoint address"));
    assert!(ours[3].contains("unreachable") && ours[3].contains(r#""retriable":true"#));
    assert!(ours[7].starts_with("retried=true") && ours[7].contains("No change"));
    assert_eq!(
        (ours[8].as_str(), ours[9].as_str()),
        (one.as_str(), one.as_str())
    );
    assert_eq!(
        (ours[12].as_str(), ours[13].as_str()),
        (start.as_str(), start.as_str())
    );
    assert!(ours[14].starts_with("retried=false") && ours[14].contains("No change"));
    assert_eq!(coordinators_in(&servers), start, "the servers follow too");

    // libfdb_c, opened again on its file from before this client's moves, follows them.
    let again = fdb_tests::python::libfdb_c_answers(
        "coordinators_change",
        PYTHON,
        [
            theirs_file.as_os_str(),
            one.as_ref(),
            all.as_ref(),
            "again".as_ref(),
        ],
    )
    .unwrap();
    assert_eq!(again.lines().collect::<Vec<_>>(), ["v", start.as_str()]);
}
