//! Trace files, as libfdb_c writes them with `TraceEnable`: named and formatted as FDB's,
//! holding the options set, `ClientStart`, `ConnectToDatabase`, the client's own events and
//! `ClientStopNetwork`, while the program's own `tracing` subscriber keeps getting the
//! client's events. Where the Python binding is installed, libfdb_c writes its own file with
//! the same options and the two are held against each other. (Its own process: the network
//! is set up once per process.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use fdb_compat::api::FdbApiBuilder;
use fdb_compat::options::{NetworkOption, TransactionOption};
use fdb_compat::Database;
use futures::executor::block_on;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// The program's own subscriber: counts the client's "connection failed" events.
struct Counting(Arc<AtomicUsize>);

impl Subscriber for Counting {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        m.is_event()
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        struct Message(bool);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                if f.name() == "message" && format!("{v:?}") == "connection failed" {
                    self.0 = true;
                }
            }
        }
        let mut m = Message(false);
        event.record(&mut m);
        if m.0 {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

fn code<T>(r: Result<T, fdb_compat::FdbError>) -> i32 {
    r.err().map_or(0, |e| e.code())
}

/// The one trace file in `dir`, and its text.
fn the_file(dir: &std::path::Path) -> (String, String) {
    let names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("trace."))
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    let text = std::fs::read_to_string(dir.join(&names[0])).unwrap();
    (names[0].clone(), text)
}

/// The value of `name` in an XML event line.
fn attr<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let at = line.find(&format!(" {name}=\""))? + name.len() + 3;
    Some(&line[at..at + line[at..].find('"')?])
}

/// Set in a child process: the directory its trace options name.
const CHILD: &str = "FDB_COMPAT_TRACE_CHILD";

/// The other settings, from the environment as libfdb_c reads them, in a process of its own:
/// the file opens at set-up (`TRACE_INITIALIZE_ON_SETUP`, before any database tells the local
/// address), is named after `TRACE_FILE_IDENTIFIER`, written as JSON, and carries the
/// partial suffix until the network stops.
#[test]
fn trace_file_opened_at_set_up() {
    if let Ok(dir) = std::env::var(CHILD) {
        // SAFETY: nothing unsafe.
        let network = unsafe { FdbApiBuilder::default().build().unwrap().boot() }.unwrap();
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        println!("at set-up: {} {names:?}", std::process::id());
        let gone = std::path::Path::new(&dir).join("gone.cluster");
        std::fs::write(&gone, "gone:gone@127.0.0.1:1\n").unwrap();
        drop(Database::new(Some(gone.to_str().unwrap())).unwrap());
        drop(network);
        return;
    }
    let dir = std::env::temp_dir().join(format!("fdb-compat-trace-setup-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "trace_file_opened_at_set_up",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, &dir)
        .env("FDB_NETWORK_OPTION_TRACE_ENABLE", &dir)
        .env("FDB_NETWORK_OPTION_TRACE_INITIALIZE_ON_SETUP", "")
        .env("FDB_NETWORK_OPTION_TRACE_FORMAT", "json")
        .env("FDB_NETWORK_OPTION_TRACE_FILE_IDENTIFIER", "app_1")
        .env("FDB_NETWORK_OPTION_TRACE_PARTIAL_FILE_SUFFIX", ".part")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let (pid, at_setup) = stdout
        .lines()
        .find_map(|l| l.split_once("at set-up: ")?.1.split_once(' '))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        at_setup.contains("trace.0.0.0.0.app_1.") && at_setup.contains(".0.1.json.part\""),
        "{at_setup}"
    );
    let (name, text) = the_file(&dir);
    assert!(name.starts_with("trace.0.0.0.0.app_1."), "{name}");
    assert!(name.ends_with(".0.1.json"), "{name}");
    let kinds: Vec<&str> = text
        .lines()
        .map(|l| {
            assert!(
                l.starts_with("{  \"Severity\": \"10\", ") && l.ends_with(" }"),
                "{l}"
            );
            let at = l.find("\"Type\": \"").unwrap() + 9;
            &l[at..at + l[at..].find('"').unwrap()]
        })
        // The client's own events (its connections failing) come and go with timing.
        .filter(|k| *k != "ConnectionFailed")
        .collect();
    assert_eq!(
        kinds,
        [
            "SetNetworkOption",
            "SetNetworkOption",
            "SetNetworkOption",
            "SetNetworkOption",
            "SetNetworkOption",
            "ClientStart",
            "ConnectToDatabase",
            "ClientStopNetwork"
        ],
        "{text}"
    );
    // Known from the database on, the machine is the address it reaches the cluster from.
    let machine = format!("\"Machine\": \"127.0.0.1:{pid}\"");
    assert!(text.lines().last().unwrap().contains(&machine), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn trace_files_as_libfdb_c_writes_them() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let failed = Arc::new(AtomicUsize::new(0));
    tracing::subscriber::set_global_default(Counting(failed.clone())).unwrap();
    let cluster = fdb_tests::cluster::TestCluster::start();
    let dir = std::env::temp_dir().join(format!("fdb-compat-trace-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let traces = dir.join("traces");
    std::fs::create_dir_all(&traces).unwrap();
    let path = cluster.write_cluster_file(&dir);
    let path = path.to_str().unwrap().to_string();

    let builder = FdbApiBuilder::default()
        .build()
        .unwrap()
        .set_option(NetworkOption::TraceEnable(traces.to_str().unwrap().into()))
        .unwrap()
        .set_option(NetworkOption::TraceLogGroup("compat_test".into()))
        .unwrap()
        .set_option(NetworkOption::TraceFormat("XML".into()))
        .unwrap()
        .set_option(NetworkOption::TraceClockSource("realtime".into()))
        .unwrap();
    // SAFETY: nothing unsafe.
    let network = unsafe { builder.boot() }.unwrap();

    let db = Database::new(Some(&path)).unwrap();
    block_on(db.run(|tx, _| async move {
        tx.set(b"trace", b"files");
        Ok(())
    }))
    .unwrap();

    // A cluster that refuses every connection: the client's "connection failed" events go
    // to the trace file and to the program's subscriber.
    let gone = dir.join("gone.cluster");
    std::fs::write(&gone, "gone:gone@127.0.0.1:1\n").unwrap();
    let gone_db = Database::new(Some(gone.to_str().unwrap())).unwrap();
    let tx = gone_db.create_trx().unwrap();
    tx.set_option(TransactionOption::Timeout(300)).unwrap();
    assert_eq!(code(block_on(tx.get(b"k", false))), 1031);
    let deadline = Instant::now() + Duration::from_secs(10);
    while failed.load(Ordering::Relaxed) == 0 {
        assert!(Instant::now() < deadline, "no connection failed event");
        thread::sleep(Duration::from_millis(20));
    }
    drop((tx, gone_db, db));
    drop(network);

    let (name, text) = the_file(&traces);
    // trace.<ip>.<pid>.<unix time>.<6 random>.0.1.xml
    let pid = std::process::id().to_string();
    let parts: Vec<&str> = name.split('.').collect();
    assert_eq!(parts.len(), 11, "{name}");
    assert_eq!(&parts[1..5], ["127", "0", "0", "1"], "{name}");
    assert_eq!(parts[5], pid, "{name}");
    assert!(
        parts[6].parse::<u64>().is_ok() && parts[7].len() == 6,
        "{name}"
    );
    assert_eq!(&parts[8..], ["0", "1", "xml"], "{name}");

    assert!(
        text.starts_with("<?xml version=\"1.0\"?>\r\n<Trace>\r\n"),
        "{text}"
    );
    assert!(text.ends_with("</Trace>\r\n"), "{text}");
    let events: Vec<&str> = text.lines().filter(|l| l.starts_with("<Event ")).collect();
    let of = |kind: &str| -> Vec<&str> {
        events
            .iter()
            .copied()
            .filter(|l| attr(l, "Type") == Some(kind))
            .collect()
    };
    for e in &events {
        assert_eq!(attr(e, "LogGroup"), Some("compat_test"), "{e}");
        assert_eq!(
            attr(e, "Machine"),
            Some(&*format!("127.0.0.1:{pid}")),
            "{e}"
        );
        assert!(
            attr(e, "Time").is_some() && attr(e, "DateTime").is_some(),
            "{e}"
        );
        assert!(attr(e, "ClientDescription").is_some_and(|d| d.starts_with("primary-")));
    }
    let options: Vec<&str> = of("SetNetworkOption")
        .iter()
        .filter_map(|e| attr(e, "Option"))
        .collect();
    assert_eq!(
        options,
        [
            "TRACE_ENABLE",
            "TRACE_LOG_GROUP",
            "TRACE_FORMAT",
            "TRACE_CLOCK_SOURCE"
        ]
    );
    let start = of("ClientStart");
    assert_eq!(start.len(), 1);
    assert_eq!(attr(start[0], "ApiVersion"), Some("730"));
    let connects = of("ConnectToDatabase");
    assert_eq!(connects.len(), 2);
    assert_eq!(
        attr(connects[1], "ConnectionString"),
        Some("gone:gone@127.0.0.1:1")
    );
    assert!(attr(connects[0], "ClusterFile").is_some_and(|f| f.starts_with("file:///")));
    let failures = of("ConnectionFailed");
    assert!(!failures.is_empty(), "{text}");
    assert_eq!(attr(failures[0], "Severity"), Some("10"));
    assert_eq!(
        attr(failures[0], "Addr"),
        Some("127.0.0.1:1"),
        "{}",
        failures[0]
    );
    assert_eq!(
        events.last().and_then(|l| attr(l, "Type")),
        Some("ClientStopNetwork")
    );
    same_as_libfdb_c(&dir, &name, &text, gone.to_str().unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}

/// libfdb_c, through the Python binding, with the same trace options and a database on the
/// same unreachable cluster: its file's name has the same parts, its header and footer are
/// the same, and each event both write carries the same fields in the same order (but
/// `ImageOffset`, where libfdb_c is loaded in memory, and its `TrackLatestType`).
fn same_as_libfdb_c(dir: &std::path::Path, ours: &str, text: &str, cluster_file: &str) {
    const SCRIPT: &str = r#"
import os, sys
import fdb
fdb.api_version(730)
fdb.options.set_trace_enable(sys.argv[1])
fdb.options.set_trace_log_group("compat_test")
db = fdb.open(sys.argv[2])
print(os.getpid())
"#;
    let traces = dir.join("libfdb_c");
    std::fs::create_dir_all(&traces).unwrap();
    let Some(out) = fdb_tests::python::libfdb_c_answers(
        "trace_files",
        SCRIPT,
        [traces.to_str().unwrap(), cluster_file],
    ) else {
        return;
    };
    let (name, reference) = the_file(&traces);
    let pid = out.trim();
    let theirs: Vec<&str> = name.split('.').collect();
    let ours: Vec<&str> = ours.split('.').collect();
    assert_eq!(theirs.len(), ours.len(), "{name}");
    assert_eq!(theirs[..5], ours[..5], "{name}");
    assert_eq!(theirs[5], pid, "{name}");
    assert_eq!(theirs[7].len(), ours[7].len(), "{name}");
    assert_eq!(theirs[8..], ours[8..], "{name}");
    let head = |t: &str| t.lines().take(2).collect::<Vec<_>>().join("\n");
    assert_eq!(head(&reference), head(text));
    assert!(reference.ends_with("</Trace>\r\n"));
    let fields = |line: &str| -> Vec<String> {
        line.split("\" ")
            .filter_map(|f| {
                f.rsplit_once("=\"")
                    .map(|(name, _)| name.trim().to_string())
            })
            .map(|n| n.trim_start_matches("<Event ").to_string())
            .filter(|n| n != "ImageOffset" && n != "TrackLatestType")
            .collect()
    };
    let first = |t: &str, kind: &str| -> Option<Vec<String>> {
        t.lines()
            .find(|l| attr(l, "Type") == Some(kind))
            .map(fields)
    };
    for kind in [
        "SetNetworkOption",
        "ClientStart",
        "ConnectToDatabase",
        "ClientStopNetwork",
    ] {
        let theirs = first(&reference, kind).unwrap_or_else(|| panic!("libfdb_c wrote no {kind}"));
        assert_eq!(first(text, kind), Some(theirs), "{kind}");
    }
}
