//! The cluster's own CPU time, read from `/proc` around each measured window. It is what
//! separates the server's share of a transaction's latency from the client's: when fdbserver's
//! busiest thread is already on a core for most of the window, no client can be much faster
//! on the same cluster, whatever it spends itself (see "Why cells miss" in the report).
//!
//! Per thread, from `/proc/PID/task/TID/schedstat`: time on a CPU in nanoseconds (unlike
//! `stat`'s 10 ms ticks), and how many times the thread was put on a CPU. fdbserver's network
//! thread sleeps in `epoll_wait` between turns of its run loop, so the busiest thread's count
//! is about the loop's turns: how spread over time the client's requests arrive, which
//! decides much of what the server spends on them. Linux only; elsewhere, or without
//! permission, there is no probe.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One look while waiting for the server to go quiet.
const LOOK: Duration = Duration::from_millis(50);

/// The server processes whose threads are read.
#[derive(Clone, Debug)]
pub struct ServerCpu {
    pids: Vec<u32>,
}

/// One thread's counters so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadTime {
    /// Nanoseconds on a CPU.
    pub ns: u64,
    /// Times it was put on a CPU.
    pub runs: u64,
}

/// Every thread's counters so far, per `(pid, tid)`.
pub type ThreadTimes = BTreeMap<(u32, u32), ThreadTime>;

impl ServerCpu {
    /// The process with this pid (the child that hosts the in-process test cluster).
    pub fn for_pid(pid: u32) -> Option<ServerCpu> {
        let s = ServerCpu { pids: vec![pid] };
        (!s.read().is_empty()).then_some(s)
    }

    /// Every `fdbserver` on this machine started with `-C` naming this cluster file (how
    /// `cluster.sh` starts them); none when the cluster runs elsewhere.
    pub fn for_cluster_file(path: &Path) -> Option<ServerCpu> {
        let want = std::fs::canonicalize(path).ok()?;
        let mut pids = Vec::new();
        for e in std::fs::read_dir("/proc").ok()?.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
                continue;
            };
            let args: Vec<&[u8]> = cmd.split(|&b| b == 0).collect();
            let is_server = args.first().is_some_and(|a| a.ends_with(b"fdbserver"));
            if is_server && names_cluster_file(&args, &want) {
                pids.push(pid);
            }
        }
        (!pids.is_empty()).then_some(ServerCpu { pids })
    }

    /// The server processes' ids.
    pub fn pids(&self) -> &[u32] {
        &self.pids
    }

    /// How many server processes are read.
    pub fn processes(&self) -> usize {
        self.pids.len()
    }

    /// Every thread's CPU time now. A process or thread that is gone is left out.
    pub fn read(&self) -> ThreadTimes {
        let mut out = ThreadTimes::new();
        for &pid in &self.pids {
            let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
                continue;
            };
            for t in tasks.flatten() {
                let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                    continue;
                };
                if let Some(time) = std::fs::read_to_string(t.path().join("schedstat"))
                    .ok()
                    .and_then(|s| parse_schedstat(&s))
                {
                    out.insert((pid, tid), time);
                }
            }
        }
        out
    }
}

impl ServerCpu {
    /// Waits, at most `max`, until the server's busiest thread was on a CPU for under a tenth
    /// of a 50 ms look, and returns what the server spent in the looks before that quiet one.
    /// After a write-heavy run the memory engine and data distribution keep a single
    /// process busy for up to a second; without this that work lands in whichever runs come
    /// next, another arm's as often as not (a read-version run of 5 ms then cost 30 times its
    /// neighbours). Called after each run, so the work is the run's that caused it.
    pub fn settle(&self, max: Duration) -> ServerSpent {
        let start = Instant::now();
        let mut spent = ServerSpent::default();
        let mut before = self.read();
        loop {
            std::thread::sleep(LOOK);
            let now = self.read();
            let look = ServerSpent::between(&before, &now);
            if look.busiest_ns < LOOK.as_nanos() as u64 / 10 {
                return spent;
            }
            spent.add(look);
            if start.elapsed() >= max {
                return spent;
            }
            before = now;
        }
    }
}

/// Whether the arguments hold `-C F` / `--cluster-file F` / `--cluster_file F` (or `=F`)
/// with F the same file as `want`.
fn names_cluster_file(args: &[&[u8]], want: &PathBuf) -> bool {
    let same = |p: &[u8]| {
        std::str::from_utf8(p)
            .ok()
            .and_then(|p| std::fs::canonicalize(p).ok())
            .is_some_and(|p| &p == want)
    };
    args.iter().enumerate().any(|(i, a)| {
        let flag = |f: &[u8]| a == &f;
        if flag(b"-C") || flag(b"--cluster-file") || flag(b"--cluster_file") {
            return args.get(i + 1).is_some_and(|p| same(p));
        }
        [&b"--cluster-file="[..], b"--cluster_file="]
            .iter()
            .any(|f| a.strip_prefix(*f).is_some_and(same))
    })
}

/// A `schedstat` line: nanoseconds spent on a CPU, nanoseconds waiting for one, and the
/// number of times put on one.
fn parse_schedstat(s: &str) -> Option<ThreadTime> {
    let mut f = s.split_whitespace();
    let ns = f.next()?.parse().ok()?;
    let runs = f.nth(1)?.parse().ok()?;
    Some(ThreadTime { ns, runs })
}

/// What the server spent between two readings: in all, and on its busiest thread (fdbserver
/// does its work on one network thread, so that thread's time is the serial part that bounds
/// throughput).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ServerSpent {
    pub total_ns: u64,
    pub busiest_ns: u64,
    /// Times the busiest thread was put on a CPU: about its run loop's turns.
    pub busiest_runs: u64,
}

impl ServerSpent {
    pub fn between(start: &ThreadTimes, end: &ThreadTimes) -> ServerSpent {
        let mut s = ServerSpent::default();
        for (k, e) in end {
            let b = start.get(k).copied().unwrap_or_default();
            let d = e.ns.saturating_sub(b.ns);
            s.total_ns += d;
            if d > s.busiest_ns {
                s.busiest_ns = d;
                s.busiest_runs = e.runs.saturating_sub(b.runs);
            }
        }
        s
    }

    pub fn add(&mut self, o: ServerSpent) {
        self.total_ns += o.total_ns;
        self.busiest_ns += o.busiest_ns;
        self.busiest_runs += o.busiest_runs;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_gives_nanoseconds_and_runs() {
        assert_eq!(
            parse_schedstat("123456789 2000 17\n"),
            Some(ThreadTime {
                ns: 123456789,
                runs: 17
            })
        );
        assert_eq!(parse_schedstat(""), None);
        assert_eq!(parse_schedstat("x 1 2"), None);
        assert_eq!(parse_schedstat("1 2"), None);
    }

    #[test]
    fn settle_waits_out_a_busy_thread_and_counts_its_work() {
        let Some(me) = ServerCpu::for_pid(std::process::id()) else {
            eprintln!("no /proc schedstat here: nothing to read");
            return;
        };
        let spinner = std::thread::spawn(|| {
            let until = Instant::now() + Duration::from_millis(300);
            let mut x = 0u64;
            while Instant::now() < until {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        });
        let spent = me.settle(Duration::from_secs(10));
        assert!(
            spinner.is_finished(),
            "settle returned while the thread still ran"
        );
        assert!(spent.total_ns >= 50_000_000, "{spent:?}");
        spinner.join().unwrap();
    }

    #[test]
    fn spent_counts_new_threads_and_takes_the_busiest() {
        let t = |ns, runs| ThreadTime { ns, runs };
        let start: ThreadTimes = [((1, 1), t(100, 5)), ((1, 2), t(50, 1))].into();
        let end: ThreadTimes =
            [((1, 1), t(400, 9)), ((1, 2), t(60, 30)), ((1, 3), t(20, 2))].into();
        assert_eq!(
            ServerSpent::between(&start, &end),
            ServerSpent {
                total_ns: 300 + 10 + 20,
                busiest_ns: 300,
                busiest_runs: 4,
            }
        );
    }

    #[test]
    fn finds_a_process_by_its_cluster_file_argument() {
        let dir = std::env::temp_dir().join(format!("server-cpu-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("fdb.cluster");
        std::fs::write(&f, "a:b@127.0.0.1:1\n").unwrap();
        let want = std::fs::canonicalize(&f).unwrap();
        let path = f.to_str().unwrap().as_bytes().to_vec();
        let eq = [b"--cluster_file=".to_vec(), path.clone()].concat();
        assert!(names_cluster_file(&[b"fdbserver", b"-C", &path], &want));
        assert!(names_cluster_file(&[b"fdbserver", &eq], &want));
        assert!(!names_cluster_file(
            &[b"fdbserver", b"-C", b"/nonexistent"],
            &want
        ));
        assert!(!names_cluster_file(&[b"fdbserver", &path], &want));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn this_process_is_readable_and_advances() {
        let me = ServerCpu::for_pid(std::process::id()).expect("own /proc entry");
        let a = me.read();
        // 20 ms on a CPU (by getrusage, whatever the load), then off it for a moment: a
        // running thread's time is brought up to date in schedstat when it is switched out
        // (or at a tick), not on every read.
        let cpu0 = crate::cpu::process_usage().cpu;
        let mut x = 0u64;
        while crate::cpu::process_usage().cpu - cpu0 < std::time::Duration::from_millis(20) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
        let b = me.read();
        assert!(ServerSpent::between(&a, &b).total_ns > 0);
    }
}
