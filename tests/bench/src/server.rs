//! The servers the benchmark talks to, hosted in a child process (`fdb-bench __serve`) so
//! that their CPU time and allocations are not counted against the client under test:
//!
//! * the in-process test cluster (unless `--cluster-file` names a real one);
//! * the `floor` echo server: a raw TCP ping-pong. A request starts with two little-endian
//!   `u32`s, its own length and the reply length wanted; the server reads the whole request
//!   and answers with that many bytes.
//!
//! The child stops when its standard input closes (the parent exiting, or dropping
//! [`Servers`]). While it runs, a `COUNTS` line on its standard input makes it answer with the
//! in-process cluster's request counters (`COUNTS {"GetReadVersion":12,...}`): the wire check
//! of every arm, libfdb_c included ([`RequestProbe`]).

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The in-process cluster the child hosts: `fdb_tests::cluster::TestCluster` with its
/// defaults (one coordinator, GRV and commit proxies, three storage servers).
struct Cluster {
    inner: fdb_tests::cluster::TestCluster,
}

impl Cluster {
    fn start() -> Cluster {
        Cluster {
            inner: fdb_tests::cluster::TestCluster::start(),
        }
    }
    fn cluster_string(&self) -> String {
        self.inner.cluster_file_string()
    }
    /// Whether it stores data (the older `testkit::MiniCluster` served only read versions).
    fn serves_data(&self) -> bool {
        true
    }
    /// Requests served so far, by kind (`RequestKind`'s names), as one JSON object.
    fn counts_json(&self) -> String {
        let counts: serde_json::Map<String, serde_json::Value> = self
            .inner
            .request_counts()
            .into_iter()
            .map(|(k, n)| (format!("{k:?}"), n.into()))
            .collect();
        serde_json::Value::Object(counts).to_string()
    }
}

/// Entry point of `fdb-bench __serve [--cluster]`.
pub fn serve_main(args: &[String]) -> ! {
    let with_cluster = args.iter().any(|a| a == "--cluster");
    let floor = start_floor_server().unwrap_or_else(|e| {
        eprintln!("fdb-bench serve: floor server: {e}");
        std::process::exit(1)
    });
    let cluster = with_cluster.then(Cluster::start);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "FLOOR {floor}");
    if let Some(c) = &cluster {
        let _ = writeln!(out, "CLUSTER {}", c.cluster_string());
        let _ = writeln!(out, "DATA {}", c.serves_data());
    }
    let _ = writeln!(out, "READY");
    let _ = out.flush();
    drop(out);
    // Serve until the parent goes away, answering its counter queries.
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if line.trim() == "COUNTS" {
            let json = cluster
                .as_ref()
                .map_or("{}".to_string(), Cluster::counts_json);
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "COUNTS {json}");
            let _ = out.flush();
        }
    }
    drop(cluster);
    std::process::exit(0)
}

fn start_floor_server() -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    listener.set_nonblocking(true)?;
    std::thread::Builder::new()
        .name("floor-server".into())
        .spawn(move || {
            if let Err(e) = floor_loop(mio::net::TcpListener::from_std(listener)) {
                eprintln!("fdb-bench serve: floor server stopped: {e}");
            }
        })?;
    Ok(addr)
}

/// One connection of the floor server.
struct FloorPeer {
    stream: mio::net::TcpStream,
    head: [u8; 8],
    head_got: usize,
    /// Request bytes still to skip after the header.
    body_left: usize,
    /// Reply bytes still to send.
    out_left: usize,
}

impl FloorPeer {
    /// Reads what is there, answers every complete request. `Err` closes the connection.
    fn serve(&mut self, buf: &mut [u8], zeros: &[u8]) -> std::io::Result<()> {
        use std::io::ErrorKind::{Interrupted, WouldBlock};
        loop {
            while self.out_left > 0 {
                let n = self.out_left.min(zeros.len());
                match self.stream.write(&zeros[..n]) {
                    Ok(0) => return Err(ErrorKind::WriteZero.into()),
                    Ok(n) => self.out_left -= n,
                    Err(e) if e.kind() == WouldBlock => return Ok(()),
                    Err(e) if e.kind() == Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            let n = match self.stream.read(buf) {
                Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
                Ok(n) => n,
                Err(e) if e.kind() == WouldBlock => return Ok(()),
                Err(e) if e.kind() == Interrupted => continue,
                Err(e) => return Err(e),
            };
            let mut data = &buf[..n];
            while !data.is_empty() {
                if self.head_got < 8 {
                    let k = (8 - self.head_got).min(data.len());
                    self.head[self.head_got..self.head_got + k].copy_from_slice(&data[..k]);
                    self.head_got += k;
                    data = &data[k..];
                    if self.head_got == 8 {
                        let len = u32::from_le_bytes(self.head[..4].try_into().unwrap());
                        self.body_left = (len as usize).saturating_sub(8);
                    }
                } else {
                    let k = self.body_left.min(data.len());
                    self.body_left -= k;
                    data = &data[k..];
                }
                if self.head_got == 8 && self.body_left == 0 {
                    let reply = u32::from_le_bytes(self.head[4..].try_into().unwrap());
                    self.out_left += reply as usize;
                    self.head_got = 0;
                }
            }
        }
    }
}

/// The floor server: one thread, one epoll loop over every connection.
fn floor_loop(mut listener: mio::net::TcpListener) -> std::io::Result<()> {
    use mio::{Events, Interest, Poll, Token};
    const LISTENER: Token = Token(usize::MAX);
    let mut poll = Poll::new()?;
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    let mut peers: HashMap<usize, FloorPeer> = HashMap::new();
    let mut next = 0usize;
    let mut events = Events::with_capacity(1024);
    let mut buf = vec![0u8; 256 * 1024];
    let zeros = vec![0u8; 256 * 1024];
    loop {
        match poll.poll(&mut events, None) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        for ev in events.iter() {
            if ev.token() == LISTENER {
                loop {
                    match listener.accept() {
                        Ok((mut stream, _)) => {
                            let _ = stream.set_nodelay(true);
                            let t = Token(next);
                            poll.registry().register(
                                &mut stream,
                                t,
                                Interest::READABLE | Interest::WRITABLE,
                            )?;
                            peers.insert(
                                next,
                                FloorPeer {
                                    stream,
                                    head: [0; 8],
                                    head_got: 0,
                                    body_left: 0,
                                    out_left: 0,
                                },
                            );
                            next += 1;
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == ErrorKind::Interrupted => {}
                        Err(_) => break,
                    }
                }
                continue;
            }
            let id = ev.token().0;
            let failed = match peers.get_mut(&id) {
                Some(p) => p.serve(&mut buf, &zeros).is_err(),
                None => false,
            };
            if failed {
                if let Some(mut p) = peers.remove(&id) {
                    let _ = poll.registry().deregister(&mut p.stream);
                }
            }
        }
    }
}

/// The parent's line to the server child; dropping its pipes stops the child.
struct ServerIo {
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

/// Reads the in-process cluster's request counters (by kind) from the server child. Each
/// read is a round trip over a pipe; the harness reads before and after a measured window.
pub struct RequestProbe {
    io: Arc<Mutex<Option<ServerIo>>>,
}

impl RequestProbe {
    /// Requests served so far, by kind; `None` if the child is gone or answers nonsense.
    pub fn read(&self) -> Option<BTreeMap<String, u64>> {
        let mut guard = self.io.lock().ok()?;
        let io = guard.as_mut()?;
        io.stdin.write_all(b"COUNTS\n").ok()?;
        io.stdin.flush().ok()?;
        let mut line = String::new();
        loop {
            line.clear();
            if io.stdout.read_line(&mut line).ok()? == 0 {
                return None;
            }
            if let Some(json) = line.trim().strip_prefix("COUNTS ") {
                let v: serde_json::Value = serde_json::from_str(json).ok()?;
                return v
                    .as_object()?
                    .iter()
                    .map(|(k, n)| Some((k.clone(), n.as_u64()?)))
                    .collect();
            }
        }
    }
}

/// The parent's handle on the server child.
pub struct Servers {
    child: Child,
    io: Arc<Mutex<Option<ServerIo>>>,
    pub floor: SocketAddr,
    /// The in-process cluster's connection string, when it was asked for.
    pub cluster: Option<String>,
    pub cluster_serves_data: bool,
}

impl Servers {
    pub fn spawn(with_cluster: bool) -> Result<Servers, String> {
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let mut cmd = Command::new(exe);
        cmd.arg("__serve");
        if with_cluster {
            cmd.arg("--cluster");
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("starting the server process: {e}"))?;
        let stdin = child.stdin.take().expect("piped stdin");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut floor = None;
        let mut cluster = None;
        let mut data = false;
        let mut line = String::new();
        loop {
            line.clear();
            let n = stdout
                .read_line(&mut line)
                .map_err(|e| format!("reading the server process: {e}"))?;
            if n == 0 {
                break;
            }
            let line = line.trim_end();
            if let Some(a) = line.strip_prefix("FLOOR ") {
                floor = Some(a.parse().map_err(|e| format!("floor address {a}: {e}"))?);
            } else if let Some(c) = line.strip_prefix("CLUSTER ") {
                cluster = Some(c.to_string());
            } else if let Some(d) = line.strip_prefix("DATA ") {
                data = d == "true";
            } else if line == "READY" {
                break;
            }
        }
        let floor = floor.ok_or("the server process did not start")?;
        Ok(Servers {
            child,
            io: Arc::new(Mutex::new(Some(ServerIo { stdin, stdout }))),
            floor,
            cluster,
            cluster_serves_data: data,
        })
    }
}

impl Servers {
    /// The child's process id: its CPU time is the in-process cluster's (and the floor's).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The in-process cluster's request counters, when the child hosts it.
    pub fn request_probe(&self) -> Option<Arc<RequestProbe>> {
        self.cluster.as_ref().map(|_| {
            Arc::new(RequestProbe {
                io: self.io.clone(),
            })
        })
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        if let Ok(mut io) = self.io.lock() {
            io.take();
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
