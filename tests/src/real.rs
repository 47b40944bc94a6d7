//! A real FoundationDB 7.3.77 cluster of several `fdbserver` processes on loopback, started
//! by the team's `cluster.sh` in a fresh temporary directory, for tests that inject real
//! faults: kill, stop and continue processes, restart them, and drive `fdbcli` (status,
//! coordinators, exclude, include).
//!
//! [`RealCluster`] stops its processes and removes its directory when dropped, also while a
//! test unwinds from a panic. Signals go through `kill(1)` (no libc dependency); process
//! states are read from `/proc` (`cluster.sh` is Linux-only anyway).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Where `cluster.sh` is, and whether a test may skip when it cannot use it.
#[derive(Clone, Debug)]
pub struct ClusterScript {
    pub path: PathBuf,
    /// `FDB_SHARED_DIR` named it: CI expects a real cluster, so failing to start one fails.
    pub required: bool,
}

impl ClusterScript {
    /// The versions whose fdbserver tarball sits beside the script (`cluster.sh versions`).
    pub fn versions(&self) -> Vec<String> {
        match run_bounded(
            Command::new(&self.path).arg("versions"),
            Duration::from_secs(30),
        ) {
            Ok(out) if out.ok => out.stdout.lines().map(|l| l.trim().to_string()).collect(),
            _ => Vec::new(),
        }
    }

    /// `$FDB_SHARED_DIR/cluster.sh` when `FDB_SHARED_DIR` is set (an error if it has none:
    /// CI must not skip silently), else `../shared/fdb/cluster.sh` beside the project, else
    /// `Ok(None)`.
    pub fn find() -> Result<Option<ClusterScript>, String> {
        if let Some(dir) = std::env::var_os("FDB_SHARED_DIR").filter(|d| !d.is_empty()) {
            let path = PathBuf::from(dir).join("cluster.sh");
            return if path.is_file() {
                Ok(Some(ClusterScript {
                    path,
                    required: true,
                }))
            } else {
                Err(format!(
                    "FDB_SHARED_DIR is set but {} is missing",
                    path.display()
                ))
            };
        }
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fdb/cluster.sh");
        Ok(path.is_file().then_some(ClusterScript {
            path,
            required: false,
        }))
    }
}

/// One `fdbserver` process, as `cluster.sh procs` lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Proc {
    pub pid: u32,
    pub port: u16,
}

/// The signals the fault tests send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// SIGKILL: the process dies without a word (its sockets are reset by the kernel).
    Kill,
    /// SIGSTOP: the process freezes; its sockets stay open and unanswered.
    Stop,
    /// SIGCONT.
    Cont,
}

impl Signal {
    fn flag(self) -> &'static str {
        match self {
            Signal::Kill => "-KILL",
            Signal::Stop => "-STOP",
            Signal::Cont => "-CONT",
        }
    }
}

/// A running cluster. Dropping it stops every process and removes its directory.
pub struct RealCluster {
    script: PathBuf,
    dir: PathBuf,
}

impl RealCluster {
    /// Starts `processes` fdbserver processes with `engine` (`memory` or `ssd`) in a fresh
    /// directory under the system temp dir. `cluster.sh` configures `double` redundancy and
    /// three coordinators from three processes up.
    pub fn start(
        script: &ClusterScript,
        processes: usize,
        engine: &str,
    ) -> Result<RealCluster, String> {
        Self::start_version(script, processes, engine, None)
    }

    /// [`RealCluster::start`] with the fdbserver of `version` (`cluster.sh`'s
    /// `FDB_VERSION`; `None`: the script's default, 7.3.77).
    pub fn start_version(
        script: &ClusterScript,
        processes: usize,
        engine: &str,
        version: Option<&str>,
    ) -> Result<RealCluster, String> {
        let dir = std::env::temp_dir().join(format!(
            "fdb-faults-{}-{:x}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos()
        ));
        // The guard exists before the script runs: a start that fails half-way is cleaned up.
        let cluster = RealCluster {
            script: script.path.clone(),
            dir,
        };
        let n = processes.to_string();
        let mut cmd = Command::new(&cluster.script);
        cmd.arg("start").arg(&cluster.dir).arg(&n).arg(engine);
        if let Some(v) = version {
            cmd.env("FDB_VERSION", v);
        }
        let out = run_bounded(&mut cmd, Duration::from_secs(180))?;
        if !out.ok {
            return Err(format!(
                "cluster.sh start failed:\n{}{}",
                out.stdout, out.stderr
            ));
        }
        Ok(cluster)
    }

    /// Moves the whole cluster to `version` as an operator upgrades it (`cluster.sh upgrade`:
    /// every process killed at once and started again on its port and data with that
    /// version's fdbserver), returning once the database is available again, with the
    /// ports whose new process had to be started again.
    ///
    /// Like the `fdbmonitor` an operator runs, this restarts a new process that exits: a
    /// killed fdbserver can hold its data directory's lock or its port a moment longer on a
    /// loaded machine, and its successor then dies at once ("Unable to lock the file",
    /// "Local address in use"), which `cluster.sh` alone would wait on for minutes.
    pub fn upgrade(&self, version: &str, limit: Duration) -> Result<Vec<u16>, String> {
        let before = self.procs();
        let mut restarted: Vec<(u16, Instant)> = Vec::new();
        let mut supervise = || {
            let now = self.procs();
            // Until every port has its new process, `cluster.sh` is still writing `procs`.
            let started = now.len() >= before.len()
                && now.iter().all(|p| before.iter().all(|b| b.pid != p.pid));
            if !started {
                return;
            }
            for p in now {
                let recent = restarted
                    .iter()
                    .any(|(port, at)| *port == p.port && at.elapsed() < Duration::from_secs(1));
                if !recent && !pid_alive(p.pid) {
                    let _ = self.restart(p.port);
                    restarted.push((p.port, Instant::now()));
                }
            }
        };
        let out = run_supervised(
            Command::new(&self.script)
                .arg("upgrade")
                .arg(&self.dir)
                .arg(version),
            limit,
            &mut supervise,
        );
        let ports: Vec<u16> = restarted.iter().map(|r| r.0).collect();
        let restarts = format!("\nrestarted after exiting: {ports:?}");
        match out {
            Ok(out) if out.ok => Ok(ports),
            Ok(out) => Err(format!(
                "cluster.sh upgrade failed:\n{}{}{restarts}{}",
                out.stdout,
                out.stderr,
                self.diagnosis()
            )),
            Err(e) => Err(format!("{e}{restarts}{}", self.diagnosis())),
        }
    }

    /// Each process's state, the end of its stdout (where fdbserver reports a fatal start)
    /// and its last logged errors: what a failed upgrade or restart needs to be understood.
    pub fn diagnosis(&self) -> String {
        let mut s = String::new();
        for p in self.procs() {
            let stdout = std::fs::read_to_string(
                self.dir
                    .join("logs")
                    .join(p.port.to_string())
                    .join("stdout"),
            )
            .unwrap_or_default();
            let tail: Vec<&str> = stdout.lines().rev().take(5).collect();
            s += &format!(
                "\nport {} pid {} state {:?}; stdout ends {:?}",
                p.port,
                p.pid,
                self.state(p.port),
                tail.into_iter().rev().collect::<Vec<_>>()
            );
            for e in self.server_errors(p.port, 3) {
                s += &format!("\n  {e}");
            }
        }
        s
    }

    /// A one-process `memory` cluster whose fdbserver runs with these `--knob_NAME=VALUE`
    /// arguments (`cluster.sh` passes none): the script unpacks the binaries (`env`) and
    /// stops the process (it is listed in `procs`, as the script lists its own).
    pub fn start_with_knobs(script: &ClusterScript, knobs: &[&str]) -> Result<RealCluster, String> {
        let dir = std::env::temp_dir().join(format!(
            "fdb-knobs-{}-{:x}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos()
        ));
        let cluster = RealCluster {
            script: script.path.clone(),
            dir,
        };
        let dir = &cluster.dir;
        let out = run_bounded(
            Command::new(&cluster.script).arg("env").arg(dir),
            Duration::from_secs(180),
        )?;
        if !out.ok {
            return Err(format!("cluster.sh env failed: {}", out.stderr));
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port: {e}"))?
            .port();
        let id = format!("{:x}", std::process::id() as u64 * 7919 + u64::from(port));
        std::fs::write(
            cluster.cluster_file(),
            format!("knobs:{id}@127.0.0.1:{port}\n"),
        )
        .map_err(|e| format!("cluster file: {e}"))?;
        let (data, logs) = (
            dir.join("data").join(port.to_string()),
            dir.join("logs").join(port.to_string()),
        );
        for d in [&data, &logs] {
            std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
        }
        let stdout = std::fs::File::create(logs.join("stdout")).map_err(|e| e.to_string())?;
        let child = Command::new(dir.join("bin/fdbserver"))
            .arg("-p")
            .arg(format!("127.0.0.1:{port}"))
            .arg("-C")
            .arg(cluster.cluster_file())
            .arg("-d")
            .arg(&data)
            .arg("-L")
            .arg(&logs)
            .arg("--listen-address")
            .arg("public")
            .args(knobs.iter().map(|k| format!("--knob_{k}")))
            .stdin(Stdio::null())
            .stdout(stdout.try_clone().map_err(|e| e.to_string())?)
            .stderr(stdout)
            .spawn()
            .map_err(|e| format!("fdbserver: {e}"))?;
        std::fs::write(dir.join("procs"), format!("{} {port}\n", child.id()))
            .map_err(|e| format!("procs: {e}"))?;
        let cli = cluster.cli();
        let mut configured = false;
        for _ in 0..12 {
            if cli
                .exec("configure new single memory", Duration::from_secs(10))
                .is_ok()
            {
                configured = true;
                break;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        if !configured {
            return Err("configure new single memory never succeeded".into());
        }
        for _ in 0..60 {
            let status = cli.exec("status minimal", Duration::from_secs(10));
            if status.is_ok_and(|s| s.contains("The database is available")) {
                return Ok(cluster);
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        Err("the database is not available after 60 s".into())
    }

    /// The directory holding the cluster (`bin/`, `data/`, `logs/`, `fdb.cluster`, `procs`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The servers' cluster file (fdbserver rewrites it when the coordinators change).
    pub fn cluster_file(&self) -> PathBuf {
        self.dir.join("fdb.cluster")
    }

    /// The servers' connection string, as their cluster file holds it now.
    pub fn connection_string(&self) -> Result<String, String> {
        std::fs::read_to_string(self.cluster_file())
            .map(|s| s.trim().to_string())
            .map_err(|e| format!("read {}: {e}", self.cluster_file().display()))
    }

    /// Every process started (or restarted) in this cluster, in start order.
    pub fn procs(&self) -> Vec<Proc> {
        let text = std::fs::read_to_string(self.dir.join("procs")).unwrap_or_default();
        text.lines()
            .filter_map(|l| {
                let mut it = l.split_whitespace();
                Some(Proc {
                    pid: it.next()?.parse().ok()?,
                    port: it.next()?.parse().ok()?,
                })
            })
            .collect()
    }

    /// Every port, in start order.
    pub fn ports(&self) -> Vec<u16> {
        self.procs().iter().map(|p| p.port).collect()
    }

    /// The current process of `port`.
    pub fn pid(&self, port: u16) -> Option<u32> {
        self.procs().iter().find(|p| p.port == port).map(|p| p.pid)
    }

    /// Sends `sig` to the process listening on `port`.
    pub fn signal(&self, port: u16, sig: Signal) -> Result<(), String> {
        let pid = self
            .pid(port)
            .ok_or_else(|| format!("no process for port {port}"))?;
        let out = run_bounded(
            Command::new("kill").arg(sig.flag()).arg(pid.to_string()),
            Duration::from_secs(10),
        )?;
        if out.ok {
            Ok(())
        } else {
            Err(format!("kill {} {pid}: {}", sig.flag(), out.stderr.trim()))
        }
    }

    /// The process of `port`'s state letter from `/proc` (`R`, `S`, `T` stopped, `Z`), or
    /// `None` when it is gone.
    pub fn state(&self, port: u16) -> Option<char> {
        process_state(self.pid(port)?)
    }

    /// Whether the process of `port` exists and is not a zombie.
    pub fn is_alive(&self, port: u16) -> bool {
        self.pid(port).is_some_and(pid_alive)
    }

    /// Starts the process for `port` again (same data directory, same locality), once the
    /// previous one is gone: a successor started while a killed process still holds the
    /// data directory's lock or the port exits at once.
    pub fn restart(&self, port: u16) -> Result<(), String> {
        let gone_by = Instant::now() + Duration::from_secs(10);
        while self.is_alive(port) && Instant::now() < gone_by {
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = run_bounded(
            Command::new(&self.script)
                .arg("restart")
                .arg(&self.dir)
                .arg(port.to_string()),
            Duration::from_secs(30),
        )?;
        if out.ok {
            Ok(())
        } else {
            Err(format!("cluster.sh restart {port}: {}", out.stderr.trim()))
        }
    }

    /// `fdbcli --exec cmd` on the servers' cluster file (see [`FdbCli::exec`]).
    pub fn fdbcli(&self, cmd: &str, timeout: Duration) -> Result<String, String> {
        self.cli().exec(cmd, timeout)
    }

    /// An fdbcli handle that can go to another thread.
    pub fn cli(&self) -> FdbCli {
        FdbCli {
            bin: self.dir.join("bin/fdbcli"),
            cluster_file: self.cluster_file(),
        }
    }

    /// `status json`, parsed.
    pub fn status(&self) -> Result<Status, String> {
        let text = self.fdbcli("status json", Duration::from_secs(10))?;
        let json: Value =
            serde_json::from_str(&text).map_err(|e| format!("status json does not parse: {e}"))?;
        Ok(Status { json })
    }

    /// Polls `status json` until `pred` holds, at most `limit`; the last status read (or the
    /// last error) when it never held.
    pub fn wait_status(
        &self,
        limit: Duration,
        mut pred: impl FnMut(&Status) -> bool,
    ) -> Result<Status, String> {
        let start = Instant::now();
        loop {
            let st = self.status();
            if let Ok(s) = &st {
                if pred(s) {
                    return st;
                }
            }
            if start.elapsed() >= limit {
                return Err(match st {
                    Ok(s) => format!(
                        "condition not met within {limit:?}; last status: {}",
                        s.summary()
                    ),
                    Err(e) => format!("condition not met within {limit:?}; last error: {e}"),
                });
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Moves the coordinators to the processes on `ports` (`coordinators ADDR...`).
    pub fn change_coordinators(&self, ports: &[u16]) -> Result<String, String> {
        let addrs: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        self.fdbcli(
            &format!("coordinators {}", addrs.join(" ")),
            Duration::from_secs(30),
        )
    }

    /// Excludes the process on `port` (`exclude FORCE ADDR`: fdbcli's free-space check needs
    /// parts of status that a recovering cluster leaves out), waiting up to `limit` until its
    /// data has moved away; `Ok` only when fdbcli says it is safe to remove.
    pub fn exclude(&self, port: u16, limit: Duration) -> Result<String, String> {
        let out = self.fdbcli(&format!("exclude FORCE 127.0.0.1:{port}"), limit)?;
        if out.contains("Successfully excluded") {
            Ok(out)
        } else {
            Err(format!("exclude {port} did not complete: {}", out.trim()))
        }
    }

    /// Includes the process on `port` again.
    pub fn include(&self, port: u16) -> Result<String, String> {
        self.fdbcli(
            &format!("include 127.0.0.1:{port}"),
            Duration::from_secs(30),
        )
    }

    /// Sets the process class of the process on `port` (`setclass ADDR CLASS`, e.g.
    /// `storage`: the cluster controller then moves its other roles away). Kept in the
    /// database, so it survives restarts.
    pub fn set_class(&self, port: u16, class: &str) -> Result<String, String> {
        self.fdbcli(
            &format!("setclass 127.0.0.1:{port} {class}"),
            Duration::from_secs(30),
        )
    }

    /// The last `lines` lines of a process's trace logs mentioning `Severity="40"` (errors),
    /// for failure messages.
    pub fn server_errors(&self, port: u16, lines: usize) -> Vec<String> {
        let dir = self.dir.join("logs").join(port.to_string());
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if let Ok(text) = std::fs::read_to_string(e.path()) {
                out.extend(
                    text.lines()
                        .filter(|l| l.contains("Severity=\"40\""))
                        .map(String::from),
                );
            }
        }
        let skip = out.len().saturating_sub(lines);
        out.split_off(skip)
    }

    /// Stops every process and removes the data (`cluster.sh stop`), then the directory.
    pub fn stop(&self) {
        let _ = run_bounded(
            Command::new(&self.script).arg("stop").arg(&self.dir),
            Duration::from_secs(60),
        );
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for RealCluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// FDB's own command-line client on a cluster's file.
#[derive(Clone, Debug)]
pub struct FdbCli {
    bin: PathBuf,
    cluster_file: PathBuf,
}

/// One commit attempt of [`FdbCli::reference_commits`].
#[derive(Clone, Copy, Debug)]
pub struct ReferenceCommit {
    pub started: Instant,
    pub ended: Instant,
    pub committed: bool,
}

impl FdbCli {
    /// `fdbcli --exec cmd`; fdbcli's own timeout is `timeout`, and the process is killed if
    /// it outlives it by 20 s.
    pub fn exec(&self, cmd: &str, timeout: Duration) -> Result<String, String> {
        let out = run_bounded(
            Command::new(&self.bin)
                .arg("-C")
                .arg(&self.cluster_file)
                .arg("--no-status")
                .arg("--timeout")
                .arg(timeout.as_secs().max(1).to_string())
                .arg("--exec")
                .arg(cmd),
            timeout + Duration::from_secs(20),
        )?;
        if out.ok {
            Ok(out.stdout)
        } else {
            Err(format!(
                "fdbcli --exec {cmd:?}: {}{}",
                out.stdout.trim(),
                out.stderr.trim()
            ))
        }
    }

    /// Commits `key` through fdbcli (libfdb_c's own client code) over and over until `stop`,
    /// each attempt a fresh fdbcli with a 5 s timeout: when FDB's own client could commit,
    /// as a reference for the availability the client under test saw.
    pub fn reference_commits(&self, key: &str, stop: &AtomicBool) -> Vec<ReferenceCommit> {
        let mut out = Vec::new();
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            n += 1;
            let started = Instant::now();
            let r = self.exec(
                &format!("writemode on; set {key} {n}"),
                Duration::from_secs(5),
            );
            out.push(ReferenceCommit {
                started,
                ended: Instant::now(),
                committed: r.is_ok_and(|o| o.contains("Committed")),
            });
            std::thread::sleep(Duration::from_millis(200));
        }
        out
    }
}

/// `status json` of a real cluster, with accessors for what fault tests look at.
#[derive(Clone, Debug)]
pub struct Status {
    pub json: Value,
}

/// One process in `status json` (`cluster.processes.*`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessStatus {
    pub address: String,
    pub port: u16,
    /// Role names (`storage`, `log`, `master`, `cluster_controller`, `commit_proxy`,
    /// `grv_proxy`, `resolver`, `coordinator`, ...), deduplicated, in status order.
    pub roles: Vec<String>,
    pub excluded: bool,
}

impl ProcessStatus {
    pub fn has(&self, role: &str) -> bool {
        self.roles.iter().any(|r| r == role)
    }
}

impl Status {
    fn cluster(&self) -> &Value {
        &self.json["cluster"]
    }

    /// `cluster.database_available`.
    pub fn available(&self) -> bool {
        self.cluster()["database_available"].as_bool() == Some(true)
    }

    /// `cluster.recovery_state.name` (`fully_recovered` when done).
    pub fn recovery_state(&self) -> &str {
        self.cluster()["recovery_state"]["name"]
            .as_str()
            .unwrap_or("")
    }

    /// `cluster.generation`: grows with every recovery.
    pub fn generation(&self) -> Option<u64> {
        self.cluster()["generation"].as_u64()
    }

    /// `cluster.data.state.name` (`healthy` once data is fully replicated).
    pub fn data_state(&self) -> &str {
        self.cluster()["data"]["state"]["name"]
            .as_str()
            .unwrap_or("")
    }

    /// Every process the cluster controller knows, sorted by port.
    pub fn processes(&self) -> Vec<ProcessStatus> {
        let mut v: Vec<ProcessStatus> = self.cluster()["processes"]
            .as_object()
            .into_iter()
            .flat_map(|m| m.values())
            .filter_map(|p| {
                let address = p["address"].as_str()?.to_string();
                let port = port_of(&address)?;
                let mut roles: Vec<String> = Vec::new();
                for r in p["roles"].as_array().into_iter().flatten() {
                    if let Some(name) = r["role"].as_str() {
                        if !roles.iter().any(|x| x == name) {
                            roles.push(name.to_string());
                        }
                    }
                }
                Some(ProcessStatus {
                    address,
                    port,
                    roles,
                    excluded: p["excluded"].as_bool() == Some(true),
                })
            })
            .collect();
        v.sort_by_key(|p| p.port);
        v
    }

    /// The ports of the processes holding `role`.
    pub fn holders(&self, role: &str) -> Vec<u16> {
        self.processes()
            .iter()
            .filter(|p| p.has(role))
            .map(|p| p.port)
            .collect()
    }

    /// The ports of the coordinators (`client.coordinators.coordinators`).
    pub fn coordinators(&self) -> Vec<u16> {
        let mut v: Vec<u16> = self.json["client"]["coordinators"]["coordinators"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| port_of(c["address"].as_str()?))
            .collect();
        v.sort_unstable();
        v
    }

    /// Available, recovered, and every one of `ports` reporting.
    pub fn is_settled(&self, ports: &[u16]) -> bool {
        let present = self.processes();
        self.available()
            && self.recovery_state() == "fully_recovered"
            && ports.iter().all(|p| present.iter().any(|s| s.port == *p))
    }

    /// One line for messages: availability, recovery, data state, roles by port.
    pub fn summary(&self) -> String {
        let procs: Vec<String> = self
            .processes()
            .iter()
            .map(|p| {
                format!(
                    "{}{}[{}]",
                    p.port,
                    if p.excluded { "(excluded)" } else { "" },
                    p.roles.join(",")
                )
            })
            .collect();
        format!(
            "available={} recovery={} generation={:?} data={} processes: {}",
            self.available(),
            self.recovery_state(),
            self.generation(),
            self.data_state(),
            procs.join(" ")
        )
    }
}

fn port_of(address: &str) -> Option<u16> {
    // "127.0.0.1:4500" or "127.0.0.1:4500:tls".
    address.split(':').nth(1)?.parse().ok()
}

/// A process's state letter from `/proc/PID/stat` (the field after the parenthesised name).
pub fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Whether `pid` exists and is not a zombie.
fn pid_alive(pid: u32) -> bool {
    matches!(process_state(pid), Some(s) if s != 'Z' && s != 'X')
}

struct Output {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// Runs `cmd` with its output captured, killing it after `limit`.
fn run_bounded(cmd: &mut Command, limit: Duration) -> Result<Output, String> {
    run_supervised(cmd, limit, &mut || {})
}

/// [`run_bounded`], calling `tick` about every 20 ms while the command runs.
fn run_supervised(
    cmd: &mut Command,
    limit: Duration,
    tick: &mut dyn FnMut(),
) -> Result<Output, String> {
    let what = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{what}: {e}"))?;
    // Readers on threads: a full pipe must not block the child while we wait for it.
    let mut so = child.stdout.take().expect("piped");
    let mut se = child.stderr.take().expect("piped");
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = so.read_to_string(&mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = se.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if start.elapsed() < limit => {
                tick();
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{what}: still running after {limit:?}; killed"));
            }
            Err(e) => return Err(format!("{what}: {e}")),
        }
    };
    Ok(Output {
        ok: status.success(),
        stdout: out_t.join().unwrap_or_default(),
        stderr: err_t.join().unwrap_or_default(),
    })
}
