//! The tokio driver against the in-process mini cluster over real loopback sockets.

use std::time::Duration;

use fdb_driver_tokio::Database;
use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::framing::ProtocolVersion;
use fdb_tests::testkit::MiniCluster;

fn db(cluster: &str, seed: u64) -> Database {
    Database::from_cluster_file(ClusterFile::parse(cluster).unwrap(), seed)
        .expect("the driver starts")
}

async fn within<T>(d: Duration, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(d, f).await.expect("timed out")
}

#[tokio::test]
async fn read_versions_advance() {
    let c = MiniCluster::start();
    let db = db(&c.cluster_string(), 1);
    let a = within(Duration::from_secs(10), db.read_version())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let b = within(Duration::from_secs(10), db.read_version())
        .await
        .unwrap();
    assert!(a > fdb_tests::cluster::INITIAL_VERSION, "{a}");
    assert!(b > a, "{b} > {a}");
}

#[tokio::test]
async fn concurrent_requests_are_batched() {
    let c = MiniCluster::start();
    let db = db(&c.cluster_string(), 2);
    within(Duration::from_secs(10), db.read_version())
        .await
        .unwrap();
    let before = c.grv_requests();
    let tasks: Vec<_> = (0..64)
        .map(|_| {
            tokio::spawn({
                let db = db.clone();
                async move { db.read_version().await }
            })
        })
        .collect();
    for t in tasks {
        within(Duration::from_secs(10), t).await.unwrap().unwrap();
    }
    let sent = c.grv_requests() - before;
    assert!(sent < 64, "64 concurrent reads used {sent} requests");
}

#[tokio::test]
async fn survives_dropped_connections() {
    let c = MiniCluster::start();
    let db = db(&c.cluster_string(), 3);
    within(Duration::from_secs(10), db.read_version())
        .await
        .unwrap();
    let (accepted, grvs) = (c.connections_accepted(), c.grv_requests());
    c.drop_connections();
    within(Duration::from_secs(10), db.read_version())
        .await
        .unwrap();
    // Not a cached answer: the proxy was asked again, over a new connection.
    assert!(c.connections_accepted() > accepted, "no reconnect");
    assert!(c.grv_requests() > grvs, "the proxy was not asked");
}

#[tokio::test]
async fn fails_over_to_a_live_coordinator() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_addr = dead.local_addr().unwrap();
    drop(dead);
    let c = MiniCluster::start();
    let cluster = format!("mini:cluster@{dead_addr},{}", c.addr());
    // Whatever order the seed shuffles them into, the live one answers.
    for seed in 0..4 {
        let db = db(&cluster, seed);
        within(Duration::from_secs(10), db.read_version())
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn incompatible_server_is_not_used() {
    let c = MiniCluster::start();
    c.set_protocol_version(ProtocolVersion(0x1FDB_00B0_7200_0000));
    let db = db(&c.cluster_string(), 4);
    // A protocol this client does not speak (it speaks 7.3 and 7.4): refused at once with
    // incompatible_client, as libfdb_c's multi-version client does with
    // fail_incompatible_client, rather than waited on.
    let r = tokio::time::timeout(Duration::from_secs(5), db.read_version()).await;
    match r {
        Ok(Err(e)) => assert_eq!(e.code(), Some(ErrorCode::INCOMPATIBLE_CLIENT), "{e}"),
        other => panic!("a 7.2 server gave {other:?}"),
    }
}

#[tokio::test]
async fn recovers_from_a_hung_server() {
    let c = MiniCluster::start();
    let db = db(&c.cluster_string(), 5);
    within(Duration::from_secs(10), db.read_version())
        .await
        .unwrap();
    let accepted = c.connections_accepted();
    c.set_silent(true);
    let pending = tokio::spawn({
        let db = db.clone();
        async move { db.read_version().await }
    });
    // Silent long enough to swallow a ping: FlowTransport connections are reliable, so a
    // lost reply alone is never retried; the connection monitor has to declare the
    // connection dead (ping unanswered for 2 s with nothing else arriving, about 3 s in).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(!pending.is_finished());
    c.set_silent(false);
    // Then the request is retried on a fresh connection.
    within(Duration::from_secs(15), pending)
        .await
        .unwrap()
        .unwrap();
    assert!(
        c.connections_accepted() > accepted,
        "not on a new connection"
    );
}
