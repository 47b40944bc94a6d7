//! The cluster-filled modules' unit tests: row building, and whole reads on a scripted cluster.

use super::*;

fn g17(x: f64) -> String {
    let mut s = String::new();
    write_g17(&mut s, x);
    s
}

#[test]
fn doubles_as_json_spirit_writes_them() {
    // Values libfdb_c 7.3.77 printed for a real cluster.
    assert_eq!(g17(507561.17099314946), "507561.17099314946");
    assert_eq!(g17(0.559_985_714_323_170_8), "0.55998571432317079");
    assert_eq!(g17(2.2116835782091884), "2.2116835782091884");
    assert_eq!(g17(8271694.2228510985), "8271694.2228510985");
    // `%.17g`: 17 significant digits, trailing zeros dropped, exponent below 1e-4 and
    // from 1e17.
    assert_eq!(g17(0.1), "0.10000000000000001");
    assert_eq!(g17(5.0), "5");
    assert_eq!(g17(0.0), "0");
    assert_eq!(g17(1e17), "1e+17");
    assert_eq!(g17(1.5e-5), "1.5e-05");
    assert_eq!(g17(1.0 / 3.0e5), "3.3333333333333333e-06");
    assert_eq!(g17(0.0001), "0.0001");
    assert_eq!(g17(-2.5), "-2.5");
    assert_eq!(g17(f64::INFINITY), "inf");
}

#[test]
fn parts_follow_the_selectors() {
    let fge = |k: &[u8]| KeySelector::first_greater_or_equal(Bytes::copy_from_slice(k));
    let range = |b, e| SpecialRead::Range(b, e, Default::default());
    // Plain keys: the parts between them, clipped.
    let r = range(
        fge(b"\xff\xff/metrics/health/log/"),
        fge(b"\xff\xff/metrics0"),
    );
    let (m, whole) = cluster_read(&r).unwrap();
    assert_eq!((m, whole), (METRICS_MODULE, false));
    let (b, e) = selectors(&r);
    assert_eq!(
        asks(m, &b, &e, whole),
        alloc::vec![Ask::Health(KeyRange::new(
            Bytes::from_static(b"\xff\xff/metrics/health/log/"),
            Bytes::from_static(HEALTH.1)
        ))]
    );
    // Any other selector: every part, whole.
    let r = range(
        KeySelector::last_less_than(Bytes::from_static(b"\xff\xff/metrics/health/")),
        fge(b"\xff\xff/metrics0"),
    );
    let (m, whole) = cluster_read(&r).unwrap();
    assert!(whole);
    assert_eq!(asks(m, b"", b"", whole).len(), 2);
    // Outside the modules, or across one's end: not a cluster read.
    assert!(cluster_read(&range(fge(b"\xff\xff/metrics/"), fge(b"\xff\xff/metrics1"))).is_none());
    assert!(cluster_read(&SpecialRead::Get(Bytes::from_static(
        b"\xff\xff/status/json"
    )))
    .is_none());
    let id = SpecialRead::Get(Bytes::from_static(CLUSTER_ID_KEY));
    assert_eq!(cluster_read(&id), Some((CLUSTER_ID_MODULE, false)));
}

#[test]
fn health_rows_as_libfdb_c_writes_them() {
    let m = HealthMetrics {
        limiting_storage_queue: 2018,
        limiting_storage_durability_lag: 5_000_000,
        batch_limited: false,
        tlog_queue: alloc::vec![(Uid::new(0x06d7_0def_58d1_090e, 0xd2e3_6004_3d0e_6c24), 258)],
        ..crate::messages::metrics::sample_health()
    };
    let all = KeyRange::new(Bytes::from_static(HEALTH.0), Bytes::from_static(HEALTH.1));
    let rows = health_rows(&m, &all);
    let text: Vec<(&[u8], &[u8])> = rows.iter().map(|kv| (&kv.key[..], &kv.value[..])).collect();
    assert_eq!(
        text,
        alloc::vec![
            (
                HEALTH_AGGREGATE_KEY,
                &b"{\"batch_limited\":false,\"limiting_storage_durability_lag\":5000000,\"limiting_storage_queue\":2018,\"tps_limit\":507561.17099314946,\"worst_log_queue\":258,\"worst_storage_durability_lag\":5000000,\"worst_storage_queue\":2018}"[..]
            ),
            (
                &b"\xff\xff/metrics/health/log/06d70def58d1090ed2e360043d0e6c24"[..],
                &b"{\"log_queue\":258}"[..]
            ),
            (
                &b"\xff\xff/metrics/health/storage/353235afd43fc3583d50fa4b7ca98773"[..],
                &b"{\"cpu_usage\":2.2116835782091884,\"disk_usage\":0.55998571432317079,\"storage_durability_lag\":5000000,\"storage_queue\":2020}"[..]
            ),
        ]
    );
    // No aggregate while the worst lag is 0; only the rows inside the range.
    let quiet = HealthMetrics {
        worst_storage_durability_lag: 0,
        ..m
    };
    let logs = KeyRange::new(
        Bytes::from_static(HEALTH_LOG.0),
        Bytes::from_static(HEALTH_LOG.1),
    );
    let rows = health_rows(&quiet, &logs);
    assert_eq!(rows.len(), 1);
    assert!(rows[0].key.starts_with(HEALTH_LOG.0));
    assert!(health_rows(&quiet, &all)
        .iter()
        .all(|kv| kv.key != HEALTH_AGGREGATE_KEY));
}

mod on_a_scripted_cluster {
    //! The reads against a scripted cluster on the simulated network: the coordinator
    //! answers `ClientDBInfo`; the proxies' and the cluster controller's requests wait
    //! for the test.

    use super::super::*;
    use crate::client::ClientConfig;
    use crate::cluster_file::ClusterFile;
    use crate::event::RangeResult;
    use crate::messages::coordination::LeaderInfo;
    use crate::messages::encode_reply;
    use crate::messages::metrics::DDMetricsRef;
    use crate::messages::workers::{encode_client_workers, ClientWorkerInterface};
    use crate::serializer::DecodeError;
    use crate::sim::{InfoServer, Request, Sim};
    use crate::transaction::RangeOptions;

    use crate::sim::loopback_stream as stream;

    fn sim() -> Sim<InfoServer> {
        let cluster_file = ClusterFile::parse("t:t@127.0.0.1:4500").unwrap();
        // The simulation's loopback proxies, a second GRV proxy and a cluster id.
        let mut info = crate::sim::loopback_proxies();
        info.grv_proxies.push(GrvProxyInterface {
            get_consistent_read_version: stream(4500, Uid::new(1, 0x30)),
            ..Default::default()
        });
        info.cluster_id = Uid::new(0xabc, 0xdef);
        let mut s = Sim::with_server(ClientConfig::new(cluster_file, 7), InfoServer { info });
        s.drive();
        s
    }

    fn fge(k: &[u8]) -> KeySelector {
        KeySelector::first_greater_or_equal(Bytes::copy_from_slice(k))
    }

    fn read(s: &mut Sim<InfoServer>, b: &[u8], e: &[u8]) -> crate::event::Call<RangeResult> {
        let now = s.now();
        let tx = s.client.create_transaction(now);
        let call = s
            .client
            .get_range(now, tx, fge(b), fge(e), RangeOptions::default(), false);
        s.drive();
        call
    }

    fn take(s: &mut Sim<InfoServer>, pick: impl FnMut(&Request) -> bool) -> Request {
        s.take_request(pick).expect("the request was sent")
    }

    fn is_dd(r: &Request) -> bool {
        matches!(r.msg, AnyMessage::GetDDMetricsRequest(_))
    }

    fn is_health(r: &Request) -> bool {
        matches!(r.msg, AnyMessage::GetHealthMetricsRequest(_))
    }

    #[test]
    fn dd_stats_ask_a_commit_proxy_and_wait_for_the_distributor() {
        let mut s = sim();
        let call = read(
            &mut s,
            DD_STATS_PREFIX,
            b"\xff\xff/metrics/data_distribution_stats0",
        );
        let req = take(&mut s, is_dd);
        let commit = &s.server.info.commit_proxies[0];
        assert_eq!(
            req.dest,
            commit.stream(CommitProxyInterface::GET_DD_METRICS)
        );
        let AnyMessage::GetDDMetricsRequest(m) = &req.msg else {
            unreachable!()
        };
        assert_eq!(&m.keys.begin[..], b"");
        assert_eq!(&m.keys.end[..], b"\xff\xff");
        assert_eq!(m.shard_limit, 1_000_000);
        // No distributor yet: asked again after `PREVENT_FAST_SPIN_DELAY`.
        s.reply::<GetDDMetricsReply>(&req, ErrorOr::Err(ErrorCode::DD_NOT_FOUND));
        assert!(s.requests().iter().all(|r| !is_dd(r)));
        assert!(s.take(call).is_none());
        s.advance_by(PREVENT_FAST_SPIN_DELAY);
        let req = take(&mut s, is_dd);
        let shard = |bytes, begin: &'static [u8]| DDMetricsRef {
            shard_bytes: bytes,
            begin_key: Bytes::from_static(begin),
            shard_bytes_per_ksecond: 7,
        };
        s.reply(
            &req,
            ErrorOr::Ok(GetDDMetricsReply {
                storage_metrics_list: alloc::vec![shard(10, b""), shard(-1, b"m")],
            }),
        );
        let rows = s.take(call).expect("finished").expect("rows").rows;
        let rows: Vec<(&[u8], &[u8])> =
            rows.iter().map(|kv| (&kv.key[..], &kv.value[..])).collect();
        assert_eq!(
            rows,
            alloc::vec![
                (
                    DD_STATS_PREFIX,
                    &b"{\"shard_bytes\":10,\"shard_bytes_per_ksecond\":7}"[..]
                ),
                (
                    &b"\xff\xff/metrics/data_distribution_stats/m"[..],
                    &b"{\"shard_bytes\":-1,\"shard_bytes_per_ksecond\":7}"[..]
                ),
            ]
        );
    }

    #[test]
    fn bad_replies_are_typed_errors() {
        let mut s = sim();
        let call = read(&mut s, HEALTH.0, HEALTH.1);
        let req = take(&mut s, is_health);
        let grvs = &s.server.info.grv_proxies;
        assert!(grvs
            .iter()
            .any(|g| req.dest == g.stream(GrvProxyInterface::GET_HEALTH_METRICS)));
        assert!(matches!(&req.msg, AnyMessage::GetHealthMetricsRequest(m) if m.detailed));
        // A blob cut short inside a well-formed reply.
        s.reply(
            &req,
            ErrorOr::Ok(GetHealthMetricsReply {
                serialized: Bytes::from_static(&[0, 0, 0, 0x73, 0xb0, 0, 0xdb, 0x0f, 1, 2]),
            }),
        );
        assert!(matches!(
            s.take(call),
            Some(Err(ClientError::Decode(DecodeError::OutOfBounds { .. })))
        ));
        // A reply of another type, then bytes that are no message at all.
        let call = read(&mut s, DD_STATS.0, DD_STATS.1);
        let req = take(&mut s, is_dd);
        s.reply(&req, ErrorOr::Ok(GetHealthMetricsReply::default()));
        assert!(matches!(
            s.take(call),
            Some(Err(ClientError::Decode(DecodeError::FileIdentifier { .. })))
        ));
        let call = read(&mut s, DD_STATS.0, DD_STATS.1);
        let req = take(&mut s, is_dd);
        s.reply_bytes(&req, &[0xff; 7]);
        assert!(matches!(s.take(call), Some(Err(ClientError::Decode(_)))));
        // An error other than `dd_not_found` fails the read.
        let call = read(&mut s, DD_STATS.0, DD_STATS.1);
        let req = take(&mut s, is_dd);
        s.reply::<GetDDMetricsReply>(&req, ErrorOr::Err(ErrorCode::OPERATION_FAILED));
        assert_eq!(
            s.take(call),
            Some(Err(ClientError::Fdb(ErrorCode::OPERATION_FAILED)))
        );
        assert!(s.client.census().status_reads == 0);
    }

    #[test]
    fn lost_requests_are_asked_again_and_the_aggregate_alone_is_not_detailed() {
        let mut s = sim();
        let now = s.now();
        let tx = s.client.create_transaction(now);
        let call = s.client.get(now, tx, HEALTH_AGGREGATE_KEY, false);
        s.drive();
        let req = take(&mut s, is_health);
        assert!(matches!(&req.msg, AnyMessage::GetHealthMetricsRequest(m) if !m.detailed));
        // That proxy's role ended: the other one is asked.
        s.broken_promise(&req);
        s.advance_by(PREVENT_FAST_SPIN_DELAY);
        let again = take(&mut s, is_health);
        assert_ne!(again.dest, req.dest);
        let req = again;
        let m = HealthMetrics {
            worst_storage_durability_lag: 1,
            tps_limit: 0.1,
            ..HealthMetrics::default()
        };
        s.reply(
            &req,
            ErrorOr::Ok(GetHealthMetricsReply {
                serialized: Bytes::from(m.encode(0x0FDB_00B0_7300_0000)),
            }),
        );
        let v = s.take(call).expect("finished").expect("a value");
        assert_eq!(
            v.as_deref(),
            Some(&b"{\"batch_limited\":false,\"limiting_storage_durability_lag\":0,\"limiting_storage_queue\":0,\"tps_limit\":0.10000000000000001,\"worst_log_queue\":0,\"worst_storage_durability_lag\":1,\"worst_storage_queue\":0}"[..])
        );
        // The cluster id needs no request.
        let call = s.client.get(s.now(), tx, CLUSTER_ID_KEY, false);
        s.drive();
        let v = s.take(call).expect("finished").expect("a value");
        assert_eq!(v.as_deref(), Some(&b"0000000000000abc0000000000000def"[..]));
    }

    #[test]
    fn health_metrics_are_kept_as_libfdb_c_keeps_them() {
        let mut s = sim();
        let detailed = |r: &Request| match &r.msg {
            AnyMessage::GetHealthMetricsRequest(m) => m.detailed,
            _ => unreachable!(),
        };
        let full = HealthMetrics {
            worst_storage_durability_lag: 3,
            storage_stats: alloc::vec![(Uid::new(1, 1), Default::default())],
            tlog_queue: alloc::vec![(Uid::new(2, 2), 5)],
            ..HealthMetrics::default()
        };
        let answer = |s: &mut Sim<InfoServer>, req: &Request, m: &HealthMetrics| {
            s.reply(
                req,
                ErrorOr::Ok(GetHealthMetricsReply {
                    serialized: Bytes::from(m.encode(0x0FDB_00B0_7300_0000)),
                }),
            )
        };
        let count = |r: &RangeResult| r.rows.len();
        // A detailed read: aggregate, log and storage rows.
        let call = read(&mut s, HEALTH.0, HEALTH.1);
        let req = take(&mut s, is_health);
        assert!(detailed(&req));
        answer(&mut s, &req, &full);
        assert_eq!(count(&s.take(call).unwrap().unwrap()), 3);
        // Within 0.5 s: the same rows, no request.
        let call = read(&mut s, HEALTH.0, HEALTH.1);
        assert!(s.requests().iter().all(|r| !is_health(r)));
        assert_eq!(count(&s.take(call).unwrap().unwrap()), 3);
        // Later, within 5 s of the detailed answer: a request that is not detailed, whose
        // empty per-process figures the detailed read takes (the aggregate alone).
        s.advance_by(Duration::from_millis(600));
        let call = read(&mut s, HEALTH.0, HEALTH.1);
        let req = take(&mut s, is_health);
        assert!(!detailed(&req));
        let aggregate = HealthMetrics {
            storage_stats: Vec::new(),
            tlog_queue: Vec::new(),
            ..full.clone()
        };
        answer(&mut s, &req, &aggregate);
        assert_eq!(count(&s.take(call).unwrap().unwrap()), 1);
        // After 5 s: detailed again.
        s.advance_by(Duration::from_secs(5));
        let call = read(&mut s, HEALTH.0, HEALTH.1);
        let req = take(&mut s, is_health);
        assert!(detailed(&req));
        answer(&mut s, &req, &full);
        assert_eq!(count(&s.take(call).unwrap().unwrap()), 3);
    }

    #[test]
    fn worker_interfaces_through_the_leader() {
        let mut s = sim();
        let call = read(&mut s, WORKERS_MODULE.0, WORKERS_MODULE.1);
        let leader = take(&mut s, |r| matches!(r.msg, AnyMessage::GetLeaderRequest(_)));
        assert_eq!(
            leader.dest,
            crate::uid::well_known::CLIENT_LEADER_REG_GET_LEADER
        );
        // The cluster controller's interface, as a coordinator serializes it.
        let cc = ClusterControllerClientInterface {
            client_interface: crate::messages::coordination::ClusterInterface {
                get_client_workers: stream(4600, Uid::new(9, 4)),
                ..Default::default()
            },
        };
        let mut serialized = 0x0FDB_00B0_7300_0000u64.to_le_bytes().to_vec();
        serialized.extend(crate::serializer::encode_with(
            &cc,
            <ClusterControllerClientInterface as crate::serializer::Message>::FILE_IDENTIFIER,
        ));
        let info = LeaderInfo {
            change_id: Uid::new(1, 1),
            serialized_info: Bytes::from(serialized),
            forward: false,
        };
        let body = AnyMessage::Leader(ErrorOr::Ok(EnsureTable(Some(info)))).encode();
        s.reply_bytes(&leader, &body);
        let req = take(&mut s, |r| {
            matches!(r.msg, AnyMessage::GetClientWorkersRequest(_))
        });
        assert_eq!(req.dest, Uid::new(9, 4));
        let w = ClientWorkerInterface {
            reboot: stream(4700, Uid::new(5, 5)),
            profiler: stream(4700, Uid::new(6, 6)),
            set_failure_injection: stream(4700, Uid::new(7, 7)),
        };
        s.reply_bytes(
            &req,
            &encode_client_workers(&ErrorOr::Ok(alloc::vec![w.clone()])),
        );
        let rows = s.take(call).expect("finished").expect("rows").rows;
        assert_eq!(rows.len(), 1);
        assert_eq!(
            &rows[0].key[..],
            b"\xff\xff/worker_interfaces/127.0.0.1:4700"
        );
        assert_eq!(
            rows[0].value,
            Bytes::from(w.binary_value(0x0FDB_00B0_7300_0000))
        );
        // Garbage from the cluster controller is a typed error.
        let call = read(&mut s, WORKERS_MODULE.0, WORKERS_MODULE.1);
        let leader = take(&mut s, |r| matches!(r.msg, AnyMessage::GetLeaderRequest(_)));
        s.reply_bytes(&leader, &body);
        let req = take(&mut s, |r| {
            matches!(r.msg, AnyMessage::GetClientWorkersRequest(_))
        });
        s.reply_bytes(
            &req,
            &encode_reply(&ErrorOr::Ok(GetHealthMetricsReply::default())),
        );
        assert!(matches!(s.take(call), Some(Err(ClientError::Decode(_)))));
    }
}
