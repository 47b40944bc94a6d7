//! The libfdb_c side: one persistent Python process running `tests/differential/runner.py`
//! over the official binding (`foundationdb==7.3.77`, which loads `libfdb_c.so` from the
//! library path), so hundreds of programs pay for one interpreter start.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{json, Value};

use super::outcome::RunResult;
use super::program::{hex, Program};

/// The runner script, beside the test crate.
pub fn runner_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("differential/runner.py")
}

/// A running libfdb_c runner.
pub struct LibFdb {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// What the runner reported when it started (its API version).
    pub hello: Value,
}

impl LibFdb {
    /// Starts the runner (`$FDB_DIFF_PYTHON`, else `python3`) and waits for it to load the
    /// binding and open the cluster. `Err` says why it could not.
    pub fn start() -> Result<LibFdb, String> {
        let python = std::env::var("FDB_DIFF_PYTHON").unwrap_or_else(|_| "python3".into());
        let mut child = Command::new(&python)
            .arg(runner_path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {python}: {e}"))?;
        let stdin = child.stdin.take().expect("piped stdin");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut line = String::new();
        let n = stdout.read_line(&mut line).unwrap_or(0);
        let hello: Option<Value> = serde_json::from_str(&line).ok();
        match hello {
            Some(h) if n > 0 && h["ready"] == json!(true) => {
                // From here on its stderr is only libfdb_c's chatter: let it drain.
                if let Some(mut err) = child.stderr.take() {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut err, &mut std::io::sink());
                    });
                }
                Ok(LibFdb {
                    child,
                    stdin,
                    stdout,
                    hello: h,
                })
            }
            _ => {
                let _ = child.kill();
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    use std::io::Read;
                    let _ = e.read_to_string(&mut err);
                }
                let _ = child.wait();
                Err(format!(
                    "the Python binding could not be loaded ({python} {}): {}{}",
                    runner_path().display(),
                    line.trim(),
                    err.trim()
                ))
            }
        }
    }

    /// Sends a program to run under `prefix`; [`LibFdb::receive`] takes its result, so the
    /// caller can run the other clients meanwhile.
    pub fn send(&mut self, prefix: &[u8], p: &Program) -> Result<(), String> {
        let req = json!({"prefix": hex(prefix), "program": p.to_json()});
        writeln!(self.stdin, "{req}")
            .and_then(|_| self.stdin.flush())
            .map_err(|e| format!("the libfdb_c runner went away: {e}"))
    }

    pub fn receive(&mut self) -> Result<RunResult, String> {
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(0) | Err(_) => Err("the libfdb_c runner exited".into()),
            Ok(_) => {
                let v: Value = serde_json::from_str(&line)
                    .map_err(|e| format!("bad runner output {line:?}: {e}"))?;
                RunResult::from_runner(&v)
            }
        }
    }
}

impl Drop for LibFdb {
    fn drop(&mut self) {
        // Closing stdin ends the runner's loop; kill it if it lingers.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
