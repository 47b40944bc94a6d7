//! Tenants, on the in-process test cluster and (with `FDB_CLUSTER_FILE`) a real fdbserver
//! 7.3 started with `tenant_mode=optional_experimental`, as `cluster.sh` configures it:
//! tenant transactions, the raw layout under the tenant prefix, tenant management, and the
//! errors — through the tokio driver and through the mio driver's blocking API.
//!
//! The error codes asserted are the ones the Python binding 7.3.77 over libfdb_c gave on
//! the same cluster (probe run by hand): creating an existing tenant 2132, a missing tenant
//! 2131 on read and on commit, `\xff` read inside a tenant 2004, deleting a non-empty tenant
//! 2133, a transaction of a handle whose tenant was deleted 2131 (also after a tenant of the
//! same name was created again), deleting a missing tenant 2131, a `\xff` name 2134.
//! On the real cluster, when `python3 -c 'import fdb'` works, the Python binding also reads
//! what this client wrote.

use std::time::Duration;

use bytes::Bytes;
use fdb_driver_tokio::tenant_management as tm;
use fdb_driver_tokio::ErrorCode;
use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::messages::commit::TenantMapEntry;
use fdb_protocol::tenant_prefix;
use fdb_protocol::{tuple, TransactionOption};
use fdb_tests::cluster::TestCluster;
use fdb_tests::dual::{self, Target};

fn code<T: std::fmt::Debug>(r: Result<T, fdb_driver_tokio::Error>) -> Option<ErrorCode> {
    r.err().and_then(|e| e.code())
}

fn strinc(p: &[u8]) -> Vec<u8> {
    let mut end = p.to_vec();
    end.push(0xff);
    end
}

/// The tenant map value fdbserver itself wrote for tenant 1 named `probe1` (read back raw
/// from `\xff/tenant/map/\0\0\0\0\0\0\0\x01` after `fdb.tenant_management.create_tenant`).
#[test]
fn tenant_map_entry_encodes_as_fdbserver_stores_it() {
    let stored: &[u8] = b"\x00\x00\x00s\xb0\x00\xdb\x0f$\x00\x00\x005\xa4k\x00\x00\x00\x06\x00\x08\x00\x04\x00\x14\x00#\x00\x04\x00\x14\x00 \x00!\x00\x18\x00\"\x00\x1c\x00\x0c\x00\x1a\x00\x00\x00\x04\x00\x00\x00\x1c\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x14\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x06\x00\x00\x00probe1\x00\x00";
    let decoded = TenantMapEntry::decode_value(stored).expect("fdbserver's value decodes");
    assert_eq!(decoded.id, 1);
    assert_eq!(decoded.tenant_name.as_ref(), b"probe1");
    assert_eq!(decoded.lock_state, 0);
    assert_eq!(decoded.tenant_group, None);
    let again = TenantMapEntry::decode_value(&decoded.encode_value()).expect("round trip");
    assert_eq!(again, decoded);
    assert_eq!(tenant_prefix(1), *b"\0\0\0\0\0\0\0\x01");
}

#[test]
fn tenants_scenario() {
    dual::run(
        "tenants",
        Duration::from_secs(120),
        |t: Target| async move {
            tokio_scenario(&t).await;
            let cf = t.db.cluster().await.expect("the cluster file");
            let name = t.k("mio");
            tokio::task::spawn_blocking(move || mio_scenario(cf, name))
                .await
                .expect("the mio scenario");
        },
    );
}

async fn tokio_scenario(target: &Target) {
    let db = &target.db;
    let name = target.k("tenant-a");
    let on = target.name;

    // Create; a second create is refused.
    tm::create_tenant(db, &name).await.expect("create");
    assert_eq!(
        code(tm::create_tenant(db, &name).await),
        Some(ErrorCode::TENANT_ALREADY_EXISTS),
        "{on}"
    );
    let listed = tm::list_tenants(db, &name, [name.clone(), b"\x00".to_vec()].concat(), 10)
        .await
        .expect("list");
    assert_eq!(listed.len(), 1, "{on}");
    assert_eq!(listed[0].0.as_ref(), name.as_slice());
    let id = listed[0].1;
    assert!(id > 0);
    let prefix = tenant_prefix(id);

    // Writes and reads in the tenant see unprefixed keys.
    let t = db.open_tenant(&name);
    t.run(|tx| async move {
        tx.set(b"a", b"1");
        tx.set(b"b", b"2");
        tx.set(b"c", b"3");
        tx.clear(b"c");
        Ok(())
    })
    .await
    .expect("write in tenant");
    let rows = t
        .run(|tx| async move { tx.get_range(b"", b"\xff", 100).await })
        .await
        .expect("range in tenant");
    let kv: Vec<(Bytes, Bytes)> = rows.into_iter().map(|r| (r.key, r.value)).collect();
    assert_eq!(
        kv,
        vec![
            (Bytes::from_static(b"a"), Bytes::from_static(b"1")),
            (Bytes::from_static(b"b"), Bytes::from_static(b"2"))
        ],
        "{on}"
    );
    let v = t
        .run(|tx| async move { tx.get(b"b").await })
        .await
        .expect("get");
    assert_eq!(v.as_deref(), Some(&b"2"[..]), "{on}");
    // Selectors stay inside the tenant, also past its last key and before its first.
    let k = t
        .run(|tx| async move {
            tx.get_key(
                fdb_driver_tokio::KeySelector::first_greater_than(b"a"),
                false,
            )
            .await
        })
        .await
        .expect("get_key");
    assert_eq!(k.as_ref(), b"b", "{on}");
    let rows = t
        .run(|tx| async move {
            tx.get_range_with(
                fdb_driver_tokio::KeySelector::first_greater_than(b"a"),
                fdb_driver_tokio::KeySelector::first_greater_or_equal(b"\xff"),
                Default::default(),
                false,
            )
            .await
        })
        .await
        .expect("range by selectors");
    let keys: Vec<Bytes> = rows.into_iter().map(|r| r.key).collect();
    assert_eq!(keys, vec![Bytes::from_static(b"b")], "{on}");

    // Outside the tenant, the keys are absent, and sit under the prefix in the raw key space.
    assert_eq!(
        db.run(|tx| async move { tx.get(b"a").await })
            .await
            .expect("raw get"),
        None
    );
    let raw = db
        .run(|tx| async move { tx.get_range(prefix, strinc(&prefix), 100).await })
        .await
        .expect("raw range");
    let raw_keys: Vec<Bytes> = raw.into_iter().map(|r| r.key).collect();
    assert_eq!(
        raw_keys,
        vec![
            Bytes::from([&prefix[..], b"a"].concat()),
            Bytes::from([&prefix[..], b"b"].concat())
        ],
        "{on}"
    );

    // `\xff` is outside a tenant's legal range.
    let tx = t.create_transaction();
    assert_eq!(
        code(tx.get(b"\xff").await),
        Some(ErrorCode::KEY_OUTSIDE_LEGAL_RANGE),
        "{on}"
    );

    // The Python binding (libfdb_c) sees the same tenant and keys.
    if !target.exact {
        python_agrees(&name, id);
    }

    // A missing tenant.
    let missing = db.open_tenant(target.k("tenant-missing"));
    let tx = missing.create_transaction();
    assert_eq!(
        code(tx.get(b"a").await),
        Some(ErrorCode::TENANT_NOT_FOUND),
        "{on}"
    );
    let tx = missing.create_transaction();
    tx.set(b"x", b"y");
    assert_eq!(
        code(tx.commit().await),
        Some(ErrorCode::TENANT_NOT_FOUND),
        "{on}"
    );
    assert_eq!(
        code(tx.on_error(ErrorCode::TENANT_NOT_FOUND).await),
        Some(ErrorCode::TENANT_NOT_FOUND)
    );

    // Deleting: not while it holds keys; then a transaction open under it fails.
    assert_eq!(
        code(tm::delete_tenant(db, &name).await),
        Some(ErrorCode::TENANT_NOT_EMPTY),
        "{on}"
    );
    let open = t.create_transaction();
    open.get(b"a").await.expect("read before delete");
    t.run(|tx| async move {
        tx.clear_range(b"", b"\xff");
        Ok(())
    })
    .await
    .expect("clear");
    tm::delete_tenant(db, &name).await.expect("delete");
    open.set(b"c", b"3");
    assert_eq!(
        code(open.commit().await),
        Some(ErrorCode::TENANT_NOT_FOUND),
        "{on}"
    );
    assert_eq!(
        code(t.run(|tx| async move { tx.get(b"a").await }).await),
        Some(ErrorCode::TENANT_NOT_FOUND),
        "{on}"
    );
    assert_eq!(
        code(tm::delete_tenant(db, &name).await),
        Some(ErrorCode::TENANT_NOT_FOUND),
        "{on}"
    );
    assert_eq!(
        code(tm::create_tenant(db, b"\xffbad").await),
        Some(ErrorCode::INVALID_TENANT_NAME)
    );

    // Created again: the old handle keeps the old id; a new handle sees the new tenant,
    // whose id is new.
    tm::create_tenant(db, &name).await.expect("recreate");
    assert_eq!(
        code(t.run(|tx| async move { tx.get(b"a").await }).await),
        Some(ErrorCode::TENANT_NOT_FOUND),
        "{on}"
    );
    let t2 = db.open_tenant(&name);
    assert_eq!(
        t2.run(|tx| async move { tx.get(b"a").await })
            .await
            .expect("new handle"),
        None
    );
    let relisted = tm::list_tenants(db, &name, [name.clone(), b"\x00".to_vec()].concat(), 10)
        .await
        .expect("list again");
    assert!(relisted[0].1 > id, "{on}: ids are not reused");
    drop(t2);
    tm::delete_tenant(db, &name).await.expect("cleanup");
}

/// The same scenario's core through the mio driver's blocking API.
fn mio_scenario(cf: fdb_protocol::cluster_file::ClusterFile, name: Vec<u8>) {
    use fdb_driver_mio::tenant_management as mtm;
    let db = fdb_driver_mio::Database::from_cluster_file(cf, 11).expect("mio open");
    let mcode = |r: Result<(), fdb_driver_mio::Error>| r.err().and_then(|e| e.code());

    mtm::create_tenant(&db, &name).expect("mio create");
    assert_eq!(
        mcode(mtm::create_tenant(&db, &name)),
        Some(ErrorCode::TENANT_ALREADY_EXISTS)
    );
    let listed = mtm::list_tenants(&db, &name, [name.clone(), b"\x00".to_vec()].concat(), 10)
        .expect("mio list");
    assert_eq!(listed.len(), 1);
    let id = listed[0].1;
    let t = db.open_tenant(&name);
    assert_eq!(t.name(), name.as_slice());
    t.run(|tx| {
        tx.set(b"k", b"v");
        Ok(())
    })
    .expect("mio write");
    let got = t.run(|tx| tx.get(b"k")).expect("mio read");
    assert_eq!(got.as_deref(), Some(&b"v"[..]));
    let raw = db
        .run(|tx| tx.get([&tenant_prefix(id)[..], b"k"].concat()))
        .expect("mio raw read");
    assert_eq!(
        raw.as_deref(),
        Some(&b"v"[..]),
        "the key sits under the prefix"
    );
    let viat: Result<Option<Bytes>, fdb_driver_mio::Error> =
        t.transact(Default::default(), |tx, _| tx.get(b"k"));
    assert_eq!(viat.expect("mio transact").as_deref(), Some(&b"v"[..]));

    assert_eq!(
        mcode(mtm::delete_tenant(&db, &name)),
        Some(ErrorCode::TENANT_NOT_EMPTY)
    );
    // The in-transaction forms: deleting refuses while keys remain, creating reports a
    // taken name without writing.
    let tx = db.create_transaction();
    assert!(!mtm::create_tenant_in(&tx, &name).expect("create_in a taken name"));
    t.run(|tx| {
        tx.clear(b"k");
        Ok(())
    })
    .expect("mio clear");
    let tx = db.create_transaction();
    assert!(mtm::delete_tenant_in(&tx, &name).expect("delete_in"));
    tx.commit().expect("commit the delete");
    assert_eq!(
        t.run(|tx| tx.get(b"k")).err().and_then(|e| e.code()),
        Some(ErrorCode::TENANT_NOT_FOUND)
    );
    assert_eq!(
        mcode(mtm::delete_tenant(&db, &name)),
        Some(ErrorCode::TENANT_NOT_FOUND)
    );
    let missing = db.open_tenant([&name[..], b"-missing"].concat());
    let tx = missing.create_transaction();
    assert_eq!(
        tx.get(b"k").err().and_then(|e| e.code()),
        Some(ErrorCode::TENANT_NOT_FOUND)
    );
}

/// NativeAPI's tenant rules on a cluster with `tenant_mode=optional`, as libfdb_c 7.3.77 kept
/// them (Python binding probe on fdbserver 7.3.77): `raw_access`, `access_system_keys` and
/// `read_system_keys` on a tenant transaction are accepted by `set_option` and fail the next
/// read with `invalid_option` (2007); a watch in a tenant watches the tenant's key (a write
/// to the same key outside the tenant does not fire it) and ends with `tenant_removed`
/// (2142) when the tenant is deleted under it.
#[test]
fn tenant_rules_scenario() {
    dual::run(
        "tenant-rules",
        Duration::from_secs(120),
        |t: Target| async move {
            let db = &t.db;
            let on = t.name;
            let name = t.k("rules");
            tm::create_tenant(db, &name).await.expect("create");
            let ten = db.open_tenant(&name);
            for opt in [
                TransactionOption::RawAccess,
                TransactionOption::AccessSystemKeys,
                TransactionOption::ReadSystemKeys,
            ] {
                let tx = ten.create_transaction();
                tx.set_option(opt.clone())
                    .expect("set_option defers the refusal");
                assert_eq!(
                    code(tx.get(b"a").await),
                    Some(ErrorCode::INVALID_OPTION),
                    "{on}: {opt:?} in a tenant"
                );
            }
            let tx = db.create_transaction();
            tx.set_option(TransactionOption::RawAccess)
                .expect("raw access");
            assert_eq!(tx.get(t.k("a")).await.expect("a raw read"), None);

            // A watch in the tenant: the same key outside the tenant is another key.
            let wkey = t.k("w");
            let k = wkey.clone();
            ten.run(|tx| {
                let k = k.clone();
                async move {
                    tx.set(&k, b"1");
                    Ok(())
                }
            })
            .await
            .expect("set in tenant");
            let tx = ten.create_transaction();
            let w = tx.watch(&wkey);
            tx.commit().await.expect("commit the watch");
            let k = wkey.clone();
            db.run(|tx| {
                let k = k.clone();
                async move {
                    tx.set(&k, b"raw");
                    Ok(())
                }
            })
            .await
            .expect("raw write of the same key");
            let tx = ten.create_transaction();
            tx.set(&wkey, b"2");
            let changed = tx.commit().await.expect("change in tenant");
            let fired = w.await.expect("the watch fires");
            assert!(
                fired >= changed,
                "{on}: fired at {fired}, before the tenant's change at {changed}"
            );

            // A watch whose tenant is deleted.
            ten.run(|tx| async move {
                tx.clear_range(b"", b"\xff");
                Ok(())
            })
            .await
            .expect("clear");
            let tx = ten.create_transaction();
            let w = tx.watch(&wkey);
            tx.commit().await.expect("commit the watch");
            tm::delete_tenant(db, &name).await.expect("delete");
            // `tenant_removed` once the storage server holds the watch; `tenant_not_found` if the
            // deletion reached it first.
            let c = code(w.await);
            assert!(
                c == Some(ErrorCode::TENANT_REMOVED) || c == Some(ErrorCode::TENANT_NOT_FOUND),
                "{on}: watch of a deleted tenant ended with {c:?}"
            );
        },
    );
}

/// Writes tenant `name` with id `id` into the test cluster's tenant map and name index, as
/// the management transaction would (which a cluster with tenants disabled refuses).
fn seed_tenant(c: &TestCluster, name: &[u8], id: i64) {
    let entry = TenantMapEntry {
        id,
        tenant_name: Bytes::copy_from_slice(name),
        lock_state: 0,
        lock_id: None,
        tenant_group: None,
        configuration_sequence_num: 0,
    };
    c.set(
        &[&b"\xff/tenant/map/"[..], &tenant_prefix(id)].concat(),
        &entry.encode_value(),
    );
    c.set(
        &[
            &b"\xff/tenant/nameIndex/"[..],
            &tuple::pack(&(name.to_vec(),)),
        ]
        .concat(),
        &tuple::pack(&(id,)),
    );
}

fn test_cluster_db(c: &TestCluster) -> fdb_driver_tokio::Database {
    let cf = ClusterFile::parse(&c.cluster_file_string()).expect("cluster file");
    fdb_driver_tokio::Database::from_cluster_file(cf, 5).expect("open")
}

/// `tenant_mode=disabled` (what fdbserver 7.3.77 answered after `configure
/// tenant_mode=disabled`, through libfdb_c): a tenant that still exists fails its reads and
/// commits with `tenants_disabled` (2136), its read version is served; plain transactions
/// work; creating a tenant fails with 2136, listing works. Test cluster only: the real
/// cluster's mode is not the test's to change.
#[test]
fn tenants_disabled_on_the_test_cluster() {
    let c = TestCluster::builder().tenant_mode(0).start();
    seed_tenant(&c, b"kept", 1);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let db = test_cluster_db(&c);
        let t = db.open_tenant(b"kept");
        let tx = t.create_transaction();
        assert_eq!(code(tx.get(b"x").await), Some(ErrorCode::TENANTS_DISABLED));
        let tx = t.create_transaction();
        tx.set(b"y", b"1");
        assert_eq!(code(tx.commit().await), Some(ErrorCode::TENANTS_DISABLED));
        t.create_transaction()
            .get_read_version()
            .await
            .expect("read version in a tenant");
        db.run(|tx| async move {
            tx.set(b"plain", b"1");
            Ok(())
        })
        .await
        .expect("plain commit");
        assert_eq!(
            code(tm::create_tenant(&db, b"new").await),
            Some(ErrorCode::TENANTS_DISABLED)
        );
        let listed = tm::list_tenants(&db, b"", b"\xff", 10).await.expect("list");
        assert_eq!(listed, vec![(Bytes::from_static(b"kept"), 1)]);
    });
}

/// `tenant_mode=required_experimental` (fdbserver 7.3.77 after `configure FORCE
/// tenant_mode=required_experimental`, through libfdb_c): a plain read or commit fails with
/// `tenant_name_required` (2130), its read version is served; `raw_access` and
/// `read_system_keys` reads work; a plain watch fails with 2130 while its read-only commit
/// succeeds; a raw write outside every tenant is refused by the proxy
/// with `illegal_tenant_access` (2138); tenant transactions work. Test cluster only.
#[test]
fn tenants_required_on_the_test_cluster() {
    let c = TestCluster::builder().tenant_mode(2).start();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let db = test_cluster_db(&c);
        tm::create_tenant(&db, b"req").await.expect("create");
        let t = db.open_tenant(b"req");
        t.run(|tx| async move {
            tx.set(b"x", b"1");
            Ok(())
        })
        .await
        .expect("tenant write");
        let tx = db.create_transaction();
        assert_eq!(
            code(tx.get(b"x").await),
            Some(ErrorCode::TENANT_NAME_REQUIRED)
        );
        let tx = db.create_transaction();
        tx.set(b"x", b"1");
        assert_eq!(
            code(tx.commit().await),
            Some(ErrorCode::TENANT_NAME_REQUIRED)
        );
        db.create_transaction()
            .get_read_version()
            .await
            .expect("plain read version");
        // A plain watch: its read-only commit succeeds, the watch fails.
        let tx = db.create_transaction();
        let w = tx.watch(b"x");
        tx.commit().await.expect("a read-only commit with a watch");
        assert_eq!(code(w.await), Some(ErrorCode::TENANT_NAME_REQUIRED));
        let tx = db.create_transaction();
        tx.set_option(TransactionOption::RawAccess).expect("raw");
        assert_eq!(tx.get(b"x").await.expect("raw read"), None);
        let id = tm::list_tenants(&db, b"req", b"req\x00", 1)
            .await
            .expect("list")[0]
            .1;
        let raw_key = [&tenant_prefix(id)[..], b"x"].concat();
        let tx = db.create_transaction();
        tx.set_option(TransactionOption::ReadSystemKeys)
            .expect("read_system_keys");
        assert_eq!(
            tx.get(&raw_key)
                .await
                .expect("read_system_keys read")
                .as_deref(),
            Some(&b"1"[..])
        );
        let tx = db.create_transaction();
        tx.set_option(TransactionOption::RawAccess).expect("raw");
        tx.set(b"outside", b"1");
        assert_eq!(
            code(tx.commit().await),
            Some(ErrorCode::ILLEGAL_TENANT_ACCESS)
        );
        let tx = db.create_transaction();
        tx.set_option(TransactionOption::RawAccess).expect("raw");
        tx.set(&raw_key, b"2");
        tx.commit().await.expect("a raw write inside a tenant");
        let v = t
            .run(|tx| async move { tx.get(b"x").await })
            .await
            .expect("tenant read");
        assert_eq!(v.as_deref(), Some(&b"2"[..]));
    });
}

/// Runs the Python binding on the tenant: it lists it with the same id and reads its keys.
fn python_agrees(name: &[u8], id: i64) {
    let ok = std::process::Command::new("python3")
        .args(["-c", "import fdb"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("tenants: python3 fdb binding unavailable, libfdb_c comparison skipped");
        return;
    }
    let script = r#"
import fdb, sys, json
fdb.api_version(730)
from fdb import tenant_management as tm
db = fdb.open()
name = bytes.fromhex(sys.argv[1])
ts = [kv for kv in tm.list_tenants(db, name, name + b"\x00", 10)]
meta = json.loads(ts[0].value)
t = db.open_tenant(name)
@fdb.transactional
def r(tr): return [(kv.key.hex(), kv.value.hex()) for kv in tr.get_range(b"", b"\xff")]
print(json.dumps({"id": meta["id"], "rows": r(t)}))
"#;
    let hex: String = name.iter().map(|b| format!("{b:02x}")).collect();
    let out = std::process::Command::new("python3")
        .args(["-c", script, &hex])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "python: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["id"].as_i64(), Some(id));
    assert_eq!(
        v["rows"],
        serde_json::json!([["61", "31"], ["62", "32"]]),
        "libfdb_c reads what this client wrote in the tenant"
    );
}
