//! Running a script through the official Python binding (`foundationdb==7.3.77`, over
//! libfdb_c), the reference the libfdb_c comparisons of the tests read their answers from.

use std::ffi::OsStr;
use std::process::Command;

/// Runs `python3 -c script args...` and returns what it printed. Without the binding (or
/// libfdb_c on the library path) it prints a notice naming `tag` and returns `None`, unless
/// `FDB_SHARED_DIR` is set (CI), where the reference is required and its absence fails.
pub fn libfdb_c_answers<I, S>(tag: &str, script: &str, args: I) -> Option<String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .output();
    match out {
        Ok(o) if o.status.success() => Some(String::from_utf8_lossy(&o.stdout).into_owned()),
        other => {
            let why = match other {
                Ok(o) => String::from_utf8_lossy(&o.stderr).into_owned(),
                Err(e) => e.to_string(),
            };
            assert!(
                std::env::var_os("FDB_SHARED_DIR").is_none(),
                "{tag}: the Python binding over libfdb_c is required here: {why}"
            );
            println!("{tag}: no Python binding over libfdb_c ({why}); skipped");
            None
        }
    }
}
