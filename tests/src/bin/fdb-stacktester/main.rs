//! `fdb-stacktester`: this client's tester for FoundationDB's bindingtester
//! (`bindings/bindingtester/spec/bindingApiTester.md` and `directoryLayerTester.md`), the
//! stack machine every official binding implements, so that `bindingtester.py` can run the
//! same random program through it and through the Python binding and compare the results.
//!
//! ```text
//! fdb-stacktester [--driver tokio|mio] PREFIX API_VERSION [CLUSTER_FILE]
//! ```
//!
//! Both drivers run the same machine (it is written once over `fdb_api`'s `Driver`): with
//! `mio`, every tester thread (`START_THREAD`) is an OS thread turning the shared loop; with
//! `tokio`, a task on a multi-threaded runtime.

mod directory;
mod machine;
mod stack;
mod value;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use fdb_api::driver::Driver;
use fdb_api::Database;
use fdb_driver_mio::MioDriver;
use fdb_driver_tokio::TokioDriver;

use machine::{spawn_machine, Machine, Run, Shared, Spawner};
use value::Fatal;

/// The longest a tester may run; the bindingtester's own timeout is 10 minutes.
const RUN_LIMIT: Duration = Duration::from_secs(3600);

struct Args {
    driver: String,
    prefix: Vec<u8>,
    cluster_file: Option<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1).peekable();
    let mut driver = "mio".to_string();
    if args.peek().map(String::as_str) == Some("--driver") {
        args.next();
        driver = args.next().ok_or("--driver needs tokio or mio")?;
    } else if let Some(d) = args.peek().and_then(|a| a.strip_prefix("--driver=")) {
        driver = d.to_string();
        args.next();
    }
    if driver != "mio" && driver != "tokio" {
        return Err(format!("unknown driver {driver} (tokio or mio)"));
    }
    let prefix = args.next().ok_or("missing PREFIX")?.into_bytes();
    let version: u32 = args
        .next()
        .ok_or("missing API_VERSION")?
        .parse()
        .map_err(|_| "API_VERSION is a number")?;
    if !(1..=730).contains(&version) {
        return Err(format!(
            "API version {version} is not supported (at most 730)"
        ));
    }
    let cluster_file = args.next().map(PathBuf::from);
    if let Some(extra) = args.next() {
        return Err(format!("unexpected argument {extra}"));
    }
    Ok(Args {
        driver,
        prefix,
        cluster_file,
    })
}

fn open<D: Driver>(args: &Args) -> Result<Database<D>, Fatal> {
    Database::open(args.cluster_file.as_deref())
        .map_err(|e| Fatal(format!("opening the database: {e}")))
}

fn run_mio(args: &Args) -> Result<(), Fatal> {
    let db = open::<MioDriver>(args)?;
    let driver = db.driver().clone();
    let spawn_driver = driver.clone();
    let spawner: Spawner = Arc::new(move |run: Run| -> Run {
        let (tx, rx) = futures_channel::oneshot::channel();
        let driver = spawn_driver.clone();
        std::thread::spawn(move || {
            let result = driver
                .block_on(run, RUN_LIMIT)
                .unwrap_or_else(|e| Err(Fatal(format!("thread: {e}"))));
            let _ = tx.send(result);
        });
        Box::pin(async move {
            rx.await
                .unwrap_or_else(|_| Err(Fatal("a tester thread panicked".into())))
        })
    });
    let shared = Shared::new(db, spawner);
    let main = Machine::new(shared, args.prefix.clone());
    driver
        .block_on(main.run(), RUN_LIMIT)
        .map_err(|e| Fatal(format!("main machine: {e}")))?
}

fn run_tokio(args: &Args) -> Result<(), Fatal> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Fatal(format!("tokio runtime: {e}")))?;
    rt.block_on(async {
        let db = open::<TokioDriver>(args)?;
        let spawner: Spawner = Arc::new(|run: Run| -> Run {
            let handle = tokio::spawn(run);
            Box::pin(async move {
                handle
                    .await
                    .unwrap_or_else(|e| Err(Fatal(format!("tester task: {e}"))))
            })
        });
        let shared = Shared::new(db, spawner);
        let main = Machine::new(shared, args.prefix.clone());
        spawn_machine(main).await
    })
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("fdb-stacktester: {e}");
            eprintln!(
                "usage: fdb-stacktester [--driver tokio|mio] PREFIX API_VERSION [CLUSTER_FILE]"
            );
            return ExitCode::from(2);
        }
    };
    let result = if args.driver == "tokio" {
        run_tokio(&args)
    } else {
        run_mio(&args)
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fdb-stacktester: {e}");
            ExitCode::FAILURE
        }
    }
}
