//! The wire work of a measured window as the cluster receives it, the same for every arm
//! (libfdb_c's sockets and threads live in this process too):
//!
//! * per connection to the cluster, from the kernel's `TCP_INFO` of every socket of this
//!   process whose peer is a port a cluster process listens on: data segments and bytes each
//!   way (on loopback with `TCP_NODELAY` a segment is one arrival at the other end, so the
//!   client's segments are the server's packets), and how many such connections there are;
//! * per thread, from perf tracepoint counters on the `sys_enter_*` syscall tracepoints:
//!   the socket sends (`sendto`, `sendmsg`, `writev`) and receives (`recvfrom`, `recvmsg`)
//!   and the `epoll_wait`s of the cluster's processes and of this one. fdbserver reads a
//!   socket until it would block after each readiness and waits in `epoll_wait` between run
//!   loop turns, so its receive calls per transaction say how many separate arrivals it
//!   served, and its waits how many turns. (`/proc/PID/io` would not do: it counts
//!   `read`/`write`, and neither side moves socket data with those.)
//!
//! Linux only, and the counters need `perf_event_open` on the cluster's threads (root, or
//! `perf_event_paranoid` ≤ 1 and the same user) and tracefs (`/sys/kernel/tracing`, which
//! `perf` mounts); without them only the `TCP_INFO` part is reported.

use std::collections::{BTreeSet, HashMap};
use std::os::fd::RawFd;

/// Which side a thread belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Server,
    Client,
}

/// What a counted syscall does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Send,
    Recv,
    Epoll,
}

const SYSCALLS: [(&str, Kind); 7] = [
    ("sendto", Kind::Send),
    ("sendmsg", Kind::Send),
    ("writev", Kind::Send),
    ("recvfrom", Kind::Recv),
    ("recvmsg", Kind::Recv),
    ("epoll_wait", Kind::Epoll),
    ("epoll_pwait", Kind::Epoll),
];

/// Reads the wire counters around a window.
#[derive(Clone, Debug)]
pub struct WireProbe {
    server_pids: Vec<u32>,
    /// The ports the cluster's processes listen on.
    ports: BTreeSet<u16>,
    /// Tracepoint id of each of [`SYSCALLS`]; empty when tracefs can't be read.
    tracepoints: Vec<(u64, Kind)>,
}

/// One socket's counters (`TCP_INFO`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct TcpCounts {
    data_segs_out: u64,
    data_segs_in: u64,
    bytes_sent: u64,
    bytes_received: u64,
}

/// The start of a window: every cluster socket's counters, and the open syscall counters.
/// Each socket is held by a duplicate descriptor of its own until the window closes, so
/// that one the client closes at the very end of the window (a database dropped as its
/// workers finish) is still read.
pub struct WireMark {
    sockets: HashMap<(u16, u16), (RawFd, TcpCounts)>,
    counters: Vec<(Side, Kind, RawFd)>,
}

/// What crossed the wire in a window (sums, so runs pool by adding).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WireSpent {
    /// Connections to the cluster that carried data in the window (summed over pooled runs,
    /// with `windows` to average them; an idle one, a database of an earlier run not yet
    /// closed, say, is left out).
    pub conns: u64,
    pub windows: u64,
    /// Client → server data segments and bytes; server → client.
    pub c2s_segs: u64,
    pub c2s_bytes: u64,
    pub s2c_segs: u64,
    pub s2c_bytes: u64,
    /// Syscalls, where counted: this process's socket sends and receives and epoll waits,
    /// the cluster's.
    pub syscalls: Option<Syscalls>,
}

/// Syscall counts of a window.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Syscalls {
    pub client_sends: u64,
    pub client_recvs: u64,
    pub client_epolls: u64,
    pub server_sends: u64,
    pub server_recvs: u64,
    pub server_epolls: u64,
}

impl Syscalls {
    fn add(&mut self, o: &Syscalls) {
        self.client_sends += o.client_sends;
        self.client_recvs += o.client_recvs;
        self.client_epolls += o.client_epolls;
        self.server_sends += o.server_sends;
        self.server_recvs += o.server_recvs;
        self.server_epolls += o.server_epolls;
    }
}

impl WireSpent {
    pub fn add(&mut self, o: &WireSpent) {
        self.conns += o.conns;
        self.windows += o.windows;
        self.c2s_segs += o.c2s_segs;
        self.c2s_bytes += o.c2s_bytes;
        self.s2c_segs += o.s2c_segs;
        self.s2c_bytes += o.s2c_bytes;
        // Counted in every window pooled, or not at all.
        match (&mut self.syscalls, &o.syscalls) {
            (Some(a), Some(b)) => a.add(b),
            (a, _) => *a = None,
        }
    }

    /// Per transaction (and connections per window).
    pub fn per_txn(&self, txns: u64) -> WirePerTxn {
        let n = txns.max(1) as f64;
        let per = |v: u64| v as f64 / n;
        WirePerTxn {
            conns: self.conns as f64 / self.windows.max(1) as f64,
            c2s_segs: per(self.c2s_segs),
            c2s_bytes: per(self.c2s_bytes),
            s2c_segs: per(self.s2c_segs),
            s2c_bytes: per(self.s2c_bytes),
            client_sends: self.syscalls.map(|s| per(s.client_sends)),
            client_recvs: self.syscalls.map(|s| per(s.client_recvs)),
            client_epolls: self.syscalls.map(|s| per(s.client_epolls)),
            server_sends: self.syscalls.map(|s| per(s.server_sends)),
            server_recvs: self.syscalls.map(|s| per(s.server_recvs)),
            server_epolls: self.syscalls.map(|s| per(s.server_epolls)),
        }
    }
}

/// [`WireSpent`] per transaction.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WirePerTxn {
    pub conns: f64,
    pub c2s_segs: f64,
    pub c2s_bytes: f64,
    pub s2c_segs: f64,
    pub s2c_bytes: f64,
    pub client_sends: Option<f64>,
    pub client_recvs: Option<f64>,
    pub client_epolls: Option<f64>,
    pub server_sends: Option<f64>,
    pub server_recvs: Option<f64>,
    pub server_epolls: Option<f64>,
}

impl WireProbe {
    /// The probe of the cluster whose processes are `server_pids`, leaving out a port they
    /// listen on that is not the cluster's (the floor's, in the in-process cluster's child).
    pub fn new(server_pids: &[u32], not_port: Option<u16>) -> Option<WireProbe> {
        let mut ports = listening_ports(server_pids);
        if let Some(p) = not_port {
            ports.remove(&p);
        }
        if ports.is_empty() {
            return None;
        }
        let tracepoints = SYSCALLS
            .iter()
            .filter_map(|(name, kind)| Some((tracepoint_id(name)?, *kind)))
            .collect::<Vec<_>>();
        let tracepoints = if tracepoints.len() == SYSCALLS.len() {
            tracepoints
        } else {
            Vec::new()
        };
        Some(WireProbe {
            server_pids: server_pids.to_vec(),
            ports,
            tracepoints,
        })
    }

    /// Opens the window: reads the sockets, opens a counter per thread and syscall.
    pub fn start(&self) -> WireMark {
        let mut counters = Vec::new();
        if !self.tracepoints.is_empty() {
            let me = std::process::id();
            let groups = self
                .server_pids
                .iter()
                .map(|&p| (Side::Server, p))
                .chain([(Side::Client, me)]);
            'open: for (side, pid) in groups {
                for tid in threads(pid) {
                    for &(id, kind) in &self.tracepoints {
                        match open_counter(id, tid) {
                            Some(fd) => counters.push((side, kind, fd)),
                            None => {
                                // No permission (or no such thread any more): a thread of
                                // the cluster left out would understate it, so count none.
                                if side == Side::Server {
                                    close_all(&mut counters);
                                    break 'open;
                                }
                            }
                        }
                    }
                }
            }
        }
        let mut sockets = self.sockets();
        sockets.retain(|_, (fd, _)| {
            // SAFETY: duplicates a descriptor this process has open; closed in `end`.
            *fd = unsafe { libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, 0) };
            *fd >= 0
        });
        WireMark { sockets, counters }
    }

    /// Closes the window opened by `start`.
    pub fn end(&self, mut start: WireMark) -> WireSpent {
        let mut spent = WireSpent {
            windows: 1,
            ..WireSpent::default()
        };
        if !start.counters.is_empty() {
            let mut s = Syscalls::default();
            for &(side, kind, fd) in &start.counters {
                let n = read_counter(fd);
                let slot = match (side, kind) {
                    (Side::Client, Kind::Send) => &mut s.client_sends,
                    (Side::Client, Kind::Recv) => &mut s.client_recvs,
                    (Side::Client, Kind::Epoll) => &mut s.client_epolls,
                    (Side::Server, Kind::Send) => &mut s.server_sends,
                    (Side::Server, Kind::Recv) => &mut s.server_recvs,
                    (Side::Server, Kind::Epoll) => &mut s.server_epolls,
                };
                *slot += n;
            }
            close_all(&mut start.counters);
            spent.syscalls = Some(s);
        }
        // Those opened in the window (the scan also finds the duplicates held), then those
        // held since the start.
        let mut now: Vec<(TcpCounts, TcpCounts)> = self
            .sockets()
            .into_iter()
            .filter(|(k, _)| !start.sockets.contains_key(k))
            .map(|(_, (_, e))| (TcpCounts::default(), e))
            .collect();
        for (_, (fd, b)) in start.sockets.drain() {
            if let Some(e) = tcp_counts(fd) {
                now.push((b, e));
            }
            // SAFETY: the duplicate made in `start`, closed once.
            unsafe { libc::close(fd) };
        }
        for (b, e) in &now {
            if e.data_segs_out > b.data_segs_out || e.data_segs_in > b.data_segs_in {
                spent.conns += 1;
            }
            spent.c2s_segs += e.data_segs_out.saturating_sub(b.data_segs_out);
            spent.s2c_segs += e.data_segs_in.saturating_sub(b.data_segs_in);
            spent.c2s_bytes += e.bytes_sent.saturating_sub(b.bytes_sent);
            spent.s2c_bytes += e.bytes_received.saturating_sub(b.bytes_received);
        }
        spent
    }

    /// Every socket of this process connected to a cluster port, by (local port, peer port),
    /// with its descriptor.
    fn sockets(&self) -> HashMap<(u16, u16), (RawFd, TcpCounts)> {
        let mut out = HashMap::new();
        let Ok(fds) = std::fs::read_dir("/proc/self/fd") else {
            return out;
        };
        for e in fds.flatten() {
            let Some(fd) = e.file_name().to_str().and_then(|s| s.parse::<RawFd>().ok()) else {
                continue;
            };
            let is_socket = std::fs::read_link(e.path())
                .is_ok_and(|l| l.to_string_lossy().starts_with("socket:"));
            if !is_socket {
                continue;
            }
            let Some((local, peer)) = tcp_ports(fd) else {
                continue;
            };
            if !self.ports.contains(&peer) {
                continue;
            }
            if let Some(c) = tcp_counts(fd) {
                out.insert((local, peer), (fd, c));
            }
        }
        out
    }
}

/// The TCP ports the processes listen on (from `/proc/net/tcp`, matched by socket inode).
fn listening_ports(pids: &[u32]) -> BTreeSet<u16> {
    let mut inodes = BTreeSet::new();
    for pid in pids {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for e in fds.flatten() {
            if let Ok(l) = std::fs::read_link(e.path()) {
                let l = l.to_string_lossy();
                if let Some(i) = l
                    .strip_prefix("socket:[")
                    .and_then(|s| s.strip_suffix(']'))
                    .and_then(|s| s.parse::<u64>().ok())
                {
                    inodes.insert(i);
                }
            }
        }
    }
    let mut ports = BTreeSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
            if f.len() < 10 || f[3] != "0A" {
                continue;
            }
            let Ok(inode) = f[9].parse::<u64>() else {
                continue;
            };
            if !inodes.contains(&inode) {
                continue;
            }
            if let Some(port) = f[1]
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok())
            {
                ports.insert(port);
            }
        }
    }
    ports
}

fn threads(pid: u32) -> Vec<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
                .collect()
        })
        .unwrap_or_default()
}

fn tracepoint_id(syscall: &str) -> Option<u64> {
    ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .find_map(|root| {
            std::fs::read_to_string(format!("{root}/events/syscalls/sys_enter_{syscall}/id"))
                .ok()?
                .trim()
                .parse()
                .ok()
        })
}

/// `perf_event_attr` up to `PERF_ATTR_SIZE_VER0` (64 bytes): all the counter needs.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

const PERF_TYPE_TRACEPOINT: u32 = 2;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;

/// A counting (not sampling) counter of tracepoint `id` on thread `tid`, enabled now.
fn open_counter(id: u64, tid: u32) -> Option<RawFd> {
    let attr = PerfEventAttr {
        kind: PERF_TYPE_TRACEPOINT,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: id,
        ..PerfEventAttr::default()
    };
    // SAFETY: `attr` is a valid `perf_event_attr` of the size it states, alive for the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const PerfEventAttr,
            tid as libc::pid_t,
            -1 as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    (fd >= 0).then_some(fd as RawFd)
}

fn read_counter(fd: RawFd) -> u64 {
    let mut v = 0u64;
    // SAFETY: reads 8 bytes into `v`, which is 8 bytes.
    let n = unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
    if n == 8 {
        v
    } else {
        0
    }
}

fn close_all(counters: &mut Vec<(Side, Kind, RawFd)>) {
    for (_, _, fd) in counters.drain(..) {
        // SAFETY: `fd` was opened by `open_counter` and is closed once.
        unsafe { libc::close(fd) };
    }
}

/// The local and peer ports of an IPv4 or IPv6 TCP socket, `None` for anything else.
fn tcp_ports(fd: RawFd) -> Option<(u16, u16)> {
    let port = |f: unsafe extern "C" fn(
        libc::c_int,
        *mut libc::sockaddr,
        *mut libc::socklen_t,
    ) -> libc::c_int| {
        // SAFETY: `sockaddr_storage` is large enough for any address; `len` says so.
        let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // SAFETY: valid pointers to the storage and its length.
        if unsafe {
            f(
                fd,
                (&mut ss as *mut libc::sockaddr_storage).cast(),
                &mut len,
            )
        } != 0
        {
            return None;
        }
        match ss.ss_family as libc::c_int {
            libc::AF_INET => {
                // SAFETY: the family says the storage holds a `sockaddr_in`.
                let a: &libc::sockaddr_in =
                    unsafe { &*(&ss as *const libc::sockaddr_storage).cast() };
                Some(u16::from_be(a.sin_port))
            }
            libc::AF_INET6 => {
                // SAFETY: the family says the storage holds a `sockaddr_in6`.
                let a: &libc::sockaddr_in6 =
                    unsafe { &*(&ss as *const libc::sockaddr_storage).cast() };
                Some(u16::from_be(a.sin6_port))
            }
            _ => None,
        }
    };
    Some((port(libc::getsockname)?, port(libc::getpeername)?))
}

/// The counters of `TCP_INFO` (`struct tcp_info` in `linux/tcp.h`; offsets of the fields
/// read: `tcpi_bytes_received` 128, `tcpi_data_segs_in` 152, `tcpi_data_segs_out` 156,
/// `tcpi_bytes_sent` 200, from Linux 4.19).
fn tcp_counts(fd: RawFd) -> Option<TcpCounts> {
    let mut buf = [0u8; 256];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: `buf` holds `len` bytes.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if r != 0 || (len as usize) < 208 {
        return None;
    }
    let u32_at = |o: usize| u32::from_ne_bytes(buf[o..o + 4].try_into().unwrap()) as u64;
    let u64_at = |o: usize| u64::from_ne_bytes(buf[o..o + 8].try_into().unwrap());
    Some(TcpCounts {
        bytes_received: u64_at(128),
        data_segs_in: u32_at(152),
        data_segs_out: u32_at(156),
        bytes_sent: u64_at(200),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn counts_a_loopback_exchange() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let probe = WireProbe::new(&[std::process::id()], None).expect("own listening port");
        assert!(probe.ports.contains(&port));
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.set_nodelay(true).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let mark = probe.start();
        let mut buf = [0u8; 64];
        for _ in 0..3 {
            c.write_all(&[1u8; 10]).unwrap();
            s.read_exact(&mut buf[..10]).unwrap();
            s.write_all(&[2u8; 20]).unwrap();
            c.read_exact(&mut buf[..20]).unwrap();
        }
        let spent = probe.end(mark);
        // The accepted end's peer port is the client's, not a listening one: only the
        // client socket counts.
        assert_eq!(spent.conns, 1);
        assert_eq!((spent.c2s_segs, spent.c2s_bytes), (3, 30));
        assert_eq!((spent.s2c_segs, spent.s2c_bytes), (3, 60));
        if let Some(sc) = spent.syscalls {
            // Both ends are this process: 3 sends each way at least.
            assert!(sc.client_sends >= 6, "{sc:?}");
        }
    }
}
