//! `get_mapped_range` (`fdb_transaction_get_mapped_range`) against libfdb_c 7.3.77. The same
//! scenarios (`scenarios` here, `mapped_range_reference.py` there: range and point mappers,
//! batches in the iterator mode, limits, reverse, snapshot and read-your-writes-disabled
//! refusals, the transaction's own writes, tuples fdbserver cannot read, bad mappers, and the
//! conflicts a concurrent write to a mapped key or range makes) give:
//!
//! * on a real cluster (`FDB_CLUSTER_FILE`), exactly what libfdb_c gives through ctypes
//!   (needs the Python binding `foundationdb==7.3.77`; without it that part prints a notice,
//!   unless `FDB_SHARED_DIR` is set, as in CI, where it is required);
//! * on the test cluster, exactly what libfdb_c gave on fdbserver 7.3.77, kept in
//!   `tests/data/mapped_range.libfdb_c.json` (`python3 tests/tests/mapped_range_reference.py
//!   CLUSTER_FILE mrref`), with the index range cut into shards on different servers, and
//!   again after a `wrong_shard_server` and a shard move.

use std::time::Duration;

use fdb_driver_mio::{
    ConflictRangeType, Database, KeySelector, MappedReqAndResult, RangeOptions, StreamingMode,
    Transaction, TransactionOption,
};
use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::tuple::{pack, Element};
use fdb_tests::cluster::{RequestKind, TestCluster};
use fdb_tests::to_hex as hex;
use serde_json::{json, Value};

const REFERENCE: &str = include_str!("mapped_range_reference.py");
const N: i64 = 60;

/// Keys under the namespace `ns` (a tuple string, as the script's).
struct Ns(String);

impl Ns {
    fn k(&self, rest: &[Element<'static>]) -> Vec<u8> {
        let mut t = vec![Element::String(self.0.clone().into())];
        t.extend(rest.iter().cloned());
        pack(&Element::Tuple(t))
    }

    /// `fdb.tuple.range`: every key strictly inside the tuple's prefix.
    fn range(&self, rest: &[Element<'static>]) -> (Vec<u8>, Vec<u8>) {
        let p = self.k(rest);
        let mut b = p.clone();
        b.push(0x00);
        let mut e = p;
        e.push(0xff);
        (b, e)
    }
}

fn s(v: &str) -> Element<'static> {
    Element::String(v.to_string().into())
}

fn i(v: i64) -> Element<'static> {
    Element::Int(v)
}

fn setup(db: &Database, ns: &Ns) {
    let tx = db.create_transaction();
    let (b, e) = ns.range(&[]);
    tx.clear_range(&b, &e);
    for n in 0..N {
        let color = if n % 3 == 0 { "red" } else { "blue" };
        tx.set(ns.k(&[s("idx"), s(color), i(n)]), pack(&("v", n)));
        let mut a = format!("a{n}").into_bytes();
        a.extend([b'.'; 40]);
        tx.set(ns.k(&[s("rec"), i(n), s("a")]), a);
        tx.set(ns.k(&[s("rec"), i(n), s("b")]), format!("b{n}"));
        if n % 2 == 0 {
            tx.set(ns.k(&[s("pt"), i(n)]), format!("p{n}"));
        }
    }
    let mut raw = ns.k(&[s("raw"), s("x")]);
    raw.extend(b"\x05\x02a\x00\x00");
    tx.set(raw, pack(&("v",)));
    tx.set(ns.k(&[s("rawv"), s("x")]), b"\x05\x02a\x00\x00");
    let mut lenient = ns.k(&[s("lenient")]);
    lenient.extend(b"\x02unterminated");
    tx.set(lenient, b"");
    tx.commit().unwrap();
}

/// One batch, as the script prints it.
#[allow(clippy::too_many_arguments)]
fn mapped(
    tx: &Transaction,
    begin: &[u8],
    end: &[u8],
    mapper: &[u8],
    limit: usize,
    mode: StreamingMode,
    iteration: u32,
    snapshot: bool,
    reverse: bool,
) -> Value {
    let opts = RangeOptions {
        limit,
        target_bytes: 0,
        mode,
        iteration,
        reverse,
    };
    let r = tx.get_mapped_range_batch(
        KeySelector::first_greater_or_equal(begin),
        KeySelector::first_greater_or_equal(end),
        mapper,
        opts,
        snapshot,
    );
    match r {
        Err(e) => json!({ "error": e.code().map_or(-1, |c| c.0 as i64) }),
        Ok(r) => {
            let rows: Vec<Value> = r
                .rows
                .iter()
                .map(|m| {
                    let mapped = match &m.mapped {
                        MappedReqAndResult::Value(v) => {
                            json!([hex(&v.key), v.result.as_ref().map(|x| hex(x))])
                        }
                        MappedReqAndResult::Range(g) => Value::Array(
                            g.result
                                .data
                                .iter()
                                .map(|kv| json!([hex(&kv.key), hex(&kv.value)]))
                                .collect(),
                        ),
                    };
                    json!([hex(&m.kv.key), hex(&m.kv.value), mapped])
                })
                .collect();
            json!({ "rows": rows, "more": r.more })
        }
    }
}

fn all(tx: &Transaction, b: &[u8], e: &[u8], mapper: &[u8]) -> Value {
    mapped(tx, b, e, mapper, 0, StreamingMode::WantAll, 1, false, false)
}

fn exact(tx: &Transaction, b: &[u8], e: &[u8], mapper: &[u8], limit: usize) -> Value {
    mapped(
        tx,
        b,
        e,
        mapper,
        limit,
        StreamingMode::Exact,
        1,
        false,
        false,
    )
}

fn commit_code(tx: &Transaction) -> i64 {
    match tx.commit() {
        Ok(_) => 0,
        Err(e) => e.code().map_or(-1, |c| c.0 as i64),
    }
}

/// The script's scenarios, in its order, through this client.
fn scenarios(db: &Database, ns: &Ns) -> Value {
    let mut out = serde_json::Map::new();
    let tx = || db.create_transaction();
    let (b, e) = ns.range(&[s("idx"), s("blue")]);
    let range = ns.k(&[s("rec"), s("{K[3]}"), s("{...}")]);
    let point = ns.k(&[s("pt"), s("{K[3]}")]);
    out.insert("range".into(), all(&tx(), &b, &e, &range));
    out.insert("point".into(), all(&tx(), &b, &e, &point));
    let (ab, ae) = ns.range(&[s("idx")]);
    let t = tx();
    let mut batches = Vec::new();
    let mut begin = ab.clone();
    let mut it = 1;
    loop {
        let r = mapped(
            &t,
            &begin,
            &ae,
            &range,
            0,
            StreamingMode::Iterator,
            it,
            false,
            false,
        );
        let last = r["rows"].as_array().and_then(|rows| rows.last()).cloned();
        let more = r["more"].as_bool() == Some(true);
        batches.push(r);
        let (true, Some(last)) = (more, last) else {
            break;
        };
        begin = fdb_tests::from_hex(last[0].as_str().unwrap());
        begin.push(0x00);
        it += 1;
    }
    out.insert("batches".into(), Value::Array(batches));
    out.insert("exact_limit".into(), exact(&tx(), &b, &e, &point, 5));
    out.insert(
        "reverse".into(),
        mapped(
            &tx(),
            &b,
            &e,
            &range,
            3,
            StreamingMode::Exact,
            1,
            false,
            true,
        ),
    );
    out.insert(
        "snapshot".into(),
        mapped(
            &tx(),
            &b,
            &e,
            &range,
            0,
            StreamingMode::WantAll,
            1,
            true,
            false,
        ),
    );
    let t = tx();
    t.set_option(TransactionOption::ReadYourWritesDisable)
        .unwrap();
    out.insert("ryw_disabled".into(), all(&t, &b, &e, &range));
    let t = tx();
    t.set(ns.k(&[s("idx"), s("blue"), i(1)]), pack(&("v", 1)));
    out.insert("own_write_in_range".into(), all(&t, &b, &e, &range));
    let t = tx();
    t.set(ns.k(&[s("rec"), i(4), s("b")]), b"new");
    out.insert("own_write_in_mapped_range".into(), all(&t, &b, &e, &range));
    let t = tx();
    t.clear(ns.k(&[s("pt"), i(4)]));
    out.insert("own_clear_of_mapped_key".into(), all(&t, &b, &e, &point));
    let t = tx();
    t.set(ns.k(&[s("pt"), i(5)]), b"new");
    out.insert(
        "own_write_of_missing_mapped_key".into(),
        all(&t, &b, &e, &point),
    );
    let t = tx();
    t.set(ns.k(&[s("elsewhere")]), b"x");
    let r = all(&t, &b, &e, &range);
    out.insert(
        "own_write_elsewhere".into(),
        json!({
            "rows": r["rows"].as_array().map_or(0, Vec::len),
            "error": r["error"].as_i64().unwrap_or(0),
        }),
    );
    let t = tx();
    t.add_conflict_range(
        ns.k(&[s("rec"), i(4)]),
        ns.k(&[s("rec"), i(5)]),
        ConflictRangeType::Write,
    )
    .unwrap();
    out.insert(
        "write_conflict_range_on_mapped_range".into(),
        all(&t, &b, &e, &range),
    );
    let (rb, re) = ns.range(&[s("raw")]);
    out.insert(
        "key_not_tuple".into(),
        all(&tx(), &rb, &re, &ns.k(&[s("rec"), s("{K[2]}")])),
    );
    out.insert(
        "key_not_tuple_unused".into(),
        all(&tx(), &rb, &re, &ns.k(&[s("pt"), s("{V[0]}")])),
    );
    let (lb, le) = ns.range(&[s("lenient")]);
    out.insert(
        "lenient_tuple".into(),
        all(&tx(), &lb, &le, &ns.k(&[s("pt"), s("{K[2]}")])),
    );
    let (vb, ve) = ns.range(&[s("rawv")]);
    out.insert(
        "value_not_tuple".into(),
        all(&tx(), &vb, &ve, &ns.k(&[s("pt"), s("{V[0]}")])),
    );
    out.insert(
        "value_mapper".into(),
        exact(&tx(), &b, &e, &ns.k(&[s("pt"), s("{V[1]}")]), 4),
    );
    out.insert("mapper_not_tuple".into(), all(&tx(), &b, &e, b"\x99"));
    out.insert(
        "range_not_last".into(),
        all(&tx(), &b, &e, &pack(&("{...}", "x"))),
    );
    out.insert(
        "bad_index".into(),
        all(&tx(), &b, &e, &ns.k(&[s("rec"), s("{K[9]}")])),
    );
    out.insert(
        "index_stoi".into(),
        exact(
            &tx(),
            &b,
            &e,
            &ns.k(&[s("rec"), s("{K[ 3x]}"), s("{...}")]),
            2,
        ),
    );
    out.insert(
        "escaped".into(),
        exact(
            &tx(),
            &b,
            &e,
            &ns.k(&[s("lit"), s("{{K[3]}}"), s("{K[3]}")]),
            2,
        ),
    );
    let mut after = e.clone();
    after.push(0);
    out.insert(
        "empty_range_bad_mapper".into(),
        all(&tx(), &e, &after, b"\x99"),
    );
    out.insert(
        "special_keys".into(),
        all(&tx(), b"\xff\xff/a", b"\xff\xff/b", &range),
    );
    out.insert(
        "system_keys".into(),
        all(&tx(), b"\xff/a", b"\xff/b", &range),
    );
    let conflicts: [(&str, &[u8], Vec<u8>); 4] = [
        (
            "conflict_mapped_range",
            &range,
            ns.k(&[s("rec"), i(4), s("zz")]),
        ),
        ("conflict_mapped_key", &point, ns.k(&[s("pt"), i(5)])),
        (
            "conflict_range",
            &range,
            ns.k(&[s("idx"), s("blue"), i(1), s("new")]),
        ),
        (
            "no_conflict_elsewhere",
            &range,
            ns.k(&[s("rec"), i(3), s("a")]),
        ),
    ];
    for (name, mapper, other) in conflicts {
        let t = tx();
        let r = all(&t, &b, &e, mapper);
        let w = tx();
        w.set(&other, b"w");
        w.commit().unwrap();
        t.set(ns.k(&[s("out"), s(name)]), b"1");
        out.insert(
            name.into(),
            json!({
                "rows": r["rows"].as_array().map_or(0, Vec::len),
                "commit": commit_code(&t),
            }),
        );
        setup(db, ns);
    }
    Value::Object(out)
}

/// Each scenario compared on its own, so that a difference names it (shown shortly: the
/// batches' sizes, then the first and last rows).
fn assert_same(ours: &Value, theirs: &Value, what: &str) {
    let (ours, theirs) = (ours.as_object().unwrap(), theirs.as_object().unwrap());
    let names: Vec<&String> = theirs.keys().collect();
    assert_eq!(
        ours.keys().collect::<Vec<_>>(),
        names,
        "{what}: the scenarios"
    );
    for name in names {
        if ours[name] != theirs[name] {
            panic!(
                "{what}: scenario {name}: ours {} / libfdb_c {}",
                short(&ours[name]),
                short(&theirs[name])
            );
        }
    }
}

fn short(v: &Value) -> String {
    match v {
        Value::Array(batches) => {
            let shapes: Vec<String> = batches.iter().map(short).collect();
            format!("[{}]", shapes.join(", "))
        }
        Value::Object(o) if o.get("rows").is_some_and(Value::is_array) => {
            let rows = o["rows"].as_array().unwrap();
            format!(
                "{} rows, more {}, first {}, last {}",
                rows.len(),
                o["more"],
                rows.first().map_or(String::new(), |r| r.to_string()),
                rows.last().map_or(String::new(), |r| r.to_string())
            )
        }
        other => other.to_string(),
    }
}

/// The rows of all batches, in order: where the batches end depends on the shards (a batch
/// ends at a shard's edge once it has a row), so a cluster of other shards compares these.
fn flattened(batches: &Value) -> Value {
    let rows = batches
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|b| b["rows"].as_array().unwrap().clone())
        .collect();
    Value::Array(rows)
}

fn reference() -> Value {
    serde_json::from_str(include_str!("../data/mapped_range.libfdb_c.json")).unwrap()
}

/// The index rows cut into shards on different storage servers (the blue ones in one, as
/// on a one-process fdbserver, so that the batches of a whole read end where libfdb_c's
/// did); the mapped keys and ranges on others.
fn sharded_cluster(ns: &Ns) -> TestCluster {
    TestCluster::builder()
        .storage_servers(3)
        .split_points([
            ns.k(&[s("idx"), s("red")]),
            ns.k(&[s("idx"), s("red"), i(30)]),
            ns.k(&[s("pt")]),
            ns.k(&[s("rec"), i(30)]),
        ])
        .start()
}

#[test]
fn the_test_cluster_serves_mapped_reads_as_fdbserver() {
    let ns = Ns("mrref".into());
    let cluster = sharded_cluster(&ns);
    let cf = ClusterFile::parse(&cluster.cluster_file_string()).unwrap();
    let db = Database::from_cluster_file(cf, 1).unwrap();
    setup(&db, &ns);
    let mut want = reference();
    let mut ours = scenarios(&db, &ns);
    assert_eq!(
        flattened(&ours["batches"]),
        flattened(&want["batches"]),
        "the batches' rows"
    );
    assert!(ours["batches"].as_array().unwrap().len() > 2);
    ours["batches"] = Value::Null;
    want["batches"] = Value::Null;
    assert_same(&ours, &want, "test cluster");

    // A storage server that no longer holds the shard: NativeAPI's fallback, same rows.
    let (b, e) = ns.range(&[s("idx"), s("blue")]);
    let range = ns.k(&[s("rec"), s("{K[3]}"), s("{...}")]);
    cluster.fail_next(
        RequestKind::GetMappedKeyValues,
        1,
        ErrorCode::WRONG_SHARD_SERVER,
    );
    assert_eq!(all(&db.create_transaction(), &b, &e, &range), want["range"]);
    assert_eq!(
        cluster.injections_left(Some(RequestKind::GetMappedKeyValues)),
        0
    );
    // The shard moves under the client's location cache: the old server refuses, the client
    // looks the shard up again.
    let blue = ns.k(&[s("idx"), s("blue"), i(25)]);
    let from = cluster.servers_of(&blue);
    let to = (0..3).find(|n| !from.contains(n)).unwrap();
    let before = cluster.wrong_shard_replies();
    cluster.move_shard(&blue, to);
    assert_eq!(all(&db.create_transaction(), &b, &e, &range), want["range"]);
    assert!(cluster.wrong_shard_replies() > before);
}

#[test]
fn both_drivers_read_whole_mapped_ranges() {
    let ns = Ns("mrref".into());
    let cluster = sharded_cluster(&ns);
    let cf = ClusterFile::parse(&cluster.cluster_file_string()).unwrap();
    let db = Database::from_cluster_file(cf.clone(), 2).unwrap();
    setup(&db, &ns);
    let (b, e) = ns.range(&[s("idx")]);
    let range = ns.k(&[s("rec"), s("{K[3]}"), s("{...}")]);
    // Batch after batch (the iterator mode's growing batches), every row once, in order.
    let rows = db
        .create_transaction()
        .get_mapped_range(
            fdb_driver_mio::RangeOption::from((b.as_slice(), e.as_slice())),
            &range,
            false,
        )
        .unwrap();
    assert_eq!(rows.len(), N as usize);
    for m in &rows {
        let MappedReqAndResult::Range(g) = &m.mapped else {
            panic!("a range mapper's row: {m:?}");
        };
        assert_eq!(g.result.data.len(), 2, "rec/<n>/a and rec/<n>/b");
    }
    let limited = fdb_driver_mio::RangeOption {
        limit: Some(7),
        ..fdb_driver_mio::RangeOption::from((b.as_slice(), e.as_slice()))
    };
    let seven = db
        .create_transaction()
        .get_mapped_range(limited.clone(), &range, false)
        .unwrap();
    assert_eq!(seven[..], rows[..7]);

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let db = fdb_driver_tokio::Database::from_cluster_file(cf, 3).unwrap();
        let tx = db.create_transaction();
        let got = tokio::time::timeout(
            Duration::from_secs(30),
            tx.get_mapped_range(limited, &range, false),
        )
        .await
        .expect("answered")
        .unwrap();
        assert_eq!(got[..], rows[..7]);
        let err = tx
            .get_mapped_range((b.as_slice(), e.as_slice()), &range, true)
            .await
            .unwrap_err();
        assert_eq!(err.code(), Some(ErrorCode::UNSUPPORTED_OPERATION));
    });
}

#[test]
fn the_same_answers_as_libfdb_c_on_a_real_cluster() {
    let Some((path, cf)) = fdb_tests::dual::real_cluster_file() else {
        println!("mapped_range: FDB_CLUSTER_FILE not set; the libfdb_c comparison is skipped");
        return;
    };
    let name = String::from_utf8(fdb_tests::dual::random_prefix("rust-fdb-mapped")).unwrap();
    let ns = Ns(name.clone());
    let db = Database::from_cluster_file(cf, 4).unwrap();
    setup(&db, &ns);
    let ours = scenarios(&db, &ns);
    let args = [path.into_os_string(), name.clone().into()];
    let Some(out) = fdb_tests::python::libfdb_c_answers("mapped_range", REFERENCE, args) else {
        return;
    };
    let theirs: Value = serde_json::from_str(out.trim()).unwrap();
    let tx = db.create_transaction();
    let (b, e) = ns.range(&[]);
    tx.clear_range(&b, &e);
    tx.commit().unwrap();
    assert_same(&ours, &theirs, "real cluster");
}

/// In a tenant: keys, mapped keys and rows are the tenant's (fdbserver maps the unprefixed
/// row); a read outside any tenant that reaches a tenant's keys is refused by the storage
/// server with `tenant_name_required` (2130), as libfdb_c's is (probe by hand on fdbserver
/// 7.3.77 with `tenant_mode=optional_experimental`: the same rows, and 2130 for the raw read).
#[test]
fn mapped_reads_in_a_tenant() {
    fdb_tests::dual::run(
        "mapped-tenant",
        Duration::from_secs(60),
        |t: fdb_tests::dual::Target| async move {
            let db = &t.db;
            let name = t.k("mapped-tenant");
            fdb_driver_tokio::tenant_management::create_tenant(db, &name)
                .await
                .expect("create");
            let tenant = db.open_tenant(&name);
            tenant
                .run(|tx| async move {
                    for n in 0..3i64 {
                        tx.set(pack(&("idx", n)), b"");
                        tx.set(pack(&("rec", n, "a")), format!("v{n}"));
                    }
                    Ok(())
                })
                .await
                .expect("write in the tenant");
            let mapper = pack(&("rec", "{K[1]}", "{...}"));
            let (b, e) = (pack(&("idx",)), pack(&("idx\x00",)));
            let rows = tenant
                .create_transaction()
                .get_mapped_range((b.clone(), e.clone()), &mapper, false)
                .await
                .expect("a mapped read in the tenant");
            assert_eq!(rows.len(), 3, "{}", t.name);
            for (n, m) in rows.iter().enumerate() {
                let n = n as i64;
                assert_eq!(m.kv.key, pack(&("idx", n)));
                let MappedReqAndResult::Range(g) = &m.mapped else {
                    panic!("{}: a range row: {m:?}", t.name);
                };
                assert_eq!(g.begin.key, pack(&("rec", n)));
                let got: Vec<(Vec<u8>, Vec<u8>)> = g
                    .result
                    .data
                    .iter()
                    .map(|kv| (kv.key.to_vec(), kv.value.to_vec()))
                    .collect();
                let want = vec![(pack(&("rec", n, "a")), format!("v{n}").into_bytes())];
                assert_eq!(got, want, "{}", t.name);
            }
            let raw = db
                .create_transaction()
                .get_mapped_range((b"".to_vec(), b"\xff".to_vec()), &mapper, false)
                .await
                .unwrap_err();
            assert_eq!(
                raw.code(),
                Some(ErrorCode::TENANT_NAME_REQUIRED),
                "{}",
                t.name
            );
            tenant
                .run(|tx| async move {
                    tx.clear_range(b"", b"\xff");
                    Ok(())
                })
                .await
                .unwrap();
            fdb_driver_tokio::tenant_management::delete_tenant(db, &name)
                .await
                .expect("delete");
        },
    );
}
