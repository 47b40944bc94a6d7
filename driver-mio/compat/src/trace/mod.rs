//! Trace files, as libfdb_c writes them when a program sets the `TraceEnable` network option
//! (or `FDB_NETWORK_OPTION_TRACE_ENABLE`): FDB's event format and file names, so that what
//! reads, ships or rotates libfdb_c's client trace files reads these too.
//!
//! What is written: `SetNetworkOption` for each network option, `ClientStart` when the first
//! database opens the file, `ConnectToDatabase` for each database, `ClientStopNetwork`, and
//! the client's own `tracing` events at info level and above from the databases' loop
//! threads, where the core and the driver run (see [`bridge`]). libfdb_c's periodic
//! metrics events (`ProcessMetrics`, `NetworkMetrics`, ...) and its code-coverage events
//! are its own process's and are not written.

mod bridge;
mod file;
mod format;

use std::hash::{Hash, Hasher};
use std::net::{IpAddr, Ipv4Addr, ToSocketAddrs, UdpSocket};
use std::sync::Mutex;
use std::time::SystemTime;

use fdb_api::ClusterFile;
use fdb_protocol::cluster_file::Coordinator;
use fdb_protocol::error::ErrorCode;

pub(crate) use self::bridge::install_on_this_thread;
use self::file::{Naming, TraceFiles};
use self::format::Format;
use crate::error::{FdbError, FdbResult};
use crate::options::NetworkOption;

/// libfdb_c's `TRACE_DEFAULT_ROLL_SIZE` and `TRACE_DEFAULT_MAX_LOGS_SIZE`.
const DEFAULT_ROLL_SIZE: u64 = 10 << 20;
const DEFAULT_MAX_LOGS_SIZE: u64 = 10 * DEFAULT_ROLL_SIZE;
/// The client knob `TRACE_LOG_FILE_IDENTIFIER_MAX_LENGTH`.
const IDENTIFIER_MAX_LENGTH: usize = 50;
/// Events kept while no file is open yet (libfdb_c keeps them too, and writes them when it
/// opens the file); beyond this many they are dropped.
const EARLY_EVENTS: usize = 1000;

/// FDB's event severities.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Severity {
    Info = 10,
    WarnAlways = 30,
    Error = 40,
}

/// An event before its time stamps and the fields every event carries.
struct Event {
    at: SystemTime,
    severity: Severity,
    kind: String,
    id: String,
    details: Vec<(String, String)>,
    thread: u64,
}

/// The trace options and, once it is open, the file.
struct Log {
    /// `TraceEnable`'s directory: tracing is on once this is set.
    directory: Option<String>,
    roll_size: u64,
    max_logs_size: u64,
    log_group: Option<String>,
    format: Format,
    identifier: String,
    partial_suffix: String,
    initialize_on_setup: bool,
    files: Option<TraceFiles>,
    /// `ip:pid` once a database told the local address.
    machine: Option<String>,
    /// `primary-<version>-<random>`, as libfdb_c describes a client.
    description: Option<String>,
    early: Vec<Event>,
    /// An open failed: the events are dropped rather than kept without bound.
    failed: bool,
    /// A write failed (said once on stderr, not at every event).
    write_failed: bool,
    client_started: bool,
    /// The knob `min_trace_severity`: events below it are not written.
    min_severity: i32,
}

static LOG: Mutex<Log> = Mutex::new(Log::new());

impl Log {
    /// No tracing yet, libfdb_c's defaults.
    const fn new() -> Log {
        Log {
            directory: None,
            roll_size: DEFAULT_ROLL_SIZE,
            max_logs_size: DEFAULT_MAX_LOGS_SIZE,
            log_group: None,
            format: Format::Xml,
            identifier: String::new(),
            partial_suffix: String::new(),
            initialize_on_setup: false,
            files: None,
            machine: None,
            description: None,
            early: Vec::new(),
            failed: false,
            write_failed: false,
            client_started: false,
            min_severity: Severity::Info as i32,
        }
    }
}

fn log() -> std::sync::MutexGuard<'static, Log> {
    LOG.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether `TraceEnable` was set: the loop threads then bridge their events here.
pub(crate) fn enabled() -> bool {
    log().directory.is_some()
}

/// Takes a trace option: `None` when `option` is none, else whether its value is good, by
/// libfdb_c's rules (`invalid_option_value` otherwise). Like libfdb_c, options set after the
/// file opened change nothing but the log group.
pub(crate) fn set_option(option: &NetworkOption) -> Option<FdbResult<()>> {
    use NetworkOption as N;
    let invalid = || Err(FdbError::of(ErrorCode::INVALID_OPTION_VALUE));
    let size = |v: i32| u64::try_from(v).map_err(|_| FdbError::of(ErrorCode::INVALID_OPTION_VALUE));
    let mut log = log();
    Some(match option {
        N::TraceEnable(dir) => {
            log.directory = Some(dir.clone());
            Ok(())
        }
        N::TraceRollSize(v) => size(*v).map(|v| log.roll_size = v),
        N::TraceMaxLogsSize(v) => size(*v).map(|v| log.max_logs_size = v),
        N::TraceLogGroup(g) => {
            log.log_group = Some(g.clone());
            Ok(())
        }
        N::TraceFormat(f) => match Format::parse(f) {
            Some(f) => {
                log.format = f;
                Ok(())
            }
            None => invalid(),
        },
        // This client's clock is the system's: `now` and `realtime` read the same here.
        N::TraceClockSource(c) => match c.to_ascii_lowercase().as_str() {
            "now" | "realtime" => Ok(()),
            _ => invalid(),
        },
        N::TraceFileIdentifier(id) => {
            let good = id.len() <= IDENTIFIER_MAX_LENGTH
                && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if good {
                log.identifier = id.clone();
                Ok(())
            } else {
                invalid()
            }
        }
        N::TracePartialFileSuffix(s) => {
            log.partial_suffix = s.clone();
            Ok(())
        }
        N::TraceInitializeOnSetup => {
            log.initialize_on_setup = true;
            Ok(())
        }
        // One network here, so one file whatever the client threads.
        N::TraceShareAmongClientThreads => Ok(()),
        _ => return None,
    })
}

/// Records a network option that was set (libfdb_c's `SetNetworkOption` event).
pub(crate) fn option_set(option: &NetworkOption) {
    let details = vec![("Option".to_string(), option.name().to_string())];
    log().push(Event::new(
        Severity::Info,
        "SetNetworkOption",
        None,
        details,
    ));
}

/// The network was set up: with `TraceInitializeOnSetup` the file opens now, before any
/// database tells the local address.
pub(crate) fn network_set_up() {
    let mut log = log();
    if log.initialize_on_setup {
        log.open(None);
    }
}

/// A database was opened: opens the file if it is not yet (named after the address this
/// client reaches the cluster from), then `ClientStart` once and `ConnectToDatabase`.
pub(crate) fn database_opened(cluster_file: &str, cluster: &ClusterFile, api_version: i32) {
    if !enabled() {
        return;
    }
    let ip = local_ip(cluster);
    let library = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let version = env!("CARGO_PKG_VERSION");
    let mut log = log();
    log.open(Some(ip));
    if !log.client_started {
        log.client_started = true;
        let actual = unix_secs();
        let details = [
            ("SourceVersion", String::new()),
            ("Version", version.to_string()),
            ("PackageName", env!("CARGO_PKG_NAME").to_string()),
            ("ActualTime", actual.to_string()),
            ("ApiVersion", api_version.to_string()),
            ("ClientLibrary", library.clone()),
            ("Primary", "1".to_string()),
        ];
        log.push(Event::new(
            Severity::Info,
            "ClientStart",
            None,
            own(details),
        ));
    }
    let path = std::fs::canonicalize(cluster_file)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| cluster_file.to_string());
    let details = [
        ("Version", version.to_string()),
        ("ClusterFile", format!("file://{path}")),
        ("ConnectionString", cluster.to_string()),
        ("ClientLibrary", library),
        ("Primary", "1".to_string()),
        ("Internal", "0".to_string()),
    ];
    let id = format!("{:016x}", random_u64());
    log.push(Event::new(
        Severity::Info,
        "ConnectToDatabase",
        Some(id),
        own(details),
    ));
}

/// The network stopped: `ClientStopNetwork`, then the file is closed (its footer written,
/// its partial suffix taken off).
pub(crate) fn network_stopped() {
    let mut log = log();
    if log.files.is_some() {
        log.push(Event::new(
            Severity::Info,
            "ClientStopNetwork",
            None,
            Vec::new(),
        ));
    }
    if let Some(files) = log.files.take() {
        files.close();
    }
}

/// The knob `min_trace_severity`: events below `severity` are no longer written.
pub(crate) fn set_min_severity(severity: i32) {
    log().min_severity = severity;
}

/// One of the client's own events.
pub(crate) fn client_event(severity: Severity, kind: String, details: Vec<(String, String)>) {
    log().push(Event::new(severity, &kind, None, details));
}

fn own<const N: usize>(details: [(&str, String); N]) -> Vec<(String, String)> {
    details
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

impl Event {
    fn new(
        severity: Severity,
        kind: &str,
        id: Option<String>,
        details: Vec<(String, String)>,
    ) -> Event {
        Event {
            at: SystemTime::now(),
            severity,
            kind: kind.to_string(),
            id: id.unwrap_or_else(|| "0000000000000000".to_string()),
            details,
            thread: thread_id(),
        }
    }
}

impl Log {
    /// Writes `event`, or keeps it until the file opens; one below `min_trace_severity` is
    /// dropped, as libfdb_c drops it.
    fn push(&mut self, event: Event) {
        if (event.severity as i32) < self.min_severity {
            return;
        }
        if self.files.is_some() {
            self.write(&event);
        } else if !self.failed && self.early.len() < EARLY_EVENTS {
            self.early.push(event);
        }
    }

    /// Opens the file if tracing is on and it is not open; `ip` names the machine (the
    /// first database's: libfdb_c names it once).
    fn open(&mut self, ip: Option<IpAddr>) {
        let pid = std::process::id();
        if let (Some(ip), None) = (ip, &self.machine) {
            self.machine = Some(match ip {
                IpAddr::V4(a) => format!("{a}:{pid}"),
                IpAddr::V6(a) => format!("[{a}]:{pid}"),
            });
        }
        let Some(dir) = self.directory.clone() else {
            return;
        };
        if self.files.is_some() || self.failed {
            return;
        }
        let place = match ip {
            Some(ip) => ip.to_string().replace(':', "_"),
            None => "0.0.0.0".to_string(),
        };
        let process = if !self.identifier.is_empty() {
            format!("trace.{place}.{}", self.identifier)
        } else {
            format!("trace.{place}.{pid}")
        };
        let stamp = unix_secs();
        let naming = Naming {
            dir: &dir,
            process,
            stamp,
            random: random_alphanumeric(6),
            format: self.format,
            suffix: &self.partial_suffix,
            roll_size: self.roll_size,
            max_logs_size: self.max_logs_size,
        };
        match TraceFiles::open(naming) {
            Ok(files) => {
                self.files = Some(files);
                self.description = Some(format!(
                    "primary-{}-{}",
                    env!("CARGO_PKG_VERSION"),
                    random_u64()
                ));
                for event in std::mem::take(&mut self.early) {
                    self.write(&event);
                }
            }
            Err(e) => {
                eprintln!("fdb-compat: cannot open a trace file in `{dir}`: {e}");
                self.failed = true;
                self.early = Vec::new();
            }
        }
    }

    fn write(&mut self, e: &Event) {
        let (time, date) = format::stamps(e.at);
        let severity = (e.severity as u8).to_string();
        let thread = e.thread.to_string();
        let mut fields: Vec<(&str, &str)> = vec![
            ("Severity", &severity),
            ("Time", &time),
            ("DateTime", &date),
            ("Type", &e.kind),
            ("ID", &e.id),
        ];
        fields.extend(e.details.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        fields.push(("ThreadID", &thread));
        if let Some(m) = &self.machine {
            fields.push(("Machine", m));
        }
        fields.push(("LogGroup", self.log_group.as_deref().unwrap_or("default")));
        if let Some(d) = &self.description {
            fields.push(("ClientDescription", d));
        }
        let line = self.format.event(&fields);
        if let Some(files) = &mut self.files {
            match files.write(&line) {
                Err(err) if !self.write_failed => {
                    eprintln!("fdb-compat: cannot write the trace file: {err}");
                    self.write_failed = true;
                }
                Err(_) => {}
                Ok(()) => self.write_failed = false,
            }
        }
    }
}

/// The address this client reaches the cluster from (libfdb_c's `determineLocalSourceIP`):
/// a UDP socket connected to a coordinator, which sends nothing, tells the route's source.
fn local_ip(cluster: &ClusterFile) -> IpAddr {
    for c in &cluster.coordinators {
        let target = match c {
            Coordinator::Address(a) => Some(std::net::SocketAddr::new(a.ip, a.port)),
            Coordinator::Hostname { host, port, .. } => (host.as_str(), *port)
                .to_socket_addrs()
                .ok()
                .and_then(|mut a| a.next()),
        };
        let Some(target) = target else { continue };
        let any: std::net::SocketAddr = if target.is_ipv4() {
            (Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let ip = UdpSocket::bind(any)
            .and_then(|s| s.connect(target).map(|()| s))
            .and_then(|s| s.local_addr());
        if let Ok(a) = ip {
            return a.ip();
        }
    }
    IpAddr::V4(Ipv4Addr::UNSPECIFIED)
}

/// A number for the calling thread (libfdb_c writes its own thread ids, as numbers).
fn thread_id() -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    std::thread::current().id().hash(&mut h);
    h.finish()
}

/// Seconds since 1970: the file name's stamp and `ClientStart`'s `ActualTime`.
fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Names and descriptions need to differ between runs, not to be secret: the API's own
/// entropy serves.
fn random_u64() -> u64 {
    fdb_api::driver::entropy_seed()
}

fn random_alphanumeric(n: usize) -> String {
    const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut r = random_u64();
    (0..n)
        .map(|_| {
            let c = CHARS[(r % CHARS.len() as u64) as usize] as char;
            r /= CHARS.len() as u64;
            c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_libfdb_c_refuses_are_refused() {
        // None of these changes the process's trace settings: each is refused first.
        let bad = [
            NetworkOption::TraceFormat("yaml".into()),
            NetworkOption::TraceFileIdentifier("no spaces".into()),
            NetworkOption::TraceFileIdentifier("x".repeat(IDENTIFIER_MAX_LENGTH + 1)),
            NetworkOption::TraceClockSource("sundial".into()),
            NetworkOption::TraceRollSize(-1),
            NetworkOption::TraceMaxLogsSize(-1),
        ];
        for option in bad {
            let r = set_option(&option).expect("a trace option");
            assert_eq!(r.err().map(|e| e.code()), Some(2006), "{option:?}");
        }
        assert!(set_option(&NetworkOption::Knob("a=b".into())).is_none());
        assert!(!enabled());
    }

    /// `min_trace_severity=30`: an info event is dropped, a warning kept.
    #[test]
    fn events_below_the_knobs_severity_are_dropped() {
        let mut log = Log::new();
        log.push(Event::new(Severity::Info, "Kept", None, Vec::new()));
        log.min_severity = 30;
        log.push(Event::new(Severity::Info, "Dropped", None, Vec::new()));
        log.push(Event::new(Severity::WarnAlways, "Warned", None, Vec::new()));
        let kinds: Vec<&str> = log.early.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(kinds, ["Kept", "Warned"]);
    }

    #[test]
    fn random_names_are_alphanumeric() {
        let r = random_alphanumeric(6);
        assert_eq!(r.len(), 6);
        assert!(r.bytes().all(|b| b.is_ascii_alphanumeric()), "{r}");
    }
}
