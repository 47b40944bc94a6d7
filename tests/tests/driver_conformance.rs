//! One behaviour suite, run against both drivers over real loopback sockets and the
//! in-process mini cluster: the drivers are thin, so they must behave the same.

use std::time::Duration;

use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::framing::ProtocolVersion;
use fdb_tests::cluster::{RequestKind, Role};
use fdb_tests::testkit::MiniCluster;

trait Driver {
    fn open(cluster: &str, seed: u64) -> Self;
    /// Opens with plaintext connections off (TLS addresses only).
    fn open_plaintext_off(cluster: &str, seed: u64) -> Self;
    /// Opens from a cluster file on disk (the driver may rewrite or re-read it).
    fn open_file(path: &std::path::Path, seed: u64) -> Self;
    /// `None` if no answer within `limit`.
    fn read_version(&mut self, limit: Duration) -> Option<i64>;
    /// Asks for a read version: the version, or the FDB error code it failed with (`None`:
    /// it timed out).
    fn read_version_or_code(&mut self, limit: Duration) -> Result<i64, Option<ErrorCode>>;
    /// The error a read version fails with, panicking if it succeeds.
    fn read_version_error(&mut self, limit: Duration) -> Option<ErrorCode> {
        match self.read_version_or_code(limit) {
            Ok(v) => panic!("a read version ({v}) where an error was expected"),
            Err(code) => code,
        }
    }
    /// Sets a key in a transaction (with the retry loop), panicking on failure.
    fn set(&mut self, key: &[u8], value: &[u8]);
    /// Reads a key in a transaction (with the retry loop), panicking on failure.
    fn get(&mut self, key: &[u8]) -> Option<Vec<u8>>;
}

struct Mio(fdb_driver_mio::Database);

impl Driver for Mio {
    fn open_file(path: &std::path::Path, seed: u64) -> Self {
        Mio(fdb_driver_mio::Database::open_file_with_seed(path, seed).unwrap())
    }
    fn open(cluster: &str, seed: u64) -> Self {
        Mio(
            fdb_driver_mio::Database::from_cluster_file(ClusterFile::parse(cluster).unwrap(), seed)
                .unwrap(),
        )
    }
    fn open_plaintext_off(cluster: &str, seed: u64) -> Self {
        let cf = ClusterFile::parse(cluster).unwrap();
        Mio(
            fdb_driver_mio::Database::from_cluster_file_with_tls(cf, seed, plaintext_off())
                .unwrap(),
        )
    }
    fn read_version(&mut self, limit: Duration) -> Option<i64> {
        match self.0.read_version_with(Default::default(), limit) {
            Ok(v) => Some(v),
            Err(fdb_driver_mio::Error::TimedOut) => None,
            Err(e) => panic!("{e}"),
        }
    }
    fn read_version_or_code(&mut self, limit: Duration) -> Result<i64, Option<ErrorCode>> {
        match self.0.read_version_with(Default::default(), limit) {
            Ok(v) => Ok(v),
            Err(fdb_driver_mio::Error::TimedOut) => Err(None),
            Err(e) => Err(Some(
                e.code().unwrap_or_else(|| panic!("not an FDB error: {e}")),
            )),
        }
    }
    fn set(&mut self, key: &[u8], value: &[u8]) {
        self.0
            .run(|tx| {
                tx.set(key, value);
                Ok(())
            })
            .unwrap()
    }
    fn get(&mut self, key: &[u8]) -> Option<Vec<u8>> {
        self.0.run(|tx| tx.get(key)).unwrap().map(|v| v.to_vec())
    }
}

struct Tokio(tokio::runtime::Runtime, fdb_driver_tokio::Database);

impl Driver for Tokio {
    fn open_file(path: &std::path::Path, seed: u64) -> Self {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let db = rt.block_on(async {
            fdb_driver_tokio::Database::open_file_with_seed(path, seed).unwrap()
        });
        Tokio(rt, db)
    }
    fn open(cluster: &str, seed: u64) -> Self {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let db = rt.block_on(async {
            fdb_driver_tokio::Database::from_cluster_file(
                ClusterFile::parse(cluster).unwrap(),
                seed,
            )
            .expect("the driver starts")
        });
        Tokio(rt, db)
    }
    fn open_plaintext_off(cluster: &str, seed: u64) -> Self {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let cf = ClusterFile::parse(cluster).unwrap();
        let db = rt.block_on(async {
            fdb_driver_tokio::Database::from_cluster_file_with_tls(cf, seed, plaintext_off())
                .unwrap()
        });
        Tokio(rt, db)
    }
    fn read_version(&mut self, limit: Duration) -> Option<i64> {
        let db = self.1.clone();
        self.0.block_on(async move {
            tokio::time::timeout(limit, db.read_version())
                .await
                .ok()
                .map(|r| r.unwrap())
        })
    }
    fn read_version_or_code(&mut self, limit: Duration) -> Result<i64, Option<ErrorCode>> {
        let db = self.1.clone();
        self.0.block_on(async move {
            match tokio::time::timeout(limit, db.read_version()).await {
                Err(_) => Err(None),
                Ok(Ok(v)) => Ok(v),
                Ok(Err(e)) => Err(Some(
                    e.code().unwrap_or_else(|| panic!("not an FDB error: {e}")),
                )),
            }
        })
    }
    fn set(&mut self, key: &[u8], value: &[u8]) {
        let db = self.1.clone();
        let (k, v) = (key.to_vec(), value.to_vec());
        self.0.block_on(async move {
            tokio::time::timeout(
                LIMIT,
                db.run(|tx| {
                    let (k, v) = (k.clone(), v.clone());
                    async move {
                        tx.set(&k, &v);
                        Ok(())
                    }
                }),
            )
            .await
            .expect("timed out")
            .unwrap()
        })
    }
    fn get(&mut self, key: &[u8]) -> Option<Vec<u8>> {
        let db = self.1.clone();
        let k = key.to_vec();
        self.0.block_on(async move {
            tokio::time::timeout(
                LIMIT,
                db.run(|tx| {
                    let k = k.clone();
                    async move { tx.get(&k).await }
                }),
            )
            .await
            .expect("timed out")
            .unwrap()
            .map(|v| v.to_vec())
        })
    }
}

/// How long a driver may take to get somewhere before the test gives up: generous, because
/// it only bounds a failure (on a loaded 2-core machine a reconnection round took over 10 s).
const LIMIT: Duration = Duration::from_secs(30);

fn plaintext_off() -> fdb_api::TlsConfig {
    fdb_api::TlsConfig::new().disable_plaintext_connection(true)
}

/// With plaintext connections off (FDB 7.4's `TLS_disable_plaintext_connection`), a cluster
/// of plaintext addresses is never connected to, and no read version comes; the same cluster
/// answers a client that allows them.
fn plaintext_connections_off<D: Driver>() {
    let c = MiniCluster::start();
    let mut off = D::open_plaintext_off(&c.cluster_string(), 1);
    assert_eq!(off.read_version(Duration::from_secs(2)), None);
    assert_eq!(c.connections_accepted(), 0);
    let mut on = D::open(&c.cluster_string(), 2);
    on.read_version(LIMIT).unwrap();
    assert!(c.connections_accepted() > 0);
}

fn versions_advance<D: Driver>() {
    let c = MiniCluster::start();
    let mut d = D::open(&c.cluster_string(), 1);
    let a = d.read_version(LIMIT).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let b = d.read_version(LIMIT).unwrap();
    assert!(b > a);
}

fn dropped_connections<D: Driver>() {
    let c = MiniCluster::start();
    let mut d = D::open(&c.cluster_string(), 2);
    d.read_version(LIMIT).unwrap();
    let accepted = c.connections_accepted();
    let grvs = c.grv_requests();
    c.drop_connections();
    d.read_version(LIMIT).unwrap();
    // The read version came over a new connection, from the proxy itself.
    assert!(c.connections_accepted() > accepted);
    assert!(c.grv_requests() > grvs);
}

fn coordinator_down<D: Driver>() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_addr = dead.local_addr().unwrap();
    drop(dead);
    let c = MiniCluster::start();
    for seed in 0..4 {
        let mut d = D::open(&format!("mini:cluster@{dead_addr},{}", c.addr()), seed);
        d.read_version(LIMIT).unwrap();
    }
}

fn protocol_mismatch<D: Driver>() {
    let c = MiniCluster::start();
    // 7.2: a protocol this client does not speak (7.3 and 7.4 it does, switching to the
    // one the coordinator announces).
    c.set_protocol_version(ProtocolVersion(0x1FDB_00B0_7200_0000));
    let mut d = D::open(&c.cluster_string(), 3);
    assert_eq!(
        d.read_version_error(Duration::from_secs(5)),
        Some(ErrorCode::INCOMPATIBLE_CLIENT),
        "an unsupported cluster is refused at once, not waited on"
    );
    // Once the server speaks 7.3 (new connections), the client gets through: requests fail
    // with incompatible_client until its next connection hears the coordinator's 7.3.
    c.set_protocol_version(ProtocolVersion::V7_3.with_object_serializer_flag());
    c.drop_connections();
    let deadline = std::time::Instant::now() + LIMIT;
    loop {
        match d.read_version_or_code(Duration::from_secs(1)) {
            Ok(_) => break,
            Err(code) => assert_eq!(code, Some(ErrorCode::INCOMPATIBLE_CLIENT)),
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still refused after {LIMIT:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A cluster file naming the coordinator as `localhost:PORT`: the driver resolves it.
fn hostname_coordinator<D: Driver>() {
    let c = MiniCluster::start();
    let mut d = D::open(&format!("mini:cluster@localhost:{}", c.addr().port()), 4);
    d.read_version(LIMIT).unwrap();
    d.set(b"host", b"name");
    assert_eq!(d.get(b"host").as_deref(), Some(&b"name"[..]));
}

/// Proxies restarted (new tokens, new `ClientDBInfo`): transactions carry on.
fn proxies_restarted<D: Driver>() {
    let c = MiniCluster::start();
    let mut d = D::open(&c.cluster_string(), 5);
    d.set(b"a", b"1");
    c.restart(Role::Proxies);
    d.set(b"b", b"2");
    assert_eq!(d.get(b"a").as_deref(), Some(&b"1"[..]));
    assert_eq!(c.get(b"b").as_deref(), Some(&b"2"[..]));
}

/// Proxies down for a while, then back: a transaction started meanwhile completes.
fn proxies_killed_then_restarted<D: Driver>() {
    let c = MiniCluster::start();
    let mut d = D::open(&c.cluster_string(), 6);
    d.set(b"a", b"1");
    c.kill(Role::Proxies);
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(400));
            c.restart(Role::Proxies);
        });
        d.set(b"b", b"2");
    });
    assert_eq!(d.get(b"b").as_deref(), Some(&b"2"[..]));
}

/// Storage servers restarted (their old tokens get ENDPOINT_NOT_FOUND): reads fail over to
/// fresh locations.
fn storage_restarted<D: Driver>() {
    let c = MiniCluster::start();
    let mut d = D::open(&c.cluster_string(), 7);
    let keys: [&[u8]; 5] = [b"B", b"b", b"i", b"q", b"x"];
    for k in keys {
        d.set(k, k);
    }
    for k in keys {
        assert_eq!(d.get(k).as_deref(), Some(k));
    }
    for i in 0..c.storage_server_count() {
        c.restart(Role::Storage(i));
    }
    let located = c.requests(RequestKind::GetKeyServerLocations);
    for k in keys {
        assert_eq!(d.get(k).as_deref(), Some(k));
    }
    assert!(
        c.requests(RequestKind::GetKeyServerLocations) > located,
        "the stale interfaces were relocated"
    );
}

/// The cluster file names a dead coordinator; an operator then points it at the real one.
/// After a failed round the driver reads the file again and joins the cluster.
fn cluster_file_reread_when_coordinators_fail<D: Driver>() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_addr = dead.local_addr().unwrap();
    drop(dead);
    let dir = std::env::temp_dir().join(format!(
        "fdb-reread-{}-{}",
        std::process::id(),
        std::any::type_name::<D>().len()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("fdb.cluster");
    std::fs::write(&path, format!("old:cluster@{dead_addr}\n")).unwrap();
    let mut d = D::open_file(&path, 21);
    assert_eq!(d.read_version(Duration::from_millis(300)), None);
    let c = MiniCluster::start();
    std::fs::write(&path, c.cluster_string() + "\n").unwrap();
    assert!(
        d.read_version(LIMIT).is_some(),
        "the re-read cluster file leads to the cluster"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A peer whose last bytes and whose close arrive together (its ConnectPacket, then at once
/// the end of what it sends; it keeps reading, so the client's writes fail nothing) is seen to
/// have closed: the client asks the coordinator again a second later, on a new connection,
/// rather than when its ping goes unanswered (4 s). A driver that stopped reading at a short
/// read (to save the read that would block) would miss such a close unless it read on when
/// the event says the peer closed: the mio driver, tried that way, missed it.
fn close_that_comes_with_bytes<D: Driver>() {
    use std::io::{Read, Write};
    use std::net::{Shutdown, TcpListener};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicU64::new(0));
    {
        let accepted = accepted.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                accepted.fetch_add(1, Ordering::Relaxed);
                let mut hello = bytes::BytesMut::new();
                fdb_protocol::framing::ConnectPacket::client(ProtocolVersion::V7_3)
                    .encode(&mut hello);
                let _ = stream.write_all(&hello);
                let _ = stream.shutdown(Shutdown::Write);
                std::thread::spawn(move || {
                    let mut sink = [0u8; 4096];
                    while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
                });
            }
        });
    }
    let mut d = D::open(&format!("closing:peer@{addr}"), 23);
    assert_eq!(d.read_version(Duration::from_millis(2500)), None);
    let n = accepted.load(Ordering::Relaxed);
    assert!(
        n >= 2,
        "{n} connection(s) in 2.5 s: the close went unnoticed"
    );
}

macro_rules! suite {
    ($($name:ident),*) => {
        mod mio_driver { use super::*; $( #[test] fn $name() { super::$name::<Mio>() } )* }
        mod tokio_driver { use super::*; $( #[test] fn $name() { super::$name::<Tokio>() } )* }
    };
}

suite!(
    versions_advance,
    dropped_connections,
    coordinator_down,
    protocol_mismatch,
    hostname_coordinator,
    proxies_restarted,
    proxies_killed_then_restarted,
    storage_restarted,
    cluster_file_reread_when_coordinators_fail,
    close_that_comes_with_bytes,
    plaintext_connections_off
);
