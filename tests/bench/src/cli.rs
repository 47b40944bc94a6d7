//! Command-line options.

use std::path::PathBuf;
use std::time::Duration;

use crate::arms;
use crate::workload::Workload;

pub const USAGE: &str = "\
fdb-bench: closed-loop benchmark of this FoundationDB client

usage: fdb-bench [options]

  --cluster-file F    benchmark the cluster in F (default: start the in-process test
                      cluster in a child process)
  --arms LIST         rust-tokio,rust-mio,floor[,libfdb_c] (default: all this build has)
                      and rust-mio-threads (one thread and loop per worker)
  --workloads LIST    grv,get100,get1000,range100,set100,batchset50,batchset50x1000
                      (default: all), and the sizes rangeN (N <= 10000 rows) and
                      batchsetN (N <= 1000 sets)
  --workers LIST      concurrent closed-loop workers per run (default: 1,8,32,64)
  --warmup N          warmup transactions per run, over all workers (default: 200)
  --transactions N    measured transactions per run (default: 2000)
  --min-run-ms MS     a run goes on past --transactions until its window lasted this
                      long, so a burst of the server's own work can't dominate a fast
                      cell (default: 200; 0: exactly --transactions)
  --blocks K          counterbalanced blocks; each runs every arm twice, ABBA (default: 5)
  --out DIR           where results.json, results.md and ratios.svg go
                      (default: target/fdb-bench)
  --seed S            seed for clients, key choice and the bootstrap (default: 1)
  --tokio-threads N   worker threads of the tokio runtime (default: available cores)
  --resamples N       bootstrap resamples per ratio (default: 10000)
  --run-timeout SECS  abort the whole benchmark if one run takes longer (default: 300)
  --quiet             no progress bar
  -h, --help          this text
";

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub cluster_file: Option<PathBuf>,
    pub arms: Vec<String>,
    pub workloads: Vec<Workload>,
    pub workers: Vec<usize>,
    pub warmup: u64,
    pub transactions: u64,
    pub min_run: Duration,
    pub blocks: usize,
    pub out: PathBuf,
    pub seed: u64,
    pub tokio_threads: usize,
    pub resamples: usize,
    pub run_timeout: Duration,
    pub quiet: bool,
}

impl Default for Config {
    fn default() -> Config {
        let mut arms = vec![
            arms::RUST_TOKIO.to_string(),
            arms::RUST_MIO.to_string(),
            arms::FLOOR.to_string(),
        ];
        if arms::HAVE_LIBFDB_C {
            arms.push(arms::LIBFDB_C.to_string());
        }
        Config {
            cluster_file: None,
            arms,
            workloads: Workload::ALL.to_vec(),
            workers: vec![1, 8, 32, 64],
            warmup: 200,
            transactions: 2000,
            min_run: Duration::from_millis(200),
            blocks: 5,
            out: PathBuf::from("target/fdb-bench"),
            seed: 1,
            tokio_threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            resamples: 10_000,
            run_timeout: Duration::from_secs(300),
            quiet: false,
        }
    }
}

pub enum Command {
    Run(Box<Config>),
    Help,
}

fn list(v: &str) -> Vec<&str> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

fn number<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("{flag}: not a number: {v:?}"))
}

pub fn parse(args: &[String]) -> Result<Command, String> {
    let mut c = Config::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (a.as_str(), None),
        };
        if matches!(flag, "-h" | "--help") {
            return Ok(Command::Help);
        }
        if flag == "--quiet" {
            c.quiet = true;
            continue;
        }
        let value = match inline {
            Some(v) => v,
            None => it
                .next()
                .cloned()
                .ok_or_else(|| format!("{flag} needs a value"))?,
        };
        match flag {
            "--cluster-file" => c.cluster_file = Some(PathBuf::from(value)),
            "--arms" => {
                let arms: Vec<String> = list(&value).into_iter().map(String::from).collect();
                for a in &arms {
                    if !arms::ALL.contains(&a.as_str()) {
                        return Err(format!(
                            "--arms: unknown arm {a:?} (known: {})",
                            arms::ALL.join(", ")
                        ));
                    }
                }
                c.arms = dedup(arms);
            }
            "--workloads" => {
                let mut ws = Vec::new();
                for w in list(&value) {
                    ws.push(Workload::parse(w).ok_or_else(|| {
                        format!(
                            "--workloads: unknown workload {w:?} (known: {})",
                            Workload::ALL.map(|w| w.name()).join(", ")
                        )
                    })?);
                }
                c.workloads = dedup(ws);
            }
            "--workers" => {
                let mut ws = Vec::new();
                for w in list(&value) {
                    let n: usize = number("--workers", w)?;
                    if n == 0 || n > 1024 {
                        return Err(format!("--workers: {n} is out of range 1..=1024"));
                    }
                    ws.push(n);
                }
                c.workers = dedup(ws);
            }
            "--warmup" => c.warmup = number(flag, &value)?,
            "--transactions" => c.transactions = number(flag, &value)?,
            "--min-run-ms" => c.min_run = Duration::from_millis(number(flag, &value)?),
            "--blocks" => c.blocks = number(flag, &value)?,
            "--out" => c.out = PathBuf::from(value),
            "--seed" => c.seed = number(flag, &value)?,
            "--tokio-threads" => c.tokio_threads = number(flag, &value)?,
            "--resamples" => c.resamples = number(flag, &value)?,
            "--run-timeout" => c.run_timeout = Duration::from_secs(number(flag, &value)?),
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    if c.arms.is_empty() || c.workloads.is_empty() || c.workers.is_empty() {
        return Err("--arms, --workloads and --workers must not be empty".into());
    }
    if c.transactions == 0 || c.blocks == 0 || c.tokio_threads == 0 {
        return Err("--transactions, --blocks and --tokio-threads must be at least 1".into());
    }
    Ok(Command::Run(Box::new(c)))
}

fn dedup<T: PartialEq>(v: Vec<T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for x in v {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Config, String> {
        let v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        match parse(&v)? {
            Command::Run(c) => Ok(*c),
            Command::Help => Err("help".into()),
        }
    }

    #[test]
    fn defaults() {
        let c = run(&[]).unwrap();
        assert_eq!(c.workers, vec![1, 8, 32, 64]);
        assert_eq!(c.workloads.len(), 7);
        assert!(c.arms.contains(&"floor".to_string()));
        assert_eq!(c.min_run, Duration::from_millis(200));
    }

    #[test]
    fn options() {
        let c = run(&[
            "--arms",
            "floor,rust-tokio",
            "--workloads=grv,set100",
            "--workers",
            "1,2,2",
            "--transactions",
            "10",
            "--min-run-ms",
            "0",
            "--cluster-file",
            "/tmp/x.cluster",
            "--quiet",
        ])
        .unwrap();
        assert_eq!(c.arms, vec!["floor", "rust-tokio"]);
        assert_eq!(c.workloads, vec![Workload::Grv, Workload::Set100]);
        assert_eq!(c.workers, vec![1, 2]);
        assert_eq!(c.transactions, 10);
        assert_eq!(c.min_run, Duration::ZERO);
        assert!(c.quiet);
        assert_eq!(c.cluster_file, Some(PathBuf::from("/tmp/x.cluster")));
    }

    #[test]
    fn errors() {
        assert!(run(&["--arms", "java"]).is_err());
        assert!(run(&["--workloads", "scan"]).is_err());
        assert!(run(&["--workers", "0"]).is_err());
        assert!(run(&["--warmup"]).is_err());
        assert!(run(&["--bogus", "1"]).is_err());
        assert_eq!(run(&["--help"]).unwrap_err(), "help");
    }
}
