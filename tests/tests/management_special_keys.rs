//! The management special keys fdbcli 7.x drives (`\xff\xff/management/` beyond the tenant
//! module): reading and changing exclusions by address and locality (with the space check and
//! the `force` options), the database lock, consistency-check suspension, data distribution's
//! mode and maintenance zones, with the errors (`special_keys_api_failure` and its
//! `\xff\xff/error_message`, `database_locked`).
//!
//! The same script runs on the test cluster, checked against what it implies, and on a real
//! cluster (`FDB_CLUSTER_FILE`) through the Python binding over libfdb_c 7.3.77 too, where
//! every answer must be the same. It excludes only addresses and localities no process has
//! (`127.0.0.2:4500`, `127.0.0.3`, `zoneid:nowhere`), or the storage server's own address
//! where the space check refuses it; everything it changes it changes back.

use fdb_driver_mio::{Database, Error, KeyValue, Transaction};
use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::TransactionOption;
use fdb_tests::cluster::TestCluster;
use fdb_tests::to_hex as hex;

const UID: &str = "0123456789abcdef0123456789abcdef";
const OTHER_UID: &str = "fedcba9876543210fedcba9876543210";

/// A management key: `\xff\xff/management/` and `s`.
fn m(s: &str) -> Vec<u8> {
    let mut k = b"\xff\xff/management/".to_vec();
    k.extend_from_slice(s.as_bytes());
    k
}

fn code(e: &Error) -> String {
    format!("E{}", e.code().map_or(0, |c| c.0))
}

fn rows(r: Result<Vec<KeyValue>, Error>) -> String {
    match r {
        Ok(rows) => rows
            .iter()
            .map(|kv| format!("{}={}", hex(&kv.key), hex(&kv.value)))
            .collect::<Vec<_>>()
            .join(","),
        Err(e) => code(&e),
    }
}

fn value(r: Result<Option<bytes::Bytes>, Error>) -> String {
    match r {
        Ok(Some(v)) => hex(&v),
        Ok(None) => "-".into(),
        Err(e) => code(&e),
    }
}

fn commit(tx: &Transaction) -> String {
    match tx.commit() {
        Ok(_) => "ok".into(),
        Err(e) => code(&e),
    }
}

fn message(tx: &Transaction) -> String {
    match tx.get(b"\xff\xff/error_message") {
        Ok(Some(v)) => String::from_utf8_lossy(&v).into_owned(),
        Ok(None) => "-".into(),
        Err(e) => code(&e),
    }
}

fn writer(db: &Database) -> Transaction {
    let tx = db.create_transaction();
    tx.set_option(TransactionOption::SpecialKeySpaceEnableWrites)
        .unwrap();
    tx
}

/// The address of the storage server, from the status document.
fn storage_address(db: &Database) -> String {
    let doc: serde_json::Value = serde_json::from_str(&db.status_json().unwrap()).unwrap();
    let processes = doc["cluster"]["processes"].as_object().expect("processes");
    processes
        .values()
        .find(|p| {
            p["roles"]
                .as_array()
                .is_some_and(|r| r.iter().any(|r| r["role"] == "storage"))
        })
        .and_then(|p| p["address"].as_str())
        .expect("a storage server")
        .to_owned()
}

/// A maintenance row with its seconds left checked (they depend on the read version).
fn maintenance(r: Result<Vec<KeyValue>, Error>) -> String {
    match r {
        Ok(rows) => rows
            .iter()
            .map(|kv| {
                let secs: i64 = std::str::from_utf8(&kv.value).unwrap().parse().unwrap();
                let shown = if (90..=100).contains(&secs) {
                    "about100".to_owned()
                } else {
                    secs.to_string()
                };
                format!("{}={shown}", hex(&kv.key))
            })
            .collect::<Vec<_>>()
            .join(","),
        Err(e) => code(&e),
    }
}

/// The script's answers, one line each.
fn our_answers(db: &Database) -> Vec<String> {
    let range = |tx: &Transaction, s: &str| {
        let mut end = m(s);
        *end.last_mut().unwrap() += 1;
        rows(tx.get_range(m(s), end, 0))
    };
    let storage = storage_address(db);
    let mut out = Vec::new();

    // Reads of an untouched cluster.
    let tx = db.create_transaction();
    for part in [
        "excluded/",
        "failed/",
        "excluded_locality/",
        "failed_locality/",
        "data_distribution/",
        "maintenance/",
        "options/",
    ] {
        out.push(range(&tx, part));
    }
    out.push(value(tx.get(m("db_locked"))));
    out.push(value(tx.get(m("consistency_check_suspended"))));
    out.push(value(tx.get(m("min_required_commit_version"))));
    out.push(value(tx.get(m("version_epoch"))));
    out.push(range(&tx, "in_progress_exclusion/"));
    out.push(rows(tx.get_range(m("excluded/"), m("failed_locality0"), 0)));
    // A selector walking out of the tenant module into the parts before it.
    out.push(rows(tx.get_range_with(
        fdb_driver_mio::KeySelector::last_less_than(m("tenant/map/")),
        fdb_driver_mio::KeySelector::first_greater_or_equal(m("tenant/map0")),
        fdb_driver_mio::RangeOptions::default(),
        false,
    )));
    out.push(rows(tx.get_range(
        &b"\xff\xff/configuration/coordinators/"[..],
        &b"\xff\xff/configuration/coordinators0"[..],
        0,
    )));
    for part in ["class_type", "class_source"] {
        let b = format!("\u{ff}\u{ff}/configuration/process/{part}/");
        let e = format!("\u{ff}\u{ff}/configuration/process/{part}0");
        let latin1 = |s: &str| s.chars().map(|c| c as u8).collect::<Vec<u8>>();
        out.push(rows(tx.get_range(latin1(&b), latin1(&e), 0)));
    }

    // A transaction sees its own writes: the options it knows, exclusions with empty values.
    let w = writer(db);
    w.set(m("options/excluded/force"), b"x");
    w.set(m("options/bogus"), b"x");
    w.set(m("excluded/127.0.0.2:4500"), b"ignored");
    out.push(range(&w, "options/"));
    out.push(range(&w, "excluded/"));
    w.clear(m("options/excluded/force"));
    out.push(range(&w, "options/"));
    w.set(m("db_locked"), UID.as_bytes());
    out.push(value(w.get(m("db_locked"))));
    w.set(m("maintenance/zz"), b"7");
    out.push(range(&w, "maintenance/"));
    drop(w);

    // Excluding an address no process has passes the space check; including it again.
    let w = writer(db);
    w.set(m("excluded/127.0.0.2:4500"), b"");
    out.push(commit(&w));
    out.push(range(&db.create_transaction(), "excluded/"));
    out.push(range(&db.create_transaction(), "in_progress_exclusion/"));
    let w = writer(db);
    w.clear(m("excluded/127.0.0.2:4500"));
    out.push(commit(&w));
    out.push(range(&db.create_transaction(), "excluded/"));

    // The only storage server: refused by the space check. Addresses that are none.
    for addr in [storage.as_str(), "nonsense", "127.0.0.2:4500:tls"] {
        let w = writer(db);
        w.set(m(&format!("excluded/{addr}")), b"");
        out.push(commit(&w));
        out.push(message(&w).replace(&storage, "STORAGE"));
    }

    // A whole machine, with force; included again by a range clear.
    let w = writer(db);
    w.set(m("options/excluded/force"), b"");
    w.set(m("excluded/127.0.0.3"), b"");
    out.push(commit(&w));
    out.push(range(&db.create_transaction(), "excluded/"));
    let w = writer(db);
    w.clear_range(m("excluded/"), m("excluded0"));
    out.push(commit(&w));
    out.push(range(&db.create_transaction(), "excluded/"));

    // Failed, with force.
    let w = writer(db);
    w.set(m("options/failed/force"), b"");
    w.set(m("failed/127.0.0.2:4500"), b"");
    out.push(commit(&w));
    out.push(range(&db.create_transaction(), "failed/"));
    let w = writer(db);
    w.clear(m("failed/127.0.0.2:4500"));
    out.push(commit(&w));
    out.push(range(&db.create_transaction(), "failed/"));

    // Localities: one no process has passes the check; one that is no locality.
    let w = writer(db);
    w.set(m("excluded_locality/locality_zoneid:nowhere"), b"");
    out.push(commit(&w));
    out.push(range(&db.create_transaction(), "excluded_locality/"));
    let w = writer(db);
    w.clear(m("excluded_locality/locality_zoneid:nowhere"));
    out.push(commit(&w));
    let w = writer(db);
    w.set(m("options/failed_locality/force"), b"");
    w.set(m("failed_locality/locality_zoneid:nowhere"), b"");
    out.push(commit(&w));
    out.push(range(&db.create_transaction(), "failed_locality/"));
    let w = writer(db);
    w.clear_range(m("failed_locality/"), m("failed_locality0"));
    out.push(commit(&w));
    let w = writer(db);
    w.set(m("excluded_locality/zoneid"), b"");
    out.push(commit(&w));
    out.push(message(&w));
    out.push(rows(db.create_transaction().get_range(
        m("excluded/"),
        m("failed_locality0"),
        0,
    )));

    // The lock: taken, held by this UID, refused to another, released.
    let w = writer(db);
    w.set(m("db_locked"), UID.as_bytes());
    out.push(commit(&w));
    out.push(value(db.create_transaction().get(m("db_locked"))));
    let w = writer(db);
    w.set(m("db_locked"), OTHER_UID.as_bytes());
    out.push(commit(&w));
    let w = writer(db);
    w.set(m("db_locked"), UID.as_bytes());
    out.push(commit(&w));
    let w = writer(db);
    w.set(m("db_locked"), b"not hex");
    out.push(commit(&w));
    out.push(message(&w));
    let w = writer(db);
    w.clear(m("db_locked"));
    out.push(commit(&w));
    out.push(value(db.create_transaction().get(m("db_locked"))));

    // Consistency-check suspension.
    let w = writer(db);
    w.set(m("consistency_check_suspended"), b"");
    out.push(commit(&w));
    out.push(value(
        db.create_transaction()
            .get(m("consistency_check_suspended")),
    ));
    let w = writer(db);
    w.clear(m("consistency_check_suspended"));
    out.push(commit(&w));
    out.push(value(
        db.create_transaction()
            .get(m("consistency_check_suspended")),
    ));

    // Data distribution: values refused, the mode set and put back.
    let before = db
        .create_transaction()
        .get(m("data_distribution/mode"))
        .unwrap();
    for (key, v) in [("mode", "5"), ("mode", "x"), ("other", "1")] {
        let w = writer(db);
        w.set(m(&format!("data_distribution/{key}")), v.as_bytes());
        out.push(commit(&w));
        out.push(message(&w));
    }
    let w = writer(db);
    w.set(m("data_distribution/mode"), b"1");
    w.set(m("data_distribution/rebalance_ignored"), b"");
    out.push(commit(&w));
    out.push(range(&db.create_transaction(), "data_distribution/"));
    let w = writer(db);
    match before.as_deref() {
        Some(b"-1") | None => w.clear(m("data_distribution/mode")),
        Some(v) => w.set(m("data_distribution/mode"), v),
    }
    w.clear(m("data_distribution/rebalance_ignored"));
    out.push(commit(&w));
    out.push(range(&db.create_transaction(), "data_distribution/"));

    // Maintenance: one zone for 100 seconds; two zones, a negative time; the zone cleared.
    let w = writer(db);
    w.set(m("maintenance/zone_a"), b"100");
    out.push(commit(&w));
    let tx = db.create_transaction();
    out.push(maintenance(tx.get_range(
        m("maintenance/"),
        m("maintenance0"),
        0,
    )));
    let w = writer(db);
    w.set(m("maintenance/a"), b"1");
    w.set(m("maintenance/b"), b"1");
    out.push(commit(&w));
    out.push(message(&w));
    let w = writer(db);
    w.set(m("maintenance/a"), b"-5");
    out.push(commit(&w));
    out.push(message(&w));
    let w = writer(db);
    w.clear(m("maintenance/zone_a"));
    out.push(commit(&w));
    out.push(range(&db.create_transaction(), "maintenance/"));

    // Process classes (`setclass`): an address no worker has, addresses and classes that
    // are none, clears refused as they are made; the storage server set to the class it has
    // (unset) by `setclass`, then back to its command line's.
    let class_type = |a: &str| {
        let mut k = b"\xff\xff/configuration/process/class_type/".to_vec();
        k.extend_from_slice(a.as_bytes());
        k
    };
    let class_source = |a: &str| {
        let mut k = b"\xff\xff/configuration/process/class_source/".to_vec();
        k.extend_from_slice(a.as_bytes());
        k
    };
    for (addr, class) in [
        ("127.0.0.2:4500", "storage"),
        ("nonsense", "storage"),
        ("127.0.0.2:4500", "bogus"),
    ] {
        let w = writer(db);
        w.set(class_type(addr), class.as_bytes());
        out.push(commit(&w));
        out.push(message(&w));
    }
    let w = writer(db);
    w.clear(class_type("127.0.0.2:4500"));
    out.push(commit(&w));
    out.push(message(&w));
    let w = writer(db);
    w.clear_range(
        class_type(""),
        b"\xff\xff/configuration/process/class_type0",
    );
    out.push(commit(&w));
    out.push(message(&w));
    let tx = db.create_transaction();
    let unset = value(tx.get(class_type(&storage))) == hex(b"unset")
        && value(tx.get(class_source(&storage))) == hex(b"command_line");
    if unset {
        for class in ["unset", "default"] {
            let w = writer(db);
            w.set(class_type(&storage), class.as_bytes());
            out.push(commit(&w));
            let tx = db.create_transaction();
            out.push(value(tx.get(class_type(&storage))));
            out.push(value(tx.get(class_source(&storage))));
        }
    } else {
        out.push("the storage server has a class of its own: not changed".into());
    }

    // `profiling/` is no module from API version 720 on: no write module, no rows.
    let w = writer(db);
    w.set(m("profiling/client_txn_sample_rate"), b"1");
    out.push(commit(&w));
    out.push(range(&db.create_transaction(), "profiling/"));

    // Not for a transaction inside a tenant.
    use fdb_driver_mio::tenant_management as tm;
    let name = b"mgmt-special-keys";
    let _ = tm::delete_tenant(db, name);
    tm::create_tenant(db, name).unwrap();
    let tx = db.open_tenant(name).create_transaction();
    out.push(value(tx.get(m("db_locked"))));
    out.push(rows(tx.get_range(m("excluded/"), m("excluded0"), 0)));
    tm::delete_tenant(db, name).unwrap();
    out
}

const PYTHON: &str = r#"
import sys, json
import fdb
fdb.api_version(730)
db = fdb.open(sys.argv[1])
UID = b"0123456789abcdef0123456789abcdef"
OTHER_UID = b"fedcba9876543210fedcba9876543210"
def m(s): return b"\xff\xff/management/" + s.encode()
def err(e): return "E%d" % e.code
def rows_of(f):
    try:
        return ",".join(bytes(kv.key).hex() + "=" + bytes(kv.value).hex() for kv in f())
    except fdb.FDBError as e:
        return err(e)
def rng(tr, s):
    end = m(s)[:-1] + bytes([m(s)[-1] + 1])
    return rows_of(lambda: list(tr.get_range(m(s), end)))
def value(f):
    try:
        v = f().wait()
        return "-" if not v.present() else bytes(v).hex()
    except fdb.FDBError as e:
        return err(e)
def fresh(key):
    t = db.create_transaction()
    return value(lambda: t.get(key))
def commit(tr):
    try:
        tr.commit().wait()
        return "ok"
    except fdb.FDBError as e:
        return err(e)
def message(tr):
    try:
        v = tr.get(b"\xff\xff/error_message").wait()
        return "-" if not v.present() else bytes(v).decode()
    except fdb.FDBError as e:
        return err(e)
def writer():
    tr = db.create_transaction()
    tr.options.set_special_key_space_enable_writes()
    return tr
def maintenance(tr):
    try:
        out = []
        for kv in tr.get_range(m("maintenance/"), m("maintenance0")):
            secs = int(bytes(kv.value))
            out.append(bytes(kv.key).hex() + "=" + ("about100" if 90 <= secs <= 100 else str(secs)))
        return ",".join(out)
    except fdb.FDBError as e:
        return err(e)
status = json.loads(bytes(db[b"\xff\xff/status/json"]))
storage = [p["address"] for p in status["cluster"]["processes"].values()
           if any(r["role"] == "storage" for r in p.get("roles", []))][0]
out = []
tr = db.create_transaction()
for part in ["excluded/", "failed/", "excluded_locality/", "failed_locality/",
             "data_distribution/", "maintenance/", "options/"]:
    out.append(rng(tr, part))
out.append(value(lambda: tr.get(m("db_locked"))))
out.append(value(lambda: tr.get(m("consistency_check_suspended"))))
out.append(value(lambda: tr.get(m("min_required_commit_version"))))
out.append(value(lambda: tr.get(m("version_epoch"))))
out.append(rng(tr, "in_progress_exclusion/"))
out.append(rows_of(lambda: list(tr.get_range(m("excluded/"), m("failed_locality0")))))
out.append(rows_of(lambda: list(tr.get_range(fdb.KeySelector.last_less_than(m("tenant/map/")), fdb.KeySelector.first_greater_or_equal(m("tenant/map0"))))))
out.append(rows_of(lambda: list(tr.get_range(b"\xff\xff/configuration/coordinators/", b"\xff\xff/configuration/coordinators0"))))
for part in [b"class_type", b"class_source"]:
    b = b"\xff\xff/configuration/process/" + part
    out.append(rows_of(lambda: list(tr.get_range(b + b"/", b + b"0"))))
w = writer()
w[m("options/excluded/force")] = b"x"
w[m("options/bogus")] = b"x"
w[m("excluded/127.0.0.2:4500")] = b"ignored"
out.append(rng(w, "options/"))
out.append(rng(w, "excluded/"))
w.clear(m("options/excluded/force"))
out.append(rng(w, "options/"))
w[m("db_locked")] = UID
out.append(value(lambda: w.get(m("db_locked"))))
w[m("maintenance/zz")] = b"7"
out.append(rng(w, "maintenance/"))
w = writer()
w[m("excluded/127.0.0.2:4500")] = b""
out.append(commit(w))
out.append(rng(db.create_transaction(), "excluded/"))
out.append(rng(db.create_transaction(), "in_progress_exclusion/"))
w = writer()
w.clear(m("excluded/127.0.0.2:4500"))
out.append(commit(w))
out.append(rng(db.create_transaction(), "excluded/"))
for addr in [storage, "nonsense", "127.0.0.2:4500:tls"]:
    w = writer()
    w[m("excluded/" + addr)] = b""
    out.append(commit(w))
    out.append(message(w).replace(storage, "STORAGE"))
w = writer()
w[m("options/excluded/force")] = b""
w[m("excluded/127.0.0.3")] = b""
out.append(commit(w))
out.append(rng(db.create_transaction(), "excluded/"))
w = writer()
w.clear_range(m("excluded/"), m("excluded0"))
out.append(commit(w))
out.append(rng(db.create_transaction(), "excluded/"))
w = writer()
w[m("options/failed/force")] = b""
w[m("failed/127.0.0.2:4500")] = b""
out.append(commit(w))
out.append(rng(db.create_transaction(), "failed/"))
w = writer()
w.clear(m("failed/127.0.0.2:4500"))
out.append(commit(w))
out.append(rng(db.create_transaction(), "failed/"))
w = writer()
w[m("excluded_locality/locality_zoneid:nowhere")] = b""
out.append(commit(w))
out.append(rng(db.create_transaction(), "excluded_locality/"))
w = writer()
w.clear(m("excluded_locality/locality_zoneid:nowhere"))
out.append(commit(w))
w = writer()
w[m("options/failed_locality/force")] = b""
w[m("failed_locality/locality_zoneid:nowhere")] = b""
out.append(commit(w))
out.append(rng(db.create_transaction(), "failed_locality/"))
w = writer()
w.clear_range(m("failed_locality/"), m("failed_locality0"))
out.append(commit(w))
w = writer()
w[m("excluded_locality/zoneid")] = b""
out.append(commit(w))
out.append(message(w))
out.append(rows_of(lambda: list(db.create_transaction().get_range(m("excluded/"), m("failed_locality0")))))
w = writer()
w[m("db_locked")] = UID
out.append(commit(w))
out.append(fresh(m("db_locked")))
w = writer()
w[m("db_locked")] = OTHER_UID
out.append(commit(w))
w = writer()
w[m("db_locked")] = UID
out.append(commit(w))
w = writer()
w[m("db_locked")] = b"not hex"
out.append(commit(w))
out.append(message(w))
w = writer()
w.clear(m("db_locked"))
out.append(commit(w))
out.append(fresh(m("db_locked")))
w = writer()
w[m("consistency_check_suspended")] = b""
out.append(commit(w))
out.append(fresh(m("consistency_check_suspended")))
w = writer()
w.clear(m("consistency_check_suspended"))
out.append(commit(w))
out.append(fresh(m("consistency_check_suspended")))
t = db.create_transaction()
before = t.get(m("data_distribution/mode")).wait()
for key, v in [("mode", b"5"), ("mode", b"x"), ("other", b"1")]:
    w = writer()
    w[m("data_distribution/" + key)] = v
    out.append(commit(w))
    out.append(message(w))
w = writer()
w[m("data_distribution/mode")] = b"1"
w[m("data_distribution/rebalance_ignored")] = b""
out.append(commit(w))
out.append(rng(db.create_transaction(), "data_distribution/"))
w = writer()
if not before.present() or bytes(before) == b"-1":
    w.clear(m("data_distribution/mode"))
else:
    w[m("data_distribution/mode")] = bytes(before)
w.clear(m("data_distribution/rebalance_ignored"))
out.append(commit(w))
out.append(rng(db.create_transaction(), "data_distribution/"))
w = writer()
w[m("maintenance/zone_a")] = b"100"
out.append(commit(w))
out.append(maintenance(db.create_transaction()))
w = writer()
w[m("maintenance/a")] = b"1"
w[m("maintenance/b")] = b"1"
out.append(commit(w))
out.append(message(w))
w = writer()
w[m("maintenance/a")] = b"-5"
out.append(commit(w))
out.append(message(w))
w = writer()
w.clear(m("maintenance/zone_a"))
out.append(commit(w))
out.append(rng(db.create_transaction(), "maintenance/"))
def class_type(a): return b"\xff\xff/configuration/process/class_type/" + a.encode()
def class_source(a): return b"\xff\xff/configuration/process/class_source/" + a.encode()
for addr, cls in [("127.0.0.2:4500", b"storage"), ("nonsense", b"storage"), ("127.0.0.2:4500", b"bogus")]:
    w = writer()
    w[class_type(addr)] = cls
    out.append(commit(w))
    out.append(message(w))
w = writer()
try:
    w.clear(class_type("127.0.0.2:4500"))
    out.append(commit(w))
except fdb.FDBError as e:
    out.append(err(e))
out.append(message(w))
w = writer()
try:
    w.clear_range(class_type(""), b"\xff\xff/configuration/process/class_type0")
    out.append(commit(w))
except fdb.FDBError as e:
    out.append(err(e))
out.append(message(w))
unset = fresh(class_type(storage)) == b"unset".hex() and fresh(class_source(storage)) == b"command_line".hex()
if unset:
    for cls in [b"unset", b"default"]:
        w = writer()
        w[class_type(storage)] = cls
        out.append(commit(w))
        out.append(fresh(class_type(storage)))
        out.append(fresh(class_source(storage)))
else:
    out.append("the storage server has a class of its own: not changed")
w = writer()
try:
    w[m("profiling/client_txn_sample_rate")] = b"1"
    out.append(commit(w))
except fdb.FDBError as e:
    out.append(err(e))
out.append(rng(db.create_transaction(), "profiling/"))
name = b"mgmt-special-keys"
try:
    fdb.tenant_management.delete_tenant(db, name)
except fdb.FDBError:
    pass
fdb.tenant_management.create_tenant(db, name)
t = db.open_tenant(name)
tr = t.create_transaction()
out.append(value(lambda: tr.get(m("db_locked"))))
out.append(rng(tr, "excluded/"))
fdb.tenant_management.delete_tenant(db, name)
for line in out:
    print(line)
"#;

/// Leaves the cluster as the script found it even if the script stopped half-way: no lock,
/// none of the exclusions, suspension or maintenance zone it makes.
fn put_back(db: &Database) {
    let tx = db.create_transaction();
    for o in [
        TransactionOption::AccessSystemKeys,
        TransactionOption::LockAware,
    ] {
        tx.set_option(o).unwrap();
    }
    for key in [
        &b"\xff/dbLocked"[..],
        b"\xff/conf/excluded/127.0.0.2:4500",
        b"\xff/conf/excluded/127.0.0.3",
        b"\xff/conf/failed/127.0.0.2:4500",
        b"\xff/conf/excluded_locality/locality_zoneid:nowhere",
        b"\xff/conf/failed_locality/locality_zoneid:nowhere",
        b"\xff\x02/healthyZone",
        b"\xff\x02/rebalanceDDIgnored",
    ] {
        tx.clear(key);
    }
    tx.clear(b"\xff\x02/ConsistencyCheck/Suspend");
    tx.commit().unwrap();
}

fn h(s: &str) -> String {
    hex(&m(s))
}

#[test]
fn management_special_keys_on_the_test_cluster() {
    // One storage server, like the real cluster of the comparison: excluding it leaves no
    // space.
    let cluster = TestCluster::builder().storage_servers(1).start();
    let text = cluster.cluster_file_string();
    let db = Database::from_cluster_file(ClusterFile::parse(&text).unwrap(), 1).unwrap();
    let got = our_answers(&db);
    put_back(&db);
    let mut i = 0;
    let mut next = || {
        i += 1;
        got[i - 1].clone()
    };
    for part in [
        "excluded/",
        "failed/",
        "excluded_locality/",
        "failed_locality/",
    ] {
        assert_eq!(next(), "", "{part} of an untouched cluster");
    }
    assert_eq!(
        next(),
        format!("{}={}", h("data_distribution/mode"), hex(b"-1")),
        "no mode set"
    );
    assert_eq!(next(), "", "no maintenance");
    assert_eq!(next(), "", "no options");
    assert_eq!(next(), "-", "not locked");
    assert_eq!(next(), "-", "not suspended");
    assert_eq!(next(), "-", "no minimum commit version");
    assert_eq!(next(), "-", "no version epoch");
    assert_eq!(next(), "", "no exclusion in progress");
    assert_eq!(next(), "", "several parts at once");
    // A selector walks the whole module, `auto_coordinators` too, which fails where no
    // worker list is kept (the real cluster's answer is the mode's row).
    assert_eq!(
        next(),
        "E2117",
        "walked back to the last row before the tenant map"
    );
    let cs = ClusterFile::parse(&text).unwrap().to_string();
    let (key, coordinators) = cs.split_once('@').unwrap();
    let conf =
        |s: &str| hex(&[&b"\xff\xff/configuration/coordinators/"[..], s.as_bytes()].concat());
    assert_eq!(
        next(),
        format!(
            "{}={},{}={}",
            conf("cluster_description"),
            hex(key.split(':').next().unwrap().as_bytes()),
            conf("processes"),
            hex(coordinators.as_bytes())
        ),
        "the coordinators"
    );
    assert_eq!(next(), "", "no worker list on the test cluster");
    assert_eq!(next(), "", "no worker list on the test cluster");
    assert_eq!(
        next(),
        format!("{}=", h("options/excluded/force")),
        "own option"
    );
    assert_eq!(
        next(),
        format!("{}=", h("excluded/127.0.0.2:4500")),
        "own exclusion"
    );
    assert_eq!(next(), "", "a clear forgets the option");
    assert_eq!(next(), hex(UID.as_bytes()), "own lock");
    assert_eq!(
        next(),
        format!("{}={}", h("maintenance/zz"), hex(b"7")),
        "own zone"
    );
    assert_eq!(next(), "ok", "exclude");
    assert_eq!(next(), format!("{}=", h("excluded/127.0.0.2:4500")));
    assert_eq!(next(), "", "no process there: nothing in progress");
    assert_eq!(next(), "ok", "include");
    assert_eq!(next(), "");
    assert_eq!(next(), "E2117", "the only storage server");
    assert!(next().contains("drop below 10%"));
    assert_eq!(next(), "E2117", "no address");
    assert!(next().contains(r#"'nonsense' is not a valid network endpoint address"#));
    assert_eq!(next(), "E2117", "a :tls address");
    assert!(next().contains("Do not include the `:tls' suffix"));
    assert_eq!(next(), "ok", "a whole machine, forced");
    assert_eq!(next(), format!("{}=", h("excluded/127.0.0.3")));
    assert_eq!(next(), "ok", "include by range");
    assert_eq!(next(), "");
    assert_eq!(next(), "ok", "failed, forced");
    assert_eq!(next(), format!("{}=", h("failed/127.0.0.2:4500")));
    assert_eq!(next(), "ok");
    assert_eq!(next(), "");
    assert_eq!(next(), "ok", "a locality");
    assert_eq!(
        next(),
        format!("{}=", h("excluded_locality/locality_zoneid:nowhere"))
    );
    assert_eq!(next(), "ok");
    assert_eq!(next(), "ok", "a failed locality, forced");
    assert_eq!(
        next(),
        format!("{}=", h("failed_locality/locality_zoneid:nowhere"))
    );
    assert_eq!(next(), "ok");
    assert_eq!(next(), "E2117", "no locality");
    assert!(next().contains("'zoneid' is not a valid locality"));
    assert_eq!(next(), "", "all included again");
    assert_eq!(next(), "ok", "lock");
    assert_eq!(next(), hex(UID.as_bytes()), "the lock's UID");
    assert_eq!(next(), "E1038", "locked by another UID");
    assert_eq!(next(), "ok", "the same UID again");
    assert_eq!(next(), "E2117", "no UID");
    assert!(next().contains("Invalid UID hex string: not hex"));
    assert_eq!(next(), "ok", "unlock");
    assert_eq!(next(), "-");
    assert_eq!(next(), "ok", "suspend");
    assert_eq!(next(), "", "suspended");
    assert_eq!(next(), "ok", "resume");
    assert_eq!(next(), "-");
    for what in ["mode 5", "mode x", "another key"] {
        assert_eq!(next(), "E2117", "{what}");
        assert!(next().contains("datadistribution"), "{what}");
    }
    assert_eq!(next(), "ok", "mode 1, rebalance ignored");
    assert_eq!(
        next(),
        format!(
            "{}={},{}=",
            h("data_distribution/mode"),
            hex(b"1"),
            h("data_distribution/rebalance_ignored")
        )
    );
    assert_eq!(next(), "ok", "put back");
    assert_eq!(
        next(),
        format!("{}={}", h("data_distribution/mode"), hex(b"-1"))
    );
    assert_eq!(next(), "ok", "maintenance");
    assert_eq!(next(), format!("{}=about100", h("maintenance/zone_a")));
    assert_eq!(next(), "E2117", "two zones");
    assert!(next().contains("only one allowed"));
    assert_eq!(next(), "E2117", "negative");
    assert!(next().contains("The specified maintenance time -5 is a negative value"));
    assert_eq!(next(), "ok", "maintenance off");
    assert_eq!(next(), "");
    for what in ["no worker there", "no address", "no class"] {
        let c = next();
        let msg = next();
        match what {
            "no worker there" => assert_eq!((c.as_str(), msg.as_str()), ("ok", "-")),
            _ => {
                assert_eq!(c, "E2117", "{what}");
                assert!(msg.contains("setclass"), "{what}: {msg}");
            }
        }
    }
    assert_eq!(next(), "E2117", "a clear of a class");
    assert_eq!(
        next(),
        "E2117",
        "the error is the transaction's from then on"
    );
    assert_eq!(next(), "E2117", "a range clear of classes");
    assert_eq!(next(), "E2117");
    assert_eq!(
        next(),
        "the storage server has a class of its own: not changed"
    );
    assert_eq!(next(), "E2115", "profiling/ is no write module");
    assert_eq!(next(), "", "nor any rows");
    assert_eq!(next(), "E2138", "a point read inside a tenant");
    assert_eq!(next(), "E2138", "a range read inside a tenant");
    assert_eq!(i, got.len(), "every answer checked");
}

#[test]
fn the_same_answers_as_libfdb_c_on_a_real_cluster() {
    let Some((path, _)) = fdb_tests::dual::real_cluster_file() else {
        println!(
            "management_special_keys: FDB_CLUSTER_FILE not set; the libfdb_c comparison is skipped"
        );
        return;
    };
    let db = Database::open(Some(&path)).unwrap();
    let out = fdb_tests::python::libfdb_c_answers(
        "management_special_keys",
        PYTHON,
        [path.clone().into_os_string()],
    );
    put_back(&db);
    let Some(out) = out else { return };
    let ours = our_answers(&db);
    put_back(&db);
    let theirs: Vec<&str> = out.lines().collect();
    for (i, (o, t)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(o, t, "answer {i}");
    }
    assert_eq!(ours.len(), theirs.len());
}
