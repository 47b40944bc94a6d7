//! The read-only special keys libfdb_c fills from the cluster: `\xff\xff/cluster_id`, and the
//! metrics module, `\xff\xff/metrics/data_distribution_stats/` (a commit proxy's
//! `GetDDMetricsRequest`) and `\xff\xff/metrics/health/` (a GRV proxy's
//! `GetHealthMetricsRequest`), and `\xff\xff/worker_interfaces/` (the cluster controller's
//! `GetClientWorkersRequest`): point reads, plain and selector range reads, limits, reverse
//! reads, and the module boundaries.
//!
//! On the test cluster the rows are checked against what the cluster holds (its cluster id,
//! its shards and their bytes, its health figures), through both drivers. On a real cluster
//! (`FDB_CLUSTER_FILE`) each read also runs through the Python binding over libfdb_c 7.3.77,
//! one process per read (libfdb_c, like this client, answers a health read from the previous
//! one's figures for up to 5 s; so our reads each get a database of their own too), and the
//! answers must be the same: the cluster id and the worker interfaces
//! byte for byte, the rows' keys, and each JSON value's fields and their types (byte counts
//! and queues move).

use std::time::Duration;

use bytes::Bytes;
use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::{KeySelector, KeyValue, RangeOptions, StreamingMode};
use fdb_tests::cluster::TestCluster;
use fdb_tests::python::libfdb_c_answers;
use fdb_tests::to_hex as hex;

const CLUSTER_ID: &[u8] = b"\xff\xff/cluster_id";
const METRICS: &[u8] = b"\xff\xff/metrics/";
const METRICS_END: &[u8] = b"\xff\xff/metrics0";
const DD: &[u8] = b"\xff\xff/metrics/data_distribution_stats/";
const DD_END: &[u8] = b"\xff\xff/metrics/data_distribution_stats0";
const HEALTH: &[u8] = b"\xff\xff/metrics/health/";
const HEALTH_END: &[u8] = b"\xff\xff/metrics/health0";
const AGGREGATE: &[u8] = b"\xff\xff/metrics/health/aggregate";
const WORKERS: &[u8] = b"\xff\xff/worker_interfaces/";
const WORKERS_END: &[u8] = b"\xff\xff/worker_interfaces0";

fn cat(a: &[u8], b: &[u8]) -> Vec<u8> {
    [a, b].concat()
}

/// A selector as `(key, or_equal, offset)`.
type Sel = (Vec<u8>, bool, i32);

fn fge(k: &[u8]) -> Sel {
    (k.to_vec(), false, 1)
}

/// One read of the script.
#[derive(Clone, Debug)]
enum Read {
    Get(Vec<u8>),
    Range {
        begin: Sel,
        end: Sel,
        limit: usize,
        reverse: bool,
    },
}

fn range(begin: Sel, end: Sel) -> Read {
    Read::Range {
        begin,
        end,
        limit: 0,
        reverse: false,
    }
}

/// The script: each read, with what its answer must show.
fn script() -> Vec<Read> {
    vec![
        Read::Get(CLUSTER_ID.to_vec()),
        range(fge(CLUSTER_ID), fge(&cat(CLUSTER_ID, b"\x00"))),
        range(fge(DD), fge(DD_END)),
        // No shard begins between `m` and `n`, nor (on these clusters) past `m`.
        range(fge(&cat(DD, b"m")), fge(&cat(DD, b"n"))),
        Read::Get(DD.to_vec()),
        range(fge(HEALTH), fge(HEALTH_END)),
        range(fge(METRICS), fge(METRICS_END)),
        Read::Get(AGGREGATE.to_vec()),
        Read::Get(cat(HEALTH, b"nothing")),
        range(fge(&cat(HEALTH, b"storage/")), fge(METRICS_END)),
        range(fge(&cat(HEALTH, b"log/")), fge(&cat(HEALTH, b"log0"))),
        // Selectors resolved over the rows: from the last row before `health/` (the first
        // shard's) to the first row after `health/log/` (the first log's), excluded.
        range((HEALTH.to_vec(), false, 0), (cat(HEALTH, b"log/"), true, 1)),
        // The second row on, and the last two rows backwards.
        range((METRICS.to_vec(), false, 2), fge(METRICS_END)),
        Read::Range {
            begin: fge(METRICS),
            end: fge(METRICS_END),
            limit: 2,
            reverse: true,
        },
        // Every worker, by address.
        range(fge(WORKERS), fge(WORKERS_END)),
        // Reads that leave the module, or start outside every module.
        range(fge(METRICS), fge(b"\xff\xff/metrics1")),
        range(fge(b"\xff\xff/nomodule/"), fge(b"\xff\xff/nomodule0")),
    ]
}

/// A value as the comparison shows it: a JSON object's fields and their types, anything
/// else in hex.
fn shape(v: &[u8]) -> String {
    match serde_json::from_slice::<serde_json::Value>(v) {
        Ok(serde_json::Value::Object(m)) => {
            let mut fields: Vec<String> = m
                .iter()
                .map(|(k, x)| {
                    let t = match x {
                        serde_json::Value::Bool(_) => "bool",
                        serde_json::Value::Number(_) => "num",
                        serde_json::Value::String(_) => "str",
                        _ => "other",
                    };
                    format!("{k}:{t}")
                })
                .collect();
            fields.sort();
            fields.join(",")
        }
        _ => format!("raw:{}", hex(v)),
    }
}

fn rows_line(rows: &[KeyValue]) -> String {
    rows.iter()
        .map(|kv| format!("{}={}", hex(&kv.key), shape(&kv.value)))
        .collect::<Vec<_>>()
        .join(";")
}

fn value_line(v: Option<&[u8]>) -> String {
    v.map_or_else(|| "-".into(), shape)
}

fn code_line(code: Option<ErrorCode>) -> String {
    format!("E{}", code.map_or(0, |c| c.0))
}

fn selector((key, or_equal, offset): &Sel) -> KeySelector {
    KeySelector {
        key: Bytes::copy_from_slice(key),
        or_equal: *or_equal,
        offset: *offset,
    }
}

fn options(limit: usize, reverse: bool) -> RangeOptions {
    RangeOptions {
        limit,
        reverse,
        mode: StreamingMode::WantAll,
        ..RangeOptions::default()
    }
}

/// The answers through the blocking (mio) driver: a line and the raw rows or value of each
/// read.
fn mio_answers(open: impl Fn() -> fdb_driver_mio::Database) -> Vec<(String, Vec<KeyValue>)> {
    script()
        .iter()
        .map(|read| {
            // A database per read, as libfdb_c runs one process per read: its health metrics
            // are the cluster's now, not what an earlier read kept.
            let db = open();
            let tx = db.create_transaction();
            match read {
                Read::Get(key) => match tx.get(key) {
                    Ok(v) => {
                        let rows = v
                            .iter()
                            .map(|v| KeyValue {
                                key: Bytes::copy_from_slice(key),
                                value: v.clone(),
                            })
                            .collect();
                        (value_line(v.as_deref()), rows)
                    }
                    Err(e) => (code_line(e.code()), Vec::new()),
                },
                Read::Range {
                    begin,
                    end,
                    limit,
                    reverse,
                } => match tx.get_range_batch(
                    selector(begin),
                    selector(end),
                    options(*limit, *reverse),
                    false,
                ) {
                    Ok(r) => (rows_line(&r.rows), r.rows),
                    Err(e) => (code_line(e.code()), Vec::new()),
                },
            }
        })
        .collect()
}

/// The answers' lines through the tokio driver, on a database `open` opens.
fn tokio_answers(
    open: impl Fn() -> Result<fdb_driver_tokio::Database, fdb_driver_tokio::Error>,
) -> Vec<String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let mut out = Vec::new();
        for read in script() {
            let db = open().expect("the tokio driver starts");
            let tx = db.create_transaction();
            out.push(match read {
                Read::Get(key) => match tx.get(&key).await {
                    Ok(v) => value_line(v.as_deref()),
                    Err(e) => code_line(e.code()),
                },
                Read::Range {
                    begin,
                    end,
                    limit,
                    reverse,
                } => match tx
                    .get_range_batch(
                        selector(&begin),
                        selector(&end),
                        options(limit, reverse),
                        false,
                    )
                    .await
                {
                    Ok(r) => rows_line(&r.rows),
                    Err(e) => code_line(e.code()),
                },
            });
        }
        out
    })
}

/// The same read through the Python binding over libfdb_c, printing the same line.
const PY: &str = r#"
import fdb, json, sys
fdb.api_version(730)
db = fdb.open()
def shape(v):
    try:
        o = json.loads(v)
    except Exception:
        o = None
    if not isinstance(o, dict):
        return 'raw:' + v.hex()
    t = lambda x: 'bool' if isinstance(x, bool) else 'num' if isinstance(x, (int, float)) else 'str' if isinstance(x, str) else 'other'
    return ','.join(sorted('%s:%s' % (k, t(x)) for k, x in o.items()))
a = sys.argv[1:]
tr = db.create_transaction()
try:
    if a[0] == 'get':
        v = tr.get(bytes.fromhex(a[1])).wait()
        print('-' if not v.present() else shape(bytes(v)))
    else:
        sel = lambda k, oe, off: fdb.KeySelector(bytes.fromhex(k), oe == '1', int(off))
        rows = tr.get_range(sel(*a[1:4]), sel(*a[4:7]), limit=int(a[7]), reverse=a[8] == '1',
                            streaming_mode=fdb.StreamingMode.want_all)
        print(';'.join('%s=%s' % (bytes(k).hex(), shape(bytes(v))) for k, v in rows))
except fdb.FDBError as e:
    print('E%d' % e.code)
"#;

fn libfdb_c_line(read: &Read) -> Option<String> {
    let args: Vec<String> = match read {
        Read::Get(key) => vec!["get".into(), hex(key)],
        Read::Range {
            begin,
            end,
            limit,
            reverse,
        } => {
            let mut a = vec!["range".to_string()];
            for (k, oe, off) in [begin, end] {
                a.extend([hex(k), u8::from(*oe).to_string(), off.to_string()]);
            }
            a.extend([limit.to_string(), u8::from(*reverse).to_string()]);
            a
        }
    };
    libfdb_c_answers("cluster_special_keys", PY, args).map(|s| s.trim_end().to_owned())
}

/// What every cluster's answers show, whatever its figures.
fn check_shapes(lines: &[String]) {
    let id_line = &lines[0];
    let id = id_line
        .strip_prefix("raw:")
        .expect("the cluster id is a value");
    let id = String::from_utf8(
        (0..id.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&id[i..i + 2], 16).unwrap())
            .collect(),
    )
    .unwrap();
    assert_eq!(id.len(), 32, "the cluster id is 32 hex digits: {id}");
    assert!(id
        .bytes()
        .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    assert_ne!(id, "0".repeat(32));
    assert_eq!(lines[1], format!("{}={id_line}", hex(CLUSTER_ID)));
    let dd = "shard_bytes:num,shard_bytes_per_ksecond:num";
    assert!(
        lines[2].starts_with(&format!("{}={dd}", hex(DD))),
        "{}",
        lines[2]
    );
    assert!(lines[2].split(';').all(|r| r.ends_with(dd)));
    assert_eq!(lines[3], "");
    assert_eq!(lines[4], dd);
    let aggregate = "batch_limited:bool,limiting_storage_durability_lag:num,limiting_storage_queue:num,tps_limit:num,worst_log_queue:num,worst_storage_durability_lag:num,worst_storage_queue:num";
    let health: Vec<&str> = lines[5].split(';').collect();
    assert_eq!(health[0], format!("{}={aggregate}", hex(AGGREGATE)));
    let logs: Vec<&&str> = health
        .iter()
        .filter(|r| r.contains(&hex(b"health/log/")))
        .collect();
    let storages: Vec<&&str> = health
        .iter()
        .filter(|r| r.contains(&hex(b"health/storage/")))
        .collect();
    assert!(!logs.is_empty() && !storages.is_empty(), "{}", lines[5]);
    assert_eq!(logs.len() + storages.len() + 1, health.len());
    assert!(logs.iter().all(|r| r.ends_with("=log_queue:num")));
    let storage = "cpu_usage:num,disk_usage:num,storage_durability_lag:num,storage_queue:num";
    assert!(storages.iter().all(|r| r.ends_with(storage)));
    assert_eq!(lines[6], format!("{};{}", lines[2], lines[5]));
    assert_eq!(lines[7], aggregate);
    assert_eq!(lines[8], "-");
    assert_eq!(
        lines[9],
        storages.iter().map(|s| **s).collect::<Vec<_>>().join(";")
    );
    assert_eq!(
        lines[10],
        logs.iter().map(|s| **s).collect::<Vec<_>>().join(";")
    );
    let last_shard = lines[2].split(';').next_back().unwrap();
    assert_eq!(lines[11], format!("{last_shard};{}", health[0]));
    let all: Vec<&str> = lines[6].split(';').collect();
    assert_eq!(lines[12], all[1..].join(";"));
    let last_two: Vec<&str> = all.iter().rev().take(2).copied().collect();
    assert_eq!(lines[13], last_two.join(";"));
    // Each worker's interface in the binary format: the protocol version (the cluster's,
    // 7.3 or 7.4), three streams of an IPv4 address without a secondary one and a token each.
    for row in lines[14].split(';') {
        let (k, v) = row.split_once('=').unwrap();
        assert!(k.starts_with(&hex(WORKERS)), "{row}");
        assert!(
            v.starts_with("raw:00000073b000db0f") || v.starts_with("raw:00000074b000db0f"),
            "{row}"
        );
        assert_eq!(v.len(), 4 + 2 * (8 + 3 * 27), "{row}");
    }
    assert_eq!(
        lines[15],
        code_line(Some(ErrorCode::SPECIAL_KEYS_CROSS_MODULE_READ))
    );
    assert_eq!(
        lines[16],
        code_line(Some(ErrorCode::SPECIAL_KEYS_NO_MODULE_FOUND))
    );
}

fn json(v: &[u8]) -> serde_json::Value {
    serde_json::from_slice(v).expect("JSON")
}

/// Reads inside a tenant (which need not exist: the module refuses first): only
/// `\xff\xff/cluster_id` supports tenants, the others fail with `illegal_tenant_access`.
fn tenant_answers(db: &fdb_driver_mio::Database) -> Vec<String> {
    let tenant = db.open_tenant(b"cluster_special_keys/no-such-tenant");
    let mut out = Vec::new();
    for key in [CLUSTER_ID, AGGREGATE, &cat(WORKERS, b"x")[..]] {
        let tx = tenant.create_transaction();
        out.push(match tx.get(key) {
            Ok(v) => value_line(v.as_deref()),
            Err(e) => code_line(e.code()),
        });
        let tx = tenant.create_transaction();
        let end = cat(key, b"\x00");
        out.push(
            match tx.get_range_batch(
                selector(&fge(key)),
                selector(&fge(&end)),
                options(0, false),
                false,
            ) {
                Ok(r) => rows_line(&r.rows),
                Err(e) => code_line(e.code()),
            },
        );
    }
    out
}

const PY_TENANT: &str = r#"
import fdb, sys
fdb.api_version(730)
t = fdb.open().open_tenant(b'cluster_special_keys/no-such-tenant')
for k in [bytes.fromhex(a) for a in sys.argv[1:]]:
    for rng in (False, True):
        tr = t.create_transaction()
        try:
            if rng:
                print(';'.join('%s=raw:%s' % (bytes(a).hex(), bytes(b).hex()) for a, b in tr.get_range(k, k + b'\x00')))
            else:
                v = tr.get(k).wait()
                print('-' if not v.present() else 'raw:' + bytes(v).hex())
        except fdb.FDBError as e:
            print('E%d' % e.code)
"#;

fn check_tenant_answers(lines: &[String], cluster_id: &str) {
    let illegal = code_line(Some(ErrorCode::ILLEGAL_TENANT_ACCESS));
    assert_eq!(lines[0], cluster_id);
    assert_eq!(lines[1], format!("{}={cluster_id}", hex(CLUSTER_ID)));
    assert!(lines[2..].iter().all(|l| *l == illegal), "{lines:?}");
    assert_eq!(lines.len(), 6);
}

#[test]
fn cluster_special_keys_on_the_test_cluster() {
    let cluster = TestCluster::start();
    let cf = ClusterFile::parse(&cluster.cluster_file_string()).unwrap();
    let mio = fdb_driver_mio::Database::from_cluster_file(cf.clone(), 11).unwrap();
    // Some data, so that the shards' bytes are not all 0.
    let tx = mio.create_transaction();
    for i in 0..50u32 {
        tx.set(format!("k{i:03}"), vec![b'v'; 100]);
    }
    tx.commit().unwrap();

    let answers =
        mio_answers(|| fdb_driver_mio::Database::from_cluster_file(cf.clone(), 11).unwrap());
    let lines: Vec<String> = answers.iter().map(|(l, _)| l.clone()).collect();
    check_shapes(&lines);

    // The cluster id is the one in `ClientDBInfo`.
    let id = cluster.client_db_info().cluster_id;
    assert_eq!(answers[0].1[0].value, Bytes::from(id.to_string()));

    // One row per shard, its bytes by the cluster's byte sample.
    let shards = cluster.shards();
    let data = cluster.snapshot();
    let dd = &answers[2].1;
    assert_eq!(dd.len(), shards.len());
    for (row, shard) in dd.iter().zip(&shards) {
        assert_eq!(&row.key[..], &cat(DD, &shard.begin)[..]);
        let bytes: usize = data
            .range(shard.begin.clone()..shard.end.clone())
            .map(|(k, v)| k.len() + v.len())
            .sum();
        let v = json(&row.value);
        assert_eq!(v["shard_bytes"], bytes as u64);
        assert_eq!(v["shard_bytes_per_ksecond"], 0);
    }
    let total: u64 = dd
        .iter()
        .map(|kv| json(&kv.value)["shard_bytes"].as_u64().unwrap())
        .sum();
    assert!(total >= 50 * (4 + 100), "{total}");

    // The health figures as the cluster gives them, written as libfdb_c writes them.
    let health = &answers[5].1;
    // The cluster's queues are the bytes it holds; its rate limit a third of a million.
    let q = total;
    assert_eq!(
        String::from_utf8_lossy(&health[0].value),
        format!("{{\"batch_limited\":false,\"limiting_storage_durability_lag\":5000000,\"limiting_storage_queue\":{q},\"tps_limit\":333333.33333333331,\"worst_log_queue\":{q},\"worst_storage_durability_lag\":5000000,\"worst_storage_queue\":{q}}}")
    );
    let storage: Vec<&KeyValue> = health
        .iter()
        .filter(|kv| kv.key.starts_with(&cat(HEALTH, b"storage/")))
        .collect();
    assert_eq!(storage.len(), cluster.storage_server_count());
    for kv in storage {
        assert_eq!(
            String::from_utf8_lossy(&kv.value),
            format!("{{\"cpu_usage\":1.25,\"disk_usage\":0.5,\"storage_durability_lag\":5000000,\"storage_queue\":{q}}}")
        );
    }

    // One worker per process, keyed by its address.
    let workers = &answers[14].1;
    assert!(!workers.is_empty());
    for kv in workers {
        let addr = std::str::from_utf8(&kv.key[WORKERS.len()..]).unwrap();
        let addr: std::net::SocketAddr = addr.parse().expect("an address");
        assert_eq!(&kv.value[13..15], &addr.port().to_le_bytes());
    }

    check_tenant_answers(&tenant_answers(&mio), &lines[0]);

    // The tokio driver answers the same.
    let tokio_lines =
        tokio_answers(|| fdb_driver_tokio::Database::from_cluster_file(cf.clone(), 12));
    assert_eq!(tokio_lines, lines);
}

/// Waits until a read of the health module shows the aggregate row. On a cluster just started
/// the figures come with a worst storage durability lag of 0, and the aggregate row is left out
/// (`healthMetricsToKVPairs`, which this client follows); the checks below would read that as
/// a difference. On fresh 7.4.6 clusters here a point read of the aggregate had it after
/// about 0.8 s, and the range read of the module (a detailed request) some seconds later;
/// CI's 7.4 phase, which runs this right after the demo, failed on it once. A database per
/// attempt: one keeps its figures for seconds.
fn wait_for_health_figures(open: impl Fn() -> fdb_driver_mio::Database) {
    let (limit, pause) = (Duration::from_secs(30), Duration::from_millis(500));
    let shown = fdb_tests::testkit::eventually_every(limit, pause, || {
        let read = open().create_transaction().get_range_batch(
            selector(&fge(HEALTH)),
            selector(&fge(HEALTH_END)),
            options(0, false),
            false,
        );
        read.is_ok_and(|r| r.rows.iter().any(|kv| kv.key.as_ref() == AGGREGATE))
    });
    assert!(
        shown,
        "the cluster reported no health aggregate within 30 s"
    );
}

#[test]
fn cluster_special_keys_match_libfdb_c() {
    let Some((path, _)) = fdb_tests::dual::real_cluster_file() else {
        println!(
            "FDB_CLUSTER_FILE not set: the libfdb_c comparison of cluster special keys is skipped"
        );
        return;
    };
    let mio = fdb_driver_mio::Database::open(Some(&path)).unwrap();
    wait_for_health_figures(|| fdb_driver_mio::Database::open(Some(&path)).unwrap());
    let ours: Vec<String> = mio_answers(|| fdb_driver_mio::Database::open(Some(&path)).unwrap())
        .into_iter()
        .map(|(l, _)| l)
        .collect();
    check_shapes(&ours);
    let tokio_lines = tokio_answers(|| fdb_driver_tokio::Database::open(Some(&path)));
    assert_eq!(tokio_lines, ours, "the two drivers agree");
    for (i, read) in script().iter().enumerate() {
        let Some(theirs) = libfdb_c_line(read) else {
            return;
        };
        assert_eq!(ours[i], theirs, "read {i}: {read:?}");
    }
    let tenant = tenant_answers(&mio);
    check_tenant_answers(&tenant, &ours[0]);
    let keys = [CLUSTER_ID, AGGREGATE, &cat(WORKERS, b"x")[..]].map(hex);
    if let Some(theirs) = libfdb_c_answers("cluster_special_keys", PY_TENANT, keys) {
        let theirs: Vec<&str> = theirs.lines().collect();
        assert_eq!(tenant, theirs, "inside a tenant");
    }
}
