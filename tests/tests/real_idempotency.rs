//! An idempotent commit whose reply is lost, on a real FoundationDB 7.3.77 cluster: the
//! client must settle the outcome itself by reading back the commit proxy's `\xff\x02/idmp/`
//! rows, as libfdb_c's `determineCommitStatus` does.
//!
//! The sans-IO core is driven here by a driver of the test's own (std sockets on one thread)
//! that can cut the connection around the commit: after writing the commit request and
//! giving the server time to commit it (the reply is lost: success with the versionstamp),
//! or before writing it (it never reached the server: `transaction_too_old`). Without an id
//! the same cut gives `commit_unknown_result`. Runs when `FDB_CLUSTER_FILE` is set; skipped
//! with a notice otherwise.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;

use fdb_api::driver::{Clock, Driver, Engine, IoRequest, Op};
use fdb_api::Error;
use fdb_driver_tokio::TransactionOption;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::idempotency::{find_id_in_row, ID_ROWS_PREFIX};
use fdb_protocol::ConnectionId;
use fdb_tests::dual::{random_prefix, real_cluster_file, ClearOnDrop};

/// What to do to the connection that carries the next transmission holding `marker`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Cut {
    /// Write it, wait for the server to act on it, then close the connection unread.
    AfterDelivery,
    /// Close the connection without writing it.
    BeforeDelivery,
}

static ARMED: Mutex<Option<(Cut, Vec<u8>)>> = Mutex::new(None);

/// A driver that runs the engine on a thread of its own over blocking-free std sockets.
#[derive(Clone)]
struct CutDriver {
    ops: mpsc::Sender<Op>,
    clock: Clock,
}

impl Driver for CutDriver {
    fn start(engine: Engine) -> Result<Self, Error> {
        let (ops, rx) = mpsc::channel();
        let clock = engine.clock();
        std::thread::spawn(move || run(engine, rx));
        Ok(CutDriver { ops, clock })
    }

    fn send(&self, op: Op) -> bool {
        self.ops.send(op).is_ok()
    }

    fn clock(&self) -> Clock {
        self.clock.clone()
    }
}

fn run(mut engine: Engine, ops: mpsc::Receiver<Op>) {
    let mut sockets: HashMap<ConnectionId, TcpStream> = HashMap::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let mut busy = false;
        loop {
            match ops.try_recv() {
                Ok(op) => {
                    op(&mut engine);
                    busy = true;
                }
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => return,
            }
        }
        engine.reap();
        while let Some(io) = engine.poll_io() {
            busy = true;
            match io {
                IoRequest::Connect { conn, addr, .. } => {
                    match TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
                        Ok(s) => {
                            let _ = s.set_nodelay(true);
                            s.set_nonblocking(true).expect("non-blocking");
                            sockets.insert(conn, s);
                            engine.handle_connected(conn);
                        }
                        Err(_) => engine.handle_connect_failed(conn),
                    }
                }
                IoRequest::Close { conn } => {
                    if let Some(s) = sockets.remove(&conn) {
                        let _ = s.shutdown(Shutdown::Both);
                    }
                }
                IoRequest::Resolve { host, port } => {
                    use std::net::ToSocketAddrs;
                    let ips: Vec<_> = (host.as_str(), port)
                        .to_socket_addrs()
                        .map(|a| a.map(|a| a.ip()).collect())
                        .unwrap_or_default();
                    engine.handle_resolved(&host, port, &ips);
                }
                IoRequest::WriteClusterFile { .. } => {}
                #[allow(unreachable_patterns)]
                _ => {}
            }
        }
        while let Some(t) = engine.poll_transmit() {
            busy = true;
            let cut = {
                let mut armed = ARMED.lock().unwrap();
                match &*armed {
                    Some((cut, marker))
                        if t.data.windows(marker.len()).any(|w| w == &marker[..]) =>
                    {
                        let cut = *cut;
                        *armed = None;
                        Some(cut)
                    }
                    _ => None,
                }
            };
            let Some(s) = sockets.get_mut(&t.conn) else {
                continue;
            };
            if cut != Some(Cut::BeforeDelivery) && write_all(s, &t.data).is_err() {
                sockets.remove(&t.conn);
                engine.handle_closed(t.conn);
                continue;
            }
            if let Some(cut) = cut {
                if cut == Cut::AfterDelivery {
                    // Long enough for a single-process cluster to commit it.
                    std::thread::sleep(Duration::from_millis(300));
                }
                let s = sockets.remove(&t.conn).expect("present");
                let _ = s.shutdown(Shutdown::Both);
                engine.handle_closed(t.conn);
            }
        }
        let conns: Vec<ConnectionId> = sockets.keys().copied().collect();
        for conn in conns {
            let s = sockets.get_mut(&conn).expect("present");
            loop {
                match s.read(&mut buf) {
                    Ok(0) => {
                        sockets.remove(&conn);
                        engine.handle_closed(conn);
                        break;
                    }
                    Ok(n) => {
                        busy = true;
                        engine.handle_input(conn, &buf[..n]);
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(_) => {
                        sockets.remove(&conn);
                        engine.handle_closed(conn);
                        break;
                    }
                }
            }
        }
        if engine
            .deadline()
            .is_some_and(|d| d <= std::time::Instant::now())
        {
            engine.handle_timeout();
            busy = true;
        }
        if !busy {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

fn write_all(s: &mut TcpStream, mut data: &[u8]) -> std::io::Result<()> {
    while !data.is_empty() {
        match s.write(data) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_micros(100))
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

type Db = fdb_api::Database<CutDriver>;

/// Reads `key` and commits a write of it with the connection cut as `cut` says.
async fn cut_commit(
    db: &Db,
    key: &[u8],
    id: Option<&[u8]>,
    cut: Cut,
) -> (Result<i64, Error>, Option<[u8; 10]>) {
    let tx = db.create_transaction();
    if let Some(id) = id {
        tx.set_option(TransactionOption::IdempotencyId(id.to_vec()))
            .unwrap();
    }
    tx.get(key).await.expect("the read before the commit");
    tx.set(key, b"written");
    let stamp = tx.get_versionstamp();
    // The commit request is the transmission that carries the key.
    *ARMED.lock().unwrap() = Some((cut, key.to_vec()));
    let r = tokio::time::timeout(Duration::from_secs(60), tx.commit())
        .await
        .expect("the commit ends");
    let stamp = tokio::time::timeout(Duration::from_secs(10), stamp)
        .await
        .ok()
        .and_then(|s| s.ok());
    (r, stamp)
}

async fn value(db: &Db, key: &[u8]) -> Option<Vec<u8>> {
    let key = key.to_vec();
    db.run(|tx| {
        let key = key.clone();
        async move { Ok(tx.get(&key).await?.map(|v| v.to_vec())) }
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_commit_reply_is_settled_by_the_real_clusters_id_rows() {
    let Some((_, cf)) = real_cluster_file() else {
        eprintln!("FDB_CLUSTER_FILE not set: skipping the real-cluster idempotency test");
        return;
    };
    let prefix = random_prefix("real-idempotency");
    let _clean = ClearOnDrop::prefix(cf.clone(), &prefix);
    let db = Db::from_cluster_file(cf, 5).expect("the database opens");
    let k = |s: &str| [&prefix[..], s.as_bytes()].concat();

    // Delivered, reply lost, with an id: committed, and the client knows it.
    let id = [&b"real-idem-"[..], &prefix[prefix.len() - 17..]].concat();
    let (r, stamp) = cut_commit(&db, &k("delivered"), Some(&id), Cut::AfterDelivery).await;
    assert_eq!(
        r.expect("settled as committed"),
        -1,
        "no committed version on this path"
    );
    let stamp = stamp.expect("the versionstamp");
    assert_eq!(
        value(&db, &k("delivered")).await.as_deref(),
        Some(&b"written"[..])
    );
    // The versionstamp is the one of the proxy's row for the id.
    let version = i64::from_be_bytes(stamp[..8].try_into().unwrap());
    let row_key = fdb_protocol::idempotency::id_row_key(version, stamp[8]);
    let row = db
        .run(|tx| {
            let row_key = row_key.clone();
            async move {
                tx.set_option(TransactionOption::ReadSystemKeys)?;
                tx.get(&row_key).await
            }
        })
        .await
        .unwrap()
        .expect("the id's row");
    assert!(row_key.starts_with(ID_ROWS_PREFIX));
    assert_eq!(
        find_id_in_row(&row_key, &row, &id),
        Some((version, u16::from_be_bytes([stamp[8], stamp[9]])))
    );

    // Not delivered, with an id: not committed, and it never will be.
    let id2 = [&id[..], b"-2"].concat();
    let (r, _) = cut_commit(&db, &k("lost"), Some(&id2), Cut::BeforeDelivery).await;
    assert_eq!(
        r.unwrap_err().code(),
        Some(ErrorCode::TRANSACTION_TOO_OLD),
        "a commit that never arrived"
    );
    assert_eq!(value(&db, &k("lost")).await, None);

    // Without an id the client cannot tell.
    let (r, _) = cut_commit(&db, &k("unknown"), None, Cut::AfterDelivery).await;
    assert_eq!(
        r.unwrap_err().code(),
        Some(ErrorCode::COMMIT_UNKNOWN_RESULT)
    );
    assert_eq!(
        value(&db, &k("unknown")).await.as_deref(),
        Some(&b"written"[..])
    );
}
