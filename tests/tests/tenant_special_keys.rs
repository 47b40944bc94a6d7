//! Tenant management through the special keys (`\xff\xff/management/tenant/`), the way the
//! Python binding's `fdb.tenant_management` and fdbcli drive libfdb_c: creating, configuring,
//! renaming and deleting tenants with `special_key_space_enable_writes`, reading the tenant
//! map's JSON rows, and the errors (`special_keys_api_failure` with its
//! `\xff\xff/error_message`, `special_keys_write_disabled`, `special_keys_no_write_module_found`,
//! `special_keys_cross_module_clear`).
//!
//! The same script runs on the test cluster, checked against what it implies, and on a real
//! cluster (`FDB_CLUSTER_FILE`, `tenant_mode=optional_experimental`) through the Python
//! binding over libfdb_c 7.3.77 too, where every answer must be the same (tenant ids and
//! prefixes aside: the two runs create different tenants).

use fdb_driver_mio::{Database, Error, KeyValue};
use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::{tuple, TransactionOption};
use fdb_tests::cluster::TestCluster;
use fdb_tests::to_hex as hex;

const MAP: &[u8] = b"\xff\xff/management/tenant/map/";
const CONFIGURE: &[u8] = b"\xff\xff/management/tenant/configure/";
const RENAME: &[u8] = b"\xff\xff/management/tenant/rename/";

fn cat(a: &[u8], b: &[u8]) -> Vec<u8> {
    [a, b].concat()
}

/// A tenant's JSON without its id and prefix (which differ between the two runs), keys
/// sorted, compact.
fn normalized(json: &[u8]) -> String {
    let mut v: serde_json::Value = serde_json::from_slice(json).expect("tenant JSON");
    if let Some(m) = v.as_object_mut() {
        m.remove("id");
        m.remove("prefix");
    }
    v.to_string()
}

fn code(e: &Error) -> String {
    format!("E{}", e.code().map_or(0, |c| c.0))
}

fn rows(r: Result<Vec<KeyValue>, Error>) -> String {
    match r {
        Ok(rows) => rows
            .iter()
            .map(|kv| format!("{}={}", hex(&kv.key), normalized(&kv.value)))
            .collect::<Vec<_>>()
            .join(","),
        Err(e) => code(&e),
    }
}

fn commit(tx: &fdb_driver_mio::Transaction) -> String {
    match tx.commit() {
        Ok(_) => "ok".into(),
        Err(e) => code(&e),
    }
}

fn writer(db: &Database) -> fdb_driver_mio::Transaction {
    let tx = db.create_transaction();
    tx.set_option(TransactionOption::SpecialKeySpaceEnableWrites)
        .unwrap();
    tx
}

/// The script's answers, one line each.
fn our_answers(db: &Database, p: &[u8]) -> Vec<String> {
    let name = |s: &str| cat(p, s.as_bytes());
    let map = |s: &str| cat(MAP, &name(s));
    let configure = |s: &str, param: &str| {
        cat(
            CONFIGURE,
            &tuple::pack(&(name(s), param.as_bytes().to_vec())),
        )
    };
    let list = |tx: &fdb_driver_mio::Transaction| rows(tx.get_range(map(""), map("\u{7f}"), 0));
    let mut out = Vec::new();

    // Two tenants, one in a group, in one commit.
    let tx = writer(db);
    tx.set(map("a"), b"");
    tx.set(map("b"), b"");
    tx.set(configure("b", "tenant_group"), name("g"));
    out.push(commit(&tx));

    let tx = db.create_transaction();
    out.push(match tx.get(map("a")) {
        Ok(Some(v)) => normalized(&v),
        Ok(None) => "-".into(),
        Err(e) => code(&e),
    });
    out.push(list(&tx));
    let fge = fdb_driver_mio::KeySelector::first_greater_or_equal;
    let opts = fdb_driver_mio::RangeOptions {
        limit: 1,
        reverse: true,
        mode: fdb_driver_mio::StreamingMode::WantAll,
        ..Default::default()
    };
    out.push(rows(
        tx.get_range_batch(fge(map("")), fge(map("\u{7f}")), opts, false)
            .map(|r| r.rows),
    ));
    out.push(match tx.get(map("zz")) {
        Ok(None) => "-".into(),
        Ok(Some(v)) => hex(&v),
        Err(e) => code(&e),
    });

    // Creating an existing tenant again is no error, and the configuration written with the
    // creation goes with it: `a` stays out of the group (`commitImpl` hands it to the create).
    let tx = writer(db);
    tx.set(map("a"), b"");
    tx.set(configure("a", "tenant_group"), name("g"));
    out.push(commit(&tx));
    out.push(list(&db.create_transaction()));

    // Rename `a` to `c`; then `b` onto the taken `c`.
    let tx = writer(db);
    tx.set(cat(RENAME, &name("a")), name("c"));
    out.push(commit(&tx));
    out.push(list(&db.create_transaction()));
    let tx = writer(db);
    tx.set(cat(RENAME, &name("b")), name("c"));
    out.push(commit(&tx));

    // Renames that overlap: `special_keys_api_failure`, and why.
    let tx = writer(db);
    tx.set(cat(RENAME, &name("b")), name("d"));
    tx.set(cat(RENAME, &name("d")), name("e"));
    out.push(commit(&tx));
    out.push(match tx.get(b"\xff\xff/error_message") {
        Ok(Some(v)) => String::from_utf8_lossy(&v).into_owned(),
        Ok(None) => "-".into(),
        Err(e) => code(&e),
    });

    // Configuring a missing tenant, a key that is no tuple, an unknown parameter.
    let tx = writer(db);
    tx.set(configure("zz", "tenant_group"), name("g"));
    out.push(commit(&tx));
    let tx = writer(db);
    tx.set(cat(CONFIGURE, b"not a tuple"), b"x");
    out.push(commit(&tx));
    out.push(match tx.get(b"\xff\xff/error_message") {
        Ok(Some(v)) => String::from_utf8_lossy(&v).into_owned(),
        Ok(None) => "-".into(),
        Err(e) => code(&e),
    });
    let tx = writer(db);
    tx.set(configure("b", "color"), b"blue");
    out.push(commit(&tx));

    // Writes refused before any module runs.
    let tx = db.create_transaction();
    tx.set(map("x"), b"");
    out.push(commit(&tx));
    let tx = writer(db);
    tx.set(b"\xff\xff/nothing", b"");
    out.push(commit(&tx));
    let tx = writer(db);
    tx.clear_range(
        b"\xff\xff/management/tenant/",
        b"\xff\xff/management/version_epoch\x00",
    );
    out.push(commit(&tx));

    // A range clear deletes every tenant in it, and the group goes with its last tenant.
    let tx = writer(db);
    tx.clear_range(map(""), map("\u{7f}"));
    out.push(commit(&tx));
    let tx = db.create_transaction();
    out.push(list(&tx));
    tx.set_option(TransactionOption::ReadSystemKeys).unwrap();
    let group = cat(b"\xff/tenant/tenantGroup/map/", &name("g"));
    out.push(match tx.get(group) {
        Ok(v) => format!("{}", v.is_some()),
        Err(e) => code(&e),
    });
    out
}

const PYTHON: &str = r#"
import sys, json
import fdb
fdb.api_version(730)
db = fdb.open(sys.argv[1])
p = bytes.fromhex(sys.argv[2])
MAP = b"\xff\xff/management/tenant/map/"
CONFIGURE = b"\xff\xff/management/tenant/configure/"
RENAME = b"\xff\xff/management/tenant/rename/"
def name(s): return p + s.encode()
def mp(s): return MAP + name(s)
def configure(s, param): return CONFIGURE + fdb.tuple.pack((name(s), param.encode()))
def norm(v):
    d = json.loads(bytes(v))
    d.pop("id", None); d.pop("prefix", None)
    return json.dumps(d, sort_keys=True, separators=(",", ":"))
def err(e): return "E%d" % e.code
def rows(f):
    try:
        return ",".join(kv.key.hex() + "=" + norm(kv.value) for kv in f())
    except fdb.FDBError as e:
        return err(e)
def commit(tr):
    try:
        tr.commit().wait()
        return "ok"
    except fdb.FDBError as e:
        return err(e)
def writer():
    tr = db.create_transaction()
    tr.options.set_special_key_space_enable_writes()
    return tr
def lst(tr): return rows(lambda: list(tr.get_range(mp(""), mp("\x7f"))))
def value(f, show):
    try:
        v = f().wait()
        return "-" if not v.present() else show(v)
    except fdb.FDBError as e:
        return err(e)
out = []
tr = writer()
tr[mp("a")] = b""
tr[mp("b")] = b""
tr[configure("b", "tenant_group")] = name("g")
out.append(commit(tr))
tr = db.create_transaction()
out.append(value(lambda: tr.get(mp("a")), norm))
out.append(lst(tr))
fge = fdb.KeySelector.first_greater_or_equal
out.append(rows(lambda: list(tr.get_range(fge(mp("")), fge(mp("\x7f")), limit=1, reverse=True, streaming_mode=fdb.StreamingMode.want_all))))
out.append(value(lambda: tr.get(mp("zz")), lambda v: bytes(v).hex()))
tr = writer()
tr[mp("a")] = b""
tr[configure("a", "tenant_group")] = name("g")
out.append(commit(tr))
out.append(lst(db.create_transaction()))
tr = writer()
tr[RENAME + name("a")] = name("c")
out.append(commit(tr))
out.append(lst(db.create_transaction()))
tr = writer()
tr[RENAME + name("b")] = name("c")
out.append(commit(tr))
tr = writer()
tr[RENAME + name("b")] = name("d")
tr[RENAME + name("d")] = name("e")
out.append(commit(tr))
out.append(value(lambda: tr.get(b"\xff\xff/error_message"), lambda v: bytes(v).decode()))
tr = writer()
tr[configure("zz", "tenant_group")] = name("g")
out.append(commit(tr))
tr = writer()
tr[CONFIGURE + b"not a tuple"] = b"x"
out.append(commit(tr))
out.append(value(lambda: tr.get(b"\xff\xff/error_message"), lambda v: bytes(v).decode()))
tr = writer()
tr[configure("b", "color")] = b"blue"
out.append(commit(tr))
tr = db.create_transaction()
try:
    tr[mp("x")] = b""
    out.append(commit(tr))
except fdb.FDBError as e:
    out.append(err(e))
tr = writer()
try:
    tr[b"\xff\xff/nothing"] = b""
    out.append(commit(tr))
except fdb.FDBError as e:
    out.append(err(e))
tr = writer()
try:
    tr.clear_range(b"\xff\xff/management/tenant/", b"\xff\xff/management/version_epoch\x00")
    out.append(commit(tr))
except fdb.FDBError as e:
    out.append(err(e))
tr = writer()
tr.clear_range(mp(""), mp("\x7f"))
out.append(commit(tr))
tr = db.create_transaction()
out.append(lst(tr))
tr.options.set_read_system_keys()
out.append(str(tr.get(b"\xff/tenant/tenantGroup/map/" + name("g")).wait().present()).lower())
for line in out:
    print(line)
"#;

#[test]
fn tenant_special_keys_on_the_test_cluster() {
    let cluster = TestCluster::start();
    let text = cluster.cluster_file_string();
    let db = Database::from_cluster_file(ClusterFile::parse(&text).unwrap(), 1).unwrap();
    let p = b"t/";
    let got = our_answers(&db, p);
    let key = |s: &str| hex(&cat(MAP, &cat(p, s.as_bytes())));
    let json = |s: &str, group: Option<&str>| {
        let n = cat(p, s.as_bytes());
        let printable = String::from_utf8(n.clone()).unwrap();
        let b64 = base64_of(&n);
        let mut v = serde_json::json!({
            "lock_state": "unlocked",
            "name": {"base64": b64, "printable": printable},
        });
        if let Some(g) = group {
            let g = cat(p, g.as_bytes());
            v["tenant_group"] = serde_json::json!({
                "base64": base64_of(&g),
                "printable": String::from_utf8(g).unwrap(),
            });
        }
        v.to_string()
    };
    let row = |s: &str, g: Option<&str>| format!("{}={}", key(s), json(s, g));
    assert_eq!(got[0], "ok", "create a and b (b in group g)");
    assert_eq!(got[1], json("a", None), "point read of a");
    assert_eq!(
        got[2],
        format!("{},{}", row("a", None), row("b", Some("g"))),
        "the map"
    );
    // libfdb_c 7.3.77 lists the first tenants of the range for the limit, whatever the
    // direction, and reverses those: a reverse read with limit 1 gives the first tenant.
    assert_eq!(got[3], row("a", None), "reverse, limit 1");
    assert_eq!(got[4], "-", "no such tenant");
    assert_eq!(got[5], "ok", "create existing + configure");
    assert_eq!(
        got[6],
        format!("{},{}", row("a", None), row("b", Some("g"))),
        "a configuration with a create of an existing tenant is dropped"
    );
    assert_eq!(got[7], "ok", "rename a to c");
    assert_eq!(
        got[8],
        format!("{},{}", row("b", Some("g")), row("c", None)),
        "after the rename"
    );
    assert_eq!(got[9], "E2132", "rename onto a taken name");
    assert_eq!(got[10], "E2117", "overlapping renames");
    assert_eq!(
        got[11],
        r#"{"command":"rename tenant","message":"tenant rename conflict","retriable":false}"#
    );
    assert_eq!(got[12], "E2131", "configure a missing tenant");
    assert_eq!(got[13], "E2117", "a configure key that is no tuple");
    assert!(
        got[14].contains("invalid tenant configuration key"),
        "{}",
        got[14]
    );
    assert_eq!(got[15], "E2140", "an unknown parameter");
    assert_eq!(got[16], "E2114", "writes not enabled");
    assert_eq!(got[17], "E2115", "no write module");
    assert_eq!(got[18], "E2116", "a clear across modules");
    assert_eq!(got[19], "ok", "range delete");
    assert_eq!(got[20], "", "no tenant left");
    assert_eq!(got[21], "false", "the group went with its last tenant");
}

/// Standard base64 with padding (what the tenant JSON's `base64` fields hold).
fn base64_of(b: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for c in b.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                s.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

#[test]
fn the_same_answers_as_libfdb_c_on_a_real_cluster() {
    let Some((path, _)) = fdb_tests::dual::real_cluster_file() else {
        println!(
            "tenant_special_keys: FDB_CLUSTER_FILE not set; the libfdb_c comparison is skipped"
        );
        return;
    };
    let theirs_prefix = fdb_tests::dual::random_prefix("rsk-py");
    let args = [path.clone().into_os_string(), hex(&theirs_prefix).into()];
    let Some(out) = fdb_tests::python::libfdb_c_answers("tenant_special_keys", PYTHON, args) else {
        return;
    };
    let db = Database::open(Some(&path)).unwrap();
    let ours_prefix = fdb_tests::dual::random_prefix("rsk-rs");
    let ours = our_answers(&db, &ours_prefix);
    // The rows name each run's own tenants: compare them with the prefix swapped.
    let theirs: Vec<String> = out
        .lines()
        .map(|l| {
            l.replace(&hex(&theirs_prefix), &hex(&ours_prefix))
                .replace(
                    std::str::from_utf8(&theirs_prefix).unwrap(),
                    std::str::from_utf8(&ours_prefix).unwrap(),
                )
                .replace(&base64_of(&theirs_prefix), &base64_of(&ours_prefix))
        })
        .collect();
    for (i, (o, t)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(o, t, "answer {i}");
    }
    assert_eq!(ours.len(), theirs.len());
}
