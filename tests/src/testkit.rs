//! A minimal in-process FDB "cluster" on loopback for driver tests: one process that is
//! coordinator, GRV proxy and commit proxy at once, speaking the real wire protocol through
//! `fdb-protocol`. It serves `OpenDatabaseCoordRequest` (answering at once when the client's
//! known id differs, holding the long poll otherwise), read versions that advance about a
//! million per second, and pings. Faults: drop every connection, refuse service, or announce
//! another protocol version. This is the seed of the embedded test cluster; it stores no data.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use fdb_protocol::framing::{
    encode_packet, ConnectPacket, FrameDecoder, Incoming, ProtocolVersion,
};
use fdb_protocol::messages::coordination::{ClientDBInfo, CommitProxyInterface, GrvProxyInterface};
use fdb_protocol::messages::grv::{GetReadVersionReply, GlobalConfigRefreshReply};
use fdb_protocol::messages::types::VersionVector;
use fdb_protocol::messages::{
    decode_any, encode_reply, AnyMessage, Endpoint, ErrorOr, IpAddress, NetworkAddress,
    NetworkAddressList, RequestStream, Void,
};
use fdb_protocol::Uid;

struct Shared {
    addr: SocketAddr,
    started: Instant,
    info_id: Uid,
    grv_token: Uid,
    commit_token: Uid,
    stopped: AtomicBool,
    /// Version the ConnectPacket announces.
    protocol: AtomicU64,
    /// When set, requests are read but never answered (a hung server).
    silent: AtomicBool,
    conns: Mutex<Vec<TcpStream>>,
    grv_requests: AtomicU64,
}

/// A running mini cluster. Stops when dropped.
pub struct MiniCluster {
    shared: Arc<Shared>,
}

impl MiniCluster {
    /// Starts on an ephemeral loopback port.
    pub fn start() -> MiniCluster {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            addr,
            started: Instant::now(),
            info_id: Uid::new(0x1111, addr.port() as u64),
            grv_token: Uid::new(0x6772_7600_0000_0001, 0x0000_0001_0000_0000),
            commit_token: Uid::new(0x636f_6d6d_0000_0001, 0x0000_0002_0000_0000),
            stopped: AtomicBool::new(false),
            protocol: AtomicU64::new(ProtocolVersion::V7_3.with_object_serializer_flag().0),
            silent: AtomicBool::new(false),
            conns: Mutex::new(Vec::new()),
            grv_requests: AtomicU64::new(0),
        });
        let s = shared.clone();
        thread::spawn(move || {
            for stream in listener.incoming() {
                if s.stopped.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                if let Ok(c) = stream.try_clone() {
                    s.conns.lock().unwrap().push(c);
                }
                let s2 = s.clone();
                thread::spawn(move || serve(s2, stream));
            }
        });
        MiniCluster { shared }
    }

    /// The cluster file contents for this cluster.
    pub fn cluster_string(&self) -> String {
        format!("mini:cluster@{}", self.shared.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// Closes every open connection (the server keeps accepting new ones).
    pub fn drop_connections(&self) {
        for c in self.shared.conns.lock().unwrap().drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }

    /// Announces `v` in the ConnectPacket of new connections.
    pub fn set_protocol_version(&self, v: ProtocolVersion) {
        self.shared.protocol.store(v.0, Ordering::SeqCst);
    }

    /// Stops answering (requests are still read), or resumes.
    pub fn set_silent(&self, silent: bool) {
        self.shared.silent.store(silent, Ordering::SeqCst);
    }

    /// How many read-version requests arrived (a batched request counts once).
    pub fn grv_requests(&self) -> u64 {
        self.shared.grv_requests.load(Ordering::SeqCst)
    }
}

impl Drop for MiniCluster {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        self.drop_connections();
        let _ = TcpStream::connect(self.shared.addr);
    }
}

fn endpoint(addr: SocketAddr, token: Uid) -> RequestStream {
    let ip = match addr.ip() {
        std::net::IpAddr::V4(v) => IpAddress::V4(u32::from(v)),
        std::net::IpAddr::V6(v) => IpAddress::V6(v.octets()),
    };
    RequestStream {
        endpoint: Endpoint {
            addresses: NetworkAddressList {
                address: NetworkAddress {
                    ip,
                    port: addr.port(),
                    flags: 0,
                    from_hostname: false,
                },
                secondary_address: None,
            },
            token,
        },
    }
}

fn client_db_info(s: &Shared) -> ClientDBInfo {
    ClientDBInfo {
        grv_proxies: vec![GrvProxyInterface {
            process_id: Some(Bytes::from_static(b"mini")),
            provisional: false,
            get_consistent_read_version: endpoint(s.addr, s.grv_token),
        }],
        commit_proxies: vec![CommitProxyInterface {
            process_id: Some(Bytes::from_static(b"mini")),
            provisional: false,
            commit: endpoint(s.addr, s.commit_token),
        }],
        id: s.info_id,
        cluster_id: Uid::new(7, 7),
        ..Default::default()
    }
}

fn serve(s: Arc<Shared>, mut stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let mut decoder = FrameDecoder::new(true, true);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        decoder.feed(&buf[..n]);
        loop {
            let frame = match decoder.next_frame() {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(_) => return,
            };
            let mut out = BytesMut::new();
            match frame {
                Incoming::Connect(_) => {
                    let mut p = ConnectPacket::client(ProtocolVersion::V7_3);
                    p.protocol_version = s.protocol.load(Ordering::SeqCst);
                    p.canonical_remote_port = s.addr.port();
                    p.connection_id = 1;
                    if let std::net::IpAddr::V4(v) = s.addr.ip() {
                        p.canonical_remote_ip4 = u32::from(v);
                    }
                    p.encode(&mut out);
                }
                Incoming::Packet(pkt) => {
                    if s.silent.load(Ordering::SeqCst) {
                        continue;
                    }
                    let Ok(msg) = decode_any(&pkt.message) else {
                        continue;
                    };
                    let reply = match msg {
                        AnyMessage::OpenDatabaseCoordRequest(r) => {
                            if r.known_client_info_id == s.info_id {
                                continue; // nothing changed: hold the long poll
                            }
                            Some((
                                r.reply.token,
                                encode_reply(&ErrorOr::Ok(client_db_info(&s))),
                            ))
                        }
                        AnyMessage::GetReadVersionRequest(r) if pkt.token == s.grv_token => {
                            s.grv_requests.fetch_add(1, Ordering::SeqCst);
                            let version = 1_000_000 + s.started.elapsed().as_micros() as i64;
                            let rep = GetReadVersionReply {
                                version,
                                ss_version_vector_delta: VersionVector::empty(-1),
                                proxy_id: s.grv_token,
                                ..Default::default()
                            };
                            Some((r.reply.token, encode_reply(&ErrorOr::Ok(rep))))
                        }
                        AnyMessage::GlobalConfigRefreshRequest(r) => {
                            let rep = GlobalConfigRefreshReply {
                                version: 0,
                                ..Default::default()
                            };
                            Some((r.reply.token, encode_reply(&ErrorOr::Ok(rep))))
                        }
                        AnyMessage::PingRequest(r) => {
                            Some((r.reply.token, encode_reply(&ErrorOr::Ok(Void {}))))
                        }
                        _ => None,
                    };
                    if let Some((token, body)) = reply {
                        encode_packet(&mut out, token, &body, true);
                    }
                }
            }
            if !out.is_empty() && stream.write_all(&out).is_err() {
                return;
            }
        }
    }
}

/// Waits up to `limit` for `f` to hold, polling.
pub fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        thread::sleep(Duration::from_millis(5));
    }
    f()
}
