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

use fdb_tests::to_hex as hexs;
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
    assert_eq!(listed[0].name(), name.as_slice());
    let id = listed[0].id();
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
    assert!(relisted[0].id() > id, "{on}: ids are not reused");
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
    let id = listed[0].id();
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
    // Groups, locks and the listing through the blocking API.
    let g = [&name[..], b"-g"].concat();
    let grouped = [&name[..], b"-t"].concat();
    mtm::create_tenant_with(&db, &grouped, &mtm::TenantConfig::group(&g)).expect("mio group");
    let e = mtm::get_tenant(&db, &grouped)
        .expect("mio get")
        .expect("exists");
    assert_eq!(e.tenant_group.as_deref(), Some(g.as_slice()));
    let lock = fdb_protocol::Uid::new(1, 2);
    mtm::lock_tenant(&db, &grouped, mtm::TenantLockState::Locked, lock).expect("mio lock");
    let locked = db.open_tenant(&grouped);
    assert_eq!(
        locked.run(|tx| tx.get(b"k")).err().and_then(|e| e.code()),
        Some(ErrorCode::TENANT_LOCKED)
    );
    let rows =
        mtm::list_tenants(&db, &grouped, [&grouped[..], b"\x00"].concat(), 0).expect("mio list");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].value, Bytes::from(rows[0].entry.to_json()));
    assert!(std::str::from_utf8(&rows[0].value)
        .expect("utf-8")
        .contains(r#""lock_id":"00000000000000010000000000000002","lock_state":"locked""#));
    mtm::unlock_tenant(&db, &grouped, lock).expect("mio unlock");
    mtm::configure_tenant(&db, &grouped, &mtm::TenantConfig::default()).expect("mio ungroup");
    assert_eq!(
        mtm::get_tenant(&db, &grouped)
            .expect("mio get")
            .expect("exists")
            .tenant_group,
        None
    );
    mtm::delete_tenant(&db, &grouped).expect("mio delete");

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
        let listed: Vec<(&[u8], i64)> = listed.iter().map(|r| (r.name(), r.id())).collect();
        assert_eq!(listed, vec![(&b"kept"[..], 1)]);
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
            .id();
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
    let out = std::process::Command::new("python3")
        .args(["-c", script, &hexs(name)])
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

/// Tenant map values fdbserver 7.3.77 stored after libfdb_c's special-key management calls
/// (read back raw): tenant 4 `g1` in group `grpC`, tenant 6 `g3` in group `grpB` locked read-only
/// by fdbcli (`tenant lock g3 w fedcba98765432100000000000000001`), and the group map value of
/// a group. Each decodes to the typed entry, re-encodes to the same bytes, and renders the JSON
/// libfdb_c listed for it.
#[test]
fn group_and_lock_entries_encode_as_fdbserver_stores_them() {
    use fdb_protocol::tenant_map::{TenantEntry, TenantGroupEntry, TenantLockState};
    let hex = fdb_tests::from_hex;
    let g1 = hex("00000073b000db0f2400000035a46b000000060008000400140023000400140020002100180022001c000c001a000000040000001c000000040000000000000000000000000000001800000000000000080000000000010004000000677270430200000067310000");
    let e = TenantEntry::from_map_value(&g1).expect("g1 decodes");
    assert_eq!(
        (e.id, &e.name[..], e.tenant_group.as_deref()),
        (4, &b"g1"[..], Some(&b"grpC"[..]))
    );
    assert_eq!(e.to_map_value(), g1, "re-encodes as fdbserver stored it");
    assert_eq!(
        e.to_json(),
        r#"{"id":4,"lock_state":"unlocked","name":{"base64":"ZzE=","printable":"g1"},"prefix":{"base64":"AAAAAAAAAAQ=","printable":"\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x04"},"tenant_group":{"base64":"Z3JwQw==","printable":"grpC"}}"#
    );
    let g3 = hex("00000073b000db0f2400000035a46b000000060008000400140023000400140020002100180022001c000c001a000000040000001c000000060000000000000000000000000000002800000014000000080000000101010004000000677270421032547698badcfe01000000000000000200000067330000");
    let e = TenantEntry::from_map_value(&g3).expect("g3 decodes");
    assert_eq!(e.lock_state, TenantLockState::ReadOnly);
    assert_eq!(
        e.lock_id.map(|u| u.to_string()).as_deref(),
        Some("fedcba98765432100000000000000001")
    );
    assert_eq!(e.to_map_value(), g3, "re-encodes as fdbserver stored it");
    assert_eq!(
        e.to_json(),
        r#"{"id":6,"lock_id":"fedcba98765432100000000000000001","lock_state":"read only","name":{"base64":"ZzM=","printable":"g3"},"prefix":{"base64":"AAAAAAAAAAY=","printable":"\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x06"},"tenant_group":{"base64":"Z3JwQg==","printable":"grpB"}}"#
    );
    let group =
        hex("00000073b000db0f14000000be3fa4000000060008000400040004000a000000040000000c000000");
    TenantGroupEntry::decode_value(&group).expect("the group entry decodes");
    assert_eq!(TenantGroupEntry::default().encode_value(), group);
}

/// Runs a Python (libfdb_c) snippet on the real cluster with `args`, returning its stdout as
/// JSON; `None` when the binding is not installed.
fn python_json(script: &str, args: &[String]) -> Option<serde_json::Value> {
    let ok = std::process::Command::new("python3")
        .args(["-c", "import fdb"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("tenants: python3 fdb binding unavailable, libfdb_c comparison skipped");
        return None;
    }
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "python: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).expect("python printed JSON"))
}

/// libfdb_c's rows for tenant names `[begin, end)`, as `[key hex, value hex]`: its range read
/// of `\xff\xff/management/tenant/map/<begin>..<end>` with that limit. The script also checks
/// that `fdb.tenant_management.list_tenants` yields the same values, keyed by the bare names
/// (the binding strips the special-key prefix).
fn python_list(begin: &[u8], end: &[u8], limit: usize) -> Option<serde_json::Value> {
    let script = r#"
import fdb, sys, json
fdb.api_version(730)
from fdb import tenant_management as tm
db = fdb.open()
b, e, n = bytes.fromhex(sys.argv[1]), bytes.fromhex(sys.argv[2]), int(sys.argv[3])
P = b"\xff\xff/management/tenant/map/"
@fdb.transactional
def raw(tr):
    return [(kv.key, kv.value) for kv in tr.get_range(P + b, P + e, n)]
rows = raw(db)
listed = [(kv.key, kv.value) for kv in tm.list_tenants(db, b, e, n)]
assert listed == [(k[len(P):], v) for k, v in rows], (listed, rows)
print(json.dumps([[k.hex(), v.hex()] for k, v in rows]))
"#;
    python_json(script, &[hexs(begin), hexs(end), limit.to_string()])
}

fn rows_hex(rows: &[tm::TenantRow]) -> serde_json::Value {
    serde_json::Value::Array(
        rows.iter()
            .map(|r| serde_json::json!([hexs(&r.key), hexs(&r.value)]))
            .collect(),
    )
}

/// Base64 as libb64 writes it (newlines allowed), decoded.
fn unbase64(s: &str) -> Vec<u8> {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let digits: Vec<u32> = s
        .bytes()
        .filter(|c| *c != b'\n' && *c != b'=')
        .map(|c| A.iter().position(|a| *a == c).expect("a base64 digit") as u32)
        .collect();
    let mut out = Vec::new();
    for chunk in digits.chunks(4) {
        let mut n = 0u32;
        for (i, d) in chunk.iter().enumerate() {
            n |= d << (18 - 6 * i);
        }
        for i in 0..chunk.len().saturating_sub(1) {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    out
}

/// Checks a listing row's JSON against its typed entry, field by field.
fn check_row(row: &tm::TenantRow, on: &str) {
    let mut key = b"\xff\xff/management/tenant/map/".to_vec();
    key.extend_from_slice(row.name());
    assert_eq!(row.key.as_ref(), key.as_slice(), "{on}");
    let v: serde_json::Value = serde_json::from_slice(&row.value).expect("the value is JSON");
    assert_eq!(v["id"].as_i64(), Some(row.id()), "{on}");
    let name_b64 = v["name"]["base64"].as_str().expect("name.base64");
    assert_eq!(unbase64(name_b64), row.name(), "{on}");
    assert_eq!(
        name_b64.ends_with('\n'),
        !row.name().is_empty() && row.name().len().checked_rem(54) == Some(0),
        "{on}: libb64 keeps a newline after a full last line"
    );
    assert_eq!(
        unbase64(v["prefix"]["base64"].as_str().expect("prefix.base64")),
        tenant_prefix(row.id()),
        "{on}"
    );
    assert_eq!(
        v["lock_state"].as_str(),
        Some(row.entry.lock_state.as_str()),
        "{on}"
    );
    match &row.entry.tenant_group {
        Some(g) => assert_eq!(
            unbase64(v["tenant_group"]["base64"].as_str().expect("group")),
            g.as_ref()
        ),
        None => assert!(v.get("tenant_group").is_none(), "{on}"),
    }
}

/// The JSON fdbserver 7.3.77 + libfdb_c listed for tenants 1..3 of a fresh cluster created
/// in this order (Python probe): plain, binary (every escape: NUL, `\`, a high byte, DEL,
/// `"`), and an 82-byte name (libb64's line break after 72 characters).
const FRESH_LISTING: [(&[u8], &str); 3] = [
    (
        b"p-plain",
        r#"{"id":1,"lock_state":"unlocked","name":{"base64":"cC1wbGFpbg==","printable":"p-plain"},"prefix":{"base64":"AAAAAAAAAAE=","printable":"\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x01"}}"#,
    ),
    (
        b"p-bin\x00\x01\\\xfe\x7f\"'/",
        r#"{"id":2,"lock_state":"unlocked","name":{"base64":"cC1iaW4AAVz+fyInLw==","printable":"p-bin\\x00\\x01\\\\\\xfe\\x7f\"'/"},"prefix":{"base64":"AAAAAAAAAAI=","printable":"\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x02"}}"#,
    ),
    (
        b"p-LLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLL",
        r#"{"id":3,"lock_state":"unlocked","name":{"base64":"cC1MTExMTExMTExMTExMTExMTExMTExMTExMTExMTExMTExMTExMTExMTExMTExMTExMTExM\nTExMTExMTExMTExMTExMTExMTExMTExMTExMTA==","printable":"p-LLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLL"},"prefix":{"base64":"AAAAAAAAAAM=","printable":"\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x03"}}"#,
    ),
];

/// `list_tenants` gives libfdb_c's `\xff\xff/management/tenant/map/` rows: on the test cluster
/// (fresh, so the ids are known) byte for byte the JSON fdbserver + libfdb_c gave for the same
/// tenants; on the real cluster byte for byte what the Python binding lists for the same range,
/// limits included. A 54-byte name shows libb64's trailing newline.
#[test]
fn tenant_listing_matches_libfdb_c() {
    dual::run(
        "tenant-list",
        Duration::from_secs(120),
        |t: Target| async move {
            let db = &t.db;
            let on = t.name;
            let mut names: Vec<Vec<u8>> = FRESH_LISTING
                .iter()
                .map(|(n, _)| [&t.prefix[..], n].concat())
                .collect();
            let mut n54 = t.k("q");
            n54.resize(54, b'5');
            names.push(n54);
            for n in &names {
                tm::create_tenant(db, n).await.expect("create");
            }
            let begin = t.prefix.clone();
            let end = t.end();
            let rows = tm::list_tenants(db, &begin, &end, 0).await.expect("list");
            let listed: Vec<&[u8]> = rows.iter().map(|r| r.name()).collect();
            let mut sorted: Vec<&[u8]> = names.iter().map(|n| n.as_slice()).collect();
            sorted.sort();
            assert_eq!(listed, sorted, "{on}: name order");
            for r in &rows {
                check_row(r, on);
            }
            if t.exact {
                for (name, json) in FRESH_LISTING {
                    let r = rows.iter().find(|r| r.name() == name).expect("listed");
                    assert_eq!(
                        std::str::from_utf8(&r.value).expect("utf-8"),
                        json,
                        "fdbserver's JSON"
                    );
                }
            }
            // A limit keeps the first rows; `end` is exclusive.
            let two = tm::list_tenants(db, &begin, &end, 2).await.expect("limit");
            assert_eq!(two, rows[..2].to_vec(), "{on}");
            let one = tm::list_tenants(db, rows[1].name(), rows[2].name(), 0)
                .await
                .expect("range");
            assert_eq!(one, rows[1..2].to_vec(), "{on}");
            if !t.exact {
                for (b, e, n, ours) in [
                    (&begin[..], &end[..], 0, &rows[..]),
                    (&begin[..], &end[..], 2, &two[..]),
                    (rows[1].name(), rows[2].name(), 0, &one[..]),
                ] {
                    if let Some(theirs) = python_list(b, e, n) {
                        assert_eq!(rows_hex(ours), theirs, "libfdb_c's rows, byte for byte");
                    }
                }
            }
            for n in &names {
                tm::delete_tenant(db, n).await.expect("delete");
            }
            assert!(tm::list_tenants(db, &begin, &end, 0)
                .await
                .expect("list")
                .is_empty());
        },
    );
}

/// The group keys under this target's prefix: the group map's groups, and the index's
/// `(group, id)` pairs.
async fn raw_groups(t: &Target) -> (Vec<(Bytes, Bytes)>, Vec<(Vec<u8>, i64)>) {
    let (p, e) = (t.prefix.clone(), t.end());
    t.db.run(|tx| {
        let (p, e) = (p.clone(), e.clone());
        async move {
            tx.set_option(TransactionOption::ReadSystemKeys)?;
            let m = b"\xff/tenant/tenantGroup/map/";
            let map = tx
                .get_range([&m[..], &p].concat(), [&m[..], &e].concat(), 0)
                .await?
                .into_iter()
                .map(|kv| (kv.key.slice(m.len()..), kv.value))
                .collect();
            let i = b"\xff/tenant/tenantGroup/tenantIndex/\x01";
            let index = tx
                .get_range([&i[..], &p].concat(), [&i[..], &e].concat(), 0)
                .await?
                .into_iter()
                .map(|kv| {
                    assert!(kv.value.is_empty(), "index values are empty");
                    // 7.3: `(group, id)`; 7.4 adds the tenant's name between them.
                    let t = &kv.key[i.len() - 1..];
                    tuple::unpack::<(Vec<u8>, i64)>(t)
                        .or_else(|_| {
                            tuple::unpack::<(Vec<u8>, Vec<u8>, i64)>(t).map(|(g, _, id)| (g, id))
                        })
                        .expect("a tuple")
                })
                .collect();
            Ok((map, index))
        }
    })
    .await
    .expect("raw group keys")
}

/// Tenant groups (7.3, `tenant_group`), as fdbserver 7.3.77 + libfdb_c's special-key API
/// behaved (Python probe: `\xff\xff/management/tenant/map/<name>` set with
/// `\xff\xff/management/tenant/configure/<tuple(name, "tenant_group")>`): a group exists
/// (`\xff/tenant/tenantGroup/map/<group>`) while it has tenants, each indexed under
/// `tuple(group, id)`; moving a tenant to another group is allowed on a standalone cluster and
/// an emptied group disappears; a `\xff` group name is `invalid_tenant_group_name` (2139) on
/// create and configure; configuring a missing tenant is `tenant_not_found` (2131). On the real
/// cluster the Python binding lists the same JSON, and a tenant it puts in a group through the
/// special keys reads back here in that group.
#[test]
fn tenant_groups_scenario() {
    use fdb_protocol::tenant_map::TenantGroupEntry;
    dual::run(
        "tenant-groups",
        Duration::from_secs(120),
        |t: Target| async move {
            let db = &t.db;
            let on = t.name;
            let (a, b, c) = (t.k("ga"), t.k("gb"), t.k("gc"));
            let (g1, g2) = (t.k("grp1"), t.k("grp2"));
            tm::create_tenant_with(db, &a, &tm::TenantConfig::group(&g1))
                .await
                .expect("create a in g1");
            tm::create_tenant_with(db, &b, &tm::TenantConfig::group(&g1))
                .await
                .expect("create b in g1");
            tm::create_tenant(db, &c).await.expect("create c");
            let ea = tm::get_tenant(db, &a)
                .await
                .expect("get")
                .expect("a exists");
            let eb = tm::get_tenant(db, &b)
                .await
                .expect("get")
                .expect("b exists");
            let ec = tm::get_tenant(db, &c)
                .await
                .expect("get")
                .expect("c exists");
            assert_eq!(ea.tenant_group.as_deref(), Some(g1.as_slice()), "{on}");
            assert_eq!(ec.tenant_group, None, "{on}");
            let (map, index) = raw_groups(&t).await;
            // (Our client writes 7.3's version in front, which a 7.4 cluster reads too.)
            let group_value = Bytes::from(TenantGroupEntry::default().encode_value());
            assert_eq!(
                map,
                vec![(Bytes::from(g1.clone()), group_value.clone())],
                "{on}"
            );
            assert_eq!(
                index,
                vec![(g1.clone(), ea.id), (g1.clone(), eb.id)],
                "{on}"
            );

            // Errors.
            let bad = tm::TenantConfig::group(b"\xffbad");
            assert_eq!(
                code(tm::create_tenant_with(db, t.k("gbad"), &bad).await),
                Some(ErrorCode::INVALID_TENANT_GROUP_NAME),
                "{on}"
            );
            assert_eq!(tm::get_tenant(db, t.k("gbad")).await.expect("get"), None);
            assert_eq!(
                code(tm::configure_tenant(db, &a, &bad).await),
                Some(ErrorCode::INVALID_TENANT_GROUP_NAME),
                "{on}"
            );
            assert_eq!(
                code(
                    tm::configure_tenant(db, t.k("gmissing"), &tm::TenantConfig::group(&g1)).await
                ),
                Some(ErrorCode::TENANT_NOT_FOUND),
                "{on}"
            );

            // Moving: c into g2, a from g1 to g2, b out of any group (g1 empties and goes).
            tm::configure_tenant(db, &c, &tm::TenantConfig::group(&g2))
                .await
                .expect("c into g2");
            tm::configure_tenant(db, &a, &tm::TenantConfig::group(&g2))
                .await
                .expect("a moves to g2");
            tm::configure_tenant(db, &b, &tm::TenantConfig::default())
                .await
                .expect("b leaves its group");
            let (map, index) = raw_groups(&t).await;
            assert_eq!(
                map,
                vec![(Bytes::from(g2.clone()), group_value.clone())],
                "{on}"
            );
            assert_eq!(
                index,
                vec![(g2.clone(), ea.id), (g2.clone(), ec.id)],
                "{on}"
            );
            let rows = tm::list_tenants(db, &t.prefix, t.end(), 0)
                .await
                .expect("list");
            let groups: Vec<Option<&[u8]>> = rows
                .iter()
                .map(|r| r.entry.tenant_group.as_deref())
                .collect();
            assert_eq!(groups, vec![Some(&g2[..]), None, Some(&g2[..])], "{on}");
            for r in &rows {
                check_row(r, on);
            }

            if !t.exact {
                // libfdb_c puts d into g2 through the special keys; both sides list the same.
                let d = t.k("gd");
                let script = r#"
import fdb, sys, json
fdb.api_version(730)
db = fdb.open()
name, group = bytes.fromhex(sys.argv[1]), bytes.fromhex(sys.argv[2])
@fdb.transactional
def create(tr):
    tr.options.set_special_key_space_enable_writes()
    tr[b"\xff\xff/management/tenant/map/" + name] = b""
    tr[b"\xff\xff/management/tenant/configure/" + fdb.tuple.pack((name, b"tenant_group"))] = group
create(db)
print("{}")
"#;
                if python_json(script, &[hexs(&d), hexs(&g2)]).is_some() {
                    let ed = tm::get_tenant(db, &d)
                        .await
                        .expect("get")
                        .expect("d exists");
                    assert_eq!(ed.tenant_group.as_deref(), Some(g2.as_slice()));
                    let (_, index) = raw_groups(&t).await;
                    assert!(
                        index.contains(&(g2.clone(), ed.id)),
                        "libfdb_c's index entry"
                    );
                    let ours = tm::list_tenants(db, &t.prefix, t.end(), 0)
                        .await
                        .expect("list");
                    let theirs = python_list(&t.prefix, &t.end(), 0).expect("python");
                    assert_eq!(rows_hex(&ours), theirs, "libfdb_c's rows, byte for byte");
                    tm::delete_tenant(db, &d).await.expect("delete d");
                }
            }

            for n in [&a, &b, &c] {
                tm::delete_tenant(db, n).await.expect("delete");
            }
            let (map, index) = raw_groups(&t).await;
            assert!(
                map.is_empty() && index.is_empty(),
                "{on}: groups go with their tenants"
            );
        },
    );
}

/// Tenant locks, as fdbserver 7.3.77 enforced them on tenants locked by fdbcli's `tenant lock`
/// (`TenantAPI::changeLockState`; probe through the Python binding): a locked tenant fails
/// reads and commits with `tenant_locked` (2144), a read-only one only commits; `lock_aware`
/// transactions pass both; read versions are served. Locking or unlocking under another lock
/// id is `tenant_locked`. The listing shows `lock_id` and `lock_state`; on the real cluster
/// libfdb_c lists the same JSON and is refused the same way.
#[test]
fn tenant_lock_scenario() {
    use fdb_protocol::Uid;
    use tm::TenantLockState as L;
    dual::run(
        "tenant-lock",
        Duration::from_secs(120),
        |t: Target| async move {
            let db = &t.db;
            let on = t.name;
            let name = t.k("locked");
            tm::create_tenant(db, &name).await.expect("create");
            let ten = db.open_tenant(&name);
            ten.run(|tx| async move {
                tx.set(b"k", b"v");
                Ok(())
            })
            .await
            .expect("write");
            let id = Uid::new(0x0123_4567_89ab_cdef, 0xaa);
            let other = Uid::new(7, 7);
            tm::lock_tenant(db, &name, L::Locked, id)
                .await
                .expect("lock");
            let e = tm::get_tenant(db, &name)
                .await
                .expect("get")
                .expect("exists");
            assert_eq!((e.lock_state, e.lock_id), (L::Locked, Some(id)), "{on}");
            let row = &tm::list_tenants(db, &name, [&name[..], b"\x00"].concat(), 0)
                .await
                .expect("list")[0];
            let json = std::str::from_utf8(&row.value).expect("utf-8");
            assert!(
                json.contains(
                    r#""lock_id":"0123456789abcdef00000000000000aa","lock_state":"locked""#
                ),
                "{on}: {json}"
            );
            check_row(row, on);

            let read = |aware: bool| {
                let tx = ten.create_transaction();
                async move {
                    if aware {
                        tx.set_option(TransactionOption::LockAware)?;
                    }
                    tx.get(b"k").await
                }
            };
            let write = |aware: bool| {
                let tx = ten.create_transaction();
                async move {
                    if aware {
                        tx.set_option(TransactionOption::LockAware)?;
                    }
                    tx.set(b"k", b"w");
                    tx.commit().await
                }
            };
            assert_eq!(
                code(read(false).await),
                Some(ErrorCode::TENANT_LOCKED),
                "{on}"
            );
            assert_eq!(
                code(write(false).await),
                Some(ErrorCode::TENANT_LOCKED),
                "{on}"
            );
            ten.create_transaction()
                .get_read_version()
                .await
                .expect("a read version for a locked tenant");
            assert_eq!(
                read(true).await.expect("lock-aware read").as_deref(),
                Some(&b"v"[..]),
                "{on}"
            );
            write(true).await.expect("lock-aware write");
            if !t.exact {
                python_refused(&name, "read", ErrorCode::TENANT_LOCKED);
                if let Some(theirs) = python_list(&name, &[&name[..], b"\x00"].concat(), 0) {
                    assert_eq!(rows_hex(std::slice::from_ref(row)), theirs);
                }
            }

            // Another id can neither lock nor unlock it.
            assert_eq!(
                code(tm::lock_tenant(db, &name, L::ReadOnly, other).await),
                Some(ErrorCode::TENANT_LOCKED),
                "{on}"
            );
            assert_eq!(
                code(tm::unlock_tenant(db, &name, other).await),
                Some(ErrorCode::TENANT_LOCKED),
                "{on}"
            );

            // Read-only under the same id: reads pass, commits do not.
            tm::lock_tenant(db, &name, L::ReadOnly, id)
                .await
                .expect("read-only");
            assert_eq!(
                read(false)
                    .await
                    .expect("read of a read-only tenant")
                    .as_deref(),
                Some(&b"w"[..]),
                "{on}"
            );
            assert_eq!(
                code(write(false).await),
                Some(ErrorCode::TENANT_LOCKED),
                "{on}"
            );
            if !t.exact {
                python_refused(&name, "write", ErrorCode::TENANT_LOCKED);
            }

            tm::unlock_tenant(db, &name, id).await.expect("unlock");
            let e = tm::get_tenant(db, &name)
                .await
                .expect("get")
                .expect("exists");
            assert_eq!((e.lock_state, e.lock_id), (L::Unlocked, None), "{on}");
            write(false).await.expect("a write after unlocking");
            ten.run(|tx| async move {
                tx.clear(b"k");
                Ok(())
            })
            .await
            .expect("clear");
            tm::delete_tenant(db, &name).await.expect("delete");
        },
    );
}

/// The Python binding's `what` ("read" or "write") in tenant `name` fails with `expect`.
fn python_refused(name: &[u8], what: &str, expect: ErrorCode) {
    let script = r#"
import fdb, sys, json
fdb.api_version(730)
db = fdb.open()
t = db.open_tenant(bytes.fromhex(sys.argv[1]))
tr = t.create_transaction()
try:
    if sys.argv[2] == "read":
        tr[b"k"].wait()
    else:
        tr[b"k"] = b"p"
        tr.commit().wait()
    print(json.dumps({"code": 0}))
except fdb.FDBError as e:
    print(json.dumps({"code": e.code}))
"#;
    if let Some(v) = python_json(script, &[hexs(name), what.to_owned()]) {
        assert_eq!(
            v["code"].as_i64(),
            Some(expect.0 as i64),
            "libfdb_c's {what}"
        );
    }
}

/// A tenant map entry no 7.3 server writes (lock state 9) under a listed name: listing and
/// getting it fail with `internal_error` (4100) instead of inventing a tenant; a tenant whose
/// name index points at no entry is `tenant_not_found` (2131), as `getTenantTransaction`
/// throws. Test cluster only (the values are planted).
#[test]
fn listing_refuses_entries_that_lie() {
    let c = TestCluster::start();
    let mut bad = TenantMapEntry {
        id: 1,
        tenant_name: Bytes::from_static(b"liar"),
        ..Default::default()
    };
    bad.lock_state = 9;
    c.set(
        &[&b"\xff/tenant/map/"[..], &tenant_prefix(1)].concat(),
        &bad.encode_value(),
    );
    c.set(
        &[
            &b"\xff/tenant/nameIndex/"[..],
            &tuple::pack(&(b"liar".to_vec(),)),
        ]
        .concat(),
        &tuple::pack(&(1i64,)),
    );
    c.set(
        &[
            &b"\xff/tenant/nameIndex/"[..],
            &tuple::pack(&(b"ghost".to_vec(),)),
        ]
        .concat(),
        &tuple::pack(&(2i64,)),
    );
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let db = test_cluster_db(&c);
        assert_eq!(
            code(tm::list_tenants(&db, b"l", b"m", 0).await),
            Some(ErrorCode::INTERNAL_ERROR)
        );
        assert_eq!(
            code(tm::get_tenant(&db, b"liar").await),
            Some(ErrorCode::INTERNAL_ERROR)
        );
        assert_eq!(
            code(tm::list_tenants(&db, b"g", b"h", 0).await),
            Some(ErrorCode::TENANT_NOT_FOUND)
        );
        assert_eq!(tm::get_tenant(&db, b"ghost").await.expect("get"), None);
    });
}

/// A read in a tenant deleted under an open handle, by a client that has never located the
/// tenant's keys: its location lookup carries the tenant (as libfdb_c's does), the proxy
/// answers `tenant_not_found` (2131), and the read fails with it instead of asking again.
#[test]
fn location_lookup_of_a_deleted_tenant() {
    dual::run(
        "tenant-locate",
        Duration::from_secs(120),
        |t: Target| async move {
            let db = &t.db;
            let on = t.name;
            let name = t.k("gone");
            tm::create_tenant(db, &name).await.expect("create");
            // A second client: its location cache is empty.
            let cf = db.cluster().await.expect("the cluster file");
            let fresh = fdb_driver_tokio::Database::from_cluster_file(cf, 23).expect("open");
            let ten = fresh.open_tenant(&name);
            // Commits need no location: this learns the tenant's id and nothing else.
            let tx = ten.create_transaction();
            tx.set(b"k", b"v");
            tx.commit().await.expect("a write");
            let tx = ten.create_transaction();
            tx.clear(b"k");
            tx.commit().await.expect("a clear");
            tm::delete_tenant(db, &name).await.expect("delete");
            let tx = ten.create_transaction();
            assert_eq!(
                code(tx.get(b"k").await),
                Some(ErrorCode::TENANT_NOT_FOUND),
                "{on}"
            );
        },
    );
}

/// `rename_tenant` (fdbcli's `tenant rename`): the tenant keeps its id and its data under the
/// new name; the old name is gone; renaming a missing tenant is `tenant_not_found`, onto a
/// taken name `tenant_already_exists`. On both clusters; on the real one Python over
/// libfdb_c then reads the renamed tenant's data.
#[test]
fn rename_tenant_scenario() {
    dual::run(
        "tenant-rename",
        Duration::from_secs(120),
        |t: Target| async move {
            let db = &t.db;
            let on = t.name;
            let name = |s: &str| t.k(s);
            tm::create_tenant(db, name("a")).await.expect("create a");
            tm::create_tenant(db, name("b")).await.expect("create b");
            let id = tm::get_tenant(db, name("a")).await.unwrap().unwrap().id;
            db.open_tenant(name("a"))
                .run(|tx| async move {
                    tx.set(b"k", b"v");
                    Ok(())
                })
                .await
                .expect("write in a");
            assert_eq!(
                code(tm::rename_tenant(db, name("a"), name("b")).await),
                Some(ErrorCode::TENANT_ALREADY_EXISTS),
                "{on}: onto a taken name"
            );
            tm::rename_tenant(db, name("a"), name("c"))
                .await
                .expect("rename");
            assert!(
                tm::get_tenant(db, name("a")).await.unwrap().is_none(),
                "{on}"
            );
            let entry = tm::get_tenant(db, name("c")).await.unwrap().unwrap();
            assert_eq!(entry.id, id, "{on}: the id stays");
            let ten = db.open_tenant(name("c"));
            let v = ten
                .run(|tx| async move { tx.get(b"k").await })
                .await
                .expect("read in c");
            assert_eq!(v.as_deref(), Some(&b"v"[..]), "{on}: the data stays");
            if !t.exact {
                let script = r#"
import fdb, sys, json
fdb.api_version(730)
db = fdb.open()
tr = db.open_tenant(bytes.fromhex(sys.argv[1])).create_transaction()
print(json.dumps({"k": bytes(tr[b"k"].wait()).decode()}))
"#;
                if let Some(v) = python_json(script, &[hexs(&name("c"))]) {
                    assert_eq!(v["k"], "v", "libfdb_c reads the renamed tenant");
                }
            }
            assert_eq!(
                code(tm::rename_tenant(db, name("a"), name("d")).await),
                Some(ErrorCode::TENANT_NOT_FOUND),
                "{on}: a missing tenant"
            );
            ten.run(|tx| async move {
                tx.clear(b"k");
                Ok(())
            })
            .await
            .expect("clear");
            tm::delete_tenant(db, name("c")).await.expect("delete c");
            tm::delete_tenant(db, name("b")).await.expect("delete b");
        },
    );
}

/// `MAX_TENANTS_PER_CLUSTER`: a creation that would take the tenant count past 1,000,000
/// fails with `cluster_no_capacity` (2141), through the API and through the special keys.
/// Test cluster only (the count is planted).
#[test]
fn cluster_no_capacity_on_the_test_cluster() {
    let c = TestCluster::start();
    c.set(
        b"\xff/tenant/count",
        &tm::MAX_TENANTS_PER_CLUSTER.to_le_bytes(),
    );
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let db = test_cluster_db(&c);
        assert_eq!(
            code(tm::create_tenant(&db, b"one-too-many").await),
            Some(ErrorCode::CLUSTER_NO_CAPACITY)
        );
        let tx = db.create_transaction();
        tx.set_option(TransactionOption::SpecialKeySpaceEnableWrites)
            .unwrap();
        tx.set(b"\xff\xff/management/tenant/map/one-too-many", b"");
        assert_eq!(
            code(tx.commit().await),
            Some(ErrorCode::CLUSTER_NO_CAPACITY)
        );
        assert!(tm::get_tenant(&db, b"one-too-many")
            .await
            .unwrap()
            .is_none());
        c.set(
            b"\xff/tenant/count",
            &(tm::MAX_TENANTS_PER_CLUSTER - 1).to_le_bytes(),
        );
        tm::create_tenant(&db, b"the-last-one")
            .await
            .expect("room for one more");
    });
}
