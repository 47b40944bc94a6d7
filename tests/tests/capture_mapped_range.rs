//! The `mapped_range` capture: libfdb_c 7.3.77's `fdb_transaction_get_mapped_range` against a
//! 7.3.77 storage server (`tests/data/fdb-captures/mapped_range_capture.py`). Every mapped
//! reply decodes to exactly the rows libfdb_c handed the application (the script's result),
//! with the storage server's secondary reads: ranges for a `{...}` mapper, points otherwise.

use fdb_protocol::messages::storage::{GetMappedKeyValuesReply, MappedReqAndResult};
use fdb_protocol::messages::{decode_reply, ErrorOr};
use fdb_tests::{load_captures, Dir};
use serde_json::Value;

fn hex(b: &[u8]) -> String {
    fdb_tests::to_hex(b)
}

#[test]
fn mapped_replies_decode_to_what_libfdb_c_returned() {
    let cap = load_captures()
        .into_iter()
        .find(|c| c.name == "mapped_range")
        .expect("the mapped_range capture");
    let replies: Vec<GetMappedKeyValuesReply> = cap
        .frames
        .iter()
        .filter(|f| f.dir == Dir::ServerToClient && !f.is_connect)
        .filter_map(
            |f| match decode_reply::<GetMappedKeyValuesReply>(&f.message()) {
                Ok(ErrorOr::Ok(r)) => Some(r),
                _ => None,
            },
        )
        .collect();
    assert_eq!(replies.len(), 3, "one reply per mapped read");
    let dir = fdb_tests::captures_dir();
    let result: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("mapped_range.result.json")).unwrap(),
    )
    .unwrap();
    let result = &result["result"];

    // A range mapper: each row with the range it named and that range's rows.
    for (reply, name) in replies[..2].iter().zip(["range", "reverse_limit_2"]) {
        let want = result[name]["rows"].as_array().unwrap();
        assert_eq!(reply.data.len(), want.len(), "{name}");
        assert_eq!(
            reply.more,
            result[name]["more"].as_bool().unwrap(),
            "{name}"
        );
        for (row, w) in reply.data.iter().zip(want) {
            assert_eq!(hex(&row.kv.key), w[0], "{name}");
            assert_eq!(hex(&row.kv.value), w[1], "{name}");
            let MappedReqAndResult::Range(r) = &row.mapped else {
                panic!("{name}: a range mapper reads ranges: {row:?}");
            };
            let got: Vec<Value> = r
                .result
                .data
                .iter()
                .map(|kv| serde_json::json!([hex(&kv.key), hex(&kv.value)]))
                .collect();
            assert_eq!(&Value::Array(got), &w[2], "{name}");
            assert!(!r.result.more);
        }
    }
    // A point mapper (no `{...}`): each row with the key it named and that key's value.
    let want = result["point"]["rows"].as_array().unwrap();
    assert_eq!(replies[2].data.len(), want.len());
    for (i, (row, w)) in replies[2].data.iter().zip(want).enumerate() {
        assert_eq!(hex(&row.kv.key), w[0]);
        let MappedReqAndResult::Value(v) = &row.mapped else {
            panic!("a point mapper reads keys: {row:?}");
        };
        let record = fdb_protocol::tuple::pack(&("mapped_capture", "rec", i as i64, "a"));
        assert_eq!(v.key, record);
        assert_eq!(v.result.as_deref(), Some(format!("v{i}").as_bytes()));
    }
}
