//! Tenants against real libfdb_c 7.3.77 captures (`tests/data/fdb-captures/tenant_*`, recorded
//! with `tenant_capture.py` through the Python binding against fdbserver 7.3.77 configured with
//! `tenant_mode=optional_experimental`, one TCP connection each):
//!
//! * `tenant_data` (the tenant `cap-tenant` created before the capture): open the tenant, set
//!   `a`, `b` and commit, then read `a` and the range `["", "\xff")`. Replayed into the client
//!   core: every request it sends (the tenant-id lookup included) equals libfdb_c's field for
//!   field, random parts masked, and the results are the recorded ones.
//! * `tenant_manage`: `fdb.tenant_management.create_tenant`, a write and a read in the tenant,
//!   `list_tenants`, a clear, `delete_tenant`, then a read in the deleted tenant. Decoded: the
//!   management commits carry exactly the system-key mutations this client's
//!   `tenant_management` writes (the tenant map entry byte for byte), the tenant commit is
//!   prefixed and names the tenant, and the listed JSON is what [`TenantEntry::to_json`]
//!   renders.

use bytes::Bytes;
use fdb_protocol::messages::commit::{mutation_type as mt, CommitTransactionRequest, MutationRef};
use fdb_protocol::messages::{decode_any, AnyMessage, ErrorOr};
use fdb_protocol::tenant_map::TenantEntry;
use fdb_protocol::{tenant_prefix, tuple, KeySelector, RangeOptions};
use fdb_tests::replay::{result_json, Replay};
use fdb_tests::{captures_dir, load_capture, Capture, Dir};

/// The connection string of the cluster the tenant captures were taken against.
const CLUSTER: &str = "local:2e2988e7c872ad6a@127.0.0.1:39083";

const REQUESTS: &[&str] = &[
    "GetReadVersionRequest",
    "GetKeyServerLocationsRequest",
    "GetValueRequest",
    "GetKeyValuesRequest",
    "CommitTransactionRequest",
    "GetTenantIdRequest",
];

#[test]
fn tenant_data_replayed() {
    let want = result_json("tenant_data");
    let mut r = Replay::with_cluster("tenant_data", CLUSTER);
    let now = r.sim.now();
    let h = r.sim.client.open_tenant(now, b"cap-tenant");
    let tx = r.sim.client.create_tenant_transaction_at(now, now, h);
    r.sim.client.set(tx, b"a", b"1").unwrap();
    r.sim.client.set(tx, b"b", b"2").unwrap();
    let v = r.commit(tx).expect("the tenant commit");
    assert_eq!(v, want["committed_version"].as_i64().unwrap());
    assert_eq!(
        r.sim.client.tenant_id(h),
        Some(Ok(want["tenant_id"].as_i64().unwrap()))
    );
    let now = r.sim.now();
    let tx = r.sim.client.create_tenant_transaction_at(now, now, h);
    let a = r.get(tx, b"a", false).unwrap();
    assert_eq!(a.as_deref(), want["a"].as_str().map(str::as_bytes));
    let rows = r.range(
        tx,
        KeySelector::first_greater_or_equal(Bytes::from_static(b"")),
        KeySelector::first_greater_or_equal(Bytes::from_static(b"\xff")),
        RangeOptions::default(),
    );
    let got: Vec<(String, String)> = rows
        .rows
        .iter()
        .map(|kv| {
            (
                String::from_utf8(kv.key.to_vec()).unwrap(),
                String::from_utf8(kv.value.to_vec()).unwrap(),
            )
        })
        .collect();
    let want_rows: Vec<(String, String)> = serde_json::from_value(want["rows"].clone()).unwrap();
    assert_eq!(got, want_rows);
    r.all_used(REQUESTS);
}

fn requests(cap: &Capture) -> Vec<AnyMessage> {
    cap.packets(Dir::ClientToServer)
        .map(|f| decode_any(&f.message()).expect("every request decodes"))
        .collect()
}

fn commits(cap: &Capture) -> Vec<CommitTransactionRequest> {
    requests(cap)
        .into_iter()
        .filter_map(|m| match m {
            AnyMessage::CommitTransactionRequest(c) => Some(c),
            _ => None,
        })
        .collect()
}

/// `(type, key, value)` sorted: a commit's mutations as a set.
fn mutation_set(ms: &[MutationRef]) -> Vec<(u8, Bytes, Bytes)> {
    let mut v: Vec<_> = ms
        .iter()
        .map(|m| (m.kind, m.param1.clone(), m.param2.clone()))
        .collect();
    v.sort();
    v
}

fn set(k: &[u8], v: &[u8]) -> (u8, Bytes, Bytes) {
    (
        mt::SET_VALUE,
        Bytes::copy_from_slice(k),
        Bytes::copy_from_slice(v),
    )
}

#[test]
fn tenant_manage_decoded() {
    let cap = load_capture(&captures_dir().join("tenant_manage.frames.jsonl"));
    let want = result_json("tenant_manage");
    let listed = want["listed"].as_array().unwrap();
    assert_eq!(listed.len(), 1);
    let json = listed[0][1].as_str().unwrap();
    let doc: serde_json::Value = serde_json::from_str(json).unwrap();
    let id = doc["id"].as_i64().unwrap();
    let name = b"cap-tm";
    let entry = TenantEntry::new(id, Bytes::from_static(name));
    assert_eq!(
        entry.to_json(),
        json,
        "libfdb_c's listing JSON, byte for byte"
    );
    assert_eq!(listed[0][0].as_str(), Some("cap-tm"));

    let prefix = tenant_prefix(id);
    let map_key = [&b"\xff/tenant/map/"[..], &prefix].concat();
    let name_key = [
        &b"\xff/tenant/nameIndex/"[..],
        &tuple::pack(&(name.to_vec(),)),
    ]
    .concat();
    let stamp = {
        // libfdb_c's placeholder: a default `Versionstamp` (version -1, batch 0), offset 0.
        let mut v = vec![0xffu8; 8];
        v.extend_from_slice(&[0, 0]);
        v.extend_from_slice(&0u32.to_le_bytes());
        v
    };
    let cs = commits(&cap);
    assert_eq!(cs.len(), 4, "create, write, clear, delete");

    // `create_tenant`: what `tenant_management::create_tenant_in` writes, the entry byte for byte.
    let mut want_create = vec![
        set(&map_key, &entry.to_map_value()),
        set(&name_key, &tuple::pack(&(id,))),
        set(b"\xff/tenant/lastId", &tuple::pack(&(id,))),
        (
            mt::ADD_VALUE,
            Bytes::from_static(b"\xff/tenant/count"),
            Bytes::copy_from_slice(&1i64.to_le_bytes()),
        ),
        (
            mt::SET_VERSIONSTAMPED_VALUE,
            Bytes::from_static(b"\xff/tenant/lastModification"),
            Bytes::from(stamp.clone()),
        ),
    ];
    want_create.sort();
    assert_eq!(mutation_set(&cs[0].transaction.mutations), want_create);
    assert_eq!(
        cs[0].tenant_info.tenant_id, -1,
        "management runs outside any tenant"
    );

    // The tenant's own commits: the tenant named, the keys prefixed by the client.
    assert_eq!(cs[1].tenant_info.tenant_id, id);
    assert_eq!(
        mutation_set(&cs[1].transaction.mutations),
        vec![set(&[&prefix[..], b"k"].concat(), b"v")]
    );
    assert_eq!(cs[2].tenant_info.tenant_id, id);
    assert!(cs[2]
        .transaction
        .mutations
        .iter()
        .all(|m| m.param1.starts_with(&prefix)));

    // `delete_tenant`: what `delete_tenant_in` writes.
    let mut want_delete = vec![
        (
            mt::CLEAR_RANGE,
            Bytes::from(map_key.clone()),
            Bytes::from([&map_key[..], b"\x00"].concat()),
        ),
        (
            mt::CLEAR_RANGE,
            Bytes::from(name_key.clone()),
            Bytes::from([&name_key[..], b"\x00"].concat()),
        ),
        (
            mt::ADD_VALUE,
            Bytes::from_static(b"\xff/tenant/count"),
            Bytes::copy_from_slice(&(-1i64).to_le_bytes()),
        ),
        (
            mt::SET_VERSIONSTAMPED_VALUE,
            Bytes::from_static(b"\xff/tenant/lastModification"),
            Bytes::from(stamp),
        ),
    ];
    want_delete.sort();
    assert_eq!(mutation_set(&cs[3].transaction.mutations), want_delete);

    // The lookups: the tenant found with its id, then (after the delete) not found.
    let lookups: Vec<_> = requests(&cap)
        .into_iter()
        .filter_map(|m| match m {
            AnyMessage::GetTenantIdRequest(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(lookups.len(), 2);
    let answer = |token| {
        cap.packets(Dir::ServerToClient)
            .find(|f| f.token() == token)
            .map(|f| decode_any(&f.message()).expect("the reply decodes"))
    };
    for l in &lookups {
        assert_eq!(l.tenant_name.as_ref(), name);
    }
    match answer(lookups[0].reply.token) {
        Some(AnyMessage::GetTenantIdReply(ErrorOr::Ok(r))) => assert_eq!(r.tenant_id, id),
        other => panic!("first lookup: {other:?}"),
    }
    match answer(lookups[1].reply.token) {
        Some(AnyMessage::GetTenantIdReply(ErrorOr::Err(e))) => {
            assert_eq!(Some(e.0 as i64), want["after_delete_error"].as_i64())
        }
        other => panic!("lookup after the delete: {other:?}"),
    }
}
