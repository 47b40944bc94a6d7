//! A complete driver for the sans-IO core in plain `std::net`, one thread, blocking sockets
//! with short read timeouts: the smallest honest example of the driver contract in
//! [`fdb_protocol::Client`]. Usage: `cargo run -p fdb-protocol --example std_driver -- CLUSTER_FILE`.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant as StdInstant};

use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::{Client, ClientConfig, Event, Instant};

fn main() {
    let path = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("FDB_CLUSTER_FILE").ok());
    let Some(path) = path else {
        eprintln!("usage: std_driver CLUSTER_FILE (or set FDB_CLUSTER_FILE)");
        std::process::exit(2);
    };
    let text = std::fs::read_to_string(&path).expect("read cluster file");
    let cluster = ClusterFile::parse(&text).expect("parse cluster file");

    let start = StdInstant::now();
    let now = || Instant(start.elapsed());
    let mut client = Client::new(ClientConfig::new(cluster, 1), now());
    let mut sockets: HashMap<_, TcpStream> = HashMap::new();
    // One transaction: write a key, commit, then read it back in a second transaction.
    let tx = client.create_transaction(now());
    client.set(tx, b"std_driver/hello", b"world").unwrap();
    let commit = client.commit(now(), tx);
    let mut read = None;
    let mut buf = vec![0u8; 64 * 1024];

    while start.elapsed() < Duration::from_secs(30) {
        // 1. Events: open and close sockets, collect results.
        while let Some(ev) = client.poll_event() {
            match ev {
                Event::Connect { conn, addr } => {
                    let sa = SocketAddr::new(addr.ip.into(), addr.port);
                    match TcpStream::connect_timeout(&sa, Duration::from_secs(2)) {
                        Ok(s) => {
                            s.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
                            s.set_nodelay(true).unwrap();
                            sockets.insert(conn, s);
                            client.handle_connected(conn, now());
                        }
                        Err(_) => client.handle_connect_failed(conn, now()),
                    }
                }
                Event::Close { conn, reason } => {
                    println!("connection {conn:?} closed: {reason}");
                    sockets.remove(&conn);
                }
                Event::Resolve { host, port } => {
                    let ips: Vec<_> = (host.as_str(), port)
                        .to_socket_addrs()
                        .map(|a| a.map(|s| s.ip()).collect())
                        .unwrap_or_default();
                    client.handle_resolved(now(), &host, port, &ips);
                }
                // Each call's completion is read as the type the call promised.
                Event::Complete(c) if c.request() == commit.id() => match commit.take(c) {
                    Ok(done) => {
                        println!("committed at version {}", done.version);
                        let tx = client.create_transaction(now());
                        read = Some(client.get(now(), tx, b"std_driver/hello", false));
                    }
                    Err(e) => {
                        println!("commit failed: {e}");
                        return;
                    }
                },
                Event::Complete(c) if read.is_some_and(|r| r.id() == c.request()) => {
                    let value = read.take().expect("checked").take(c);
                    println!("read back: {value:?}");
                    return;
                }
                other => println!("event: {other:?}"),
            }
        }
        // 2. Transmits.
        while let Some(t) = client.poll_transmit() {
            if let Some(s) = sockets.get_mut(&t.conn) {
                if s.write_all(&t.data).is_err() {
                    client.handle_closed(t.conn, now());
                }
            }
        }
        // 3. Input (each read waits at most 10 ms), then time.
        let conns: Vec<_> = sockets.keys().copied().collect();
        for conn in conns {
            let Some(s) = sockets.get_mut(&conn) else {
                continue;
            };
            match s.read(&mut buf) {
                Ok(0) => client.handle_closed(conn, now()),
                Ok(n) => client.handle_input(conn, now(), &buf[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(_) => client.handle_closed(conn, now()),
            }
        }
        if client.poll_timeout().is_some_and(|t| t <= now()) {
            client.handle_timeout(now());
        }
        if sockets.is_empty() {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    eprintln!("no answer within 30 s");
    std::process::exit(1);
}
